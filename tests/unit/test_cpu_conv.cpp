// Conv / pooling / concat / trailing-mean library kernels in a Session (fused epilogues) against
// the reference executor on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "backend/cpu/library.hpp"
#include "brrr/reference.hpp"
#include "env_var.hpp"
#include "dnnl_flag.hpp"
#include "expect_outputs.hpp"
#include "random_tensor.hpp"
#include "brrr/session.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

using brrr_test::expect_reference_contractions;
using brrr_test::kDnnl;
using brrr_test::kNoDnnl;
using I = std::vector<int64_t>;

Tensor rnd(const Shape& s, float lo = -1.f, float hi = 1.f) {
  static std::mt19937 rng(1234);
  return brrr_test::uniform_f32(s, rng, lo, hi);
}

// A k x k conv ("same" padding for odd k) with a bias and weights scaled by 1/sqrt(fan-in):
// activations stay O(1) through a chain, so a different summation order (threads, layouts,
// another ISA) stays within the tolerance.
int scaled_conv(GraphBuilder& b, int x, int64_t cin, int64_t cout, int64_t k, int64_t group = 1) {
  int64_t p = k / 2;
  float r = 1.0f / std::sqrt(float(cin / group * k * k));
  return b.node("Conv", {x, b.constant("w" + std::to_string(b.count), rnd({cout, cin / group, k, k}, -r, r)),
                         b.constant("b" + std::to_string(b.count), rnd({cout}))},
                {{"pads", I{p, p, p, p}}, {"group", group}});
}

Session check(const Graph& g, float rtol = 1e-4f, float atol = 1e-4f) {
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, -2.f, 2.f);
  SessionOptions o;
  o.fusion = 1;
  Session s(g, o);
  std::vector<Tensor> got = s.run(in);
  got = s.run(in);  // twice: the second run reuses every buffer
  brrr_test::expect_outputs_close(got, run_reference(s.graph(), in), rtol, atol, s.plan_summary());
  return s;
}

struct ConvCase {
  Shape x;
  int64_t m, kh, kw, group;
  std::vector<int64_t> strides, pads, dilations;
  bool bias;
  std::string post;  // "", "Relu", "HardSwish", "HardSigmoid", "Clip", "Add", "AddRelu"
  std::string auto_pad = "NOTSET";
};

void run_conv(const ConvCase& c) {
  SCOPED_TRACE(fmt::format("x {} m {} k {}x{} g {} post {}", shape_str(c.x), c.m, c.kh, c.kw,
                           c.group, c.post));
  GraphBuilder b;
  int x = b.input("x", c.x);
  int w = b.constant("w", rnd({c.m, c.x[1] / c.group, c.kh, c.kw}));
  std::vector<int> ins{x, w};
  if (c.bias) ins.push_back(b.constant("b", rnd({c.m})));
  std::map<std::string, AttrValue> at{{"group", c.group}, {"strides", c.strides},
                                      {"dilations", c.dilations}};
  if (c.auto_pad != "NOTSET") at["auto_pad"] = c.auto_pad;
  else at["pads"] = c.pads;
  int y = b.node("Conv", ins, at);
  if (c.post == "Add" || c.post == "AddRelu") {
    // The residual is computed before the conv, so the Add folds into a sum post-op.
    auto out = [&](int i) {
      int64_t dk = ((i ? c.kw : c.kh) - 1) * c.dilations[size_t(i)] + 1;
      return (c.x[size_t(2 + i)] + c.pads[size_t(i)] + c.pads[size_t(2 + i)] - dk) /
                 c.strides[size_t(i)] + 1;
    };
    GraphBuilder b2;
    int x2 = b2.input("x", c.x);
    int r2 = b2.node("Tanh", {b2.input("r", {c.x[0], c.m, out(0), out(1)})});
    std::vector<int> ins2{x2, b2.constant("w", b.g.value(w).constant)};
    if (c.bias) ins2.push_back(b2.constant("b", b.g.value(ins[2]).constant));
    int y2 = b2.node("Conv", ins2, at);
    y2 = b2.node("Add", {r2, y2});
    if (c.post == "AddRelu") y2 = b2.node("Relu", {y2});
    b2.output(y2);
    Session s = check(b2.g);
    if (kDnnl) EXPECT_NE(s.plan_summary().find("+sum"), std::string::npos) << s.plan_summary();
    if (!kDnnl) expect_reference_contractions(s);
    return;
  }
  if (c.post == "Clip") {
    y = b.node("Clip", {y, b.scalar(-0.5f), b.scalar(0.75f)});
  } else if (c.post == "HardSigmoid") {
    y = b.node("HardSigmoid", {y}, {{"alpha", 0.3f}, {"beta", 0.4f}});
  } else if (!c.post.empty()) {
    y = b.node(c.post, {y});
  }
  b.output(y);
  Session s = check(b.g);
  if (!kDnnl) return expect_reference_contractions(s);
  EXPECT_EQ(s.num_kernels(), 1) << s.plan_summary();  // the activation is a post-op
  EXPECT_EQ(s.num_kernels("library"), 1) << s.plan_summary();
}

