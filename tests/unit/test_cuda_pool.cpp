// The CUDA Session's other library kernels against the reference executor on random inputs:
// MaxPool / AveragePool on cuDNN (pads, strides, ceil_mode, count_include_pad, 1-D, 3-D), Concat
// as 2-D copies, GlobalAveragePool / trailing ReduceMean / ReduceSum and the squeeze-excite
// channel scale as helper kernels, brrr's pool kernel (with the reason) for pools cuDNN cannot
// express, and a small conv net with none of them on the host, captured as one CUDA graph.
// Device tests skip without a GPU (pool tests also without a loadable libcudnn.so.9); the helper
// kernel source and the pool geometry are checked without a device.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <random>
#include <set>

#include "brrr/onnx.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "expect_outputs.hpp"
#include "random_tensor.hpp"
#include "brrr/session.hpp"
#include "passes/pipeline.hpp"
#include "plan/kernel_ir.hpp"
#include "runtime/graph_builder.hpp"

#ifdef BRRR_HAVE_CUDA
#include "backend/embedded_headers.hpp"
#include "backend/cuda/codegen_cuda.hpp"
#include "backend/cuda/cudnn_pool.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "cuda_test_util.hpp"

#define REQUIRE_CUDNN_POOL() BRRR_REQUIRE_CUDNN("pools")

namespace brrr {
namespace {

using V = std::vector<int64_t>;

Tensor rnd(const Shape& s, float lo = -1.f, float hi = 1.f) {
  static std::mt19937 rng(9876);
  return brrr_test::uniform_f32(s, rng, lo, hi);
}

SessionOptions cuda_opts(int graphs = 1) {
  SessionOptions o;
  o.backend = "cuda";
  o.precision = "fp32";
  o.graphs = graphs;
  o.fusion = 1;
  return o;
}

// CUDA vs the reference executor, every element within 1e-4 + 1e-4*|ref| (float32 inputs; other
// dtypes compare exactly through at_double), and a second run gives the same bits.
Session check(const Graph& g, SessionOptions o = cuda_opts()) {
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, -2.f, 2.f);
  Session s(g, o);
  std::vector<Tensor> got = s.run(in);
  brrr_test::expect_outputs_close(got, run_reference(s.graph(), in), 1e-4, 1e-4, s.plan_summary());
  brrr_test::expect_same_bytes(got, s.run(in));
  return s;
}

// Nothing on the host, the plan captured as a CUDA graph, and `what` in the summary.
void expect_on_gpu(const Session& s, const std::string& what) {
  const std::string sum = s.plan_summary();
  EXPECT_EQ(sum.find("host fallback"), std::string::npos) << sum;
  EXPECT_NE(sum.find("CUDA graph on"), std::string::npos) << sum;
  EXPECT_NE(sum.find(what), std::string::npos) << sum;
}

void expect_on_host(const Session& s, const std::string& why) {
  const std::string sum = s.plan_summary();
  EXPECT_NE(sum.find("host fallback"), std::string::npos) << sum;
  EXPECT_NE(sum.find(why), std::string::npos) << sum;
}

// One pool node on x; returns its checked session.
Session pool(const std::string& op, const Shape& x, std::map<std::string, AttrValue> at) {
  SCOPED_TRACE(fmt::format("{} on {}", op, shape_str(x)));
  GraphBuilder b;
  b.output(b.node(op, {b.input("x", x)}, std::move(at)));
  return check(b.g);
}

TEST(CudaPool, MaxPool2D) {
  REQUIRE_CUDNN_POOL();
  expect_on_gpu(pool("MaxPool", {2, 5, 17, 18},
                     {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}}),
                "cuDNN pool max 3x3 stride 2x2 pad 1x1");
  expect_on_gpu(pool("MaxPool", {1, 3, 9, 12}, {{"kernel_shape", V{2, 3}}, {"strides", V{2, 3}}}),
                "cuDNN pool max");
  // squeezenet's pool: ceil_mode where it gives the floor count (111 -> 55)
  expect_on_gpu(pool("MaxPool", {1, 4, 111, 111},
                     {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t(1)}}),
                "cuDNN pool max");
  // begin > end pads with the same output count as padding both ends by the begin pad
  expect_on_gpu(pool("MaxPool", {1, 2, 5, 5},
                     {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 0, 0}}}),
                "cuDNN pool max");
}

