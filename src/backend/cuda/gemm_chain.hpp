// Small-batch GEMM chains as one persistent kernel. At batch 1-8 a Linear layer is a matrix-vector
// product of microseconds, so a chain of them (an MLP) is bound by launch and inter-kernel latency,
// not by FLOPs or bytes. One thread-block cluster runs the whole chain: each CTA owns a slice of
// every layer's output columns, keeps the layer input in shared memory, pushes its slice of each
// output into every CTA's shared memory (distributed shared memory) before a split cluster barrier,
// and fetches weights two layers ahead into registers between arriving and waiting. Header free of
// CUDA includes.
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

constexpr int kChainCtas = 8;       // CTAs in the cluster (the portable maximum)
constexpr int kChainThreads = 256;  // threads per CTA

// Why `spec` cannot run as one chain kernel ("" when it can): the limits keep the layer input in
// shared memory and the weight slice of each thread in registers.
std::string gemm_chain_unsupported(const GemmChainSpec& spec);

// CUDA source of `extern "C" __global__ void <symbol>(const float* x, then per layer
// const float* W, const float* bias (or null), float* y)`; launch one cluster: grid kChainCtas,
// block kChainThreads. The last layer's y is always written; earlier ones when `store` (another
// kernel or the caller reads them): an unread intermediate never leaves the cluster.
std::string gemm_chain_source(const std::string& symbol, const GemmChainSpec& spec);

}  // namespace brrr::cuda