TEST(CpuConv, Plain) { run_conv({{1, 3, 17, 19}, 8, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, ""}); }
TEST(CpuConv, NoBiasRelu) {
  run_conv({{2, 16, 9, 9}, 32, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, false, "Relu"});
}
TEST(CpuConv, Grouped) {
  run_conv({{1, 12, 10, 11}, 18, 3, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, "Relu"});
}
TEST(CpuConv, DepthwiseStride2HardSwish) {
  run_conv({{1, 24, 15, 16}, 24, 5, 5, 24, {2, 2}, {2, 2, 2, 2}, {1, 1}, true, "HardSwish"});
}
TEST(CpuConv, AsymmetricPadsStrides) {
  run_conv({{1, 5, 13, 12}, 7, 3, 2, 1, {2, 3}, {0, 1, 2, 0}, {1, 1}, true, ""});
}
TEST(CpuConv, Dilation) {
  run_conv({{1, 8, 20, 20}, 16, 3, 3, 1, {1, 1}, {2, 2, 2, 2}, {2, 2}, false, "Relu"});
}
TEST(CpuConv, DilatedDepthwise) {
  run_conv({{1, 16, 14, 14}, 16, 3, 3, 16, {1, 1}, {2, 2, 2, 2}, {2, 2}, true, ""});
}
TEST(CpuConv, SameUpper) {
  ConvCase c{{1, 4, 11, 9}, 6, 4, 3, 1, {2, 2}, {}, {1, 1}, true, "", "SAME_UPPER"};
  run_conv(c);
}
TEST(CpuConv, HardSigmoidAndClip) {
  run_conv({{1, 16, 8, 8}, 16, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, "HardSigmoid"});
  run_conv({{1, 16, 8, 8}, 24, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, "Clip"});
}
TEST(CpuConv, ResidualAdd) {
  run_conv({{1, 16, 8, 8}, 16, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, "Add"});
  run_conv({{2, 8, 9, 7}, 12, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, "AddRelu"});
}

// A residual whose producer comes after the conv in node order stays a separate Add.
TEST(CpuConv, LateResidualIsNotFolded) {
  GraphBuilder b;
  int x = b.input("x", {1, 4, 6, 6});
  int y = b.node("Conv", {x, b.constant("w", rnd({4, 4, 1, 1}))});
  int r = b.node("Sigmoid", {x});
  b.output(b.node("Add", {y, r}));
  Session s = check(b.g);
  EXPECT_EQ(s.plan_summary().find("+sum"), std::string::npos);
}

