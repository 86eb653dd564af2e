// convert_precision (src/passes/convert_precision.cpp): a float32 model stored in 16 bits with its
// float32 interface kept, checked on the reference executor against the model's float32 outputs,
// and the values that must stay float32 (ONNX's float inputs, integer results computed in floats).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "brrr/onnx.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "passes/pipeline.hpp"
#include "plan/target.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

const std::string kExamples = std::string(BRRR_TEST_DATA) + "/../../examples/";

double rel_l2(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double d = got.at_double(i) - want.at_double(i);
    if (!std::isfinite(got.at_double(i))) return INFINITY;
    num += d * d;
    den += want.at_double(i) * want.at_double(i);
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

int count_dtype(const Graph& g, DType t) {
  int n = 0;
  for (const Value& v : g.values) n += v.typed && v.dtype == t && (v.producer >= 0 || v.constant.defined());
  return n;
}

class ConvertPrecisionExample : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

// The example model in 16 bits on the reference executor, against its float32 test outputs:
// within the tolerance `--check` gives that precision (rel L2 5e-2 for bf16, 1e-2 for fp16).
TEST_P(ConvertPrecisionExample, MatchesFloat32OutputsWithinThePrecisionsTolerance) {
  const auto& [model, to] = GetParam();
  const std::string dir = kExamples + model;
  Compiled c = compile(load_onnx(dir + "/model.onnx"), plan::Target::reference(), {});
  std::map<std::string, Tensor> in;
  std::vector<Tensor> want;
  for (int k = 0;; ++k) {
    std::string p = dir + "/test_data_set_0/input_" + std::to_string(k) + ".pb";
    if (!std::filesystem::exists(p)) break;
    in[c.graph.value(c.graph.inputs[size_t(k)]).name] = load_tensor_pb(p);
  }
  for (int k = 0;; ++k) {
    std::string p = dir + "/test_data_set_0/output_" + std::to_string(k) + ".pb";
    if (!std::filesystem::exists(p)) break;
    want.push_back(load_tensor_pb(p));
  }
  ASSERT_FALSE(in.empty());
  ASSERT_FALSE(want.empty());
  Graph g = c.graph;
  PrecisionReport r = convert_precision(g, to, InferOptions{}.fold_budget_bytes);
  EXPECT_GT(r.converted, 0);
  EXPECT_EQ(r.kept, 0) << ::testing::PrintToString(r.kept_why);
  EXPECT_EQ(count_dtype(g, DType::f32), int(g.outputs.size()))
      << "only the output Casts produce float32:\n" << g.print();
  EXPECT_GT(count_dtype(g, to), 0);
  // The interface is the model's: the same inputs and outputs with the same types.
  ASSERT_EQ(g.inputs.size(), c.graph.inputs.size());
  for (size_t k = 0; k < g.inputs.size(); ++k)
    EXPECT_EQ(g.value(g.inputs[k]).dtype, c.graph.value(c.graph.inputs[k]).dtype);
  for (int o : g.outputs) EXPECT_EQ(g.value(o).dtype, DType::f32);
  std::vector<Tensor> got = run_reference(g, in);
  ASSERT_EQ(got.size(), want.size());
  const double tol = to == DType::bf16 ? 5e-2 : 1e-2;
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].dtype(), DType::f32);
    EXPECT_LE(rel_l2(got[k], want[k]), tol) << model << " output " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, ConvertPrecisionExample,
                         ::testing::Combine(::testing::Values("mlp_tiny", "bert_tiny",
                                                              "squeezenet1_1"),
                                            ::testing::Values(DType::bf16, DType::f16)));

