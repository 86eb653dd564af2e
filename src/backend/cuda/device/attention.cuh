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
  int keep_when, causal, zero_empty_rows;
  int fast_tiles;  // flash kernel: skip the bounds and mask work of whole tiles, and dead tiles
  int ksplit;      // flash kernel: 2 splits each block's keys over two warps per 16 rows, else 1
  int full_tiles;  // flash kernel: plain tiles run MMA loops without a branch per key group
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "backend/cuda/device/prelude.cuh"
#include "backend/cuda/device/mma.cuh"

// Which kernels a module instantiates (NVRTC compiles only those; all 12 took most of a
// transformer's ~15 s cold compile): with BRRR_ATTN_SELECT defined, the generated module
// (codegen_cuda.cpp) defines BRRR_ATTN_CC_<type> (the CUDA core kernel of a type) and
// BRRR_ATTN_TC<D>_<type> (the Tensor Core kernels, flash and strided, of a head dim) for the
// attention kernels of its plan; without it, every kernel.

#define BRRR_ATTN_BQ 8       // query rows per block: 4 warps of 2 rows (16 rows: half the blocks,
                             // BERT-base fp32 b1's 12 layers 33 us each on the H200, latency-bound)
#define BRRR_ATTN_BK 32      // keys per tile: one per lane
#define BRRR_ATTN_MAXD 128   // head dims up to this (plan::Target::attention_max_head_dim)
#define BRRR_ATTN_WARPS 4
#define BRRR_ATTN_LOADS 8    // global loads in flight per thread while a tile is fetched

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
  brrr_grid_wait();  // launched dependent on the kernel before it (prelude.cuh)
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

  // Loads in batches of BRRR_ATTN_LOADS per thread, all issued before any store: a loop that
  // stores each load to shared memory before the next waits out the memory latency per element
  // (the compiler cannot move a global load above a shared store it might alias), which made
  // this kernel ~90 us per BERT-base layer.
  for (int e0 = tid; e0 < BRRR_ATTN_BQ * D; e0 += BRRR_ATTN_LOADS * blockDim.x) {
    float t[BRRR_ATTN_LOADS];
#pragma unroll
    for (int u = 0; u < BRRR_ATTN_LOADS; ++u) {
      const int e = e0 + u * (int)blockDim.x, r = e / D, d = e % D;
      const long long i = q0 + r;
      t[u] = e < BRRR_ATTN_BQ * D && i < a.seq_q ? brrr_ld(Q + i * a.qs[2] + d * a.qs[3]) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < BRRR_ATTN_LOADS; ++u) {
      const int e = e0 + u * (int)blockDim.x;
      if (e < BRRR_ATTN_BQ * D) qs[e / D][e % D] = t[u];
    }
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
    for (int e0 = tid; e0 < BRRR_ATTN_BK * D; e0 += BRRR_ATTN_LOADS * blockDim.x) {
      float tk[BRRR_ATTN_LOADS], tv[BRRR_ATTN_LOADS];
#pragma unroll
      for (int u = 0; u < BRRR_ATTN_LOADS; ++u) {
        const int e = e0 + u * (int)blockDim.x, j = e / D, d = e % D;
        const long long kj = k0 + j;
        const bool in = e < BRRR_ATTN_BK * D && kj < a.seq_k;
        tk[u] = in ? brrr_ld(K + kj * a.ks[2] + d * a.ks[3]) : 0.0f;
        tv[u] = in ? brrr_ld(V + kj * a.vs[2] + d * a.vs[3]) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < BRRR_ATTN_LOADS; ++u) {
        const int e = e0 + u * (int)blockDim.x;
        if (e < BRRR_ATTN_BK * D) ks[e / D][e % D] = tk[u], vs[e / D][e % D] = tv[u];
      }
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
        // Four partial sums: four FMA chains in flight instead of one of D.
        float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
        int d = 0;
        for (; d + 4 <= D; d += 4) {
          d0 = fmaf(qs[r][d], ks[lane][d], d0);
          d1 = fmaf(qs[r][d + 1], ks[lane][d + 1], d1);
          d2 = fmaf(qs[r][d + 2], ks[lane][d + 2], d2);
          d3 = fmaf(qs[r][d + 3], ks[lane][d + 3], d3);
        }
        for (; d < D; ++d) d0 = fmaf(qs[r][d], ks[lane][d], d0);
        s = ((d0 + d1) + (d2 + d3)) * a.scale;
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

#if !defined(BRRR_ATTN_SELECT) || defined(BRRR_ATTN_CC_f32)
extern "C" __global__ void __launch_bounds__(128) brrr_attention_f32(const brrr_attn_args a) { brrr_attention_t<float>(a); }
#endif
#if !defined(BRRR_ATTN_SELECT) || defined(BRRR_ATTN_CC_bf16)
extern "C" __global__ void __launch_bounds__(128) brrr_attention_bf16(const brrr_attn_args a) { brrr_attention_t<brrr_bf16>(a); }
#endif
#if !defined(BRRR_ATTN_SELECT) || defined(BRRR_ATTN_CC_f16)
extern "C" __global__ void __launch_bounds__(128) brrr_attention_f16(const brrr_attn_args a) { brrr_attention_t<brrr_f16>(a); }
#endif
// Tensor Cores (mma.sync m16n8k16, 16-bit inputs, float32 accumulators) for 16-bit data and head
// dims of 64 or 128: 2 warps of 16 query rows each per block (more blocks for the short
// sequences of batch 1), keys in tiles of 32. S = Q K^T and
// O += P V are warp-level MMAs; the softmax runs on the S accumulators (each row's values lie
// with the 4 lanes of one quad), and P goes from the S accumulators straight into the A
// fragments of P V (the C layout of two 16x8 tiles is the A layout of one 16x16), rounded to
// the 16-bit type as flash-attention does; the row sums stay float32.
#define BRRR_ATTN_MMA_WARPS 2
#define BRRR_ATTN_MMA_BQ (16 * BRRR_ATTN_MMA_WARPS)
#define BRRR_ATTN_MMA_BK 32

// Two 16-bit elements at p (an even element index in a row of an even length), as one word.
static __device__ __forceinline__ unsigned brrr_attn_pair(const unsigned short* p) {
  return *reinterpret_cast<const unsigned*>(p);
}

template <class T, int D>
static __device__ __forceinline__ void brrr_attention_mma_t(const brrr_attn_args& a) {
  brrr_grid_wait();  // launched dependent on the kernel before it (prelude.cuh)
  // Rows padded by 8 elements (16 bytes) so the quads' word loads spread over the banks.
  __shared__ __align__(16) unsigned short qs[BRRR_ATTN_MMA_BQ][D + 8];
  __shared__ __align__(16) unsigned short ks[BRRR_ATTN_MMA_BK][D + 8];
  __shared__ __align__(16) unsigned short vt[D][BRRR_ATTN_MMA_BK + 8];  // V transposed
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, tq = lane & 3;  // the lane's row in its 8-row group, its quad column
  const long long b = blockIdx.z, h = blockIdx.y, q0 = (long long)blockIdx.x * BRRR_ATTN_MMA_BQ;
  const long long kvh = h / a.group;
  const T* Q = (const T*)a.q + b * a.qs[0] + h * a.qs[1];
  const T* K = (const T*)a.k + b * a.ks[0] + kvh * a.ks[1];
  const T* V = (const T*)a.v + b * a.vs[0] + kvh * a.vs[1];
  T* O = (T*)a.out + b * a.os[0] + h * a.os[1];
  const T* M = a.mask ? (const T*)a.mask + b * a.ms[0] + h * a.ms[1] : (const T*)0;
  const unsigned char* B = a.keep ? (const unsigned char*)a.keep + b * a.bs[0] + h * a.bs[1]
                                  : (const unsigned char*)0;
  const float NEG_INF = __int_as_float(0xff800000);
  const long long causal_off = a.seq_k - a.seq_q;

  // As in brrr_attention_t: every load of a batch issued before its stores. D and the block
  // are fixed here, so each thread's share of a tile divides evenly.
  constexpr int kThreads = 32 * BRRR_ATTN_MMA_WARPS;
  constexpr int kLoads = 16;
  static_assert((BRRR_ATTN_MMA_BQ * D) % (kThreads * kLoads) == 0, "Q tile share");
  static_assert((BRRR_ATTN_MMA_BK * D) % (kThreads * kLoads) == 0, "K/V tile share");
#pragma unroll 1
  for (int e0 = tid; e0 < BRRR_ATTN_MMA_BQ * D; e0 += kLoads * kThreads) {
    unsigned short t[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int e = e0 + u * kThreads, r = e / D, d = e % D;
      const long long i = q0 + r;
      t[u] = i < a.seq_q ? Q[i * a.qs[2] + d * a.qs[3]].x : (unsigned short)0;
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int e = e0 + u * kThreads;
      qs[e / D][e % D] = t[u];
    }
  }
  __syncthreads();
  // This warp's 16 rows of Q as A fragments, one per 16 dims.
  const int r0 = warp * 16;
  unsigned qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    qf[kk][0] = brrr_attn_pair(&qs[r0 + gq][kk * 16 + 2 * tq]);
    qf[kk][1] = brrr_attn_pair(&qs[r0 + gq + 8][kk * 16 + 2 * tq]);
    qf[kk][2] = brrr_attn_pair(&qs[r0 + gq][kk * 16 + 2 * tq + 8]);
    qf[kk][3] = brrr_attn_pair(&qs[r0 + gq + 8][kk * 16 + 2 * tq + 8]);
  }
  // The lane's two rows (half 0: row gq, half 1: row gq + 8 of the warp's 16).
  const long long row[2] = {q0 + r0 + gq, q0 + r0 + gq + 8};
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
  float o[D / 8][4];
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  long long key_end = a.seq_k;
  if (a.causal) {
    const long long last = q0 + BRRR_ATTN_MMA_BQ - 1 + causal_off + 1;
    if (last < key_end) key_end = last < 0 ? 0 : last;
  }
  for (long long k0 = 0; k0 < key_end; k0 += BRRR_ATTN_MMA_BK) {
    __syncthreads();  // the previous tile's readers are done
#pragma unroll 1
    for (int e0 = tid; e0 < BRRR_ATTN_MMA_BK * D; e0 += kLoads * kThreads) {
      unsigned short tk[kLoads], tv[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int e = e0 + u * kThreads, j = e / D, d = e % D;
        const long long kj = k0 + j;
        const bool in = kj < a.seq_k;
        tk[u] = in ? K[kj * a.ks[2] + d * a.ks[3]].x : (unsigned short)0;
        tv[u] = in ? V[kj * a.vs[2] + d * a.vs[3]].x : (unsigned short)0;
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int e = e0 + u * kThreads, j = e / D, d = e % D;
        ks[j][d] = tk[u];
        vt[d][j] = tv[u];
      }
    }
    __syncthreads();
    // S (16 x 32) = Q K^T: 4 tiles of 16 x 8.
    float s[BRRR_ATTN_MMA_BK / 8][4];
#pragma unroll
    for (int nt = 0; nt < BRRR_ATTN_MMA_BK / 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        brrr_mma16816<T>(s[nt], qf[kk], brrr_attn_pair(&ks[nt * 8 + gq][kk * 16 + 2 * tq]),
                         brrr_attn_pair(&ks[nt * 8 + gq][kk * 16 + 2 * tq + 8]));
    }
    // Scale and masks; element c of tile nt is row half (c >> 1), key nt * 8 + 2 tq + (c & 1).
    float mx[2] = {NEG_INF, NEG_INF};
#pragma unroll
    for (int nt = 0; nt < BRRR_ATTN_MMA_BK / 8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const long long i = row[c >> 1], j = k0 + nt * 8 + 2 * tq + (c & 1);
        float v = NEG_INF;
        if (i < a.seq_q && j < a.seq_k && !(a.causal && j > i + causal_off)) {
          v = s[nt][c] * a.scale;
          if (B && ((B[i * a.bs[2] + j * a.bs[3]] != 0) != (a.keep_when != 0))) v = a.fill;
          if (M) v += brrr_ld(M + i * a.ms[2] + j * a.ms[3]);
        }
        s[nt][c] = v;
        mx[c >> 1] = fmaxf(mx[c >> 1], v);
      }
    float alpha[2], base[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {  // a row's values lie with the 4 lanes of its quad
      mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 1));
      mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 2));
      const float m_new = fmaxf(m[hf], mx[hf]);
      base[hf] = m_new == NEG_INF ? 0.0f : m_new;  // all -inf so far: exp gives 0, not NaN
      alpha[hf] = __expf(m[hf] - base[hf]);
      m[hf] = m_new;
    }
    unsigned pf[BRRR_ATTN_MMA_BK / 16][4];  // P as A fragments, one per 16 keys
