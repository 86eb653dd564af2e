// A GEMM for few rows (a transformer at batch 1: M = 128 tokens) that reads A once per cluster:
// C[M,N] = act(A[M,K] @ B[K,N] + bias[N]), 16-bit row-major operands, float32 accumulation.
// Experimental (BRRR_SMALL_M_KERNEL=multicast): correct, but slower than cuBLASLt.
//
// Why it was written: the small-M split-K kernel (gemm_small_m.cuh) re-reads A from L2 once per
// 128 x 32 tile, 72 times over for BERT-base's Q/K/V GEMM (about 14 MB through L2 for 3.5 MB of
// weights), and that looked like what held it to 0.2-0.3 us per 64-wide K step (docs/CUDA.md,
// session of 2026-12-07, seventeenth). Here the CN CTAs of a cluster compute CN neighbouring
// 128 x BN tiles over the same K range, and each copies 1/CN of A's rows (a TMA box of a 2D
// tensor map, 128-byte swizzled) multicast to all of them, so A crosses L2 once per cluster.
// Each CTA copies its own B (the weights, from DRAM) with 16-byte cp.async.
//
// What it measured (H100, eighteenth session): the cluster size changes nothing (1, 2, 4 and 8
// CTAs within 5% at every BERT shape), so A's re-reads were not the limit. In the model each
// GEMM costs a fixed 7-10 us plus about 0.35 us a K step (Q/K/V 11.2 us against cuBLASLt's 5.5).
// A first version with one 128-byte bulk copy per row of A and B took 50 us a GEMM.
//
// K is split over gridDim.y: each split's float32 partial tile goes to a workspace, and the last
// CTA of a tile to arrive (an atomic counter per tile) sums all of them in split order, adds the
// bias, applies the activation and stores the 16-bit result, then zeroes the counter for the next
// run: the same bits every run, no second kernel, no cluster needed for the sum.
//
// Grid (ceil(N/BN) rounded up to CN, S, ceil(M/128)), cluster (CN, 1, 1), BRRR_GMC_THREADS(BN)
// threads: each warp owns 32 rows x 32 columns (2 x 4 mma.sync m16n8k16). ST stages of 64-wide K
// steps in dynamic shared memory; A's part of a stage completes on an mbarrier counting its
// bytes, B's on cp.async groups. A CTA refills a stage one step after the cluster barrier says
// every CTA of the cluster is done with it (the barrier's arrive and wait are a step apart, so
// CTAs in step never stall on it). The host requires K a multiple of 64, N of 8, 16-byte
// aligned A, B and C, CN of 1, 2, 4 or 8, and S at most K/64.
//
// Launched dependent (BRRR_CUDA_PDL): a constant B is copied for the first stages before the
// kernel waits on the one before it.
#pragma once

// A CUtensorMap (cuda.h), encoded by the host: A [M, K] as a 2D tensor of 16-bit elements,
// boxes of 64 columns x 128/CN rows, 128-byte swizzle, zeros past the edges.
struct alignas(64) brrr_gmc_tmap { unsigned long long w[16]; };

struct brrr_gmc_args {
  brrr_gmc_tmap a_map;  // A, for the tensor copies (the kernel parameter is __grid_constant__)
  const void* b;        // [K, N]
  void* c;              // [M, N]
  const void* bias;     // [N] of the data's type; null: none
  float* ws;            // gridDim.y > 1: [tiles][splits][128][BN] float32 partials
  unsigned* counters;   // gridDim.y > 1: one per tile (gridDim.x * gridDim.z), zero between runs
  long long m, n, k;
  int act;      // 0 none, 1 ReLU, 2 GELU (tanh form), 3 GELU (erf)
  int b_const;  // 1: B is a constant no kernel writes: copied before waiting on the kernel before
};

