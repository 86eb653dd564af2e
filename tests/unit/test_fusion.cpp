// Fused kernels against the reference executor on fresh random inputs, plus plan-shape checks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "brrr/reference.hpp"
#include "dnnl_flag.hpp"
#include "expect_outputs.hpp"
#include "random_tensor.hpp"
#include "brrr/session.hpp"
#include "passes/pipeline.hpp"
#include "plan/target.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

Tensor random_tensor(const Shape& s, float lo = -2.f, float hi = 2.f) {
  static std::mt19937 rng(std::random_device{}());
  return brrr_test::uniform_f32(s, rng, lo, hi);
}

SessionOptions opts(int fusion = 1) {
  SessionOptions o;
  o.fusion = fusion;
  return o;
}

// Runs the graph through a Session and through run_reference; compares every output.
Session check(Graph g, SessionOptions o = opts(), float rtol = 1e-4f, float atol = 1e-5f) {
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) in[g.value(id).name] = random_tensor(g.value(id).shape);
  Session s(g, o);
  std::vector<Tensor> got = s.run(in);
  brrr_test::expect_outputs_close(got, run_reference(s.graph(), in), rtol, atol, s.plan_summary());
  return s;
}

TEST(Fusion, PointwiseChainIsOneKernel) {
  for (int64_t n : {1000, 1, 0, 17, 40000}) {
    GraphBuilder b;
    int x = b.input("x", {n});
    int v = b.node("Add", {x, b.scalar(1.f)});
    v = b.node("Mul", {v, b.scalar(2.f)});
    v = b.node("Cos", {v});
    v = b.node("Cos", {v});
    v = b.node("Sub", {v, x});
    v = b.node("Exp", {v});
    v = b.node("Tanh", {v});
    v = b.node("Erf", {v});
    v = b.node("Relu", {v});
    b.output(v);
    Session s = check(b.g);
    EXPECT_EQ(s.num_kernels(), 1) << s.plan_summary();
    EXPECT_EQ(s.kernel_nodes()[0].size(), 9u);
  }
}

TEST(Fusion, DisabledGivesOneKernelPerOp) {
  GraphBuilder b;
  int x = b.input("x", {333});
  int v = b.node("Add", {x, b.scalar(1.f)});
  v = b.node("Mul", {v, b.scalar(2.f)});
  v = b.node("Cos", {v});
  b.output(v);
  Session s = check(b.g, opts(0));
  EXPECT_EQ(s.num_kernels("fused"), 3);  // still generated code, one kernel each
  EXPECT_NE(s.plan_summary().find("fusion disabled"), std::string::npos);
  // Liveness reuse: the first intermediate is dead once the second exists... the arena never
  // exceeds the sum of buffers.
  EXPECT_LE(s.memory().arena_bytes, s.memory().intermediate_bytes + 64 * 2);
}

TEST(Fusion, Broadcasting) {
  GraphBuilder b;
  int x = b.input("x", {4, 1, 5});
  int y = b.input("y", {3, 1});
  int z = b.input("z", {5});
  int v = b.node("Add", {x, y});  // [4,3,5]
  v = b.node("Mul", {v, z});
  v = b.node("Div", {v, b.node("Exp", {z})});
  b.output(v);
  Session s = check(b.g);
  EXPECT_EQ(s.num_kernels("fused"), 2);  // exp(z) has a smaller index space
}