// The residual's last reader is the conv: the result is written over it (no copy, one buffer
// fewer), unless the conv also reads it as its input.
TEST(CpuConv, ResidualBufferReused) {
  for (bool self : {false, true}) {
    SCOPED_TRACE(self ? "residual is the conv's input" : "residual from elsewhere");
    GraphBuilder b;
    int x = b.input("x", {1, 8, 10, 10});
    int a = b.node("Relu", {x});
    int r = self ? a : b.node("Sigmoid", {x});
    int y = b.node("Conv", {a, b.constant("w", rnd({8, 8, 3, 3}))},
                   {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    y = b.node("Relu", {b.node("Add", {y, r})});
    b.output(b.node("Conv", {y, b.constant("w2", rnd({4, 8, 1, 1}))}));
    Session s = check(b.g);
    if (!kDnnl) {
      expect_reference_contractions(s);
      continue;
    }
    EXPECT_NE(s.plan_summary().find("+sum"), std::string::npos) << s.plan_summary();
    // Elsewhere: Relu and Sigmoid's outputs, the sum written over Sigmoid's. Self: Relu's and the
    // sum's (the values above check that the conv's input was not overwritten).
    EXPECT_EQ(s.memory().num_buffers, 2u) << s.plan_summary();
  }
}

// Two convs (the first with a residual add and Relu epilogue, the second 1x1) between generated
// kernels: the doctor's timings of library kernels alone.
Graph two_convs() {
  GraphBuilder b;
  int x = b.input("x", {1, 8, 10, 10});
  int a = b.node("Relu", {x});
  int y = b.node("Conv", {a, b.constant("w", rnd({8, 8, 3, 3}))},
                 {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  y = b.node("Relu", {b.node("Add", {y, b.node("Sigmoid", {x})})});
  b.output(b.node("Tanh", {b.node("Conv", {y, b.constant("w2", rnd({4, 8, 1, 1}))})}));
  return b.g;
}

// The doctor's price of a fused plan's library calls (Session::time_library_kernels_alone):
// every kernel of the plan is listed as profile() lists it, only the library kernels timed, one
// sample per round; the session runs on unchanged afterwards (a conv adding into its output in
// place ran again and again on the same buffers).
TEST(CpuConv, LibraryKernelsTimedAlone) {
  Session s = check(two_convs());
  std::map<std::string, Tensor> in{{"x", rnd({1, 8, 10, 10})}};
  const std::vector<Tensor> before = s.run(in);
  const std::vector<KernelRecord> alone = s.time_library_kernels_alone(in, 4);
  const RunProfile prof = s.profile(in, 2);
  ASSERT_EQ(alone.size(), prof.kernels.size());
  int timed = 0;
  for (size_t i = 0; i < alone.size(); ++i) {
    SCOPED_TRACE(alone[i].name);
    EXPECT_EQ(alone[i].name, prof.kernels[i].name);
    EXPECT_EQ(alone[i].nodes, prof.kernels[i].nodes);
    EXPECT_EQ(alone[i].kind, prof.kernels[i].kind);
    if (alone[i].kind == "library") {
      ++timed;
      EXPECT_EQ(alone[i].samples_ms.size(), 4u);
      EXPECT_EQ(alone[i].precision, prof.kernels[i].precision);
    } else {
      EXPECT_TRUE(alone[i].samples_ms.empty());
      EXPECT_EQ(alone[i].time_ms, 0);
    }
  }
  EXPECT_EQ(timed, s.num_kernels("library")) << s.plan_summary();
  if (kDnnl) EXPECT_EQ(timed, 2) << s.plan_summary();
  brrr_test::expect_outputs_close(s.run(in), before, 0, 0, s.plan_summary());
}

// The doctor's cache check (Session::time_library_kernels_hot): each library kernel repeated
// alone `reps` times after one untimed call; the other kernels listed untimed; the session runs
// on unchanged afterwards.
TEST(CpuConv, LibraryKernelsRepeatedHot) {
  Session s = check(two_convs());
  std::map<std::string, Tensor> in{{"x", rnd({1, 8, 10, 10})}};
  const std::vector<Tensor> before = s.run(in);
  const std::vector<KernelRecord> hot = s.time_library_kernels_hot(in, 3);
  const RunProfile prof = s.profile(in, 2);
  ASSERT_EQ(hot.size(), prof.kernels.size());
  int timed = 0;
  for (size_t i = 0; i < hot.size(); ++i) {
    SCOPED_TRACE(hot[i].name);
    EXPECT_EQ(hot[i].name, prof.kernels[i].name);
    if (hot[i].kind == "library") {
      ++timed;
      ASSERT_EQ(hot[i].samples_ms.size(), 3u);
      for (double t : hot[i].samples_ms) EXPECT_GT(t, 0);
    } else {
      EXPECT_TRUE(hot[i].samples_ms.empty());
    }
  }
  EXPECT_EQ(timed, s.num_kernels("library")) << s.plan_summary();
  brrr_test::expect_outputs_close(s.run(in), before, 0, 0, s.plan_summary());
}

// A library kernel whose input a generated kernel computes (GPT-2's token Gather reads ids that a
// generated kernel produced; later kernels then reuse that buffer): the timings of library
// kernels alone and repeated hot run the generated kernels too, untimed, so each library kernel
// reads the values of a run (`brrr doctor --compare` on GPT-2 stopped with "index
// -4767524531305412157 is out of range" for its wte Gather). Outputs are unchanged afterwards.
TEST(CpuConv, LibraryKernelsTimedAloneReadTheirInputsAsARunMakesThem) {
  GraphBuilder b;
  int ids = b.input("ids", {1, 16}, DType::i64);
  // GPT-2's: a copy kernel reshapes the ids (a graph input) for the Gather.
  int idx = b.node("Reshape", {ids, b.constant("flat", Tensor::from_vector<int64_t>({1}, {16}))});
  int e = b.node("Gather", {b.constant("table", rnd({100, 8})), idx});
  int r = b.node("ReduceSum", {e, b.constant("axes", Tensor::from_vector<int64_t>({1}, {1}))},
                 {{"keepdims", int64_t(0)}});
  // A GEMM reads the sums: they need a buffer, which may be the dead ids' one.
  b.output(b.node("MatMul", {b.node("Tanh", {b.node("Mul", {r, r})}), b.constant("w", rnd({16, 4}))}));
  SessionOptions o;
  o.fusion = 1;
  Session s(b.g, o);
  std::vector<int64_t> v(16);
  for (int i = 0; i < 16; ++i) v[size_t(i)] = (i * 37) % 99;
  std::map<std::string, Tensor> in{{"ids", Tensor::from_vector<int64_t>({1, 16}, v)}};
  const std::vector<Tensor> before = s.run(in);
  brrr_test::expect_outputs_close(before, run_reference(s.graph(), in), 1e-5f, 1e-5f,
                                  s.plan_summary());
  for (int round = 0; round < 2; ++round) {
    const std::vector<KernelRecord> k =
        round ? s.time_library_kernels_hot(in, 3) : s.time_library_kernels_alone(in, 3);
    int timed = 0;
    for (const auto& rec : k) timed += rec.kind == "library" && rec.samples_ms.size() == 3;
    EXPECT_EQ(timed, s.num_kernels("library")) << s.plan_summary();
    brrr_test::expect_outputs_close(s.run(in), before, 0, 0, s.plan_summary());
  }
}

// 1-D convs (Whisper's audio front end: [1, 80, 3000] -> 384 channels, k 3, then stride 2) and
// 3-D convs run on oneDNN with their epilogue, as 2-D ones do; before, they ran on the reference
// kernel (Whisper's two convs 1.1 s of a 2.6 s run).
void run_conv_nd(const Shape& x, const Shape& w, std::map<std::string, AttrValue> at) {
  SCOPED_TRACE(fmt::format("x {} w {}", shape_str(x), shape_str(w)));
  GraphBuilder b;
  int y = b.node("Conv", {b.input("x", x), b.constant("w", rnd(w)), b.constant("b", rnd({w[0]}))},
                 at);
  b.output(b.node("Relu", {y}));
  Session s = check(b.g);
  if (!kDnnl) return expect_reference_contractions(s);
  EXPECT_EQ(s.num_kernels(), 1) << s.plan_summary();
  EXPECT_EQ(s.num_kernels("library"), 1) << s.plan_summary();
  EXPECT_NE(s.plan_summary().find("+relu"), std::string::npos) << s.plan_summary();
}

TEST(CpuConv, OneDimensional) {
  run_conv_nd({1, 8, 30}, {16, 8, 3}, {{"pads", I{1, 1}}});
  run_conv_nd({2, 16, 31}, {16, 16, 3}, {{"pads", I{1, 1}}, {"strides", I{2}}});
  run_conv_nd({1, 12, 25}, {6, 4, 5}, {{"group", int64_t(3)}, {"dilations", I{2}}, {"pads", I{0, 3}}});
}

TEST(CpuConv, ThreeDimensional) {
  run_conv_nd({1, 4, 6, 7, 8}, {8, 4, 3, 3, 3}, {{"pads", I{1, 1, 1, 1, 1, 1}}});
  run_conv_nd({1, 6, 5, 9, 8}, {4, 3, 1, 3, 2},
              {{"group", int64_t(2)}, {"strides", I{1, 2, 2}}, {"pads", I{0, 1, 0, 0, 1, 1}}});
}

// A 1-D conv with its residual sum and ReLU is one library kernel; with weights computed at run
// time it runs on the reference kernel, and the plan then claims no fused epilogue.
TEST(CpuConv, OneDimensionalResidualAndReferenceFallback) {
  for (bool computed : {false, true}) {
    SCOPED_TRACE(computed ? "computed weights" : "constant weights");
    GraphBuilder b;
    int x = b.input("x", {1, 4, 10});
    int r = b.node("Tanh", {b.input("r", {1, 4, 10})});
    int w = computed ? b.node("Tanh", {b.input("w", {4, 4, 3})}) : b.constant("w", rnd({4, 4, 3}));
    int y = b.node("Conv", {x, w, b.constant("b", rnd({4}))}, {{"pads", I{1, 1}}});
    b.output(b.node("Relu", {b.node("Add", {r, y})}));
    Session s = check(b.g);
    if (kDnnl && !computed) {
      for (const char* claim : {"+sum", "+relu"})
        EXPECT_NE(s.plan_summary().find(claim), std::string::npos) << claim << "\n" << s.plan_summary();
      continue;
    }
    EXPECT_EQ(s.num_kernels("library"), 0) << s.plan_summary();
    for (const char* claim : {"+bias", "+sum", "+relu"})
      EXPECT_EQ(s.plan_summary().find(claim), std::string::npos) << claim << "\n" << s.plan_summary();
  }
}

// SiLU after a conv (EfficientNet, the YOLOs: exported as Sigmoid and Mul, either operand
// order) and a plain Sigmoid join the conv as oneDNN's swish and logistic post-ops; with another
// reader of the conv's output or of the Sigmoid, they stay a generated kernel.
TEST(CpuConv, SiluAndSigmoidEpilogues) {
  for (int form = 0; form < 5; ++form) {
    SCOPED_TRACE(form);
    GraphBuilder b;
    int y = b.node("Conv", {b.input("x", {1, 8, 9, 11}), b.constant("w", rnd({16, 8, 3, 3})),
                            b.constant("b", rnd({16}))},
                   {{"pads", I{1, 1, 1, 1}}});
    int s = b.node("Sigmoid", {y});
    if (form == 0) b.output(b.node("Mul", {y, s}));
    if (form == 1) b.output(b.node("Mul", {s, y}));
    if (form == 2) b.output(s);
    if (form == 3) b.output(b.node("Mul", {y, s})), b.output(b.node("Relu", {y}));
    if (form == 4) b.output(b.node("Mul", {y, s})), b.output(b.node("Neg", {s}));
    Session s1 = check(b.g);
    if (!kDnnl) {
      expect_reference_contractions(s1);
      continue;
    }
    const std::string plan = s1.plan_summary();
    EXPECT_EQ(s1.num_kernels("library"), 1) << plan;
    if (form <= 2) {
      EXPECT_EQ(s1.num_kernels(), 1) << plan;
      EXPECT_NE(plan.find(form == 2 ? "+sigmoid" : "+silu"), std::string::npos) << plan;
    } else {
      EXPECT_EQ(plan.find("+silu"), std::string::npos) << plan;
      EXPECT_GE(s1.num_kernels(), 2) << plan;
    }
    brrr_test::EnvVar off("BRRR_NO_CONV_SILU", "1");
    Session s2 = check(b.g);
    EXPECT_EQ(s2.plan_summary().find("+silu"), std::string::npos) << s2.plan_summary();
    EXPECT_EQ(s2.plan_summary().find("+sigmoid"), std::string::npos) << s2.plan_summary();
  }
}

// A BatchNormalization no exporter could fold into a conv (DenseNet's after each Concat, a
// BatchNorm1d on [N, C]) is a multiply-add per channel fused with its neighbours, not a
// reference kernel; its result matches the reference executor's BN op.
TEST(CpuConv, UnfoldedBatchNormFuses) {
  for (const Shape& xs : {Shape{1, 6, 5, 7}, Shape{3, 6}, Shape{2, 6, 9}}) {
    SCOPED_TRACE(shape_str(xs));
    GraphBuilder b;
    int x = b.node("Concat", {b.input("a", xs), b.input("c", xs)}, {{"axis", int64_t(1)}});
    const int64_t ch = 2 * xs[1];
    Tensor var = rnd({ch}, 0.1f, 2.f);
    int y = b.node("BatchNormalization",
                   {x, b.constant("scale", rnd({ch})), b.constant("bias", rnd({ch})),
                    b.constant("mean", rnd({ch})), b.constant("var", var)},
                   {{"epsilon", 1e-3f}});
    // ... after a Pad of zeros (Swin's window padding at 224 x 224): an alias, no kernel.
    const I zeros(2 * xs.size(), 0);
    y = b.node("Pad", {y, b.constant("pads", Tensor::from_vector<int64_t>({int64_t(zeros.size())}, zeros))});
    b.output(b.node("Relu", {y}));
    Session s = check(b.g, 1e-5f, 1e-5f);
    EXPECT_EQ(s.num_kernels("reference"), 0) << s.plan_summary();
    EXPECT_EQ(s.plan_summary().find("[BatchNormalization]"), std::string::npos) << s.plan_summary();
    EXPECT_EQ(s.plan_summary().find("[Pad]"), std::string::npos) << s.plan_summary();
    EXPECT_EQ(s.num_kernels(), 2) << s.plan_summary();  // the concat; BN, Pad and Relu in one
  }
}

// The conv output feeds two consumers: no epilogue folds, both read the same buffer.
TEST(CpuConv, SharedOutputKeepsActivationSeparate) {
  GraphBuilder b;
  int x = b.input("x", {1, 8, 7, 7});
  int y = b.node("Conv", {x, b.constant("w", rnd({8, 8, 3, 3}))}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.output(b.node("Relu", {y}));
  b.output(b.node("Sigmoid", {y}));
  check(b.g);
}

void run_pool(const std::string& op, Shape x, std::map<std::string, AttrValue> at) {
  SCOPED_TRACE(op + " " + shape_str(x));
  GraphBuilder b;
  int v = b.input("x", x);
  b.output(b.node(op, {v}, at));
  Session s = check(b.g);
  // Global means are brrr's own kernels; MaxPool and AveragePool are oneDNN's.
  if (kDnnl || op == "GlobalAveragePool" || op == "ReduceMean")
    EXPECT_EQ(s.num_kernels("library"), 1) << s.plan_summary();
  else
    expect_reference_contractions(s);
}

// A branch of blocked convs between generated kernels (ShuffleNet-v2's, around each channel
// shuffle): the first conv reads the plain input as it is or reorders it, the last computes
// blocked and reorders only its output to plain (not both sides to NHWC); the profile says so
// in each kernel's layout note and counts those bytes.
TEST(CpuConvLayouts, BlockedBranchBetweenGeneratedKernelsReordersOnceEachEnd) {
  if (!kDnnl) GTEST_SKIP() << kNoDnnl << ": no library convs";
  brrr_test::EnvVar env("BRRR_CONV_LAYOUT", "blocked");
  GraphBuilder b;
  int x = b.node("Neg", {b.input("x", {1, 58, 28, 28})});
  int v = b.node("Relu", {scaled_conv(b, x, 58, 58, 1)});
  v = scaled_conv(b, v, 58, 58, 3, 58);
  v = b.node("Relu", {scaled_conv(b, v, 58, 58, 1)});
  b.output(b.node("Neg", {v}));
  Session s = check(b.g);
  ASSERT_NE(s.plan_summary().find("kept channel-blocked"), std::string::npos) << s.plan_summary();
  RunProfile p = s.profile({{"x", rnd({1, 58, 28, 28})}}, 2);
  std::vector<std::string> notes;
  for (const KernelRecord& k : p.kernels)
    if (k.kind == "library") notes.push_back(k.layout_note);
  ASSERT_EQ(notes.size(), 3u) << s.plan_summary();
  EXPECT_EQ(notes[1], "") << "the depthwise conv reads and writes blocked data";
  // nChw16c with AVX-512, nChw8c with AVX2 (oneDNN's block on this CPU)
  EXPECT_EQ(notes[2], fmt::format("output nChw{}c -> nchw", brrr::cpu::channel_block()));
  EXPECT_EQ(notes[0].find("output"), std::string::npos) << notes[0];
  for (const KernelRecord& k : p.kernels)
    if (k.kind == "library" && !k.layout_note.empty())
      EXPECT_GT(k.cost.bytes, 4.0 * 58 * 28 * 28 * 3) << k.name << ": its reorder's bytes too";
}

// A mean over H and W without keepdims ([N, C] out: ShuffleNet-v2's x.mean([2, 3])) reads the
// conv's blocked output as it is: the conv converts nothing.
TEST(CpuConvLayouts, SpatialMeanWithoutKeepdimsReadsBlockedData) {
  if (!kDnnl) GTEST_SKIP() << kNoDnnl << ": no library convs";
  brrr_test::EnvVar env("BRRR_CONV_LAYOUT", "blocked");
  GraphBuilder b;
  int v = b.node("Relu", {scaled_conv(b, b.input("x", {1, 24, 9, 9}), 24, 40, 3)});
  b.output(b.node("ReduceMean", {v}, {{"axes", I{2, 3}}, {"keepdims", int64_t(0)}}));
  Session s = check(b.g);
  EXPECT_NE(s.plan_summary().find("kept channel-blocked"), std::string::npos) << s.plan_summary();
  RunProfile p = s.profile({{"x", rnd({1, 24, 9, 9})}}, 2);
  for (const KernelRecord& k : p.kernels)
    if (k.kind == "library") EXPECT_EQ(k.layout_note.find("output"), std::string::npos) << k.name;
}

TEST(CpuPool, MaxPool) {
  run_pool("MaxPool", {1, 8, 13, 13}, {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}});
  run_pool("MaxPool", {2, 3, 12, 10},
           {{"kernel_shape", I{3, 2}}, {"strides", I{2, 1}}, {"pads", I{1, 0, 1, 1}}});
}
// Floor mode with input rows and columns no window reads (a 2x2, stride 2 pool of an odd size):
// oneDNN pools the part the windows read, not a reference kernel.
TEST(CpuPool, PoolsThatLeaveTheLastRowsUnread) {
  run_pool("MaxPool", {1, 8, 13, 11}, {{"kernel_shape", I{2, 2}}, {"strides", I{2, 2}}});
  run_pool("MaxPool", {2, 16, 9, 9}, {{"kernel_shape", I{3, 3}}, {"strides", I{3, 3}}});
  run_pool("AveragePool", {1, 8, 13, 12}, {{"kernel_shape", I{2, 2}}, {"strides", I{2, 2}}});
  run_pool("AveragePool", {1, 8, 7, 7},
           {{"kernel_shape", I{2, 2}}, {"strides", I{2, 2}}, {"count_include_pad", int64_t(1)}});
}
TEST(CpuPool, MaxPoolCeilMode) {
  run_pool("MaxPool", {1, 16, 55, 55},
           {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"ceil_mode", int64_t(1)}});
  run_pool("MaxPool", {1, 4, 10, 10},
           {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"ceil_mode", int64_t(1)}});
}
// MaxPool between two convs, so that it reads and writes channel-blocked data (its own kernel):
// negative values next to pads, padding channels (c = 20), strides, ceil mode, batch 2.
void run_blocked_max_pool(Shape x, int64_t c, std::map<std::string, AttrValue> at) {
  SCOPED_TRACE(shape_str(x) + " c " + std::to_string(c));
  brrr_test::EnvVar env("BRRR_CONV_LAYOUT", "blocked");
  GraphBuilder b;
  int v = b.input("x", x);
  v = b.node("Conv", {v, b.constant("w0", rnd({c, x[1], 1, 1})), b.constant("b0", rnd({c}))});
  v = b.node("MaxPool", {v}, at);
  b.output(b.node("Conv", {v, b.constant("w1", rnd({8, c, 1, 1}))}));
  Session s = check(b.g);
  EXPECT_EQ(s.num_kernels("library"), 3) << s.plan_summary();
  EXPECT_NE(s.plan_summary().find("kept channel-blocked"), std::string::npos) << s.plan_summary();
}
TEST(CpuPool, BlockedMaxPool) {
  if (!kDnnl) GTEST_SKIP() << kNoDnnl << ": no channel-blocked convs, so no blocked MaxPool";
  run_blocked_max_pool({1, 3, 13, 13}, 32, {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}});
  run_blocked_max_pool({2, 5, 12, 10}, 20,
                       {{"kernel_shape", I{3, 2}}, {"strides", I{2, 1}}, {"pads", I{1, 0, 1, 1}}});
  run_blocked_max_pool({1, 4, 11, 9}, 16, {{"kernel_shape", I{2, 3}}, {"pads", I{1, 2, 1, 2}}});
  // 64 x 57 x 57: rows split over threads.
  run_blocked_max_pool({1, 3, 57, 57}, 64,
                       {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"ceil_mode", int64_t(1)}});
}
TEST(CpuPool, AveragePool) {
  run_pool("AveragePool", {1, 8, 9, 9}, {{"kernel_shape", I{3, 3}}, {"pads", I{1, 1, 1, 1}}});
  run_pool("AveragePool", {1, 8, 9, 9},
           {{"kernel_shape", I{3, 3}}, {"pads", I{1, 1, 1, 1}}, {"count_include_pad", int64_t(1)}});
  run_pool("AveragePool", {1, 4, 10, 10},
           {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"ceil_mode", int64_t(1)}});
}
TEST(CpuPool, GlobalAverageAndReduceMean) {
  run_pool("GlobalAveragePool", {2, 24, 7, 5}, {});
  run_pool("ReduceMean", {1, 40, 14, 14}, {{"axes", I{2, 3}}, {"keepdims", int64_t(1)}});
  run_pool("ReduceMean", {3, 5, 6}, {{"axes", I{-1, -2}}, {"keepdims", int64_t(0)}});
  run_pool("GlobalAveragePool", {2, 40, 33, 31}, {});  // rows split over threads
}

