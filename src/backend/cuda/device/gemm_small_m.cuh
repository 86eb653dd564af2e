// A GEMM for few rows (a transformer at batch 1: M = 128 tokens) with K split over a
// thread-block cluster: C[M,N] = act(A[M,K] @ B[K,N] + bias[N]), 16-bit row-major operands,
// float32 accumulation, one kernel (gemm_small_m.hpp decides where it runs).
//
// Why: at M = 128 a library GEMM covers BERT-base's 128x768 output with a handful of tiles, so
// a few SMs walk all of K while the rest idle (the FFN down-projection, K = 3072, took 7.7 us for
// 4.7 MB of weights and 0.6 GFLOP). Here a CTA computes a 128x64 tile over 1/S of K, the S CTAs
// of a tile form a cluster, and each reduces its share of the tile's rows over the cluster's
// shared memory (DSMEM) in a fixed order and writes it with the bias and activation: no
// workspace, no atomics, no second kernel, the same bits every run.
//
// Grid (S, ceil(N/BN), ceil(M/128)), cluster (S, 1, 1), BRRR_GSK_THREADS(BN) threads (BN = 32, 64
// or 128 columns): each warp owns 32 rows x min(BN, 64) columns (2 x 4 or 2 x 8 mma.sync
// m16n8k16 tiles). A and B stream through ST stages of 64-wide K steps in dynamic shared memory
// (3 by default: 71, 83 or 108 KB, two CTAs per SM or more; a version with 3 stages of 32-wide
// steps kept too few bytes in flight, one with 4 stages of 64 fitted one CTA per SM and its
// clusters did not all fit at once; BRRR_SMALL_M_STAGES tries others). Rows are padded 16 bytes
// so ldmatrix addresses fall in distinct banks. The host requires K and N multiples of 8 and
// 16-byte aligned A, B and C. Where its time goes at 128 rows: gemm_small_m.hpp.
//
// Launched dependent (BRRR_CUDA_PDL): a constant B (the weights) is asked into L2 and its first
// stages copied before the kernel waits on the one before it, so with BRRR_CUDA_PDL=2 (the kernel
// before lets this one launch early) the weights' DRAM latency overlaps that kernel.
#pragma once

struct brrr_gemm_sk_args {
  const void* a;     // [M, K]
  const void* b;     // [K, N]
  void* c;           // [M, N]
  const void* bias;  // [N] of the data's type; null: none
  long long m, n, k;
  int act;      // 0 none, 1 ReLU, 2 GELU (tanh form), 3 GELU (erf)
  int b_const;  // 1: B is a constant no kernel writes: read before waiting on the kernel before
};

// The tile's rows, K step and stages, and the launch geometry the host sets from them
// (gemm_small_m.cpp reads these same macros).
#define BRRR_GSK_BM 128
#define BRRR_GSK_BK 64
// Threads of the kernel with BN output columns per CTA: 4 warps per 64 columns (at least 4).
#define BRRR_GSK_THREADS(BN) (128 * ((BN) > 64 ? (BN) / 64 : 1))
// Dynamic shared memory of the kernel with BN output columns per CTA and ST stages.
#define BRRR_GSK_SMEM_BYTES(BN, ST) \
  ((ST) * (BRRR_GSK_BM * (BRRR_GSK_BK + 8) + BRRR_GSK_BK * ((BN) + 8)) * 2)

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "backend/cuda/device/mma.cuh"

// Four floats of the shared memory of CTA `rank` of the cluster, at `local`'s offset.
static __device__ __forceinline__ float4 brrr_gsk_ld_cluster4(const float* local, unsigned rank) {
  unsigned a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(brrr_smem_u32(local)), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a) : "memory");
  return v;
}
static __device__ __forceinline__ void brrr_gsk_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

