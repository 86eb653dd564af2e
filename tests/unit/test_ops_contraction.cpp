// Contraction and pooling ops against onnxruntime: each case is one node on inputs made by a
// formula, compared with ORT 1.32's outputs for the same node (generated offline by a small
// script building the same ONNX node; pasted below), plus closed-form checks and error messages.
#include <gtest/gtest.h>

#include <cmath>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"

using namespace brrr;

namespace {

struct Expected {
  Shape shape;
  std::vector<double> values;
};

// clang-format off
const std::map<std::string, std::vector<Expected>> kOrt = {
  {"MatMulBroadcast", {
    {{2, 3, 2, 2}, {1.375, -1.6875, -0.6875, 1.0625, 0.0625, -1.375, 0.0625, 1, -1.25, 1.375, 0.8125, -0.6875, -0.3125, 0.5625, -0.75, -0.75, 0.0625, -2.3125, -0.75, 4.125, 0.4375, -0.3125, -0.75, -0.75}},
  }},
  {"MatMulVecLeft", {
    {{2, 4}, {1, 1.1875, 0.5625, 0.75, -1.625, 1, 1.1875, 0.5625}},
  }},
  {"MatMulVecRight", {
    {{2}, {2.375, -2.0625}},
  }},
  {"GemmTransBRowC", {
    {{2, 3}, {0.0625, 3.3125, -1.96875, 0.0625, 3.8125, -2.59375}},
  }},
  {"GemmTransAColC", {
    {{2, 3}, {0.4375, -2.4375, -0.4375, -0.875, 2.8125, 0}},
  }},
  {"ConvGroupPadStrideDil", {
    {{1, 6, 3, 6}, {-0.125, 0.0625, -1.875, 5.8125, -6, 4.9375, -1.8125, -1.1875, 1.4375, -5.125, 11.0625, -7.6875, -1.1875, -1.375, -2.1875, 1.6875, -5.8125, 9.4375, -0.125, 2.6875, -4.4375, 5.8125, -3.4375, -0.5, 0.9375, -1.4375, 3.9375, 0.8125, 2.5625, -2.1875, 1.75, 4.6875, 0, 2.375, 3.9375, -3.4375, -0.9375, -1.1875, 1.9375, -5.5625, 9.6875, -5.125, -1.1875, 2.375, -4.125, 1.0625, -6.75, 7.375, -1, -3.0625, 1.375, -4.25, -0.125, -4.9375, 0.125, 4, -1.8125, 3.8125, -1.125, 4.5, 0.6875, -1.8125, 3.8125, -2.1875, 4, -2, 0.25, 0.0625, -0.1875, 0, 0.1875, 0.375, 0.375, -2.625, 3.6875, -1.9375, 3, -2.625, -1.0625, 6, -3.9375, 5.6875, -4.1875, 5.4375, 2.625, -4.75, 4.375, -5.875, 5, -5.25, 0.625, 0.5, 0.25, 0.4375, 0.625, 0.8125, 0.4375, 0.8125, 0.5, -0.25, 0.625, -0.125, 1.75, 1.8125, 2.4375, 2.0625, 1.6875, 1.3125}},
  }},
  {"ConvDepthwiseSameUpper", {
    {{1, 3, 3, 3}, {2.75, 3.9375, 3.4375, -2.25, -2.875, -1.125, -2.25, -3.0625, -0.625, -2.4375, -3.75, -2.4375, -1.9375, 0.375, 1, 2.8125, 4.625, 2.125, 3.4375, 3.9375, 2.75, -1.6875, -4.1875, -2.625, -0.5625, 0.0625, -1.125}},
  }},
  {"ConvSameLower1d", {
    {{2, 3, 6}, {-2.1875, 2.5, -3.1875, 2.5, -3.1875, -0.75, -1.3125, 4.25, -1.1875, 4.75, -0.6875, 0.375, 2, -2.9375, 1.625, -3.5625, 1, -0.125, 0.4375, -3.1875, 2.5, -3.1875, 2.5, -3.1875, 2.8125, -1.6875, 4.25, -1.1875, 4.75, -0.6875, -2.125, 2.25, -2.9375, 1.625, -3.5625, 1}},
  }},
  {"Conv3d", {
    {{1, 2, 3, 2, 4}, {3.5, -4.3125, 0.875, -1, 1.125, 5.6875, -0.3125, -0.9375, -0.4375, -0.125, -0.625, -1.9375, 0.1875, -4.1875, 0.375, 0.75, -2.6875, 2.375, -2.3125, 1.75, -3, 3.1875, -2.8125, 1, 3.4375, -3.25, 2.25, -2.875, -3.0625, 1.5625, -2.75, 0.5, 2.0625, 2.6875, 2.5, 2.75, -0.5625, -4.875, -0.25, -1.375, -2.625, 2.1875, -2.75, 1.0625, -2.3125, 3.5, -2.875, 1.6875}},
  }},
  {"ConvTransposeStridePadOutPad", {
    {{1, 3, 6, 6}, {1.75, -2.1875, -1, -0.375, -2.125, -1.625, -2.25, -3.625, 0.375, -4.0625, -1.875, 1.25, -0.8125, 0, -1.9375, -0.625, -0.625, 0.375, 0.75, -4.125, -1.5, 1.125, 1.125, -2.0625, -1.75, -0.25, -0.4375, 0.75, -1.5625, -0.875, -1.5, 1.5625, 1.125, -2.9375, -1.125, 0.375, 3.375, -0.8125, 0.5, 2.375, 0.875, 1.375, -1.125, 3.125, 2.875, -1.0625, 0.375, -1.375, 0.4375, 2.25, 0.8125, 1.375, 0.375, 1.375, 2.75, -1.3125, 0.25, -1.4375, 2.625, 1.0625, 0.75, 1.25, 0.3125, 2, 0.6875, 1.375, 1, -0.1875, 1.875, 0.75, 1.125, 0.1875, 1.75, -2.6875, -1.25, 1.875, 0.625, 1.125, -2.4375, 1.75, -1.9375, -0.5, 1, 0.875, -1.5625, 1.25, 0.3125, 0.125, -1.875, -0.875, -1.75, -0.125, 1.1875, 0.0625, -1.5625, -1.5, 0, -0.5, -2.1875, 0, -0.3125, 0.375, 0.25, -1.9375, -0.625, -1.25, 0.125, -0.8125}},
  }},
  {"ConvTransposeGroupOutputShape", {
    {{1, 2, 10, 5}, {1.375, -1.6875, 0.125, 2.25, -0.375, -0.5, 0.5, -2.3125, 0.0625, -0.9375, 0, 0, 0, 0, 0, 1.0625, -1.125, -0.375, 2.8125, -0.5625, -0.625, 0.4375, -2.4375, 0, -0.9375, 0, 0, 0, 0, 0, 0.75, -0.5625, -0.0625, -1.5, -0.75, -0.75, 0.375, 2.3125, -0.875, 3.125, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1.375, -0.5, 0.4375, 1.375, -1.6875, -0.1875, -1.25, 1.0625, -0.5, 0.5, 0, 0, 0, 0, 0, 1.8125, -0.8125, 1.4375, 1.0625, -1.125, -0.375, -1.375, 0.8125, -0.625, 0.4375, 0, 0, 0, 0, 0, 2.25, -1.125, 2.4375, 0.75, -0.5625, -0.5625, -1.5, 0.5625, -0.75, 0.375, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
  }},
  {"ConvTransposeDilated1d", {
    {{1, 2, 11}, {1.25, 0, -1.4375, 0, 2.3125, 0, -1.875, 0, 1.3125, 0, -0.5625, -1.25, 0, 1.125, 0, -2.8125, 0, 1.875, 0, -1.625, 0, 0.9375}},
  }},
  {"MaxPoolCeil", {
    {{1, 2, 3, 3}, {1, 1.25, 1.5, 0.75, 1, 0.5, 1.25, 1.5, -1.5, 1, 1.25, 0.75, 1.5, 0.75, 1, 1.25, 1.5, 0}},
    {{1, 2, 3, 3}, {5, 7, 9, 16, 18, 14, 20, 22, 24, 31, 33, 29, 35, 42, 44, 46, 48, 49}},
  }},
  {"MaxPoolPadDilColMajor", {
    {{1, 1, 5, 5}, {1, 1.25, 1.25, 1.5, 1.5, 0.5, 0.5, 0.75, 0.75, 0.75, 1, 1.25, 1.25, 1.5, 1.5, 1.25, 1.5, 1.5, 1.5, 0.5, 0.75, 0.75, 1, 1, 1}},
    {{1, 1, 5, 5}, {1, 13, 13, 25, 25, 6, 6, 18, 18, 18, 1, 13, 13, 25, 25, 4, 16, 16, 16, 26, 9, 9, 21, 21, 21}},
  }},
  {"AvgPoolIncludePad", {
    {{1, 1, 2, 3}, {-0.027777778, 0.0833333358, 0.138888896, -0.138888896, -0.111111112, 0.111111112}},
  }},
  {"AvgPoolExcludePadCeil", {
    {{1, 2, 3, 2}, {-0.125, 0.125, 0.0833333358, -0.208333328, -0.25, 0, -0.0625, 0.1875, -0.125, 0.125, -0.1875, 0.0625}},
  }},
  {"AvgPoolSameUpper", {
    {{1, 1, 3, 3}, {-0.0625, 0.1875, 0.375, -0.4375, -0.1875, 0, 0.5, 0.75, -1.5}},
  }},
  {"LpPool", {
    {{1, 2, 2, 2}, {1.51829445, 1.51829445, 1.75, 1.65096366, 1.4115541, 1.65096366, 1.68832839, 1.51829445}},
  }},
  {"GlobalAvgPool", {
    {{2, 3, 1, 1}, {-0.020833334, 0.125, 0, -0.125, 0.020833334, -0.104166664}},
  }},
  {"GlobalMaxPool", {
    {{2, 3, 1, 1}, {1.5, 1, 1.5, 1.5, 1.5, 1.25}},
  }},
  {"EinsumBatchMatMul", {
    {{2, 2, 2}, {1.375, -1.6875, -0.6875, 1.0625, 0.0625, -2.3125, -0.75, 4.125}},
  }},
  {"EinsumImplicitEllipsis", {
    {{2, 3, 2}, {1.1875, -0.5625, -0.0625, 1.6875, -0.5, -0.9375, 0.6875, -1.9375, -0.5625, 0.3125, -1.8125, 2.5625}},
  }},
  {"EinsumDiagonalSum", {
    {{3}, {-1.25, -0.75, -0.25}},
  }},
};
// clang-format on

// The generator's input formula: small multiples of 1/4, exact in every float type.
Tensor gen(const Shape& s, int seed, DType dt = DType::f32) {
  int64_t n = shape_numel(s);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(((i * 7 + seed) % 13) - 6) * 0.25f;
  return Tensor::from_vector<float>(s, v).cast(dt);
}

using Attrs = std::map<std::string, AttrValue>;

// A one-node graph over graph inputs x0, x1, ... (an empty shape with `omit` marks an omitted
// optional input).
Graph one_node(const std::string& op, const std::vector<Shape>& shapes, const Attrs& attrs,
               int nout, DType dt = DType::f32) {
  Graph g;
  g.opset = 19;
  Node n;
  n.op = op;
  n.name = "n0";
  n.attrs = attrs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    int id = g.add_value("x" + std::to_string(i));
    g.value(id).dtype = dt;
    g.value(id).shape = shapes[i];
    g.inputs.push_back(id);
    n.inputs.push_back(id);
  }
  for (int o = 0; o < nout; ++o) {
    int id = g.add_value("y" + std::to_string(o));
    n.outputs.push_back(id);
    g.outputs.push_back(id);
  }
  g.nodes.push_back(n);
  return g;
}

std::vector<Tensor> run_one(const std::string& op, const std::vector<Shape>& shapes,
                            const Attrs& attrs, int nout, DType dt = DType::f32) {
  Graph g = one_node(op, shapes, attrs, nout, dt);
  infer_shapes(g, {});
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < shapes.size(); ++i)
    feeds["x" + std::to_string(i)] = gen(shapes[i], int(i) + 1, dt);
  return run_reference(g, feeds);
}

void expect_matches_ort(const std::string& name, const std::vector<Tensor>& got,
                        double tol = 1e-5) {
  const auto& want = kOrt.at(name);
  ASSERT_EQ(got.size(), want.size()) << name;
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].shape(), want[o].shape) << name << " output " << o;
    std::vector<double> g = got[o].to_double_vector();
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_NEAR(g[i], want[o].values[i], tol * (1 + std::abs(want[o].values[i])))
          << name << " output " << o << " element " << i;
  }
}