#pragma unroll
    for (int nt = 0; nt < BRRR_ATTN_MMA_BK / 8; ++nt) {
      float p[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        p[c] = __expf(s[nt][c] - base[c >> 1]);
        sum[c >> 1] += p[c];
      }
      pf[nt / 2][(nt & 1) * 2 + 0] = brrr_pack(p, (const T*)0);      // row gq
      pf[nt / 2][(nt & 1) * 2 + 1] = brrr_pack(p + 2, (const T*)0);  // row gq + 8
    }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      sum[hf] += __shfl_xor_sync(0xffffffffu, sum[hf], 1);
      sum[hf] += __shfl_xor_sync(0xffffffffu, sum[hf], 2);
      l[hf] = l[hf] * alpha[hf] + sum[hf];
    }
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      o[nt][0] *= alpha[0], o[nt][1] *= alpha[0];
      o[nt][2] *= alpha[1], o[nt][3] *= alpha[1];
#pragma unroll
      for (int kk = 0; kk < BRRR_ATTN_MMA_BK / 16; ++kk)
        brrr_mma16816<T>(o[nt], pf[kk], brrr_attn_pair(&vt[nt * 8 + gq][kk * 16 + 2 * tq]),
                         brrr_attn_pair(&vt[nt * 8 + gq][kk * 16 + 2 * tq + 8]));
    }
  }
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const long long i = row[hf];
    if (i >= a.seq_q) continue;
    const float inv = l[hf] > 0.0f ? 1.0f / l[hf] : (a.zero_empty_rows ? 0.0f : __int_as_float(0x7fc00000));
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      const int d = nt * 8 + 2 * tq;
      brrr_st(O + i * a.os[2] + d * a.os[3], o[nt][hf * 2] * inv);
      brrr_st(O + i * a.os[2] + (d + 1) * a.os[3], o[nt][hf * 2 + 1] * inv);
    }
  }
}