TEST(CudaPool, AveragePool2D) {
  REQUIRE_CUDNN_POOL();
  for (int64_t cip : {0, 1}) {
    SCOPED_TRACE(cip);
    expect_on_gpu(pool("AveragePool", {2, 6, 15, 13},
                       {{"kernel_shape", V{3, 3}},
                        {"strides", V{2, 2}},
                        {"pads", V{1, 1, 1, 1}},
                        {"count_include_pad", cip}}),
                  cip ? "average (padding counted)" : "cuDNN pool average 3x3");
    expect_on_gpu(pool("AveragePool", {1, 3, 8, 8},
                       {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}, {"count_include_pad", cip}}),
                  "cuDNN pool average");
  }
  // begin > end pads with ceil_mode: exact when padding is not counted
  expect_on_gpu(pool("AveragePool", {1, 2, 4, 4},
                     {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 0, 0}},
                      {"ceil_mode", int64_t(1)}}),
                "cuDNN pool average 2x2");
  expect_on_gpu(pool("MaxPool", {1, 2, 4, 4},
                     {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 0, 0}},
                      {"ceil_mode", int64_t(1)}}),
                "cuDNN pool max 2x2");
  expect_on_gpu(pool("AveragePool", {1, 2, 4, 4},
                     {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 0, 0}},
                      {"ceil_mode", int64_t(1)}, {"count_include_pad", int64_t(1)}}),
                "pool kernel, not cuDNN: count_include_pad");
  // ceil_mode that keeps the floor count
  expect_on_gpu(pool("AveragePool", {1, 4, 13, 13},
                     {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t(1)},
                      {"count_include_pad", int64_t(1)}}),
                "cuDNN pool average");
}

TEST(CudaPool, OneDAndThreeD) {
  REQUIRE_CUDNN_POOL();
  expect_on_gpu(pool("MaxPool", {2, 3, 20},
                     {{"kernel_shape", V{3}}, {"strides", V{2}}, {"pads", V{1, 1}}}),
                "cuDNN pool max 1x3");
  expect_on_gpu(pool("MaxPool", {1, 3, 6, 7, 8},
                     {{"kernel_shape", V{2, 3, 3}}, {"strides", V{2, 2, 2}},
                      {"pads", V{0, 1, 1, 0, 1, 1}}}),
                "cuDNN pool max 2x3x3");
  expect_on_gpu(pool("AveragePool", {2, 2, 5, 6, 7},
                     {{"kernel_shape", V{3, 3, 3}}, {"pads", V{1, 1, 1, 1, 1, 1}},
                      {"count_include_pad", int64_t(0)}}),
                "cuDNN pool average 3x3x3");
}

