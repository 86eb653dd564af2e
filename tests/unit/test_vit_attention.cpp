// ViT's attention as torchvision's nn.MultiheadAttention exports it (batch_first, packed in-
// projection): the CUDA plan reads q, k and v straight from the in-projection's [S, B, 3E] GEMM
// output through factored views (B*H = (B: 3E) x (H: D)), so no copy or transpose kernel runs
// between that GEMM and the out-projection's. The kernel needs a device; its descriptor is checked
// here against the reference executor: every element of Q, K, V and the result at the place the
// descriptor's offsets and strides give.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "brrr/onnx.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "env_var.hpp"
#include "passes/pipeline.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/library_desc.hpp"
#include "plan/target.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

int ints(GraphBuilder& b, const std::vector<int64_t>& v) {
  return b.constant("i" + std::to_string(b.count++), Tensor::from_vector<int64_t>({int64_t(v.size())}, v));
}
int reshape(GraphBuilder& b, int x, const std::vector<int64_t>& to) {
  return b.node("Reshape", {x, ints(b, to)});
}
int transpose(GraphBuilder& b, int x, const std::vector<int64_t>& perm) {
  return b.node("Transpose", {x}, {{"perm", perm}});
}
int scalar(GraphBuilder& b, float v, DType dt) {
  return b.constant("c" + std::to_string(b.count++), Tensor::scalar<float>(v).cast(dt));
}
Tensor rnd(const Shape& s, DType dt, unsigned seed) {
  std::mt19937 rng(seed);
  return brrr_test::uniform_f32(s, rng, -1.f, 1.f).cast(dt);
}

// The block and the values the descriptor is checked against.
struct Mha {
  Graph g;
  int proj = -1;              // the in-projection's output [S, B, 3E]
  int q = -1, k = -1, v = -1;  // the heads as the MatMuls read them (before any scale)
  int ctx = -1;               // P.V
};

// torchvision's MHA block from x [B, S, E]: Transpose to [S, B, E], in-projection MatMul + Add,
// Reshape [S, B, 3, E], Unsqueeze 0, Transpose (0, -2), Squeeze, Gather 0/1/2, each Reshape
// [S, B*H, D] and Transpose to [B*H, S, D]. `rank4` is the form torch 2's export writes (the
// ViT-B/16 model's): Reshape [B, H, S, D], Q and K^T scaled by sqrt(sqrt(1/D)) each, the result
// Transposed (2, 0, 1, 3); otherwise torch's 3-D one: Q scaled by 1/sqrt(D), [B*H, S, D]
// MatMuls, the result Transposed (1, 0, 2). Both: Reshape [S*B, E], the out-projection Gemm,
// Reshape [S, B, E], Transpose back to [B, S, E].
Mha torch_mha(int64_t B, int64_t S, int64_t H, int64_t D, bool rank4, DType dt) {
  GraphBuilder b;
  Mha m;
  const int64_t E = H * D;
  int x = transpose(b, b.input("x", {B, S, E}, dt), {1, 0, 2});
  int in = b.node("MatMul", {x, b.constant("w_in", rnd({E, 3 * E}, dt, 1))});
  m.proj = b.node("Add", {b.constant("b_in", rnd({3 * E}, dt, 2)), in});
  int packed = transpose(b, b.node("Unsqueeze", {reshape(b, m.proj, {S, B, 3, E}), ints(b, {0})}),
                         {3, 1, 2, 0, 4});
  packed = b.node("Squeeze", {packed, ints(b, {3})});
  auto head = [&](int64_t i) {
    int pick = b.node("Gather", {packed, b.constant("pick" + std::to_string(i), Tensor::scalar<int64_t>(i))},
                      {{"axis", int64_t(0)}});
    int h = transpose(b, reshape(b, pick, {S, B * H, D}), {1, 0, 2});
    return rank4 ? reshape(b, h, {B, H, S, D}) : h;
  };
  m.q = head(0), m.k = head(1), m.v = head(2);
  int scores;
  if (rank4) {
    const float r = std::sqrt(1.f / std::sqrt(float(D)));
    scores = b.node("MatMul", {b.node("Mul", {m.q, scalar(b, r, dt)}),
                               b.node("Mul", {transpose(b, m.k, {0, 1, 3, 2}), scalar(b, r, dt)})});
  } else {
    scores = b.node("MatMul", {b.node("Mul", {m.q, scalar(b, 1.f / std::sqrt(float(D)), dt)}),
                               transpose(b, m.k, {0, 2, 1})});
  }
  m.ctx = b.node("MatMul", {b.node("Softmax", {scores}, {{"axis", int64_t(-1)}}), m.v});
  int merged = reshape(b, transpose(b, m.ctx, rank4 ? std::vector<int64_t>{2, 0, 1, 3}
                                                    : std::vector<int64_t>{1, 0, 2}),
                       {S * B, E});
  int out = b.node("Gemm", {merged, b.constant("w_out", rnd({E, E}, dt, 3)), b.constant("b_out", rnd({E}, dt, 4))},
                   {{"transB", int64_t(1)}});
  b.output(transpose(b, reshape(b, out, {S, B, E}), {1, 0, 2}));
  m.g = std::move(b.g);
  infer_shapes(m.g, {});
  return m;
}

