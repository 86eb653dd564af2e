// C++ emitter for Fused kernels: one extern "C" function per distinct kernel body, called with
// the slot table (graph value id -> buffer address), the kernel's slot ids and the thread pool's
// C table (brrr_par, backend/cpu/thread_pool.hpp); large modules are split into several
// translation units.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/thread_pool.hpp"
#include "plan/kernel_ir.hpp"

namespace brrr::cpu {

// Signature of every generated function: bj is slots[args[j]]; chunks run on par's pool.
using KernelFn = void (*)(void* const* slots, const int32_t* args, const brrr_par* par);

struct CppSource {
  std::vector<std::string> parts;    // translation units, each standing alone
  // Per plan kernel: the function name ("" when not generated), the part defining it, and the
  // slot ids it is called with.
  std::vector<std::string> symbols;
  std::vector<int> part;
  std::vector<std::vector<int32_t>> args;
  size_t num_functions = 0;  // distinct generated functions
};

struct CodegenOptions {
  bool vector_math = true;  // declare libm functions `omp declare simd` (SLEEF GNU-ABI vectors)
  // A module is split into one translation unit per part_bytes of functions (g++ takes about
  // 1 s per 64 KB at -O3), at most max_parts of them (compile_parts runs one per core).
  size_t part_bytes = size_t(128) << 10;
  int max_parts = 1;
};

CppSource generate_cpp(const Graph& g, const plan::Plan& p, const CodegenOptions& opts);

}  // namespace brrr::cpu
