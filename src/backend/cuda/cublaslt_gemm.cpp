#include "backend/cuda/cublaslt_gemm.hpp"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "brrr/error.hpp"
#include "core/env.hpp"

namespace brrr::cuda {
namespace {

void check_lt(cublasStatus_t st, const char* call, const std::string& where) {
  if (st != CUBLAS_STATUS_SUCCESS)
    fail("cuBLASLt call {} failed: {} ({}) [{}]", call, cublasLtGetStatusName(st),
         cublasLtGetStatusString(st), where);
}
#define BRRR_LT(call, where) check_lt((call), #call, (where))

cudaDataType_t data_type(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kFp32:
    case GemmPrecision::kTf32: return CUDA_R_32F;
    case GemmPrecision::kBf16: return CUDA_R_16BF;
    case GemmPrecision::kFp16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

cublasLtEpilogue_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::kGeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof(TunedAlgo::data), "8 uint64s");

// Heuristic candidates asked for when tuning (cuBLASLt returns fewer when it has fewer).
constexpr int kMaxCandidates = 16;
// Split-K variants are tried on this many of the first heuristic candidates.
constexpr int kSplitKBases = 4;

template <typename T>
T config_attr(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  std::size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS)
    return T{};
  return v;
}

template <typename T>
T cap_attr(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  std::size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&a, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS)
    return T{};
  return v;
}

// The readable line of an algorithm: ids of cuBLASLt's enums (tile: cublasLtMatmulTile_t,
// stages: cublasLtMatmulStages_t, cluster: cublasLtClusterShape_t).
std::string algo_config(const cublasLtMatmulAlgo_t& a) {
  using A = cublasLtMatmulAlgoConfigAttributes_t;
  return fmt::format(
      "id {} tile {} stages {} splitK {} reduction {} swizzle {} custom {} cluster {}",
      config_attr<std::int32_t>(a, CUBLASLT_ALGO_CONFIG_ID),
      config_attr<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID),
      config_attr<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID),
      std::max<std::int32_t>(1, config_attr<std::int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)),
      config_attr<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
      config_attr<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
      config_attr<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
      config_attr<std::uint16_t>(a, A(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)));
}

bool same_algo(const cublasLtMatmulAlgo_t& x, const cublasLtMatmulAlgo_t& y) {
  return std::memcmp(&x, &y, sizeof(x)) == 0;
}

bool stream_capturing(const Stream& s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(s.get()), &st) != cudaSuccess) {
    cudaGetLastError();  // clear it: not knowing means not tuning
    return true;
  }
  return st != cudaStreamCaptureStatusNone;
}

}  // namespace

std::string gemm_tune_key(GemmPrecision p, GemmEpilogue e, const GemmShape& sh) {
  // The layouts are the ones plan_for builds: row-major, contiguous batches.
  return fmt::format("{} epilogue {} m {} n {} k {} batch {} layout rowmajor-contiguous{}{}",
                     to_string(p), to_string(e), sh.m, sh.n, sh.k, sh.batch,
                     sh.ldb || sh.ldc ? fmt::format(" ldb {} ldc {}", sh.ldb, sh.ldc) : "",
                     sh.lda || sh.b_nk || sh.align
                         ? fmt::format(" lda {}{} align {}", sh.lda, sh.b_nk ? " b-nk" : "", sh.align)
                         : "");
}

const char* to_string(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kFp32: return "fp32";
    case GemmPrecision::kTf32: return "tf32";
    case GemmPrecision::kBf16: return "bf16";
    case GemmPrecision::kFp16: return "fp16";
  }
  return "?";
}
const char* to_string(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone: return "none";
    case GemmEpilogue::kBias: return "bias";
    case GemmEpilogue::kReluBias: return "relu+bias";
    case GemmEpilogue::kGeluBias: return "gelu+bias";
  }
  return "?";
}
std::size_t element_bytes(GemmPrecision p) {
  return (p == GemmPrecision::kBf16 || p == GemmPrecision::kFp16) ? 2 : 4;
}

struct LtGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  AlgoSource source = AlgoSource::kHeuristic;
  std::string config;                            // algo_config(algo)
  double chosen_us = 0, heuristic_us = 0;        // tuning's medians (tuned or cached)
  int ncandidates = 0;
  std::int64_t k = 0;                            // the GEMM's K (split-K limits)
  std::vector<cublasLtMatmulAlgo_t> candidates;  // while tuning: [0] is heuristic #0
  ~Plan() {
    if (op) cublasLtMatmulDescDestroy(op);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
  }
};