#if !defined(BRRR_ATTN_SELECT) || defined(BRRR_ATTN_TC64_bf16)
extern "C" __global__ void __launch_bounds__(64) brrr_attention_mma64_bf16(const brrr_attn_args a) { brrr_attention_mma_t<brrr_bf16, 64>(a); }
#endif
#if !defined(BRRR_ATTN_SELECT) || defined(BRRR_ATTN_TC64_f16)
extern "C" __global__ void __launch_bounds__(64) brrr_attention_mma64_f16(const brrr_attn_args a) { brrr_attention_mma_t<brrr_f16, 64>(a); }
#endif
#if !defined(BRRR_ATTN_SELECT) || defined(BRRR_ATTN_TC128_bf16)
extern "C" __global__ void __launch_bounds__(64) brrr_attention_mma128_bf16(const brrr_attn_args a) { brrr_attention_mma_t<brrr_bf16, 128>(a); }
#endif
#if !defined(BRRR_ATTN_SELECT) || defined(BRRR_ATTN_TC128_f16)
extern "C" __global__ void __launch_bounds__(64) brrr_attention_mma128_f16(const brrr_attn_args a) { brrr_attention_mma_t<brrr_f16, 128>(a); }
#endif

// The flash path (cuda_executor_attention.cpp picks it for 16-bit data, head dims of 64 and 128
// and rows that are contiguous and 16-byte aligned, the layout every export gives). The kernel
// above ran BERT-base's batch 1 at 2.2 TFLOP/s, waiting on memory rather than computing: 48
// two-warp blocks for 132 SMs, and per 32-key tile 2-byte loads and stores through registers (a
// round trip to memory each), a transposing store of V, the mask read after Q K^T (another round
// trip) and two block barriers. Here:
// - K and V tiles go to shared memory as 16-byte cp.async copies, in their own 16-bit layout (no
//   transposition: ldmatrix.trans reads V's B fragments straight from its rows), two tiles in
//   flight, so the next tile arrives while this one computes.
// - Q goes from global memory straight into the A fragments (it is read once), no staging.
// - Each warp owns 16 query rows; the block has 1 to 4 warps (blockDim.x / 32, one kernel for
//   all: the shared memory is the K/V tiles', whatever the warps) sharing the K/V tiles. The
//   launch picks 1 when the grid would not fill the SMs (BERT-base batch 1: 96 one-warp blocks,
//   against 48 two-warp blocks before) and 4 when there is work enough to share tiles.
// - Mask values are read where a score is scaled, on tiles that need it only (no array of
//   preloaded values: 32 registers that kept a 4-warp block from fitting 3 to an SM); the
//   exporters' masks broadcast over rows and heads, so those reads hit L1.
// Rows are padded by 16 bytes so ldmatrix's eight row addresses fall in distinct banks.
// - With ksplit = 2 (grids too small to fill the SMs: BERT-base at batch 1 is 96 warps of 16
//   rows), two warps share each 16 query rows and split the key tiles between them (even tiles
//   to one, odd to the other, the two stages loaded together), then merge their running max,
//   sums and accumulators through shared memory: each warp's serial chain of tiles is halved.
#define BRRR_ATTN_FLASH_STAGES 2