// A size computed in floats and cast to an integer keeps float32 (16 bits would change it:
// bfloat16 holds 197 as 196), while the data path beside it converts.
TEST(ConvertPrecision, KeepsIntegerResultsComputedInFloatsInFloat32) {
  GraphBuilder b;
  int x = b.input("x", {2, 4});
  int y = b.node("Relu", {b.node("Mul", {x, b.scalar(3.0f)})});
  b.output(y);
  int n = b.input("n", {1});
  int f = b.node("Mul", {n, b.scalar(197.0f)});
  int i = b.node("Cast", {f}, {{"to", int64_t(7)}});  // INT64
  b.output(i);
  Compiled c = compile(b.g, plan::Target::reference(), {});
  Graph g = c.graph;
  PrecisionReport r = convert_precision(g, DType::bf16, InferOptions{}.fold_budget_bytes);
  EXPECT_GT(r.kept, 0);
  ASSERT_EQ(r.kept_why.size(), 1u);
  EXPECT_NE(r.kept_why[0].find("casts it to an integer"), std::string::npos) << r.kept_why[0];
  // The Relu feeding the output Cast is 16-bit; the Mul that makes the integer is not.
  const Node& out_cast = g.nodes[size_t(g.value(g.outputs[0]).producer)];
  EXPECT_EQ(out_cast.op, "Cast");
  EXPECT_EQ(g.value(out_cast.inputs[0]).dtype, DType::bf16);
  const Node& int_cast = g.nodes[size_t(g.value(g.outputs[1]).producer)];
  EXPECT_EQ(g.value(int_cast.inputs[0]).dtype, DType::f32);
  std::mt19937 rng(3);
  std::map<std::string, Tensor> in{{"x", brrr_test::uniform_f32({2, 4}, rng, -1, 1)},
                                   {"n", Tensor::from_vector<float>({1}, {1.0f})}};
  std::vector<Tensor> got = run_reference(g, in);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].data<int64_t>()[0], 197);
  EXPECT_EQ(got[0].dtype(), DType::f32);
}

// float16 has no -3.4e38: the large negative constants masks use clamp to -65504, so
// 0 * mask stays 0 instead of becoming NaN (0 * -inf).
TEST(ConvertPrecision, Float16ClampsConstantsToItsRange) {
  GraphBuilder b;
  int x = b.input("x", {4});
  int big = b.scalar(-std::numeric_limits<float>::max());
  b.output(b.node("Mul", {x, big}));
  Compiled c = compile(b.g, plan::Target::reference(), {});
  Graph g = c.graph;
  convert_precision(g, DType::f16, InferOptions{}.fold_budget_bytes);
  std::vector<Tensor> got =
      run_reference(g, {{"x", Tensor::from_vector<float>({4}, {0, 1e-3f, -1e-3f, 0})}});
  ASSERT_EQ(got.size(), 1u);
  for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(got[0].data<float>()[i])) << i;
  EXPECT_EQ(got[0].data<float>()[0], 0.0f);
}

// A large weight is cast by bands on several threads in one pass: every element equals the
// clamped, rounded float16 of its float32 value (NaN stays NaN, beyond 65504 clamps).
TEST(ConvertPrecision, LargeFloat16ConstantsAreClampedAndRoundedExactly) {
  const int64_t n = (int64_t(3) << 20) + 5;
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    w[size_t(i)] = i % 997 == 0   ? std::numeric_limits<float>::quiet_NaN()
                   : i % 991 == 0 ? -1e9f
                                  : std::cos(float(i)) * float(1 + i % 70000);
  GraphBuilder b;
  int x = b.input("x", {n});
  int c = b.constant("w", Tensor::from_vector<float>({n}, w));
  b.output(b.node("Mul", {x, c}));
  Compiled comp = compile(b.g, plan::Target::reference(), {});
  Graph g = comp.graph;
  convert_precision(g, DType::f16, InferOptions{}.fold_budget_bytes);
  const Tensor* got = nullptr;
  for (const Value& v : g.values)
    if (v.constant.defined() && v.constant.numel() == n) got = &v.constant;
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(got->dtype(), DType::f16);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float wi = w[size_t(i)];
    const float e = std::isnan(wi) ? wi : std::clamp(wi, -65504.f, 65504.f);
    bad += got->data<f16>()[i].bits != f16(e).bits;
  }
  EXPECT_EQ(bad, 0);
}

// The pipeline runs the pass only where the target stores 16-bit models (CUDA), and a graph
// input that is also an output passes through unchanged.
TEST(ConvertPrecision, RunsWhereTheTargetStoresSixteenBitModels) {
  GraphBuilder b;
  int x = b.input("x", {2, 3});
  b.output(b.node("Relu", {x}));
  b.output(x);
  CompileOptions o;
  o.storage = DType::bf16;
  Compiled cpu = compile(b.g, plan::Target::cpu(), o);
  EXPECT_EQ(cpu.precision.converted, 0);
  Compiled cuda = compile(b.g, plan::Target::cuda(), o);
  EXPECT_GT(cuda.precision.converted, 0);
  EXPECT_EQ(cuda.graph.value(cuda.graph.outputs[1]).name, "x");
  EXPECT_EQ(cuda.graph.value(cuda.graph.outputs[0]).dtype, DType::f32);
}

}  // namespace
}  // namespace brrr
