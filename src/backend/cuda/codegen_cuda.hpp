// CUDA C++ emitter for Fused kernels (the second emitter of the kernel IR, DESIGN.md section 3):
// one NVRTC source per model with one __global__ function per fused kernel, plus the small helper
// kernels the CUDA session needs (dtype conversion for GEMM operands, GELU-erf after a GEMM).
#pragma once
#include <string>
#include <vector>

#include "backend/cuda/cuda_runtime.hpp"
#include "plan/kernel_ir.hpp"

namespace brrr::cuda {

struct CudaLaunch {
  std::string symbol;        // "" when the plan kernel is not generated (library, copy, ...)
  Dim3 grid, block;
  std::vector<int> args;     // graph value ids, in parameter order (inputs, then outputs)
  std::string shape;         // "pointwise/vec4", "rows/block256", ... for summaries
};

struct CudaSource {
  std::string text;  // the whole module: one prelude, then every part's code (dumps, tests)
  // The same code as independent sources, each with the prelude: the helper kernels, the
  // attention kernels, the fused kernels a few at a time (and the executor's GEMM chains). The
  // executor compiles them side by side and caches each on its own, so a cold compile takes the
  // longest part rather than their sum, and parts two models share (the helpers, the attention
  // kernels of a type) compile once.
  std::vector<std::string> parts;
  std::vector<CudaLaunch> launches;  // per plan kernel
  // Appends `code`, which needs only the prelude, to text and as a part of its own.
  void add_part(const std::string& code);
};

struct CudaCodegenOptions {
  int sm_count = 132;  // caps grid-stride pointwise grids at a few waves
};

// The attention kernels (device/attention.cuh) an attention kernel of type t and head dim d can
// run on: the type's suffix in their names, and whether its Tensor Core kernels (flash, strided)
// apply. cuda_executor_attention.cpp picks among them; a module instantiates only those.
const char* attention_type_suffix(DType t);
bool attention_on_tensor_cores(DType t, int64_t head_dim);

// Fused kernels compute in float32; buffers are float32, bfloat16 or float16.
CudaSource generate_cuda(const Graph& g, const plan::Plan& p, const CudaCodegenOptions& opts);

// Helper kernels always present in the module, all `(src, dst, n)` or `(buf, n)` with a
// grid-stride loop: brrr_cvt_f32_bf16, brrr_cvt_bf16_f32, brrr_cvt_f32_f16, brrr_cvt_f16_f32,
// brrr_gelu_erf_f32, brrr_gelu_erf_bf16, brrr_gelu_erf_f16; and the Conv epilogue
// brrr_conv_epilogue(y, bias, sum, hw, c, act, alpha, beta, n); the channel scale
// brrr_channel_scale(x, s, y, hw, n) (y = x * s[i / hw]); and the row reduction
// brrr_row_mean(x, y, rows, cols, scale) (y[r] = scale * sum of row r; one warp per row);
// the padded GEMM rows' copy brrr_unpad_rows_16 / _32(src, dst, rows, width, pitch).
std::string helper_kernels_source();

}  // namespace brrr::cuda
