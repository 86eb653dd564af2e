// Compile time against graph size (issue 14 item 9), checked by structure, never by timing: fused
// kernels are capped, kernels with the same body share one generated function, wide variadic
// ops become chains, large modules split into several translation units; every result equals
// the reference executor's. scripts/compile_scaling.py measures the times.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "expect_outputs.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"
#include "passes/plan_memory.hpp"

namespace brrr {
namespace {

std::map<std::string, Tensor> random_inputs(const Graph& g) {
  std::mt19937 rng(7);
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) in[g.value(id).name] = brrr_test::uniform_f32(g.value(id).shape, rng, -1, 1);
  return in;
}

// Runs g compiled and by reference on the same random inputs; compares every output.
Session check(Graph g, SessionOptions o = {}, double rtol = 1e-5, double atol = 1e-6) {
  auto in = random_inputs(g);
  Session s(g, o);
  brrr_test::expect_outputs_close(s.run(in), run_reference(s.graph(), in), rtol, atol,
                                  s.plan_summary().substr(0, 4000));
  return s;
}

Graph relu_chain(int n, int64_t width) {
  GraphBuilder b;
  int v = b.input("x", {2, width});
  for (int i = 0; i < n; ++i) v = b.node(i % 2 ? "Relu" : "Neg", {v});
  b.output(v);
  return b.g;
}

TEST(CompileScale, LongChainIsCappedKernelsSharingFunctions) {
  for (int n : {1500, 4000}) {
    Session s = check(relu_chain(n, 33));
    size_t largest = 0;
    for (const auto& k : s.kernel_nodes()) largest = std::max(largest, k.size());
    EXPECT_LE(largest, 128u) << "one fused kernel of " << largest << " ops";
    EXPECT_GE(s.num_kernels("fused"), n / 128);
    // The same few bodies (the middle kernels, the first and the last), whatever the length.
    EXPECT_LE(s.num_generated_functions(), 3) << s.num_kernels("fused") << " fused kernels";
  }
}

TEST(CompileScale, UnfusedKernelsShareFunctionsAcrossBuffersAndConstants) {
  // One kernel per op; the Adds read distinct tensor and scalar initializers through pointers.
  GraphBuilder b;
  int v = b.input("x", {3, 17});
  std::mt19937 rng(3);
  for (int i = 0; i < 300; ++i) {
    int c = i % 2 ? b.scalar(float(i) * 0.001f)
                  : b.constant("t" + std::to_string(i), brrr_test::uniform_f32({17}, rng, -1, 1));
    v = b.node("Add", {v, c});
  }
  b.output(v);
  SessionOptions o;
  o.fusion = 0;
  Session s = check(b.g, o, 1e-5, 1e-5);
  EXPECT_EQ(s.num_kernels("fused"), 300);
  EXPECT_EQ(s.num_generated_functions(), 2);  // Add of a [17] row, Add of a scalar
}

TEST(CompileScale, KernelsDifferingInAttributesDoNotShare) {
  // Same structure, shapes and buffers pattern; only the attribute differs: a wrongly shared
  // function would apply one alpha everywhere.
  GraphBuilder b;
  int v = b.input("x", {4, 9});
  for (int i = 0; i < 6; ++i) v = b.node("LeakyRelu", {v}, {{"alpha", AttrValue(0.1f * float(i + 1))}});
  b.output(v);
  SessionOptions o;
  o.fusion = 0;
  Session s = check(b.g, o);
  EXPECT_EQ(s.num_generated_functions(), 6);
}

TEST(CompileScale, ReshapeTransposeChainSharesFunctions) {
  GraphBuilder b;
  int v = b.input("x", {6, 10});
  int shape = b.constant("shape", Tensor::from_vector<int64_t>({2}, {6, 10}));
  for (int i = 0; i < 400; ++i)
    v = i % 2 ? b.node("Reshape", {v, shape}) : b.node("Transpose", {v}, {{"perm", AttrValue(std::vector<int64_t>{1, 0})}});
  b.output(v);
  Session s = check(b.g, {}, 0, 0);
  EXPECT_EQ(s.num_kernels("fused"), 200);
  EXPECT_EQ(s.num_generated_functions(), 1);
}

TEST(CompileScale, WideVariadicOpsBecomeChainsWithTheSameResult) {
  for (const char* op : {"Sum", "Max", "Min"}) {
    GraphBuilder b;
    int x = b.input("x", {2, 16});
    std::mt19937 rng(5);
    std::vector<int> ins{x};
    for (int i = 0; i < 100; ++i)
      ins.push_back(b.constant("c" + std::to_string(i), brrr_test::uniform_f32({16}, rng, -1, 1)));
    ins.push_back(b.input("y", {2, 1}));  // broadcasts, late in the list
    b.output(b.node(op, ins));
    // The same order of float32 additions as the one node: equal, not merely close.
    Session s = check(b.g, {}, 0, 0);
    size_t widest = 0;
    for (const Node& n : s.graph().nodes) widest = std::max(widest, n.inputs.size());
    EXPECT_LE(widest, 8u) << op;
  }
}

TEST(CompileScale, WideTreeEqualsReference) {
  GraphBuilder b;
  int x = b.input("x", {1, 24});
  std::vector<int> level;
  for (int i = 0; i < 600; ++i) level.push_back(b.node("Mul", {x, b.scalar(0.01f * float(i % 37))}));
  while (level.size() > 1) {
    std::vector<int> next;
    for (size_t j = 0; j + 1 < level.size(); j += 2) next.push_back(b.node("Add", {level[j], level[j + 1]}));
    if (level.size() % 2) next.push_back(level.back());
    level = next;
  }
  b.output(level[0]);
  check(b.g, {}, 1e-5, 1e-5);
}

TEST(CompileScale, LargeModuleSplitsIntoTranslationUnits) {
  // Chains over different widths have different bodies; a tiny part size puts each function in
  // its own translation unit, compiled side by side.
  GraphBuilder b;
  for (int64_t w = 1; w <= 6; ++w) {
    int v = b.input("x" + std::to_string(w), {3, w * 5});
    for (int i = 0; i < 3; ++i) v = b.node("Sigmoid", {b.node("Mul", {v, b.scalar(1.5f)})});
    b.output(v);
  }
  SessionOptions o;
  o.cpp_part_bytes = 1;
  o.cpp_max_parts = 64;
  Session s = check(b.g, o);
  EXPECT_EQ(s.num_generated_functions(), 6);
  EXPECT_EQ(s.num_translation_units(), 6);
  o.cpp_max_parts = 4;  // ...or as many as allowed, each with whole functions
  EXPECT_EQ(check(b.g, o).num_translation_units(), 4);
  SessionOptions one;  // the default keeps a module this small in one unit
  EXPECT_EQ(check(b.g, one).num_translation_units(), 1);
}

// The greedy placement (largest first, lowest free offset) against its definition: every pair
// of requests compared directly.
TEST(CompileScale, MemoryPlanMatchesPairwisePlacement) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<BufferRequest> reqs;
    int n = 1 + int(rng() % 300), span = 1 + int(rng() % 400);
    for (int i = 0; i < n; ++i) {
      int f = int(rng() % unsigned(span));
      int l = f + int(rng() % (trial % 2 ? 5u : unsigned(span)));
      reqs.push_back({size_t(rng() % 5000), f, l});
    }
    MemoryPlan p = plan_memory(reqs);
    auto align = [](size_t b) { return (b + 63) / 64 * 64; };
    std::vector<size_t> order(reqs.size()), want(reqs.size(), 0);
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t c) { return reqs[a].bytes > reqs[c].bytes; });
    std::vector<size_t> placed;
    for (size_t r : order) {
      std::vector<std::pair<size_t, size_t>> busy;
      for (size_t q : placed)
        if (reqs[q].first <= reqs[r].last && reqs[r].first <= reqs[q].last)
          busy.push_back({want[q], want[q] + align(reqs[q].bytes)});
      std::sort(busy.begin(), busy.end());
      size_t off = 0;
      for (auto [lo, hi] : busy) {
        if (off + align(reqs[r].bytes) <= lo) break;
        off = std::max(off, hi);
      }
      want[r] = off;
      placed.push_back(r);
    }
    EXPECT_EQ(p.offsets, want) << "trial " << trial;
  }
}

}  // namespace
}  // namespace brrr