TEST(CpuConcat, Channels) {
  for (int64_t axis : {1, 0, 3, -1}) {
    GraphBuilder b;
    int a = b.input("a", {2, 3, 4, 5});
    int c = b.input("c", {2, 3, 4, 5});
    int r = b.node("Relu", {c});
    b.output(b.node("Concat", {a, r, a}, {{"axis", axis}}));
    Session s = check(b.g);
    EXPECT_EQ(s.num_kernels("library"), 1) << s.plan_summary();  // brrr's own concat kernel
  }
}

// A chain of library kernels (kept NHWC or channel-blocked between them): conv, pool, fire-style
// concat, residual sum, a mean over H,W and a fused elementwise consumer that needs NCHW again.
// Blocked, channel counts 8 and 24 get padding channels, except where a Concat needs whole blocks.
void layout_chain(int64_t hw, const std::string& layout, float tol = 1e-4f) {
  brrr_test::EnvVar env("BRRR_CONV_LAYOUT", layout);
  GraphBuilder b;
  using I = std::vector<int64_t>;
  auto conv = [&](int x, int64_t cin, int64_t cout, int64_t k, int64_t group = 1) {
    return scaled_conv(b, x, cin, cout, k, group);
  };
  int x = b.input("x", {1, 3, hw, hw});
  int v = b.node("Relu", {conv(x, 3, 16, 3)});
  v = b.node("MaxPool", {v}, {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"ceil_mode", int64_t(1)}});
  int sq = b.node("Relu", {conv(v, 16, 8, 1)});
  int e1 = b.node("Relu", {conv(sq, 8, 12, 1)});
  int e3 = b.node("Relu", {conv(sq, 8, 12, 3)});
  v = b.node("Concat", {e1, e3}, {{"axis", int64_t(1)}});
  int d = b.node("HardSwish", {conv(v, 24, 24, 3, 24)});
  int r = b.node("Add", {v, conv(d, 24, 24, 1)});
  int m = b.node("ReduceMean", {r}, {{"axes", I{2, 3}}, {"keepdims", int64_t(1)}});
  int sc = b.node("HardSigmoid", {conv(m, 24, 24, 1)});
  b.output(b.node("Mul", {r, sc}));
  // Squeeze-excite between convs: the channel scale runs NHWC or blocked as a library kernel.
  int dw = conv(r, 24, 24, 3, 24);
  int se = b.node("HardSigmoid", {conv(b.node("GlobalAveragePool", {dw}), 24, 24, 1)});
  b.output(conv(b.node("Mul", {se, dw}), 24, 8, 1));
  b.output(b.node("GlobalAveragePool", {conv(r, 24, 10, 1)}));
  Session s = check(b.g, tol, tol);
  if (!kDnnl) {
    // Still brrr's own kernels: the concat, the mean, both global means and the channel scale.
    EXPECT_EQ(s.num_kernels("library"), 5) << s.plan_summary();
    return expect_reference_contractions(s);
  }
  EXPECT_EQ(s.num_kernels("reference"), 0) << s.plan_summary();
  const char* kept = layout == "blocked" ? "kept channel-blocked" : "kept NHWC";
  EXPECT_NE(s.plan_summary().find(kept), std::string::npos) << s.plan_summary();
  if (layout == "nhwc")
    EXPECT_EQ(s.plan_summary().find("kept channel-blocked"), std::string::npos) << s.plan_summary();
}
TEST(CpuConv, NhwcChain) { layout_chain(23, "nhwc"); }
// 24 x 40 x 40 activations: the channel scale and the means split over threads.
TEST(CpuConv, NhwcChainThreaded) { layout_chain(80, "nhwc"); }
// Without oneDNN nothing is blocked: these would repeat the NHWC chains exactly.
TEST(CpuConv, BlockedChain) {
  if (!kDnnl) GTEST_SKIP() << kNoDnnl << ": no channel-blocked layouts (NhwcChain covers it)";
  layout_chain(23, "blocked");
}
TEST(CpuConv, BlockedChainThreaded) {
  if (!kDnnl)
    GTEST_SKIP() << kNoDnnl << ": no channel-blocked layouts (NhwcChainThreaded covers it)";
  layout_chain(80, "blocked");
}

