// The helper kernels of every CUDA module (declared in src/backend/cuda/codegen_cuda.hpp, launched
// by the CUDA executor): dtype conversions for GEMM operands, GELU-erf after a GEMM, pools cuDNN
// cannot express, the Conv epilogue, Gather, the channel scale and row means. Embedded for NVRTC
// like prelude.cuh.
#pragma once
#include "backend/cuda/device/prelude.cuh"

// float32 <-> 16-bit conversions, grid-stride over n elements.
extern "C" __global__ void brrr_cvt_f32_bf16(const float* __restrict__ a, brrr_bf16* __restrict__ b, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) { brrr_st(b + i, a[i]); }
}
extern "C" __global__ void brrr_cvt_bf16_f32(const brrr_bf16* __restrict__ a, float* __restrict__ b, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) { b[i] = brrr_ld(a + i); }
}
extern "C" __global__ void brrr_cvt_f32_f16(const float* __restrict__ a, brrr_f16* __restrict__ b, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) { brrr_st(b + i, a[i]); }
}
extern "C" __global__ void brrr_cvt_f16_f32(const brrr_f16* __restrict__ a, float* __restrict__ b, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) { b[i] = brrr_ld(a + i); }
}
// In-place erf GELU after a GEMM (cuBLASLt's GELU epilogue is the tanh form): 16-byte
// accesses when the pointer allows, a scalar tail. The vectors are walked from the end, which
// the GEMM (or the cast after it) most likely wrote last and L2 may still hold (bf16 8192^3 on
// the H200, two alternating pairs: 1.021 and 1.020x the plain GEMM walking backwards, 1.026 and
// 1.023x forwards).
template <class T, int V>
static __device__ __forceinline__ void brrr_gelu_erf_inplace(T* __restrict__ a, i64 n) {
  const i64 stride = (i64)gridDim.x * blockDim.x, t0 = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 head = 0;
  if ((reinterpret_cast<unsigned long long>(a) & 15) == 0) {
    head = n / V * V;
    for (i64 u = t0; u < n / V; u += stride) {
      const i64 v = n / V - 1 - u;
      float x[V];
      if (V == 8) brrr_ld8(x, a + v * V); else brrr_ld4(x, a + v * V);
#pragma unroll
      for (int q = 0; q < V; ++q) x[q] = sizeof(T) == 2 ? brrr_gelu_erf16(x[q]) : brrr_gelu_erf(x[q]);
      if (V == 8) brrr_st8(a + v * V, x); else brrr_st4(a + v * V, x);
    }
  }
  for (i64 i = head + t0; i < n; i += stride) {
    const float v = brrr_ld(a + i);
    brrr_st(a + i, sizeof(T) == 2 ? brrr_gelu_erf16(v) : brrr_gelu_erf(v));
  }
}
extern "C" __global__ void brrr_gelu_erf_f32(float* __restrict__ a, i64 n) { brrr_gelu_erf_inplace<float, 4>(a, n); }
extern "C" __global__ void brrr_gelu_erf_bf16(brrr_bf16* __restrict__ a, i64 n) { brrr_gelu_erf_inplace<brrr_bf16, 8>(a, n); }
extern "C" __global__ void brrr_gelu_erf_f16(brrr_f16* __restrict__ a, i64 n) { brrr_gelu_erf_inplace<brrr_f16, 8>(a, n); }
// Brings bytes [p, p + bytes) of a constant (a GEMM's or a conv's weights) into L2 ahead of the
// step that reads them (BRRR_L2_PREFETCH, cuda_executor_prefetch.cpp): launched on a side branch
// of the plan while earlier steps run, on SMs their small grids leave idle, so the weights'
// DRAM latency is paid before their step starts. It writes nothing. Mode 1: the TMA unit's bulk
// prefetch, one instruction per 16 KB chunk (sm_90+; line prefetches before that); 2: a
// prefetch instruction per 128-byte line; 3: a 16-byte load of every 16 bytes (real loads,
// which fill L2 for certain; volatile, so nothing removes them).
extern "C" __global__ void brrr_l2_prefetch(const unsigned char* __restrict__ p, i64 bytes, int mode) {
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x, stride = (i64)gridDim.x * blockDim.x;
  const unsigned long long base = reinterpret_cast<unsigned long long>(p);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (mode == 1) {
    const i64 chunk = 16384, whole = (base & 15) ? 0 : bytes / 16 * 16;
    for (i64 off = t * chunk; off < whole; off += stride * chunk) {
      const unsigned n = (unsigned)(whole - off < chunk ? whole - off : chunk);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(n) : "memory");
    }
    if (t == 0 && whole < bytes) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + whole));
    return;
  }
