// oneDNN matmul library kernels in a Session against the reference executor: constant weights
// are prepacked once into the primitive's own layout, computed weights are read in place.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/cpu/library.hpp"
#include "brrr/reference.hpp"
#include "dnnl_flag.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "brrr/passes.hpp"
#include "brrr/session.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/target.hpp"
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

// The graph is one library kernel (bias, residual and activation as post-ops), equal to the
// reference; without oneDNN every node runs by reference.
void expect_one_library_kernel(const Graph& g) {
  std::map<std::string, Tensor> in;
  unsigned seed = 17;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, seed++);
  Session s(g, SessionOptions{});
  std::vector<Tensor> got;
  for (int r = 0; r < 3; ++r) got = s.run(in);
  brrr_test::expect_outputs_close(got, run_reference(s.graph(), in), 1e-4, 1e-4, s.plan_summary());
  if (!brrr_test::kDnnl) return;
  EXPECT_EQ(s.num_kernels(), 1) << s.plan_summary();
  EXPECT_EQ(s.num_kernels("library"), 1) << s.plan_summary();
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

// A transformer's output projection: MatMul + bias + the residual it is added to.
TEST(CpuMatMul, ResidualSumIsAPostOp) {
  GraphBuilder b;
  int x = b.input("x", {2, 13, 32});
  int y = b.node("Add", {b.node("MatMul", {x, b.constant("w", rnd({32, 32}, 12))}),
                         b.constant("bias", rnd({32}, 13))});
  b.output(b.node("Add", {x, y}));
  expect_one_library_kernel(b.g);
  GraphBuilder b2;  // a Gemm (its own C bias), the residual first, then Relu
  int x2 = b2.input("x", {9, 24});
  int r2 = b2.input("r", {9, 40});
  int y2 = b2.node("Gemm", {x2, b2.constant("w", rnd({40, 24}, 14)), b2.constant("c", rnd({40}, 15))},
                   {{"transB", int64_t(1)}});
  b2.output(b2.node("Relu", {b2.node("Add", {y2, r2})}));
  expect_one_library_kernel(b2.g);
}

// erf GELU as TorchScript exports it, (x * (1 + erf(x / sqrt 2))) * 0.5, and as Hugging Face
// writes it, (x * 0.5) * (1 + erf(x * (1 / sqrt 2))): oneDNN's gelu_erf post-op.
TEST(CpuMatMul, ExportedErfGeluIsAPostOp) {
  for (int form = 0; form < 2; ++form) {
    GraphBuilder b;
    int x = b.input("x", {1, 11, 40});
    int h = b.node("Add", {b.node("MatMul", {x, b.constant("w", rnd({40, 56}, 16))}),
                           b.constant("bias", rnd({56}, 17))});
    int scaled = form == 0 ? b.node("Div", {h, b.scalar(1.41421356f)})
                           : b.node("Mul", {h, b.scalar(0.70710678f)});
    int one_plus = b.node("Add", {b.node("Erf", {scaled}), b.scalar(1.f)});
    int y = form == 0 ? b.node("Mul", {b.node("Mul", {h, one_plus}), b.scalar(0.5f)})
                      : b.node("Mul", {b.node("Mul", {h, b.scalar(0.5f)}), one_plus});
    b.output(y);
    expect_one_library_kernel(b.g);
  }
}

// A weight row pitch that is a multiple of 1 KiB is padded by 64 bytes (every 4th row, or every
// row, in the same cache sets); other pitches, few rows, and the switch off keep it.
TEST(CpuMatMul, WeightPitchPaddedOffMultiplesOf1KiB) {
  EXPECT_EQ(cpu::padded_weight_pitch(768, 3072, 4), 3088);  // BERT's MLP up-projection
  EXPECT_EQ(cpu::padded_weight_pitch(768, 1024, 4), 1040);
  EXPECT_EQ(cpu::padded_weight_pitch(2048, 2048, 2), 2080);  // 16-bit: 4 KiB is 2048 elements
  EXPECT_EQ(cpu::padded_weight_pitch(3072, 768, 4), 784);    // its down-projection: 3 KiB rows
  EXPECT_EQ(cpu::padded_weight_pitch(768, 2304, 4), 2320);   // fused Q/K/V: 9 KiB rows
  EXPECT_EQ(cpu::padded_weight_pitch(768, 1536, 2), 1568);
  EXPECT_EQ(cpu::padded_weight_pitch(768, 1000, 4), 1000);   // 4000 bytes: rows spread over sets
  EXPECT_EQ(cpu::padded_weight_pitch(768, 640, 4), 640);     // 2.5 KiB
  EXPECT_EQ(cpu::padded_weight_pitch(32, 3072, 4), 3072);    // few rows
  brrr_test::EnvVar off("BRRR_NO_WEIGHT_PITCH_PAD", "1");
  EXPECT_EQ(cpu::padded_weight_pitch(768, 3072, 4), 3072);
  EXPECT_EQ(cpu::padded_weight_pitch(3072, 768, 4), 768);
}