plan::Plan cuda_plan(const Graph& g) {
  plan::FusionOptions fo;
  fo.float16 = true;
  fo.booleans = true;
  return plan::build_plan(g, fo, plan::Target::cuda());
}

// The attention kernel and its neighbours: the in-projection's GEMM right before it and the out-
// projection's right after it, nothing between.
TEST(VitAttentionPlan, NoCopyBetweenTheProjections) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  for (bool rank4 : {false, true})
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(::testing::Message() << (rank4 ? "rank 4 " : "rank 3 ") << dtype_name(dt));
      const int64_t B = 3, S = 7, H = 2, D = 8;
      Mha m = torch_mha(B, S, H, D, rank4, dt);
      plan::Plan p = cuda_plan(m.g);
      size_t at = p.kernels.size();
      for (size_t i = 0; i < p.kernels.size(); ++i)
        if (plan::desc_of<plan::AttentionDesc>(p.kernels[i])) {
          EXPECT_EQ(at, p.kernels.size()) << "two attention kernels\n" << p.print(m.g);
          at = i;
        }
      ASSERT_LT(at, p.kernels.size()) << p.print(m.g);
      ASSERT_GE(at, 1u);
      ASSERT_LT(at + 1, p.kernels.size());
      auto ops = [&](size_t k) {
        std::string s;
        for (int n : p.kernels[k].nodes) s += m.g.nodes[size_t(n)].op + " ";
        return s;
      };
      EXPECT_EQ(ops(at - 1), "MatMul Add ") << p.print(m.g);
      EXPECT_EQ(ops(at + 1), "Gemm ") << p.print(m.g);
      const plan::AttentionDesc& d = *plan::desc_of<plan::AttentionDesc>(p.kernels[at]);
      EXPECT_EQ(d.q, m.proj);
      EXPECT_EQ(d.k, m.proj);
      EXPECT_EQ(d.v, m.proj);
      EXPECT_EQ(d.batch, B);
      EXPECT_EQ(d.heads, H);
    }
}

// Q[b,h,s,d] (row-major [B*H, S, D] or [B, H, S, D]) equals src[offset + b*s0 + h*s1 + s*s2 +
// d*s3] for every element.
void expect_read_through(const Tensor& x, const Tensor& src, int64_t offset,
                         const std::array<int64_t, 4>& st, const plan::AttentionDesc& d,
                         const char* what) {
  const int64_t H = d.heads, S = x.numel() / (d.batch * H * d.head_dim), D = d.head_dim;
  ASSERT_EQ(x.numel(), d.batch * H * S * D) << what;
  int64_t bad = 0;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t e = 0; e < D; ++e) {
          const int64_t at = offset + b * st[0] + h * st[1] + s * st[2] + e * st[3];
          ASSERT_TRUE(at >= 0 && at < src.numel()) << what << " b" << b << " h" << h << " s" << s;
          bad += x.data<float>()[((b * H + h) * S + s) * D + e] != src.data<float>()[at];
        }
  EXPECT_EQ(bad, 0) << what << ": elements the descriptor reads from the wrong place";
}

