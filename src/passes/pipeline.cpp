// The compile pipeline, straight-line: each step is one pass (one file under src/passes/, fusion
// in src/plan/), graph to graph or graph to plan, in the order they run. A pass that consults the
// backend reads the Target, never the build configuration.
#include "passes/pipeline.hpp"

#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "core/env.hpp"
#include "plan/library_desc.hpp"

namespace brrr {

int debug_level() {
  static int lvl = int(env::integer("BRRR_DEBUG"));
  return lvl;
}

void debug_dump(const Graph& g, const char* after_pass) {
  if (debug_level() >= 2) std::cerr << "--- IR after " << after_pass << " ---\n" << g.print();
}

namespace {

// BRRR_DEBUG=1: how long each pass took (compile time must stay near-linear in model size);
// BRRR_DEBUG=2: the IR after it, or that it changed nothing.
class PassLog {
 public:
  void after(const char* pass, const Graph& g, bool changed = true) {
    auto now = std::chrono::steady_clock::now();
    if (debug_level() >= 1)
      fmt::print(stderr, "brrr: build {:<14} {:9.1f} ms\n", pass,
                 std::chrono::duration<double, std::milli>(now - last_).count());
    if (changed) debug_dump(g, pass);
    else if (debug_level() >= 2) std::cerr << "--- IR after " << pass << ": unchanged ---\n";
    last_ = std::chrono::steady_clock::now();  // the dump is not the next pass's time
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace

Compiled compile(Graph g, const plan::Target& target, const CompileOptions& o) {
  PassLog log;
  topo_sort(g);
  log.after("topo_sort", g);
  bind_inputs(g, o.input_shapes);
  infer_types(g, o.fold_budget_bytes);  // folds constants node by node as it types them
  log.after("infer_shapes", g);
  eliminate_dead_nodes(g);
  log.after("dead_nodes", g);
  if (target.plans_kernels) {  // the reference executor keeps the op (the oracle)
    bool decomposed = decompose_batchnorm(g);
    log.after("batchnorm", g, decomposed);
    bool unpadded = identity_pads(g);
    log.after("identity_pads", g, unpadded);
    if (target.forward_identities) {
      bool forwarded = forward_identities(g);
      log.after("forward_identities", g, forwarded);
    }
    if (target.square_pows) {
      bool squared = square_pows(g);
      log.after("square_pows", g, squared);
    }
    if (target.channel_shuffle_gathers) {
      bool shuffled = channel_shuffles(g);
      log.after("channel_shuffles", g, shuffled);
    }
  }
  PrecisionReport precision;
  if (o.storage != DType::f32 && target.storage_16bit) {
    precision = convert_precision(g, o.storage, o.fold_budget_bytes);
    log.after("convert_precision", g);
  }
  if (!target.plans_kernels) return {std::move(g), {}, precision};

  bool split = split_variadic(g);
  log.after("split_variadic", g, split);
  if (target.patchify_convs) {  // before the sink and the merge: its MatMul is theirs too
    bool patched = patchify_convs(g);
    log.after("patchify_convs", g, patched);
  }
  if (target.sink_row_transposes) {
    bool sunk = sink_row_transposes(g);
    log.after("row_transposes", g, sunk);
  }
  if (target.merge_gemms) {  // before fusion: the Slices it makes are views there
    bool merged = merge_parallel_gemms(g, !target.merge_gemms_any_reader, target.lazy_views);
    log.after("merge_gemms", g, merged);
  }
  if (target.clone_shared_views) {  // after the merge: its Slices may be shared too
    bool cloned = split_shared_views(g);
    log.after("view_clones", g, cloned);
  }
  if (target.partial_convs && o.concat_split) {
    bool distributed = distribute_concat(g);
    log.after("concat_split", g, distributed);
  }
  if (target.rotary_halves && o.fusion) {  // its nodes fuse only as lazy views
    bool split_rotary = split_rotary_halves(g);
    log.after("rotary_halves", g, split_rotary);
  }
  plan::FusionOptions fo;
  fo.enable = o.fusion;
  fo.float16 = target.generated_16bit;
  fo.booleans = target.generated_bool;
  plan::Plan p = plan::build_plan(g, fo, target);
  log.after("fusion", g, false);  // the graph stays; the plan is new
  plan::choose_precision(g, p, target);  // GEMM / conv operand types, from the Target
  log.after("choose_precision", g, false);
  if (debug_level() >= 2) std::cerr << "--- plan for " << target.name << " ---\n" << p.print(g);
  // Library kernels the backend's library turns down at build time, the layouts between them
  // and the arena are the executor's steps (src/passes/choose_layouts.cpp, plan_memory.cpp):
  // which kernels a library accepts is known only once it has made them.
  return {std::move(g), std::move(p), precision};
}

}  // namespace brrr