LtGemm::LtGemm(std::size_t workspace_bytes) : workspace_(workspace_bytes, "cuBLASLt workspace") {
  cublasLtHandle_t h = nullptr;
  BRRR_LT(cublasLtCreate(&h), "create cuBLASLt handle");
  handle_ = h;
}

LtGemm::~LtGemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

LtGemm::Key LtGemm::key_of(GemmPrecision p, GemmEpilogue e, const GemmShape& sh) {
  return Key{static_cast<int>(p), static_cast<int>(e), sh.m, sh.n, sh.k, sh.batch, sh.ldb, sh.ldc,
             sh.lda, sh.b_nk, sh.align};
}

LtGemm::Plan& LtGemm::plan_for(GemmPrecision p, GemmEpilogue e, const GemmShape& sh,
                               const Operands& ops, const Stream& s, const std::string& what) {
  const Key key = key_of(p, e, sh);
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;

  auto plan = std::make_unique<Plan>();
  plan->k = sh.k;
  const cudaDataType_t dt = data_type(p);
  const cublasComputeType_t ct =
      p == GemmPrecision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  BRRR_LT(cublasLtMatmulDescCreate(&plan->op, ct, CUDA_R_32F), what);
  const cublasLtEpilogue_t epi = lt_epilogue(e);
  BRRR_LT(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                         sizeof(epi)),
          what);
  // Row-major C = A @ B is column-major C^T = B^T @ A^T: pass B as the first operand. The
  // bias then runs along cuBLASLt's rows, i.e. along our N: one value per output column.
  // B stored [N, K] is column-major K x N: the first operand transposed.
  const std::uint64_t m = sh.n, n = sh.m, k = sh.k;
  const std::int64_t ldb = sh.ldb ? sh.ldb : sh.b_nk ? sh.k : sh.n, ldc = sh.ldc ? sh.ldc : sh.n,
                     lda = sh.lda ? sh.lda : sh.k;
  BRRR_ASSERT(ldb >= (sh.b_nk ? sh.k : sh.n) && ldc >= sh.n && lda >= sh.k &&
                  (sh.batch == 1 || (!sh.ldb && !sh.ldc && !sh.lda && !sh.b_nk)),
              "GEMM row pitches below their rows, or with batches");
  if (sh.b_nk) {
    const cublasOperation_t t = CUBLAS_OP_T;
    BRRR_LT(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)),
            what);
    BRRR_LT(cublasLtMatrixLayoutCreate(&plan->a, dt, k, m, ldb), what);  // B: K x N, ld ldb
  } else {
    BRRR_LT(cublasLtMatrixLayoutCreate(&plan->a, dt, m, k, ldb), what);  // B^T: N x K, ld ldb
  }
  BRRR_LT(cublasLtMatrixLayoutCreate(&plan->b, dt, k, n, lda), what);  // A^T: K x M, ld lda
  BRRR_LT(cublasLtMatrixLayoutCreate(&plan->c, dt, m, n, ldc), what);  // C^T: N x M, ld ldc
  if (sh.batch > 1) {
    const std::int32_t count = static_cast<std::int32_t>(sh.batch);
    const std::int64_t strides[3] = {sh.k * sh.n, sh.m * sh.k, sh.m * sh.n};
    cublasLtMatrixLayout_t layouts[3] = {plan->a, plan->b, plan->c};
    for (int i = 0; i < 3; ++i) {
      BRRR_LT(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                               &count, sizeof(count)),
              what);
      BRRR_LT(cublasLtMatrixLayoutSetAttribute(
                  layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                  sizeof(strides[i])),
              what);
    }
  }

  cublasLtMatmulPreference_t pref = nullptr;
  BRRR_LT(cublasLtMatmulPreferenceCreate(&pref), what);
  const std::uint64_t ws = workspace_.size();
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  if (sh.align) {
    const std::uint32_t al = std::uint32_t(sh.align);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof(al));
  }
  const bool tune = tune_ && !stream_capturing(s);  // timing cannot run inside a capture
  std::vector<cublasLtMatmulHeuristicResult_t> results(tune ? kMaxCandidates : 1);
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
      static_cast<cublasLtHandle_t>(handle_), plan->op, plan->a, plan->b, plan->c, plan->c, pref,
      int(results.size()), results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check_lt(st, "cublasLtMatmulAlgoGetHeuristic", what);
  if (found == 0)
    fail("cuBLASLt has no algorithm for {} GEMM {}x{}x{} (batch {}) with epilogue {} [{}]",
         to_string(p), sh.m, sh.n, sh.k, sh.batch, to_string(e), what);
  plan->algo = results[0].algo;
  plan->config = algo_config(plan->algo);
  plan->source = tuning_off_ ? AlgoSource::kTuningOff : AlgoSource::kHeuristic;
  if (tune) {
    for (int i = 0; i < found; ++i)
      if (results[size_t(i)].state == CUBLAS_STATUS_SUCCESS && results[size_t(i)].workspaceSize <= ws)
        plan->candidates.push_back(results[size_t(i)].algo);
    if (plan->candidates.empty() || !same_algo(plan->candidates[0], plan->algo))
      plan->candidates.insert(plan->candidates.begin(), plan->algo);
    bind_bias(*plan, ops.bias, what);
    choose_algo(*plan, gemm_tune_key(p, e, sh), ops, s, what);
    plan->candidates.clear();
    plan->candidates.shrink_to_fit();
  }
  return *plans_.emplace(key, std::move(plan)).first->second;
}

