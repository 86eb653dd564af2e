// The compile pipeline: a loaded graph and a Target in, the prepared graph and its plan out.
// Every caller that runs a model (Session, `brrr run`, `doctor`, `bench`) goes through it once.
#pragma once
#include <map>
#include <string>

#include "brrr/passes.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/target.hpp"

namespace brrr {

struct CompileOptions {
  // Concrete shapes for graph inputs; required for inputs with symbolic dims.
  std::map<std::string, Shape> input_shapes;
  size_t fold_budget_bytes = InferOptions{}.fold_budget_bytes;
  bool fusion = true;        // false: one kernel per node
  bool concat_split = true;  // distribute_concat, where the target has partial convs
  // bf16 or f16: the whole model stored in 16 bits (convert_precision), where the target
  // stores 16-bit models that way (Target::storage_16bit); f32 leaves the model's own types.
  DType storage = DType::f32;
};

struct Compiled {
  Graph graph;      // typed, sorted, folded, rewritten: what the plan's ids refer to
  plan::Plan plan;  // empty for a target that plans no kernels (the reference executor)
  // convert_precision's report when it ran (CompileOptions::storage), else all zero.
  PrecisionReport precision;
};

// Runs the passes in order (src/passes/pipeline.cpp). BRRR_DEBUG=1 prints each pass's time,
// BRRR_DEBUG=2 also the IR after each pass and the plan.
Compiled compile(Graph g, const plan::Target& target, const CompileOptions& opts);

}  // namespace brrr
