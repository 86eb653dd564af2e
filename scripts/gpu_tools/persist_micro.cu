// The building blocks of a persistent whole-block kernel (issue 17, deliverable 4), measured
// alone before one is written: what each costs on this GPU, one CTA per SM, every CTA resident.
//   1. stream: each CTA streams its share of a weight buffer far larger than the L2 through shared
//      memory with 1-D bulk copies (cp.async.bulk, the copy engine a persistent kernel would feed
//      its weights with), ST stages of CH bytes in flight per SM, consumer warps releasing each
//      stage after reading it. GB/s against a plain 16-byte-load read of the same buffer: how deep
//      a pipeline per SM must be to read weights at the DRAM rate (the small-M GEMMs kept 2-3
//      stages of 4 KB in flight per CTA).
//   2. barrier: a grid-wide barrier (one atomic per CTA on a global counter, the last arrival
//      bumps a generation word the others spin on), us per barrier: the price of a kernel
//      boundary inside a persistent kernel.
//   3. flag hop: CTA i waits for CTA i-1's flag and sets its own, around the ring: us per hop, the
//      price of one fine-grained readiness flag from one SM to another.
//   4. tile: BERT-base's layer GEMMs at 128 rows on weights streamed that way into mma.sync, both
//      operands packed in fragment order, 64 of them back to back in one launch: us per GEMM
//      against cuBLASLt's (tile_kernel below).
// Every result is checked (the stream's checksum against the host's, the barrier's and the ring's
// counts, the tiles' sums against a double-precision product) before its time is printed. Medians of 7 timed runs after 2 warm-ups.
// Build and run: scripts/gpu_tools/persist_micro.sh (nvcc -arch=sm_90a).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "micro_check.cuh"
#include "micro_ptx.cuh"

namespace {

constexpr int kConsumerWarps = 4;
constexpr int kThreads = 32 * (1 + kConsumerWarps);  // warp 0 produces, warps 1.. consume



// Chunks c = blockIdx.x, + gridDim.x, ... of CH bytes each: stage c % ST of this CTA's ring. Each
// consumer warp adds one 8-byte word per 256 bytes of the chunk (lane l: words at l * 32 + ...),
// so every line of the chunk is read from shared memory; the CTA's sums go to sums[blockIdx.x].
__global__ void __launch_bounds__(kThreads, 1)
    stream_kernel(const unsigned long long* __restrict__ src, long long chunks, int ch, int st,
                  unsigned long long* sums) {
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(smem);  // full[st], empty[st]
  unsigned char* buf = smem + ring_offset(st);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  init_ring(bars, st, kConsumerWarps);
  const long long mine = chunks > blockIdx.x ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  if (warp == 0) {
    if (lane == 0) {
      for (long long i = 0; i < mine; ++i) {
        const int s = int(i % st);
        if (i >= st) mbar_wait(smem_u32(&bars[st + s]), unsigned((i / st - 1) & 1));
        const long long c = blockIdx.x + i * gridDim.x;
        mbar_expect_tx(smem_u32(&bars[s]), unsigned(ch));
        bulk_copy(smem_u32(buf + size_t(s) * ch), reinterpret_cast<const unsigned char*>(src) + c * ch,
                  unsigned(ch), smem_u32(&bars[s]));
      }
    }
    return;
  }
  unsigned long long acc = 0;
  const int cw = warp - 1;
  for (long long i = 0; i < mine; ++i) {
    const int s = int(i % st);
    mbar_wait(smem_u32(&bars[s]), unsigned((i / st) & 1));
    const unsigned long long* w = reinterpret_cast<const unsigned long long*>(buf + size_t(s) * ch);
    for (int k = (cw * 32 + lane) * 32; k < ch / 8; k += kConsumerWarps * 32 * 32) acc += w[k];
    __syncwarp();
    if (lane == 0) mbar_arrive(smem_u32(&bars[st + s]));
  }
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) atomicAdd(&sums[blockIdx.x], acc);
}

// The same words summed by 16-byte loads, grid-stride: the plain read's rate.
__global__ void read_kernel(const uint4* __restrict__ src, long long n16, unsigned long long* out) {
  unsigned long long acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x) {
    const uint4 v = src[i];
    acc += v.x ^ v.y ^ v.z ^ v.w;
  }
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) atomicAdd(out, acc);
}