TEST(Fusion, TransposeFeedsPointwise) {
  GraphBuilder b;
  int x = b.input("x", {3, 4, 7});
  int y = b.input("y", {7, 3, 4});
  int t = b.node("Transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  int v = b.node("Add", {t, y});
  v = b.node("Cos", {v});
  b.output(v);
  b.output(t);  // the transpose itself is also materialized (a strided load, then a store)
  Session s = check(b.g);
  EXPECT_EQ(s.num_kernels(), 1) << s.plan_summary();
}

TEST(Fusion, SoftmaxNodeIsOneKernel) {
  for (Shape sh : {Shape{7, 37}, Shape{2, 3, 129}, Shape{1, 1}, Shape{3, 0}, Shape{5}}) {
    GraphBuilder b;
    int x = b.input("x", sh);
    b.output(b.node("Softmax", {x}, {{"axis", int64_t(-1)}}));
    Session s = check(b.g);
    EXPECT_EQ(s.num_kernels("fused"), 1);
  }
}

TEST(Fusion, DecomposedSoftmaxIsOneKernel) {
  GraphBuilder b;
  int x = b.input("x", {9, 70});
  int axes = b.constant("axes", Tensor::from_vector<int64_t>({1}, {-1}));
  int m = b.node("ReduceMax", {x, axes});
  int e = b.node("Exp", {b.node("Sub", {x, m})});
  int sum = b.node("ReduceSum", {e, axes});
  b.output(b.node("Div", {e, sum}));
  Session s = check(b.g);
  EXPECT_EQ(s.num_kernels(), 1) << s.plan_summary();
}

TEST(Fusion, LayerNormNodeIsOneKernel) {
  GraphBuilder b;
  int x = b.input("x", {6, 67});
  int gam = b.input("gamma", {67});
  int bet = b.input("beta", {67});
  b.output(b.node("LayerNormalization", {x, gam, bet}, {{"epsilon", 1e-5f}}));
  Session s = check(b.g, opts(), 1e-3f, 1e-4f);
  EXPECT_EQ(s.num_kernels(), 1);
}

TEST(Fusion, DecomposedLayerNormIsOneKernel) {
  GraphBuilder b;
  int x = b.input("x", {2, 5, 33});
  int gam = b.input("gamma", {33});
  int axes = b.constant("axes", Tensor::from_vector<int64_t>({1}, {-1}));
  int mean = b.node("ReduceMean", {x, axes});
  int d = b.node("Sub", {x, mean});
  int var = b.node("ReduceMean", {b.node("Mul", {d, d}), axes});
  int sd = b.node("Sqrt", {b.node("Add", {var, b.scalar(1e-5f)})});
  int y = b.node("Mul", {b.node("Div", {d, sd}), gam});
  b.output(y);
  b.output(mean);  // a per-row output stored by the same kernel
  Session s = check(b.g, opts(), 1e-3f, 1e-4f);
  EXPECT_EQ(s.num_kernels(), 1) << s.plan_summary();
}

TEST(Fusion, BiasGeluIsOneKernel) {
  GraphBuilder b;
  int x = b.input("x", {8, 100});
  int bias = b.input("b", {100});
  int h = b.node("Add", {x, bias});
  int e = b.node("Erf", {b.node("Div", {h, b.scalar(1.41421356f)})});
  int y = b.node("Mul", {b.node("Mul", {h, b.node("Add", {e, b.scalar(1.f)})}), b.scalar(0.5f)});
  b.output(y);
  Session s = check(b.g);
  EXPECT_EQ(s.num_kernels(), 1) << s.plan_summary();
}

TEST(Fusion, ReductionOfReductionStopsWithReason) {
  GraphBuilder b;
  int x = b.input("x", {6, 10});
  int r = b.node("ReduceSum", {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}});
  int r2 = b.node("ReduceMax", {r}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(1)}});
  b.output(r2);
  Session s = check(b.g);
  EXPECT_EQ(s.num_kernels(), 2);
  EXPECT_NE(s.plan_summary().find("reduction feeds a reduction over a different axis"),
            std::string::npos)
      << s.plan_summary();
}

TEST(Fusion, MatMulBiasReluIsOneLibraryKernel) {
  GraphBuilder b;
  int x = b.input("x", {5, 12});
  int w = b.constant("w", random_tensor({12, 7}));
  int bias = b.constant("bias", random_tensor({7}));
  int y = b.node("Relu", {b.node("Add", {b.node("MatMul", {x, w}), bias})});
  b.output(b.node("Exp", {y}));
  Session s = check(b.g, opts(), 1e-4f, 1e-4f);
  if (!brrr_test::kDnnl) return brrr_test::expect_reference_contractions(s);
  EXPECT_EQ(s.num_kernels("library"), 1) << s.plan_summary();
  EXPECT_EQ(s.num_kernels(), 2);
}