void check(const std::string& name, const std::string& op, const std::vector<Shape>& shapes,
           const Attrs& attrs = {}, int nout = 1) {
  SCOPED_TRACE(name);
  expect_matches_ort(name, run_one(op, shapes, attrs, nout));
}

using I = std::vector<int64_t>;

}  // namespace

TEST(OpsMatMul, BatchBroadcastAndVectors) {
  check("MatMulBroadcast", "MatMul", {{2, 1, 2, 3}, {3, 3, 2}});
  check("MatMulVecLeft", "MatMul", {{3}, {2, 3, 4}});
  check("MatMulVecRight", "MatMul", {{2, 3}, {3}});
}

TEST(OpsMatMul, IntegerClosedForm) {
  Graph g = one_node("MatMul", {{2, 2}, {2, 2}}, {}, 1, DType::i64);
  infer_shapes(g, {});
  auto y = run_reference(g, {{"x0", Tensor::from_vector<int64_t>({2, 2}, {1, 2, 3, 4})},
                             {"x1", Tensor::from_vector<int64_t>({2, 2}, {5, 6, 7, 8})}});
  EXPECT_EQ(y[0].to_int64_vector(), (std::vector<int64_t>{19, 22, 43, 50}));
}

TEST(OpsMatMul, InnerDimMismatchIsAClearError) {
  Graph g = one_node("MatMul", {{2, 3}, {4, 5}}, {}, 1);
  try {
    infer_shapes(g, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("MatMul inner dims differ: [2, 3] x [4, 5]"), std::string::npos) << m;
    EXPECT_NE(m.find("node 'n0'"), std::string::npos) << m;
  }
}

