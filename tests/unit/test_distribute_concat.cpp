// distribute_concat: convs (directly or through a pool) over a channel Concat become partial convs
// summed by the conv library kernel's sum post-op. Outputs are checked against the reference
// executor on the original graph, so the rewrite itself is under test, not just the plan.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "brrr/error.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "dnnl_flag.hpp"
#include "expect_outputs.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

using brrr_test::kDnnl;

using I = std::vector<int64_t>;

Tensor rnd(const Shape& s, float lo = -1.f, float hi = 1.f) {
  static std::mt19937 rng(4321);
  return brrr_test::uniform_f32(s, rng, lo, hi);
}

// Conv with weights scaled by 1/sqrt(fan-in) (activations stay O(1)) and a bias.
int conv(GraphBuilder& b, int x, int64_t cin, int64_t cout, int64_t k, int64_t stride = 1) {
  float r = 1.0f / std::sqrt(float(cin * k * k));
  int64_t p = k / 2;
  return b.node("Conv",
                {x, b.constant("w" + std::to_string(b.count), rnd({cout, cin, k, k}, -r, r)),
                 b.constant("b" + std::to_string(b.count), rnd({cout}))},
                {{"pads", I{p, p, p, p}}, {"strides", I{stride, stride}}});
}

int count_ops(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op == op;
  return n;
}

// Runs g in a CPU session (split as `split` says) against the reference on the unchanged graph.
Session check(const Graph& g, int split = -1) {
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, -2.f, 2.f);
  Graph ref = g;
  infer_shapes(ref, {});
  SessionOptions o;
  o.fusion = 1;
  o.concat_split = split;
  Session s(g, o);
  std::vector<Tensor> got = s.run(in);
  got = s.run(in);  // twice: the second run reuses every buffer
  brrr_test::expect_outputs_close(got, run_reference(ref, in), 1e-4, 1e-4, s.plan_summary());
  return s;
}

// A fire module's expand branches (one part per kernel size), concatenated along channels.
std::vector<int> branches(GraphBuilder& b, int x, int64_t cin, const std::vector<int64_t>& ks,
                          int64_t c) {
  std::vector<int> parts;
  for (int64_t k : ks) parts.push_back(b.node("Relu", {conv(b, x, cin, c, k)}));
  return parts;
}

void expect_no_concat(const Session& s, int sums) {
  EXPECT_EQ(count_ops(s.graph(), "Concat"), 0) << s.plan_summary();
  if (!kDnnl) return brrr_test::expect_reference_contractions(s);
  size_t n = 0;
  for (size_t p = s.plan_summary().find("+sum"); p != std::string::npos;
       p = s.plan_summary().find("+sum", p + 1))
    ++n;
  EXPECT_EQ(int(n), sums) << s.plan_summary();
  EXPECT_EQ(s.num_kernels("library"), s.num_kernels()) << s.plan_summary();
}

TEST(DistributeConcat, TwoPartsIntoSqueezeConvRelu) {
  GraphBuilder b;
  int x = b.input("x", {1, 8, 12, 12});
  int cat = b.node("Concat", branches(b, x, 8, {1, 3}, 16), {{"axis", int64_t(1)}});
  b.output(b.node("Relu", {conv(b, cat, 32, 8, 1)}));
  Session s = check(b.g);
  expect_no_concat(s, 1);  // conv_a, then conv_b with the sum and the ReLU as post-ops
  if (kDnnl) EXPECT_EQ(s.num_kernels(), 4) << s.plan_summary();  // else checked above
}

TEST(DistributeConcat, ThreePartsNegativeAxis) {
  GraphBuilder b;
  int x = b.input("x", {2, 4, 9, 10});
  int cat = b.node("Concat", branches(b, x, 4, {1, 3, 1}, 12), {{"axis", int64_t(-3)}});
  b.output(b.node("Relu", {conv(b, cat, 36, 6, 1)}));
  expect_no_concat(check(b.g), 2);
}

// Parts listed out of the order they are computed (one twice): every Add still becomes a sum.
TEST(DistributeConcat, PartsOutOfComputeOrder) {
  GraphBuilder b;
  int x = b.input("x", {1, 4, 9, 9});
  std::vector<int> p = branches(b, x, 4, {1, 3}, 12);
  int cat = b.node("Concat", {p[1], p[0], p[1]}, {{"axis", int64_t(1)}});
  b.output(b.node("Relu", {conv(b, cat, 36, 6, 1)}));
  expect_no_concat(check(b.g), 2);
}

TEST(DistributeConcat, SpatialKernelWithStride) {
  GraphBuilder b;
  int x = b.input("x", {1, 6, 15, 13});
  int cat = b.node("Concat", branches(b, x, 6, {3, 1}, 10), {{"axis", int64_t(1)}});
  b.output(conv(b, cat, 20, 4, 3, 2));  // 3x3, stride 2, padded, no activation
  expect_no_concat(check(b.g), 1);
}

TEST(DistributeConcat, PoolBetween) {
  for (std::string pool : {"MaxPool", "AveragePool"}) {
    SCOPED_TRACE(pool);
    GraphBuilder b;
    int x = b.input("x", {1, 8, 19, 19});
    int cat = b.node("Concat", branches(b, x, 8, {1, 3}, 16), {{"axis", int64_t(1)}});
    int p = b.node(pool, {cat},
                   {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"ceil_mode", int64_t(1)}});
    b.output(b.node("Relu", {conv(b, p, 32, 8, 1)}));
    Session s = check(b.g);
    expect_no_concat(s, 1);
    EXPECT_EQ(count_ops(s.graph(), pool), 2) << s.plan_summary();
  }
}