// R grid-wide barriers: thread 0 of each CTA adds to count; the arrival that completes a round
// resets the count and bumps gen, which the others spin on. done[] counts the rounds each CTA saw.
__global__ void barrier_kernel(unsigned* count, volatile unsigned* gen, int rounds, unsigned* done) {
  if (threadIdx.x != 0) return;
  const unsigned g = gridDim.x;
  for (int r = 0; r < rounds; ++r) {
    const unsigned seen = *gen;
    __threadfence();
    if (atomicAdd(count, 1u) == g - 1) {
      *count = 0;
      __threadfence();
      atomicAdd(const_cast<unsigned*>(gen), 1u);
    } else {
      while (*gen == seen) {
      }
    }
    __threadfence();
  }
  done[blockIdx.x] = rounds;
}

// R laps of a ring of readiness flags: CTA i waits until flag[i-1] (flag[G-1] for CTA 0, one lap
// behind) reaches its lap, then sets its own.
__global__ void ring_kernel(volatile unsigned* flags, int laps) {
  if (threadIdx.x != 0) return;
  const int i = blockIdx.x, g = gridDim.x;
  for (int lap = 1; lap <= laps; ++lap) {
    if (i == 0) {
      if (lap > 1)
        while (flags[g - 1] < unsigned(lap - 1)) {
        }
    } else {
      while (flags[i - 1] < unsigned(lap)) {
      }
    }
    __threadfence();
    flags[i] = unsigned(lap);
  }
}

template <class F>
double median_ms(F&& run) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int w = 0; w < 2; ++w) run();
  std::vector<float> t;
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(a));
    run();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}


// ---- 4. tile: a GEMM of 128 rows on weights streamed through shared memory ----
// C[128, N] = A[128, K] @ B[K, N] in bf16 with float32 sums, as a persistent kernel would run a
// layer's GEMM: work items of 64 columns x a K slice of KC, strided over one CTA per SM, every
// item's A and B streamed through one ring of ST stages by bulk copies, a stage holding 64 of K:
// A's 128 x 64 (16 KB) and B's 64 x 64 (8 KB). Both operands are stored packed in mma.sync's
// fragment order (what a persistent kernel's producer and the weight upload would write), so each
// lane reads one 16-byte word per fragment, without ldmatrix or bank conflicts:
//   A: [K/16][8 m16 tiles][32 lanes][8 values]; B: [N/64][K/16][4 pairs of n8 tiles][32][8].
// Warp w of 8 consumer warps owns rows 16w..16w+15 and all 64 columns (8 m16n8k16 per 16 of K).
// Each item's float32 partial goes to part[kslice][128][N]; the K slices' sum is the host's.
// The kernel runs R GEMMs back to back (no boundary), B from one of `copies` copies in turn so it
// comes from DRAM.
constexpr int kTileConsumers = 8;
constexpr int kTileThreads = 32 * (1 + kTileConsumers);
constexpr int kStageA = 128 * 64 * 2, kStageB = 64 * 64 * 2, kStageBytes = kStageA + kStageB;

