// Library kernels: contractions through oneDNN, with bias and activation epilogues as post-ops.
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

}  // namespace brrr::cpu