#define BRRR_GMC_BM 128
#define BRRR_GMC_BK 64
// Threads with BN output columns per CTA: one warp per 32 rows x 32 columns.
#define BRRR_GMC_THREADS(BN) (128 * ((BN) / 32))
// A stage: A's 128 x 64 tile, dense and swizzled (16 KB, 1024-byte aligned), then B's 64 x BN
// tile with rows padded 16 bytes.
#define BRRR_GMC_STAGE_BYTES(BN) (BRRR_GMC_BM * BRRR_GMC_BK * 2 + BRRR_GMC_BK * ((BN) + 8) * 2)
// Dynamic shared memory: 1 KB to align the stages, ST stages, their ST mbarriers.
#define BRRR_GMC_SMEM_BYTES(BN, ST) (1024 + (ST) * BRRR_GMC_STAGE_BYTES(BN) + (ST) * 8)

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "backend/cuda/device/mma.cuh"

static __device__ __forceinline__ void brrr_gmc_cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
// Relaxed: no release fence (with one, BERT-base's Q/K/V GEMM took 15.1 us in gemm_rows_micro
// on an H100, 10.3 us without; the guess is that the fence waits for the thread's B copies in
// flight). What it orders is this thread's ldmatrix reads of the stage, and those have
// returned: the MMAs issued before it consumed them.
static __device__ __forceinline__ void brrr_gmc_cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
static __device__ __forceinline__ void brrr_gmc_cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
static __device__ __forceinline__ void brrr_gmc_expect(unsigned bar, unsigned bytes) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }"
               :: "r"(bar), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void brrr_gmc_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
                 "selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}
// A box of the tensor map at (column x, row y) into this CTA's shared memory, or (CN > 1) into
// every CTA's of the cluster at the same offset, completing on the mbarrier there.
template <int CN>
static __device__ __forceinline__ void brrr_gmc_tensor_copy(unsigned dst, const brrr_gmc_tmap* map, int x, int y,
                                                           unsigned bar) {
  if (CN == 1)
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
  else
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;"
                 :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar), "h"((unsigned short)((1u << CN) - 1)) : "memory");
}

template <class T, int BN, int CN, int ST>
static __device__ __forceinline__ void brrr_gemm_mc_t(const brrr_gmc_args& p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int BM = BRRR_GMC_BM, BK = BRRR_GMC_BK, NT = BRRR_GMC_THREADS(BN), NI = 4;
  static_assert(ST >= 3, "a stage refilled a step after it is consumed, one more in flight");
  static_assert(BN % 32 == 0 && (CN == 1 || CN == 2 || CN == 4 || CN == 8), "32-column warps; 128/CN rows a box");
  constexpr int LDB = BN + 8;                   // B's row pitch, padded 16 bytes
  constexpr unsigned A_BYTES = BM * BK * 2, STAGE = BRRR_GMC_STAGE_BYTES(BN), BOX_ROWS = BM / CN;
  extern __shared__ __align__(16) unsigned short sm[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp & 3, wn = warp >> 2;  // the warp's 32 rows and 32 columns of the tile
  unsigned rank;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const int S = (int)gridDim.y, split = (int)blockIdx.y;
  const long long M = p.m, N = p.n, K = p.k;
  const long long n0 = (long long)blockIdx.x * BN, m0 = (long long)blockIdx.z * BM;
  const long long KT = K / BK, kt0 = KT * split / S;
  const int nt = (int)(KT * (split + 1) / S - kt0);
  const int rows = (int)(M - m0 < BM ? M - m0 : BM);                 // rows of this tile
  const int cols = n0 >= N ? 0 : (int)(N - n0 < BN ? N - n0 : BN);  // 0: a CTA padding the cluster
  const unsigned short* B = static_cast<const unsigned short*>(p.b);
  // The stages from the first 1024-byte boundary (the swizzle repeats every 1024 bytes); the
  // same offsets in every CTA, as the multicast needs.
  const unsigned base = (brrr_smem_u32(sm) + 1023u) & ~1023u, bar0 = base + ST * STAGE;

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < ST; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 8u * s) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&p.a_map) : "memory");
  }
  brrr_gmc_cluster_arrive();  // every CTA's mbarriers exist before any copy lands in it
  brrr_gmc_cluster_wait();

  // B's step `it` into stage `slot` with 16-byte cp.async per thread (chunks past N or K read
  // as zeros); A's: this CTA's box of 128/CN rows, multicast to the cluster, by thread 0.
  auto load_b = [&](int it, int slot) {
    const long long k0 = (kt0 + it) * BK;
    const unsigned sb = base + slot * STAGE + A_BYTES;
#pragma unroll
    for (int i = 0; i < BK * BN / 8 / NT; ++i) {
      const int c = tid + i * NT, r = c / (BN / 8), q = c % (BN / 8);
      const long long gk = k0 + r, gn = n0 + q * 8;
      const bool in = gk < K && gn < N;
      brrr_cp16(sb + 2u * (unsigned)(r * LDB + q * 8), in ? B + gk * N + gn : B, in ? 16 : 0);
    }
  };
  auto load_a = [&](int it, int slot) {
    if (tid != 0) return;
    const unsigned bar = bar0 + 8u * slot;
    brrr_gmc_expect(bar, A_BYTES);  // all CN boxes land here, zeros past M included
    brrr_gmc_tensor_copy<CN>(base + slot * STAGE + rank * BOX_ROWS * BK * 2, &p.a_map, (int)((kt0 + it) * BK),
                             (int)(m0 + rank * BOX_ROWS), bar);
  };

  // The first ST - 1 steps: a constant B before the wait on the kernel before (launched
  // dependent), A after it. One cp.async group per step, empty past the end.
  const bool early_b = p.b_const != 0;
  if (early_b)