// The padded pitch in a model: MatMul + bias + erf GELU (an MLP up-projection) on a [128, 1024]
// weight (a 4 KiB fp32 pitch), stored as is and transposed, equal to the reference with the pad
// and without.
TEST(CpuMatMul, PaddedWeightPitchMatchesTheReference) {
  for (const char* off : {"0", "1"}) {
    brrr_test::EnvVar flag("BRRR_NO_WEIGHT_PITCH_PAD", off);
    for (bool transposed : {false, true}) {
      GraphBuilder b;
      int x = b.input("x", {2, 70, 128});
      int w = transposed ? b.node("Transpose", {b.constant("w", rnd({1024, 128}, 30))},
                                  {{"perm", std::vector<int64_t>{1, 0}}})
                         : b.constant("w", rnd({128, 1024}, 30));
      int h = b.node("Add", {b.node("MatMul", {x, w}), b.constant("bias", rnd({1024}, 31))});
      int one_plus = b.node("Add", {b.node("Erf", {b.node("Div", {h, b.scalar(1.41421356f)})}),
                                    b.scalar(1.f)});
      b.output(b.node("Mul", {b.node("Mul", {h, one_plus}), b.scalar(0.5f)}));
      std::map<std::string, Tensor> in{{"x", rnd({2, 70, 128}, 32)}};
      Session s(b.g, SessionOptions{});
      std::vector<Tensor> got;
      for (int r = 0; r < 2; ++r) got = s.run(in);
      brrr_test::expect_outputs_close(got, run_reference(s.graph(), in), 1e-4, 1e-4,
                                      s.plan_summary());
      if (brrr_test::kDnnl) EXPECT_GE(s.num_kernels("library"), 1) << s.plan_summary();
    }
  }
}

TEST(CpuMatMul, SigmoidAndTanhArePostOps) {
  for (const char* act : {"Sigmoid", "Tanh", "Relu"}) {
    GraphBuilder b;
    int x = b.input("x", {3, 7, 20});
    b.output(b.node(act, {b.node("MatMul", {x, b.constant("w", rnd({20, 30}, 18))})}));
    expect_one_library_kernel(b.g);
  }
}

// Only a target whose GEMM takes post-ops gets a residual or a Sigmoid in its GEMM kernel:
// cuBLASLt's epilogues have neither, so on CUDA they stay generated kernels.
TEST(CpuMatMul, PostOpsOnlyWhereTheTargetTakesThem) {
  GraphBuilder b;
  int x = b.input("x", {4, 16});
  int y = b.node("MatMul", {x, b.constant("w", rnd({16, 16}, 19))});
  b.output(b.node("Sigmoid", {b.node("Add", {y, x})}));
  infer_shapes(b.g, {});
  plan::Plan cuda = plan::build_plan(b.g, {}, plan::Target::cuda());
  plan::Plan cpu = plan::build_plan(b.g, {}, plan::Target::cpu(true));
  ASSERT_EQ(cpu.kernels.size(), 1u) << cpu.print(b.g);
  EXPECT_EQ(cpu.kernels[0].sum, x);
  EXPECT_EQ(cpu.kernels[0].activation, "sigmoid");
  ASSERT_EQ(cuda.kernels.size(), 2u) << cuda.print(b.g);
  EXPECT_EQ(cuda.kernels[0].sum, -1);
  EXPECT_EQ(cuda.kernels[0].activation, "");
}