// The flash kernel's two MMA loops over one K/V tile in shared memory (bases kbase, vbase; rows
// of LD elements). kFull (a plain tile, with full_tiles): every key group of the tile is live,
// so each loop is one straight block that the compiler schedules whole (ldmatrix loads ahead of
// the MMAs); else a branch per key group of 8 (Q K^T) or 16 (P V) skips those past seq_k.
// S (16 x BK) = Q K^T, K's B fragments for two 16-dim steps per ldmatrix (matrices: rows
// nt*8.., dims kk*16 + {0, 8, 16, 24}).
template <class T, int D, int BK, int LD, bool kFull>
static __device__ __forceinline__ void brrr_attn_flash_qk(float (&s)[BK / 8][4],
                                                          const unsigned (&qf)[D / 16][4],
                                                          unsigned kbase, int lane,
                                                          int live_keys) {
  const int k_row = lane & 7, k_col = (lane >> 3) * 8;
#pragma unroll
  for (int nt = 0; nt < BK / 8; ++nt) {
    s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
    if (!kFull && nt * 8 >= live_keys) continue;  // keys past seq_k: masked after
#pragma unroll
    for (int kk = 0; kk < D / 16; kk += 2) {
      unsigned kb[4];
      brrr_ldsm4(kb, kbase + 2u * (unsigned)((nt * 8 + k_row) * LD + kk * 16 + k_col));
      brrr_mma16816<T>(s[nt], qf[kk], kb[0], kb[1]);
      brrr_mma16816<T>(s[nt], qf[kk + 1], kb[2], kb[3]);
    }
  }
}
// O (16 x D) += P V, V's B fragments for two 8-dim tiles per ldmatrix.trans (matrices: keys
// kk*16 + {0, 8}, dims nt*8 + {0, 8}).
template <class T, int D, int BK, int LD, bool kFull>
static __device__ __forceinline__ void brrr_attn_flash_pv(float (&o)[D / 8][4],
                                                          const unsigned (&pf)[BK / 16][4],
                                                          unsigned vbase, int lane,
                                                          int live_keys) {
  const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8, v_col = (lane >> 4) * 8;
#pragma unroll
  for (int nt = 0; nt < D / 8; nt += 2)
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      if (!kFull && kk * 16 >= live_keys) continue;  // P is 0 there
      unsigned vb[4];
      brrr_ldsm4_t(vb, vbase + 2u * (unsigned)((kk * 16 + v_row) * LD + nt * 8 + v_col));
      brrr_mma16816<T>(o[nt], pf[kk], vb[0], vb[1]);
      brrr_mma16816<T>(o[nt + 1], pf[kk], vb[2], vb[3]);
    }
}

