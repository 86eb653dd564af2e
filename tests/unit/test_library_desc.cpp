// The typed library descriptors the plan carries (src/plan/library_desc.hpp): built once from the
// node attributes by describe_library at the end of build_plan, read by both backends.
#include <gtest/gtest.h>

#include "brrr/passes.hpp"
#include "plan/library_desc.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

using V = std::vector<int64_t>;

// The plan of b's graph (shapes inferred) and its kernel whose first node is `op`.
struct Planned {
  plan::Plan p;
  const plan::Kernel* k = nullptr;
};
Planned plan_of(GraphBuilder& b, const std::string& op, bool float16 = false) {
  infer_shapes(b.g, {});
  plan::FusionOptions fo;
  fo.float16 = float16;
  Planned r{plan::build_plan(b.g, fo), nullptr};
  for (const plan::Kernel& k : r.p.kernels)
    if (b.g.nodes[size_t(k.nodes[0])].op == op) r.k = &k;
  return r;
}

#define REQUIRE_LIBRARY(planned)                                                        \
  do {                                                                                 \
    ASSERT_NE((planned).k, nullptr);                                                   \
    if ((planned).k->kind != plan::KernelKind::Library)                                \
      GTEST_SKIP() << "no library kernels in this build (neither oneDNN nor CUDA)";    \
  } while (0)

TEST(LibraryDesc, GemmReadsTransposeBiasAndActivation) {
  GraphBuilder b;
  int x = b.input("x", {3, 4});
  int w = b.constant("w", Tensor::zeros(DType::f32, {5, 4}));
  int c = b.constant("c", Tensor::zeros(DType::f32, {5}));
  int y = b.node("Gemm", {x, w, c}, {{"transB", int64_t(1)}});
  b.output(b.node("Relu", {y}));
  Planned pl = plan_of(b, "Gemm");
  REQUIRE_LIBRARY(pl);
  const auto* d = plan::desc_of<plan::GemmDesc>(*pl.k);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->why, "");
  EXPECT_FALSE(d->trans_a);
  EXPECT_TRUE(d->trans_b);
  EXPECT_EQ(d->epi.bias, c);
  EXPECT_EQ(d->epi.act, plan::Activation::Relu);
  EXPECT_EQ(d->strided_why, "");
  EXPECT_EQ(d->M, 3);
  EXPECT_EQ(d->N, 5);
  EXPECT_EQ(d->K, 4);
  EXPECT_EQ(d->batch, 1);
  EXPECT_EQ(d->stride_b, 0);
}

TEST(LibraryDesc, GemmWithAlphaOrAColumnCIsNoLibraryCall) {
  GraphBuilder b;
  int x = b.input("x", {3, 3});
  int w = b.constant("w", Tensor::zeros(DType::f32, {3, 3}));
  b.output(b.node("Gemm", {x, w}, {{"alpha", 2.0f}}));
  Planned pl = plan_of(b, "Gemm");
  REQUIRE_LIBRARY(pl);
  const auto* d = plan::desc_of<plan::GemmDesc>(*pl.k);
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->why.find("alpha"), std::string::npos) << d->why;

  // C of shape [3, 1] against a [3, 3] output: a column, not a bias row.
  GraphBuilder b2;
  int x2 = b2.input("x", {3, 3});
  int w2 = b2.constant("w", Tensor::zeros(DType::f32, {3, 3}));
  int c2 = b2.constant("c", Tensor::zeros(DType::f32, {3, 1}));
  b2.output(b2.node("Gemm", {x2, w2, c2}));
  Planned pl2 = plan_of(b2, "Gemm");
  REQUIRE_LIBRARY(pl2);
  const auto* d2 = plan::desc_of<plan::GemmDesc>(*pl2.k);
  ASSERT_NE(d2, nullptr);
  EXPECT_NE(d2->why.find("bias row"), std::string::npos) << d2->why;
}

TEST(LibraryDesc, MatMulBatchGeometry) {
  struct Case {
    Shape a, b;
    int64_t M, N, K, batch, stride_b;
    bool strided;
  };
  for (const Case& c : {Case{{2, 3, 4}, {2, 4, 5}, 3, 5, 4, 2, 20, true},
                        Case{{2, 3, 4}, {4, 5}, 6, 5, 4, 1, 0, true},
                        Case{{2, 3, 4}, {1, 4, 5}, 0, 0, 4, 1, 0, false}}) {
    SCOPED_TRACE(shape_str(c.a) + " x " + shape_str(c.b));
    GraphBuilder b;
    b.output(b.node("MatMul", {b.input("a", c.a), b.constant("b", Tensor::zeros(DType::f32, c.b))}));
    Planned pl = plan_of(b, "MatMul");
    REQUIRE_LIBRARY(pl);
    const auto* d = plan::desc_of<plan::GemmDesc>(*pl.k);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->strided_why.empty(), c.strided) << d->strided_why;
    if (!c.strided) continue;
    EXPECT_EQ(d->M, c.M);
    EXPECT_EQ(d->N, c.N);
    EXPECT_EQ(d->K, c.K);
    EXPECT_EQ(d->batch, c.batch);
    EXPECT_EQ(d->stride_b, c.stride_b);
    EXPECT_EQ(d->stride_c, c.M * c.N);
  }
}

