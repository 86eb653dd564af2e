// MatMul operands read through strided views (plan/operand_view.hpp): attention's head split
// (Reshape, Transpose [0,2,1,3] or [0,2,3,1], the 1/sqrt(sqrt(d)) Mul) and the heads merged back
// after it run inside the library GEMMs, with no copy kernel, and equal the reference.
#include <gtest/gtest.h>

#include <random>

#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "dnnl_flag.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/operand_view.hpp"
#include "plan/target.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

Tensor rnd(const Shape& s, unsigned seed) {
  std::mt19937 rng(seed);
  return brrr_test::uniform_f32(s, rng, -1.f, 1.f);
}

int reshape(GraphBuilder& b, int x, const std::vector<int64_t>& to) {
  Tensor s = Tensor::from_vector<int64_t>({int64_t(to.size())}, to);
  return b.node("Reshape", {x, b.constant("shape" + std::to_string(b.count), s)});
}
int transpose(GraphBuilder& b, int x, const std::vector<int64_t>& perm) {
  return b.node("Transpose", {x}, {{"perm", perm}});
}

// One attention head block as BERT's TorchScript export writes it: S = 8, 4 heads of 8.
Graph attention() {
  GraphBuilder b;
  int xq = b.input("q", {1, 8, 32}), xk = b.input("k", {1, 8, 32}), xv = b.input("v", {1, 8, 32});
  int q = b.node("Mul", {transpose(b, reshape(b, xq, {1, 8, 4, 8}), {0, 2, 1, 3}), b.scalar(0.59f)});
  int k = b.node("Mul", {transpose(b, reshape(b, xk, {1, 8, 4, 8}), {0, 2, 3, 1}), b.scalar(0.59f)});
  int p = b.node("Softmax", {b.node("MatMul", {q, k})}, {{"axis", int64_t(-1)}});
  int v = transpose(b, reshape(b, xv, {1, 8, 4, 8}), {0, 2, 1, 3});
  int ctx = b.node("MatMul", {p, v});
  int merged = reshape(b, transpose(b, reshape(b, ctx, {1, 4, 8, 8}), {0, 2, 1, 3}), {1, 8, 32});
  int out = b.node("MatMul", {merged, b.constant("w", rnd({32, 32}, 3))});
  b.output(b.node("Add", {out, b.constant("bias", rnd({32}, 4))}));
  return b.g;
}

struct Ran {
  int kernels = 0, library = 0, copies = 0, fused = 0, reference = 0;
  std::string plan;
};

// Runs g twice in a Session and compares with the reference executor.
Ran run_and_check(const Graph& g) {
  std::map<std::string, Tensor> in;
  unsigned seed = 11;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, seed++);
  Session s(g, SessionOptions{});
  std::vector<Tensor> got;
  for (int r = 0; r < 2; ++r) got = s.run(in);
  brrr_test::expect_outputs_close(got, run_reference(s.graph(), in), 1e-5, 1e-5, s.plan_summary());
  return {s.num_kernels(),       s.num_kernels("library"),   s.num_kernels("copy"),
          s.num_kernels("fused"), s.num_kernels("reference"), s.plan_summary()};
}

TEST(GemmViews, AttentionRunsNoMovementKernel) {
  // The views of the unfused block (fused attention: test_cpu_attention.cpp).
  brrr_test::EnvVar unfused("BRRR_CPU_FUSED_ATTENTION", "0");
  Ran on = run_and_check(attention());
  Ran off;
  {
    brrr_test::EnvVar no_views("BRRR_NO_GEMM_VIEWS", "1");
    off = run_and_check(attention());
  }
  if (!brrr_test::kDnnl) GTEST_SKIP() << "no oneDNN in this build";
  // Q.K^T (both Muls as its scale), softmax, P.V (writing the merged heads), the projection.
  EXPECT_EQ(on.kernels, 4) << on.plan;
  EXPECT_EQ(on.library, 3) << on.plan;
  EXPECT_EQ(on.copies, 0) << on.plan;
  EXPECT_EQ(on.fused, 1) << on.plan;  // the softmax
  // Without the switch's views the Reshapes are copies and the Transposes fused kernels.
  EXPECT_GE(off.copies, 4) << off.plan;
  EXPECT_GT(off.kernels, on.kernels + 4) << off.plan;
}