TEST(DistributeConcat, ActivationsAfterTheSum) {
  for (std::string act : {"HardSwish", "Clip"}) {
    SCOPED_TRACE(act);
    GraphBuilder b;
    int x = b.input("x", {1, 5, 10, 10});
    int cat = b.node("Concat", branches(b, x, 5, {1, 3}, 12), {{"axis", int64_t(1)}});
    int y = conv(b, cat, 24, 6, 1);
    y = act == "Clip" ? b.node("Clip", {y, b.scalar(-0.25f), b.scalar(0.5f)}) : b.node(act, {y});
    b.output(y);
    expect_no_concat(check(b.g), 1);
  }
}

// Two convs read the concat: both are split and it disappears.
TEST(DistributeConcat, TwoConvConsumers) {
  GraphBuilder b;
  int x = b.input("x", {1, 4, 8, 8});
  int cat = b.node("Concat", branches(b, x, 4, {1, 3}, 16), {{"axis", int64_t(1)}});
  b.output(b.node("Relu", {conv(b, cat, 32, 4, 1)}));
  b.output(conv(b, cat, 32, 3, 3));
  expect_no_concat(check(b.g), 2);
}

// A consumer that is not a conv (or the concat as a graph output) needs the concat: it stays.
TEST(DistributeConcat, OtherConsumerKeepsConcat) {
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    GraphBuilder b;
    int x = b.input("x", {1, 4, 8, 8});
    int cat = b.node("Concat", branches(b, x, 4, {1, 3}, 16), {{"axis", int64_t(1)}});
    b.output(b.node("Relu", {conv(b, cat, 32, 4, 1)}));
    if (variant == 0) b.output(b.node("Sigmoid", {cat}));
    if (variant == 1) b.output(cat);
    if (variant == 2) {  // a pool whose output is also read by a non-conv
      int p = b.node("MaxPool", {cat}, {{"kernel_shape", I{2, 2}}, {"strides", I{2, 2}}});
      b.output(conv(b, p, 32, 4, 1));
      b.output(b.node("Sigmoid", {p}));
    }
    if (variant == 3) {  // a grouped conv
      b.output(
          b.node("Conv", {cat, b.constant("wg", rnd({32, 8, 1, 1}))}, {{"group", int64_t(4)}}));
    }
    Session s = check(b.g);
    EXPECT_GE(count_ops(s.graph(), "Concat"), 1) << s.plan_summary();
  }
}

// The partial sums would move more bytes than the concat (more output than input channels).
TEST(DistributeConcat, WideConvKeepsConcat) {
  GraphBuilder b;
  int x = b.input("x", {1, 4, 8, 8});
  int cat = b.node("Concat", branches(b, x, 4, {1, 3}, 8), {{"axis", int64_t(1)}});
  b.output(b.node("Relu", {conv(b, cat, 16, 40, 1)}));
  Session s = check(b.g);
  EXPECT_EQ(count_ops(s.graph(), "Concat"), 1) << s.plan_summary();
}

// Weights computed at run time, or a concat along another axis: left alone, still correct.
TEST(DistributeConcat, ComputedWeightsOrOtherAxisKeepConcat) {
  {
    GraphBuilder b;
    int x = b.input("x", {1, 4, 8, 8});
    int w = b.node("Relu", {b.input("w", {2, 32, 1, 1})});
    int cat = b.node("Concat", branches(b, x, 4, {1, 3}, 16), {{"axis", int64_t(1)}});
    b.output(b.node("Conv", {cat, w}));
    EXPECT_EQ(count_ops(check(b.g).graph(), "Concat"), 1);
  }
  {
    GraphBuilder b;
    int x = b.input("x", {1, 4, 8, 8});
    int cat = b.node("Concat", branches(b, x, 4, {1, 3}, 16), {{"axis", int64_t(2)}});
    b.output(b.node("Relu", {conv(b, cat, 16, 4, 1)}));
    EXPECT_EQ(count_ops(check(b.g).graph(), "Concat"), 1);
  }
}

// The rewrite alone (no session): same values from the reference executor, no Concat left, and
// it is off when asked.
TEST(DistributeConcat, PassKeepsReferenceValues) {
  GraphBuilder b;
  int x = b.input("x", {2, 3, 11, 11});
  int cat = b.node("Concat", branches(b, x, 3, {1, 3}, 8), {{"axis", int64_t(1)}});
  int p = b.node("MaxPool", {cat}, {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}});
  b.output(b.node("Relu", {conv(b, p, 16, 4, 1)}));
  Graph before = b.g, after = b.g;
  infer_shapes(before, {});
  infer_shapes(after, {});
  EXPECT_TRUE(distribute_concat(after));
  EXPECT_EQ(count_ops(after, "Concat"), 0);
  EXPECT_EQ(count_ops(after, "Conv"), count_ops(before, "Conv") + 1);
  EXPECT_FALSE(distribute_concat(after));  // nothing left to do
  std::map<std::string, Tensor> in{{"x", rnd({2, 3, 11, 11})}};
  brrr_test::expect_outputs_close(run_reference(after, in), run_reference(before, in), 1e-5, 1e-5,
                                  after.print());
  EXPECT_EQ(count_ops(check(b.g, 0).graph(), "Concat"), 1);  // SessionOptions::concat_split = 0
}

// A concat whose parts disagree fails shape inference with an error, before the rewrite.
TEST(DistributeConcat, BadConcatIsAnError) {
  GraphBuilder b;
  int x = b.input("x", {1, 4, 8, 8});
  int y = b.input("y", {1, 4, 7, 8});
  int cat = b.node("Concat", {x, y}, {{"axis", int64_t(1)}});
  b.output(conv(b, cat, 8, 2, 1));
  EXPECT_THROW(Session(b.g, SessionOptions{}), Error);
}

}  // namespace
}  // namespace brrr
