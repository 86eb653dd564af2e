// Row-major GEMM through cuBLASLt: C[b] = A[b] (MxK) @ B[b] (KxN) [+ bias[N]] [-> ReLU | GELU],
// the Library kernel of the plan (DESIGN.md section 3). Header free of CUDA includes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "backend/cuda/cuda_runtime.hpp"

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
};

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
  std::size_t cached_plans() const { return plans_.size(); }

 private:
  struct Plan;
  using Key = std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  Plan& plan_for(GemmPrecision p, GemmEpilogue e, const GemmShape& shape, const std::string& what);

  void* handle_ = nullptr;  // cublasLtHandle_t
  DeviceBuffer workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace brrr::cuda