// Attention's Q.K^T with K transposed by a Transpose node, a transposed A, and a weight stored
// [N, K] (a dynamo export's Transpose of a weight too large to fold): each Transpose is read
// through the GEMM's strides, so the graph is one library kernel with no copy.
TEST(CpuMatMul, TransposedOperandsAreReadThroughStrides) {
  GraphBuilder b;
  int q = b.input("q", {1, 3, 10, 16});
  int k = b.input("k", {1, 3, 10, 16});
  b.output(b.node("MatMul", {q, b.node("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}})}));
  expect_one_library_kernel(b.g);
  GraphBuilder b2;
  int a = b2.input("a", {2, 16, 9});
  int a_t = b2.node("Transpose", {a}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  b2.output(b2.node("Relu", {b2.node("MatMul", {a_t, b2.input("b", {2, 16, 12})})}));
  expect_one_library_kernel(b2.g);
  GraphBuilder b3;  // 1024 x 1100 floats: past fold_constants' 4 MB budget
  int x = b3.input("x", {1, 3, 1100});
  int w = b3.node("Transpose", {b3.constant("w", rnd({1024, 1100}, 20))},
                  {{"perm", std::vector<int64_t>{1, 0}}});
  b3.output(b3.node("Add", {b3.node("MatMul", {x, w}), b3.constant("bias", rnd({1024}, 21))}));
  expect_one_library_kernel(b3.g);
}

// A library GEMM and its one-thread twin (made as the CPU executor makes them, in one
// SharedPacks scope) hold one packed copy of their constant weight, here read transposed as
// the dynamo export writes Llama's lm_head; both compute the reference's result.
TEST(CpuMatMul, TwinKernelsShareOnePackedWeight) {
  GraphBuilder b;
  int x = b.input("x", {1, 64, 256});
  int w = b.node("Transpose", {b.constant("w", rnd({512, 256}, 30))},
                 {{"perm", std::vector<int64_t>{1, 0}}});
  int y = b.node("MatMul", {x, w});
  b.output(y);
  infer_shapes(b.g, {});
  plan::Plan p = plan::build_plan(b.g, plan::FusionOptions{});
  const plan::Kernel* k = nullptr;
  for (const plan::Kernel& kk : p.kernels)
    if (kk.kind == plan::KernelKind::Library) k = &kk;
  if (!brrr_test::kDnnl || !k) GTEST_SKIP() << "no oneDNN in this build";
  EXPECT_EQ(p.kernels.size(), 1u);  // the Transpose is read through strides
  cpu::SharedPacks packs;
  std::unique_ptr<cpu::LibraryKernel> threaded = cpu::make_library_kernel(b.g, *k), one;
  {
    cpu::LibraryThreads one_thread(1);
    one = cpu::make_library_kernel(b.g, *k);
  }
  ASSERT_TRUE(threaded && one);
  EXPECT_EQ(packs.packed(), 1);
  EXPECT_EQ(packs.reused(), 1);
  std::map<std::string, Tensor> in{{"x", rnd({1, 64, 256}, 31)}};
  std::vector<Tensor> want = run_reference(b.g, in);
  for (cpu::LibraryKernel* kern : {threaded.get(), one.get()}) {
    Tensor out = Tensor::zeros(DType::f32, {1, 64, 512});
    std::vector<void*> slots(b.g.values.size(), nullptr);
    slots[size_t(x)] = in["x"].raw();
    slots[size_t(y)] = out.raw();
    kern->run(slots.data());
    brrr_test::expect_outputs_close({out}, want, 1e-4, 1e-4, "twin");
  }
}

// A Transpose that moves batch axes is no stride swap of the last two axes: a copy unless the
// target reads general operand views (plan/operand_view.hpp, test_gemm_views.cpp).
TEST(CpuMatMul, OtherTransposesStayKernels) {
  GraphBuilder b;
  int k = b.input("k", {3, 1, 10, 16});
  int kt = b.node("Transpose", {k}, {{"perm", std::vector<int64_t>{1, 0, 3, 2}}});
  b.output(b.node("MatMul", {b.input("q", {1, 3, 10, 16}), kt}));
  infer_shapes(b.g, {});
  plan::Target swaps_only = plan::Target::cpu(true);
  swaps_only.gemm_operand_views = false;
  plan::Plan p = plan::build_plan(b.g, {}, swaps_only);
  EXPECT_EQ(p.kernels.size(), 2u) << p.print(b.g);
  plan::Plan views = plan::build_plan(b.g, {}, plan::Target::cpu(true));
  EXPECT_EQ(views.kernels.size(), plan::Target::cpu(true).gemm_operand_views ? 1u : 2u)
      << views.print(b.g);
  expect_library_kernels(check(b.g), 1);
}

// Batch dims broadcast against each other: A [2, 3, 5, 8] x B [3, 8, 6].
TEST(CpuMatMul, BroadcastBatch) {
  GraphBuilder b;
  b.output(b.node("MatMul", {b.input("a", {2, 3, 5, 8}), b.input("b", {3, 8, 6})}));
  expect_library_kernels(check(b.g), 1);
}

}  // namespace
}  // namespace brrr
