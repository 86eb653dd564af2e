// Value ranges in fused kernels (src/plan/value_range.hpp): bounded ops narrow the range, cos and
// sin of a value proven to lie in [-1, 1] use the short polynomials of brrr/scalar_ops.h, which
// are as accurate as libm there, and the fused result matches the reference on hostile inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/scalar_ops.h"
#include "brrr/session.hpp"
#include "expect_outputs.hpp"
#include "plan/kernel_ir.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

// Error of `got` against the double-precision truth, in units of float32 spacing at the truth.
double ulps(float got, double truth) {
  float t = float(truth);
  double ulp = double(std::nextafter(std::fabs(t), INFINITY)) - std::fabs(double(t));
  return std::fabs(double(got) - truth) / ulp;
}

TEST(ValueRange, UnitPolynomialsAreAccurateOnMinusOneToOne) {
  double worst_cos = 0, worst_sin = 0;
  const int n = 1 << 21;
  for (int i = 0; i <= n; ++i) {
    float x = -1.0f + 2.0f * float(i) / float(n);
    worst_cos = std::max(worst_cos, ulps(brrr_cos_unit(x), std::cos(double(x))));
    if (x != 0.0f) worst_sin = std::max(worst_sin, ulps(brrr_sin_unit(x), std::sin(double(x))));
  }
  // Within one unit in the last place (CUDA documents 2 for its cosf and sinf).
  EXPECT_LE(worst_cos, 0.85);
  EXPECT_LE(worst_sin, 1.0);
  EXPECT_EQ(brrr_cos_unit(0.0f), 1.0f);
  EXPECT_EQ(brrr_sin_unit(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(brrr_sin_unit(-0.0f)));
  EXPECT_TRUE(std::isnan(brrr_cos_unit(NAN)));
  EXPECT_TRUE(std::isnan(brrr_sin_unit(NAN)));
}

// The scalar op of the expression that computes the graph's only output.
ScalarOp output_op(Graph g) {
  infer_shapes(g, {});
  plan::Plan p = plan::build_plan(g, {});
  EXPECT_EQ(p.kernels.size(), 1u);
  const plan::Kernel& k = p.kernels.at(0);
  return k.exprs.at(size_t(k.stores.at(0).expr)).op;
}

Graph unary_chain(const std::vector<std::string>& ops, int64_t n = 64) {
  GraphBuilder b;
  int v = b.input("x", {n});
  for (const std::string& op : ops) v = b.node(op, {v});
  b.output(v);
  return b.g;
}

TEST(ValueRange, BoundedProducersNarrowCosAndSin) {
  EXPECT_EQ(output_op(unary_chain({"Cos", "Cos"})), ScalarOp::CosUnit);
  EXPECT_EQ(output_op(unary_chain({"Tanh", "Sin"})), ScalarOp::SinUnit);
  EXPECT_EQ(output_op(unary_chain({"Sigmoid", "Cos"})), ScalarOp::CosUnit);
  EXPECT_EQ(output_op(unary_chain({"Erf", "Neg", "Abs", "Cos"})), ScalarOp::CosUnit);
  // Unknown or too wide ranges keep the general function.
  EXPECT_EQ(output_op(unary_chain({"Cos"})), ScalarOp::Cos);
  EXPECT_EQ(output_op(unary_chain({"Relu", "Cos"})), ScalarOp::Cos);
  EXPECT_EQ(output_op(unary_chain({"Cos", "Exp", "Cos"})), ScalarOp::Cos);  // exp(1) > 1
  GraphBuilder b;  // Cos(2 * cos(x)): Mul is not modelled, so its range is unknown
  b.output(b.node("Cos", {b.node("Mul", {b.node("Cos", {b.input("x", {8})}), b.scalar(2.f)})}));
  EXPECT_EQ(output_op(b.g), ScalarOp::Cos);
}

TEST(ValueRange, FusedCosCosMatchesReferenceOnLargeAndSmallInputs) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 3.14159265f, 1e4f, -1e4f, 1e30f, -1e38f,
                          1e-30f, 0.5f, 2.0f, -7.25f, 100.0f};
  for (int i = 0; i < 1000; ++i) v.push_back(-50.0f + 0.1f * float(i));
  Tensor x = Tensor::from_vector<float>({int64_t(v.size())}, v);
  for (const std::vector<std::string>& ops :
       {std::vector<std::string>{"Cos", "Cos"}, {"Sin", "Sin"}, {"Tanh", "Cos", "Sin"}}) {
    Graph g = unary_chain(ops, int64_t(v.size()));
    Session s(g, SessionOptions{});
    std::map<std::string, Tensor> in{{"x", x}};
    brrr_test::expect_outputs_close(s.run(in), run_reference(s.graph(), in), 1e-6f, 1e-7f,
                                    s.plan_summary());
  }
}

}  // namespace
}  // namespace brrr