// 2^x (the hardware's approximation, as __expf uses; 2^-inf = 0).
static __device__ __forceinline__ float brrr_attn_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <class T, int D>
static __device__ __forceinline__ void brrr_attention_flash_t(const brrr_attn_args& a) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  brrr_grid_wait();  // launched dependent on the kernel before it (prelude.cuh)
  // Keys per tile. 32 for both head dims: at D = 64, 64-key tiles took 168-171 registers (the
  // scores and P fragments of 64 keys), 2 or 3 blocks of 4 warps per SM, and the warps waited
  // on each other's dependent chains with nothing else to issue; 32-key tiles fit 128 (4 blocks,
  // the launch bound below). Measured alone on the H100 (attn_micro.cu): ViT-B/16 b32 88 -> 63
  // us, GPT-2 b16 21.3 -> 14.2, BERT-base b32 53 -> 41, batch 1 level.
  constexpr int BK = 32;
  constexpr int LD = D + 8;              // row pitch in elements
  constexpr int kChunks = BK * D / 8;    // 16-byte pieces of one K (or V) tile
  __shared__ __align__(16) unsigned short ks[BRRR_ATTN_FLASH_STAGES][BK][LD];
  __shared__ __align__(16) unsigned short vs[BRRR_ATTN_FLASH_STAGES][BK][LD];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, threads = (int)blockDim.x;
  const int gq = lane >> 2, tq = lane & 3;
  // Warps split the keys ks ways: warp = row group * ks + part; each row group is 16 query rows.
  const int ks_n = a.ksplit == 2 ? 2 : 1, rg = warp / ks_n, part = warp % ks_n;
  const int rows_per_block = 16 * (threads / 32 / ks_n);
  const long long b = blockIdx.z, h = blockIdx.y, q0 = (long long)blockIdx.x * rows_per_block;
  const long long kvh = h / a.group;
  const T* Q = (const T*)a.q + b * a.qs[0] + h * a.qs[1];
  const T* K = (const T*)a.k + b * a.ks[0] + kvh * a.ks[1];
  const T* V = (const T*)a.v + b * a.vs[0] + kvh * a.vs[1];
  T* O = (T*)a.out + b * a.os[0] + h * a.os[1];
  const T* M = a.mask ? (const T*)a.mask + b * a.ms[0] + h * a.ms[1] : (const T*)0;
  const unsigned char* B = a.keep ? (const unsigned char*)a.keep + b * a.bs[0] + h * a.bs[1]
                                  : (const unsigned char*)0;
  const float NEG_INF = __int_as_float(0xff800000);
  const long long causal_off = a.seq_k - a.seq_q;
  long long key_end = a.seq_k;
  if (a.causal) {  // keys past the block's last query row are masked for all of its rows
    const long long last = q0 + rows_per_block - 1 + causal_off + 1;
    if (last < key_end) key_end = last < 0 ? 0 : last;
  }
  const int tiles = (int)((key_end + BK - 1) / BK);
  // Tile t of K and V into stage st; rows past seq_k read nothing and fill zeros. Each thread
  // copies the same 16 bytes (column lc) of every lstep-th row from lr0 (threads is a multiple
  // of D / 8), so its addresses are a pointer and a shared offset stepped per row, not index
  // math per piece (that was ~90 instructions per K and V pair, a third of a tile's).
  static_assert(BK * D / 8 == kChunks, "16-byte pieces per tile");
  auto load_tile = [&](int t, int st) {
    const int lc = (tid % (D / 8)) * 8, lr0 = tid / (D / 8), lstep = threads / (D / 8);
    const long long j0 = (long long)t * BK + lr0;
    const T* kp = K + j0 * a.ks[2] + lc;
    const T* vp = V + j0 * a.vs[2] + lc;
    const long long kstep = lstep * a.ks[2], vstep = lstep * a.vs[2];
    const unsigned kd = brrr_smem_u32(&ks[st][lr0][lc]), vd = brrr_smem_u32(&vs[st][lr0][lc]);
#pragma unroll 4
    for (int r = 0; r < BK; r += lstep) {
      const bool in = j0 + r < a.seq_k;
      brrr_cp16(kd + r * (LD * 2), in ? (const void*)kp : (const void*)K, in ? 16 : 0);
      brrr_cp16(vd + r * (LD * 2), in ? (const void*)vp : (const void*)V, in ? 16 : 0);
      kp += kstep;
      vp += vstep;
    }
  };