namespace {

// Split-K variants of `base` (fp32 partial sums: a 16-bit in-place reduction would round each
// part) that cublasLtMatmulAlgoCheck accepts within the workspace, appended to `out`. At small M
// a heuristic tile leaves most SMs idle (128x768 outputs in 128x128 tiles: 6 CTAs on 132 SMs);
// splitting K multiplies the CTAs.
void add_split_k(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                 cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, std::int64_t k,
                 std::uint64_t ws, const cublasLtMatmulAlgo_t& base,
                 std::vector<cublasLtMatmulAlgo_t>* out) {
  if (!cap_attr<std::int32_t>(base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT)) return;
  const std::uint32_t mask = cap_attr<std::uint32_t>(base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
  if (!(mask & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)) return;
  if (config_attr<std::int32_t>(base, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) > 1) return;
  for (std::int32_t split : {2, 3, 4, 6, 8}) {
    if (k / split < 64) break;  // parts too thin to pay for the reduction
    cublasLtMatmulAlgo_t v = base;
    const std::uint32_t red = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (cublasLtMatmulAlgoConfigSetAttribute(&v, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split,
                                             sizeof(split)) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoConfigSetAttribute(&v, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red,
                                             sizeof(red)) != CUBLAS_STATUS_SUCCESS)
      continue;
    cublasLtMatmulHeuristicResult_t chk{};
    if (cublasLtMatmulAlgoCheck(h, op, a, b, c, c, &v, &chk) != CUBLAS_STATUS_SUCCESS ||
        chk.workspaceSize > ws)
      continue;
    bool dup = false;
    for (const auto& x : *out) dup = dup || same_algo(x, v);
    if (!dup) out->push_back(v);
  }
}

}  // namespace

// The cached choice when it still passes cublasLtMatmulAlgoCheck; else times the candidates and
// keeps the fastest only when it beats heuristic #0 by kTuneMargin (pick_candidate), and stores
// the choice either way so the next session reuses it.
void LtGemm::choose_algo(Plan& plan, const std::string& gemm, const Operands& ops,
                         const Stream& s, const std::string& what) {
  auto h = static_cast<cublasLtHandle_t>(handle_);
  const std::uint64_t ws = workspace_.size();
  if (std::optional<TunedAlgo> hit = tune_->lookup(gemm)) {
    cublasLtMatmulAlgo_t algo{};
    std::memcpy(&algo, hit->data.data(), sizeof(algo));
    cublasLtMatmulHeuristicResult_t chk{};
    if (cublasLtMatmulAlgoCheck(h, plan.op, plan.a, plan.b, plan.c, plan.c, &algo, &chk) ==
            CUBLAS_STATUS_SUCCESS &&
        chk.workspaceSize <= ws) {
      plan.algo = algo;
      plan.config = algo_config(algo);
      plan.source = AlgoSource::kCache;
      plan.chosen_us = hit->chosen_us;
      plan.heuristic_us = hit->heuristic_us;
      plan.ncandidates = hit->candidates;
      return;
    }
    std::fprintf(stderr,
                 "brrr cuda: the cached GEMM algorithm for %s fails cublasLtMatmulAlgoCheck; "
                 "tuning again\n",
                 gemm.c_str());
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int nheur = int(plan.candidates.size());
  for (int i = 0; i < std::min(nheur, kSplitKBases); ++i)
    add_split_k(h, plan.op, plan.a, plan.b, plan.c, plan.k, ws,
                plan.candidates[size_t(i)], &plan.candidates);
  std::vector<double> us = time_algos(plan, ops, s);
  const int best = pick_candidate(us);
  tuning_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!(us[size_t(best)] > 0)) return;  // nothing ran: heuristic #0, not stored
  plan.algo = plan.candidates[size_t(best)];
  plan.config = algo_config(plan.algo);
  plan.source = AlgoSource::kTuned;
  plan.chosen_us = us[size_t(best)];
  plan.heuristic_us = us[0];
  plan.ncandidates = int(us.size());
  TunedAlgo t;
  std::memcpy(t.data.data(), &plan.algo, sizeof(plan.algo));
  t.config = plan.config;
  t.chosen_us = plan.chosen_us;
  t.heuristic_us = plan.heuristic_us;
  t.candidates = plan.ncandidates;
  tune_->store(gemm, t);
  if (env::integer("BRRR_DEBUG") >= 1)
    std::fprintf(stderr, "brrr cuda: tuned GEMM %s [%s]: %s, %.2f us (heuristic #0 %.2f us), %d candidates\n",
                 gemm.c_str(), what.c_str(), plan.config.c_str(), plan.chosen_us, plan.heuristic_us,
                 plan.ncandidates);
}

// Median microseconds per call of each candidate (negative: it failed to run), each call timed
// alone with the L2 cold: a buffer twice the L2 is written before it, as a model's weights come
// from DRAM (BERT-base's 171 MB do not fit the H200's 50 MB L2). Timed back to back on hot
// operands, tiles that leave most SMs idle looked as fast as split-K ones (issue 17: the FFN
// GEMMs at M=128 took 8 us in the model whatever the hot-L2 tuning chose). Every candidate runs
// twice to warm up; then rounds of each candidate in turn, all enqueued before one wait, so a
// clock change or a neighbour's burst lands on every candidate of a round alike.
std::vector<double> LtGemm::time_algos(Plan& plan, const Operands& ops, const Stream& s) {
  const std::size_t n = plan.candidates.size();
  std::vector<bool> ok(n, true);
  auto run_once = [&](std::size_t i) {
    if (ok[i]) ok[i] = matmul(plan, &plan.candidates[i], ops, s) == CUBLAS_STATUS_SUCCESS;
  };
  for (int r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < n; ++i) run_once(i);
  DeviceBuffer flush(flush_bytes_, "GEMM tuning L2 flush");
  constexpr int kRounds = 9;
  std::vector<std::unique_ptr<Event>> ev;
  for (std::size_t i = 0; i < std::size_t(kRounds) * n * 2; ++i) ev.push_back(std::make_unique<Event>());
  for (int r = 0; r < kRounds; ++r)
    for (std::size_t i = 0; i < n; ++i) {
      memset_u32(flush.ptr(), std::uint32_t(r * 7919 + int(i)), flush.size() / 4, s, "L2 flush");
      const std::size_t e = (std::size_t(r) * n + i) * 2;
      ev[e]->record(s);
      run_once(i);
      ev[e + 1]->record(s);
    }
  ev.back()->synchronize();
  std::vector<double> med(n, -1.0);
  for (std::size_t i = 0; i < n; ++i) {
    if (!ok[i]) continue;
    std::vector<double> samples;
    for (int r = 0; r < kRounds; ++r) {
      const std::size_t e = (std::size_t(r) * n + i) * 2;
      samples.push_back(double(Event::elapsed_ms(*ev[e], *ev[e + 1])) * 1e3);
    }
    med[i] = median_of(samples);
  }
  return med;
}

int LtGemm::matmul(const Plan& plan, const void* algo, const Operands& o, const Stream& s) const {
  const float alpha = 1.0f, beta = 0.0f;
  auto ptr = [](DevPtr x) { return reinterpret_cast<void*>(x); };
  return int(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), plan.op, &alpha, ptr(o.b),
                            plan.a, ptr(o.a), plan.b, &beta, ptr(o.c), plan.c, ptr(o.c), plan.c,
                            static_cast<const cublasLtMatmulAlgo_t*>(algo), ptr(workspace_.ptr()),
                            workspace_.size(), reinterpret_cast<cudaStream_t>(s.get())));
}

