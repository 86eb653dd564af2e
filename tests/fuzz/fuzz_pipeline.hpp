// The fuzzed pipeline: ONNX bytes -> load -> compile for the reference target -> plans and
// generated code -> one run on small inputs.
// Shared by the libFuzzer target and the regression test that replays saved crashes.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include "brrr/onnx.hpp"
#include "brrr/op.hpp"
#include "brrr/reference.hpp"
#include "backend/cpu/codegen_cpp.hpp"
#include "passes/pipeline.hpp"
#include "plan/kernel_ir.hpp"

namespace brrr_fuzz {

constexpr int64_t kMaxElements = 1 << 20;  // per value, so each run stays fast
constexpr double kMaxFlops = 5e7;

inline bool small_enough(const brrr::Graph& g) {
  double flops = 0;
  for (const auto& v : g.values)
    if (v.typed && brrr::shape_numel(v.shape) > kMaxElements) return false;
  for (const auto& n : g.nodes) {
    brrr::Cost c = brrr::op_cost(g, n);
    flops += c.flops + c.bytes;
    for (const auto& [k, s] : c.special) flops += s;
  }
  return flops <= kMaxFlops;
}

// Returns normally for any input: a result or a brrr::Error. Anything else is a bug.
inline void run_one(const uint8_t* data, size_t size) {
  using namespace brrr;
  try {
    Graph g = load_onnx_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    CompileOptions opts;
    for (int id : g.inputs) {
      Shape s = g.value(id).shape;
      for (auto& d : s)
        if (d < 0) d = 2;
      if (shape_numel(s) > kMaxElements) return;
      opts.input_shapes[g.value(id).name] = s;
    }
    g = compile(std::move(g), plan::Target::reference(), opts).graph;
    // Plan and generate code, fused and one kernel per op (the system compiler is too slow to run
    // per input; the generated text is what untrusted names and constants could break).
    for (bool fuse : {true, false}) {
      plan::FusionOptions fo;
      fo.enable = fuse;
      plan::Plan p = plan::build_plan(g, fo);
      cpu::generate_cpp(g, p, cpu::CodegenOptions{});
    }
    if (!small_enough(g)) return;
    std::mt19937 rng{static_cast<uint32_t>(size)};
    std::uniform_real_distribution<double> u(-3, 3);
    std::map<std::string, Tensor> inputs;
    for (int id : g.inputs) {
      const Value& v = g.value(id);
      Tensor t = Tensor::from_vector<double>(v.shape, [&] {
        std::vector<double> x(size_t(shape_numel(v.shape)));
        for (auto& e : x) e = u(rng);
        return x;
      }());
      inputs[v.name] = t.cast(v.dtype);
    }
    run_reference(g, inputs);
  } catch (const Error&) {
  }
  return;
}

}  // namespace brrr_fuzz
