#include "backend/cuda/cublaslt_gemm.hpp"

#include <cublasLt.h>

#include "brrr/error.hpp"

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

}  // namespace

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

LtGemm::Plan& LtGemm::plan_for(GemmPrecision p, GemmEpilogue e, const GemmShape& sh,
                               const std::string& what) {
  Key key{static_cast<int>(p), static_cast<int>(e), sh.m, sh.n, sh.k, sh.batch};
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;

  auto plan = std::make_unique<Plan>();
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
  const std::uint64_t m = sh.n, n = sh.m, k = sh.k;
  BRRR_LT(cublasLtMatrixLayoutCreate(&plan->a, dt, m, k, m), what);  // B^T: N x K, ld N
  BRRR_LT(cublasLtMatrixLayoutCreate(&plan->b, dt, k, n, k), what);  // A^T: K x M, ld K
  BRRR_LT(cublasLtMatrixLayoutCreate(&plan->c, dt, m, n, m), what);  // C^T: N x M, ld N
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
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_),
                                                     plan->op, plan->a, plan->b, plan->c,
                                                     plan->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check_lt(st, "cublasLtMatmulAlgoGetHeuristic", what);
  if (found == 0)
    fail("cuBLASLt has no algorithm for {} GEMM {}x{}x{} (batch {}) with epilogue {} [{}]",
         to_string(p), sh.m, sh.n, sh.k, sh.batch, to_string(e), what);
  plan->algo = result.algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void LtGemm::run(GemmPrecision p, GemmEpilogue e, const GemmShape& sh, DevPtr a, DevPtr b,
                 DevPtr c, DevPtr bias, const Stream& s, const std::string& what) {
  BRRR_CHECK(sh.m > 0 && sh.n > 0 && sh.k > 0 && sh.batch > 0,
             "GEMM {}: bad shape M={} N={} K={} batch={}", what, sh.m, sh.n, sh.k, sh.batch);
  const bool needs_bias = e != GemmEpilogue::kNone;
  BRRR_CHECK(!needs_bias || bias != 0, "GEMM {}: epilogue {} needs a bias pointer", what,
             to_string(e));
  Plan& plan = plan_for(p, e, sh, what);
  if (needs_bias) {
    const void* bp = reinterpret_cast<const void*>(bias);
    BRRR_LT(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp,
                                           sizeof(bp)),
            what);
  }
  const float alpha = 1.0f, beta = 0.0f;
  auto ptr = [](DevPtr x) { return reinterpret_cast<void*>(x); };
  BRRR_LT(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), plan.op, &alpha, ptr(b), plan.a,
                         ptr(a), plan.b, &beta, ptr(c), plan.c, ptr(c), plan.c, &plan.algo,
                         ptr(workspace_.ptr()), workspace_.size(),
                         reinterpret_cast<cudaStream_t>(s.get())),
          what);
}

}  // namespace brrr::cuda