TEST(OpsMatMul, CostIsTwoFlopsPerMultiplyAdd) {
  Graph g = one_node("MatMul", {{4, 2, 3}, {3, 5}}, {}, 1);
  infer_shapes(g, {});
  EXPECT_EQ(op_cost(g, g.nodes[0]).flops, 2.0 * 4 * 2 * 5 * 3);
  EXPECT_EQ(g.nodes[0].def->cls, OpClass::contraction);
}

TEST(OpsGemm, TransposesAlphaBetaAndBroadcastC) {
  check("GemmTransBRowC", "Gemm", {{2, 4}, {3, 4}, {3}},
        {{"transB", int64_t(1)}, {"alpha", 0.5f}, {"beta", 2.0f}});
  check("GemmTransAColC", "Gemm", {{4, 2}, {4, 3}, {2, 1}}, {{"transA", int64_t(1)}});
}

TEST(OpsGemm, BadCIsAnError) {
  Graph g = one_node("Gemm", {{2, 4}, {4, 3}, {2}}, {}, 1);
  EXPECT_THROW(infer_shapes(g, {}), Error);
}

TEST(OpsConv, GroupPadsStridesDilations) {
  check("ConvGroupPadStrideDil", "Conv", {{1, 4, 7, 6}, {6, 2, 3, 3}, {6}},
        {{"group", int64_t(2)},
         {"pads", I{1, 2, 1, 0}},
         {"strides", I{2, 1}},
         {"dilations", I{2, 1}}});
}

