// NaN and infinity through max-like ops, softmax and clamps: the reference executor, the compiled
// CPU plan (fused and one kernel per op, oneDNN where it applies) and the expected values agree.
// Semantics: NaN propagates through every max/min (ReduceMax/Min, MaxPool, GlobalMaxPool, Max,
// Min: IEEE 754-2019 maximum, numpy, PyTorch, ONNX's reference for Reduce*/GlobalMaxPool);
// Softmax/LogSoftmax are exp(x - max) / sum as ONNX Runtime and ONNX's reference compute them, so
// a row with +inf, a NaN or only -inf is all NaN. ArgMax/ArgMin pick NaN (numpy).
#include <fmt/format.h>

#include "core/cpu_features.hpp"
#include "env_var.hpp"
#include "hostile_util.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr::hostile {
namespace {

constexpr float kNaN = NAN, kInf = INFINITY;

struct Case {
  std::string op;
  std::map<std::string, AttrValue> attrs;
  Shape in_shape;
  std::vector<float> in;
  Shape out_shape;
  std::vector<double> want;
  DType out_dtype = DType::f32;
  std::vector<Tensor> extra = {};  // constant inputs after x
};

void check(const Case& c) {
  GraphBuilder b;
  std::vector<int> ins{b.input("x", c.in_shape)};
  for (size_t i = 0; i < c.extra.size(); ++i)
    ins.push_back(b.constant("k" + std::to_string(i), c.extra[i]));
  b.output(b.node(c.op, ins, c.attrs));
  std::map<std::string, Tensor> in{{"x", Tensor::from_vector<float>(c.in_shape, c.in)}};
  Tensor want = Tensor::from_vector<double>(c.out_shape, c.want).cast(c.out_dtype);
  std::string what = c.op + shape_str(c.in_shape);
  Graph g = compile(b.g, plan::Target::reference(), {}).graph;
  expect_same(run_reference(g, in)[0], want, what + " reference", 2);
  for (int fusion : {1, 0}) {
    SessionOptions so = session_options();
    so.fusion = fusion;
    Session s(b.g, so);
    expect_same(s.run(in)[0], want,
                fmt::format("{} compiled fusion={}\n{}", what, fusion, s.plan_summary()), 2);
  }
}

const std::vector<float> kRows = {1, kNaN, 3,    -1,   -kInf, -kInf, -kInf, -kInf,
                                  1, 2,    kNaN, kInf, 5,     2,     -kInf, 4};

TEST(NanSemantics, ReduceMaxMinPropagateNaN) {
  Shape s{4, 4};
  using V = std::vector<int64_t>;
  check({"ReduceMax",
         {{"axes", V{-1}}, {"keepdims", int64_t(0)}},
         s,
         kRows,
         {4},
         {kNaN, -kInf, kNaN, 5}});
  check({"ReduceMin",
         {{"axes", V{-1}}, {"keepdims", int64_t(0)}},
         s,
         kRows,
         {4},
         {kNaN, -kInf, kNaN, -kInf}});
  check({"ReduceMax",
         {{"axes", V{0}}, {"keepdims", int64_t(0)}},
         s,
         kRows,
         {4},
         {5, kNaN, kNaN, kInf}});
  check({"ReduceMax", {{"keepdims", int64_t(0)}}, {4}, {1, kNaN, 3, -1}, {}, {kNaN}});
  check({"ReduceMax", {{"keepdims", int64_t(0)}}, {4}, {1, 3, -1, kNaN}, {}, {kNaN}});
}

TEST(NanSemantics, ArgMaxArgMinPickNaN) {
  Shape s{4, 4};
  check({"ArgMax",
         {{"axis", int64_t(-1)}, {"keepdims", int64_t(0)}},
         s,
         kRows,
         {4},
         {1, 0, 2, 0},
         DType::i64});
  check({"ArgMin",
         {{"axis", int64_t(-1)}, {"keepdims", int64_t(0)}},
         s,
         kRows,
         {4},
         {1, 0, 2, 2},
         DType::i64});
}

TEST(NanSemantics, MaxPoolAndGlobalMaxPoolPropagateNaN) {
  using V = std::vector<int64_t>;
  std::vector<float> x = {1, kNaN, 3, -1, 2, 5, 4, 0};
  check({"MaxPool",
         {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}},
         {1, 1, 2, 4},
         x,
         {1, 1, 1, 2},
         {kNaN, 4}});
  check({"MaxPool",
         {{"kernel_shape", V{1, 2}}},
         {1, 1, 2, 4},
         x,
         {1, 1, 2, 3},
         {kNaN, kNaN, 3, 5, 5, 4}});
  // Windows partly in the padding: padding never wins (-inf is the identity), inf survives.
  check({"MaxPool",
         {{"kernel_shape", V{2, 2}}, {"pads", V{1, 1, 1, 1}}},
         {1, 1, 2, 2},
         {-kInf, -kInf, -kInf, kInf},
         {1, 1, 3, 3},
         {-kInf, -kInf, -kInf, -kInf, kInf, kInf, -kInf, kInf, kInf}});
  // 16 channels: oneDNN's own (blocked or NHWC) pooling kernels.
  std::vector<float> big(16 * 4 * 4);
  std::vector<double> pooled(16 * 2 * 2);
  for (size_t i = 0; i < big.size(); ++i) big[i] = float((i * 7) % 11);
  big[3 * 16 + 5] = kNaN;  // channel 3, row 1, col 1: in the first window
  for (int c = 0; c < 16; ++c)
    for (int r = 0; r < 2; ++r)
      for (int q = 0; q < 2; ++q) {
        double m = -kInf;
        for (int dr = 0; dr < 2; ++dr)
          for (int dq = 0; dq < 2; ++dq) {
            float v = big[size_t(c * 16 + (2 * r + dr) * 4 + 2 * q + dq)];
            m = std::isnan(v) || std::isnan(m) ? kNaN : std::max<double>(m, v);
          }
        pooled[size_t(c * 4 + r * 2 + q)] = m;
      }
  check({"MaxPool",
         {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}},
         {1, 16, 4, 4},
         big,
         {1, 16, 2, 2},
         pooled});
  check({"GlobalMaxPool",
         {},
         {1, 2, 2, 2},
         {1, kNaN, 3, -1, -kInf, -kInf, 7, 0},
         {1, 2, 1, 1},
         {kNaN, 7}});
}

