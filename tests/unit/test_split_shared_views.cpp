// split_shared_views (src/passes/split_shared_views.cpp): a view read by several view chains into
// MatMuls is cloned per chain, so that ViT's q/k/v split of its packed in-projection becomes GEMM
// operand strides instead of copy kernels (opt-in: BRRR_VIEW_CLONES=1); results against the
// reference executor.
#include <gtest/gtest.h>

#include <random>

#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "dnnl_flag.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "passes/pipeline.hpp"
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

int ints(GraphBuilder& b, const std::vector<int64_t>& v) {
  return b.constant("c" + std::to_string(b.count), Tensor::from_vector<int64_t>({int64_t(v.size())}, v));
}
int reshape(GraphBuilder& b, int x, const std::vector<int64_t>& to) {
  return b.node("Reshape", {x, ints(b, to)});
}
int transpose(GraphBuilder& b, int x, const std::vector<int64_t>& perm) {
  return b.node("Transpose", {x}, {{"perm", perm}});
}
int pick(GraphBuilder& b, int x, int64_t i) {
  int idx = b.constant("i" + std::to_string(b.count), Tensor::from_vector<int64_t>({}, {i}));
  return b.node("Gather", {x, idx}, {{"axis", int64_t(0)}});
}

// torchvision's MultiheadAttention as the TorchScript exporter writes it (ViT-B/16), small: a
// packed in-projection [S, 1, 3E], Reshape [S, 1, 3, E], Unsqueeze 0, Transpose [3,1,2,0,4],
// Squeeze -2, then q, k, v = Gather 0, 1, 2, each split into H heads of D; q and k scaled.
// With `pointwise_reader`, the squeezed tensor is also read by an Add (so it must stay a buffer).
Graph packed_qkv_attention(bool pointwise_reader = false) {
  const int64_t S = 5, H = 2, D = 4, E = H * D;
  GraphBuilder b;
  int x = b.input("x", {S, 1, E});
  int qkv = b.node("MatMul", {x, b.constant("w", rnd({E, 3 * E}, 1))});
  qkv = b.node("Add", {b.constant("bias", rnd({3 * E}, 2)), qkv});
  int t = reshape(b, qkv, {S, 1, 3, E});
  t = b.node("Unsqueeze", {t, ints(b, {0})});
  t = transpose(b, t, {3, 1, 2, 0, 4});
  int packed = b.node("Squeeze", {t, ints(b, {-2})});  // [3, S, 1, E]
  auto heads = [&](int i) {
    return reshape(b, transpose(b, reshape(b, pick(b, packed, i), {S, H, D}), {1, 0, 2}),
                   {1, H, S, D});
  };
  int scale = b.constant("scale", Tensor::from_vector<float>({1}, {0.7f}));
  int q = b.node("Mul", {heads(0), scale});
  int k = b.node("Mul", {transpose(b, heads(1), {0, 1, 3, 2}), scale});
  int v = heads(2);
  int p = b.node("Softmax", {b.node("MatMul", {q, k})}, {{"axis", int64_t(-1)}});
  int ctx = transpose(b, b.node("MatMul", {p, v}), {2, 0, 1, 3});  // [S, 1, H, D]
  b.output(reshape(b, ctx, {S, E}));
  if (pointwise_reader) b.output(b.node("Add", {packed, packed}));
  return b.g;
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& m : g.nodes) n += m.op == op;
  return n;
}
int count_kind(const plan::Plan& p, plan::KernelKind k) {
  int n = 0;
  for (const plan::Kernel& q : p.kernels) n += q.kind == k;
  return n;
}

void expect_session_matches_reference(const Graph& g) {
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, 42);
  Session s(g, SessionOptions{});
  Graph ref = compile(g, plan::Target::reference(), {}).graph;
  brrr_test::expect_outputs_close(s.run(in), run_reference(ref, in), 1e-5, 1e-5, s.plan_summary());
}

TEST(SplitSharedViews, ClonesTheSharedChainOncePerGather) {
  Graph g = packed_qkv_attention();
  InferOptions io;
  infer_shapes(g, io);
  ASSERT_TRUE(split_shared_views(g));
  // Reshape, Unsqueeze, Transpose and Squeeze once per Gather; the Gathers' own chains as they were.
  EXPECT_EQ(count_op(g, "Squeeze"), 3);
  EXPECT_EQ(count_op(g, "Unsqueeze"), 3);
  EXPECT_EQ(count_op(g, "Gather"), 3);
  EXPECT_EQ(count_op(g, "Reshape"), 3 + 3 * 2 + 1);
  for (const Node& n : g.nodes)
    for (int o : n.outputs) EXPECT_EQ(g.value(o).producer, &n - g.nodes.data());
  // The cloned graph computes what the original does, on the reference executor.
  Graph orig = packed_qkv_attention();
  infer_shapes(orig, io);
  std::map<std::string, Tensor> in{{"x", rnd({5, 1, 8}, 9)}};
  brrr_test::expect_outputs_close(run_reference(g, in), run_reference(orig, in), 0, 0, "");
  EXPECT_FALSE(split_shared_views(g)) << "nothing is shared any more";
}

TEST(SplitSharedViews, LeavesAViewThatAPointwiseOpAlsoReads) {
  Graph g = packed_qkv_attention(true);
  InferOptions io;
  infer_shapes(g, io);
  EXPECT_FALSE(split_shared_views(g));
  expect_session_matches_reference(packed_qkv_attention(true));
}

TEST(SplitSharedViews, CpuRunsNoCopyForThePackedProjection) {
  EXPECT_FALSE(plan::Target::cpu().clone_shared_views) << "opt-in";
  expect_session_matches_reference(packed_qkv_attention());
  Compiled off = compile(packed_qkv_attention(), plan::Target::cpu(), {});
  Compiled on;
  {
    brrr_test::EnvVar yes("BRRR_VIEW_CLONES", "1");
    expect_session_matches_reference(packed_qkv_attention());
    on = compile(packed_qkv_attention(), plan::Target::cpu(), {});
  }
  if (!brrr_test::kDnnl) GTEST_SKIP() << "no oneDNN in this build";
  EXPECT_EQ(count_op(off.graph, "Squeeze"), 1);
  EXPECT_EQ(count_kind(on.plan, plan::KernelKind::Copy), 0) << on.plan.print(on.graph);
  EXPECT_GT(count_kind(off.plan, plan::KernelKind::Copy), 0) << off.plan.print(off.graph);
  // The projection GEMM, Q.K^T, the softmax and P.V: nothing between them runs.
  EXPECT_EQ(on.plan.kernels.size(), 4u) << on.plan.print(on.graph);
  EXPECT_LT(on.plan.kernels.size(), off.plan.kernels.size());
}

}  // namespace
}  // namespace brrr