#pragma unroll
  for (int st = 0; st < BRRR_ATTN_FLASH_STAGES; ++st) {
    if (st < tiles) load_tile(st, st);
    brrr_cp_commit();  // an empty group past the end keeps the wait counts uniform
  }
  // This warp's 16 rows of Q as A fragments (rows past seq_q read as zeros, never stored).
  const long long row[2] = {q0 + rg * 16 + gq, q0 + rg * 16 + gq + 8};
  unsigned qf[D / 16][4];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const bool in = row[hf] < a.seq_q;
    const unsigned short* qr = (const unsigned short*)(Q + (in ? row[hf] : 0) * a.qs[2]);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      qf[kk][hf] = in ? brrr_attn_pair(qr + kk * 16 + 2 * tq) : 0u;
      qf[kk][hf + 2] = in ? brrr_attn_pair(qr + kk * 16 + 2 * tq + 8) : 0u;
    }
  }
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
  float o[D / 8][4];
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;

  // Scores live in the log2 domain (scale * log2(e) folded into one multiply), so each
  // probability is one ex2 of a difference. The warp's first query row:
  const long long wrow0 = q0 + rg * 16;
  const float scale2 = a.scale * 1.4426950408889634f;
#pragma unroll 1
  for (int t0 = 0; t0 < tiles; t0 += ks_n) {
    // Split: part p takes tile t0 + p from stage p (both stages land together); else the
    // pipeline's stage.
    const int t = t0 + part;
    const int st = ks_n == 2 ? part : t % BRRR_ATTN_FLASH_STAGES;
    const long long k0 = (long long)t * BK;
    // With fast_tiles (warp-uniform): a warp whose rows are all past seq_q, or whose rows see no
    // key of this tile (causal), only helps load the tiles; a tile with every row and key in
    // range, no mask and no causal cut is "plain": no per-score bounds or mask work; key groups
    // of 8 (then 16) wholly past seq_k skip their MMAs (ViT's 197 keys: the last 32-key tile
    // holds 5).
    const bool dead = t >= tiles ||  // the split's odd tile out: its stage holds no tile
                      (a.fast_tiles &&
                       (wrow0 >= a.seq_q || (a.causal && k0 > wrow0 + 15 + causal_off)));
    const bool plain = a.fast_tiles && !M && !B && wrow0 + 16 <= a.seq_q &&
                       k0 + BK <= a.seq_k && !(a.causal && k0 + BK - 1 > wrow0 + causal_off);
    const long long live_keys = a.fast_tiles ? a.seq_k - k0 : (long long)BK;  // >= 1
    if (ks_n == 2)
      brrr_cp_wait<0>();  // both stages' tiles
    else
      brrr_cp_wait<BRRR_ATTN_FLASH_STAGES - 1>();  // this thread's copies of tile t are done
    __syncthreads();                                 // and every thread's
    if (!dead) {
    const unsigned kbase = brrr_smem_u32(&ks[st][0][0]), vbase = brrr_smem_u32(&vs[st][0][0]);
    const bool full = a.full_tiles && plain;
    const int live = live_keys < BK ? (int)live_keys : BK;
    float s[BK / 8][4];
    if (full)
      brrr_attn_flash_qk<T, D, BK, LD, true>(s, qf, kbase, lane, live);
    else
      brrr_attn_flash_qk<T, D, BK, LD, false>(s, qf, kbase, lane, live);
    // Scale and masks, into the log2 domain; element c of tile nt is row half (c >> 1), key
    // nt * 8 + 2 tq + (c & 1).
    float mx[2] = {NEG_INF, NEG_INF};
    if (plain) {
#pragma unroll
      for (int nt = 0; nt < BK / 8; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          s[nt][c] *= scale2;
          mx[c >> 1] = fmaxf(mx[c >> 1], s[nt][c]);
        }
    } else {
#pragma unroll
      for (int nt = 0; nt < BK / 8; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const long long i = row[c >> 1], j = k0 + nt * 8 + 2 * tq + (c & 1);
          float v = NEG_INF;
          if (i < a.seq_q && j < a.seq_k && !(a.causal && j > i + causal_off)) {
            v = s[nt][c] * a.scale;
            if (B && ((B[i * a.bs[2] + j * a.bs[3]] != 0) != (a.keep_when != 0))) v = a.fill;
            if (M) v += brrr_ld(M + i * a.ms[2] + j * a.ms[3]);
            v *= 1.4426950408889634f;
          }
          s[nt][c] = v;
          mx[c >> 1] = fmaxf(mx[c >> 1], v);
        }
    }
    float alpha[2], base[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {  // a row's values lie with the 4 lanes of its quad
      mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 1));
      mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 2));
      const float m_new = fmaxf(m[hf], mx[hf]);
      base[hf] = m_new == NEG_INF ? 0.0f : m_new;  // all -inf so far: exp gives 0, not NaN
      alpha[hf] = brrr_attn_ex2(m[hf] - base[hf]);
      m[hf] = m_new;
    }
    unsigned pf[BK / 16][4];  // P as A fragments, one per 16 keys (as in brrr_attention_mma_t)
