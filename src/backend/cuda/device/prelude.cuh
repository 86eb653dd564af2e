// Device helpers every generated CUDA module includes (src/backend/cuda/codegen_cuda.cpp): typed
// loads and stores of float32, bfloat16, float16 and bool buffers (computing in float32), their
// 4- and 8-wide vector forms, the 16-bit erf GELU, and warp and block reductions. Embedded for
// NVRTC at build time (CMakeLists.txt, embedded_headers.cpp.in) under this same path, so host
// builds with nvcc include it as "backend/cuda/device/prelude.cuh" too.
#pragma once
#include "brrr/scalar_ops.h"
typedef long long i64;
// Programmatic dependent launch (launch(..., dependent) in cuda_runtime.hpp): the first thing each of
// brrr's kernels does, before any load or store, is wait until the kernel before it in the
// stream has finished and its writes are visible. A no-op when launched the ordinary way, and
// compiled out below sm_90. With BRRR_PDL_EARLY (BRRR_CUDA_PDL=2 defines it in every module) the
// kernel then lets the next one launch at once: its CTAs are scheduled on the SMs this grid
// leaves free and run their own work that needs nothing of this one (the small-M GEMM's weight
// loads) before their own wait. Safe because every dependent launch waits before it reads.
static __device__ __forceinline__ void brrr_grid_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#ifdef BRRR_PDL_EARLY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
#endif
}
struct brrr_bf16 { unsigned short x; };
struct brrr_f16 { unsigned short x; };
static __device__ __forceinline__ float brrr_ld(const float* p) { return *p; }
static __device__ __forceinline__ float brrr_ld(const brrr_bf16* p) {
  return __uint_as_float(((unsigned)p->x) << 16);
}
static __device__ __forceinline__ float brrr_ld(const brrr_f16* p) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(p->x)); return f;
}
static __device__ __forceinline__ void brrr_st(float* p, float v) { *p = v; }
static __device__ __forceinline__ void brrr_st(brrr_bf16* p, float v) {
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v)); p->x = h;
}
static __device__ __forceinline__ void brrr_st(brrr_f16* p, float v) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); p->x = h;
}
// Typed kernels (plan::Kernel::compute int32, int64 or float64) load and store their buffers as
// they are, and bool ones through the float32 forms below (0 or 1; v != 0).
static __device__ __forceinline__ int brrr_ld(const int* p) { return *p; }
static __device__ __forceinline__ long long brrr_ld(const long long* p) { return *p; }
static __device__ __forceinline__ double brrr_ld(const double* p) { return *p; }
static __device__ __forceinline__ void brrr_st(int* p, int v) { *p = v; }
static __device__ __forceinline__ void brrr_st(long long* p, long long v) { *p = v; }
static __device__ __forceinline__ void brrr_st(double* p, double v) { *p = v; }
// Integer arithmetic as the reference does it: two's-complement wrap (computed unsigned), C's
// truncating division with INT_MIN / -1 wrapping, numpy's or C's remainder sign. A zero divisor
// is an error in the reference; a kernel cannot fail, so it gives 0.
template <class T> struct brrr_unsigned_of;
template <> struct brrr_unsigned_of<int> { typedef unsigned type; };
template <> struct brrr_unsigned_of<long long> { typedef unsigned long long type; };
template <class T> static __device__ __forceinline__ T brrr_wadd(T a, T b) {
  typedef typename brrr_unsigned_of<T>::type U; return (T)((U)a + (U)b);
}
template <class T> static __device__ __forceinline__ T brrr_wsub(T a, T b) {
  typedef typename brrr_unsigned_of<T>::type U; return (T)((U)a - (U)b);
}
template <class T> static __device__ __forceinline__ T brrr_wmul(T a, T b) {
  typedef typename brrr_unsigned_of<T>::type U; return (T)((U)a * (U)b);
}
template <class T> static __device__ __forceinline__ T brrr_wneg(T a) {
  typedef typename brrr_unsigned_of<T>::type U; return (T)((U)0 - (U)a);
}
template <class T> static __device__ __forceinline__ T brrr_idiv(T a, T b) {
  return b == 0 ? (T)0 : b == (T)-1 ? brrr_wneg(a) : (T)(a / b);
}
template <class T> static __device__ __forceinline__ T brrr_imod(T a, T b, bool fmod) {
  if (b == 0 || b == (T)-1) return (T)0;
  T r = (T)(a % b);
  if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = (T)(r + b);
  return r;
}
template <class T> static __device__ __forceinline__ T brrr_iabs(T a) { return a < 0 ? brrr_wneg(a) : a; }
template <class T> static __device__ __forceinline__ T brrr_isign(T a) { return (T)((a > 0) - (a < 0)); }
template <class T> static __device__ __forceinline__ T brrr_imin(T a, T b) { return b < a ? b : a; }
template <class T> static __device__ __forceinline__ T brrr_imax(T a, T b) { return a < b ? b : a; }
// float64 Min / Max: a NaN operand gives NaN (the reference's min_nan / max_nan).
static __device__ __forceinline__ double brrr_dmin(double a, double b) {
  return a != a ? a : b != b ? b : b < a ? b : a;
}
static __device__ __forceinline__ double brrr_dmax(double a, double b) {
  return a != a ? a : b != b ? b : a < b ? b : a;
}
// bool buffers (one byte): 0 or 1 in float32.
static __device__ __forceinline__ float brrr_ld(const unsigned char* p) { return *p ? 1.0f : 0.0f; }
static __device__ __forceinline__ void brrr_st(unsigned char* p, float v) { *p = v != 0.0f; }
static __device__ __forceinline__ void brrr_ld4(float* d, const float* p) {
  const float4 t = *reinterpret_cast<const float4*>(p);
  d[0] = t.x; d[1] = t.y; d[2] = t.z; d[3] = t.w;
}
static __device__ __forceinline__ void brrr_st4(float* p, const float* s) {
  *reinterpret_cast<float4*>(p) = make_float4(s[0], s[1], s[2], s[3]);
}
static __device__ __forceinline__ void brrr_ld8(float* d, const float* p) {
  brrr_ld4(d, p); brrr_ld4(d + 4, p + 4);
}
static __device__ __forceinline__ void brrr_st8(float* p, const float* s) {
  brrr_st4(p, s); brrr_st4(p + 4, s + 4);
}
// 16-bit floats: 4 per 8-byte and 8 per 16-byte access, converted to float32 in registers.
static __device__ __forceinline__ float brrr_from16(unsigned h, const brrr_bf16*) {
  return __uint_as_float((h & 0xffffu) << 16);
}
static __device__ __forceinline__ float brrr_from16(unsigned h, const brrr_f16*) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)h)); return f;
}
static __device__ __forceinline__ unsigned brrr_to16(float v, const brrr_bf16*) {
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v)); return h;
}
static __device__ __forceinline__ unsigned brrr_to16(float v, const brrr_f16*) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); return h;
}
template <class T>
static __device__ __forceinline__ void brrr_unpack(float* d, unsigned w, const T* p) {
  d[0] = brrr_from16(w, p); d[1] = brrr_from16(w >> 16, p);
}
template <class T>
static __device__ __forceinline__ unsigned brrr_pack(const float* s, const T* p) {
  return brrr_to16(s[0], p) | (brrr_to16(s[1], p) << 16);
}
template <class T>
static __device__ __forceinline__ void brrr_ld4(float* d, const T* p) {
  const uint2 t = *reinterpret_cast<const uint2*>(p);
  brrr_unpack(d, t.x, p); brrr_unpack(d + 2, t.y, p);
}
template <class T>
static __device__ __forceinline__ void brrr_ld8(float* d, const T* p) {
  const uint4 t = *reinterpret_cast<const uint4*>(p);
  brrr_unpack(d, t.x, p); brrr_unpack(d + 2, t.y, p); brrr_unpack(d + 4, t.z, p); brrr_unpack(d + 6, t.w, p);
}
template <class T>
static __device__ __forceinline__ void brrr_st4(T* p, const float* s) {
  *reinterpret_cast<uint2*>(p) = make_uint2(brrr_pack(s, p), brrr_pack(s + 2, p));
}
template <class T>
static __device__ __forceinline__ void brrr_st8(T* p, const float* s) {
  *reinterpret_cast<uint4*>(p) =
      make_uint4(brrr_pack(s, p), brrr_pack(s + 2, p), brrr_pack(s + 4, p), brrr_pack(s + 6, p));
}
// erf GELU for kernels whose results are stored in 16 bits: x * Phi(x) with erfc(z) =
// t exp(-z^2 + P(t)), t = 1 / (1 + z/2), and P a degree-3 fit (weighted least squares on
// z in [0, 10.5], past which the float result underflows). Its fractional error is at most
// 3e-4 everywhere, under half a unit of bf16 (2^-9) and of f16 (2^-11 ~ 4.9e-4), so every result
// is the correctly rounded value or its neighbour (tests/unit/test_cuda_session.cpp). It is a
// third of the instructions of libdevice's erff, which made 16-bit GELU ALU-bound: GELU(x+b) on
// 16384x4096 bf16 took 0.086 ms with the 1.2e-7 Chebyshev fit and 0.077 ms with this one (H200).
// Written for few instructions: z = |x|/sqrt(2) folded into the constants, exp as ex2 with
// log2(e) and the 1/2 of Phi folded into P, the reciprocal and ex2 as the hardware's
// approximations (rcp.approx, ex2.approx; relative errors near 2^-23). 0.0765 -> 0.0726 ms on
// that shape (a scratch microbenchmark, H200) with the same error bound (2.97e-4 over every finite
// bf16 and f16 input); +inf gives +inf, and -inf and NaN give NaN, as the reference does.
static __device__ __forceinline__ float brrr_gelu_erf16(float x) {
  const float a = fabsf(x);
  float t, e;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t) : "f"(fmaf(a, 0.35355339059327376f, 1.0f)));
  const float q = fmaf(t, fmaf(t, fmaf(t, -0.3443854749202728f * 1.4426950408889634f,
                                       0.6871874332427979f * 1.4426950408889634f),
                               0.9155017137527466f * 1.4426950408889634f),
                       -1.2580070495605469f * 1.4426950408889634f - 1.0f);
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(fmaf(x * x, -0.5f * 1.4426950408889634f, q)));
  const float half_erfc = t * e;
  return x * (x >= 0.0f ? 1.0f - half_erfc : half_erfc);
}
// A conv's activation after its bias and residual (brrr_conv_epilogue, the direct conv kernel):
// 0 none, 1 relu, 2 hardswish, 3 hardsigmoid(alpha, beta), 4 clip(alpha, beta).
static __device__ __forceinline__ float brrr_conv_act(float v, int act, float alpha, float beta) {
  switch (act) {
    case 1: return brrr_relu(v);
    case 2: return brrr_hardswish(v);
    case 3: return brrr_hardsigmoid(v, alpha, beta);
    case 4: return brrr_clip(v, alpha, beta);
    default: return v;
  }
}
template <int MAX>
static __device__ __forceinline__ float brrr_warp_reduce(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? (w > v || w != w ? w : v) : v + w;  // a max propagates NaN
  }
  return v;
}
// Every thread gets the block's result; `red` holds one value per warp.
template <int MAX>
static __device__ __forceinline__ float brrr_block_reduce(float v, float* red) {
  v = brrr_warp_reduce<MAX>(v);
  if (blockDim.x <= 32) return v;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();  // earlier readers of red are done
  if (lane == 0) red[w] = v;
  __syncthreads();
  v = lane < nw ? red[lane] : (MAX ? -INFINITY : 0.0f);
  return brrr_warp_reduce<MAX>(v);
}