#endif
  if (mode == 3 && (base & 15) == 0) {
    const i64 v = bytes / 16;
    for (i64 i = t; i < v; i += stride) {
      asm volatile("{\n .reg .b32 t<4>;\n ld.volatile.global.v4.u32 {t0, t1, t2, t3}, [%0];\n}"
                   ::"l"(p + i * 16) : "memory");
    }
    return;
  }
  for (i64 off = t * 128; off < bytes; off += stride * 128)
    asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p + off));
  if (t == 0 && bytes > 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + bytes - 1));
}
// The real columns of a GEMM's padded rows (BRRR_GEMM_PAD_N=1): dst [rows, width] contiguous
// from src [rows, pitch]. GPT-2's logits rows of 50257 16-bit values start at 2-byte aligned
// addresses, which no 16-byte access (and no fast cuBLASLt kernel) can write; here each thread
// gathers the V elements of one 16-byte piece of dst with scalar loads (contiguous across a warp,
// served by L1) and writes it with one store. cuMemcpy2D on that geometry moved about half of the
// copy bandwidth.
template <class T>
static __device__ __forceinline__ void brrr_unpad_rows_t(const T* __restrict__ src, T* __restrict__ dst,
                                                         i64 rows, i64 width, i64 pitch) {
  brrr_grid_wait();  // launched dependent on the GEMM (prelude.cuh)
  const int V = 16 / sizeof(T);
  const i64 n = rows * width, stride = (i64)gridDim.x * blockDim.x;
  const i64 t0 = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 head = 0;
  if ((reinterpret_cast<unsigned long long>(dst) & 15) == 0) {
    head = n / V * V;
    for (i64 u = t0; u < n / V; u += stride) {
      const i64 e = u * V;
      i64 r = e / width, c = e - r * width;
      union { uint4 v; T s[16 / sizeof(T)]; } w;
#pragma unroll
      for (int q = 0; q < V; ++q) {
        while (c >= width) { ++r; c -= width; }
        w.s[q] = src[r * pitch + c];
        ++c;
      }
      *reinterpret_cast<uint4*>(dst + e) = w.v;
    }
  }
  for (i64 e = head + t0; e < n; e += stride) {
    const i64 r = e / width;
    dst[e] = src[r * pitch + (e - r * width)];
  }
}
extern "C" __global__ void brrr_unpad_rows_16(const unsigned short* __restrict__ src, unsigned short* __restrict__ dst,
                                              i64 rows, i64 width, i64 pitch) {
  brrr_unpad_rows_t(src, dst, rows, width, pitch);
}
extern "C" __global__ void brrr_unpad_rows_32(const unsigned* __restrict__ src, unsigned* __restrict__ dst,
                                              i64 rows, i64 width, i64 pitch) {
  brrr_unpad_rows_t(src, dst, rows, width, pitch);
}
// The columns the row-phase GEMMs of an odd-pitch C leave (BRRR_GEMM_PAD_N=3,
// cuda_executor_gemm.cpp): row r of C [m, n] is written by the GEMM of phase r % p (p = 16 bytes
// / element size) from column c0 = (p - (r % p) * n % p) % p on, where its address is 16-byte
// aligned; its first c0 columns are computed here, one warp per column: c[r, j] = sum_q a[r, q] *
// bt[j, q], bt being B stored [N, K]. One block of p warps per row.
template <class T>
static __device__ __forceinline__ void brrr_gemm_edge_cols_t(const T* __restrict__ a, const T* __restrict__ bt,
                                                             T* __restrict__ c, i64 m, i64 n, i64 k, int p) {
  const i64 r = blockIdx.x;
  const int j = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = (int)((p - (r % p) * n % p) % p);
  if (r >= m || j >= c0) return;  // whole warps leave together
  float s = 0.f;
  for (i64 q = lane; q < k; q += 32) s += brrr_ld(a + r * k + q) * brrr_ld(bt + (i64)j * k + q);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) brrr_st(c + r * n + j, s);
}
extern "C" __global__ void brrr_gemm_edge_cols_f32(const float* __restrict__ a, const float* __restrict__ bt, float* __restrict__ c, i64 m, i64 n, i64 k, int p) { brrr_gemm_edge_cols_t(a, bt, c, m, n, k, p); }
extern "C" __global__ void brrr_gemm_edge_cols_bf16(const brrr_bf16* __restrict__ a, const brrr_bf16* __restrict__ bt, brrr_bf16* __restrict__ c, i64 m, i64 n, i64 k, int p) { brrr_gemm_edge_cols_t(a, bt, c, m, n, k, p); }
extern "C" __global__ void brrr_gemm_edge_cols_f16(const brrr_f16* __restrict__ a, const brrr_f16* __restrict__ bt, brrr_f16* __restrict__ c, i64 m, i64 n, i64 k, int p) { brrr_gemm_edge_cols_t(a, bt, c, m, n, k, p); }
// Pools cuDNN cannot express (a ceil_mode window past the end, asymmetric pads, dilations,
// 16-bit data, or no cuDNN): one thread per output over [planes, D, H, W] (1-D and 2-D pools
// padded to 3-D), with the reference's taps and order (src/ops/pooling.cpp): max keeps the
// first of equal values and propagates NaN, an average divides by the taps inside the input
// (count_include_pad: inside input and explicit pads), accumulating in float32.
struct brrr_pool_geo { i64 in[3], k[3], s[3], d[3], pb[3], pe[3], out[3]; };
static __device__ __forceinline__ i64 brrr_floor_div(i64 a, i64 b) {
  const i64 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <class T>
static __device__ __forceinline__ void brrr_pool_t(const T* __restrict__ x, T* __restrict__ y, const brrr_pool_geo& g, int is_max, int include_pad, i64 cl, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    // cl > 0: channels-last data (N, spatial..., C with cl channels), elements cl apart.
    const i64 e = cl > 0 ? cl : 1, ch = cl > 0 ? i % cl : 0;
    i64 o[3], r = i / e;
    for (int a = 2; a >= 0; --a) { o[a] = r % g.out[a]; r /= g.out[a]; }
    i64 st[3], lo[3], hi[3], cnt = 1;
    for (int a = 0; a < 3; ++a) {
      st[a] = o[a] * g.s[a] - g.pb[a];
      lo[a] = -brrr_floor_div(st[a], g.d[a]);
      if (lo[a] < 0) lo[a] = 0;
      hi[a] = brrr_floor_div(g.in[a] - 1 - st[a], g.d[a]) + 1;
      if (hi[a] > g.k[a]) hi[a] = g.k[a];
      if (hi[a] < lo[a]) hi[a] = lo[a];
      i64 hp = brrr_floor_div(g.in[a] + g.pe[a] - 1 - st[a], g.d[a]) + 1;
      if (hp > g.k[a]) hp = g.k[a];
      cnt *= include_pad ? hp : hi[a] - lo[a];
    }
    const T* p = x + r * g.in[0] * g.in[1] * g.in[2] * e + ch;
    float best = __int_as_float(0xff800000), sum = 0.0f;
    bool any = false;
    for (i64 kd = lo[0]; kd < hi[0]; ++kd)
      for (i64 kh = lo[1]; kh < hi[1]; ++kh) {
        const T* row = p + (((st[0] + kd * g.d[0]) * g.in[1] + st[1] + kh * g.d[1]) * g.in[2] + st[2]) * e;
        for (i64 kw = lo[2]; kw < hi[2]; ++kw) {
          const float v = brrr_ld(row + kw * g.d[2] * e);
          if (v > best || !any || (v != v && best == best)) best = v;  // NaN wins and stays
          any = true;
          sum += v;
        }
      }
    brrr_st(y + i, is_max ? best : sum / (float)cnt);
  }
}
extern "C" __global__ void brrr_pool_f32(const float* __restrict__ x, float* __restrict__ y, brrr_pool_geo g, int is_max, int include_pad, i64 cl, i64 n) { brrr_pool_t<float>(x, y, g, is_max, include_pad, cl, n); }
extern "C" __global__ void brrr_pool_bf16(const brrr_bf16* __restrict__ x, brrr_bf16* __restrict__ y, brrr_pool_geo g, int is_max, int include_pad, i64 cl, i64 n) { brrr_pool_t<brrr_bf16>(x, y, g, is_max, include_pad, cl, n); }
extern "C" __global__ void brrr_pool_f16(const brrr_f16* __restrict__ x, brrr_f16* __restrict__ y, brrr_pool_geo g, int is_max, int include_pad, i64 cl, i64 n) { brrr_pool_t<brrr_f16>(x, y, g, is_max, include_pad, cl, n); }
// The same pools on channels-last data whose channel count is a multiple of V (16 bytes of
// channels), with fewer than 2^31 outputs: one thread per V channels of an output pixel, 16-byte
// loads and stores, 32-bit index arithmetic (the generic kernel's 64-bit divisions per output
// made ResNet-50's 3x3 MaxPool at batch 64 take 0.68 ms). Same taps, order and NaN rule.
static __device__ __forceinline__ int brrr_floor_div32(int a, int b) {
  const int q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <class T, int V>
static __device__ __forceinline__ void brrr_pool_cl_t(const T* __restrict__ x, T* __restrict__ y, const brrr_pool_geo& g, int is_max, int include_pad, i64 cl, i64 n) {
  const unsigned cv = (unsigned)(cl / V), nv = (unsigned)(n / V);
  int st[3], lo[3], hi[3];
  for (unsigned iv = blockIdx.x * blockDim.x + threadIdx.x; iv < nv; iv += gridDim.x * blockDim.x) {
    const unsigned ch = iv % cv * V;
    unsigned r = iv / cv;
    int cnt = 1;
#pragma unroll
    for (int a = 2; a >= 0; --a) {
      const int out = (int)g.out[a], o = (int)(r % (unsigned)out);
      r /= (unsigned)out;
      const int s = (int)g.s[a], d = (int)g.d[a], k = (int)g.k[a], in = (int)g.in[a];
      st[a] = o * s - (int)g.pb[a];
      lo[a] = max(0, -brrr_floor_div32(st[a], d));
      hi[a] = max(lo[a], min(k, brrr_floor_div32(in - 1 - st[a], d) + 1));
      cnt *= include_pad ? min(k, brrr_floor_div32(in + (int)g.pe[a] - 1 - st[a], d) + 1) : hi[a] - lo[a];
    }
    const T* p = x + ((i64)r * g.in[0] * g.in[1] * g.in[2]) * cl + ch;
    float best[V], sum[V];
#pragma unroll
    for (int q = 0; q < V; ++q) best[q] = __int_as_float(0xff800000), sum[q] = 0.0f;
    bool any = false;
    for (int kd = lo[0]; kd < hi[0]; ++kd)
      for (int kh = lo[1]; kh < hi[1]; ++kh) {
        const T* row = p + (i64)(((st[0] + kd * (int)g.d[0]) * (int)g.in[1] + st[1] + kh * (int)g.d[1]) * (int)g.in[2] + st[2]) * cl;
        for (int kw = lo[2]; kw < hi[2]; ++kw) {
          float v[V];
          if (V == 8) brrr_ld8(v, row + (i64)kw * g.d[2] * cl); else brrr_ld4(v, row + (i64)kw * g.d[2] * cl);
#pragma unroll
          for (int q = 0; q < V; ++q) {
            if (v[q] > best[q] || !any || (v[q] != v[q] && best[q] == best[q])) best[q] = v[q];  // NaN wins and stays
            sum[q] += v[q];
          }
          any = true;
        }
      }
#pragma unroll
    for (int q = 0; q < V; ++q) best[q] = is_max ? best[q] : sum[q] / (float)cnt;
    if (V == 8) brrr_st8(y + (i64)iv * V, best); else brrr_st4(y + (i64)iv * V, best);
  }
}
extern "C" __global__ void brrr_pool_cl_f32(const float* __restrict__ x, float* __restrict__ y, brrr_pool_geo g, int is_max, int include_pad, i64 cl, i64 n) { brrr_pool_cl_t<float, 4>(x, y, g, is_max, include_pad, cl, n); }
extern "C" __global__ void brrr_pool_cl_bf16(const brrr_bf16* __restrict__ x, brrr_bf16* __restrict__ y, brrr_pool_geo g, int is_max, int include_pad, i64 cl, i64 n) { brrr_pool_cl_t<brrr_bf16, 8>(x, y, g, is_max, include_pad, cl, n); }
extern "C" __global__ void brrr_pool_cl_f16(const brrr_f16* __restrict__ x, brrr_f16* __restrict__ y, brrr_pool_geo g, int is_max, int include_pad, i64 cl, i64 n) { brrr_pool_cl_t<brrr_f16, 8>(x, y, g, is_max, include_pad, cl, n); }
// After a cuDNN Conv (in place; channels-last data passes hw = 1): + bias[channel], + sum (a residual), then the activation
// (0 none, 1 relu, 2 hardswish, 3 hardsigmoid(alpha, beta), 4 clip(alpha, beta)), with the
// reference ops' scalar functions, in float32 on float32 or 16-bit data (the Conv's dtype: bias
// and residual share it). bias and sum may be null.
template <class T>
static __device__ __forceinline__ void brrr_conv_epilogue_t(T* __restrict__ y, const T* __restrict__ bias, const T* __restrict__ sum, i64 hw, i64 c, int act, float alpha, float beta, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    float v = brrr_ld(y + i);
    if (bias) v += brrr_ld(bias + (i / hw) % c);
    if (sum) v += brrr_ld(sum + i);
    brrr_st(y + i, brrr_conv_act(v, act, alpha, beta));
  }
}
extern "C" __global__ void brrr_conv_epilogue(float* __restrict__ y, const float* __restrict__ bias, const float* __restrict__ sum, i64 hw, i64 c, int act, float alpha, float beta, i64 n) { brrr_conv_epilogue_t<float>(y, bias, sum, hw, c, act, alpha, beta, n); }
extern "C" __global__ void brrr_conv_epilogue_bf16(brrr_bf16* __restrict__ y, const brrr_bf16* __restrict__ bias, const brrr_bf16* __restrict__ sum, i64 hw, i64 c, int act, float alpha, float beta, i64 n) { brrr_conv_epilogue_t<brrr_bf16>(y, bias, sum, hw, c, act, alpha, beta, n); }
extern "C" __global__ void brrr_conv_epilogue_f16(brrr_f16* __restrict__ y, const brrr_f16* __restrict__ bias, const brrr_f16* __restrict__ sum, i64 hw, i64 c, int act, float alpha, float beta, i64 n) { brrr_conv_epilogue_t<brrr_f16>(y, bias, sum, hw, c, act, alpha, beta, n); }
// Gather: y[o, j, q] = x[o, idx[j], q] in units of 1, 4 or 16 bytes (`inner` units per
// slice, `axis` slices per outer step); indices int64 or int32, negative ones count from the
// end. An index out of [-axis, axis) writes zeros and raises *err, which the executor reads
// after the run and reports.
template <class U>
static __device__ __forceinline__ void brrr_gather_t(const U* __restrict__ x, const void* __restrict__ idx, U* __restrict__ y, i64 nidx, i64 axis, i64 inner, int idx64, int* __restrict__ err, i64 n) {
  for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (i64)gridDim.x * blockDim.x) {
    const i64 q = t % inner, j = (t / inner) % nidx, o = t / (inner * nidx);
    i64 k = idx64 ? static_cast<const long long*>(idx)[j] : (i64)static_cast<const int*>(idx)[j];
    if (k < 0) k += axis;
    if (k < 0 || k >= axis) { *err = 1; y[t] = U{}; continue; }
    y[t] = x[(o * axis + k) * inner + q];
  }
}
extern "C" __global__ void brrr_gather_u1(const unsigned char* __restrict__ x, const void* __restrict__ idx, unsigned char* __restrict__ y, i64 nidx, i64 axis, i64 inner, int idx64, int* __restrict__ err, i64 n) { brrr_gather_t<unsigned char>(x, idx, y, nidx, axis, inner, idx64, err, n); }
extern "C" __global__ void brrr_gather_u4(const unsigned* __restrict__ x, const void* __restrict__ idx, unsigned* __restrict__ y, i64 nidx, i64 axis, i64 inner, int idx64, int* __restrict__ err, i64 n) { brrr_gather_t<unsigned>(x, idx, y, nidx, axis, inner, idx64, err, n); }
extern "C" __global__ void brrr_gather_u16(const uint4* __restrict__ x, const void* __restrict__ idx, uint4* __restrict__ y, i64 nidx, i64 axis, i64 inner, int idx64, int* __restrict__ err, i64 n) { brrr_gather_t<uint4>(x, idx, y, nidx, axis, inner, idx64, err, n); }
// Channel scale (squeeze-excite): y = x * s[row], one s per HW-long row of x (NCHW float32).
extern "C" __global__ void brrr_channel_scale(const float* __restrict__ x, const float* __restrict__ s, float* __restrict__ y, i64 hw, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) { y[i] = x[i] * s[i / hw]; }
}
// Sum of each `cols`-long row times `scale` (GlobalAveragePool, ReduceMean / ReduceSum over
// trailing axes): one warp per row, rows grid-strided; float32 sums for 16-bit data too.
template <class T>
static __device__ __forceinline__ void brrr_row_mean_t(const T* __restrict__ x, T* __restrict__ y, i64 rows, i64 cols, float scale) {
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const i64 step = (i64)gridDim.x * warps;
  for (i64 r = (i64)blockIdx.x * warps + (threadIdx.x >> 5); r < rows; r += step) {
    const T* row = x + r * cols;
    float acc = 0.f;
    for (i64 c = lane; c < cols; c += 32) acc += brrr_ld(row + c);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) brrr_st(y + r, acc * scale);
  }
}
extern "C" __global__ void brrr_row_mean(const float* __restrict__ x, float* __restrict__ y, i64 rows, i64 cols, float scale) { brrr_row_mean_t<float>(x, y, rows, cols, scale); }
extern "C" __global__ void brrr_row_mean_bf16(const brrr_bf16* __restrict__ x, brrr_bf16* __restrict__ y, i64 rows, i64 cols, float scale) { brrr_row_mean_t<brrr_bf16>(x, y, rows, cols, scale); }
extern "C" __global__ void brrr_row_mean_f16(const brrr_f16* __restrict__ x, brrr_f16* __restrict__ y, i64 rows, i64 cols, float scale) { brrr_row_mean_t<brrr_f16>(x, y, rows, cols, scale); }
// The mean over the pixels of channels-last data (GlobalAveragePool on N, H*W, C): a block of
// 256 threads per 32 (image, channel) pairs, each warp on every 8th pixel (neighbouring lanes on
// neighbouring channels), the 8 warps' float32 sums added in shared memory. One thread per pair
// walking all pixels left ResNet-50's 2048 channels of 7x7 at batch 1 as 8 blocks, each thread 49
// loads in a row: 6.0 us on an H100 for 200 KB.
template <class T>
static __device__ __forceinline__ void brrr_nhwc_mean_t(const T* __restrict__ x, T* __restrict__ y, i64 hw, i64 c, float scale, i64 n) {
  __shared__ float part[8][32];
  const int lane = threadIdx.x & 31, grp = threadIdx.x >> 5;  // blockDim.x == 256
  for (i64 base = (i64)blockIdx.x * 32; base < n; base += (i64)gridDim.x * 32) {
    const i64 i = base + lane;
    float acc = 0.f;
    if (i < n) {
      const T* p = x + (i / c) * hw * c + i % c;
      for (i64 q = grp; q < hw; q += 8) acc += brrr_ld(p + q * c);
    }
    part[grp][lane] = acc;
    __syncthreads();
    if (grp == 0 && i < n) {
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < 8; ++k) s += part[k][lane];
      brrr_st(y + i, s * scale);
    }
    __syncthreads();
  }
}
extern "C" __global__ void brrr_nhwc_mean_bf16(const brrr_bf16* __restrict__ x, brrr_bf16* __restrict__ y, i64 hw, i64 c, float scale, i64 n) { brrr_nhwc_mean_t<brrr_bf16>(x, y, hw, c, scale, n); }
extern "C" __global__ void brrr_nhwc_mean_f16(const brrr_f16* __restrict__ x, brrr_f16* __restrict__ y, i64 hw, i64 c, float scale, i64 n) { brrr_nhwc_mean_t<brrr_f16>(x, y, hw, c, scale, n); }
// Channels-last im2col of 2-byte elements for a 2-D conv run as one GEMM: row p = (n * oh + y) *
// ow + x of a holds, for each tap (r, s) in order and each channel, x[n, y * sh - ph + r * dh,
// x * sw - pw + s * dw, c], zero outside the image: a[p, (r * ks + s) * c + ch]; the weights
// KRSC [k, r * s * c] are the GEMM's B transposed. c8 = channels / 8: one thread per 16-byte piece.
extern "C" __global__ void brrr_im2col_nhwc_u2(const uint4* __restrict__ x, uint4* __restrict__ a, int h, int w, int oh, int ow, int kr, int ks, int sh, int sw, int ph, int pw, int dh, int dw, i64 c8, i64 total) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
    const i64 piece = i % c8, tap_p = i / c8;
    const int taps = kr * ks;
    const int tap = (int)(tap_p % taps);
    const i64 p = tap_p / taps;
    const int r = tap / ks, s = tap - r * ks;
    const int ox = (int)(p % ow);
    const i64 rest = p / ow;
    const int oy = (int)(rest % oh);
    const i64 n = rest / oh;
    const int iy = oy * sh - ph + r * dh, ix = ox * sw - pw + s * dw;
    a[i] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[((n * h + iy) * w + ix) * c8 + piece]
                                                  : make_uint4(0u, 0u, 0u, 0u);
  }
}
// NCHW -> NHWC of 2-byte elements (a Conv's channels-last input), the channels padded with zeros
// from c to cp: y[(b * hw + q) * cp + ch] = ch < c ? x[(b * c + ch) * hw + q] : 0. One thread per
// pixel (one 64-bit division per pixel, not three per element), 16-byte stores when cp % 8 == 0.
extern "C" __global__ void brrr_nchw_to_nhwc_u2(const unsigned short* __restrict__ x, unsigned short* __restrict__ y, i64 c, i64 cp, i64 hw, i64 pixels) {
  for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < pixels; p += (i64)gridDim.x * blockDim.x) {
    const i64 b = p / hw, q = p - b * hw;
    const unsigned short* src = x + b * c * hw + q;
    unsigned short* dst = y + p * cp;
    if (cp % 8 == 0) {
      for (i64 c0 = 0; c0 < cp; c0 += 8) {
        unsigned w[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const i64 ch = c0 + 2 * u;
          const unsigned lo = ch < c ? src[ch * hw] : 0u, hi = ch + 1 < c ? src[(ch + 1) * hw] : 0u;
          w[u] = lo | (hi << 16);
        }
        *reinterpret_cast<uint4*>(dst + c0) = make_uint4(w[0], w[1], w[2], w[3]);
      }
    } else {
      for (i64 ch = 0; ch < cp; ++ch) dst[ch] = ch < c ? src[ch * hw] : (unsigned short)0;
    }
  }
}
