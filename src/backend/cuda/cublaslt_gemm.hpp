// Row-major GEMM through cuBLASLt: C[b] = A[b] (MxK) @ B[b] (KxN) [+ bias[N]] [-> ReLU | GELU],
// the Library kernel of the plan (DESIGN.md section 3). Header free of CUDA includes.
// With tuning enabled (the executor does; BRRR_GEMM_TUNE=0 turns it off), each new GEMM's
// algorithm is timed among cuBLASLt's heuristic candidates and split-K variants on its real
// buffers, and the choice is cached on disk (gemm_tune.hpp); otherwise heuristic #0 is used.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_runtime.hpp"
#include "backend/cuda/gemm_tune.hpp"

namespace brrr::cuda {

// Operand/output type and compute mode. fp32: exact fp32 FMA; tf32: fp32 data on Tensor Cores
// (CUBLAS_COMPUTE_32F_FAST_TF32); bf16 / fp16: 16-bit data and output, fp32 accumulate.
enum class GemmPrecision { kFp32, kTf32, kBf16, kFp16 };
// Fused epilogues. cuBLASLt's GELU is the tanh approximation (brrr_gelu_tanh).
enum class GemmEpilogue { kNone, kBias, kReluBias, kGeluBias };

const char* to_string(GemmPrecision p);
const char* to_string(GemmEpilogue e);
std::size_t element_bytes(GemmPrecision p);  // of A, B, C and bias

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;  // contiguous batches: strides M*K, K*N, M*N
  // Row pitches of B and C in elements, 0: n (contiguous rows). One batch only when set.
  std::int64_t ldb = 0, ldc = 0;
  // A's row pitch in elements, 0: k. B stored transposed ([N, K] rows of K; ldb is then their
  // pitch, 0: k). One batch only when either is set.
  std::int64_t lda = 0;
  bool b_nk = false;
  // The alignment in bytes every call's A, B and C pointers keep, 0: cuBLASLt's default (256).
  std::int64_t align = 0;
};

// The GEMM as the tuning cache knows it: precision, epilogue, shape and operand layouts.
std::string gemm_tune_key(GemmPrecision p, GemmEpilogue e, const GemmShape& shape);

// Where a plan's algorithm came from.
enum class AlgoSource { kHeuristic, kTuningOff, kTuned, kCache };

class LtGemm {
 public:
  static constexpr std::size_t kDefaultWorkspace = 32u << 20;
  explicit LtGemm(std::size_t workspace_bytes = kDefaultWorkspace);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Enqueues on `s`. bias is required for the *Bias epilogues (N elements, output type) and
  // ignored otherwise. Descriptors and the heuristic's algorithm are cached per shape; not
  // thread-safe (one LtGemm per stream). `what` names the node in errors.
  void run(GemmPrecision p, GemmEpilogue e, const GemmShape& shape, DevPtr a, DevPtr b, DevPtr c,
           DevPtr bias, const Stream& s, const std::string& what);
  // Plans (and, with tuning, times) the GEMM now on these buffers without running it: C is
  // overwritten by the timing runs. For plan build, so the first run() does no tuning.
  void prepare(GemmPrecision p, GemmEpilogue e, const GemmShape& shape, DevPtr a, DevPtr b,
               DevPtr c, DevPtr bias, const Stream& s, const std::string& what);
  std::size_t cached_plans() const { return plans_.size(); }

  // Tunes GEMMs planned from now on, caching choices in `cache_dir` ("": no disk cache) for
  // `dev`. BRRR_GEMM_TUNE=0 leaves tuning off (heuristic #0) and says so in describe().
  void enable_tuning(const DeviceInfo& dev, const std::string& cache_dir);
  bool tuning() const { return tune_ != nullptr; }
  // What a tuning choice made here holds for: the device, cuBLASLt's version, the workspace and
  // brrr's version (context_line).
  std::string tune_context(const DeviceInfo& dev) const;
  // A planned GEMM's algorithm (tile, stages, split-K) and where it came from; "" if not planned.
  std::string describe(GemmPrecision p, GemmEpilogue e, const GemmShape& shape) const;
  AlgoSource source(GemmPrecision p, GemmEpilogue e, const GemmShape& shape) const;
  // Milliseconds spent timing candidates so far (cache hits cost none).
  double tuning_ms() const { return tuning_ms_; }

 private:
  struct Plan;
  struct Operands {
    DevPtr a, b, c, bias;
  };
  using Key = std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                         std::int64_t, std::int64_t, std::int64_t, bool, std::int64_t>;
  static Key key_of(GemmPrecision p, GemmEpilogue e, const GemmShape& sh);
  Plan& plan_for(GemmPrecision p, GemmEpilogue e, const GemmShape& shape, const Operands& ops,
                 const Stream& s, const std::string& what);
  void choose_algo(Plan& plan, const std::string& gemm, const Operands& ops, const Stream& s,
                   const std::string& what);
  std::vector<double> time_algos(Plan& plan, const Operands& ops, const Stream& s);
  int matmul(const Plan& plan, const void* algo, const Operands& ops, const Stream& s) const;
  void bind_bias(Plan& plan, DevPtr bias, const std::string& what) const;

  void* handle_ = nullptr;  // cublasLtHandle_t
  DeviceBuffer workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  std::unique_ptr<GemmTuneCache> tune_;  // null: no tuning
  bool tuning_off_ = false;              // enable_tuning was called under BRRR_GEMM_TUNE=0
  std::size_t flush_bytes_ = 64u << 20;  // tuning: a buffer twice the L2, written before each call
  double tuning_ms_ = 0;
};

}  // namespace brrr::cuda