// After a conv, pools read NHWC or channel-blocked data (oneDNN's kernels, or brrr's blocked max
// pool): an identity 1x1 conv carries the NaN there (into every channel: 0 * NaN is NaN).
TEST(NanSemantics, MaxPoolAfterConvPropagatesNaNInEveryLayout) {
  constexpr int64_t C = 16, H = 6;
  std::vector<float> eye(C * C, 0.f);
  for (int64_t c = 0; c < C; ++c) eye[size_t(c * C + c)] = 1.f;
  std::vector<float> x(C * H * H);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 5) % 13);
  x[size_t(7 * H * H + 2 * H + 3)] = kNaN;  // channel 7, row 2, col 3: window (1, 1)
  for (const char* layout : {"blocked", "nhwc", "plain"}) {
    brrr_test::EnvVar env("BRRR_CONV_LAYOUT", layout);
    GraphBuilder b;
    int in = b.input("x", {1, C, H, H});
    int conv = b.node("Conv", {in, b.constant("w", Tensor::from_vector<float>({C, C, 1, 1}, eye))});
    int pool = b.node(
        "MaxPool", {conv},
        {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
    b.output(pool);
    Session s(b.g, session_options());
    Tensor y = s.run({{"x", Tensor::from_vector<float>({1, C, H, H}, x)}})[0];
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t q = 0; q < 3; ++q) {
          float m = -kInf;
          for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < 2; ++j)
              m = std::max(m, x[size_t((c * H + 2 * r + i) * H + 2 * q + j)]);
          bool nan_window = r == 1 && q == 1;
          float got = y.data<float>()[(c * 3 + r) * 3 + q];
          if (nan_window)
            EXPECT_TRUE(std::isnan(got)) << layout << "\n" << s.plan_summary();
          else
            EXPECT_EQ(got, m) << layout << " c" << c << " " << r << "," << q;
        }
  }
}

