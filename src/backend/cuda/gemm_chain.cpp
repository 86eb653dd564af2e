#include "backend/cuda/gemm_chain.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace brrr::cuda {

namespace {

constexpr std::int64_t kMaxRows = 8;            // M: accumulators per column
constexpr std::int64_t kMaxInput = 4096;        // M*K floats of layer input in shared memory
constexpr std::int64_t kMaxWeightsPerLane = 16; // one layer's weights in a lane's registers

// Per-layer work split. A group of `lpc` lanes (a power of two up to 32) computes one output
// column: lane j of the group reads float4 chunks j, j+lpc, ... of the column's K weights and of
// each input row, and the group sums by xor shuffles. A warp holds 32/lpc groups; `slots`
// columns per group cover the CTA's nb = N/ctas columns with `warps` warps.
struct Layout {
  std::int64_t nb = 0, lpc = 32, chunks = 0, slots = 0;
  std::int64_t kp() const { return chunks * 4 * lpc; }  // K padded in the packed weights
};
Layout layout(const GemmChainSpec& s, const ChainLayer& l, std::int64_t warps) {
  Layout o;
  o.nb = l.n / s.ctas;
  const std::int64_t f4 = (l.k + 3) / 4;  // float4 chunks of one column
  o.lpc = 1;
  while (o.lpc < 32 && o.lpc < f4) o.lpc *= 2;
  o.chunks = (f4 + o.lpc - 1) / o.lpc;
  const std::int64_t cols_per_pass = warps * (32 / o.lpc);
  o.slots = (o.nb + cols_per_pass - 1) / cols_per_pass;
  return o;
}
std::int64_t warps_for(const GemmChainSpec& s) {
  std::int64_t w = 1;
  for (const ChainLayer& l : s.layers) {
    Layout o = layout(s, l, 1);
    w = std::max(w, (o.nb * o.lpc + 31) / 32);
  }
  return std::min<std::int64_t>(w, s.max_warps);
}
// Weights a lane holds for layer i (registers).
std::int64_t lane_weights(const GemmChainSpec& s, size_t i) {
  Layout o = layout(s, s.layers[i], warps_for(s));
  return o.slots * o.chunks * 4;
}
// The most weight registers a lane holds at once: the layer being computed and `prefetch` more.
std::int64_t lane_weight_regs(const GemmChainSpec& s) {
  std::int64_t most = 0;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    std::int64_t sum = 0;
    for (size_t j = i; j < s.layers.size() && j <= i + size_t(s.prefetch); ++j) sum += lane_weights(s, j);
    most = std::max(most, sum);
  }
  return most;
}
// Registers per thread the weights may take: 160 at most (255 is the hardware limit), 64K per SM
// over the CTA's threads, less 32 for the rest of the kernel.
std::int64_t weight_reg_budget(const GemmChainSpec& s) {
  return std::min<std::int64_t>(160, 65536 / (32 * warps_for(s))) - 32;
}

// PTX for the cluster: this CTA's rank, the barrier (release/acquire: shared and global writes
// before it are visible after it), and the mbarrier exchange of layer outputs.
const char* kClusterHelpers = R"(
#ifndef BRRR_CLUSTER_HELPERS
#define BRRR_CLUSTER_HELPERS
static __device__ __forceinline__ unsigned brrr_cluster_rank() {
  unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r;
}
// Split barrier: arrive (release: this thread's earlier shared and global writes become visible
// to the cluster), independent work, then wait (acquire).
static __device__ __forceinline__ void brrr_cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
static __device__ __forceinline__ void brrr_cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
static __device__ __forceinline__ unsigned brrr_smem_addr(const void* p) {
  unsigned a;
  asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
// The address of `local`'s twin in the shared memory of CTA `rank` of the cluster.
static __device__ __forceinline__ unsigned brrr_mapa(const void* local, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(brrr_smem_addr(local)), "r"(rank));
  return r;
}
// Data-driven exchange (Hopper): an mbarrier per input buffer counts the bytes that arrive.
// st.async stores into CTA `rank`'s shared memory and completes that many bytes on its mbarrier;
// the consumer arms each phase with the bytes it expects and waits on the phase's parity. No
// cluster-wide barrier per layer: a CTA waits only for its data. On H200 this took an 8-layer
// 256-wide chain at batch 1 from 10.4 us (plain DSMEM stores and barrier.cluster per layer) to
// 9.2 us in-kernel on 8 CTAs, and 7.4 us on 16 CTAs of 512 threads.
static __device__ __forceinline__ void brrr_mbar_init(unsigned long long* mb) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(brrr_smem_addr(mb)) : "memory");
}
static __device__ __forceinline__ void brrr_mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
static __device__ __forceinline__ void brrr_mbar_expect(unsigned long long* mb, unsigned bytes) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }"
               :: "r"(brrr_smem_addr(mb)), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void brrr_mbar_wait(unsigned long long* mb, unsigned parity) {
  const unsigned a = brrr_smem_addr(mb);
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; "
                 "selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(a), "r"(parity) : "memory");
}
static __device__ __forceinline__ void brrr_st_async(float* local, unsigned long long* mb, unsigned rank, float v) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];"
               :: "r"(brrr_mapa(local, rank)), "f"(v), "r"(brrr_mapa(mb, rank)) : "memory");
}
#endif
)";

}  // namespace

