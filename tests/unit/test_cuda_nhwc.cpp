// Channels-last 16-bit conv nets on CUDA (passes/choose_device_layouts.cpp, BRRR_CUDA_NHWC): which
// values the plan keeps NHWC (no device needed), and on the device a ResNet-like block (Conv +
// bias + Relu, MaxPool or AveragePool (the channels-last pool kernel), 1x1 and 3x3 Convs with a
// residual sum, GlobalAveragePool, Gemm) with NHWC on and off against the reference executor.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include <unistd.h>

#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "passes/choose_device_layouts.hpp"
#include "passes/pipeline.hpp"
#include "plan/library_desc.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

#ifdef BRRR_HAVE_CUDA
#include "cuda_test_util.hpp"
#endif

namespace brrr {
namespace {

Tensor rnd(const Shape& s, DType t, float lo = -1.f, float hi = 1.f) {
  static std::mt19937 rng(97);
  return brrr_test::uniform_f32(s, rng, lo, hi).cast(t);
}

// x [B, 8, 16, 16] -> Conv 3x3 + bias + Relu -> MaxPool 3x3 s2 -> Conv 1x1 + Relu -> Conv 3x3
// -> + the pool's output -> Relu -> GlobalAveragePool -> Flatten -> Gemm: ResNet-50's shapes in
// small, in type t. `tap`: a Sigmoid also reads the pool's output (a generated kernel, NCHW only);
// `avg`: an AveragePool (count_include_pad 0) in the MaxPool's place.
Graph resnet_block(DType t, int64_t batch, bool tap = false, bool avg = false) {
  GraphBuilder b;
  auto conv = [&](int x, int64_t cin, int64_t cout, int64_t k) {
    std::map<std::string, AttrValue> at{{"pads", std::vector<int64_t>(4, k / 2)}};
    return b.node(
        "Conv",
        {x, b.constant("w" + std::to_string(b.count), rnd({cout, cin, k, k}, t, -0.3f, 0.3f)),
         b.constant("b" + std::to_string(b.count), rnd({cout}, t, -0.1f, 0.1f))},
        at);
  };
  int x = b.input("x", {batch, 8, 16, 16}, t);
  int c1 = b.node("Relu", {conv(x, 8, 16, 3)});
  int p = b.node(avg ? "AveragePool" : "MaxPool", {c1},
                 {{"kernel_shape", std::vector<int64_t>{3, 3}},
                  {"strides", std::vector<int64_t>{2, 2}},
                  {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  int c2 = b.node("Relu", {conv(p, 16, 16, 1)});
  int y = b.node("Relu", {b.node("Add", {conv(c2, 16, 16, 3), p})});
  int gap = b.node("Flatten", {b.node("GlobalAveragePool", {y})});
  b.output(b.node("Gemm", {gap, b.constant("fc", rnd({16, 10}, t, -0.3f, 0.3f)),
                           b.constant("fcb", rnd({10}, t, -0.1f, 0.1f))}));
  if (tap) b.output(b.node("Sigmoid", {p}));
  return b.g;
}

// The roles the CUDA executor gives these kernels (every 16-bit 2-D Conv with constant weights,
// every pool, a mean over H*W) from their descriptors.
std::vector<DeviceLayoutRole> roles_of(const Compiled& c) {
  std::vector<DeviceLayoutRole> roles(c.plan.kernels.size());
  for (size_t i = 0; i < roles.size(); ++i) {
    const plan::Kernel& k = c.plan.kernels[i];
    if (const auto* d = plan::desc_of<plan::ConvDesc>(k))
      roles[i] = {DeviceLayoutRole::Conv, d->x, d->epi.sum, d->out};
    else if (const auto* d = plan::desc_of<plan::PoolDesc>(k))
      roles[i] = {DeviceLayoutRole::Pool, d->x, -1, d->y};
    else if (const auto* d = plan::desc_of<plan::RowReduceDesc>(k))
      roles[i] = {DeviceLayoutRole::ChannelMean, d->x, -1, d->y};
  }
  return roles;
}

int count_nhwc(const std::vector<char>& v) {
  int n = 0;
  for (char c : v) n += c;
  return n;
}

TEST(DeviceLayouts, ConvChainIsChannelsLastBetweenInputAndMean) {
  Compiled c = compile(resnet_block(DType::bf16, 2), plan::Target::cuda(), {});
  std::vector<char> nhwc = choose_device_layouts(c.graph, c.plan, roles_of(c));
  // conv1, the pool, conv2, conv3 + sum: four values; the input, the mean and the logits stay NCHW.
  EXPECT_EQ(count_nhwc(nhwc), 4) << c.plan.print(c.graph);
  for (int v : c.graph.inputs) EXPECT_FALSE(nhwc[size_t(v)]);
  for (int v : c.graph.outputs) EXPECT_FALSE(nhwc[size_t(v)]);
  for (const plan::Kernel& k : c.plan.kernels)
    if (const auto* d = plan::desc_of<plan::RowReduceDesc>(k)) {
      EXPECT_TRUE(nhwc[size_t(d->x)]);
      EXPECT_FALSE(nhwc[size_t(d->y)]);
    }
}

TEST(DeviceLayouts, AnotherReaderKeepsNchwUpstream) {
  // The Sigmoid reads the pool's output: it stays NCHW, so the pool's input does (a pool's output
  // follows its input), and so does conv3's output, whose residual is the pool's output; conv2's
  // output then has no NHWC reader left.
  Compiled c = compile(resnet_block(DType::bf16, 1, true), plan::Target::cuda(), {});
  std::vector<char> nhwc = choose_device_layouts(c.graph, c.plan, roles_of(c));
  EXPECT_EQ(count_nhwc(nhwc), 0) << c.plan.print(c.graph);
  // float32 nets keep NCHW throughout (cuDNN's 16-bit Tensor Core path is what NHWC is for).
  Compiled f = compile(resnet_block(DType::f32, 1), plan::Target::cuda(), {});
  EXPECT_EQ(count_nhwc(choose_device_layouts(f.graph, f.plan, roles_of(f))), 0);
}

#ifdef BRRR_HAVE_CUDA
// No host kernel in the plan; the run gives the reference's results (16-bit tolerance), and a
// second run (the graph replayed, buffers recycled) the same bytes.
void expect_device_run_matches(Session& s, const std::map<std::string, Tensor>& in) {
  const std::string sum = s.plan_summary();
  EXPECT_EQ(sum.find("host"), std::string::npos) << sum;
  std::vector<Tensor> got = s.run(in);
  brrr_cuda_test::expect_rel_l2(got, run_reference(s.graph(), in), 2e-2, sum);
  brrr_test::expect_same_bytes(got, s.run(in));
}

TEST(CudaNhwc, ResNetBlockMatchesTheReference) {
  BRRR_REQUIRE_CUDNN("Conv");
  for (DType t : {DType::bf16, DType::f16})
    for (int64_t batch : {1, 3})
      for (bool avg : {false, true})
        for (const char* on : {"1", "0"}) {
          SCOPED_TRACE(fmt::format("{} batch {} {} BRRR_CUDA_NHWC={}", dtype_name(t), batch,
                                   avg ? "AveragePool" : "MaxPool", on));
          // cuDNN's path: 1 keeps every aligned conv there (2, the default, may time some as
          // GEMMs; ConvsAsIm2colGemmsMatchTheReference covers that), and no direct kernel for
          // the 8-channel input (RgbStemOnTheDirectKernelMatchesTheReference covers that).
          brrr_test::EnvVar e("BRRR_CUDA_NHWC", on), m("BRRR_CONV_GEMM", "1"),
              d("BRRR_CONV_DIRECT", "0");
          Graph g = resnet_block(t, batch, false, avg);
          std::map<std::string, Tensor> in{{"x", rnd({batch, 8, 16, 16}, t, -2.f, 2.f)}};
          SessionOptions o;
          o.backend = "cuda";
          Session s(g, o);
          const std::string sum = s.plan_summary();
          const bool nhwc = on[0] == '1';
          EXPECT_EQ(sum.find("NHWC") != std::string::npos, nhwc) << sum;
          if (nhwc) {
            // the 8-channel input needs no padding; every conv has a bias and cuDNN fuses it
            EXPECT_NE(sum.find("input transposed to NHWC first\n"), std::string::npos) << sum;
            EXPECT_NE(sum.find("fused in cuDNN"), std::string::npos) << sum;
          }
          expect_device_run_matches(s, in);
        }
}

// An RGB stem (3 channels, Conv 7x7 stride 2 + bias + Relu, MaxPool, Conv 1x1, mean) in type t,
// on an input of h x w pixels.
Graph rgb_stem(DType t, int64_t h, int64_t w) {
  GraphBuilder b;
  int x = b.input("x", {2, 3, h, w}, t);
  int c1 = b.node("Relu", {b.node("Conv",
                                  {x, b.constant("w1", rnd({16, 3, 7, 7}, t, -0.3f, 0.3f)),
                                   b.constant("b1", rnd({16}, t, -0.1f, 0.1f))},
                                  {{"pads", std::vector<int64_t>(4, 3)},
                                   {"strides", std::vector<int64_t>{2, 2}}})});
  int p = b.node("MaxPool", {c1},
                 {{"kernel_shape", std::vector<int64_t>{3, 3}},
                  {"strides", std::vector<int64_t>{2, 2}},
                  {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  int c2 = b.node("Conv", {p, b.constant("w2", rnd({16, 16, 1, 1}, t, -0.3f, 0.3f)),
                           b.constant("b2", rnd({16}, t, -0.1f, 0.1f))});
  b.output(b.node("Flatten", {b.node("GlobalAveragePool", {c2})}));
  return b.g;
}

// The stem: the transposed input's channels are zero-padded to 8 with zero weights
// (BRRR_CONV_PAD_C=1, the default) or kept at 3 (0); both give the reference's results. With
// BRRR_CONV_GEMM=3 the padded stem runs as im2col and one cuBLASLt GEMM. The direct kernel is
// off here (BRRR_CONV_DIRECT=0): RgbStemOnTheDirectKernelMatchesTheReference covers it.
TEST(CudaNhwc, RgbStemPaddedToEightChannelsMatchesTheReference) {
  BRRR_REQUIRE_CUDNN("Conv");
  for (DType t : {DType::bf16, DType::f16})
    for (const char* pad : {"1", "0"})
      for (const char* mode : {"1", "3"}) {
        SCOPED_TRACE(
            fmt::format("{} BRRR_CONV_PAD_C={} BRRR_CONV_GEMM={}", dtype_name(t), pad, mode));
        brrr_test::EnvVar e("BRRR_CONV_PAD_C", pad), m("BRRR_CONV_GEMM", mode),
            d("BRRR_CONV_DIRECT", "0");
        std::map<std::string, Tensor> in{{"x", rnd({2, 3, 20, 20}, t, -2.f, 2.f)}};
        SessionOptions o;
        o.backend = "cuda";
        Session s(rgb_stem(t, 20, 20), o);
        const std::string sum = s.plan_summary();
        EXPECT_EQ(sum.find("its 3 channels zero-padded to 8") != std::string::npos, pad[0] == '1')
            << sum;
        EXPECT_EQ(sum.find("conv as a cuBLASLt GEMM (im2col first; ") != std::string::npos,
                  pad[0] == '1' && mode[0] == '3')
            << sum;
        EXPECT_NE(sum.find("input transposed to NHWC first"), std::string::npos) << sum;
        expect_device_run_matches(s, in);
      }
}

// The stem on brrr's direct conv kernel (BRRR_CONV_DIRECT; the kernel alone:
// test_cuda_conv_direct.cpp): forced (2), or timed against cuDNN and im2col + GEMM (1), on an
// input whose output leaves partial tiles, gives the reference's results; the plan says which.
TEST(CudaNhwc, RgbStemOnTheDirectKernelMatchesTheReference) {
  BRRR_REQUIRE_CUDNN("Conv");
  for (DType t : {DType::bf16, DType::f16})
    for (const char* mode : {"2", "1"}) {
      SCOPED_TRACE(fmt::format("{} BRRR_CONV_DIRECT={}", dtype_name(t), mode));
      brrr_test::EnvVar e("BRRR_CONV_DIRECT", mode);
      std::map<std::string, Tensor> in{{"x", rnd({2, 3, 45, 40}, t, -2.f, 2.f)}};
      SessionOptions o;
      o.backend = "cuda";
      Session s(rgb_stem(t, 45, 40), o);
      const std::string sum = s.plan_summary();
      if (mode[0] == '2')
        EXPECT_NE(sum.find("conv on brrr's direct kernel (7x7 stride 2x2, 49 taps in pairs of 4 channels (3 real) in 14 K steps"),
                  std::string::npos)
            << sum;
      else
        EXPECT_NE(sum.find(" us on the direct kernel)"), std::string::npos) << sum;
      expect_device_run_matches(s, in);
    }
}

// BRRR_CONV_GEMM=3 runs every channels-last 16-bit conv of one group as im2col and a cuBLASLt GEMM
// (the 3x3 convs: the first on the transposed graph input, the last with a residual) or as a
// plain GEMM (the 1x1): the ResNet-like block gives the reference's results; 2 times each against
// cuDNN and says so.
TEST(CudaNhwc, ConvsAsIm2colGemmsMatchTheReference) {
  BRRR_REQUIRE_CUDNN("Conv");
  for (DType t : {DType::bf16, DType::f16})
    for (int64_t batch : {1, 3})
      for (const char* mode : {"3", "2"}) {
        SCOPED_TRACE(fmt::format("{} batch {} BRRR_CONV_GEMM={}", dtype_name(t), batch, mode));
        brrr_test::EnvVar e("BRRR_CONV_GEMM", mode);
        Graph g = resnet_block(t, batch);
        std::map<std::string, Tensor> in{{"x", rnd({batch, 8, 16, 16}, t, -2.f, 2.f)}};
        SessionOptions o;
        o.backend = "cuda";
        Session s(g, o);
        const std::string sum = s.plan_summary();
        if (mode[0] == '3') {
          EXPECT_NE(sum.find("conv as a cuBLASLt GEMM (im2col first; "), std::string::npos) << sum;
          EXPECT_NE(sum.find("conv as a cuBLASLt GEMM (1x1; "), std::string::npos) << sum;
          EXPECT_EQ(sum.find("cuDNN conv"), std::string::npos) << sum;
        } else {
          EXPECT_NE(sum.find(" us as a GEMM)"), std::string::npos) << sum;
        }
        expect_device_run_matches(s, in);
      }
}

// With BRRR_CONV_GEMM=2 the choice between cuDNN and the GEMM is timed once and kept in the
// kernel cache: a second session on the same cache folder takes every conv's path from it
// untimed ("cached choice"), the same paths as the first, and the same results.
TEST(CudaNhwc, ConvPathChoiceIsCachedOnDisk) {
  BRRR_REQUIRE_CUDNN("Conv");
  for (const char* direct : {"0", "1"}) {  // 1: the first conv (8 NCHW channels) may be direct
    SCOPED_TRACE(fmt::format("BRRR_CONV_DIRECT={}", direct));
    brrr_test::EnvVar e("BRRR_CONV_GEMM", "2"), d("BRRR_CONV_DIRECT", direct);
    const std::string dir = (std::filesystem::temp_directory_path() /
                             ("brrr_convpath_" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir);
    Graph g = resnet_block(DType::bf16, 1);
    std::map<std::string, Tensor> in{{"x", rnd({1, 8, 16, 16}, DType::bf16, -2.f, 2.f)}};
    SessionOptions o;
    o.backend = "cuda";
    o.cache_dir = dir;
    auto paths = [](const std::string& sum) {  // each conv's path, in plan order
      std::string p;
      for (size_t at = sum.find(" conv"); at != std::string::npos; at = sum.find(" conv", at + 1))
        if (sum.compare(at - 5, 10, "cuDNN conv") == 0) p += 'c';
        else if (sum.compare(at, 22, " conv as a cuBLASLt GE") == 0) p += 'g';
        else if (sum.compare(at, 29, " conv on brrr's direct kernel") == 0) p += 'd';
      return p;
    };
    std::string first;
    for (int session = 0; session < 2; ++session) {
      SCOPED_TRACE(session == 0 ? "first session" : "second session");
      Session s(g, o);
      const std::string sum = s.plan_summary();
      EXPECT_EQ(sum.find("(timed: ") != std::string::npos, session == 0) << sum;
      EXPECT_EQ(sum.find("(cached choice: ") != std::string::npos, session == 1) << sum;
      EXPECT_EQ(sum.find(" us on the direct kernel") != std::string::npos, direct[0] == '1') << sum;
      if (session == 0) first = paths(sum);
      else EXPECT_EQ(paths(sum), first) << sum;
      EXPECT_FALSE(first.empty()) << sum;
      expect_device_run_matches(s, in);
    }
    std::filesystem::remove_all(dir);
  }
}

// ShuffleNetV2's channel counts (58, 116: no multiple of 8) in a 16-bit chain, channels-last or
// NCHW: 1x1 convs with bias and ReLU, without an activation, and with a residual, around a
// depthwise 3x3; with BRRR_CONV_GEMM=1 (the default) the 1x1 convs run as cuBLASLt GEMMs, with 0
// on cuDNN; all give the reference's results at batch 1 and 3.
TEST(CudaNhwc, UnalignedPointwiseConvsAsGemmsMatchTheReference) {
  BRRR_REQUIRE_CUDNN("Conv");
  for (DType t : {DType::bf16, DType::f16})
    for (int64_t batch : {1, 3})
      for (const char* on : {"1", "0"})
        for (const char* layout : {"1", "0"}) {
          SCOPED_TRACE(fmt::format("{} batch {} BRRR_CONV_GEMM={} BRRR_CUDA_NHWC={}", dtype_name(t),
                                   batch, on, layout));
          brrr_test::EnvVar e("BRRR_CONV_GEMM", on), l("BRRR_CUDA_NHWC", layout);
          GraphBuilder b;
          auto conv = [&](int x, int64_t cin, int64_t cout, int64_t k, int64_t group, bool bias) {
            std::vector<int> ins{x, b.constant("w" + std::to_string(b.count),
                                               rnd({cout, cin / group, k, k}, t, -0.3f, 0.3f))};
            if (bias)
              ins.push_back(b.constant("b" + std::to_string(b.count), rnd({cout}, t, -0.1f, 0.1f)));
            return b.node("Conv", ins,
                          {{"pads", std::vector<int64_t>(4, k / 2)}, {"group", group}});
          };
          int x = b.input("x", {batch, 24, 14, 14}, t);
          int c1 = b.node("Relu", {conv(x, 24, 58, 3, 1, true)});        // cuDNN: 24 -> 58, 3x3
          int c2 = b.node("Relu", {conv(c1, 58, 58, 1, 1, true)});       // GEMM + bias + ReLU
          int d = conv(c2, 58, 58, 3, 58, true);                         // depthwise, cuDNN
          int c3 = conv(d, 58, 116, 1, 1, false);                        // GEMM, no epilogue
          int c4 = b.node("Add", {conv(c3, 116, 116, 1, 1, true), c3});  // GEMM + residual kernel
          b.output(b.node("Flatten", {b.node("GlobalAveragePool", {c4})}));
          std::map<std::string, Tensor> in{{"x", rnd({batch, 24, 14, 14}, t, -2.f, 2.f)}};
          SessionOptions o;
          o.backend = "cuda";
          Session s(b.g, o);
          const std::string sum = s.plan_summary();
          const size_t gemms = [&] {
            size_t n = 0;
            for (size_t p = sum.find("conv as a cuBLASLt GEMM"); p != std::string::npos;
                 p = sum.find("conv as a cuBLASLt GEMM", p + 1))
              ++n;
            return n;
          }();
          EXPECT_EQ(gemms, on[0] == '1' ? 3u : 0u) << sum;
          if (on[0] == '1') {
            // channels-last: one GEMM over every pixel; NCHW: one per image
            EXPECT_NE(
                sum.find(layout[0] == '1'
                             ? fmt::format("(1x1, channels not all multiples of 8; {} x 58 x "
                                           "58, ",
                                           batch * 196)
                             : std::string("(1x1, channels not all multiples of 8; 58 x 196 x "
                                           "58, ")),
                std::string::npos)
                << sum;
            EXPECT_NE(sum.find(layout[0] == '1' ? ", NHWC)" : ", NCHW, one per image)"),
                      std::string::npos)
                << sum;
            EXPECT_NE(sum.find("+ bias/sum/activation kernel"), std::string::npos) << sum;
          }
          expect_device_run_matches(s, in);
        }
}
#endif

}  // namespace
}  // namespace brrr