// The first attention descriptor of p.
const plan::AttentionDesc* first_attention(const plan::Plan& p) {
  for (const plan::Kernel& k : p.kernels)
    if (const plan::AttentionDesc* d = plan::desc_of<plan::AttentionDesc>(k)) return d;
  return nullptr;
}

// The descriptor, element by element, against the reference executor's values on g (m's graph
// or what the compile pipeline made of it; m's values found by name): Q, K and V where it reads
// them in its source (the in-projection's output), and the result where it writes it in the
// merged [S*B, E] buffer the out-projection reads.
void expect_descriptor_matches(const Mha& m, const Graph& g, const plan::AttentionDesc& d,
                               int64_t B, int64_t S, int64_t H, int64_t D) {
  ASSERT_EQ(d.batch, B);
  ASSERT_EQ(d.heads, H);
  ASSERT_EQ(d.seq_q, S);
  ASSERT_EQ(d.seq_k, S);
  ASSERT_EQ(d.head_dim, D);
  ASSERT_TRUE(d.q == d.k && d.k == d.v);
  // The reference executor with the values the kernel reads and writes made outputs.
  Graph r = g;
  r.outputs = {d.q, d.out};
  for (int v : {m.q, m.k, m.v, m.ctx}) r.outputs.push_back(g.find_value(m.g.value(v).name));
  std::map<std::string, Tensor> in{{"x", rnd({B, S, H * D}, DType::f32, 9)}};
  std::vector<Tensor> t = run_reference(r, in);
  const Tensor &src = t[0], &out = t[1];
  expect_read_through(t[2], src, d.q_offset, d.q_strides, d, "Q");
  expect_read_through(t[3], src, d.k_offset, d.k_strides, d, "K");
  expect_read_through(t[4], src, d.v_offset, d.v_strides, d, "V");
  expect_read_through(t[5], out, 0, d.out_strides, d, "out");
  EXPECT_EQ(out.shape(), (Shape{S * B, H * D}));
  // The scale on Q (and on K^T in the rank-4 form) is the descriptor's.
  EXPECT_NEAR(d.scale, 1.0 / std::sqrt(double(D)), 1e-6);
}

// The block checked by value: 3 images of 5 tokens, 4 heads of 8.
constexpr int64_t B = 3, S = 5, H = 4, D = 8;

// The plan of the block as it is: the source is the in-projection's [S, B, 3E] output.
TEST(VitAttentionPlan, DescriptorReadsAndWritesWhereTheReferenceHasTheValues) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  for (bool rank4 : {false, true}) {
    SCOPED_TRACE(rank4 ? "rank 4" : "rank 3");
    Mha m = torch_mha(B, S, H, D, rank4, DType::f32);
    plan::Plan p = cuda_plan(m.g);
    const plan::AttentionDesc* d = first_attention(p);
    ASSERT_NE(d, nullptr) << p.print(m.g);
    EXPECT_EQ(d->q, m.proj);
    expect_descriptor_matches(m, m.g, *d, B, S, H, D);
  }
}

// Through the compile pipeline, whose sink_row_transposes moves the Transpose of x after the in-
// projection: the source is then its [B, S, 3E] output and no kernel runs before that GEMM;
// BRRR_NO_SINK_TRANSPOSES=1 keeps the Transpose a kernel before it.
TEST(VitAttentionPlan, TransposeBeforeTheInProjectionJoinsTheViews) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  for (bool rank4 : {false, true}) {
    SCOPED_TRACE(rank4 ? "rank 4" : "rank 3");
    Mha m = torch_mha(B, S, H, D, rank4, DType::f32);
    Compiled c = compile(m.g, plan::Target::cuda(), {});
    ASSERT_FALSE(c.plan.kernels.empty());
    const plan::Kernel& first = c.plan.kernels[0];
    EXPECT_TRUE(first.lib && c.graph.nodes[size_t(first.nodes[0])].op == "MatMul")
        << c.plan.print(c.graph);
    const plan::AttentionDesc* d = first_attention(c.plan);
    ASSERT_NE(d, nullptr) << c.plan.print(c.graph);
    EXPECT_EQ(c.graph.value(d->q).shape, (Shape{B, S, 3 * H * D}));
    expect_descriptor_matches(m, c.graph, *d, B, S, H, D);
    // The moved graph computes what the exported one does.
    std::map<std::string, Tensor> in{{"x", rnd({B, S, H * D}, DType::f32, 10)}};
    const Tensor want = run_reference(m.g, in)[0], got = run_reference(c.graph, in)[0];
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5) << i;
    brrr_test::EnvVar off("BRRR_NO_SINK_TRANSPOSES", "1");
    Compiled kept = compile(m.g, plan::Target::cuda(), {});
    EXPECT_EQ(kept.plan.kernels.size(), c.plan.kernels.size() + 1) << kept.plan.print(kept.graph);
  }
}

