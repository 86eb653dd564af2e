// oneDNN matmul library kernels in a Session against the reference executor: constant weights
// are prepacked once into the primitive's own layout, computed weights are read in place.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "brrr/reference.hpp"
#include "dnnl_flag.hpp"
#include "expect_outputs.hpp"
#include "brrr/session.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

Tensor rnd(const Shape& s, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(size_t(shape_numel(s)));
  for (auto& x : v) x = d(rng);
  return Tensor::from_vector<float>(s, v);
}

// Runs g three times (the later runs reuse every buffer and the packed weights) and compares
// with the reference; returns the number of library kernels.
int check(const Graph& g) {
  std::map<std::string, Tensor> in;
  unsigned seed = 7;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, seed++);
  Session s(g, SessionOptions{});
  std::vector<Tensor> got;
  for (int r = 0; r < 3; ++r) got = s.run(in);
  brrr_test::expect_outputs_close(got, run_reference(s.graph(), in), 1e-4, 1e-4, s.plan_summary());
  return s.num_kernels("library");
}

// Without oneDNN (a build on a machine without libdnnl) MatMul and Gemm run on reference kernels.
void expect_library_kernels(int got, int want) {
  EXPECT_EQ(got, brrr_test::kDnnl ? want : 0);
}

TEST(CpuMatMul, GemmTransBConstantWeights) {  // the mlp_tiny / classifier case
  GraphBuilder b;
  int x = b.input("x", {4, 64});
  b.output(b.node("Gemm", {x, b.constant("w", rnd({256, 64}, 1)), b.constant("c", rnd({256}, 2))},
                  {{"transB", int64_t(1)}}));
  expect_library_kernels(check(b.g), 1);
}

TEST(CpuMatMul, GemmTransAConstantWeights) {
  GraphBuilder b;
  int x = b.input("x", {48, 5});
  b.output(b.node("Gemm", {x, b.constant("w", rnd({48, 80}, 3))}, {{"transA", int64_t(1)}}));
  expect_library_kernels(check(b.g), 1);
}

TEST(CpuMatMul, MatMulConstantWeightsRelu) {
  GraphBuilder b;
  int x = b.input("x", {2, 7, 96});
  int y = b.node("MatMul", {x, b.constant("w", rnd({96, 130}, 4))});
  b.output(b.node("Relu", {b.node("Add", {y, b.constant("bias", rnd({130}, 5))})}));
  expect_library_kernels(check(b.g), 1);
}

TEST(CpuMatMul, BatchedConstantWeights) {
  GraphBuilder b;
  int x = b.input("x", {3, 9, 33});
  b.output(b.node("MatMul", {x, b.constant("w", rnd({3, 33, 17}, 6))}));
  expect_library_kernels(check(b.g), 1);
}

TEST(CpuMatMul, ComputedWeightsAreReadInPlace) {
  GraphBuilder b;
  int x = b.input("x", {5, 40});
  int w = b.node("Tanh", {b.input("w", {40, 70})});
  b.output(b.node("MatMul", {x, w}));
  expect_library_kernels(check(b.g), 1);
}

TEST(CpuMatMul, SharedConstantWeightsTwoKernels) {  // one constant packed by two primitives
  GraphBuilder b;
  int w = b.constant("w", rnd({64, 64}, 8));
  int h = b.node("MatMul", {b.input("x", {4, 64}), w});
  b.output(b.node("MatMul", {b.node("Tanh", {h}), w}));
  expect_library_kernels(check(b.g), 2);
}

// ViT's in-projection: A [S, 1, K] against a shared weight runs as one [S, K] x [K, N] GEMM, not
// S GEMVs; so does a weight whose batch dims are all 1.
TEST(CpuMatMul, SharedWeightFoldsBatchIntoRows) {
  GraphBuilder b;
  int x = b.input("x", {37, 1, 48});
  int y = b.node("MatMul", {x, b.constant("w", rnd({48, 72}, 9))});
  b.output(b.node("Add", {b.constant("bias", rnd({72}, 10)), y}));
  expect_library_kernels(check(b.g), 1);
  GraphBuilder b2;
  int x2 = b2.input("x", {2, 5, 19, 24});
  b2.output(b2.node("MatMul", {x2, b2.constant("w", rnd({1, 1, 24, 40}, 11))}));
  expect_library_kernels(check(b2.g), 1);
}

}  // namespace
}  // namespace brrr
