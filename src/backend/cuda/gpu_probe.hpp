// The GPU ceiling measurements, shared by `brrr probe --backend cuda` (src/doctor/probe_cuda.cpp)
// and tools/gpu_bench/brrr_gpu_probe: CUDA events around the timed region, warmup first, medians
// of repeats, random data (never zeros). Header free of CUDA includes.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "backend/cuda/cublaslt_gemm.hpp"
#include "backend/cuda/cuda_runtime.hpp"

namespace brrr::cuda {

// Median milliseconds of one call of body(), timed with events on s.
double time_events_ms(const Stream& s, const std::function<void()>& body, int warmup, int reps);

// The hand-written probe kernels (bench_kernels.cpp), compiled through NVRTC (disk-cached).
struct ProbeKernels {
  explicit ProbeKernels(const Device& dev);
  ~ProbeKernels();
  const Device& dev;
  double compile_ms = 0;
  bool from_cache = false;
  std::unique_ptr<Module> mod;
  Function empty, fill_f32, fill_bf16, fill_f16, cos1, cos2, fma, expf_t, cosf_t, tanhf_t, erff_t;

  unsigned grid_for(unsigned long long work, unsigned block, unsigned per_sm) const;
  // Uniform random values in [-scale, scale) of the element type of p (fp32/tf32: float).
  void fill(GemmPrecision p, DevPtr x, unsigned long long n, unsigned seed, float scale,
            const Stream& s) const;
};

// Device-to-device copy of `bytes`: median ms (bandwidth = 2 * bytes / ms, read + write).
double measure_copy_ms(const ProbeKernels& K, std::size_t bytes, const Stream& s);
// CUDA-core FP32 FMA peak, FLOP/s (2 per FMA).
double measure_fma_flops(const ProbeKernels& K, const Stream& s);
// Special-function throughput, evaluations/s, keyed "exp", "cos", "tanh", "erf" (each
// evaluation also pays one FMA).
std::map<std::string, double> measure_special_evals(const ProbeKernels& K, const Stream& s);
struct LaunchCost {
  double host_us = 0;        // host time per eager launch of an empty kernel
  double stream_us = 0;      // stream time per kernel, launched back to back
  double graph_node_us = 0;  // per node when replaying a graph of `nodes` empty kernels
  int nodes = 0;
};
LaunchCost measure_launch_cost(const ProbeKernels& K, const Stream& s, int eager = 2000,
                               int nodes = 1000);
// cuBLASLt GEMM n^3 on random data of precision p: median ms (FLOP = 2 n^3).
double measure_gemm_ms(const ProbeKernels& K, LtGemm& lt, GemmPrecision p, GemmEpilogue e,
                       std::int64_t n, const Stream& s, int reps);

}  // namespace brrr::cuda