// EfficientNet's MBConv block: expand conv + SiLU, depthwise conv + SiLU, squeeze-excite (global
// mean, conv + SiLU, conv + Sigmoid, channel scale), projection conv. With oneDNN every SiLU and
// Sigmoid is a conv post-op and the scale a library kernel between the convs, so no generated
// kernel runs and the activations stay in the library's layout (before: the depthwise conv's
// output went back to NCHW for a generated SiLU and scale, 3 reorders a block).
TEST(CpuConv, MbConvBlockRunsOnLibraryKernelsOnly) {
  GraphBuilder b;
  auto conv = [&](int x, int64_t cin, int64_t cout, int64_t k, int64_t group = 1) {
    return scaled_conv(b, x, cin, cout, k, group);
  };
  auto silu = [&](int y) { return b.node("Mul", {y, b.node("Sigmoid", {y})}); };
  int x = b.input("x", {1, 16, 20, 20});
  int e = silu(conv(x, 16, 64, 1));
  int d = silu(conv(e, 64, 64, 5, 64));
  int m = b.node("GlobalAveragePool", {d});
  int sc = b.node("Sigmoid", {conv(silu(conv(m, 64, 4, 1)), 4, 64, 1)});
  b.output(conv(b.node("Mul", {d, sc}), 64, 24, 1));
  Session s = check(b.g);
  if (!kDnnl) return expect_reference_contractions(s);
  const std::string plan = s.plan_summary();
  EXPECT_EQ(s.num_kernels("fused"), 0) << plan;
  EXPECT_EQ(s.num_kernels("reference"), 0) << plan;
  EXPECT_EQ(s.num_kernels(), 7) << plan;  // 5 convs, the mean and the scale
  EXPECT_NE(plan.find("+silu"), std::string::npos) << plan;
}

