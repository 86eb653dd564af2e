#include "backend/cuda/bench_kernels.hpp"

namespace brrr::cuda {

const char* bench_kernels_source() {
  return R"cuda(
#include "brrr/scalar_ops.h"

__device__ __forceinline__ unsigned brrr_hash(unsigned long long i, unsigned seed) {
  unsigned x = (unsigned)i * 0x9E3779B1u ^ (unsigned)(i >> 32) * 0x85EBCA77u ^ seed * 0xC2B2AE3Du;
  x ^= x >> 16; x *= 0x7FEB352Du; x ^= x >> 15; x *= 0x846CA68Bu; x ^= x >> 16;
  return x;
}
__device__ __forceinline__ float brrr_uniform(unsigned long long i, unsigned seed, float s) {
  return ((brrr_hash(i, seed) >> 8) * (1.0f / 8388608.0f) - 1.0f) * s;  // [-s, s)
}

extern "C" __global__ void brrr_empty() {}

extern "C" __global__ void brrr_fill_f32(float* x, unsigned long long n, unsigned seed, float s) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    x[i] = brrr_uniform(i, seed, s);
}
extern "C" __global__ void brrr_fill_bf16(unsigned short* x, unsigned long long n, unsigned seed,
                                          float s) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(brrr_uniform(i, seed, s)));
    x[i] = h;
  }
}
extern "C" __global__ void brrr_fill_f16(unsigned short* x, unsigned long long n, unsigned seed,
                                         float s) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(brrr_uniform(i, seed, s)));
    x[i] = h;
  }
}

// 16-byte loads and stores, grid-stride: the shape the fused emitter should produce.
extern "C" __global__ void brrr_cos_f32x4(const float4* __restrict__ x, float4* __restrict__ y,
                                          unsigned long long n4) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n4;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    float4 v = x[i];
    y[i] = make_float4(cosf(v.x), cosf(v.y), cosf(v.z), cosf(v.w));
  }
}
extern "C" __global__ void brrr_cos_cos_f32x4(const float4* __restrict__ x,
                                              float4* __restrict__ y, unsigned long long n4) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n4;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    float4 v = x[i];
    y[i] = make_float4(cosf(cosf(v.x)), cosf(cosf(v.y)), cosf(cosf(v.z)), cosf(cosf(v.w)));
  }
}

// Independent chains keep the FMA pipes full; the store keeps the compiler from dropping them.
extern "C" __global__ void brrr_fma_peak(float* out, int iters) {
  float a[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) a[c] = threadIdx.x * 1e-3f + c;
  const float m = 0.999f, k = 1e-4f;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < 8; ++c) a[c] = fmaf(a[c], m, k);
  }
  float s = 0;
#pragma unroll
  for (int c = 0; c < 8; ++c) s += a[c];
  if (s == 12345.678f) out[threadIdx.x] = s;  // practically never taken
}

#define BRRR_SPECIAL_TPUT(NAME, EXPR, A, B)                                        \
  extern "C" __global__ void NAME(float* out, int iters) {                         \
    float x[4];                                                                    \
    _Pragma("unroll") for (int c = 0; c < 4; ++c) x[c] = (threadIdx.x & 31) * 1e-2f + 0.1f * c; \
    for (int i = 0; i < iters; ++i) {                                              \
      _Pragma("unroll") for (int c = 0; c < 4; ++c) {                              \
        float v = x[c];                                                            \
        x[c] = fmaf(EXPR, A, B);                                                   \
      }                                                                            \
    }                                                                              \
    float s = x[0] + x[1] + x[2] + x[3];                                           \
    if (s == 12345.678f) out[threadIdx.x] = s;                                     \
  }
BRRR_SPECIAL_TPUT(brrr_expf_tput, expf(v), 0.25f, -0.5f)
BRRR_SPECIAL_TPUT(brrr_cosf_tput, cosf(v), 1.1f, 0.05f)
BRRR_SPECIAL_TPUT(brrr_tanhf_tput, tanhf(v), 1.5f, 0.1f)
BRRR_SPECIAL_TPUT(brrr_erff_tput, erff(v), 1.5f, 0.1f)
)cuda";
}

}  // namespace brrr::cuda
