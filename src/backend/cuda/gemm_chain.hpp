// Small-batch GEMM chains as one persistent kernel. At batch 1-8 a Linear layer is a matrix-vector
// product of microseconds, so a chain of them (an MLP) is bound by launch and inter-kernel latency,
// not by FLOPs or bytes. One thread-block cluster runs the whole chain: each CTA owns a slice of
// every layer's output columns, keeps the layer input in shared memory, pushes its slice of each
// output into every CTA's shared memory (distributed shared memory) before a split cluster barrier,
// and fetches weights two layers ahead into registers between arriving and waiting. Each output
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
};

constexpr int kChainCtas = 8;  // CTAs in the cluster (the portable maximum)

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
// cluster: grid kChainCtas, block gemm_chain_threads(spec). The last layer's y is always written; earlier ones when `store` (another
// kernel or the caller reads them): an unread intermediate never leaves the cluster.
std::string gemm_chain_source(const std::string& symbol, const GemmChainSpec& spec);

}  // namespace brrr::cuda
