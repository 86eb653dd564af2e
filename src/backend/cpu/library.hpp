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

// Rank-4 activations between library kernels may be stored NHWC (what oneDNN's AVX-512
// convolutions use) instead of the graph's NCHW, so that a chain of convs and pools needs no
// reorders. nhwc[v] says so for value v; empty means all NCHW. Values with H*W == 1 are the same
// bytes either way.
using Layouts = std::vector<char>;
inline bool is_nhwc(const Layouts& l, int v) { return v >= 0 && size_t(v) < l.size() && l[size_t(v)]; }

// A ready-to-run primitive for a Library kernel, or nullptr when the library cannot do this case
// (the session then runs the kernel's nodes with their reference kernels).
std::unique_ptr<LibraryKernel> make_library_kernel(const Graph& g, const plan::Kernel& k,
                                                   const Layouts& nhwc = {});

// The values of kernel k that may be stored NHWC (inputs it reads and outputs it writes), given
// that make_library_kernel succeeded for it; `ties` gets groups of values that must share one
// layout (a Concat's inputs and output, a Conv's residual and output).
void nhwc_capable_values(const Graph& g, const plan::Kernel& k, std::vector<int>* ins,
                         std::vector<int>* outs, std::vector<std::vector<int>>* ties);

// The two providers make_library_kernel asks, in this order (nullptr: not this one).
std::unique_ptr<LibraryKernel> make_cpu_kernel(const Graph& g, const plan::Kernel& k,
                                               const Layouts& nhwc);
std::unique_ptr<LibraryKernel> make_dnnl_kernel(const Graph& g, const plan::Kernel& k,
                                                const Layouts& nhwc);

}  // namespace brrr::cpu