// What cuDNN's symmetric padding cannot give runs on brrr's pool kernel, matching the reference,
// and the plan says why cuDNN was not used.
TEST(CudaPool, PoolKernelTakesWhatCudnnCannot) {
  BRRR_REQUIRE_CUDA_DEVICE();
  const std::string k = "pool kernel, not cuDNN: ";
  // ceil_mode adding a window: 10 -> ceil((10-3)/2)+1 = 5, floor gives 4
  for (const char* op : {"MaxPool", "AveragePool"})
    for (int64_t cip : {0, 1}) {
      SCOPED_TRACE(fmt::format("{} count_include_pad {}", op, cip));
      expect_on_gpu(pool(op, {2, 3, 10, 11},
                         {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t(1)},
                          {"count_include_pad", cip}}),
                    k + "ceil_mode adds a window");
    }
  expect_on_gpu(pool("MaxPool", {1, 2, 9, 9}, {{"kernel_shape", V{2, 2}}, {"dilations", V{2, 2}}}),
                k + "dilations");
  expect_on_gpu(pool("MaxPool", {1, 2, 8, 8},
                     {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{0, 0, 1, 1}}}),
                k + "asymmetric pads");
  expect_on_gpu(pool("AveragePool", {1, 2, 8, 9},
                     {{"kernel_shape", V{3, 2}}, {"strides", V{2, 3}}, {"pads", V{0, 1, 2, 1}},
                      {"count_include_pad", int64_t(1)}}),
                k + "asymmetric pads");
  // 1-D and 3-D with dilations and ceil_mode
  expect_on_gpu(pool("MaxPool", {2, 3, 21},
                     {{"kernel_shape", V{3}}, {"strides", V{2}}, {"dilations", V{2}}, {"ceil_mode", int64_t(1)}}),
                k);
  expect_on_gpu(pool("AveragePool", {1, 2, 5, 6, 7},
                     {{"kernel_shape", V{2, 3, 2}}, {"strides", V{2, 2, 2}}, {"ceil_mode", int64_t(1)},
                      {"pads", V{1, 0, 1, 0, 1, 0}}}),
                k);
}

// 16-bit pools (cuDNN's path here is float32 only): max is exact; an average rounds once from a
// float32 sum, the reference from a double one, so they may differ in the last bf16 / f16 bit.
TEST(CudaPool, SixteenBitPoolsOnThePoolKernel) {
  BRRR_REQUIRE_CUDA_DEVICE();
  for (DType t : {DType::bf16, DType::f16}) {
    for (const char* op : {"MaxPool", "AveragePool"}) {
      SCOPED_TRACE(fmt::format("{} on {}", op, dtype_name(t)));
      GraphBuilder b;
      b.output(b.node(op, {b.input("x", {2, 4, 11, 12}, t)},
                      {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}}));
      std::map<std::string, Tensor> in{{"x", rnd({2, 4, 11, 12}, -2.f, 2.f).cast(t)}};
      Session s(b.g, cuda_opts());
      std::vector<Tensor> got = s.run(in);
      const double tol = std::string(op) == "MaxPool" ? 0.0 : 8e-3;
      brrr_test::expect_outputs_close(got, run_reference(s.graph(), in), tol, tol, s.plan_summary());
      expect_on_gpu(s, "pool kernel, not cuDNN");
    }
  }
}

// A used Indices output has no device path: the host runs the pool and the plan says why.
TEST(CudaPool, MaxPoolIndicesStayOnTheHost) {
  BRRR_REQUIRE_CUDA_DEVICE();
  GraphBuilder b;
  int y = b.node("MaxPool", {b.input("x", {1, 2, 10, 10})},
                 {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t(1)}}, 2);
  b.output(y);
  b.output(b.g.nodes.back().outputs[1]);
  expect_on_host(check(b.g), "host fallback");  // both outputs checked against the reference
}

TEST(CudaConcat, AxisOneAndLastAxis) {
  BRRR_REQUIRE_CUDA_DEVICE();
  {
    GraphBuilder b;  // channels, one input computed in the arena, one a constant
    int a = b.node("Tanh", {b.input("a", {2, 3, 4, 5})});
    int c = b.input("c", {2, 6, 4, 5});
    b.output(b.node("Concat", {a, b.constant("k", rnd({2, 1, 4, 5})), c}, {{"axis", int64_t(1)}}));
    expect_on_gpu(check(b.g), "concat: 3 2-D copies (2 rows of");
  }
  {
    GraphBuilder b;  // last axis, three inputs of different widths
    int a = b.input("a", {3, 4, 5});
    int c = b.input("c", {3, 4, 1});
    int d = b.input("d", {3, 4, 7});
    b.output(b.node("Concat", {a, c, d}, {{"axis", int64_t(-1)}}));
    expect_on_gpu(check(b.g), "concat: 3 2-D copies (12 rows of 52 B)");
  }
  {
    GraphBuilder b;  // axis 0: plain copies; int64 data
    int a = b.input("a", {2, 3}, DType::i64);
    int c = b.input("c", {1, 3}, DType::i64);
    b.output(b.node("Concat", {a, c}, {{"axis", int64_t(0)}}));
    Session s(b.g, cuda_opts());
    std::map<std::string, Tensor> in{
        {"a", Tensor::from_vector<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6})},
        {"c", Tensor::from_vector<int64_t>({1, 3}, {-7, 8, -9})}};
    Tensor y = s.run(in)[0];
    ASSERT_EQ(y.shape(), (Shape{3, 3}));
    std::vector<int64_t> want{1, 2, 3, 4, 5, 6, -7, 8, -9};
    for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(y.data<int64_t>()[i], want[size_t(i)]);
    expect_on_gpu(s, "concat: 2 device copies");
  }
}

