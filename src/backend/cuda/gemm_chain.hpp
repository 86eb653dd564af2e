// Small-batch GEMM chains as one persistent kernel. At batch 1-8 a Linear layer is a matrix-vector
// product of microseconds, so a chain of them (an MLP) is bound by launch and inter-kernel latency,
// not by FLOPs or bytes. One thread-block cluster runs the whole chain: each CTA owns a slice of
// every layer's output columns, keeps the layer input in shared memory, pushes its slice of each
// output into every CTA's shared memory with st.async, which counts the bytes on the receiver's
// mbarrier (a CTA waits for its data, not for the whole cluster), and fetches weights two layers
// ahead into registers. Each output
// column is a group of lanes (a warp for K >= 128): float4 loads of the column's weights and of the
// input, a few FMAs per lane, and an xor-shuffle sum, so the per-layer critical path is short.
// Header free of CUDA includes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace brrr::cuda {

struct ChainLayer {
  std::int64_t k = 0, n = 0;  // y[M,n] = act(x[M,k] @ W[k,n] + bias[n])
  bool bias = false;
  std::string act;  // "", "relu", "gelu_tanh"
  bool store = true;  // write y to global memory (the last layer's always is)
};

struct GemmChainSpec {
  std::int64_t m = 0;
  std::vector<ChainLayer> layers;
  // The kernel's shape: CTAs in the cluster (8, the portable maximum, or 16, which needs the
  // non-portable cluster size attribute), warps per CTA at most, and how many layers ahead each
  // lane fetches its weights into registers (>= the layer count: all at the start).
  int ctas = 8;
  int max_warps = 32;
  int prefetch = 2;
};

// `spec` with the fastest kernel shape that supports it (measured on H200 with
// .scratch-style variants; see the comment in gemm_chain.cpp), or unchanged when none does.
GemmChainSpec gemm_chain_choose(GemmChainSpec spec);

// Threads per CTA for `spec` (a multiple of 32, at most 1024).
int gemm_chain_threads(const GemmChainSpec& spec);

// Why `spec` cannot run as one chain kernel ("" when it can): the limits keep the layer input in
// shared memory and the weight slice of each lane in registers.
std::string gemm_chain_unsupported(const GemmChainSpec& spec);

// Layer `layer`'s weights in the layout the kernel reads: from W [K,N] row-major to W^T, each
// column's K values zero-padded to whole float4 chunks per lane ([N][Kp]).
std::vector<float> gemm_chain_pack(const GemmChainSpec& spec, size_t layer, const float* w_kn);

// CUDA source of `extern "C" __global__ void <symbol>(const float* x, then per layer
// const float* W (packed by gemm_chain_pack), const float* bias (or null), float* y)`; launch one
// cluster: grid spec.ctas, block gemm_chain_threads(spec). The last layer's y is always written; earlier ones when `store` (another
// kernel or the caller reads them): an unread intermediate never leaves the cluster.
std::string gemm_chain_source(const std::string& symbol, const GemmChainSpec& spec);

}  // namespace brrr::cuda
