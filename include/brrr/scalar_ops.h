/* Scalar math shared by the reference kernels and both code generators (C++ and CUDA via NVRTC),
   so fused and unfused kernels compute the same function. Plain C-compatible inline functions on
   float; BRRR_SCALAR_FN expands to the right qualifiers for each compiler. */
#ifndef BRRR_SCALAR_OPS_H
#define BRRR_SCALAR_OPS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define BRRR_SCALAR_FN static __device__ __forceinline__
#else
#include <math.h>
#define BRRR_SCALAR_FN static inline
#endif

BRRR_SCALAR_FN float brrr_relu(float x) { return x > 0.0f ? x : 0.0f; }
BRRR_SCALAR_FN float brrr_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
BRRR_SCALAR_FN float brrr_hardsigmoid(float x, float alpha, float beta) {
  float y = alpha * x + beta;
  return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
}
BRRR_SCALAR_FN float brrr_hardswish(float x) { return x * brrr_hardsigmoid(x, 1.0f / 6.0f, 0.5f); }
BRRR_SCALAR_FN float brrr_gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
BRRR_SCALAR_FN float brrr_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

#endif
