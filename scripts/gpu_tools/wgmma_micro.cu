// A warp-specialized Hopper GEMM (TMA loads, wgmma from shared memory, one CTA per SM striding over
// the output tiles), alone against cuBLASLt on the GEMMs of the model suite at large batch: does a
// tile width cuBLASLt does not pick win where its tiles leave SMs idle? BERT-base b32's output
// projection (m4096 n768) ran at 58% of the bf16 peak in brrr's plan (nineteenth session): 96
// tiles of 256x128 on 132 SMs; 128 x 192 tiles are 128 tiles, one wave. Its Q/K/V (n2304) at
// 74-76%: 288 tiles of 128x256 are 2.2 waves, of 128x192 2.9.
//
// C[m, n] = act(A[m, k] W[k, n] + bias) (+ residual), bf16 in and out, float32 sums. The kernel
// reads W transposed, [n, k] (K-major, as a plan would store a constant weight once); cuBLASLt
// gets W as the model has it, [k, n], with its own bias or GELU+bias epilogue.
//
// CTA: 3 warpgroups. Warpgroup 0's first thread issues the TMA copies of a ring of ST stages, each
// a 128 x 64 box of A and a BN x 64 box of W (128-byte swizzle); warpgroups 1 and 2 each take 64
// rows of the 128 x BN tile, four m64nBNk16 wgmmas per stage, and release a stage once the next
// stage's wgmmas are issued and the stage's own have completed (wait_group 1). The epilogue writes
// from the accumulators (bias, erf GELU, residual) while the producer already loads the next
// tile's stages. Every configuration is checked against a float32 reference of the same bf16
// values before its time is printed; times are medians of graph replays of one launch per weight
// copy, copies enough for twice the L2 (weights come from DRAM, as in a model).
// The "mc2" configurations (gemm_mc_kernel) run clusters of 2 CTAs along M that share each W
// tile: each CTA copies half of it and multicasts it to both (twenty-second session: the first
// form ran at 0.45-0.73x cuBLASLt's speed, and its L2 traffic per FLOP was the suspect).
// Build and run: scripts/gpu_tools/wgmma_micro.sh.
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "micro_check.cuh"
#include "micro_ptx.cuh"
#include "wgmma_ops.inc"

#define CL(x)                                                                       \
  do {                                                                              \
    cublasStatus_t s_ = (x);                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                              \
      std::fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

namespace {

constexpr int kBM = 128, kBK = 64, kThreads = 384;

struct Epi {
  const unsigned short* bias;      // [n]
  const unsigned short* residual;  // [m, n] or null
  unsigned short* c;               // [m, n]
  int m, n, k, act;                // act: 0 none, 3 erf GELU
};


// A K-major operand of rows of 64 bf16 (128 bytes), 128-byte swizzle, 8-row groups 1024 bytes
// apart (the stage buffers are 1024-byte aligned, so the swizzle's base offset is 0).
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr) {
  return (unsigned long long)((addr & 0x3ffff) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) |
         (1ull << 62);
}

template <int BN>
__device__ __forceinline__ void wgmma(float* d, unsigned long long da, unsigned long long db, int acc) {
  if constexpr (BN == 64) wgmma_n64(d, da, db, acc);
  if constexpr (BN == 128) wgmma_n128(d, da, db, acc);
  if constexpr (BN == 192) wgmma_n192(d, da, db, acc);
  if constexpr (BN == 256) wgmma_n256(d, da, db, acc);
}

template <int N>
__device__ __forceinline__ void fence_regs(float* d) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}


// One stage's four m64nBNk16 wgmmas for this warpgroup's 64 rows (A at `stage` + half * 8 KB, W
// at `stage` + a_bytes), issued and committed; returns when the previous stage's have completed.
template <int BN>
__device__ __forceinline__ void mma_stage(float* d, unsigned stage, unsigned a_bytes, int half, int kb) {
  const unsigned long long da = smem_desc(stage + half * 64 * 128), dw = smem_desc(stage + a_bytes);
  fence_regs<BN / 2>(d);
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
  for (int kk = 0; kk < kBK / 16; ++kk) wgmma<BN>(d, da + 2 * kk, dw + 2 * kk, (kb | kk) != 0);
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
  fence_regs<BN / 2>(d);
}