GemmChainSpec gemm_chain_choose(GemmChainSpec s) {
  struct Shape { int ctas, warps, prefetch; };
  // Measured on H200 (8 layers 256x256, batch 1, in-kernel): 16 CTAs x 512 threads 7.4 us,
  // 8 x 512 9.2 us, 8 x 1024 8.8 us; weights all at the start were slower than 2 layers ahead.
  for (Shape c : {Shape{16, 16, 2}, Shape{8, 32, 2}, Shape{16, 32, 2}}) {
    GemmChainSpec t = s;
    t.ctas = c.ctas, t.max_warps = c.warps, t.prefetch = c.prefetch;
    if (gemm_chain_unsupported(t).empty()) return t;
  }
  return s;
}

int gemm_chain_threads(const GemmChainSpec& s) { return int(32 * warps_for(s)); }

std::string gemm_chain_unsupported(const GemmChainSpec& s) {
  if (s.layers.size() < 2) return "fewer than two layers";
  if (s.m < 1 || s.m > kMaxRows) return fmt::format("batch {} is over {}", s.m, kMaxRows);
  if (s.ctas != 8 && s.ctas != 16) return fmt::format("cluster of {} CTAs (8 or 16)", s.ctas);
  if (s.max_warps < 1 || s.max_warps > 32 || s.prefetch < 1)
    return fmt::format("{} warps per CTA, prefetch {}", s.max_warps, s.prefetch);
  const std::int64_t warps = warps_for(s);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const ChainLayer& l = s.layers[i];
    if (i > 0 && l.k != s.layers[i - 1].n) return "layer shapes do not chain";
    if (l.act != "" && l.act != "relu" && l.act != "gelu_tanh") return "activation " + l.act;
    if (l.n < s.ctas || l.n % s.ctas)
      return fmt::format("N={} is not a multiple of {}", l.n, s.ctas);
    if (l.k < 4 || l.k % 4) return fmt::format("K={} is not a multiple of 4", l.k);
    if (s.m * l.k > kMaxInput) return fmt::format("M*K={} is over {}", s.m * l.k, kMaxInput);
    Layout o = layout(s, l, warps);
    if (o.slots * o.chunks * 4 > kMaxWeightsPerLane)
      return fmt::format("K={} N={} needs more than {} weights per lane", l.k, l.n, kMaxWeightsPerLane);
  }
  if (lane_weight_regs(s) > weight_reg_budget(s))
    return fmt::format("prefetching {} layers ahead needs {} weight registers per lane (budget {})",
                       s.prefetch, lane_weight_regs(s), weight_reg_budget(s));
  return "";
}

std::vector<float> gemm_chain_pack(const GemmChainSpec& s, size_t i, const float* w_kn) {
  const ChainLayer& l = s.layers.at(i);
  const std::int64_t kp = layout(s, l, warps_for(s)).kp();
  std::vector<float> p(size_t(l.n * kp), 0.0f);
  for (std::int64_t k = 0; k < l.k; ++k)
    for (std::int64_t c = 0; c < l.n; ++c) p[size_t(c * kp + k)] = w_kn[k * l.n + c];
  return p;
}