TEST(CudaRowMean, GlobalAveragePoolAndTrailingReduce) {
  BRRR_REQUIRE_CUDA_DEVICE();
  {
    GraphBuilder b;
    b.output(b.node("GlobalAveragePool", {b.input("x", {2, 7, 13, 11})}));
    expect_on_gpu(check(b.g), "row mean kernel: 14 rows of 143");
  }
  {
    GraphBuilder b;  // ReduceMean over H, W (opset 18: axes as an input), keepdims 1 and 0
    int x = b.input("x", {3, 5, 9, 10});
    int axes = b.constant("axes", Tensor::from_vector<int64_t>({2}, {2, 3}));
    b.output(b.node("ReduceMean", {x, axes}, {{"keepdims", int64_t(1)}}));
    int axes2 = b.constant("axes2", Tensor::from_vector<int64_t>({2}, {-1, -2}));
    b.output(b.node("ReduceMean", {x, axes2}, {{"keepdims", int64_t(0)}}));
    expect_on_gpu(check(b.g), "row mean kernel: 15 rows of 90");
  }
  {
    GraphBuilder b;  // ReduceSum over the last three axes
    int x = b.input("x", {4, 3, 5, 6});
    int axes = b.constant("axes", Tensor::from_vector<int64_t>({3}, {1, 2, 3}));
    b.output(b.node("ReduceSum", {x, axes}, {{"keepdims", int64_t(1)}}));
    expect_on_gpu(check(b.g), "row sum kernel: 4 rows of 90");
  }
}

// Conv -> Relu -> ReduceMean -> Sigmoid -> Mul(x, s) -> Conv: squeeze-excite's channel scale.
Graph squeeze_excite(const Shape& x) {
  GraphBuilder b;
  int in = b.input("x", x);
  int64_t c = 8;
  int a = b.node("Relu", {b.node("Conv", {in, b.constant("w1", rnd({c, x[1], 3, 3}))},
                                 {{"pads", V{1, 1, 1, 1}}})});
  int axes = b.constant("axes", Tensor::from_vector<int64_t>({2}, {2, 3}));
  int m = b.node("ReduceMean", {a, axes}, {{"keepdims", int64_t(1)}});
  int s = b.node("Sigmoid", {b.node("Conv", {m, b.constant("w2", rnd({c, c, 1, 1}))})});
  int y = b.node("Mul", {a, s});
  b.output(b.node("Conv", {y, b.constant("w3", rnd({4, c, 1, 1}))}));
  return b.g;
}

TEST(CudaChannelScale, SqueezeExcite) {
  REQUIRE_CUDNN_POOL();
  Session s = check(squeeze_excite({2, 3, 9, 7}));
  expect_on_gpu(s, "channel scale kernel: 16 rows of 63");
  expect_on_gpu(s, "row mean kernel");
}