template <class T, int BN, int S, int ST>
static __device__ __forceinline__ void brrr_gemm_sk_t(const brrr_gemm_sk_args& p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Each warp owns 32 rows x WN columns (NI 8-column MMA fragments); 4 warps cover the 128 rows.
  constexpr int WN = BN < 64 ? BN : 64, NI = WN / 8;
  constexpr int BM = BRRR_GSK_BM, BK = BRRR_GSK_BK, NT = BRRR_GSK_THREADS(BN);
  static_assert(ST >= 2, "at least one stage in flight while one is consumed");
  static_assert(NT == 128 * (BN / WN), "4 warps per WN columns");
  constexpr int LDA = BK + 8, LDB = BN + 8, LDP = BN + 4;  // row pitches, padded 16 bytes
  constexpr int A_STAGE = BM * LDA, STAGE = A_STAGE + BK * LDB;  // elements
  static_assert(BM * LDP * 4 <= ST * STAGE * 2, "the partial tile reuses the stages' memory");
  extern __shared__ __align__(16) unsigned short sm[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp & 3, wn = warp >> 2;  // the warp's 32 rows and WN columns of the tile
  const int split = (int)blockIdx.x;  // cluster (S, 1, 1), grid.x == S: the rank is blockIdx.x
  const long long M = p.m, N = p.n, K = p.k;
  const long long n0 = (long long)blockIdx.y * BN, m0 = (long long)blockIdx.z * BM;
  const long long KT = (K + BK - 1) / BK;
  const long long kt0 = KT * split / S;
  const int nt = (int)(KT * (split + 1) / S - kt0);
  const unsigned short* A = static_cast<const unsigned short*>(p.a);
  const unsigned short* B = static_cast<const unsigned short*>(p.b);
  const unsigned base = brrr_smem_u32(sm);

  // Step `it` of this CTA's K range into stage `slot`, A's part and B's; chunks past M, N or K
  // read as zeros.
  auto load_a = [&](int it, int slot) {
    const long long k0 = (kt0 + it) * BK;
    const unsigned sa = base + 2u * (unsigned)(slot * STAGE);
#pragma unroll
    for (int i = 0; i < BM * BK / 8 / NT; ++i) {  // A: BM rows x BK/8 chunks of 8
      const int c = tid + i * NT, r = c / (BK / 8), q = c % (BK / 8);
      const long long gr = m0 + r, gk = k0 + q * 8;
      const bool in = gr < M && gk < K;
      brrr_cp16(sa + 2u * (unsigned)(r * LDA + q * 8), in ? A + gr * K + gk : A, in ? 16 : 0);
    }
  };
  auto load_b = [&](int it, int slot) {
    const long long k0 = (kt0 + it) * BK;
    const unsigned sb = base + 2u * (unsigned)(slot * STAGE + A_STAGE);
#pragma unroll
    for (int i = 0; i < BK * BN / 8 / NT; ++i) {  // B: BK rows x BN/8 chunks of 8
      const int c = tid + i * NT, r = c / (BN / 8), q = c % (BN / 8);
      const long long gk = k0 + r, gn = n0 + q * 8;
      const bool in = gk < K && gn < N;
      brrr_cp16(sb + 2u * (unsigned)(r * LDB + q * 8), in ? B + gk * N + gn : B, in ? 16 : 0);
    }
  };

  float acc[2][NI][4];
  brrr_zero_acc(acc);

  // Constant weights need nothing of the kernel before (launched dependent, BRRR_CUDA_PDL): the
  // rest of this CTA's slice of B is asked into L2 and the first stages' B copies are issued
  // before the wait, while that kernel may still run. They join the first stage's copy group.
  const bool early_b = p.b_const != 0;
  if (early_b) {
    const long long r0 = (kt0 + ST - 1) * BK, r1 = min(K, (kt0 + nt) * BK);
    for (long long r = r0 + tid; r < r1; r += NT)
#pragma unroll
      for (int l = 0; l < (BN + 63) / 64; ++l)  // 128-byte lines of BN 16-bit columns
        if (n0 + l * 64 < N) asm volatile("prefetch.global.L2 [%0];" ::"l"(B + r * N + n0 + l * 64));
#pragma unroll
    for (int s = 0; s < ST - 1; ++s)
      if (s < nt) load_b(s, s);
  }
  brrr_grid_wait();  // A (and a B that is not constant) may come from the kernel before
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < nt) {
      if (!early_b) load_b(s, s);
      load_a(s, s);
    }
    brrr_cp_commit();  // empty groups past the end keep the wait counts uniform
  }
  for (int it = 0; it < nt; ++it) {
    brrr_cp_wait<ST - 2>();  // this thread's copies of step `it` are done ...
    __syncthreads();         // ... and everyone's, and the stage refilled below is consumed
    if (it + ST - 1 < nt) {
      load_a(it + ST - 1, (it + ST - 1) % ST);
      load_b(it + ST - 1, (it + ST - 1) % ST);
    }
    brrr_cp_commit();
    const unsigned sa = base + 2u * (unsigned)((it % ST) * STAGE);
    const unsigned sb = sa + 2u * A_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      unsigned af[2][4], bf[NI / 2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        brrr_ldsm4(af[mi], sa + 2u * (unsigned)((wm * 32 + mi * 16 + (lane & 15)) * LDA +
                                                kk * 16 + (lane >> 4) * 8));
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj)  // two 8-column B fragments per transposed ldmatrix
        brrr_ldsm4_t(bf[nj], sb + 2u * (unsigned)((kk * 16 + (lane & 15)) * LDB + wn * WN + nj * 16 +
                                                  (lane >> 4) * 8));
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
          brrr_mma16816<T>(acc[mi][ni], af[mi], bf[ni >> 1][(ni & 1) * 2], bf[ni >> 1][(ni & 1) * 2 + 1]);
    }
  }
  brrr_cp_wait<0>();
  __syncthreads();  // the stages are free: the partial tile goes over them

  float* P = reinterpret_cast<float*>(sm);
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int r = wm * 32 + mi * 16 + (lane >> 2), c = wn * WN + ni * 8 + 2 * (lane & 3);
      *reinterpret_cast<float2*>(&P[r * LDP + c]) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
      *reinterpret_cast<float2*>(&P[(r + 8) * LDP + c]) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
    }
  brrr_gsk_cluster_sync();  // every CTA's partial tile is written and visible to the cluster

  // This CTA's share of the rows: the sum over the cluster in rank order, then bias, activation
  // and the 16-bit store, four columns at a time.
  const int rows = (BM + S - 1) / S, r0 = split * rows;
  T* C = static_cast<T*>(p.c);
  const T* bias = static_cast<const T*>(p.bias);
  for (int i = tid; i < rows * (BN / 4); i += NT) {
    const int r = r0 + i / (BN / 4), c = (i % (BN / 4)) * 4;
    const long long gr = m0 + r, gc = n0 + c;
    if (r >= BM || gr >= M || gc >= N) continue;  // N is a multiple of 8: 4 columns all in or out
    float4 t[S];  // every rank's part in flight at once, then summed in rank order
#pragma unroll
    for (int q = 0; q < S; ++q) t[q] = brrr_gsk_ld_cluster4(&P[r * LDP + c], (unsigned)q);
    float v[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int q = 0; q < S; ++q) {
      v[0] += t[q].x; v[1] += t[q].y; v[2] += t[q].z; v[3] += t[q].w;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = v[e] + (bias ? brrr_ld(bias + gc + e) : 0.f);
      if (p.act == 1) x = brrr_relu(x);
      else if (p.act == 2) x = brrr_gelu_tanh(x);
      else if (p.act == 3) x = brrr_gelu_erf(x);
      v[e] = x;
    }
    brrr_st4(C + gr * N + gc, v);
  }
  brrr_gsk_cluster_sync();  // no CTA leaves while another still reads its shared memory
#endif
}

// One kernel per type, tile width BN (32 or 64: 4 warps, 128: 8), cluster size S (the split
// count) and ST stages (3: two CTAs per SM; more: one; gemm_small_m.cpp emits those a plan uses).
#define BRRR_GEMM_SK(TN, T, BN, S, ST)                                                            \
  extern "C" __global__ void __cluster_dims__(S, 1, 1)                                            \
      __launch_bounds__(BRRR_GSK_THREADS(BN), (ST) <= 3 ? 2 : 1)                                  \
      brrr_gemm_sk_##TN##_n##BN##_s##S##_st##ST(const brrr_gemm_sk_args a) {                      \
    brrr_gemm_sk_t<T, BN, S, ST>(a);                                                              \
  }

#endif