// The views' geometry: BERT's K, [1,S,H*D] -> [1,S,H,D] -> [1,H,D,S], read in place.
TEST(GemmViews, HeadSplitStrides) {
  GraphBuilder b;
  int x = b.input("x", {1, 8, 32});
  int t = transpose(b, reshape(b, x, {1, 8, 4, 8}), {0, 2, 3, 1});
  b.output(b.node("MatMul", {b.input("q", {1, 4, 8, 8}), t}));
  infer_shapes(b.g, {});
  plan::OperandView v = plan::operand_view(b.g, t, [](int) { return true; });
  EXPECT_EQ(v.source, x);
  EXPECT_EQ(v.nodes.size(), 2u);
  EXPECT_EQ(v.dims, (Shape{1, 4, 8, 8}));
  EXPECT_EQ(v.strides, (std::vector<int64_t>{256, 8, 1, 32}));
  // The merge after attention: [1,H,S,D] written through Transpose [0,2,1,3] into [1,S,H,D].
  GraphBuilder b2;
  int y = b2.node("MatMul", {b2.input("p", {1, 4, 8, 8}), b2.input("v", {1, 4, 8, 8})});
  int m = transpose(b2, y, {0, 2, 1, 3});
  b2.output(reshape(b2, m, {1, 8, 32}));
  infer_shapes(b2.g, {});
  plan::OperandView o = plan::output_view(b2.g, y, [](int) { return true; });
  ASSERT_EQ(o.nodes.size(), 2u);  // the Transpose and the Reshape
  EXPECT_EQ(o.dims, (Shape{1, 4, 8, 8}));
  EXPECT_EQ(o.strides, (std::vector<int64_t>{256, 8, 32, 1}));
}

// The oneDNN implementation line of a plan summary ("" when there is none).
std::string gemm_impls(const std::string& summary) {
  size_t at = summary.find("oneDNN matmul implementations: ");
  if (at == std::string::npos) return "";
  return summary.substr(at, summary.find('\n', at) - at);
}

// BERT's merge as its TorchScript export writes it (a Reshape to the same shape, the Transpose,
// the Reshape to [1, S, H*D]): the view leaves the batch dim of 1 with stride H*D, between the
// others'. oneDNN 2.6's brgemm refused that (P.V fell to gemm:jit, 17% slower per
// call on BERT-base); the library gives such dims the whole extent and gets the same kernel as
// the contiguous plan.
TEST(GemmViews, MergedHeadsKeepTheContiguousKernel) {
  auto graph = [] {
    GraphBuilder b;
    int y = b.node("MatMul", {b.input("p", {1, 4, 8, 8}), b.input("v", {1, 4, 8, 8})});
    b.output(reshape(b, transpose(b, reshape(b, y, {1, 4, 8, 8}), {0, 2, 1, 3}), {1, 8, 32}));
    infer_shapes(b.g, {});
    return b.g;
  };
  Graph g = graph();
  plan::OperandView o =
      plan::output_view(g, g.nodes[0].outputs[0], [](int) { return true; });
  ASSERT_EQ(o.nodes.size(), 3u);
  EXPECT_EQ(o.strides, (std::vector<int64_t>{32, 8, 32, 1}));  // the batch dim's stride: H*D
  Ran on = run_and_check(g);
  Ran off;
  {
    brrr_test::EnvVar no_views("BRRR_NO_GEMM_VIEWS", "1");
    off = run_and_check(graph());
  }
  if (!brrr_test::kDnnl) GTEST_SKIP() << "no oneDNN in this build";
  EXPECT_EQ(on.kernels, 1) << on.plan;
  EXPECT_EQ(on.copies, 0) << on.plan;
  const std::string impl = gemm_impls(off.plan);  // the one GEMM of the contiguous plan
  ASSERT_FALSE(impl.empty()) << off.plan;
  EXPECT_EQ(gemm_impls(on.plan), impl) << on.plan;
}

// A Reshape that merges dims a Transpose made non-adjacent is no view: it stays a kernel, and
// the MatMul reads only what is one (here nothing past it). A scaled operand keeps its bias out
// of the GEMM (the library adds a bias before the scale). Both equal the reference.
TEST(GemmViews, WhatIsNoViewStaysAKernel) {
  GraphBuilder b;
  int x = b.input("x", {1, 4, 8, 8});
  int merged = reshape(b, transpose(b, x, {0, 2, 1, 3}), {1, 8, 32});
  b.output(b.node("MatMul", {merged, b.input("w", {1, 32, 16})}));
  infer_shapes(b.g, {});
  plan::Plan p = plan::build_plan(b.g, {}, plan::Target::cpu(true));
  Ran r = run_and_check(b.g);
  if (!brrr_test::kDnnl) GTEST_SKIP() << "no oneDNN in this build";
  EXPECT_EQ(p.kernels.size(), 2u) << p.print(b.g);  // the Transpose, then MatMul reading the Reshape
  EXPECT_EQ(r.copies, 0) << r.plan;

  GraphBuilder b2;
  int a = b2.node("Mul", {transpose(b2, b2.input("a", {1, 8, 6, 16}), {0, 2, 1, 3}), b2.scalar(0.25f)});
  int mm = b2.node("MatMul", {a, b2.input("w", {1, 6, 16, 5})});
  b2.output(b2.node("Add", {mm, b2.constant("bias", rnd({5}, 9))}));
  Ran r2 = run_and_check(b2.g);
  if (brrr_test::kDnnl) EXPECT_EQ(r2.library, 1) << r2.plan;
}