TEST(Fusion, SharedValueIsStoredOnce) {
  GraphBuilder b;
  int x = b.input("x", {4, 16});
  int w = b.constant("w", random_tensor({16, 16}));
  int e = b.node("Exp", {x});
  int a = b.node("MatMul", {e, w});
  b.output(b.node("Add", {a, e}));  // e is used by a library kernel and a later fused kernel
  Session s = check(b.g, opts(), 1e-4f, 1e-4f);
  EXPECT_NE(s.plan_summary().find("used by 2 consumers"), std::string::npos) << s.plan_summary();
}

TEST(Fusion, ProfileRecordsEveryKernel) {
  GraphBuilder b;
  int x = b.input("x", {64, 64});
  b.output(b.node("Softmax", {b.node("Cos", {x})}, {{"axis", int64_t(-1)}}));
  Session s(b.g, opts());
  RunProfile p = s.profile({{"x", random_tensor({64, 64})}}, 3);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].kind, "fused");
  EXPECT_EQ(p.kernels[0].ops, (std::vector<std::string>{"Cos", "Softmax"}));
  EXPECT_EQ(p.kernels[0].cls, OpClass::normalization);
  EXPECT_DOUBLE_EQ(p.kernels[0].cost.bytes, 2.0 * 64 * 64 * 4);
  EXPECT_GT(p.kernels[0].cost.special["exp"], 0);
}

TEST(Fusion, TimeRunsCallsBetweenBeforeEachRun) {
  GraphBuilder b;
  int x = b.input("x", {64, 64});
  b.output(b.node("Softmax", {b.node("Cos", {x})}, {{"axis", int64_t(-1)}}));
  Session s(b.g, opts());
  Tensor in = random_tensor({64, 64});
  int calls = 0;
  std::vector<double> t = s.time_runs({{"x", in}}, 4, [&] { ++calls; });
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(calls, 4);
  for (double ms : t) EXPECT_GT(ms, 0.0);
  EXPECT_EQ(s.time_runs({{"x", in}}, 2).size(), 2u);  // no baseline
  EXPECT_TRUE(s.time_queued_runs({{"x", in}}, 3).empty());  // CPU runs wait for themselves
  EXPECT_THROW(s.time_runs({{"x", random_tensor({5})}}, 2), Error);
  // The session still runs right after timing.
  brrr_test::expect_outputs_close(s.run({{"x", in}}), run_reference(s.graph(), {{"x", in}}), 1e-5f, 1e-6f,
                                  s.plan_summary());
}

TEST(Fusion, WrongInputShapeIsAnError) {
  GraphBuilder b;
  int x = b.input("x", {4});
  b.output(b.node("Cos", {x}));
  Session s(b.g, opts());
  EXPECT_THROW(s.run({{"x", random_tensor({5})}}), Error);
  EXPECT_THROW(s.run({}), Error);
}

// Outputs of 2^21 elements and more are written with streaming stores through aligned tiles:
// sizes off the tile and vector width, two outputs, and a broadcast operand.
TEST(Fusion, LargeOutputsUseStreamingStores) {
  for (int64_t n : {(int64_t(1) << 21) + 37, int64_t(1) << 21}) {
    GraphBuilder b;
    int x = b.input("x", {n});
    int y = b.node("Mul", {b.node("Add", {x, b.scalar(1.f)}), b.scalar(2.f)});
    b.output(y);
    b.output(b.node("Sub", {y, x}));
    check(b.g);
  }
}

// An embedding Gather the device runs as a library kernel (GPT-2's word embedding on CUDA): the
// boundary after it says so, not the reference kernel the fuser first planned.
TEST(Fusion, DeviceGatherBoundarySaysLibraryKernel) {
  GraphBuilder b;
  int ids = b.input("ids", {1, 4}, DType::i64);
  int e = b.node("Gather", {b.constant("wte", random_tensor({10, 8})), ids});
  b.output(b.node("Tanh", {b.node("Add", {e, b.constant("bias", random_tensor({8}))})}));
  Compiled c = compile(b.g, plan::Target::cuda(), {});
  ASSERT_EQ(c.plan.kernels[0].kind, plan::KernelKind::Library) << c.plan.print(c.graph);
  ASSERT_FALSE(c.plan.boundaries.empty());
  EXPECT_EQ(c.plan.boundaries[0].reason, "not fused: Gather runs as a library kernel")
      << c.plan.print(c.graph);
}

}  // namespace
}  // namespace brrr
