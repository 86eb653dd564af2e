// passes/patchify_convs.cpp: a Conv whose strides equal its kernel becomes a patch transpose and
// a MatMul. Checked without a device: the rewritten graph against the original on the reference
// executor (ViT's pattern, a generic reader, no bias, float32 and bfloat16), the CUDA pipeline's
// plan (no Conv left), and the convs it must leave alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "env_var.hpp"
#include "passes/pipeline.hpp"
#include "plan/target.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

Tensor rnd(const Shape& s, DType dt, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::empty(DType::f32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(gen);
  return t.cast(dt);
}

struct ConvSpec {
  Shape x{2, 3, 32, 32};
  int64_t oc = 16, kh = 8, kw = 8;
  std::vector<int64_t> strides{8, 8}, pads{0, 0, 0, 0};
  int64_t group = 1;
  bool bias = true;
  enum Reader { kVit, kRelu, kOutput } reader = kVit;
  DType dt = DType::f32;
};

Graph conv_graph(const ConvSpec& s) {
  GraphBuilder b;
  int x = b.input("x", s.x, s.dt);
  std::vector<int> in = {x, b.constant("w", rnd({s.oc, s.x[1] / s.group, s.kh, s.kw}, s.dt, 1))};
  if (s.bias) in.push_back(b.constant("b", rnd({s.oc}, s.dt, 2)));
  int y = b.node("Conv", in,
                 {{"kernel_shape", std::vector<int64_t>{s.kh, s.kw}}, {"strides", s.strides},
                  {"pads", s.pads}, {"group", s.group}});
  const int64_t oh = (s.x[2] + s.pads[0] + s.pads[2] - s.kh) / s.strides[0] + 1;
  const int64_t ow = (s.x[3] + s.pads[1] + s.pads[3] - s.kw) / s.strides[1] + 1;
  if (s.reader == ConvSpec::kVit) {  // torchvision: reshape(n, hidden, n_h * n_w).permute(0, 2, 1)
    Tensor to = Tensor::from_vector<int64_t>({3}, {s.x[0], s.oc, oh * ow});
    y = b.node("Reshape", {y, b.constant("to", to)});
    y = b.node("Transpose", {y}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
    y = b.node("Add", {y, b.constant("pos", rnd({oh * ow, s.oc}, s.dt, 3))});
  } else if (s.reader == ConvSpec::kRelu) {
    y = b.node("Relu", {y});
  }
  b.output(y);
  infer_shapes(b.g, {});
  return b.g;
}

int count(const Graph& g, const std::string& op) {
  return int(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; }));
}

void expect_same(const Graph& before, const Graph& after, DType dt, const std::string& what) {
  std::map<std::string, Tensor> in{{"x", rnd(before.value(before.inputs[0]).shape, dt, 9)}};
  std::vector<Tensor> want = run_reference(before, in), got = run_reference(after, in);
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].shape(), got[i].shape()) << what;
    Tensor w = want[i].cast(DType::f32), o = got[i].cast(DType::f32);
    double err = 0, ref = 0;
    for (int64_t e = 0; e < w.numel(); ++e) {
      const double d = double(o.data<float>()[e]) - w.data<float>()[e];
      err += d * d;
      ref += double(w.data<float>()[e]) * w.data<float>()[e];
    }
    // float32: the same sums in another order; bfloat16: each result rounded once either way.
    EXPECT_LE(std::sqrt(err / ref), dt == DType::f32 ? 1e-6 : 1e-2) << what << "\n" << after.print();
  }
}

TEST(PatchifyConvs, VitPatchEmbeddingIsAGemmAndOneReshape) {
  for (DType dt : {DType::f32, DType::bf16}) {
    ConvSpec s;
    s.dt = dt;
    Graph g = conv_graph(s), before = g;
    ASSERT_TRUE(patchify_convs(g));
    EXPECT_EQ(count(g, "Conv"), 0);
    EXPECT_EQ(count(g, "MatMul"), 1);
    EXPECT_EQ(count(g, "Transpose"), 1) << g.print();  // the patch gather only
    expect_same(before, g, dt, std::string("vit ") + std::string(dtype_name(dt)));
  }
}

TEST(PatchifyConvs, OtherReadersGetTheConvLayoutBack) {
  for (ConvSpec::Reader r : {ConvSpec::kRelu, ConvSpec::kOutput})
    for (bool bias : {true, false}) {
      ConvSpec s;
      s.reader = r;
      s.bias = bias;
      s.x = {3, 5, 12, 20};
      s.kh = 3, s.kw = 4, s.strides = {3, 4};
      Graph g = conv_graph(s), before = g;
      ASSERT_TRUE(patchify_convs(g));
      EXPECT_EQ(count(g, "Conv"), 0);
      EXPECT_EQ(count(g, "Transpose"), 2) << g.print();  // the gather and back to NCHW
      expect_same(before, g, DType::f32, "reader " + std::to_string(int(r)));
    }
}

TEST(PatchifyConvs, LeavesOtherConvsAlone) {
  std::vector<ConvSpec> keep(5);
  keep[0].strides = {4, 4};           // overlapping windows
  keep[1].pads = {1, 1, 1, 1};        // padding
  keep[2].group = 3, keep[2].oc = 6;  // groups
  keep[3].x = {2, 3, 30, 32};         // height not a whole number of patches
  keep[4].kh = keep[4].kw = 1, keep[4].strides = {1, 1};  // 1x1: no patches
  for (size_t i = 0; i < keep.size(); ++i) {
    Graph g = conv_graph(keep[i]);
    EXPECT_FALSE(patchify_convs(g)) << "case " << i;
    EXPECT_EQ(count(g, "Conv"), 1) << "case " << i;
  }
}

// Through the CUDA target's whole pipeline (no device needed): no Conv kernel, one GEMM;
// BRRR_NO_PATCH_GEMM=1 keeps the Conv; the CPU target leaves it alone.
TEST(PatchifyConvs, CudaPipelineRunsTheGemm) {
  auto convs = [](const plan::Target& t) {
    ConvSpec s;
    s.dt = DType::bf16;
    Compiled c = compile(conv_graph(s), t, CompileOptions{});
    return count(c.graph, "Conv");
  };
  EXPECT_EQ(convs(plan::Target::named("cuda", "bf16")), 0);
  EXPECT_EQ(convs(plan::Target::named("cpu", "fp32")), 1);
  brrr_test::EnvVar off("BRRR_NO_PATCH_GEMM", "1");
  EXPECT_EQ(convs(plan::Target::named("cuda", "bf16")), 1);
}

}  // namespace
}  // namespace brrr