// A squeezenet-like net: Conv+Relu, ceil-mode MaxPool, a fire module (two expand Convs and a
// channel Concat), AveragePool, GlobalAveragePool, Flatten. Nothing on the host, one CUDA graph,
// and graph replay gives the bits of eager launches.
TEST(CudaPool, ConvNetRunsAsOneGraph) {
  REQUIRE_CUDNN_POOL();
  GraphBuilder b;
  int x = b.input("x", {2, 3, 23, 23});
  int a = b.node("Relu", {b.node("Conv", {x, b.constant("w1", rnd({8, 3, 3, 3})),
                                          b.constant("b1", rnd({8}))},
                                 {{"strides", V{2, 2}}})});  // 11x11
  int p = b.node("MaxPool", {a},
                 {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t(1)}});
  int sq = b.node("Relu", {b.node("Conv", {p, b.constant("ws", rnd({4, 8, 1, 1}))})});
  int e1 = b.node("Relu", {b.node("Conv", {sq, b.constant("we1", rnd({6, 4, 1, 1}))})});
  int e3 = b.node("Relu", {b.node("Conv", {sq, b.constant("we3", rnd({6, 4, 3, 3}))},
                                  {{"pads", V{1, 1, 1, 1}}})});
  int cat = b.node("Concat", {e1, e3}, {{"axis", int64_t(1)}});
  int ap = b.node("AveragePool", {cat},
                  {{"kernel_shape", V{2, 2}}, {"pads", V{1, 1, 1, 1}}, {"count_include_pad", int64_t(0)}});
  int gap = b.node("GlobalAveragePool", {ap});
  b.output(b.node("Flatten", {gap}));
  b.output(cat);
  Session on = check(b.g, cuda_opts(1));
  for (const char* what : {"cuDNN conv", "cuDNN pool max", "cuDNN pool average", "concat:", "row mean"})
    expect_on_gpu(on, what);
  Session off(b.g, cuda_opts(0));
  EXPECT_NE(off.plan_summary().find("CUDA graph off"), std::string::npos) << off.plan_summary();
  std::map<std::string, Tensor> in{{"x", rnd({2, 3, 23, 23})}};
  for (int r = 0; r < 2; ++r) {
    std::vector<Tensor> e = on.run(in), f = off.run(in);
    ASSERT_EQ(e.size(), f.size());
    for (size_t k = 0; k < e.size(); ++k) {
      ASSERT_EQ(e[k].nbytes(), f[k].nbytes());
      EXPECT_EQ(std::memcmp(e[k].raw(), f[k].raw(), e[k].nbytes()), 0) << "output " << k;
    }
  }
  RunProfile prof = on.profile(in, 3);
  ASSERT_EQ(int(prof.kernels.size()), on.num_kernels());
  for (const auto& k : prof.kernels) EXPECT_GT(k.time_ms, 0.0) << k.name;
}

std::string example_model(const std::string& name) {
  return std::string(BRRR_TEST_DATA) + "/../../examples/" + name + "/model.onnx";
}
bool file_exists(const std::string& p) { return std::ifstream(p).good(); }

// The two example conv nets run with no host kernel, as one CUDA graph, and match the reference.
TEST(CudaPool, ExampleModelsRunWithoutHostKernels) {
  REQUIRE_CUDNN_POOL();
  for (const char* name : {"squeezenet1_1", "mobilenet_v3_small"}) {
    SCOPED_TRACE(name);
    const std::string path = example_model(name);
    if (!file_exists(path)) GTEST_SKIP() << path << " not found";
    Graph g = load_onnx(path);
    Session s(g, cuda_opts());
    const std::string sum = s.plan_summary();
    EXPECT_EQ(sum.find("host fallback"), std::string::npos) << sum;
    EXPECT_NE(sum.find("CUDA graph on"), std::string::npos) << sum;
    std::map<std::string, Tensor> in;
    for (int id : s.graph().inputs) {
      Shape sh = s.graph().value(id).shape;
      in[s.graph().value(id).name] = rnd(sh, 0.f, 1.f);
    }
    std::vector<Tensor> got = s.run(in), want = run_reference(s.graph(), in);
    ASSERT_EQ(got.size(), want.size());
    brrr_cuda_test::expect_rel_l2(got, want, 1e-4, sum);
  }
}

