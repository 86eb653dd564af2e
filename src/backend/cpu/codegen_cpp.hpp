// C++ emitter for Fused kernels: one extern "C" function per distinct kernel body, called with
// the slot table (graph value id -> buffer address), the kernel's slot ids and the thread pool's
// C table (brrr_par, backend/cpu/thread_pool.hpp); large modules are split into several
// translation units.
#pragma once
#include <array>
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
  // Row kernels keep a reduction's computed element argument that a later loop needs again in a
  // per-row scratch array instead of computing it twice (BRRR_NO_ROW_CACHE=1: off).
  bool row_cache = true;
  // A module is split into one translation unit per part_bytes of functions (g++ takes about
  // 1 s per 64 KB at -O3), at most max_parts of them (compile_parts runs one per core).
  size_t part_bytes = size_t(128) << 10;
  int max_parts = 1;
};

// The C form of each scalar op over its operands {0}, {1}, ... (tinygrad's code_for_op): the
// C-style table both emitters start from, using brrr/scalar_ops.h for what is not an operator
// or a libm call; the CUDA emitter copies it and overrides only what differs.
using CodeForOp = std::array<std::string, size_t(ScalarOp::Count)>;
const CodeForOp& c_code_for_op();

// The C expression of `op` by `table` over operands already rendered as C.
std::string render_op(const CodeForOp& table, ScalarOp op, const std::vector<std::string>& operands);

// The C expression of pointwise expression `e` by `table`: expression operands as (eN),
// immediates as the literals of their attributes.
std::string render_pointwise(const CodeForOp& table, const plan::Expr& e);

CppSource generate_cpp(const Graph& g, const plan::Plan& p, const CodegenOptions& opts);

}  // namespace brrr::cpu