std::string gemm_chain_source(const std::string& symbol, const GemmChainSpec& s) {
  const std::int64_t M = s.m, L = std::int64_t(s.layers.size()), warps = warps_for(s);
  const std::int64_t threads = 32 * warps;
  std::int64_t max_in = 0;
  for (const ChainLayer& l : s.layers) max_in = std::max(max_in, M * l.k);
  std::string p = "const float* __restrict__ x";
  for (std::int64_t i = 0; i < L; ++i)
    p += fmt::format(", const float* __restrict__ W{0}, const float* __restrict__ bias{0}, "
                     "float* __restrict__ y{0}",
                     i);
  std::string b;
  // xs[l % 2]: layer l's whole input [M][K], written into every CTA by the CTAs that computed it.
  b += fmt::format("  __shared__ __align__(16) float xs[2][{}];\n", max_in);
  // Layer i's input (i >= 1) arrives in xs[i % 2] counted by mb[i % 2], in phase (i - 1) / 2.
  auto input_bytes = [&](std::int64_t i) { return M * s.layers[size_t(i)].k * 4; };
  b += "  __shared__ __align__(8) unsigned long long mb[2];\n";
  b += "  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;\n";
  b += "  const unsigned rank = brrr_cluster_rank();\n";
  b += fmt::format("  for (int i = t; i < {}; i += {}) xs[0][i] = x[i];\n", M * s.layers[0].k, threads);
  // Column of slot q of this lane's group in layer i (CTA-local), and its lane in the group.
  auto col = [&](std::int64_t i, std::int64_t q) {
    Layout o = layout(s, s.layers[size_t(i)], warps);
    return fmt::format("(({} * {} + warp) * {} + lane / {})", q, warps, 32 / o.lpc, o.lpc);
  };
  // This lane's weights of layer i into registers: slot q, chunk c -> w{i}[q][c].
  auto load_w = [&](std::int64_t i) {
    const ChainLayer& l = s.layers[size_t(i)];
    Layout o = layout(s, l, warps);
    std::string w = fmt::format("  float4 w{}[{}][{}];\n", i, o.slots, o.chunks);
    if (l.bias) w += fmt::format("  float bb{}[{}];\n", i, o.slots);
    for (std::int64_t q = 0; q < o.slots; ++q) {
      w += "  {\n";
      w += fmt::format("    const int c = {};\n", col(i, q));
      for (std::int64_t c = 0; c < o.chunks; ++c) {
        w += fmt::format("    w{}[{}][{}] = (c < {} && ({} * {} + lane % {}) * 4 < {}) ? "
                         "__ldg(reinterpret_cast<const float4*>(W{} + (long long)(rank * {} + c) * {} + ({} * {} + lane % {}) * 4)) : "
                         "make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n",
                         i, q, c, o.nb, c, o.lpc, o.lpc, l.k, i, o.nb, o.kp(), c, o.lpc, o.lpc);
      }
      if (l.bias) w += fmt::format("    bb{}[{}] = c < {} ? __ldg(bias{} + rank * {} + c) : 0.0f;\n", i, q, o.nb, i, o.nb);
      w += "  }\n";
    }
    return w;
  };
  // Weights are fetched `prefetch` layers ahead (all at the start when that covers the chain), so
  // their L2 latency is off the layer-to-layer path.
  const std::int64_t P = std::min<std::int64_t>(s.prefetch, L);
  for (std::int64_t i = 0; i < P; ++i) b += load_w(i);
  b += "  if (t == 0) {\n    brrr_mbar_init(&mb[0]);\n    brrr_mbar_init(&mb[1]);\n    brrr_mbar_fence_init();\n";
  for (std::int64_t i = 1; i < std::min<std::int64_t>(L, 3); ++i)
    b += fmt::format("    brrr_mbar_expect(&mb[{}], {});\n", i % 2, input_bytes(i));
  b += "  }\n";
  b += "  __syncthreads();\n";
  // Every CTA of the cluster must be running (its mbarriers initialized) before any writes into
  // its shared memory: arrive now, wait just before the first push.
  b += "  brrr_cluster_arrive();\n";
  for (std::int64_t i = 0; i < L; ++i) {
    const ChainLayer& l = s.layers[size_t(i)];
    Layout o = layout(s, l, warps);
    b += fmt::format("  // layer {}: [{}x{}] @ [{}x{}]{}{}; {} lanes per column, {} column(s) per group\n",
                     i, M, l.k, l.k, l.n, l.bias ? " + bias" : "", l.act.empty() ? "" : ", " + l.act,
                     o.lpc, o.slots);
    if (i > 0) {
      b += fmt::format("  brrr_mbar_wait(&mb[{}], {});\n", i % 2, ((i - 1) / 2) & 1);
      // Re-arm this buffer for the layer two ahead: its data cannot come before this CTA's
      // next output, so this phase is over for every producer.
      if (i + 2 < L) b += fmt::format("  if (t == 0) brrr_mbar_expect(&mb[{}], {});\n", i % 2, input_bytes(i + 2));
    }
    b += "  {\n";
    b += fmt::format("    float v[{}][{}];\n", o.slots, M);
    b += fmt::format("    #pragma unroll\n    for (int m = 0; m < {}; ++m) {{\n", M);
    b += fmt::format("      float4 xv[{}];\n", o.chunks);
    for (std::int64_t c = 0; c < o.chunks; ++c) {
      b += fmt::format("      {{ const int k = ({} * {} + lane % {}) * 4;\n", c, o.lpc, o.lpc);
      b += fmt::format("        xv[{0}] = k < {1} ? *reinterpret_cast<const float4*>(&xs[{2}][m * {1} + k]) : "
                       "make_float4(0.0f, 0.0f, 0.0f, 0.0f); }}\n",
                       c, l.k, i % 2);
    }
    for (std::int64_t q = 0; q < o.slots; ++q) {
      std::string sum;
      for (std::int64_t c = 0; c < o.chunks; ++c) {
        std::string d = fmt::format("w{0}[{1}][{2}].x * xv[{2}].x + w{0}[{1}][{2}].y * xv[{2}].y + "
                                    "w{0}[{1}][{2}].z * xv[{2}].z + w{0}[{1}][{2}].w * xv[{2}].w",
                                    i, q, c);
        sum += (c ? " + (" : "(") + d + ")";
      }
      b += fmt::format("      v[{}][m] = {};\n", q, sum);
    }
    b += "    }\n";
    // Sum within each group of lpc lanes: every lane of the group ends with the column's value.
    if (o.lpc > 1) {
      b += fmt::format("    #pragma unroll\n    for (int off = {}; off > 0; off >>= 1)\n", o.lpc / 2);
      b += fmt::format("      #pragma unroll\n      for (int q = 0; q < {}; ++q)\n", o.slots);
      b += fmt::format("        #pragma unroll\n        for (int m = 0; m < {}; ++m) v[q][m] += __shfl_xor_sync(0xffffffffu, v[q][m], off);\n", M);
    }
    if (i == 0) b += "    brrr_cluster_wait();\n";
    for (std::int64_t q = 0; q < o.slots; ++q) {
      b += "    {\n";
      b += fmt::format("      const int c = {}, g = lane % {};\n", col(i, q), o.lpc);
      b += fmt::format("      if (c < {}) {{\n", o.nb);
      b += fmt::format("        const int colg = rank * {} + c;\n", o.nb);
      b += fmt::format("        #pragma unroll\n        for (int m = 0; m < {}; ++m) {{\n", M);
      b += fmt::format("          float r = v[{}][m];\n", q);
      if (l.bias) b += fmt::format("          r += bb{}[{}];\n", i, q);
      if (l.act == "relu") b += "          r = r > 0.0f ? r : 0.0f;\n";
      if (l.act == "gelu_tanh") b += "          r = brrr_gelu_tanh(r);\n";
      if (l.store || i + 1 == L) b += fmt::format("          if (g == 0) y{}[m * {} + colg] = r;\n", i, l.n);
      if (i + 1 < L)  // the next layer's input, pushed into every CTA by the group's lanes
        b += fmt::format("          for (unsigned r8 = g; r8 < {}; r8 += {}) brrr_st_async(&xs[{}][m * {} + colg], &mb[{}], r8, r);\n",
                         s.ctas, o.lpc, (i + 1) % 2, l.n, (i + 1) % 2);
      b += "        }\n      }\n    }\n";
    }
    b += "  }\n";
    // Fetch weights while the other CTAs finish this layer. No barrier: every byte pushed into a
    // CTA is awaited by that CTA, so none exits while others still write into it.
    if (i + P < L) b += load_w(i + P);
  }
  std::string src = kClusterHelpers;
  src += fmt::format(
      "extern \"C\" __global__ void __cluster_dims__({}, 1, 1) __launch_bounds__({}) {}({}) {{\n",
      s.ctas, threads, symbol, p);
  src += b + "}\n";
  return src;
}

}  // namespace brrr::cuda
