// Shared oneDNN helpers for the library kernels (only included when BRRR_HAVE_DNNL).
#pragma once
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>

#include "backend/cpu/library.hpp"

namespace brrr::cpu {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// Small problems run on one thread. oneDNN sizes a primitive's thread partition when the primitive
// is made, so making it under a one-thread limit keeps its runs out of OpenMP regions: a region
// costs microseconds on a quiet machine and far more when the cores are shared.
constexpr double kSingleThreadFlops = 2e6;
// ...unless it moves many bytes: a depthwise conv or a GEMV (M = 1) does few flops per byte, and one
// core reaches only part of the machine's bandwidth.
constexpr double kSingleThreadBytes = 512 * 1024;
inline bool one_thread(double flops, double bytes) {
  return flops < kSingleThreadFlops && bytes < kSingleThreadBytes;
}
class ThreadLimit {
 public:
  explicit ThreadLimit(bool one) : prev_(omp_get_max_threads()), on_(one) {
    if (on_) omp_set_num_threads(1);
  }
  ~ThreadLimit() {
    if (on_) omp_set_num_threads(prev_);
  }
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int prev_;
  bool on_;
};

inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

std::unique_ptr<LibraryKernel> make_dnnl_conv(const Graph& g, const plan::Kernel& k,
                                             const Layouts& layouts);
std::unique_ptr<LibraryKernel> make_dnnl_pool(const Graph& g, const plan::Kernel& k,
                                             const Layouts& layouts);

}  // namespace brrr::cpu
