/* Scalar math shared by the reference kernels and both code generators (C++ and CUDA via NVRTC),
   so fused and unfused kernels compute the same function: inline functions on float for
   generated code, over generic forms (namespace brrr_scalar) the reference kernels call at their
   compute type. Every consumer compiles it as C++; BRRR_SCALAR_FN expands to the right
   qualifiers for each compiler. */
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

/* The activations' formulas, written once as templates over the compute type: the reference
   kernels (src/ops/elementwise_unary.cpp) call them at float (float32, float16, bfloat16) and
   double, and the C functions below that generated code calls are these at float. The math they
   call is picked by overload, so float calls the same libm functions as before (expf, not exp). */
namespace brrr_scalar {
BRRR_SCALAR_FN float exp_(float x) { return expf(x); }
BRRR_SCALAR_FN double exp_(double x) { return exp(x); }
BRRR_SCALAR_FN float expm1_(float x) { return expm1f(x); }
BRRR_SCALAR_FN double expm1_(double x) { return expm1(x); }
BRRR_SCALAR_FN float log1p_(float x) { return log1pf(x); }
BRRR_SCALAR_FN double log1p_(double x) { return log1p(x); }
BRRR_SCALAR_FN float tanh_(float x) { return tanhf(x); }
BRRR_SCALAR_FN double tanh_(double x) { return tanh(x); }
BRRR_SCALAR_FN float erf_(float x) { return erff(x); }
BRRR_SCALAR_FN double erf_(double x) { return erf(x); }
BRRR_SCALAR_FN float fabs_(float x) { return fabsf(x); }
BRRR_SCALAR_FN double fabs_(double x) { return fabs(x); }

/* Relu keeps NaN (as numpy's clip in the ONNX reference does); integers too. */
template <class T> BRRR_SCALAR_FN T relu(T x) { return x < T(0) ? T(0) : x; }
template <class T> BRRR_SCALAR_FN T sigmoid(T x) { return T(1) / (T(1) + exp_(-x)); }
template <class T> BRRR_SCALAR_FN T hardsigmoid(T x, T alpha, T beta) {
  T y = alpha * x + beta;
  return y < T(0) ? T(0) : (y > T(1) ? T(1) : y);
}
template <class T> BRRR_SCALAR_FN T hardswish(T x) { return x * hardsigmoid(x, T(1) / T(6), T(0.5)); }
template <class T> BRRR_SCALAR_FN T gelu_erf(T x) {
  return T(0.5) * x * (T(1) + erf_(x * T(0.70710678118654752)));
}
template <class T> BRRR_SCALAR_FN T gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + tanh_(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
}
template <class T> BRRR_SCALAR_FN T leaky_relu(T x, T alpha) { return x < T(0) ? alpha * x : x; }
template <class T> BRRR_SCALAR_FN T thresholded_relu(T x, T alpha) { return x > alpha ? x : T(0); }
template <class T> BRRR_SCALAR_FN T elu(T x, T alpha) { return x < T(0) ? alpha * expm1_(x) : x; }
template <class T> BRRR_SCALAR_FN T selu(T x, T alpha, T gamma) {
  return x > T(0) ? gamma * x : gamma * (alpha * exp_(x) - alpha);
}
template <class T> BRRR_SCALAR_FN T celu(T x, T alpha) {
  return x > T(0) ? x : alpha * expm1_(x / alpha);
}
/* log(1 + exp(x)) without overflow for large x. */
template <class T> BRRR_SCALAR_FN T softplus(T x) {
  return x > T(0) ? x + log1p_(exp_(-x)) : log1p_(exp_(x));
}
template <class T> BRRR_SCALAR_FN T softsign(T x) { return x / (T(1) + fabs_(x)); }
template <class T> BRRR_SCALAR_FN T mish(T x) { return x * tanh_(softplus(x)); }
/* NaN stays NaN; unsigned values are 0 or positive. */
template <class T> BRRR_SCALAR_FN T sign(T x) { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x); }
}  /* namespace brrr_scalar */

BRRR_SCALAR_FN float brrr_relu(float x) { return brrr_scalar::relu(x); }
BRRR_SCALAR_FN float brrr_sigmoid(float x) { return brrr_scalar::sigmoid(x); }
BRRR_SCALAR_FN float brrr_hardsigmoid(float x, float alpha, float beta) {
  return brrr_scalar::hardsigmoid(x, alpha, beta);
}
BRRR_SCALAR_FN float brrr_hardswish(float x) { return brrr_scalar::hardswish(x); }
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
BRRR_SCALAR_FN float brrr_gelu_erf(float x) { return brrr_scalar::gelu_erf(x); }
BRRR_SCALAR_FN float brrr_gelu_tanh(float x) { return brrr_scalar::gelu_tanh(x); }
BRRR_SCALAR_FN float brrr_leaky_relu(float x, float alpha) { return brrr_scalar::leaky_relu(x, alpha); }
BRRR_SCALAR_FN float brrr_prelu(float x, float slope) { return brrr_scalar::leaky_relu(x, slope); }
BRRR_SCALAR_FN float brrr_thresholded_relu(float x, float alpha) {
  return brrr_scalar::thresholded_relu(x, alpha);
}
BRRR_SCALAR_FN float brrr_elu(float x, float alpha) { return brrr_scalar::elu(x, alpha); }
BRRR_SCALAR_FN float brrr_selu(float x, float alpha, float gamma) {
  return brrr_scalar::selu(x, alpha, gamma);
}
BRRR_SCALAR_FN float brrr_celu(float x, float alpha) { return brrr_scalar::celu(x, alpha); }
BRRR_SCALAR_FN float brrr_softplus(float x) { return brrr_scalar::softplus(x); }
BRRR_SCALAR_FN float brrr_softsign(float x) { return brrr_scalar::softsign(x); }
BRRR_SCALAR_FN float brrr_mish(float x) { return brrr_scalar::mish(x); }
BRRR_SCALAR_FN float brrr_sign(float x) { return brrr_scalar::sign(x); }
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