__device__ __forceinline__ void mma_bf16(float* c, const uint4& a, unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(kTileThreads, 1)
    tile_kernel(const unsigned char* __restrict__ ap, const unsigned char* __restrict__ bp, long long b_copy_bytes,
                int copies, int n, int k, int kc, int st, int gemms, float* part) {
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(smem);
  unsigned char* ring = smem + ring_offset(st);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  init_ring(bars, st, kTileConsumers);
  const int nt_count = n / 64, ksplit = k / kc, chunks = kc / 64;
  const long long items = (long long)nt_count * ksplit, total = items * gemms;
  long long q = 0;  // the ring's running chunk count
  if (warp == 0) {
    if (lane != 0) return;
    for (long long t = blockIdx.x; t < total; t += gridDim.x) {
      const long long g = t / items, it = t % items;
      const int nt = int(it / ksplit), ks = int(it % ksplit);
      const unsigned char* b = bp + (g % copies) * b_copy_bytes;
      for (int c = 0; c < chunks; ++c, ++q) {
        const int s = int(q % st);
        if (q >= st) mbar_wait(smem_u32(&bars[st + s]), unsigned((q / st - 1) & 1));
        const long long k16 = (long long)ks * (kc / 16) + c * 4;  // the chunk's first 16 of K
        mbar_expect_tx(smem_u32(&bars[s]), unsigned(kStageBytes));
        bulk_copy(smem_u32(ring + size_t(s) * kStageBytes), ap + k16 * (8 * 32 * 16), kStageA,
                  smem_u32(&bars[s]));
        bulk_copy(smem_u32(ring + size_t(s) * kStageBytes + kStageA),
                  b + ((long long)nt * (k / 16) + k16) * (4 * 32 * 16), kStageB, smem_u32(&bars[s]));
      }
    }
    return;
  }
  const int w = warp - 1, gid = lane / 4, tig = lane % 4;
  for (long long t = blockIdx.x; t < total; t += gridDim.x) {
    const long long g = t / items, it = t % items;
    const int nt = int(it / ksplit), ks = int(it % ksplit);
    float acc[8][4] = {};
    for (int c = 0; c < chunks; ++c, ++q) {
      const int s = int(q % st);
      mbar_wait(smem_u32(&bars[s]), unsigned((q / st) & 1));
      const uint4* sa = reinterpret_cast<const uint4*>(ring + size_t(s) * kStageBytes);
      const uint4* sb = reinterpret_cast<const uint4*>(ring + size_t(s) * kStageBytes + kStageA);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const uint4 a = sa[(kk * 8 + w) * 32 + lane];
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          const uint4 b = sb[(kk * 4 + p) * 32 + lane];
          mma_bf16(acc[2 * p], a, b.x, b.y);
          mma_bf16(acc[2 * p + 1], a, b.z, b.w);
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_u32(&bars[st + s]));
    }
    if (g == gemms - 1 || gemms == 1) {  // the last GEMM's partials (every GEMM computes the same)
      float* out = part + (size_t)ks * 128 * n;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int col = nt * 64 + j * 8 + tig * 2;
        const int r0 = w * 16 + gid;
        out[(size_t)r0 * n + col] = acc[j][0];
        out[(size_t)r0 * n + col + 1] = acc[j][1];
        out[(size_t)(r0 + 8) * n + col] = acc[j][2];
        out[(size_t)(r0 + 8) * n + col + 1] = acc[j][3];
      }
    }
  }
}