#pragma unroll
    for (int s = 0; s < ST - 1; ++s)
      if (s < nt) load_b(s, s);
  brrr_grid_wait();
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < nt) {
      if (!early_b) load_b(s, s);
      load_a(s, s);
    }
    brrr_cp_commit();
  }

  float acc[2][NI][4];
  brrr_zero_acc(acc);

  for (int it = 0; it < nt; ++it) {
    const int slot = it % ST;
    brrr_cp_wait<ST - 2>();  // this thread's B copies of step `it` are done ...
    __syncthreads();         // ... and everyone's
    brrr_gmc_wait(bar0 + 8u * slot, (unsigned)(it / ST) & 1u);  // A's boxes have landed
    const unsigned sa = base + slot * STAGE, sb = sa + A_BYTES;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      unsigned af[2][4], bf[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {  // 128-byte swizzle: 16-byte chunk q of row r at q ^ (r % 8)
        const int r = wm * 32 + mi * 16 + (lane & 15), q = kk * 2 + (lane >> 4);
        brrr_ldsm4(af[mi], sa + (unsigned)(r * 128 + ((q ^ (r & 7)) << 4)));
      }
#pragma unroll
      for (int nj = 0; nj < 2; ++nj)  // two 8-column B fragments per transposed ldmatrix
        brrr_ldsm4_t(bf[nj], sb + 2u * (unsigned)((kk * 16 + (lane & 15)) * LDB + wn * 32 + nj * 16 + (lane >> 4) * 8));
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
          brrr_mma16816<T>(acc[mi][ni], af[mi], bf[ni >> 1][(ni & 1) * 2], bf[ni >> 1][(ni & 1) * 2 + 1]);
    }
    // The stage of step it - 1 is free in every CTA of the cluster once all have passed the
    // arrive after that step: refill it with step it + ST - 1, then say this step is done.
    // Alone (CN 1), this CTA's threads passed the __syncthreads above after step it - 1.
    if (CN > 1) {
      if (it > 0) brrr_gmc_cluster_wait();
      brrr_gmc_cluster_arrive_relaxed();
    }
    const int nx = it + ST - 1;
    if (nx < nt) {
      load_b(nx, nx % ST);
      load_a(nx, nx % ST);
    }
    brrr_cp_commit();
  }

  // The epilogue, from the accumulators: with a K split, this CTA's partial goes to the
  // workspace and the tile's last CTA sums them all in split order.
  const unsigned tile = blockIdx.z * gridDim.x + blockIdx.x;
  bool store = cols > 0 && nt > 0;
  if (store && S > 1) {
    __shared__ unsigned last;
    float* W = p.ws + (size_t)tile * S * BM * BN;
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int r = wm * 32 + mi * 16 + (lane >> 2), c = wn * 32 + ni * 8 + 2 * (lane & 3);
        float* w = W + (size_t)split * BM * BN;
        __stcg(reinterpret_cast<float2*>(w + r * BN + c), make_float2(acc[mi][ni][0], acc[mi][ni][1]));
        __stcg(reinterpret_cast<float2*>(w + (r + 8) * BN + c), make_float2(acc[mi][ni][2], acc[mi][ni][3]));
      }
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(p.counters + tile, 1u) == (unsigned)(S - 1);
    __syncthreads();
    store = last;
    if (store) {
      __threadfence();
      // Split by split (the same order whichever CTA is last), all 16 of a split's loads in
      // flight at once, not a chain of one load per split and fragment (with that chain and the
      // release arrive, BERT-base's output projection, split 5 ways, took 23.2 us, 11.6 without).
      float sum[2][NI][4];
      brrr_zero_acc(sum);
      for (int q = 0; q < S; ++q) {
        float2 v[2][NI][2];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int r = wm * 32 + mi * 16 + (lane >> 2) + 8 * h, c = wn * 32 + ni * 8 + 2 * (lane & 3);
              v[mi][ni][h] = q == split ? make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1])
                                        : __ldcg(reinterpret_cast<const float2*>(W + (size_t)q * BM * BN + r * BN + c));
            }
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              sum[mi][ni][2 * h] += v[mi][ni][h].x;
              sum[mi][ni][2 * h + 1] += v[mi][ni][h].y;
            }
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = sum[i][j][e];
      if (tid == 0) p.counters[tile] = 0u;  // every split has arrived: ready for the next run
    }
  }
  if (store) {
    T* C = static_cast<T*>(p.c);
    const T* bias = static_cast<const T*>(p.bias);
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int c = wn * 32 + ni * 8 + 2 * (lane & 3);
      if (c >= cols) continue;  // N is a multiple of 8: both columns in or out
      const float b0 = bias ? brrr_ld(bias + n0 + c) : 0.f, b1 = bias ? brrr_ld(bias + n0 + c + 1) : 0.f;
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = wm * 32 + mi * 16 + (lane >> 2) + 8 * h;
          if (r >= rows) continue;
          float v[2] = {acc[mi][ni][2 * h] + b0, acc[mi][ni][2 * h + 1] + b1};
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (p.act == 1) v[e] = brrr_relu(v[e]);
            else if (p.act == 2) v[e] = brrr_gelu_tanh(v[e]);
            else if (p.act == 3) v[e] = brrr_gelu_erf(v[e]);
          }
          *reinterpret_cast<unsigned*>(C + (m0 + r) * N + n0 + c) = brrr_pack(v, C);
        }
    }
  }
  if (CN > 1 && nt > 0) brrr_gmc_cluster_wait();  // pairs the last arrive: no CTA leaves while copies to it may run
#endif
}

// One kernel per type, tile width BN (32, 64 or 128), cluster size CN (1, 2, 4 or 8) and ST
// stages. The parameter lives in constant space (__grid_constant__): the tensor copies read A's
// map at its address there.
#define BRRR_GEMM_MC(TN, T, BN, CN, ST)                                                           \
  extern "C" __global__ void __cluster_dims__(CN, 1, 1) __launch_bounds__(BRRR_GMC_THREADS(BN))  \
      brrr_gemm_mc_##TN##_n##BN##_c##CN##_st##ST(const __grid_constant__ brrr_gmc_args a) {       \
    brrr_gemm_mc_t<T, BN, CN, ST>(a);                                                             \
  }

#endif
