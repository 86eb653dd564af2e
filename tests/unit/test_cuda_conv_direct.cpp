// brrr's direct conv kernel for 16-bit convs on few input channels (device/conv_direct.cuh,
// backend/cuda/conv_direct.hpp, BRRR_CONV_DIRECT): which convs it takes and its weight layout (no
// device needed), its module compiling for Hopper with NVRTC (no device needed), and the kernel
// alone against a float64 convolution of the same 16-bit values, element by element, over stems
// and odd geometries (partial tiles, one to eight channels, one or two taps per K group, several
// output-channel chunks, dilation, every activation, an infinity under a tap past the filter). A stem in a model: CudaNhwc.RgbStemOnTheDirectKernelMatchesTheReference.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "brrr/scalar_ops.h"
#include "random_tensor.hpp"

#ifdef BRRR_HAVE_CUDA
#include "backend/cuda/codegen_cuda.hpp"
#include "backend/cuda/conv_direct.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "cuda_test_util.hpp"

namespace brrr {
namespace {

using cuda::ConvDirect;
using cuda::ConvGeometry;

// A 2-D conv's geometry: input [n, c, h, w], k output channels, a kh x kw window.
struct Case {
  int n, c, h, w, k, kh, kw, sh, sw, ph, pw, dh, dw;
  int act = 0;  // brrr_conv_epilogue's codes
  bool bias = true;
  int inf_col = -1;  // >= 0: that input column is +infinity
};

ConvGeometry geometry(const Case& t, DType dt) {
  ConvGeometry g;
  g.x = {t.n, t.c, t.h, t.w};
  g.w = {t.k, t.c, t.kh, t.kw};
  const int oh = (t.h + 2 * t.ph - t.dh * (t.kh - 1) - 1) / t.sh + 1;
  const int ow = (t.w + 2 * t.pw - t.dw * (t.kw - 1) - 1) / t.sw + 1;
  g.y = {t.n, t.k, oh, ow};
  g.pad = {t.ph, t.pw};
  g.stride = {t.sh, t.sw};
  g.dilation = {t.dh, t.dw};
  g.dt = dt;
  g.nhwc = true;
  return g;
}

TEST(ConvDirectPlan, TakesStemsAndSaysWhyNotOtherwise) {
  ConvDirect d;
  // ResNet-50's stem at batch 2: 7x7 stride 2 on 3 channels, 64 out, 112 x 112.
  const Case stem{2, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1};
  ASSERT_EQ(cuda::conv_direct_plan(geometry(stem, DType::bf16), 3, DType::bf16, false, 1, 0, 0, &d), "");
  // 3 channels, stride 2 along the width: two taps of 4 channels per 8-wide K group, 4 groups
  // per filter row (the last one's second tap past the filter), 28 in all, two a K step.
  EXPECT_EQ(d.geo.cpp, 4);
  EXPECT_EQ(d.geo.gpr, 4);
  EXPECT_EQ(d.geo.groups, 28);
  EXPECT_EQ(d.geo.ks, 14);
  EXPECT_EQ(d.geo.rh, 3 * 2 + 6 + 1);
  EXPECT_EQ(d.geo.rw, 15 * 2 + 6 + 1 + 1);  // the extra tap's column; an even count
  EXPECT_EQ(d.geo.bands, 28);
  EXPECT_EQ(d.geo.tiles_w, 7);
  EXPECT_EQ(d.geo.tiles, 2 * 28 * 7);
  EXPECT_EQ(d.geo.oh, 112);
  EXPECT_EQ(d.geo.act, 1);
  // 64 rows of 14 * 16 + 8 weights, the region's 13 x 38 pixels of 4 channels, the zero row, 28
  // group offsets.
  EXPECT_EQ(d.smem, unsigned(64 * 232 * 2 + 13 * 38 * 8 + 16 + 28 * 4));
  EXPECT_LE(cuda::conv_direct_grid(d, 132), unsigned(4 * 132));
  EXPECT_GE(cuda::conv_direct_grid(d, 132), 132u);
  // Its padded geometry (channels 8) with the real 3 is the same plan.
  ConvGeometry padded = geometry(stem, DType::bf16);
  padded.x[1] = padded.w[1] = 8;
  ConvDirect d8;
  ASSERT_EQ(cuda::conv_direct_plan(padded, 3, DType::bf16, false, 1, 0, 0, &d8), "");
  EXPECT_EQ(d8.geo.c, 3);
  EXPECT_EQ(d8.smem, d.smem);

  auto why = [&](const Case& t, int in_c, DType dt, bool residual) {
    ConvDirect x;
    return cuda::conv_direct_plan(geometry(t, dt), in_c, dt, residual, 0, 0, 0, &x);
  };
  EXPECT_NE(why(stem, 3, DType::f32, false).find("float32"), std::string::npos);
  EXPECT_NE(why(stem, 3, DType::bf16, true).find("residual"), std::string::npos);
  Case nine = stem;
  nine.c = 9;
  EXPECT_NE(why(nine, 9, DType::f16, false).find("9 input channels"), std::string::npos);
  Case odd_k = stem;
  odd_k.k = 60;
  EXPECT_NE(why(odd_k, 3, DType::bf16, false).find("60 output channels"), std::string::npos);
  Case vit{1, 3, 224, 224, 768, 16, 16, 16, 16, 0, 0, 1, 1};  // a ViT patch embedding
  EXPECT_NE(why(vit, 3, DType::bf16, false).find("KB of shared memory"), std::string::npos);
  ConvGeometry grouped = geometry(stem, DType::bf16);
  grouped.groups = 3;
  ConvDirect x;
  EXPECT_NE(cuda::conv_direct_plan(grouped, 3, DType::bf16, false, 0, 0, 0, &x).find("one group"),
            std::string::npos);
}

// One tap of 8 channels per K group where the width's stride is odd: [k][2 * ks taps][8
// channels], each weight at (k, tap * 8 + channel); at an even stride with at most 4 channels,
// two taps of 4 channels per group: (k, (i * gpr + j / 2) * 8 + (j % 2) * 4 + channel). Zeros
// elsewhere.
TEST(ConvDirectPlan, WeightLayout) {
  {
    const Case t{1, 3, 9, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1};
    ConvDirect d;
    ASSERT_EQ(cuda::conv_direct_plan(geometry(t, DType::bf16), 3, DType::bf16, false, 0, 0, 0, &d), "");
    ASSERT_EQ(d.geo.cpp, 4);
    ASSERT_EQ(d.geo.groups, 6);  // 3 rows of (0, 1) and (2, past the filter)
    ASSERT_EQ(d.geo.ks, 3);
    Tensor w = Tensor::empty(DType::bf16, {8, 3, 3, 3});
    auto* wp = static_cast<uint16_t*>(w.raw());
    for (int i = 0; i < 8 * 27; ++i) wp[i] = uint16_t(1 + i);
    Tensor pk = cuda::conv_direct_weights(w, d.geo);
    ASSERT_EQ(pk.shape(), (Shape{8, 48}));
    const auto* p = static_cast<const uint16_t*>(pk.raw());
    for (int k = 0; k < 8; ++k)
      for (int slot = 0; slot < 48; ++slot) {
        const int grp = slot / 8, i = grp / 2, j = (grp % 2) * 2 + (slot % 8) / 4, ch = slot % 4;
        const uint16_t want = j < 3 && ch < 3 ? uint16_t(1 + ((k * 3 + ch) * 3 + i) * 3 + j) : 0;
        ASSERT_EQ(p[k * 48 + slot], want) << "k " << k << " slot " << slot;
      }
  }
  const Case t{1, 3, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1};
  ConvDirect d;
  ASSERT_EQ(cuda::conv_direct_plan(geometry(t, DType::bf16), 3, DType::bf16, false, 0, 0, 0, &d), "");
  ASSERT_EQ(d.geo.cpp, 8);  // stride 1: one tap a group
  ASSERT_EQ(d.geo.ks, 5);   // 9 taps -> 10 slots
  Tensor w = Tensor::empty(DType::bf16, {8, 3, 3, 3});
  auto* wp = static_cast<uint16_t*>(w.raw());
  for (int i = 0; i < 8 * 27; ++i) wp[i] = uint16_t(1 + i);  // distinct bit patterns
  Tensor pk = cuda::conv_direct_weights(w, d.geo);
  ASSERT_EQ(pk.shape(), (Shape{8, 80}));
  const auto* p = static_cast<const uint16_t*>(pk.raw());
  for (int k = 0; k < 8; ++k)
    for (int slot = 0; slot < 80; ++slot) {
      const int tap = slot / 8, ch = slot % 8;
      const uint16_t want = tap < 9 && ch < 3 ? uint16_t(1 + (k * 3 + ch) * 9 + tap) : 0;
      ASSERT_EQ(p[k * 80 + slot], want) << "k " << k << " slot " << slot;
    }
}

// NVRTC needs no device: the kernels of both types compile for Hopper.
TEST(CudaCodegen, DirectConvCompilesWithNvrtc) {
  cuda::NvrtcCompiler nv("sm_90", "");
  cuda::CudaSource cs;
  cs.add_part(cuda::conv_direct_source());
  cuda::CompiledKernel ck = nv.compile(cs.parts.at(0), "conv_direct");
  for (DType t : {DType::bf16, DType::f16}) {
    const std::string sym = cuda::conv_direct_symbol(t);
    EXPECT_NE(std::search(ck.cubin.begin(), ck.cubin.end(), sym.begin(), sym.end()), ck.cubin.end())
        << sym;
  }
}

float act_of(float v, int act, float alpha, float beta) {
  switch (act) {
    case 1: return brrr_relu(v);
    case 2: return brrr_hardswish(v);
    case 3: return brrr_hardsigmoid(v, alpha, beta);
    case 4: return brrr_clip(v, alpha, beta);
    default: return v;
  }
}

// The kernel alone: random 16-bit input, weights and bias, the output poisoned with NaN first
// (an element it does not write shows up), against a float64 convolution of the same values
// with the activation applied in float32 and the result rounded to the type: within a unit in the
// last place of the type (from the float32 accumulation order), plus a little absolute slack.
TEST(CudaConvDirect, KernelMatchesAFloat64Convolution) {
  BRRR_REQUIRE_CUDA_DEVICE();
  cuda::Device& dev = brrr_cuda_test::test_device();
  if (dev.info().cc_major < 8) GTEST_SKIP() << "the kernel needs sm_80 (bf16 mma.sync)";
  cuda::NvrtcCompiler nv(dev.info().arch(), "");
  cuda::CudaSource cs;
  cs.add_part(cuda::conv_direct_source());
  cuda::Module mod(nv.compile(cs.parts.at(0), "conv_direct").cubin, "conv_direct test module");
  const std::vector<Case> cases = {
      {2, 3, 37, 37, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1},          // ResNet's stem; partial tiles
      {1, 3, 33, 33, 32, 3, 3, 2, 2, 1, 1, 1, 1, 0},          // EfficientNet's stem, no activation
      {1, 3, 30, 31, 16, 3, 3, 2, 2, 1, 1, 1, 1, 2},          // MobileNetV3's, hardswish
      {1, 3, 32, 36, 96, 4, 4, 4, 4, 0, 0, 1, 1, 0, false},   // ConvNeXt's patchify: 2 chunks
      {3, 1, 20, 45, 8, 5, 5, 1, 1, 4, 4, 2, 2, 4},           // one channel, dilation 2, clip
      {1, 8, 18, 18, 24, 3, 3, 1, 1, 1, 1, 1, 1, 3},          // 8 channels, 3 n8 tiles, hardsigmoid
      {1, 4, 9, 70, 136, 1, 1, 1, 1, 0, 0, 1, 1, 1},          // 1x1 (one tap), 136 out: 3 chunks
      {1, 2, 5, 5, 40, 7, 7, 3, 2, 3, 3, 1, 1, 1},            // image smaller than the window
      // Column 7 is under no window, only under the second tap of the last pair, past the
      // filter: its infinities must not reach the outputs (as inf * 0 = NaN would).
      {1, 3, 6, 8, 8, 3, 3, 2, 2, 0, 0, 1, 1, 0, true, 7},
  };
  std::mt19937 rng(2026);
  cuda::Stream s;
  for (DType dt : {DType::bf16, DType::f16})
    for (const Case& t : cases) {
      const ConvGeometry g = geometry(t, dt);
      SCOPED_TRACE(fmt::format("{} x {}x{}x{}x{} k {} {}x{} s {}x{} p {}x{} d {}x{} act {}",
                               dtype_name(dt), t.n, t.c, t.h, t.w, t.k, t.kh, t.kw, t.sh, t.sw,
                               t.ph, t.pw, t.dh, t.dw, t.act));
      ConvDirect d;
      ASSERT_EQ(cuda::conv_direct_plan(g, t.c, dt, false, t.act, 0.2f, 0.5f, &d), "");
      // act 4 is clip(alpha, beta) = clip to [0.2, 0.5]; 3 hardsigmoid(0.2, 0.5)
      Tensor xs = brrr_test::uniform_f32({t.n, t.c, t.h, t.w}, rng, -2.f, 2.f);
      if (t.inf_col >= 0)
        for (int64_t r = 0; r < int64_t(t.n) * t.c * t.h; ++r) xs.data<float>()[r * t.w + t.inf_col] = INFINITY;
      Tensor x = xs.cast(dt);
      Tensor w = brrr_test::uniform_f32({t.k, t.c, t.kh, t.kw}, rng, -0.5f, 0.5f).cast(dt);
      Tensor b = brrr_test::uniform_f32({t.k}, rng, -0.5f, 0.5f).cast(dt);
      Tensor wp = cuda::conv_direct_weights(w, d.geo);
      const int oh = g.y[2], ow = g.y[3];
      const size_t ny = size_t(t.n) * t.k * oh * ow;
      cuda::DeviceBuffer xb(x.nbytes(), "x"), wb(wp.nbytes(), "w"), bb(b.nbytes(), "bias"),
          yb(ny * 2, "y");
      cuda::copy_h2d(xb.ptr(), x.raw(), x.nbytes(), s, "x");
      cuda::copy_h2d(wb.ptr(), wp.raw(), wp.nbytes(), s, "w");
      cuda::copy_h2d(bb.ptr(), b.raw(), b.nbytes(), s, "bias");
      cuda::memset_u32(yb.ptr(), 0x7fff7fffu, ny / 2, s, "poison y");  // NaN in both types
      cuda::Function f = mod.function(cuda::conv_direct_symbol(dt));
      if (d.smem > 48 * 1024) f.set_max_dynamic_shared(d.smem);
      cuda::DevPtr xp = xb.ptr(), wpp = wb.ptr(), bp = t.bias ? bb.ptr() : 0, yp = yb.ptr();
      cuda::ConvDirectGeo geo = d.geo;
      void* args[] = {&xp, &wpp, &bp, &yp, &geo};
      // A small grid too, so that CTAs stride over several tiles.
      for (unsigned grid : {cuda::conv_direct_grid(d, dev.info().sm_count), 3u}) {
        cuda::launch(f, {grid, 1, 1}, {cuda::kConvDirectThreads, 1, 1}, d.smem, s, args);
        Tensor y = Tensor::empty(dt, {t.n, oh, ow, t.k});  // NHWC
        cuda::copy_d2h(y.raw(), yb.ptr(), ny * 2, s, "y");
        s.synchronize("direct conv");
        const Tensor xf = x.cast(DType::f32), wf = w.cast(DType::f32), bf = b.cast(DType::f32);
        const Tensor yf = y.cast(DType::f32);
        const float* X = xf.data<float>();
        const float* W = wf.data<float>();
        const float* B = bf.data<float>();
        const float* Y = yf.data<float>();
        const double ulp = dt == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
        int bad = 0;
        for (int n = 0; n < t.n; ++n)
          for (int oy = 0; oy < oh; ++oy)
            for (int ox = 0; ox < ow; ++ox)
              for (int k = 0; k < t.k; ++k) {
                double acc = t.bias ? B[k] : 0, mag = std::fabs(acc);
                for (int c = 0; c < t.c; ++c)
                  for (int i = 0; i < t.kh; ++i)
                    for (int j = 0; j < t.kw; ++j) {
                      const int iy = oy * t.sh - t.ph + i * t.dh, ix = ox * t.sw - t.pw + j * t.dw;
                      if (iy < 0 || iy >= t.h || ix < 0 || ix >= t.w) continue;
                      const double p = double(X[((size_t(n) * t.c + c) * t.h + iy) * t.w + ix]) *
                                       W[((size_t(k) * t.c + c) * t.kh + i) * t.kw + j];
                      acc += p;
                      mag += std::fabs(p);
                    }
                const double want = act_of(float(acc), t.act, 0.2f, 0.5f);
                const double got = Y[((size_t(n) * oh + oy) * ow + ox) * t.k + k];
                // One unit of the type's rounding of the result, and float32 accumulation error
                // on the sum of magnitudes (the activations are 1-Lipschitz or flatter).
                const double tol = ulp * std::fabs(want) + 1e-5 * mag + 1e-6;
                if (!(std::fabs(got - want) <= tol) && ++bad <= 5)
                  ADD_FAILURE() << fmt::format("grid {}: y[{}, {}, {}, {}] = {} want {} (tol {})", grid,
                                               n, oy, ox, k, got, want, tol);
              }
        EXPECT_EQ(bad, 0) << "grid " << grid;
      }
    }
}

}  // namespace
}  // namespace brrr

#endif  // BRRR_HAVE_CUDA
