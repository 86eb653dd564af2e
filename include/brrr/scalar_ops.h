/* Scalar math shared by the reference kernels and both code generators (C++ and CUDA via NVRTC),
   so fused and unfused kernels compute the same function. Plain C-compatible inline functions on
   float; BRRR_SCALAR_FN expands to the right qualifiers for each compiler. */
#ifndef BRRR_SCALAR_OPS_H
#define BRRR_SCALAR_OPS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define BRRR_SCALAR_FN static __device__ __forceinline__
/* NVRTC has no math.h; generated expressions use INFINITY and NAN. */
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#else
#include <math.h>
#define BRRR_SCALAR_FN static inline
#endif

/* Relu keeps NaN (as numpy's clip in the ONNX reference does). */
BRRR_SCALAR_FN float brrr_relu(float x) { return x < 0.0f ? 0.0f : x; }
BRRR_SCALAR_FN float brrr_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
BRRR_SCALAR_FN float brrr_hardsigmoid(float x, float alpha, float beta) {
  float y = alpha * x + beta;
  return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
}
BRRR_SCALAR_FN float brrr_hardswish(float x) { return x * brrr_hardsigmoid(x, 1.0f / 6.0f, 0.5f); }
/* cos and sin for |x| <= 1 (the fuser proves the range; see src/plan/value_range.hpp): Taylor
   polynomials in x^2 with no range reduction. The first omitted terms, x^14/14! and x^13/13!, are
   below 2e-10 at |x| = 1, far under float32's rounding. cos adds 1 - x^2/2 with its rounding
   error carried (w + ((1 - w) - x^2/2) is exact), which keeps it within 0.8 ulp; sin is within
   1 ulp and takes x's sign, so sin(-0) = -0. NaN propagates. */
BRRR_SCALAR_FN float brrr_cos_unit(float x) {
  float z = x * x;
  float q = 2.08767570e-9f;            /* 1/12! */
  q = q * z - 2.75573192e-7f;          /* 1/10! */
  q = q * z + 2.48015873e-5f;          /* 1/8! */
  q = q * z - 1.38888889e-3f;          /* 1/6! */
  q = q * z + 4.16666667e-2f;          /* 1/4! */
  float hz = 0.5f * z, w = 1.0f - hz;
  return w + (((1.0f - w) - hz) + (z * z) * q);
}
BRRR_SCALAR_FN float brrr_sin_unit(float x) {
  float z = x * x;
  float p = -2.50521084e-8f;           /* 1/11! */
  p = p * z + 2.75573192e-6f;          /* 1/9! */
  p = p * z - 1.98412698e-4f;          /* 1/7! */
  p = p * z + 8.33333333e-3f;          /* 1/5! */
  p = p * z - 1.66666667e-1f;          /* 1/3! */
  return copysignf((p * z) * x + x, x);
}
BRRR_SCALAR_FN float brrr_gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
BRRR_SCALAR_FN float brrr_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* Elementwise activations and helpers (ONNX semantics; NaN propagates unless noted). */
BRRR_SCALAR_FN float brrr_leaky_relu(float x, float alpha) { return x < 0.0f ? alpha * x : x; }
BRRR_SCALAR_FN float brrr_prelu(float x, float slope) { return x < 0.0f ? slope * x : x; }
BRRR_SCALAR_FN float brrr_thresholded_relu(float x, float alpha) { return x > alpha ? x : 0.0f; }
BRRR_SCALAR_FN float brrr_elu(float x, float alpha) { return x < 0.0f ? alpha * expm1f(x) : x; }
BRRR_SCALAR_FN float brrr_selu(float x, float alpha, float gamma) {
  return x > 0.0f ? gamma * x : gamma * (alpha * expf(x) - alpha);
}
BRRR_SCALAR_FN float brrr_celu(float x, float alpha) {
  return x > 0.0f ? x : alpha * expm1f(x / alpha);
}
/* log(1 + exp(x)) without overflow for large x. */
BRRR_SCALAR_FN float brrr_softplus(float x) {
  return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}
BRRR_SCALAR_FN float brrr_softsign(float x) { return x / (1.0f + fabsf(x)); }
BRRR_SCALAR_FN float brrr_mish(float x) { return x * tanhf(brrr_softplus(x)); }
BRRR_SCALAR_FN float brrr_sign(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x); }
/* Round half to even (rintf under the default rounding mode). */
BRRR_SCALAR_FN float brrr_round(float x) { return rintf(x); }
/* Min / Max that propagate NaN (numpy minimum / maximum), unlike fminf / fmaxf. */
BRRR_SCALAR_FN float brrr_min(float a, float b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }
BRRR_SCALAR_FN float brrr_max(float a, float b) { return a != a ? a : (b != b ? b : (b > a ? b : a)); }
/* Clip: NaN x stays NaN; a NaN bound means "no bound" (how generators emit an omitted input);
   lo > hi gives hi, as the ONNX spec says. */
BRRR_SCALAR_FN float brrr_clip(float x, float lo, float hi) {
  if (x != x) return x;
  if (x < lo) x = lo;
  if (x > hi) x = hi;
  return x;
}
/* Mod: fmod=1 is C fmodf (dividend's sign); fmod=0 is numpy mod (divisor's sign, zero included). */
BRRR_SCALAR_FN float brrr_mod_1(float a, float b) { return fmodf(a, b); }
BRRR_SCALAR_FN float brrr_mod_0(float a, float b) {
  float r = fmodf(a, b);
  if (b == 0.0f) return r;
  if (r != 0.0f) return (r < 0.0f) != (b < 0.0f) ? r + b : r;
  return copysignf(0.0f, b);
}
BRRR_SCALAR_FN int brrr_isinf(float x, int detect_positive, int detect_negative) {
  return (detect_positive && x == INFINITY) || (detect_negative && x == -INFINITY);
}

#endif
