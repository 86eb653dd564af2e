// Shared oneDNN helpers for the library kernels (only included when BRRR_HAVE_DNNL).
#pragma once
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>

#include "backend/cpu/library.hpp"
#include "plan/library_desc.hpp"

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

// Constant weights (graph value `value`, its bytes at `data`, stored as `user`) reordered once at
// plan build into the layout `want` a primitive chose (plan_weights.cpp). Below
// kThreadedReorderBytes this runs on one thread: waking OpenMP's sleeping team for a reorder of
// microseconds cost 1-12 ms each on a loaded machine (ONEDNN_VERBOSE=2). Inside a PlanWeights
// scope the pack comes from the plan file when it holds it, and is recorded when it records.
constexpr size_t kThreadedReorderBytes = size_t(16) << 20;
dnnl::memory reorder_weights(int value, const void* data, const dnnl::memory::desc& user,
                             const dnnl::memory::desc& want);

// A kernel's run-time-only buffers (library.hpp, work_bytes / use_work): each part whole pages,
// empty memories and parts of size 0 skipped.
constexpr size_t kWorkAlign = 4096;
inline size_t work_part_bytes(const dnnl::memory& m) {
  if (!m.get(true)) return 0;
  size_t n = m.get_desc().get_size();
  return (n + kWorkAlign - 1) / kWorkAlign * kWorkAlign;
}
inline size_t work_size(std::initializer_list<const dnnl::memory*> parts) {
  size_t n = 0;
  for (const dnnl::memory* m : parts) n += work_part_bytes(*m);
  return n;
}
inline void work_bind(char* p, std::initializer_list<dnnl::memory*> parts) {
  for (dnnl::memory* m : parts)
    if (size_t n = work_part_bytes(*m)) {
      m->set_data_handle(p);
      p += n;
    }
}

// The epilogue's activation appended as eltwise post-ops; false when oneDNN has none for it.
inline bool append_activation(dnnl::post_ops& po, const plan::Epilogue& e) {
  using A = dnnl::algorithm;
  using Act = plan::Activation;
  switch (e.act) {
    case Act::None: return true;
    case Act::Relu: po.append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f); return true;
    case Act::GeluErf: po.append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f); return true;
    case Act::GeluTanh: po.append_eltwise(1.f, A::eltwise_gelu_tanh, 0.f, 0.f); return true;
    case Act::HardSwish: po.append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f); return true;
    case Act::Sigmoid: po.append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f); return true;
    case Act::Tanh: po.append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f); return true;
    case Act::Silu: po.append_eltwise(1.f, A::eltwise_swish, 1.f, 0.f); return true;
    case Act::Clip: po.append_eltwise(1.f, A::eltwise_clip, e.alpha, e.beta); return true;
    case Act::HardSigmoid:  // max(0, min(1, alpha*x + beta))
      po.append_eltwise(1.f, A::eltwise_linear, e.alpha, e.beta);
      po.append_eltwise(1.f, A::eltwise_clip, 0.f, 1.f);
      return true;
    case Act::Other: return false;
  }
  return false;
}

std::unique_ptr<LibraryKernel> make_dnnl_conv(const Graph& g, const plan::Kernel& k,
                                             const Layouts& layouts);
std::unique_ptr<LibraryKernel> make_dnnl_pool(const Graph& g, const plan::Kernel& k,
                                             const Layouts& layouts);

}  // namespace brrr::cpu