// Where no view reads the product (an MLP's Relu), or the Transpose moves the last axis, or the
// weight is computed, the Transpose stays where it is.
TEST(SinkRowTransposes, OnlyBeforeARowWiseProductThatViewsRead) {
  auto build = [](const std::vector<int64_t>& perm, bool view, bool constant_w,
                  Shape in = {2, 4, 4}) {
    GraphBuilder b;
    int x = transpose(b, b.input("x", in), perm);
    int w = constant_w ? b.constant("w", rnd({4, 4}, DType::f32, 1)) : b.input("w", {4, 4});
    int y = b.node("Add", {b.node("MatMul", {x, w}), b.constant("b", rnd({4}, DType::f32, 2))});
    b.output(view ? reshape(b, y, {-1}) : b.node("Relu", {y}));
    infer_shapes(b.g, {});
    return b.g;
  };
  Graph moved = build({1, 0, 2}, true, true);
  EXPECT_TRUE(sink_row_transposes(moved));
  EXPECT_EQ(moved.nodes[0].op, "MatMul");
  EXPECT_EQ(moved.nodes[2].op, "Transpose");
  // (a Transpose that only moves an axis of 1 is a reshape: batch 1's [1, S, E] -> [S, 1, E])
  for (Graph g : {build({1, 0, 2}, false, true), build({0, 2, 1}, true, true),
                  build({1, 0, 2}, true, false), build({1, 0, 2}, true, true, {1, 4, 4})})
    EXPECT_FALSE(sink_row_transposes(g)) << g.print();
}

const char* kVitBf16 = "/work/models/vit_b_16_bf16_torchscript/model.onnx";

// The real ViT-B/16 (bf16, batch 32) through the whole compile pipeline for CUDA, no device
// needed: one attention kernel per layer reading the in-projection's GEMM output, and no copy or
// transpose kernel between that GEMM and the out-projection's. Skipped where the model is absent.
TEST(VitAttentionPlan, VitB16HasNoCopiesAroundAttention) {
  if (!std::filesystem::exists(kVitBf16)) GTEST_SKIP() << kVitBf16 << " is not here";
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  Graph model = load_onnx(kVitBf16);
  CompileOptions o;
  o.input_shapes[model.value(model.inputs[0]).name] = {32, 3, 224, 224};
  Compiled c = compile(model, plan::Target::named("cuda", "bf16"), o);
  const std::vector<plan::Kernel>& ks = c.plan.kernels;
  int attention = 0;
  for (size_t i = 0; i < ks.size(); ++i) {
    const plan::AttentionDesc* d = plan::desc_of<plan::AttentionDesc>(ks[i]);
    if (!d) continue;
    ++attention;
    EXPECT_EQ(d->batch, 32);
    EXPECT_EQ(d->heads, 12);
    EXPECT_TRUE(d->q == d->k && d->k == d->v) << ks[i].name;
    EXPECT_EQ(d->k_offset - d->q_offset, 768);
    EXPECT_EQ(d->v_offset - d->k_offset, 768);
    ASSERT_GE(i, 1u);
    ASSERT_LT(i + 1, ks.size());
    EXPECT_TRUE(ks[i - 1].lib && ks[i + 1].lib) << ks[i - 1].name << " " << ks[i + 1].name << "\n"
                                                << c.plan.print(c.graph);
  }
  EXPECT_EQ(attention, 12) << c.plan.print(c.graph);
  if (std::getenv("BRRR_TEST_PRINT_PLAN")) std::printf("%s\n", c.plan.print(c.graph).c_str());
}

}  // namespace
}  // namespace brrr