// ---- No device needed ----

// The example nets' plans hold only library kernels the CUDA session has a device path for, and
// their pools map onto cuDNN (the rest of the decision needs a device: the GPU tests above).
TEST(CudaPoolGeometry, ExampleModelsMapToDevicePaths) {
  for (const char* name : {"squeezenet1_1", "mobilenet_v3_small"}) {
    SCOPED_TRACE(name);
    const std::string path = example_model(name);
    if (!file_exists(path)) GTEST_SKIP() << path << " not found";
    // The plan the CUDA session builds: the compile pipeline for the CUDA target.
    Compiled c = compile(load_onnx(path), plan::Target::cuda(), {});
    const Graph& g = c.graph;
    const plan::Plan& p = c.plan;
    int pools = 0;
    for (const plan::Kernel& k : p.kernels) {
      EXPECT_NE(k.kind, plan::KernelKind::Reference) << k.name;
      if (k.kind != plan::KernelKind::Library) continue;
      const Node& n = g.nodes[size_t(k.nodes[0])];
      static const std::set<std::string> kOps = {"Conv", "Gemm", "MatMul", "MaxPool",
                                                 "AveragePool", "Concat", "GlobalAveragePool",
                                                 "ReduceMean", "ReduceSum", "Mul"};
      EXPECT_TRUE(kOps.count(n.op)) << n.op;
      if (n.op == "MaxPool" || n.op == "AveragePool") {
        cuda::PoolGeometry geo;
        EXPECT_EQ(cuda::pool_geometry(*plan::desc_of<plan::PoolDesc>(k), g, &geo), "") << n.name;
        ++pools;
      }
    }
    if (std::string(name) == "squeezenet1_1") EXPECT_EQ(pools, 3);
  }
}

// The helper kernels (row mean, channel scale) are in every module and compile with NVRTC.
TEST(CudaPoolCodegen, HelperKernelsCompileWithNvrtc) {
  GraphBuilder b;
  b.output(b.node("Relu", {b.input("x", {4, 8})}));
  infer_shapes(b.g, {});
  plan::Plan p = plan::build_plan(b.g, {});
  cuda::CudaSource src = cuda::generate_cuda(b.g, p, {});
  // The helper kernels live in an embedded device header the module includes.
  EXPECT_NE(src.text.find("backend/cuda/device/kernels.cuh"), std::string::npos);
  const std::string helpers = embedded_header("backend/cuda/device/kernels.cuh");
  for (const char* k : {"brrr_row_mean", "brrr_channel_scale", "brrr_conv_epilogue", "brrr_pool_f32", "brrr_pool_bf16", "brrr_pool_f16"})
    EXPECT_NE(helpers.find(k), std::string::npos) << k;
  cuda::NvrtcCompiler nv("sm_90", "");
  EXPECT_NO_THROW(nv.compile(src.text, "pool_helpers")) << src.text;
}

// A graph holding one pool node with input x (float32), its output shape inferred.
Graph one_pool(const std::string& op, const Shape& x, std::map<std::string, AttrValue> at) {
  GraphBuilder b;
  b.output(b.node(op, {b.input("x", x)}, std::move(at)));
  infer_shapes(b.g, {});
  return b.g;
}

std::string geometry_why(const Graph& g, cuda::PoolGeometry* geo) {
  return cuda::pool_geometry(plan::describe_pool(g, g.nodes[0]), g, geo);
}