#pragma unroll
    for (int nt = 0; nt < BK / 8; ++nt) {
      float p[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        p[c] = brrr_attn_ex2(s[nt][c] - base[c >> 1]);
        sum[c >> 1] += p[c];
      }
      pf[nt / 2][(nt & 1) * 2 + 0] = brrr_pack(p, (const T*)0);
      pf[nt / 2][(nt & 1) * 2 + 1] = brrr_pack(p + 2, (const T*)0);
    }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      sum[hf] += __shfl_xor_sync(0xffffffffu, sum[hf], 1);
      sum[hf] += __shfl_xor_sync(0xffffffffu, sum[hf], 2);
      l[hf] = l[hf] * alpha[hf] + sum[hf];
    }
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      o[nt][0] *= alpha[0], o[nt][1] *= alpha[0];
      o[nt][2] *= alpha[1], o[nt][3] *= alpha[1];
    }
    if (full)
      brrr_attn_flash_pv<T, D, BK, LD, true>(o, pf, vbase, lane, live);
    else
      brrr_attn_flash_pv<T, D, BK, LD, false>(o, pf, vbase, lane, live);
    }  // !dead
    __syncthreads();  // every warp is done with stage st before it is refilled
    if (ks_n == 2) {
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        if (t0 + 2 + p < tiles) load_tile(t0 + 2 + p, p);
        brrr_cp_commit();
      }
    } else {
      if (t + BRRR_ATTN_FLASH_STAGES < tiles) load_tile(t + BRRR_ATTN_FLASH_STAGES, st);
      brrr_cp_commit();
    }
  }
  brrr_cp_wait<0>();  // no copy outlives the block
  if (ks_n == 2) {
    // Merge the two parts of each row group: part 1 leaves its fragments (in fragment order, a
    // lane's values 32 floats apart), maxima and sums in the K stages' memory; part 0 rescales
    // both to the larger max and adds them (as between tiles), then stores the rows.
    constexpr int kVals = D / 2 + 4;  // o[D / 8][4], then m[2], l[2]
    static_assert(sizeof(ks) >= 2 * kVals * 32 * sizeof(float), "merge buffer");
    float* buf = reinterpret_cast<float*>(&ks[0][0][0]) + rg * kVals * 32;
    __syncthreads();  // every warp is done with the stages
    if (part == 1) {
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) buf[(nt * 4 + c) * 32 + lane] = o[nt][c];
      buf[(D / 2 + 0) * 32 + lane] = m[0];
      buf[(D / 2 + 1) * 32 + lane] = m[1];
      buf[(D / 2 + 2) * 32 + lane] = l[0];
      buf[(D / 2 + 3) * 32 + lane] = l[1];
    }
    __syncthreads();
    if (part == 1) return;  // no barrier follows
    float a0[2], a1[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const float m1 = buf[(D / 2 + hf) * 32 + lane], l1 = buf[(D / 2 + 2 + hf) * 32 + lane];
      const float mm = fmaxf(m[hf], m1);
      const float base = mm == NEG_INF ? 0.0f : mm;  // both parts saw only masked keys: l = 0
      a0[hf] = brrr_attn_ex2(m[hf] - base);
      a1[hf] = brrr_attn_ex2(m1 - base);
      l[hf] = l[hf] * a0[hf] + l1 * a1[hf];
    }
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        o[nt][c] = o[nt][c] * a0[c >> 1] + buf[(nt * 4 + c) * 32 + lane] * a1[c >> 1];
  }
  // Out: each lane's two adjacent dims as one 4-byte store (out rows are contiguous).
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const long long i = row[hf];
    if (i >= a.seq_q) continue;
    const float inv = l[hf] > 0.0f ? 1.0f / l[hf] : (a.zero_empty_rows ? 0.0f : __int_as_float(0x7fc00000));
    T* orow = O + i * a.os[2];
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      const float v[2] = {o[nt][hf * 2] * inv, o[nt][hf * 2 + 1] * inv};
      *reinterpret_cast<unsigned*>(orow + nt * 8 + 2 * tq) = brrr_pack(v, (const T*)0);
    }
  }