void LtGemm::bind_bias(Plan& plan, DevPtr bias, const std::string& what) const {
  if (!bias) return;
  const void* bp = reinterpret_cast<const void*>(bias);
  BRRR_LT(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp,
                                         sizeof(bp)),
          what);
}

namespace {
void check_shape(GemmEpilogue e, const GemmShape& sh, DevPtr bias, const std::string& what) {
  BRRR_CHECK(sh.m > 0 && sh.n > 0 && sh.k > 0 && sh.batch > 0,
             "GEMM {}: bad shape M={} N={} K={} batch={}", what, sh.m, sh.n, sh.k, sh.batch);
  BRRR_CHECK(e == GemmEpilogue::kNone || bias != 0, "GEMM {}: epilogue {} needs a bias pointer",
             what, to_string(e));
}
}  // namespace

void LtGemm::prepare(GemmPrecision p, GemmEpilogue e, const GemmShape& sh, DevPtr a, DevPtr b,
                     DevPtr c, DevPtr bias, const Stream& s, const std::string& what) {
  check_shape(e, sh, bias, what);
  plan_for(p, e, sh, {a, b, c, e == GemmEpilogue::kNone ? 0 : bias}, s, what);
}

void LtGemm::run(GemmPrecision p, GemmEpilogue e, const GemmShape& sh, DevPtr a, DevPtr b,
                 DevPtr c, DevPtr bias, const Stream& s, const std::string& what) {
  check_shape(e, sh, bias, what);
  const Operands ops{a, b, c, e == GemmEpilogue::kNone ? 0 : bias};
  Plan& plan = plan_for(p, e, sh, ops, s, what);
  bind_bias(plan, ops.bias, what);
  check_lt(cublasStatus_t(matmul(plan, &plan.algo, ops, s)), "cublasLtMatmul", what);
}

