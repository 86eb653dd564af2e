#include "backend/cuda/gemm_chain.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace brrr::cuda {

namespace {

constexpr std::int64_t kMaxRows = 8;            // M: accumulators per column
constexpr std::int64_t kMaxInput = 4096;        // M*K floats of layer input in shared memory
constexpr std::int64_t kMaxWeightsPerLane = 16; // one layer's weights in a lane's registers
constexpr std::int64_t kMaxWarps = 32;

// Per-layer work split. A group of `lpc` lanes (a power of two up to 32) computes one output
// column: lane j of the group reads float4 chunks j, j+lpc, ... of the column's K weights and of
// each input row, and the group sums by xor shuffles. A warp holds 32/lpc groups; `slots`
// columns per group cover the CTA's nb = N/8 columns with `warps` warps.
struct Layout {
  std::int64_t nb = 0, lpc = 32, chunks = 0, slots = 0;
  std::int64_t kp() const { return chunks * 4 * lpc; }  // K padded in the packed weights
};
Layout layout(const ChainLayer& l, std::int64_t warps) {
  Layout o;
  o.nb = l.n / kChainCtas;
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
    Layout o = layout(l, 1);
    w = std::max(w, (o.nb * o.lpc + 31) / 32);
  }
  return std::min(w, kMaxWarps);
}

// PTX for the cluster: this CTA's rank, the barrier (release/acquire: shared and global writes
// before it are visible after it), and a float stored into another CTA's shared memory.
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
// Stores v at `local`'s address in the shared memory of CTA `rank` of the cluster.
static __device__ __forceinline__ void brrr_dsmem_st(float* local, unsigned rank, float v) {
  unsigned a, r;
  asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(local));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  asm volatile("st.shared::cluster.f32 [%0], %1;" :: "r"(r), "f"(v) : "memory");
}
#endif
)";

}  // namespace

int gemm_chain_threads(const GemmChainSpec& s) { return int(32 * warps_for(s)); }

std::string gemm_chain_unsupported(const GemmChainSpec& s) {
  if (s.layers.size() < 2) return "fewer than two layers";
  if (s.m < 1 || s.m > kMaxRows) return fmt::format("batch {} is over {}", s.m, kMaxRows);
  const std::int64_t warps = warps_for(s);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const ChainLayer& l = s.layers[i];
    if (i > 0 && l.k != s.layers[i - 1].n) return "layer shapes do not chain";
    if (l.act != "" && l.act != "relu" && l.act != "gelu_tanh") return "activation " + l.act;
    if (l.n < kChainCtas || l.n % kChainCtas)
      return fmt::format("N={} is not a multiple of {}", l.n, kChainCtas);
    if (l.k < 4 || l.k % 4) return fmt::format("K={} is not a multiple of 4", l.k);
    if (s.m * l.k > kMaxInput) return fmt::format("M*K={} is over {}", s.m * l.k, kMaxInput);
    Layout o = layout(l, warps);
    if (o.slots * o.chunks * 4 > kMaxWeightsPerLane)
      return fmt::format("K={} N={} needs more than {} weights per lane", l.k, l.n, kMaxWeightsPerLane);
  }
  return "";
}

std::vector<float> gemm_chain_pack(const GemmChainSpec& s, size_t i, const float* w_kn) {
  const ChainLayer& l = s.layers.at(i);
  const std::int64_t kp = layout(l, warps_for(s)).kp();
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
  b += "  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;\n";
  b += "  const unsigned rank = brrr_cluster_rank();\n";
  b += fmt::format("  for (int i = t; i < {}; i += {}) xs[0][i] = x[i];\n", M * s.layers[0].k, threads);
  // Column of slot q of this lane's group in layer i (CTA-local), and its lane in the group.
  auto col = [&](std::int64_t i, std::int64_t q) {
    Layout o = layout(s.layers[size_t(i)], warps);
    return fmt::format("(({} * {} + warp) * {} + lane / {})", q, warps, 32 / o.lpc, o.lpc);
  };
  // This lane's weights of layer i into registers: slot q, chunk c -> w{i}[q][c].
  auto load_w = [&](std::int64_t i) {
    const ChainLayer& l = s.layers[size_t(i)];
    Layout o = layout(l, warps);
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
  // Weights are fetched two layers ahead, so their L2 latency is off the layer-to-layer path.
  b += load_w(0);
  if (L > 1) b += load_w(1);
  b += "  __syncthreads();\n";
  // Every CTA of the cluster must be running before any writes into its shared memory: arrive
  // now, wait just before the first push.
  b += "  brrr_cluster_arrive();\n";
  for (std::int64_t i = 0; i < L; ++i) {
    const ChainLayer& l = s.layers[size_t(i)];
    Layout o = layout(l, warps);
    b += fmt::format("  // layer {}: [{}x{}] @ [{}x{}]{}{}; {} lanes per column, {} column(s) per group\n",
                     i, M, l.k, l.k, l.n, l.bias ? " + bias" : "", l.act.empty() ? "" : ", " + l.act,
                     o.lpc, o.slots);
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
        b += fmt::format("          for (unsigned r8 = g; r8 < {}; r8 += {}) brrr_dsmem_st(&xs[{}][m * {} + colg], r8, r);\n",
                         kChainCtas, o.lpc, (i + 1) % 2, l.n);
      b += "        }\n      }\n    }\n";
    }
    b += "  }\n";
    if (i + 1 < L) {
      // Arrive once this CTA's pushes are issued; fetch weights while the others finish.
      b += "  brrr_cluster_arrive();\n";
      if (i + 2 < L) b += load_w(i + 2);
      b += "  brrr_cluster_wait();\n";
    }
    // After the last layer nothing reads another CTA's shared memory: no barrier.
  }
  std::string src = kClusterHelpers;
  src += fmt::format(
      "extern \"C\" __global__ void __cluster_dims__({}, 1, 1) __launch_bounds__({}) {}({}) {{\n",
      kChainCtas, threads, symbol, p);
  src += b + "}\n";
  return src;
}

}  // namespace brrr::cuda