#else
  __trap();  // the host picks this kernel on sm_80 and later only
#endif
}

// 32, 64 or 128 threads (cuda_executor_attention.cpp's flash_warps); at D = 64 at most 128
// registers, so 4 blocks of 4 warps fit an SM (unbounded, ptxas took 141 on the H100: 3 blocks,
// ViT-B/16 b32 69 against 63 us).
#if !defined(BRRR_ATTN_SELECT) || defined(BRRR_ATTN_TC64_bf16)
extern "C" __global__ void __launch_bounds__(128, 4) brrr_attention_flash64_bf16(const brrr_attn_args a) { brrr_attention_flash_t<brrr_bf16, 64>(a); }
#endif
#if !defined(BRRR_ATTN_SELECT) || defined(BRRR_ATTN_TC64_f16)
extern "C" __global__ void __launch_bounds__(128, 4) brrr_attention_flash64_f16(const brrr_attn_args a) { brrr_attention_flash_t<brrr_f16, 64>(a); }
#endif
#if !defined(BRRR_ATTN_SELECT) || defined(BRRR_ATTN_TC128_bf16)
extern "C" __global__ void __launch_bounds__(128) brrr_attention_flash128_bf16(const brrr_attn_args a) { brrr_attention_flash_t<brrr_bf16, 128>(a); }
#endif
#if !defined(BRRR_ATTN_SELECT) || defined(BRRR_ATTN_TC128_f16)
extern "C" __global__ void __launch_bounds__(128) brrr_attention_flash128_f16(const brrr_attn_args a) { brrr_attention_flash_t<brrr_f16, 128>(a); }
#endif
#endif