// One GEMM shape: packs A and B, checks one GEMM's result against a double-precision product of
// the same bf16 values, then times R GEMMs in one launch. Returns false when the check fails.
bool tile_case(int sms, int smem_optin, int n, int k, int kc, int st) {
  const int m = 128;
  const size_t smem = size_t(ring_offset(st)) + size_t(st) * kStageBytes;
  if (n % 64 || k % kc || kc % 64 || smem > size_t(smem_optin)) return true;
  std::vector<unsigned short> a(size_t(m) * k), b(size_t(k) * n);
  unsigned x = 12345;
  auto rnd = [&] {
    x = x * 1664525u + 1013904223u;
    return float(int(x >> 9) % 2001 - 1000) / 1000.0f;
  };
  for (auto& v : a) v = to_bf16(rnd());
  for (auto& v : b) v = to_bf16(rnd() * 0.05f);
  // Packed A: [k/16][8][32][8]; packed B: [n/64][k/16][4][32][8] (see tile_kernel).
  const std::vector<unsigned short> apk = pack_a(a, m, k), bpk = pack_b(b, k, n);
  const long long b_bytes = (long long)k * n * 2;
  const int copies = int(std::max<long long>(1, (256ll << 20) / b_bytes));  // 256 MB of weights
  unsigned char *ad = nullptr, *bd = nullptr;
  float* part = nullptr;
  CK(cudaMalloc(&ad, a.size() * 2));
  CK(cudaMalloc(&bd, b_bytes * copies));
  CK(cudaMalloc(&part, sizeof(float) * size_t(k / kc) * m * n));
  CK(cudaMemcpy(ad, apk.data(), a.size() * 2, cudaMemcpyHostToDevice));
  for (int c = 0; c < copies; ++c)
    CK(cudaMemcpy(bd + c * b_bytes, bpk.data(), b_bytes, cudaMemcpyHostToDevice));
  CK(cudaFuncSetAttribute(tile_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_optin));
  CK(cudaMemset(part, 0xff, sizeof(float) * size_t(k / kc) * m * n));  // NaN until written
  tile_kernel<<<sms, kTileThreads, smem>>>(ad, bd, b_bytes, copies, n, k, kc, st, 1, part);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> got(size_t(k / kc) * m * n);
  CK(cudaMemcpy(got.data(), part, sizeof(float) * got.size(), cudaMemcpyDeviceToHost));
  double worst = 0, scale = 0;
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c) {
      double want = 0, sum = 0;
      for (int kk = 0; kk < k; ++kk) want += double(from_bf16(a[size_t(r) * k + kk])) * from_bf16(b[size_t(kk) * n + c]);
      for (int s = 0; s < k / kc; ++s) sum += got[(size_t(s) * m + r) * n + c];
      worst = std::max(worst, std::fabs(sum - want));
      if (!(std::fabs(sum - want) <= 1e30)) worst = 1e30;  // NaN: a partial never written
      scale = std::max(scale, std::fabs(want));
    }
  const bool ok = worst <= 1e-3 * scale;  // float32 sums over K; a layout slip is off by O(scale)
  double us = 0;
  if (ok) {
    const int gemms = 64;
    us = median_ms([&] {
           tile_kernel<<<sms, kTileThreads, smem>>>(ad, bd, b_bytes, copies, n, k, kc, st, gemms, part);
           CK(cudaGetLastError());
         }) *
         1e3 / gemms;
  }
  std::printf("tile m128 n%-5d k%-5d kslice %-4d stages %-2d items %-4d: %s, max err %.2e of %.2e; %.2f us a GEMM "
              "(%.0f GB/s of weights)\n",
              n, k, kc, st, (n / 64) * (k / kc), ok ? "ok" : "FAILED", worst, scale, us,
              ok ? b_bytes / us / 1e3 : 0.0);
  CK(cudaFree(ad));
  CK(cudaFree(bd));
  CK(cudaFree(part));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const long long bytes = (argc > 1 ? std::atoll(argv[1]) : 1024) << 20;  // MB of weights
  int dev = 0, sms = 0, l2 = 0, smem_optin = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  CK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("%s: %d SMs, L2 %d MB, %d KB shared per block; weights %lld MB\n", prop.name, sms, l2 >> 20,
              smem_optin >> 10, bytes >> 20);

  // The weights: words 1 + i * 2654435761 (no zeros); the stream's checksum is computed here.
  const long long words = bytes / 8;
  std::vector<unsigned long long> host(static_cast<size_t>(words));
  for (long long i = 0; i < words; ++i) host[size_t(i)] = 1 + (unsigned long long)i * 2654435761ull;
  unsigned long long *src = nullptr, *sums = nullptr;
  CK(cudaMalloc(&src, bytes));
  CK(cudaMemcpy(src, host.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&sums, sizeof(unsigned long long) * sms));

  const double read_ms = median_ms([&] {
    read_kernel<<<sms * 8, 256>>>(reinterpret_cast<const uint4*>(src), bytes / 16, sums);
    CK(cudaGetLastError());
  });
  std::printf("plain 16-byte reads: %.1f GB/s\n", bytes / read_ms / 1e6);

  CK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_optin));
  std::printf("%-8s %-8s %-10s %-10s %s\n", "stages", "chunk", "in flight", "GB/s", "of plain reads");
  for (int ch : {4096, 8192, 16384, 32768, 65536}) {
    for (int st : {2, 3, 4, 6, 8, 12}) {
      const size_t smem = size_t(ring_offset(st)) + size_t(st) * ch;
      if (smem > size_t(smem_optin)) continue;
      if (bytes % ch) continue;
      const long long chunks = bytes / ch;
      // Checked once: each word is read only if its index is a multiple of 32 (one per 256 bytes).
      CK(cudaMemset(sums, 0, sizeof(unsigned long long) * sms));
      stream_kernel<<<sms, kThreads, smem>>>(src, chunks, ch, st, sums);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      std::vector<unsigned long long> got(static_cast<size_t>(sms));
      CK(cudaMemcpy(got.data(), sums, sizeof(unsigned long long) * sms, cudaMemcpyDeviceToHost));
      unsigned long long total = 0, expect = 0;
      for (unsigned long long v : got) total += v;
      for (long long i = 0; i < words; i += 32) expect += host[size_t(i)];
      if (total != expect) {
        std::printf("stream ST %d CH %d: checksum %llu, expected %llu: FAILED\n", st, ch, total, expect);
        return 1;
      }
      const double ms = median_ms([&] {
        stream_kernel<<<sms, kThreads, smem>>>(src, chunks, ch, st, sums);
        CK(cudaGetLastError());
      });
      std::printf("%-8d %-8d %-10s %-10.1f %.2f\n", st, ch, (std::to_string(st * ch / 1024) + " KB").c_str(),
                  bytes / ms / 1e6, read_ms / ms);
    }
  }

  unsigned *count = nullptr, *gen = nullptr, *done = nullptr;
  CK(cudaMalloc(&count, 4));
  CK(cudaMalloc(&gen, 4));
  CK(cudaMalloc(&done, 4 * sms));
  for (int rounds : {1000, 4000}) {
    CK(cudaMemset(count, 0, 4));
    CK(cudaMemset(gen, 0, 4));
    CK(cudaMemset(done, 0, 4 * sms));
    barrier_kernel<<<sms, 32>>>(count, gen, rounds, done);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> d(static_cast<size_t>(sms));
    unsigned g = 0;
    CK(cudaMemcpy(d.data(), done, 4 * sms, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&g, gen, 4, cudaMemcpyDeviceToHost));
    for (unsigned v : d)
      if (v != unsigned(rounds) || g != unsigned(rounds)) {
        std::printf("barrier: a CTA saw %u rounds, generation %u, of %d: FAILED\n", v, g, rounds);
        return 1;
      }
    const double ms = median_ms([&] {
      barrier_kernel<<<sms, 32>>>(count, gen, rounds, done);
      CK(cudaGetLastError());
    });
    std::printf("grid barrier over %d CTAs: %.3f us each (%d rounds)\n", sms, ms * 1e3 / rounds, rounds);
  }

  unsigned* flags = nullptr;
  CK(cudaMalloc(&flags, 4 * sms));
  const int laps = 200;
  auto ring = [&] {
    CK(cudaMemsetAsync(flags, 0, 4 * sms));
    ring_kernel<<<sms, 32>>>(flags, laps);
    CK(cudaGetLastError());
  };
  ring();
  CK(cudaDeviceSynchronize());
  std::vector<unsigned> f(static_cast<size_t>(sms));
  CK(cudaMemcpy(f.data(), flags, 4 * sms, cudaMemcpyDeviceToHost));
  for (unsigned v : f)
    if (v != unsigned(laps)) {
      std::printf("ring: a flag ended at %u of %d laps: FAILED\n", v, laps);
      return 1;
    }
  const double ring_ms = median_ms(ring);
  std::printf("readiness flag, SM to SM: %.3f us a hop (%d laps of %d CTAs)\n", ring_ms * 1e3 / (laps * sms),
              laps, sms);
  CK(cudaFree(src));
  CK(cudaFree(sums));
  CK(cudaFree(count));
  CK(cudaFree(gen));
  CK(cudaFree(done));
  CK(cudaFree(flags));

  // BERT-base's four layer GEMMs at 128 rows (Q/K/V, out-projection, FFN up, FFN down);
  // cuBLASLt took 4.65, 3.91, 5.16 (with GELU) and 7.13 us in gemm_rows_micro (H100).
  const int shapes[][3] = {{2304, 768, 256}, {2304, 768, 768}, {768, 768, 128}, {768, 768, 256},
                           {3072, 768, 256}, {3072, 768, 768}, {768, 3072, 384}, {768, 3072, 768}};
  bool all = true;
  for (const auto& sh : shapes)
    for (int st : {4, 8}) all = tile_case(sms, smem_optin, sh[0], sh[1], sh[2], st) && all;
  return all ? 0 : 1;
}
