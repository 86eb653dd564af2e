// Copy kernels (Reshape, Flatten, Squeeze, Unsqueeze) on the CPU alias their input's buffer
// (src/passes/plan_memory.cpp): the arena plan gives the output no bytes of its own, the input's
// buffer lives until the last reader of either, and sessions still match the reference, also
// where a later kernel writes its result over a residual that an alias reads.
#include <gtest/gtest.h>

#include <random>

#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "expect_outputs.hpp"
#include "passes/pipeline.hpp"
#include "passes/plan_memory.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/target.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

Tensor rnd(const Shape& s, unsigned seed) {
  std::mt19937 rng(seed);
  return brrr_test::uniform_f32(s, rng, -1.f, 1.f);
}

Tensor shape_tensor(const std::vector<int64_t>& s) {
  return Tensor::from_vector<int64_t>({int64_t(s.size())}, s);
}

ArenaPlan arena_of(const Compiled& c) {
  return plan_memory(c.graph, c.plan, [&](int id) {
    return size_t(shape_numel(c.graph.value(id).shape)) * dtype_size(c.graph.value(id).dtype);
  });
}

// Runs g three times in a session and compares with the reference; returns the plan summary.
std::string expect_matches_reference(const Graph& g) {
  std::map<std::string, Tensor> in;
  unsigned seed = 5;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, seed++);
  Session s(g, SessionOptions{});
  std::vector<Tensor> got;
  for (int r = 0; r < 3; ++r) got = s.run(in);
  brrr_test::expect_outputs_close(got, run_reference(s.graph(), in), 1e-5, 1e-5, s.plan_summary());
  return s.plan_summary();
}

// x -> Neg -> a -> Reshape -> r -> Relu -> y, and a is read again at the end (Add of y and a
// reshaped back): r is a's buffer, which must outlive r's reader.
Graph reshape_then_reuse() {
  GraphBuilder b;
  int x = b.input("x", {6, 32});
  int a = b.node("Neg", {x});
  int r = b.node("Reshape", {a, b.constant("s", shape_tensor({3, 64}))});
  int y = b.node("Relu", {r});
  int y2 = b.node("Reshape", {y, b.constant("s2", shape_tensor({6, 32}))});
  b.output(b.node("Add", {y2, a}));
  return b.g;
}

TEST(CpuCopyAlias, ArenaGivesTheCopyItsInputsBuffer) {
  CompileOptions o;
  o.fusion = false;
  Compiled c = compile(reshape_then_reuse(), plan::Target::cpu(), o);
  ArenaPlan a = arena_of(c);
  int copies = 0;
  for (size_t i = 0; i < c.plan.kernels.size(); ++i) {
    const plan::Kernel& k = c.plan.kernels[i];
    if (k.kind != plan::KernelKind::Copy) continue;
    ++copies;
    ASSERT_TRUE(copy_aliases_input(c.plan, i, a)) << c.plan.print(c.graph);
    const int in = k.inputs[0], out = k.outputs[0];
    EXPECT_EQ(a.offset[size_t(out)], -1);
    const int root = a.share[size_t(in)] >= 0 ? a.share[size_t(in)] : in;
    EXPECT_EQ(a.share[size_t(out)], root);  // a chain of aliases resolves to its first buffer
    EXPECT_GE(a.offset[size_t(root)], 0);
  }
  EXPECT_EQ(copies, 2) << c.plan.print(c.graph);
  // a (Neg's output) and y (Relu's, read through the second Reshape by the Add) live at once.
  const int neg = c.plan.kernels[0].outputs[0];
  for (size_t i = 0; i < c.plan.kernels.size(); ++i)
    if (c.graph.nodes[size_t(c.plan.kernels[i].nodes[0])].op == "Relu")
      EXPECT_NE(a.offset[size_t(c.plan.kernels[i].outputs[0])], a.offset[size_t(neg)]);
}

// A copy of a graph input or into a graph output keeps its own buffer and its memcpy.
TEST(CpuCopyAlias, InputsAndOutputsAreNotAliased) {
  GraphBuilder b;
  int x = b.input("x", {4, 8});
  int r = b.node("Reshape", {x, b.constant("s", shape_tensor({8, 4}))});
  int y = b.node("Relu", {r});
  b.output(b.node("Reshape", {y, b.constant("s2", shape_tensor({32}))}));
  CompileOptions o;
  o.fusion = false;
  Compiled c = compile(b.g, plan::Target::cpu(), o);
  ArenaPlan a = arena_of(c);
  for (size_t i = 0; i < c.plan.kernels.size(); ++i)
    EXPECT_FALSE(copy_aliases_input(c.plan, i, a)) << c.plan.print(c.graph);
  std::string summary = expect_matches_reference(b.g);
  EXPECT_EQ(summary.find("alias"), std::string::npos) << summary;
}

TEST(CpuCopyAlias, SessionMatchesReference) {
  std::string summary = expect_matches_reference(reshape_then_reuse());
  EXPECT_NE(summary.find("copy kernel(s) alias their input's buffer"), std::string::npos)
      << summary;
}

// A MatMul whose residual (its sum post-op on oneDNN) is a Reshape of a value that a later node
// still reads through another alias: the GEMM must not write its result over that buffer.
TEST(CpuCopyAlias, ResidualReadThroughAnAliasIsNotOverwritten) {
  GraphBuilder b;
  int x = b.input("x", {8, 16});
  int h = b.node("Sigmoid", {x});                                            // [8,16]
  int r = b.node("Reshape", {h, b.constant("s", shape_tensor({8, 16}))});   // alias of h
  int m = b.node("MatMul", {x, b.constant("w", rnd({16, 16}, 3))});
  int sum = b.node("Add", {m, r});                                           // residual r
  int r2 = b.node("Flatten", {h}, {{"axis", int64_t(1)}});                  // h read again
  int t = b.node("Tanh", {sum});
  b.output(b.node("Mul", {t, r2}));
  expect_matches_reference(b.g);
}

// A Squeeze / Unsqueeze chain between generated kernels, run in a session.
TEST(CpuCopyAlias, SqueezeUnsqueezeChain) {
  GraphBuilder b;
  int x = b.input("x", {1, 12, 10});
  int e = b.node("Exp", {x});
  int s = b.node("Squeeze", {e, b.constant("ax", shape_tensor({0}))});
  int u = b.node("Unsqueeze", {s, b.constant("ax2", shape_tensor({1}))});
  int f = b.node("Flatten", {u}, {{"axis", int64_t(2)}});
  int l = b.node("Log", {f});
  b.output(b.node("Sub", {l, b.node("Reshape", {e, b.constant("s", shape_tensor({12, 1, 10}))})}));
  expect_matches_reference(b.g);
}

}  // namespace
}  // namespace brrr