TEST(OpsConv, DepthwiseSameUpper) {
  check("ConvDepthwiseSameUpper", "Conv", {{1, 3, 5, 5}, {3, 1, 3, 3}},
        {{"group", int64_t(3)}, {"auto_pad", std::string("SAME_UPPER")}, {"strides", I{2, 2}}});
}

TEST(OpsConv, OneDimSameLowerAndThreeDim) {
  check("ConvSameLower1d", "Conv", {{2, 2, 6}, {3, 2, 2}, {3}},
        {{"auto_pad", std::string("SAME_LOWER")}});
  check("Conv3d", "Conv", {{1, 2, 3, 4, 4}, {2, 2, 2, 3, 2}},
        {{"pads", I{0, 1, 0, 1, 0, 1}}, {"strides", I{1, 2, 1}}});
}

TEST(OpsConv, HalfPrecisionComputesInFloat) {
  // All inputs and the ORT outputs of this case are exact in f16 and bf16.
  for (DType dt : {DType::f16, DType::bf16, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    auto y = run_one(
        "Conv", {{1, 3, 5, 5}, {3, 1, 3, 3}},
        {{"group", int64_t(3)}, {"auto_pad", std::string("SAME_UPPER")}, {"strides", I{2, 2}}}, 1,
        dt);
    EXPECT_EQ(y[0].dtype(), dt);
    expect_matches_ort("ConvDepthwiseSameUpper", y, 1e-2);
  }
}

TEST(OpsConv, ChannelMismatchNamesShapes) {
  Graph g = one_node("Conv", {{1, 3, 8, 8}, {4, 2, 3, 3}}, {}, 1);
  try {
    infer_shapes(g, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("channel mismatch"), std::string::npos) << m;
    EXPECT_NE(m.find("[1, 3, 8, 8]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4, 2, 3, 3]"), std::string::npos) << m;
  }
}

TEST(OpsConv, KernelLargerThanPaddedInputIsAnError) {
  Graph g = one_node("Conv", {{1, 1, 2, 2}, {1, 1, 3, 3}}, {}, 1);
  EXPECT_THROW(infer_shapes(g, {}), Error);
}

TEST(OpsConv, Cost) {
  Graph g = one_node("Conv", {{2, 4, 8, 8}, {6, 2, 3, 3}, {6}}, {{"group", int64_t(2)}}, 1);
  infer_shapes(g, {});
  double out = 2 * 6 * 6 * 6;  // N * M * OH * OW
  EXPECT_EQ(op_cost(g, g.nodes[0]).flops, 2 * out * 2 * 9 + out);
}

TEST(OpsConvTranspose, StridesPadsOutputPadding) {
  check("ConvTransposeStridePadOutPad", "ConvTranspose", {{1, 2, 3, 3}, {2, 3, 3, 3}, {3}},
        {{"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}, {"output_padding", I{1, 1}}});
}

TEST(OpsConvTranspose, GroupWithOutputShape) {
  check("ConvTransposeGroupOutputShape", "ConvTranspose", {{1, 4, 3, 2}, {4, 1, 2, 3}},
        {{"group", int64_t(2)}, {"strides", I{3, 2}}, {"output_shape", I{10, 5}}});
}

TEST(OpsConvTranspose, Dilated1d) {
  check("ConvTransposeDilated1d", "ConvTranspose", {{1, 1, 4}, {1, 2, 3}},
        {{"dilations", I{2}}, {"strides", I{2}}});
}

TEST(OpsPool, MaxPoolCeilModeWithIndices) {
  check("MaxPoolCeil", "MaxPool", {{1, 2, 5, 5}},
        {{"kernel_shape", I{2, 2}}, {"strides", I{2, 2}}, {"ceil_mode", int64_t(1)}}, 2);
}

TEST(OpsPool, MaxPoolPadsDilationsColumnMajorIndices) {
  check("MaxPoolPadDilColMajor", "MaxPool", {{1, 1, 6, 5}},
        {{"kernel_shape", I{2, 3}},
         {"pads", I{1, 1, 0, 1}},
         {"dilations", I{2, 1}},
         {"storage_order", int64_t(1)}},
        2);
}

TEST(OpsPool, AveragePoolCountIncludePad) {
  check("AvgPoolIncludePad", "AveragePool", {{1, 1, 4, 5}},
        {{"kernel_shape", I{3, 3}},
         {"pads", I{1, 1, 1, 1}},
         {"strides", I{2, 2}},
         {"count_include_pad", int64_t(1)}});
  check("AvgPoolExcludePadCeil", "AveragePool", {{1, 2, 5, 4}},
        {{"kernel_shape", I{3, 2}},
         {"pads", I{1, 0, 0, 1}},
         {"strides", I{2, 2}},
         {"ceil_mode", int64_t(1)}});
  check("AvgPoolSameUpper", "AveragePool", {{1, 1, 5, 5}},
        {{"kernel_shape", I{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}, {"strides", I{2, 2}}});
}

TEST(OpsPool, LpAndGlobalPools) {
  check("LpPool", "LpPool", {{1, 2, 4, 4}},
        {{"kernel_shape", I{2, 2}}, {"strides", I{2, 2}}, {"p", int64_t(3)}});
  check("GlobalAvgPool", "GlobalAveragePool", {{2, 3, 3, 4}});
  check("GlobalMaxPool", "GlobalMaxPool", {{2, 3, 2, 5}});
}

TEST(OpsPool, MissingKernelShapeIsAnError) {
  Graph g = one_node("MaxPool", {{1, 1, 4, 4}}, {}, 1);
  EXPECT_THROW(infer_shapes(g, {}), Error);
}

TEST(OpsPool, CostIsOnePerWindowElement) {
  Graph g =
      one_node("MaxPool", {{1, 2, 6, 6}}, {{"kernel_shape", I{3, 3}}, {"strides", I{3, 3}}}, 1);
  infer_shapes(g, {});
  EXPECT_EQ(op_cost(g, g.nodes[0]).flops, 2.0 * 2 * 2 * 9);
}

TEST(OpsEinsum, MatchesOrt) {
  check("EinsumBatchMatMul", "Einsum", {{2, 2, 3}, {2, 3, 2}},
        {{"equation", std::string("bij,bjk->bik")}});
  check("EinsumImplicitEllipsis", "Einsum", {{2, 3, 4}, {4, 2}},
        {{"equation", std::string("...ij,jk")}});
  check("EinsumDiagonalSum", "Einsum", {{3, 3}}, {{"equation", std::string("ii->i")}});
}

TEST(OpsEinsum, LabelExtentMismatchIsAnError) {
  Graph g = one_node("Einsum", {{2, 3}, {4, 2}}, {{"equation", std::string("ij,jk->ik")}}, 1);
  EXPECT_THROW(infer_shapes(g, {}), Error);
}

TEST(OpsEinsum, StrayDotIsAnError) {
  Graph g = one_node("Einsum", {{2, 3}}, {{"equation", std::string("i.j->ij")}}, 1);
  EXPECT_THROW(infer_shapes(g, {}), Error);
}