// The epilogue from a warpgroup's accumulators: d[4j + {0,1}] is row r0 (16 * warp + lane / 4 of
// the warpgroup's rows), columns col0 + 8j + 2 * (lane % 4) + {0,1}; d[4j + {2,3}] 8 rows down.
template <int BN>
__device__ __forceinline__ void store_tile(const float* d, const Epi& p, int r0, int col0, int lane) {
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = col0 + 8 * j + 2 * (lane % 4);
    const float b0 = bf(p.bias[col]), b1 = bf(p.bias[col + 1]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + 8 * h;
      if (r >= p.m) continue;
      float v0 = d[4 * j + 2 * h] + b0, v1 = d[4 * j + 2 * h + 1] + b1;
      if (p.act == 3) {
        v0 = 0.5f * v0 * (1.f + erff(v0 * 0.70710678f));
        v1 = 0.5f * v1 * (1.f + erff(v1 * 0.70710678f));
      }
      const size_t o = size_t(r) * p.n + col;
      if (p.residual) {
        const unsigned rr = *reinterpret_cast<const unsigned*>(p.residual + o);
        v0 += bf(static_cast<unsigned short>(rr & 0xffff));
        v1 += bf(static_cast<unsigned short>(rr >> 16));
      }
      *reinterpret_cast<unsigned*>(p.c + o) = unsigned(to_bf(v0)) | (unsigned(to_bf(v1)) << 16);
    }
  }
}

template <int BN, int ST>
constexpr int smem_bytes() {
  return 16 * ST + 1023 + ST * (kBM + BN) * kBK * 2;  // barriers, up to 1023 to align the ring, stages
}

template <int BN, int ST>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tw, Epi p) {
  extern __shared__ unsigned char smem[];
  constexpr unsigned kA = kBM * kBK * 2, kStage = kA + BN * kBK * 2;
  const unsigned base = smem_u32(smem);
  const unsigned full = base, empty = base + 8 * ST;  // ST mbarriers each
  const unsigned ring = (base + 16 * ST + 1023) & ~1023u;
  const int tiles_m = (p.m + kBM - 1) / kBM, tiles = tiles_m * (p.n / BN), kblocks = p.k / kBK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < ST; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, 8);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int wg = threadIdx.x / 128;
  if (wg == 0) {  // producer
    if (threadIdx.x != 0) return;
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(&ta)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(&tw)) : "memory");
    long long q = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int mt = t % tiles_m, nt = t / tiles_m;
      for (int kb = 0; kb < kblocks; ++kb, ++q) {
        const int s = int(q % ST);
        if (q >= ST) mbar_wait(empty + 8 * s, unsigned((q / ST - 1) & 1));
        mbar_expect_tx(full + 8 * s, kStage);
        tma_2d(ring + s * kStage, &ta, kb * kBK, mt * kBM, full + 8 * s);
        tma_2d(ring + s * kStage + kA, &tw, kb * kBK, nt * BN, full + 8 * s);
      }
    }
    return;
  }
  const int half = wg - 1, t128 = threadIdx.x % 128, warp = t128 / 32, lane = threadIdx.x % 32;
  float d[BN / 2];
  long long q = 0;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int mt = t % tiles_m, nt = t / tiles_m;
    for (int kb = 0; kb < kblocks; ++kb, ++q) {
      const int s = int(q % ST);
      mbar_wait(full + 8 * s, unsigned((q / ST) & 1));
      mma_stage<BN>(d, ring + s * kStage, kA, half, kb);
      if (kb > 0 && lane == 0) mbar_arrive(empty + 8 * int((q - 1) % ST));
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    fence_regs<BN / 2>(d);
    if (lane == 0) mbar_arrive(empty + 8 * int((q - 1) % ST));
    store_tile<BN>(d, p, mt * kBM + half * 64 + warp * 16 + lane / 4, nt * BN, lane);
  }
}