void LtGemm::enable_tuning(const DeviceInfo& dev, const std::string& cache_dir) {
  if (env::integer("BRRR_GEMM_TUNE") == 0) {
    tune_.reset();
    tuning_off_ = true;
    return;
  }
  flush_bytes_ = std::max<std::size_t>(2 * std::size_t(std::max(dev.l2_bytes, 0)), 64u << 20);
  tune_ = std::make_unique<GemmTuneCache>(cache_dir, tune_context(dev));
  tuning_off_ = false;
}

std::string LtGemm::tune_context(const DeviceInfo& dev) const {
  GemmTuneContext c;
  c.gpu = dev.name;
  c.sm_count = dev.sm_count;
  c.cublaslt_version = cublasLtGetVersion();
  c.workspace_bytes = workspace_.size();
  return context_line(c);
}

AlgoSource LtGemm::source(GemmPrecision p, GemmEpilogue e, const GemmShape& sh) const {
  auto it = plans_.find(key_of(p, e, sh));
  return it == plans_.end() ? AlgoSource::kHeuristic : it->second->source;
}

std::string LtGemm::describe(GemmPrecision p, GemmEpilogue e, const GemmShape& sh) const {
  auto it = plans_.find(key_of(p, e, sh));
  if (it == plans_.end()) return "";
  const Plan& pl = *it->second;
  switch (pl.source) {
    case AlgoSource::kHeuristic: return pl.config + " (heuristic #0)";
    case AlgoSource::kTuningOff: return pl.config + " (heuristic #0, BRRR_GEMM_TUNE=0)";
    case AlgoSource::kTuned:
    case AlgoSource::kCache:
      return fmt::format("{} ({}: {:.2f} us vs heuristic #0 {:.2f} us, {} candidates)", pl.config,
                         pl.source == AlgoSource::kTuned ? "tuned" : "tuning cache", pl.chosen_us,
                         pl.heuristic_us, pl.ncandidates);
  }
  return pl.config;
}

}  // namespace brrr::cuda