TEST(CudaPoolGeometry, MatchesCudnnOutputDims) {
  std::string why;
  if (!cuda::cudnn_available(&why)) GTEST_SKIP() << "cuDNN could not be loaded: " << why;
  struct Case {
    std::string op;
    Shape x;
    std::map<std::string, AttrValue> at;
  };
  std::vector<Case> cases = {
      {"MaxPool", {2, 5, 17, 18}, {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}}},
      {"MaxPool", {1, 4, 111, 111}, {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t(1)}}},
      {"MaxPool", {1, 2, 5, 5}, {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 0, 0}}}},
      {"MaxPool", {2, 3, 20}, {{"kernel_shape", V{3}}, {"strides", V{2}}, {"pads", V{1, 1}}}},
      {"AveragePool", {2, 2, 5, 6, 7}, {{"kernel_shape", V{3, 3, 3}}, {"pads", V{1, 1, 1, 1, 1, 1}}}},
      {"AveragePool", {1, 4, 13, 13}, {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t(1)}, {"count_include_pad", int64_t(1)}}},
  };
  for (const Case& c : cases) {
    Graph g = one_pool(c.op, c.x, c.at);
    SCOPED_TRACE(fmt::format("{} {} -> {}", c.op, shape_str(c.x), shape_str(g.value(g.outputs[0]).shape)));
    cuda::PoolGeometry geo;
    ASSERT_EQ(geometry_why(g, &geo), "");
    std::vector<int> want(g.value(g.outputs[0]).shape.begin(), g.value(g.outputs[0]).shape.end());
    if (want.size() == 3) want.insert(want.begin() + 2, 1);
    EXPECT_EQ(geo.y, want);
    EXPECT_EQ(cuda::cudnn_pool_output_dims(geo), want);
  }
}

TEST(CudaPoolGeometry, RefusesWhatCudnnCannotExpress) {
  cuda::PoolGeometry geo;
  auto why = [&](const std::string& op, const Shape& x, std::map<std::string, AttrValue> at) {
    return geometry_why(one_pool(op, x, std::move(at)), &geo);
  };
  EXPECT_NE(why("MaxPool", {1, 2, 10, 10}, {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t(1)}})
                .find("ceil_mode adds a window"), std::string::npos);
  EXPECT_NE(why("MaxPool", {1, 2, 9, 9}, {{"kernel_shape", V{2, 2}}, {"dilations", V{2, 2}}}).find("dilations"),
            std::string::npos);
  EXPECT_NE(why("MaxPool", {1, 2, 8, 8}, {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{0, 0, 1, 1}}})
                .find("asymmetric pads"), std::string::npos);
  // Begin 1 / end 0 pads with ceil_mode on 4: three windows either way, but the last one ends
  // past the graph's end padding, where a counted-padding average would count cuDNN's pad.
  std::map<std::string, AttrValue> asym{{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}},
                                        {"pads", V{1, 1, 0, 0}}, {"ceil_mode", int64_t(1)}};
  EXPECT_EQ(why("MaxPool", {1, 2, 4, 4}, asym), "");
  EXPECT_EQ(why("AveragePool", {1, 2, 4, 4}, asym), "");
  asym["count_include_pad"] = int64_t(1);
  EXPECT_NE(why("AveragePool", {1, 2, 4, 4}, asym).find("count_include_pad"), std::string::npos);
  EXPECT_NE(why("MaxPool", {1, 2, 3, 4, 5, 6}, {{"kernel_shape", V{1, 1, 1, 1}}}).find("cuDNN path"),
            std::string::npos);
  {
    GraphBuilder b;  // Indices used
    int x = b.input("x", {1, 2, 6, 6});
    b.node("MaxPool", {x}, {{"kernel_shape", V{2, 2}}}, 2);
    b.output(b.g.nodes[0].outputs[0]);
    b.output(b.g.nodes[0].outputs[1]);
    infer_shapes(b.g, {});
    EXPECT_NE(geometry_why(b.g, &geo).find("Indices"), std::string::npos);
  }
  {
    GraphBuilder b;  // not float32
    b.output(b.node("MaxPool", {b.input("x", {1, 2, 6, 6}, DType::f16)}, {{"kernel_shape", V{2, 2}}}));
    infer_shapes(b.g, {});
    EXPECT_NE(geometry_why(b.g, &geo).find("float32"), std::string::npos);
  }
}

}  // namespace
}  // namespace brrr
#else
TEST(CudaPool, NotBuilt) { GTEST_SKIP() << "no CUDA device: built without the CUDA toolkit"; }
#endif