// ViT's attention as torchvision's MultiheadAttention exports it: one in-projection [S,1,3E],
// Reshape [S,1,3,E], Unsqueeze, Transpose [3,S,1,1,E], Squeeze, then q, k and v as Gather 0, 1
// and 2 (once three reference kernels per layer), each split into heads. The Gathers become
// offsets into that buffer; here S = 6, E = 16, 2 heads of 8.
TEST(GemmViews, PackedQkvGathersAreOffsets) {
  GraphBuilder b;
  const int64_t S = 6, E = 16, H = 2, D = 8;
  int x = b.input("x", {S, 1, 3 * E});
  int packed = b.node("Squeeze", {transpose(b, b.node("Unsqueeze", {reshape(b, x, {S, 1, 3, E}),
                                                                     b.constant("ax", Tensor::from_vector<int64_t>({1}, {0}))}),
                                            {3, 1, 2, 0, 4}),
                                  b.constant("sq", Tensor::from_vector<int64_t>({1}, {3}))});
  auto head = [&](int64_t i, const std::vector<int64_t>& perm) {
    int pick = b.node("Gather", {packed, b.constant("i" + std::to_string(i), Tensor::scalar<int64_t>(i))},
                      {{"axis", int64_t(0)}});
    return transpose(b, reshape(b, pick, {S, H, D}), perm);  // [H, S, D] or [H, D, S]
  };
  int q = head(0, {1, 0, 2}), k = head(1, {1, 2, 0}), v = head(2, {1, 0, 2});
  int p = b.node("Softmax", {b.node("MatMul", {q, k})}, {{"axis", int64_t(-1)}});
  b.output(b.node("MatMul", {p, v}));
  infer_shapes(b.g, {});
  // k read straight from x: index 1 on the axis of 3, whose stride in [S,1,3,E] is E.
  plan::OperandView kv = plan::operand_view(b.g, k, [](int) { return true; });
  EXPECT_EQ(kv.source, x);
  EXPECT_EQ(kv.dims, (Shape{H, D, S}));
  EXPECT_EQ(kv.strides, (std::vector<int64_t>{D, 1, 3 * E}));
  EXPECT_EQ(kv.offset, E);
  // Fused attention reads q, k and v at the same offsets (and writes the unmerged [H, S, D]).
  Ran fused;
  {
    brrr_test::EnvVar attention("BRRR_CPU_FUSED_ATTENTION", "1");
    fused = run_and_check(b.g);
  }
  Ran on;
  {
    brrr_test::EnvVar unfused("BRRR_CPU_FUSED_ATTENTION", "0");
    on = run_and_check(b.g);
  }
  if (!brrr_test::kDnnl) GTEST_SKIP() << "no oneDNN in this build";
  EXPECT_EQ(fused.reference, 0) << fused.plan;
  EXPECT_EQ(fused.library, 1) << fused.plan;
  EXPECT_EQ(on.reference, 0) << on.plan;
  EXPECT_EQ(on.library, 2) << on.plan;  // Q.K^T and P.V read the packed buffer
}

// GPT-2's MLP as its dynamo export writes it: Reshape [1,S,D] -> [S,D], Gemm, Reshape back, then
// the tanh GELU in eight nodes. One library kernel (oneDNN's gelu_tanh post-op) whose result
// matches the reference's node-by-node formula.
TEST(GemmViews, Gpt2MlpIsOneGemmWithTheTanhGelu) {
  GraphBuilder b;
  int x = reshape(b, b.input("x", {1, 8, 16}), {8, 16});
  int y = b.node("Gemm", {x, b.constant("w", rnd({16, 32}, 5)), b.constant("c", rnd({32}, 6))});
  int v = reshape(b, y, {1, 8, 32});
  int half = b.node("Mul", {v, b.scalar(0.5f)});
  int cube = b.node("Mul", {b.node("Pow", {v, b.scalar(3.f)}), b.scalar(0.044715f)});
  int inner = b.node("Mul", {b.node("Add", {v, cube}), b.scalar(0.7978845608f)});
  int one = b.node("Add", {b.node("Tanh", {inner}), b.scalar(1.f)});
  b.output(b.node("Mul", {half, one}));
  Ran r = run_and_check(b.g);
  if (!brrr_test::kDnnl) GTEST_SKIP() << "no oneDNN in this build";
  EXPECT_EQ(r.kernels, 1) << r.plan;
  EXPECT_EQ(r.library, 1) << r.plan;
  EXPECT_NE(r.plan.find("gelu_tanh"), std::string::npos) << r.plan;
  {  // without the post-op the GELU is a generated kernel
    brrr_test::EnvVar no_gelu("BRRR_NO_GEMM_GELU_TANH", "1");
    Ran off = run_and_check(b.g);
    EXPECT_GE(off.kernels, 2) << off.plan;
    EXPECT_EQ(off.plan.find("gelu_tanh"), std::string::npos) << off.plan;
  }
  {  // without views the Reshapes are copies again, and the GELU its own kernel
    brrr_test::EnvVar no_views("BRRR_NO_GEMM_VIEWS", "1");
    Ran off = run_and_check(b.g);
    EXPECT_EQ(off.copies, 2) << off.plan;
  }
}

}  // namespace
}  // namespace brrr
