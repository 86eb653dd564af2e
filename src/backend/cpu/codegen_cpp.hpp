// C++ emitter for Fused kernels: one translation unit per model, one extern "C" function per
// kernel taking the slot table (graph value id -> buffer address) and the thread pool's C table
// (brrr_par, backend/cpu/thread_pool.hpp).
#pragma once
#include <string>
#include <vector>

#include "plan/kernel_ir.hpp"

namespace brrr::cpu {

struct CppSource {
  std::string text;
  std::vector<std::string> symbols;  // per plan kernel: the function name, "" when not generated
};

struct CodegenOptions {
  bool vector_math = true;  // declare libm functions `omp declare simd` (SLEEF GNU-ABI vectors)
};

CppSource generate_cpp(const Graph& g, const plan::Plan& p, const CodegenOptions& opts);

}  // namespace brrr::cpu
