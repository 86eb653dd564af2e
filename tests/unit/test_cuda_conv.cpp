// Conv on cuDNN in the CUDA Session against the reference executor on random inputs: pads and
// strides, grouped / depthwise, dilation, 1-D and 3-D, the fused epilogue (bias, residual sum,
// Relu / HardSwish / HardSigmoid / Clip), batch > 1, tf32, graph capture, and the host fallback
// for pads cuDNN cannot express. Skips without a GPU or without a loadable libcudnn.so.9.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <random>

#include "brrr/reference.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "random_tensor.hpp"
#include "brrr/session.hpp"
#include "runtime/graph_builder.hpp"

#ifdef BRRR_HAVE_CUDA
#include "backend/cuda/cudnn_conv.hpp"
#include "cuda_test_util.hpp"

#define REQUIRE_CUDNN() BRRR_REQUIRE_CUDNN("Conv")

namespace brrr {
namespace {

Tensor rnd(const Shape& s, float lo = -1.f, float hi = 1.f) {
  static std::mt19937 rng(4321);
  return brrr_test::uniform_f32(s, rng, lo, hi);
}

SessionOptions cuda_opts(const std::string& precision = "fp32", int graphs = 1) {
  SessionOptions o;
  o.backend = "cuda";
  o.precision = precision;
  o.graphs = graphs;
  o.fusion = 1;
  return o;
}

// CUDA vs the reference executor: every element within atol + rtol*|ref| for fp32 (tf32: by
// relative L2 error), and a second run gives the same bits.
Session check(const Graph& g, SessionOptions o = cuda_opts()) {
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, -2.f, 2.f);
  Session s(g, o);
  std::vector<Tensor> got = s.run(in);
  std::vector<Tensor> want = run_reference(s.graph(), in);
  if (o.precision == "fp32") {
    brrr_test::expect_outputs_close(got, want, 1e-4, 1e-4, s.plan_summary());
  } else {
    brrr_cuda_test::expect_rel_l2(got, want, 3e-3, s.plan_summary());
  }
  brrr_test::expect_same_bytes(got, s.run(in));
  return s;
}

// Every Conv on cuDNN, nothing on the host, the plan captured as a CUDA graph.
void expect_all_on_gpu(const Session& s) {
  const std::string sum = s.plan_summary();
  EXPECT_NE(sum.find("cuDNN conv"), std::string::npos) << sum;
  EXPECT_EQ(sum.find("host fallback"), std::string::npos) << sum;
  EXPECT_NE(sum.find("CUDA graph on"), std::string::npos) << sum;
}

struct ConvCase {
  Shape x;
  int64_t m, kh, kw, group;
  std::vector<int64_t> strides, pads, dilations;
  bool bias;
  std::string post;  // "", "Relu", "HardSwish", "HardSigmoid", "Clip", "Add", "AddRelu"
  std::string auto_pad = "NOTSET";
};

// Builds the case's graph (2-D Conv + its epilogue), checks it, returns the session.
Session run_conv(const ConvCase& c, SessionOptions o = cuda_opts()) {
  SCOPED_TRACE(fmt::format("x {} m {} k {}x{} g {} post {}", shape_str(c.x), c.m, c.kh, c.kw,
                           c.group, c.post));
  GraphBuilder b;
  int x = b.input("x", c.x);
  std::map<std::string, AttrValue> at{{"group", c.group}, {"strides", c.strides},
                                      {"dilations", c.dilations}};
  if (c.auto_pad != "NOTSET") at["auto_pad"] = c.auto_pad;
  else at["pads"] = c.pads;
  int r = -1;
  if (c.post == "Add" || c.post == "AddRelu") {
    // A residual computed before the conv: the Add folds into the Conv kernel as `sum`.
    auto out = [&](int i) {
      int64_t dk = ((i ? c.kw : c.kh) - 1) * c.dilations[size_t(i)] + 1;
      return (c.x[size_t(2 + i)] + c.pads[size_t(i)] + c.pads[size_t(2 + i)] - dk) /
                 c.strides[size_t(i)] + 1;
    };
    r = b.node("Tanh", {b.input("r", {c.x[0], c.m, out(0), out(1)})});
  }
  std::vector<int> ins{x, b.constant("w", rnd({c.m, c.x[1] / c.group, c.kh, c.kw}))};
  if (c.bias) ins.push_back(b.constant("b", rnd({c.m})));
  int y = b.node("Conv", ins, at);
  if (r >= 0) {
    y = b.node("Add", {r, y});
    if (c.post == "AddRelu") y = b.node("Relu", {y});
  } else if (c.post == "Clip") {
    y = b.node("Clip", {y, b.scalar(-0.5f), b.scalar(0.75f)});
  } else if (c.post == "HardSigmoid") {
    y = b.node("HardSigmoid", {y}, {{"alpha", 0.3f}, {"beta", 0.4f}});
  } else if (!c.post.empty()) {
    y = b.node(c.post, {y});
  }
  b.output(y);
  Session s = check(b.g, o);
  if (r >= 0) {
    EXPECT_NE(s.plan_summary().find("+sum"), std::string::npos) << s.plan_summary();
  } else {
    EXPECT_EQ(s.num_kernels(), 1) << s.plan_summary();  // the activation is in the epilogue
  }
  // A Conv the CUDA session runs on the host becomes a reference kernel there.
  if (s.plan_summary().find("host fallback") == std::string::npos)
    EXPECT_EQ(s.num_kernels("library"), 1) << s.plan_summary();
  return s;
}

TEST(CudaConv, PadsAndStrides) {
  REQUIRE_CUDNN();
  expect_all_on_gpu(run_conv({{1, 3, 17, 19}, 8, 3, 3, 1, {2, 1}, {1, 2, 1, 2}, {1, 1}, false, ""}));
  expect_all_on_gpu(run_conv({{1, 5, 13, 12}, 7, 3, 2, 1, {2, 3}, {0, 0, 0, 0}, {1, 1}, true, ""}));
}

TEST(CudaConv, BiasRelu) {
  REQUIRE_CUDNN();
  brrr_test::EnvVar unfused("BRRR_CONV_FUSE", "0");
  Session s = run_conv({{1, 16, 9, 9}, 32, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, "Relu"});
  expect_all_on_gpu(s);
  EXPECT_NE(s.plan_summary().find("bias/sum/activation kernel"), std::string::npos);
  expect_all_on_gpu(run_conv({{1, 16, 9, 9}, 32, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, false, "Relu"}));
}

// Bias, residual and ReLU inside cuDNN's call (BRRR_CONV_FUSE=1, the default) and after it in
// brrr's epilogue kernel (0), fp32 and tf32, batch 2: both give the reference's results; with ReLU
// cuDNN 9 takes the fused call (without an activation only its implicit-precomp-GEMM algorithm
// does, so that is not required).
TEST(CudaConv, BiasSumReluInsideCudnnOrAfter) {
  REQUIRE_CUDNN();
  for (const char* fuse : {"1", "0"})
    for (const char* precision : {"fp32", "tf32"})
      for (const char* post : {"Relu", "AddRelu", "Add", ""}) {
        SCOPED_TRACE(fmt::format("BRRR_CONV_FUSE={} {} post '{}'", fuse, precision, post));
        brrr_test::EnvVar e("BRRR_CONV_FUSE", fuse);
        Session s = run_conv({{2, 16, 9, 9}, 32, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, post},
                             cuda_opts(precision));
        expect_all_on_gpu(s);
        const std::string sum = s.plan_summary();
        if (fuse[0] == '0')
          EXPECT_NE(sum.find("bias/sum/activation kernel"), std::string::npos) << sum;
        else if (std::string(post).find("Relu") != std::string::npos)
          EXPECT_NE(sum.find("bias/sum/ReLU fused in cuDNN"), std::string::npos) << sum;
      }
}

// BRRR_CONV_TUNE=1: cuDNN's timed choice (fp32 keeps FMA math) gives the reference's results.
TEST(CudaConv, TimedAlgorithmsMatchTheReference) {
  REQUIRE_CUDNN();
  brrr_test::EnvVar tune("BRRR_CONV_TUNE", "1");
  Session s = run_conv({{2, 16, 14, 14}, 32, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, "Relu"});
  expect_all_on_gpu(s);
  EXPECT_NE(s.plan_summary().find(", timed"), std::string::npos) << s.plan_summary();
  EXPECT_EQ(s.plan_summary().find("tensor-op"), std::string::npos) << s.plan_summary();
  run_conv({{2, 16, 14, 14}, 32, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, "Relu"},
           cuda_opts("tf32"));
}

TEST(CudaConv, GroupedAndDepthwise) {
  REQUIRE_CUDNN();
  expect_all_on_gpu(run_conv({{1, 12, 10, 11}, 18, 3, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, "Relu"}));
  expect_all_on_gpu(
      run_conv({{1, 24, 15, 16}, 24, 5, 5, 24, {2, 2}, {2, 2, 2, 2}, {1, 1}, true, "HardSwish"}));
  // depthwise with a channel multiplier (M = 2C)
  expect_all_on_gpu(run_conv({{1, 8, 9, 9}, 16, 3, 3, 8, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, ""}));
}

TEST(CudaConv, Dilation) {
  REQUIRE_CUDNN();
  expect_all_on_gpu(run_conv({{1, 8, 20, 20}, 16, 3, 3, 1, {1, 1}, {2, 2, 2, 2}, {2, 2}, false, "Relu"}));
  expect_all_on_gpu(run_conv({{1, 16, 14, 14}, 16, 3, 3, 16, {1, 1}, {2, 2, 2, 2}, {2, 2}, true, ""}));
}

TEST(CudaConv, ResidualSum) {
  REQUIRE_CUDNN();
  expect_all_on_gpu(run_conv({{1, 16, 8, 8}, 16, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, "Add"}));
  expect_all_on_gpu(
      run_conv({{2, 8, 9, 7}, 12, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, "AddRelu"}));
}

TEST(CudaConv, HardSwishHardSigmoidClip) {
  REQUIRE_CUDNN();
  expect_all_on_gpu(run_conv({{1, 16, 8, 8}, 24, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, "HardSwish"}));
  expect_all_on_gpu(run_conv({{1, 16, 8, 8}, 16, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, "HardSigmoid"}));
  expect_all_on_gpu(run_conv({{1, 16, 8, 8}, 24, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, "Clip"}));
}

TEST(CudaConv, BatchGreaterThanOne) {
  REQUIRE_CUDNN();
  expect_all_on_gpu(run_conv({{4, 8, 12, 12}, 16, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, "Relu"}));
  expect_all_on_gpu(run_conv({{3, 6, 11, 7}, 6, 3, 3, 6, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, "HardSwish"}));
}

// Pads cuDNN can express: SAME_UPPER landing symmetric, and begin > end pads where padding both
// ends by the begin pad gives the same number of outputs.
TEST(CudaConv, PadsThatMapToSymmetric) {
  REQUIRE_CUDNN();
  ConvCase same{{1, 4, 9, 9}, 6, 3, 3, 1, {2, 2}, {}, {1, 1}, true, "", "SAME_UPPER"};
  expect_all_on_gpu(run_conv(same));
  expect_all_on_gpu(run_conv({{1, 2, 5, 5}, 4, 2, 2, 1, {2, 2}, {1, 1, 0, 0}, {1, 1}, true, ""}));
}

// Pads cuDNN cannot express stay on the host, correctly, and say why.
TEST(CudaConv, AsymmetricPadsFallBackToHost) {
  REQUIRE_CUDNN();
  Session s = run_conv({{1, 5, 13, 12}, 7, 3, 2, 1, {2, 3}, {0, 1, 2, 0}, {1, 1}, true, ""});
  EXPECT_NE(s.plan_summary().find("host fallback"), std::string::npos) << s.plan_summary();
  EXPECT_NE(s.plan_summary().find("asymmetric pads"), std::string::npos) << s.plan_summary();
}

TEST(CudaConv, OneDAndThreeD) {
  REQUIRE_CUDNN();
  {
    GraphBuilder b;
    int x = b.input("x", {2, 4, 20});
    int y = b.node("Conv", {x, b.constant("w", rnd({6, 4, 3})), b.constant("b", rnd({6}))},
                   {{"pads", std::vector<int64_t>{1, 1}}, {"strides", std::vector<int64_t>{2}}});
    b.output(b.node("Relu", {y}));
    expect_all_on_gpu(check(b.g));
  }
  {
    GraphBuilder b;
    int x = b.input("x", {1, 3, 6, 7, 8});
    int y = b.node("Conv", {x, b.constant("w", rnd({4, 3, 3, 3, 3}))},
                   {{"pads", std::vector<int64_t>{1, 1, 1, 1, 1, 1}}});
    b.output(y);
    expect_all_on_gpu(check(b.g));
  }
}

// Weights computed in the graph (not constants) are read from the arena.
TEST(CudaConv, ComputedWeights) {
  REQUIRE_CUDNN();
  GraphBuilder b;
  int x = b.input("x", {2, 4, 8, 8});
  int w = b.node("Tanh", {b.input("w", {8, 4, 3, 3})});
  b.output(b.node("Conv", {x, w}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  expect_all_on_gpu(check(b.g));
}

TEST(CudaConv, Tf32) {
  REQUIRE_CUDNN();
  Session s = run_conv({{2, 32, 16, 16}, 64, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, "Relu"},
                       cuda_opts("tf32"));
  expect_all_on_gpu(s);
  EXPECT_NE(s.plan_summary().find("tf32"), std::string::npos) << s.plan_summary();
}

// A small conv net: every kernel on the GPU, the plan one CUDA graph, replay == eager launches.
TEST(CudaConv, ConvNetRunsAsOneGraph) {
  REQUIRE_CUDNN();
  GraphBuilder b;
  int x = b.input("x", {2, 3, 16, 16});
  int a = b.node("Relu", {b.node("Conv", {x, b.constant("w1", rnd({16, 3, 3, 3})),
                                          b.constant("b1", rnd({16}))},
                                 {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})});
  int d = b.node("HardSwish", {b.node("Conv", {a, b.constant("w2", rnd({16, 1, 3, 3})),
                                               b.constant("b2", rnd({16}))},
                                      {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                       {"group", int64_t(16)}})});
  int p = b.node("Conv", {d, b.constant("w3", rnd({16, 16, 1, 1})), b.constant("b3", rnd({16}))});
  b.output(b.node("Relu", {b.node("Add", {a, p})}));
  Session on = check(b.g, cuda_opts("fp32", 1));
  expect_all_on_gpu(on);
  EXPECT_EQ(on.num_kernels("library"), 3) << on.plan_summary();
  Session off(b.g, cuda_opts("fp32", 0));
  EXPECT_NE(off.plan_summary().find("CUDA graph off"), std::string::npos) << off.plan_summary();
  std::map<std::string, Tensor> in{{"x", rnd({2, 3, 16, 16})}};
  for (int r = 0; r < 2; ++r) {
    Tensor e = on.run(in)[0], f = off.run(in)[0];
    ASSERT_EQ(e.nbytes(), f.nbytes());
    EXPECT_EQ(std::memcmp(e.raw(), f.raw(), e.nbytes()), 0);
  }
  RunProfile prof = on.profile(in, 3);
  ASSERT_EQ(int(prof.kernels.size()), on.num_kernels());
  for (const auto& k : prof.kernels) EXPECT_GT(k.time_ms, 0.0) << k.name;
}

// ---- No device needed: the ONNX -> cuDNN geometry against cuDNN's own output-dims query. ----

Node conv_node(std::map<std::string, AttrValue> at) {
  Node n;
  n.op = "Conv";
  n.name = "conv";
  n.attrs = std::move(at);
  return n;
}

using V = std::vector<int64_t>;

// Maps to cuDNN, whose output dims must equal the graph's y (after the 1-D -> 2-D lift).
void expect_maps(const Node& n, const Shape& x, const Shape& w, const Shape& y) {
  SCOPED_TRACE(fmt::format("x {} w {} y {}", shape_str(x), shape_str(w), shape_str(y)));
  cuda::ConvGeometry geo;
  ASSERT_EQ(cuda::conv_geometry(plan::describe_conv(n, x, w), x, w, y, &geo), "");
  std::vector<int> want(y.begin(), y.end());
  if (y.size() == 3) want.insert(want.begin() + 2, 1);
  EXPECT_EQ(geo.y, want);
  EXPECT_EQ(cuda::cudnn_output_dims(geo), want);
}

#define REQUIRE_CUDNN_LIB()                                                      \
  do {                                                                           \
    std::string brrr_dnn_why_;                                                   \
    if (!::brrr::cuda::cudnn_available(&brrr_dnn_why_))                          \
      GTEST_SKIP() << "cuDNN could not be loaded: " << brrr_dnn_why_;            \
  } while (0)

TEST(CudaConvGeometry, MatchesCudnnOutputDims) {
  REQUIRE_CUDNN_LIB();
  expect_maps(conv_node({{"pads", V{1, 2, 1, 2}}, {"strides", V{2, 1}}}), {1, 3, 17, 19},
              {8, 3, 3, 3}, {1, 8, 9, 21});
  expect_maps(conv_node({{"pads", V{1, 1, 1, 1}}, {"group", int64_t(3)}}), {2, 12, 10, 11},
              {18, 4, 3, 3}, {2, 18, 10, 11});
  expect_maps(conv_node({{"pads", V{2, 2, 2, 2}}, {"group", int64_t(24)}, {"strides", V{2, 2}}}),
              {1, 24, 15, 16}, {24, 1, 5, 5}, {1, 24, 8, 8});
  expect_maps(conv_node({{"pads", V{2, 2, 2, 2}}, {"dilations", V{2, 2}}}), {1, 8, 20, 20},
              {16, 8, 3, 3}, {1, 16, 20, 20});
  // SAME_UPPER that lands symmetric; begin > end pads with the same output count
  expect_maps(conv_node({{"auto_pad", std::string("SAME_UPPER")}, {"strides", V{2, 2}}}),
              {1, 4, 9, 9}, {6, 4, 3, 3}, {1, 6, 5, 5});
  expect_maps(conv_node({{"pads", V{1, 1, 0, 0}}, {"strides", V{2, 2}}}), {1, 2, 5, 5},
              {4, 2, 2, 2}, {1, 4, 3, 3});
  // 1-D (lifted to 2-D) and 3-D
  expect_maps(conv_node({{"pads", V{1, 1}}, {"strides", V{2}}}), {2, 4, 20}, {6, 4, 3},
              {2, 6, 10});
  expect_maps(conv_node({{"pads", V{1, 1, 1, 1, 1, 1}}}), {1, 3, 6, 7, 8}, {4, 3, 3, 3, 3},
              {1, 4, 6, 7, 8});
}

// The geometry of Conv node n (its descriptor first, as the plan builds it).
std::string conv_geometry(const Node& n, const Shape& x, const Shape& w, const Shape& y,
                          cuda::ConvGeometry* geo) {
  return cuda::conv_geometry(plan::describe_conv(n, x, w), x, w, y, geo);
}

TEST(CudaConvGeometry, RefusesWhatCudnnCannotExpress) {
  cuda::ConvGeometry geo;
  // H: 13 + 0 + 2 pads, k 3, s 2 -> 7 outputs; padding both ends by 0 gives 6.
  EXPECT_NE(conv_geometry(conv_node({{"pads", V{0, 1, 2, 0}}, {"strides", V{2, 3}}}),
                                {1, 5, 13, 12}, {7, 5, 3, 2}, {1, 7, 7, 4}, &geo)
                .find("asymmetric pads"),
            std::string::npos);
  // SAME_UPPER with an odd total pad: begin 0, end 1.
  EXPECT_NE(conv_geometry(conv_node({{"auto_pad", std::string("SAME_UPPER")},
                                           {"strides", V{2, 2}}}),
                                {1, 4, 8, 8}, {6, 4, 3, 3}, {1, 6, 4, 4}, &geo)
                .find("asymmetric pads"),
            std::string::npos);
  EXPECT_NE(conv_geometry(conv_node({}), {1, 2, 3, 4, 5, 6}, {1, 2, 1, 1, 1, 1},
                                {1, 1, 3, 4, 5, 6}, &geo)
                .find("rank-6"),
            std::string::npos);
  EXPECT_NE(conv_geometry(conv_node({{"group", int64_t(3)}}), {1, 8, 4, 4}, {6, 2, 1, 1},
                                {1, 6, 4, 4}, &geo)
                .find("group"),
            std::string::npos);
}

}  // namespace
}  // namespace brrr
#else
TEST(CudaConv, NotBuilt) { GTEST_SKIP() << "no CUDA device: built without the CUDA toolkit"; }
#endif
