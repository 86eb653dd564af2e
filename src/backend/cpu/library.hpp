// Library kernels: contractions, convolutions and pools through oneDNN (bias, activation and
// residual epilogues as post-ops), plus a few hand-written copy/reduce kernels.
#pragma once
#include <memory>

#include "plan/kernel_ir.hpp"

namespace brrr::cpu {

class LibraryKernel {
 public:
  virtual ~LibraryKernel() = default;
  // Runs on the slot table (graph value id -> buffer address); allocates nothing itself.
  virtual void run(void* const* slots) = 0;
};

// A ready-to-run primitive for a Library kernel, or nullptr when the library cannot do this case
// (the session then runs the kernel's nodes with their reference kernels).
std::unique_ptr<LibraryKernel> make_library_kernel(const Graph& g, const plan::Kernel& k);

// The two providers make_library_kernel asks, in this order (nullptr: not this one).
std::unique_ptr<LibraryKernel> make_cpu_kernel(const Graph& g, const plan::Kernel& k);
std::unique_ptr<LibraryKernel> make_dnnl_kernel(const Graph& g, const plan::Kernel& k);

}  // namespace brrr::cpu
