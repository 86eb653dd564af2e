// Fused attention on cuDNN's scaled-dot-product-attention engines (the graph API through the
// cudnn-frontend headers): the CUDA executor's attention step (cuda_executor_attention.cpp) runs
// here when cuDNN takes the geometry, else on brrr's flash kernel (device/attention.cuh). The graph
// is built and its plan chosen once at plan build; each run is one execute on the context's
// stream with pointers and a workspace the executor owns, so the plan stays capturable into a CUDA
// graph. Header free of cudnn.h and CUDA includes; without the frontend headers at build time
// (CMake's CUDNN_FRONTEND_INCLUDE_DIR), make() says so and the flash kernel runs.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/cuda/cuda_runtime.hpp"
#include "brrr/dtype.hpp"

namespace brrr::cuda {

class CudnnContext;

// One attention in cuDNN's terms: Q [b, h, sq, d], K and V [b, kv_heads, sk, d], out [b, h, sq, d],
// element strides over those axes; an optional additive bias over (b, h, sq, sk) with stride 0
// where it broadcasts; a causal (lower-triangular, aligned at the top left: sq == sk) mask.
struct SdpaGeometry {
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 0, seq_k = 0, head_dim = 0;
  std::array<int64_t, 4> q{}, k{}, v{}, out{}, bias{};
  bool has_bias = false, causal = false;
  float scale = 1;
  DType dt = DType::bf16;  // bf16 or f16 (Q, K, V, out and the bias); float32 scores and sums
  int sm_version = 0, sm_count = 0;  // the device (90, 132): a plan built in a child needs them
  int device = 0;                     // its ordinal
};

// The geometry as text (every field but the device's), one per distinct cuDNN graph: the
// executor's key for sharing graphs and part of the disk cache's key for child-built plans.
std::string sdpa_geometry_key(const SdpaGeometry& g);

class CudnnSdpa {
 public:
  // The graph for `g`, validated and with a built plan; nullptr with *why when cuDNN (or this
  // build) does not take it. Never throws. With BRRR_CUDNN_RUNTIME_COMPILED=2 the plan is built
  // in a forked child against the device's serialized properties (cuDNN's deviceless build, so
  // engines that compile at run time run NVRTC there, not here) and this process deserializes
  // the compiled plan, cached under `cache_dir` (the session's kernel cache folder); where that
  // fails, the in-process build without such engines.
  static std::unique_ptr<CudnnSdpa> make(const CudnnContext& ctx, const SdpaGeometry& g,
                                         const std::string& cache_dir, std::string* why);
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // Whether this build has the frontend headers (else make() always declines).
  static bool built();

  std::size_t workspace_bytes() const;
  std::string describe() const;  // "cuDNN SDPA bf16, workspace 0 B"
  // Enqueues out = attention(q, k, v [+ bias]) on the context's stream; ws holds
  // workspace_bytes(). Throws brrr::Error on a cuDNN failure.
  void run(DevPtr q, DevPtr k, DevPtr v, DevPtr bias, DevPtr out, DevPtr ws) const;

 private:
  struct Impl;
  explicit CudnnSdpa(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace brrr::cuda