// A squeezenet-style network in whole channel blocks: a stem conv reading NCHW, pools, fire
// modules whose 3x3 expand convs run as Winograd on blocked data, a residual sum, squeeze-excite
// and a classifier conv whose 40 channels are blocked with padding, then a global mean. Checked
// with each layout, and with Winograd off.
void blocked_fire_net(const std::string& layout, bool winograd) {
  brrr_test::EnvVar env("BRRR_CONV_LAYOUT", layout);
  brrr_test::EnvVar wino("BRRR_DISABLE_WINOGRAD", winograd ? "0" : "1");
  GraphBuilder b;
  using I = std::vector<int64_t>;
  auto conv = [&](int x, int64_t cin, int64_t cout, int64_t k, int64_t stride = 1, int64_t group = 1) {
    int64_t p = stride == 1 ? k / 2 : 0;
    float r = 1.0f / std::sqrt(float(cin / group * k * k));
    return b.node("Conv", {x, b.constant("w" + std::to_string(b.count), rnd({cout, cin / group, k, k}, -r, r)),
                           b.constant("b" + std::to_string(b.count), rnd({cout}))},
                  {{"pads", I{p, p, p, p}}, {"strides", I{stride, stride}}, {"group", group}});
  };
  auto pool = [&](int x) {
    return b.node("MaxPool", {x}, {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"ceil_mode", int64_t(1)}});
  };
  auto fire = [&](int x, int64_t cin, int64_t s, int64_t e) {
    int q = b.node("Relu", {conv(x, cin, s, 1)});
    return b.node("Concat", {b.node("Relu", {conv(q, s, e, 1)}), b.node("Relu", {conv(q, s, e, 3)})},
                  {{"axis", int64_t(1)}});
  };
  int x = b.input("x", {1, 3, 57, 57});
  int v = pool(b.node("Relu", {conv(x, 3, 32, 3, 2)}));  // 28 x 28 -> 14 x 14
  v = fire(v, 32, 16, 32);
  v = fire(v, 64, 16, 32);
  v = pool(v);  // 7 x 7
  v = fire(v, 64, 32, 48);
  int res = b.node("Add", {v, conv(b.node("Relu", {conv(v, 96, 32, 1)}), 32, 96, 3)});
  int c = b.node("Relu", {conv(res, 96, 40, 1)});  // 40 channels: blocked with 8 padding channels
  int se = b.node("HardSigmoid", {conv(b.node("GlobalAveragePool", {c}), 40, 40, 1)});
  int y = b.node("Relu", {conv(b.node("Mul", {c, se}), 40, 40, 3)});
  b.output(b.node("GlobalAveragePool", {y}));
  Session s = check(b.g);
  if (!kDnnl) return expect_reference_contractions(s);
  EXPECT_EQ(s.num_kernels("reference"), 0) << s.plan_summary();
  bool blocked = s.plan_summary().find("kept channel-blocked") != std::string::npos;
  EXPECT_EQ(blocked, layout == "blocked") << s.plan_summary();
}
TEST(CpuConv, BlockedFireNetWinograd) {
  if (!kDnnl) GTEST_SKIP() << kNoDnnl << ": no channel-blocked layouts or Winograd convs";
  blocked_fire_net("blocked", true);
}
TEST(CpuConv, BlockedFireNetDirect) {
  if (!kDnnl) GTEST_SKIP() << kNoDnnl << ": no channel-blocked layouts (NhwcFireNet covers it)";
  blocked_fire_net("blocked", false);
}
TEST(CpuConv, NhwcFireNet) { blocked_fire_net("nhwc", true); }

// mobilenet's classifier: Gemm with its own bias C, then HardSwish as a matmul post-op.
TEST(CpuGemm, BiasedGemmHardSwishIsOneKernel) {
  GraphBuilder b;
  int x = b.input("x", {3, 40});
  int y = b.node("Gemm", {x, b.constant("w", rnd({24, 40})), b.constant("c", rnd({24}))},
                 {{"transB", int64_t(1)}});
  b.output(b.node("HardSwish", {y}));
  Session s = check(b.g);
  if (!kDnnl) return expect_reference_contractions(s);
  EXPECT_EQ(s.num_kernels(), 1) << s.plan_summary();
  EXPECT_EQ(s.num_kernels("library"), 1) << s.plan_summary();
}

}  // namespace
}  // namespace brrr
