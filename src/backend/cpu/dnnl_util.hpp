// Shared oneDNN helpers for the library kernels (only included when BRRR_HAVE_DNNL).
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>

#include "backend/cpu/library.hpp"

namespace brrr::cpu {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

std::unique_ptr<LibraryKernel> make_dnnl_conv(const Graph& g, const plan::Kernel& k,
                                             const Layouts& nhwc);
std::unique_ptr<LibraryKernel> make_dnnl_pool(const Graph& g, const plan::Kernel& k,
                                             const Layouts& nhwc);

}  // namespace brrr::cpu
