// Conv on cuDNN's legacy API (the Library kernel of a Conv node, DESIGN.md section 3): float32,
// bfloat16 or float16 NCHW / NCDHW data as the graph holds it, descriptors and the algorithm chosen once at plan
// build, then one cudnnConvolutionForward per run on the executor's stream with a workspace the
// executor owns (no allocation or host sync at run time, so the plan stays capturable into a
// CUDA graph). Header free of cudnn.h and CUDA includes.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_runtime.hpp"
#include "brrr/graph.hpp"
#include "plan/library_desc.hpp"

namespace brrr::cuda {

// One Conv in cuDNN's terms: 4-D (N,C,H,W) or 5-D (N,C,D,H,W) dims, symmetric pads.
struct ConvGeometry {
  std::vector<int> x, w, y;                // input, filter (K, C/groups, ...), output dims
  std::vector<int> pad, stride, dilation;  // per spatial dim
  int groups = 1;
  DType dt = DType::f32;  // x, w and y: float32, bfloat16 or float16 (accumulation is float32)
  bool nhwc = false;      // 2-D only: x and y channels-last (NHWC), w KRSC (cuDNN's NHWC filter)
};

// Maps a Conv (its descriptor, input, weight and output shapes x, w, y: float32, N C spatial...)
// to cuDNN's geometry: "" when it fits (1-D goes in as 2-D with a unit height), else why not
// (rank, group, auto_pad / pads cuDNN's symmetric padding cannot express, int32 overflow). Pure.
std::string conv_geometry(const plan::ConvDesc& d, const Shape& x, const Shape& w, const Shape& y,
                          ConvGeometry* geo);

// The output dims cuDNN derives for `g` (cudnnGetConvolutionNdForwardOutputDim: host-only, needs
// the loaded library but no device). Throws brrr::Error when cuDNN is missing or refuses.
std::vector<int> cudnn_output_dims(const ConvGeometry& g);

// fp32: CUDNN_FMA_MATH (true float32, no TF32). tf32: CUDNN_TENSOR_OP_MATH on float32 data.
// bf16 / fp16: 16-bit data (ConvGeometry::dt) on Tensor Cores, accumulating in float32.
enum class ConvMath { kFp32, kTf32, kBf16, kFp16 };
const char* to_string(ConvMath m);

// A cuDNN handle bound to one stream.
class CudnnContext {
 public:
  // nullptr with *reason when brrr was built without cuDNN headers or libcudnn cannot be loaded.
  static std::unique_ptr<CudnnContext> open(const Stream& s, std::string* reason);
  ~CudnnContext();
  CudnnContext(const CudnnContext&) = delete;
  CudnnContext& operator=(const CudnnContext&) = delete;
  void* handle() const { return h_; }

 private:
  CudnnContext() = default;
  void* h_ = nullptr;  // cudnnHandle_t
};

// True when libcudnn can be loaded (never throws); otherwise *reason says why.
bool cudnn_available(std::string* reason = nullptr);
// The loaded cuDNN's version (major * 10000 + minor * 100 + patch), 0 when there is none.
std::size_t cudnn_version();

class CudnnConv {
 public:
  // Descriptors, output-shape check and the heuristic's algorithm (the first whose workspace is
  // at most max_workspace). Throws brrr::Error naming `what` on any cuDNN failure.
  CudnnConv(const CudnnContext& ctx, const ConvGeometry& g, ConvMath m, std::size_t max_workspace,
            const std::string& what);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // Replaces the heuristic's algorithm with the fastest cuDNN times here that fits (BRRR_CONV_TUNE).
  void time_algorithms(std::size_t max_workspace);
  std::size_t workspace_bytes() const;
  std::string describe() const;  // "IMPLICIT_PRECOMP_GEMM fp32, workspace 0 B"
  // Enqueues y = conv(x, w) on the context's stream; ws holds workspace_bytes() (0: none).
  void run(DevPtr x, DevPtr w, DevPtr y, DevPtr ws) const;
  // The epilogue in cuDNN's own call: y = act(conv(x, w) + sum + bias[channel]) with act ReLU
  // or, on the implicit-precomputed-GEMM algorithm only, none (cudnnConvolutionBiasActivation-
  // Forward). Sets up the descriptors and enqueues it once on the given buffers; true when cuDNN
  // accepted (then run_fused is what runs), false (nothing changed) when it refused.
  bool fuse_epilogue(bool relu, DevPtr x, DevPtr w, DevPtr y, DevPtr ws, DevPtr bias, DevPtr sum);
  bool fused() const;
  void run_fused(DevPtr x, DevPtr w, DevPtr y, DevPtr ws, DevPtr bias, DevPtr sum) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brrr::cuda