// brrr's max pool on channel-blocked or NHWC data (between two convs), float32 or bf16, reduces
// without a per-tap NaN test and redoes the rows exactly when an input was NaN or infinite: NaN
// still wins, +inf and -inf are ordinary values. 3x3 windows (the fused three-row pass) and 2x2
// ones. The convs are depthwise identities, so that a NaN or an infinity stays in its channel
// (every value is a small integer: exact in bf16 too).
void max_pool_keeps_nan_and_infinities(const char* layout, DType dt) {
  constexpr int64_t C = 32;
  for (int64_t k : {3, 2}) {
    const int64_t H = 44 - k;  // windows that end on the last row and column
    std::vector<float> x(C * H * H);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7) % 23) - 11.f;
    x[size_t((3 * H + 4) * H + 5)] = kNaN;
    x[size_t((5 * H + 8) * H + 2)] = kInf;
    x[size_t((9 * H + 0) * H + 0)] = -kInf;
    x[size_t((20 * H + 30) * H + 17)] = kNaN;  // the second channel block
    const int64_t oh = (H - k) / 2 + 1;
    for (const bool with_nan : {true, false}) {
      if (!with_nan) x[size_t((3 * H + 4) * H + 5)] = x[size_t((20 * H + 30) * H + 17)] = 1.f;
      SCOPED_TRACE(fmt::format("{} {} k {} {}", layout, dtype_name(dt), k,
                               with_nan ? "with NaN" : "infinities only"));
      brrr_test::EnvVar env("BRRR_CONV_LAYOUT", layout);
      GraphBuilder b;
      int in = b.input("x", {1, C, H, H}, dt);
      auto w = [&](const char* n) {
        return b.constant(n, Tensor::from_vector<float>({C, 1, 1, 1}, std::vector<float>(C, 1.f))
                                 .cast(dt));
      };
      const std::map<std::string, AttrValue> depthwise = {{"group", C}};
      int v = b.node("Conv", {in, w("w0")}, depthwise);
      v = b.node("MaxPool", {v},
                 {{"kernel_shape", std::vector<int64_t>{k, k}},
                  {"strides", std::vector<int64_t>{2, 2}}});
      b.output(b.node("Conv", {v, w("w1")}, depthwise));
      Session s(b.g, session_options());
      ASSERT_NE(s.plan_summary().find(std::string(layout) == "nhwc" ? "kept NHWC"
                                                                     : "kept channel-blocked"),
                std::string::npos)
          << s.plan_summary();
      Tensor y = s.run({{"x", Tensor::from_vector<float>({1, C, H, H}, x).cast(dt)}})[0];
      ASSERT_EQ(y.dtype(), dt);
      y = y.cast(DType::f32);
      ASSERT_EQ(shape_numel(y.shape()), C * oh * oh);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t r = 0; r < oh; ++r)
          for (int64_t q = 0; q < oh; ++q) {
            float m = -kInf;
            bool nan = false;
            for (int64_t i = 0; i < k; ++i)
              for (int64_t j = 0; j < k; ++j) {
                const float e = x[size_t((c * H + 2 * r + i) * H + 2 * q + j)];
                nan |= std::isnan(e);
                m = std::max(m, e);
              }
            const float got = y.data<float>()[(c * oh + r) * oh + q];
            if (nan)
              EXPECT_TRUE(std::isnan(got)) << "c" << c << " " << r << "," << q;
            else
              EXPECT_EQ(got, m) << "c" << c << " " << r << "," << q;
          }
    }
  }
}