TEST(LibraryDesc, ConvWindowGroupsAndResidual) {
  GraphBuilder b;
  int x = b.input("x", {1, 4, 9, 9});
  int w = b.constant("w", Tensor::zeros(DType::f32, {4, 2, 3, 3}));
  int y = b.node("Conv", {x, w},
                 {{"group", int64_t(2)}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}});
  int r = b.input("r", {1, 4, 5, 5});
  b.output(b.node("Relu", {b.node("Add", {y, r})}));
  Planned pl = plan_of(b, "Conv");
  REQUIRE_LIBRARY(pl);
  const auto* d = plan::desc_of<plan::ConvDesc>(*pl.k);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->why, "");
  EXPECT_EQ(d->groups, 2);
  EXPECT_EQ(d->window.s, V({2, 2}));
  EXPECT_EQ(d->window.pb, V({1, 1}));
  EXPECT_EQ(d->window.out, V({5, 5}));
  EXPECT_EQ(d->x, x);
  EXPECT_EQ(d->y, y);
  EXPECT_EQ(d->epi.sum, r);
  EXPECT_EQ(d->epi.act, plan::Activation::Relu);
  EXPECT_EQ(d->out, pl.k->outputs.at(0));
}

TEST(LibraryDesc, BadWindowAttributesLandInWhy) {
  Node n;
  n.op = "Conv";
  n.attrs = {{"auto_pad", std::string("SIDEWAYS")}};
  plan::ConvDesc d = plan::describe_conv(n, {1, 2, 5, 5}, {2, 2, 3, 3});
  EXPECT_NE(d.why.find("auto_pad"), std::string::npos) << d.why;
  n.attrs = {{"strides", V{1, 1, 1}}};
  d = plan::describe_conv(n, {1, 2, 5, 5}, {2, 2, 3, 3});
  EXPECT_NE(d.why.find("strides"), std::string::npos) << d.why;
}

TEST(LibraryDesc, PoolCeilModeAndIncludePad) {
  GraphBuilder b;
  int x = b.input("x", {1, 2, 6, 6});
  b.output(b.node("AveragePool", {x},
                  {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t(1)},
                   {"count_include_pad", int64_t(1)}}));
  Planned pl = plan_of(b, "AveragePool");
  REQUIRE_LIBRARY(pl);
  const auto* d = plan::desc_of<plan::PoolDesc>(*pl.k);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->why, "");
  EXPECT_FALSE(d->max);
  EXPECT_TRUE(d->ceil_mode);
  EXPECT_TRUE(d->include_pad);
  EXPECT_EQ(d->window.k, V({3, 3}));
  EXPECT_EQ(d->window.out, V({3, 3}));  // ceil((6 - 3) / 2) + 1
}

TEST(LibraryDesc, ConcatAxisIsNormalized) {
  GraphBuilder b;
  int a = b.input("a", {2, 3}), c = b.input("c", {2, 5});
  b.output(b.node("Concat", {a, c}, {{"axis", int64_t(-1)}}));
  Planned pl = plan_of(b, "Concat");
  ASSERT_NE(pl.k, nullptr);
  ASSERT_EQ(pl.k->kind, plan::KernelKind::Library);
  const auto* d = plan::desc_of<plan::ConcatDesc>(*pl.k);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->why, "");
  EXPECT_EQ(d->axis, 1);
  EXPECT_EQ(d->inputs, std::vector<int>({a, c}));
}

TEST(LibraryDesc, GlobalAveragePoolIsARowMean) {
  GraphBuilder b;
  b.output(b.node("GlobalAveragePool", {b.input("x", {2, 3, 4, 5})}));
  Planned pl = plan_of(b, "GlobalAveragePool");
  ASSERT_NE(pl.k, nullptr);
  ASSERT_EQ(pl.k->kind, plan::KernelKind::Library);
  const auto* d = plan::desc_of<plan::RowReduceDesc>(*pl.k);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->why, "");
  EXPECT_EQ(d->rows, 6);
  EXPECT_EQ(d->cols, 20);
  EXPECT_FLOAT_EQ(d->scale, 1.f / 20);
}

TEST(LibraryDesc, GatherKernelsAreDescribedToo) {
  GraphBuilder b;
  int x = b.input("x", {4, 6, 8});
  b.output(b.node("Gather", {x, b.input("i", {3}, DType::i64)}, {{"axis", int64_t(-2)}}));
  Planned pl = plan_of(b, "Gather", true);
  ASSERT_NE(pl.k, nullptr);
  ASSERT_EQ(pl.k->kind, plan::KernelKind::Library);  // the CPU's row copies (library_cpu.cpp)
  const auto* d = plan::desc_of<plan::GatherDesc>(*pl.k);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->why, "");
  EXPECT_EQ(d->axis, 1);
  EXPECT_EQ(d->outer, 4);
  EXPECT_EQ(d->axis_len, 6);
  EXPECT_EQ(d->inner, 8);
}

}  // namespace
}  // namespace brrr