// The same GEMM on clusters of 2 CTAs along M that share each W tile: each CTA copies half of
// the tile's BN rows and multicasts it to both, so W's traffic from L2 halves. A stage is free
// only when both CTAs' consumers have released it (their empty mbarriers count 16 arrivals, 8
// warps of each CTA). The cluster strides over pairs of M tiles of one N tile.
template <int BN, int ST>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_mc_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tw, Epi p) {
  extern __shared__ unsigned char smem[];
  constexpr unsigned kA = kBM * kBK * 2, kW = BN * kBK * 2, kStage = kA + kW;
  const unsigned base = smem_u32(smem);
  const unsigned full = base, empty = base + 8 * ST;
  const unsigned ring = (base + 16 * ST + 1023) & ~1023u;
  const unsigned rank = cluster_rank(), peer = rank ^ 1u;
  const int pairs_m = (p.m + 2 * kBM - 1) / (2 * kBM), pairs = pairs_m * (p.n / BN), kblocks = p.k / kBK;
  const int cluster = blockIdx.x / 2, clusters = gridDim.x / 2;
  if (threadIdx.x == 0) {
    for (int s = 0; s < ST; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, 16);  // 8 consumer warps of each CTA
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster_sync();  // the peer's barriers exist before any multicast or remote arrival reaches them
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    if (threadIdx.x == 0) {
      long long q = 0;
      for (int pr = cluster; pr < pairs; pr += clusters) {
        const int mt = (pr % pairs_m) * 2 + int(rank), nt = pr / pairs_m;
        for (int kb = 0; kb < kblocks; ++kb, ++q) {
          const int s = int(q % ST);
          if (q >= ST) mbar_wait(empty + 8 * s, unsigned((q / ST - 1) & 1));
          mbar_expect_tx(full + 8 * s, kStage);
          tma_2d(ring + s * kStage, &ta, kb * kBK, mt * kBM, full + 8 * s);
          tma_2d_multicast(ring + s * kStage + kA + rank * (kW / 2), &tw, kb * kBK, nt * BN + int(rank) * (BN / 2),
                           full + 8 * s, 3);
        }
      }
    }
  } else {
    const int half = wg - 1, t128 = threadIdx.x % 128, warp = t128 / 32, lane = threadIdx.x % 32;
    float d[BN / 2];
    long long q = 0;
    for (int pr = cluster; pr < pairs; pr += clusters) {
      const int mt = (pr % pairs_m) * 2 + int(rank), nt = pr / pairs_m;
      for (int kb = 0; kb < kblocks; ++kb, ++q) {
        const int s = int(q % ST);
        mbar_wait(full + 8 * s, unsigned((q / ST) & 1));
        mma_stage<BN>(d, ring + s * kStage, kA, half, kb);
        if (kb > 0 && lane == 0) {
          const unsigned e = empty + 8 * int((q - 1) % ST);
          mbar_arrive(e);
          mbar_arrive_peer(e, peer);
        }
      }
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      fence_regs<BN / 2>(d);
      if (lane == 0) {
        const unsigned e = empty + 8 * int((q - 1) % ST);
        mbar_arrive(e);
        mbar_arrive_peer(e, peer);
      }
      store_tile<BN>(d, p, mt * kBM + half * 64 + warp * 16 + lane / 4, nt * BN, lane);
    }
  }
  __syncwarp();    // warp 0's producer lane rejoins its warp: the cluster barrier is .aligned
  cluster_sync();  // no CTA leaves while its peer may still arrive on its barriers
}

// The float32 reference of the same bf16 values: W as [k, n].
__global__ void reference(const unsigned short* a, const unsigned short* w, const unsigned short* bias,
                          const unsigned short* res, float* c, long long M, long long N, long long K, int act) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= M * N) return;
  const long long r = i / N, col = i % N;
  float s = 0.f;
  for (long long k = 0; k < K; ++k) s += bf(a[r * K + k]) * bf(w[k * N + col]);
  s += bf(bias[col]);
  if (act == 3) s = 0.5f * s * (1.f + erff(s * 0.70710678f));
  if (res) s += bf(res[i]);
  c[i] = s;
}




struct Config {
  const char* name;
  int bn, st;
  void (*fn)(CUtensorMap, CUtensorMap, Epi);
  int smem;
  int cluster;  // 2: gemm_mc_kernel, W multicast over a cluster of 2 along M
};
template <int BN, int ST>
Config config(const char* name) {
  return {name, BN, ST, gemm_kernel<BN, ST>, smem_bytes<BN, ST>(), 1};
}
template <int BN, int ST>
Config config_mc(const char* name) {
  return {name, BN, ST, gemm_mc_kernel<BN, ST>, smem_bytes<BN, ST>(), 2};
}

}  // namespace