TEST(NanSemantics, BlockedMaxPoolKeepsNaNAndInfinities) {
  max_pool_keeps_nan_and_infinities("blocked", DType::f32);
}
TEST(NanSemantics, NhwcMaxPoolKeepsNaNAndInfinities) {
  max_pool_keeps_nan_and_infinities("nhwc", DType::f32);
}
// A bf16 model: oneDNN's AMX convs keep it NHWC.
TEST(NanSemantics, Bf16MaxPoolKeepsNaNAndInfinities) {
  if (!CpuFeatures::host().amx_bf16) GTEST_SKIP() << "no AMX: bf16 convs are not kept NHWC here";
  max_pool_keeps_nan_and_infinities("nhwc", DType::bf16);
}

TEST(NanSemantics, MaxPoolPadsNotSmallerThanTheKernelAreAnError) {
  // ONNX Runtime refuses these ("Pad should be smaller than kernel"): a window entirely in the
  // padding has no element to take the max of.
  GraphBuilder b;
  int x = b.input("x", {1, 1, 2, 2});
  b.output(b.node(
      "MaxPool", {x},
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{2, 2, 2, 2}}}));
  std::string err = error_of([&] { Session s(b.g, session_options()); });
  EXPECT_NE(err.find("MaxPool"), std::string::npos) << err;
  EXPECT_NE(err.find("smaller than the kernel"), std::string::npos) << err;
}

TEST(NanSemantics, SoftmaxOfInfOrNaNRowsIsNaN) {
  std::vector<float> x = {1, kInf, 3, -kInf, -kInf, -kInf, kNaN, 0, 1, -kInf, 0, 1};
  check({"Softmax",
         {{"axis", int64_t(-1)}},
         {4, 3},
         x,
         {4, 3},
         {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, 0, 0.2689414213699951,
          0.7310585786300049}});
  check({"LogSoftmax",
         {{"axis", int64_t(-1)}},
         {4, 3},
         x,
         {4, 3},
         {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, -kInf, -1.3132616875182228,
          -0.3132616875182228}});
  // Over a non-last axis (the reference kernel's other path).
  check({"Softmax", {{"axis", int64_t(0)}}, {3, 1}, {1, kInf, 3}, {3, 1}, {kNaN, kNaN, kNaN}});
}

TEST(NanSemantics, MaxMinReluClipKeepNaN) {
  std::vector<float> x = {kNaN, 1, 2, kNaN, -kInf, kInf};
  Tensor other = Tensor::from_vector<float>({6}, {1, kNaN, 3, kNaN, 0, 0});
  check({"Max", {}, {6}, x, {6}, {kNaN, kNaN, 3, kNaN, 0, kInf}, DType::f32, {other}});
  check({"Min", {}, {6}, x, {6}, {kNaN, kNaN, 2, kNaN, -kInf, 0}, DType::f32, {other}});
  check({"Relu", {}, {6}, x, {6}, {kNaN, 1, 2, kNaN, 0, kInf}});
  check({"Clip",
         {},
         {6},
         x,
         {6},
         {kNaN, 1, 1.5, kNaN, 0, 1.5},
         DType::f32,
         {Tensor::scalar<float>(0), Tensor::scalar<float>(1.5f)}});
  // A NaN bound is no bound (ONNX Runtime's behaviour; an omitted bound is NaN to the helpers).
  check({"Clip",
         {},
         {6},
         x,
         {6},
         {kNaN, 1, 1.5, kNaN, -kInf, 1.5},
         DType::f32,
         {Tensor::scalar<float>(kNaN), Tensor::scalar<float>(1.5f)}});
}

}  // namespace
}  // namespace brrr::hostile
