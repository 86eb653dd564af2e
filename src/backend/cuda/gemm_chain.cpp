#include "backend/cuda/gemm_chain.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace brrr::cuda {

namespace {

constexpr std::int64_t kMaxRows = 8;          // M: accumulators per thread
constexpr std::int64_t kMaxInput = 4096;      // M*K floats of layer input in shared memory
constexpr std::int64_t kMaxWeightsPerThread = 64;

// Per-layer thread layout: NB output columns per CTA, one column per thread of a k-slice; KS
// k-slices of KPT rows each.
struct Layout {
  std::int64_t nb, ks, kpt;
};
Layout layout(const ChainLayer& l) {
  Layout o;
  o.nb = l.n / kChainCtas;
  o.ks = o.nb > 0 ? kChainThreads / o.nb : 0;
  o.kpt = o.ks > 0 ? (l.k + o.ks - 1) / o.ks : 0;
  return o;
}

// PTX for the cluster: this CTA's rank, the barrier (release/acquire: shared and global writes
// before it are visible after it), and a float read from another CTA's shared memory.
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

std::string gemm_chain_unsupported(const GemmChainSpec& s) {
  if (s.layers.size() < 2) return "fewer than two layers";
  if (s.m < 1 || s.m > kMaxRows) return fmt::format("batch {} is over {}", s.m, kMaxRows);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const ChainLayer& l = s.layers[i];
    if (i > 0 && l.k != s.layers[i - 1].n) return "layer shapes do not chain";
    if (l.act != "" && l.act != "relu" && l.act != "gelu_tanh") return "activation " + l.act;
    if (l.n % kChainCtas || l.n / kChainCtas > kChainThreads)
      return fmt::format("N={} is not a multiple of {} up to {}", l.n, kChainCtas,
                         kChainCtas * kChainThreads);
    if (s.m * l.k > kMaxInput) return fmt::format("M*K={} is over {}", s.m * l.k, kMaxInput);
    if (layout(l).kpt > kMaxWeightsPerThread)
      return fmt::format("K={} N={} needs more than {} weights per thread", l.k, l.n,
                         kMaxWeightsPerThread);
  }
  return "";
}

std::string gemm_chain_source(const std::string& symbol, const GemmChainSpec& s) {
  const std::int64_t M = s.m, L = std::int64_t(s.layers.size());
  std::int64_t max_in = 0;
  for (const ChainLayer& l : s.layers) {
    max_in = std::max(max_in, M * l.k);
  }
  std::string p = "const float* __restrict__ x";
  for (std::int64_t i = 0; i < L; ++i)
    p += fmt::format(", const float* __restrict__ W{0}, const float* __restrict__ bias{0}, "
                     "float* __restrict__ y{0}",
                     i);
  std::string b;
  // xs[l % 2]: layer l's whole input, written into every CTA by the CTAs that computed it.
  b += fmt::format("  __shared__ float xs[2][{}];\n", max_in);
  b += fmt::format("  __shared__ float red[{}];\n", kChainThreads * M);  // k-slice partials
  b += "  const int t = threadIdx.x;\n  const unsigned rank = brrr_cluster_rank();\n";
  b += fmt::format("  for (int i = t; i < {}; i += {}) xs[0][i] = x[i];\n", M * s.layers[0].k,
                   kChainThreads);
  auto load_w = [&](std::int64_t i) {
    const ChainLayer& l = s.layers[size_t(i)];
    Layout o = layout(l);
    std::string w;
    w += fmt::format("  float w{}[{}];\n  {{\n", i, o.kpt);
    w += fmt::format("    const int c = t % {0}, ks = t / {0};\n", o.nb);
    w += fmt::format("    #pragma unroll\n    for (int j = 0; j < {}; ++j) {{\n", o.kpt);
    w += fmt::format("      const int k = ks * {} + j;\n", o.kpt);
    w += fmt::format("      w{}[j] = (ks < {} && k < {}) ? __ldg(W{} + (long long)k * {} + rank * {} + c) : 0.0f;\n",
                     i, o.ks, l.k, i, l.n, o.nb);
    w += "    }\n  }\n";
    if (l.bias)  // this thread's first output column's bias, off the layer's critical path
      w += fmt::format("  const float bb{0} = t < {1} ? __ldg(bias{0} + rank * {2} + t % {2}) : 0.0f;\n",
                       i, M * o.nb, o.nb);
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
    Layout o = layout(l);
    b += fmt::format("  // layer {}: [{}x{}] @ [{}x{}]{}{}\n", i, M, l.k, l.k, l.n,
                     l.bias ? " + bias" : "", l.act.empty() ? "" : ", " + l.act);
    b += fmt::format("  float acc{}[{}];\n  {{\n", i, M);
    b += fmt::format("    const int ks = t / {};\n", o.nb);
    b += fmt::format("    #pragma unroll\n    for (int m = 0; m < {}; ++m) acc{}[m] = 0.0f;\n", M, i);
    b += fmt::format("    if (ks < {}) {{\n", o.ks);
    b += fmt::format("      #pragma unroll\n      for (int j = 0; j < {}; ++j) {{\n", o.kpt);
    b += fmt::format("        const int k = ks * {} + j;\n", o.kpt);
    b += fmt::format("        if (k < {}) {{\n", l.k);
    b += fmt::format("          #pragma unroll\n          for (int m = 0; m < {}; ++m) acc{}[m] += xs[{}][m * {} + k] * w{}[j];\n",
                     M, i, i % 2, l.k, i);
    b += "        }\n      }\n    }\n  }\n";
    b += "  {\n";
    b += fmt::format("    const int c = t % {0}, ks = t / {0};\n", o.nb);
    b += fmt::format("    if (ks < {}) {{\n", o.ks);
    b += fmt::format("      #pragma unroll\n      for (int m = 0; m < {}; ++m) red[(ks * {} + m) * {} + c] = acc{}[m];\n",
                     M, M, o.nb, i);
    b += "    }\n  }\n  __syncthreads();\n";
    if (i == 0) b += "  brrr_cluster_wait();\n";
    b += fmt::format("  for (int o = t; o < {}; o += {}) {{\n", M * o.nb, kChainThreads);
    b += fmt::format("    const int m = o / {0}, c = o % {0};\n", o.nb);
    b += "    float v = 0.0f;\n";
    b += fmt::format("    for (int q = 0; q < {}; ++q) v += red[(q * {} + m) * {} + c];\n", o.ks, M, o.nb);
    b += fmt::format("    const int col = rank * {} + c;\n", o.nb);
    if (l.bias) b += fmt::format("    v += o == t ? bb{0} : __ldg(bias{0} + col);\n", i);
    if (l.act == "relu") b += "    v = v > 0.0f ? v : 0.0f;\n";
    if (l.act == "gelu_tanh") b += "    v = brrr_gelu_tanh(v);\n";
    if (l.store || i + 1 == L) b += fmt::format("    y{}[m * {} + col] = v;\n", i, l.n);
    if (i + 1 < L)  // the next layer's input, pushed into every CTA
      b += fmt::format("    for (unsigned r = 0; r < {}; ++r) brrr_dsmem_st(&xs[{}][m * {} + col], r, v);\n",
                       kChainCtas, (i + 1) % 2, l.n);
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
      kChainCtas, kChainThreads, symbol, p);
  src += b + "}\n";
  return src;
}

}  // namespace brrr::cuda