int main(int argc, char** argv) {
  // Shapes: "M N K ACT RES" (ACT 0 bias, 3 bias + erf GELU; RES 1 adds a residual).
  std::vector<std::vector<long long>> shapes;
  for (int i = 1; i + 4 < argc; i += 5)
    shapes.push_back({std::atoll(argv[i]), std::atoll(argv[i + 1]), std::atoll(argv[i + 2]), std::atoll(argv[i + 3]),
                      std::atoll(argv[i + 4])});
  const Config configs[] = {config<128, 6>("128x128 st6"), config<192, 5>("128x192 st5"),
                            config<256, 4>("128x256 st4"), config<64, 8>("128x64 st8"),
                            config_mc<192, 5>("128x192 mc2"), config_mc<128, 6>("128x128 mc2"),
                            config_mc<256, 4>("128x256 mc2")};
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs, L2 %d MB, %zu KB shared per block\n", prop.name, sms, prop.l2CacheSize >> 20,
              prop.sharedMemPerBlockOptin >> 10);
  for (const Config& c : configs)
    CK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, c.smem));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cublasLtHandle_t lt;
  CL(cublasLtCreate(&lt));
  const size_t lt_ws_bytes = 32 << 20;
  void* lt_ws;
  CK(cudaMalloc(&lt_ws, lt_ws_bytes));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  bool all_ok = true;

  for (const auto& sh : shapes) {
    const long long M = sh[0], N = sh[1], K = sh[2];
    const int act = int(sh[3]);
    const bool res = sh[4] != 0;
    if (K % kBK) {
      std::printf("m%lld n%lld k%lld: k not a multiple of 64, skipped\n", M, N, K);
      continue;
    }
    const size_t wbytes = size_t(K) * N * 2;
    const int copies = int(std::min<size_t>(64, std::max<size_t>(8, (2 * size_t(prop.l2CacheSize) + wbytes - 1) / wbytes)));
    std::vector<unsigned short> ha(M * K), hw(K * N), hwt(K * N), hbias(N), hres(M * N);
    for (auto& x : ha) x = to_bf16(U(rng));
    for (auto& x : hw) x = to_bf16(U(rng) / std::sqrt(float(K)));
    for (auto& x : hbias) x = to_bf16(U(rng) * 0.1f);
    for (auto& x : hres) x = to_bf16(U(rng));
    for (long long kk = 0; kk < K; ++kk)
      for (long long c = 0; c < N; ++c) hwt[c * K + kk] = hw[kk * N + c];
    unsigned short *da, *dbias, *dres = nullptr, *dc;
    std::vector<unsigned short*> dw(copies), dwt(copies);
    float* dref;
    CK(cudaMalloc(&da, M * K * 2));
    CK(cudaMalloc(&dbias, N * 2));
    CK(cudaMalloc(&dc, M * N * 2));
    CK(cudaMalloc(&dref, M * N * 4));
    if (res) {
      CK(cudaMalloc(&dres, M * N * 2));
      CK(cudaMemcpy(dres, hres.data(), M * N * 2, cudaMemcpyHostToDevice));
    }
    for (int i = 0; i < copies; ++i) {
      CK(cudaMalloc(&dw[i], wbytes));
      CK(cudaMalloc(&dwt[i], wbytes));
      CK(cudaMemcpy(dw[i], hw.data(), wbytes, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dwt[i], hwt.data(), wbytes, cudaMemcpyHostToDevice));
    }
    CK(cudaMemcpy(da, ha.data(), M * K * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dbias, hbias.data(), N * 2, cudaMemcpyHostToDevice));
    reference<<<unsigned((M * N + 255) / 256), 256, 0, st>>>(da, dw[0], dbias, dres, dref, M, N, K, act);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(st));
    std::vector<float> ref(M * N);
    CK(cudaMemcpy(ref.data(), dref, M * N * 4, cudaMemcpyDeviceToHost));
    float refmax = 0.f;
    for (float v : ref) refmax = std::max(refmax, std::fabs(v));
    auto check = [&](const std::string& what) {
      CK(cudaStreamSynchronize(st));
      CK(cudaGetLastError());
      std::vector<unsigned short> hc(M * N);
      CK(cudaMemcpy(hc.data(), dc, M * N * 2, cudaMemcpyDeviceToHost));
      float err = 0.f;
      long long bad = -1;
      for (long long i = 0; i < M * N; ++i) {
        const float e = std::fabs(from_bf16(hc[i]) - ref[i]);
        if (!(e <= err)) {
          err = std::isnan(e) ? INFINITY : e;
          bad = i;
        }
      }
      // bf16 output: half a unit of the largest value, plus float32 sums in another order.
      const bool ok = err <= 0.01f * refmax;
      if (!ok)
        std::printf("  FAIL %s: max error %.4g of %.4g at row %lld col %lld (got %g, want %g)\n", what.c_str(), err,
                    refmax, bad / N, bad % N, from_bf16(hc[bad]), ref[bad]);
      return ok;
    };
    const double gflop = 2.0 * M * N * K / 1e9;
    std::printf("== m%lld n%lld k%lld %s%s: %d weight copies of %.2f MB\n", M, N, K, act == 3 ? "bias+gelu" : "bias",
                res ? "+residual" : "", copies, wbytes / 1e6);

    // cuBLASLt: row-major C = A W as column-major C^T[N,M] = W^T[N,K] A^T[K,M]; the best of its
    // heuristic's first 16 candidates, timed the same way. A residual goes in as C (beta 1, D apart).
    cublasLtMatmulDesc_t op;
    CL(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtEpilogue_t epi = act == 3 ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    CL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    const void* bp = dbias;
    CL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
    cudaDataType_t bt = CUDA_R_16BF;
    CL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    cublasLtMatrixLayout_t la, lb, lc;
    CL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, N, K, N));
    CL(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, M, K));
    CL(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    CL(cublasLtMatmulPreferenceCreate(&pref));
    CL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt_ws_bytes,
                                            sizeof lt_ws_bytes));
    cublasLtMatmulHeuristicResult_t heur[16];
    int found = 0;
    CL(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 16, heur, &found));
    const float one = 1.f, beta = res ? 1.f : 0.f;
    float t_lt0 = 0, t_lt = 1e30f;
    for (int h = 0; h < found; ++h) {
      auto lt_launch = [&](int i) {
        CL(cublasLtMatmul(lt, op, &one, dw[i], la, da, lb, &beta, res ? dres : dc, lc, dc, lc, &heur[h].algo, lt_ws,
                          lt_ws_bytes, st));
      };
      lt_launch(0);
      if (act != 3 && !check(std::string("cublaslt #") + std::to_string(h))) continue;  // its GELU is the tanh form
      const float us = time_graph(st, copies, lt_launch);
      if (h == 0) t_lt0 = us;
      t_lt = std::min(t_lt, us);
    }
    std::printf("  %-14s %8.2f us (%6.1f TFLOP/s), heuristic #0 %.2f us, of %d candidates\n", "cublaslt", t_lt,
                gflop / t_lt * 1e3, t_lt0, found);
    CL(cublasLtMatmulPreferenceDestroy(pref));
    CL(cublasLtMatrixLayoutDestroy(la));
    CL(cublasLtMatrixLayoutDestroy(lb));
    CL(cublasLtMatrixLayoutDestroy(lc));
    CL(cublasLtMatmulDescDestroy(op));

    const CUtensorMap ta = tmap_bf16_2d(da, M, K, kBM);
    for (const Config& c : configs) {
      if (N % c.bn) continue;
      const int tiles_m = int((M + kBM - 1) / kBM);
      if (c.cluster == 2 && tiles_m % 2) continue;
      std::vector<CUtensorMap> tw(copies);
      for (int i = 0; i < copies; ++i) tw[i] = tmap_bf16_2d(dwt[i], N, K, unsigned(c.bn / c.cluster));
      const Epi e{dbias, dres, dc, int(M), int(N), int(K), act};
      const int tiles = tiles_m * int(N / c.bn);
      int grid = std::min(tiles, sms);
      cudaLaunchConfig_t lc{};
      cudaLaunchAttribute attr[1];
      if (c.cluster == 2) {  // as many clusters as fit at once, at most one per pair of tiles
        lc.blockDim = dim3(kThreads);
        lc.dynamicSmemBytes = size_t(c.smem);
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = 2;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        lc.attrs = attr;
        lc.numAttrs = 1;
        lc.gridDim = dim3(unsigned(tiles));
        int fit = 0;
        CK(cudaOccupancyMaxActiveClusters(&fit, c.fn, &lc));
        grid = 2 * std::min(fit, tiles / 2);
        lc.gridDim = dim3(unsigned(grid));
        lc.stream = st;
      }
      auto go = [&](const CUtensorMap& w) {
        if (c.cluster == 2) CK(cudaLaunchKernelEx(&lc, c.fn, ta, w, e));
        else c.fn<<<grid, kThreads, c.smem, st>>>(ta, w, e);
      };
      CK(cudaMemsetAsync(dc, 0xff, M * N * 2, st));  // NaN until written
      go(tw[0]);
      if (!check(c.name)) {
        all_ok = false;
        continue;
      }
      const float us = time_graph(st, copies, [&](int i) {
        go(tw[i]);
        CK(cudaGetLastError());
      });
      std::printf("  %-14s %8.2f us (%6.1f TFLOP/s), %d tiles on %d CTAs (%.2f waves), %.2fx cublaslt\n", c.name, us,
                  gflop / us * 1e3, tiles, grid, double(tiles) / sms, us / t_lt);
    }
    for (int i = 0; i < copies; ++i) {
      CK(cudaFree(dw[i]));
      CK(cudaFree(dwt[i]));
    }
    CK(cudaFree(da));
    CK(cudaFree(dbias));
    CK(cudaFree(dc));
    CK(cudaFree(dref));
    if (dres) CK(cudaFree(dres));
  }
  return all_ok ? 0 : 1;
}
