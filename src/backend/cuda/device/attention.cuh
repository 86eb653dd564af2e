// Fused scaled dot-product attention (plan::AttentionDesc; the CUDA executor's attention step,
// cuda_executor_attention.cpp): out = softmax(scale * Q K^T [masked]) V in one kernel, with Q, K,
// V and out read and written through element strides, so the head split and merge around it are
// no copies. A flash-attention loop on CUDA cores: one block per (query tile, head, batch), K and
// V tiles through shared memory, an online softmax with float32 scores, statistics and
// accumulators, 16-bit or float32 storage. Embedded for NVRTC like kernels.cuh; the host build
// includes it for brrr_attn_args alone, so both sides share one definition of the arguments.
#pragma once

// The kernel's one argument, passed by value. Strides in elements over (batch, head, seq, dim)
// for q, k, v and out (k and v over their own heads: head h reads kv head h / group), over
// (batch, head, query, key) for the masks, 0 where they broadcast.
struct brrr_attn_args {
  const void* q;
  const void* k;
  const void* v;
  const void* mask;  // additive, of the data's type; null: none
  const void* keep;  // bool (one byte), null: none; where keep != keep_when the score is fill
  void* out;
  long long qs[4], ks[4], vs[4], os[4], ms[4], bs[4];
  long long heads, group, seq_q, seq_k, head_dim;
  float scale, fill;
  int keep_when, causal, zero_empty_rows, pad_;
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "backend/cuda/device/prelude.cuh"

#define BRRR_ATTN_BQ 16      // query rows per block: 4 warps of 4 rows
#define BRRR_ATTN_BK 32      // keys per tile: one per lane
#define BRRR_ATTN_MAXD 128   // head dims up to this (plan::Target::attention_max_head_dim)
#define BRRR_ATTN_WARPS 4

static __device__ __forceinline__ float brrr_attn_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
static __device__ __forceinline__ float brrr_attn_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T>
static __device__ __forceinline__ void brrr_attention_t(const brrr_attn_args& a) {
  // Q rows and K rows (padded a column: lane j reads row j, so rows must not share banks) and V.
  __shared__ float qs[BRRR_ATTN_BQ][BRRR_ATTN_MAXD];
  __shared__ float ks[BRRR_ATTN_BK][BRRR_ATTN_MAXD + 1];
  __shared__ float vs[BRRR_ATTN_BK][BRRR_ATTN_MAXD];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const long long b = blockIdx.z, h = blockIdx.y, q0 = (long long)blockIdx.x * BRRR_ATTN_BQ;
  const long long kvh = h / a.group;
  const int D = (int)a.head_dim;
  const T* Q = (const T*)a.q + b * a.qs[0] + h * a.qs[1];
  const T* K = (const T*)a.k + b * a.ks[0] + kvh * a.ks[1];
  const T* V = (const T*)a.v + b * a.vs[0] + kvh * a.vs[1];
  T* O = (T*)a.out + b * a.os[0] + h * a.os[1];
  const T* M = a.mask ? (const T*)a.mask + b * a.ms[0] + h * a.ms[1] : (const T*)0;
  const unsigned char* B = a.keep ? (const unsigned char*)a.keep + b * a.bs[0] + h * a.bs[1]
                                  : (const unsigned char*)0;
  const float NEG_INF = __int_as_float(0xff800000);
  const long long causal_off = a.seq_k - a.seq_q;  // key j is visible to query i when j <= i + off

  for (int e = tid; e < BRRR_ATTN_BQ * D; e += blockDim.x) {
    const int r = e / D, d = e % D;
    const long long i = q0 + r;
    qs[r][d] = i < a.seq_q ? brrr_ld(Q + i * a.qs[2] + d * a.qs[3]) : 0.0f;
  }
  // Each warp owns rows warp, warp + 4, ...; each lane the dims lane, lane + 32, ...
  float m[BRRR_ATTN_BQ / BRRR_ATTN_WARPS], l[BRRR_ATTN_BQ / BRRR_ATTN_WARPS];
  float acc[BRRR_ATTN_BQ / BRRR_ATTN_WARPS][BRRR_ATTN_MAXD / 32];
#pragma unroll
  for (int rr = 0; rr < BRRR_ATTN_BQ / BRRR_ATTN_WARPS; ++rr) {
    m[rr] = NEG_INF;
    l[rr] = 0.0f;
#pragma unroll
    for (int c = 0; c < BRRR_ATTN_MAXD / 32; ++c) acc[rr][c] = 0.0f;
  }
  long long key_end = a.seq_k;
  if (a.causal) {  // keys past the tile's last query row are masked for every row
    const long long last = q0 + BRRR_ATTN_BQ - 1 + causal_off + 1;
    if (last < key_end) key_end = last < 0 ? 0 : last;
  }
  for (long long k0 = 0; k0 < key_end; k0 += BRRR_ATTN_BK) {
    __syncthreads();  // the previous tile's readers are done (and, the first time, Q is stored)
    for (int e = tid; e < BRRR_ATTN_BK * D; e += blockDim.x) {
      const int j = e / D, d = e % D;
      const long long kj = k0 + j;
      const bool in = kj < a.seq_k;
      ks[j][d] = in ? brrr_ld(K + kj * a.ks[2] + d * a.ks[3]) : 0.0f;
      vs[j][d] = in ? brrr_ld(V + kj * a.vs[2] + d * a.vs[3]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < BRRR_ATTN_BQ / BRRR_ATTN_WARPS; ++rr) {
      const int r = warp + rr * BRRR_ATTN_WARPS;
      const long long i = q0 + r;
      if (i >= a.seq_q) continue;  // the same for the whole warp
      const long long j = k0 + lane;
      float s = NEG_INF;
      if (j < a.seq_k && !(a.causal && j > i + causal_off)) {
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot = fmaf(qs[r][d], ks[lane][d], dot);
        s = dot * a.scale;
        if (B && ((B[i * a.bs[2] + j * a.bs[3]] != 0) != (a.keep_when != 0))) s = a.fill;
        if (M) s += brrr_ld(M + i * a.ms[2] + j * a.ms[3]);
      }
      const float m_new = fmaxf(m[rr], brrr_attn_warp_max(s));
      // Every score so far -inf: subtract 0 so exp gives 0, not NaN (the row's sum stays 0).
      const float base = m_new == NEG_INF ? 0.0f : m_new;
      const float p = __expf(s - base);
      const float alpha = __expf(m[rr] - base);
      l[rr] = l[rr] * alpha + brrr_attn_warp_sum(p);
      m[rr] = m_new;
#pragma unroll
      for (int c = 0; c < BRRR_ATTN_MAXD / 32; ++c) acc[rr][c] *= alpha;
      for (int jj = 0; jj < BRRR_ATTN_BK; ++jj) {
        const float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
        for (int c = 0; c < BRRR_ATTN_MAXD / 32; ++c) {
          const int d = lane + 32 * c;
          if (d < D) acc[rr][c] = fmaf(pj, vs[jj][d], acc[rr][c]);
        }
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < BRRR_ATTN_BQ / BRRR_ATTN_WARPS; ++rr) {
    const int r = warp + rr * BRRR_ATTN_WARPS;
    const long long i = q0 + r;
    if (i >= a.seq_q) continue;
    // A row with no visible key: softmax's 0/0 is NaN, which the exporters' guard makes 0.
    const float inv = l[rr] > 0.0f ? 1.0f / l[rr] : (a.zero_empty_rows ? 0.0f : __int_as_float(0x7fc00000));
#pragma unroll
    for (int c = 0; c < BRRR_ATTN_MAXD / 32; ++c) {
      const int d = lane + 32 * c;
      if (d < D) brrr_st(O + i * a.os[2] + d * a.os[3], acc[rr][c] * inv);
    }
  }
}

extern "C" __global__ void __launch_bounds__(128) brrr_attention_f32(const brrr_attn_args a) { brrr_attention_t<float>(a); }
extern "C" __global__ void __launch_bounds__(128) brrr_attention_bf16(const brrr_attn_args a) { brrr_attention_t<brrr_bf16>(a); }
extern "C" __global__ void __launch_bounds__(128) brrr_attention_f16(const brrr_attn_args a) { brrr_attention_t<brrr_f16>(a); }
#endif
