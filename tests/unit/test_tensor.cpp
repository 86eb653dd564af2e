#include <gtest/gtest.h>

#include "brrr/tensor.hpp"

#include <cmath>
#include <cstring>
#include <limits>

using namespace brrr;

TEST(Tensor, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_THROW(broadcast_shapes({2, 3}, {4}), Error);
}

TEST(Tensor, NumelOverflowIsAnError) {
  EXPECT_THROW(shape_numel({int64_t(1) << 40, int64_t(1) << 40}), Error);
  EXPECT_THROW(shape_numel({-1, 2}), Error);
}

TEST(Tensor, HugeAllocationIsRefused) {
  EXPECT_THROW(Tensor::empty(DType::f32, {int64_t(1) << 40}), Error);
}

TEST(Tensor, PermuteAndContiguous) {
  Tensor t = Tensor::from_vector<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor p = t.permute({1, 0}).contiguous();
  EXPECT_EQ(p.shape(), (Shape{3, 2}));
  std::vector<float> want = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(p.data<float>()[i], want[i]);
}

TEST(Tensor, SliceNegativeStep) {
  Tensor t = Tensor::from_vector<int64_t>({5}, {0, 1, 2, 3, 4});
  Tensor s = t.slice(0, 4, -1, -2);  // 4, 2, 0
  EXPECT_EQ(s.to_int64_vector(), (std::vector<int64_t>{4, 2, 0}));
}

TEST(Tensor, HalfConversionsRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f, 0.333251953125f}) {
    EXPECT_EQ(float(f16(f)), f) << f;
  }
  EXPECT_EQ(float(bf16(1.0f)), 1.0f);
  EXPECT_EQ(float(bf16(3.0f)), 3.0f);
  EXPECT_TRUE(std::isinf(float(f16(1e6f))));
}

TEST(Tensor, CastFloatToIntTruncates) {
  Tensor t = Tensor::from_vector<float>({3}, {1.7f, -1.7f, 3.0f});
  EXPECT_EQ(t.cast(DType::i64).to_int64_vector(), (std::vector<int64_t>{1, -1, 3}));
}

// A large cast runs by bands on several threads: every element, the band edges included, equals
// the element-by-element conversion (special values spread over the whole tensor).
TEST(Tensor, LargeCastsMatchElementByElement) {
  const int64_t n = (int64_t(5) << 20) + 7;
  Tensor t = Tensor::empty(DType::f32, {n});
  float* p = t.data<float>();
  const float special[] = {std::numeric_limits<float>::quiet_NaN(), 1e-41f, -0.0f, 65520.0f,
                           -1e30f, std::numeric_limits<float>::infinity(), 3.0e9f, -7.5f};
  for (int64_t i = 0; i < n; ++i)
    p[i] = i % 1031 == 0 ? special[(i / 1031) % 8] : std::sin(float(i)) * float(1 + i % 4096);
  Tensor h = t.cast(DType::f16), b = t.cast(DType::bf16), k = t.cast(DType::i32);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t hw = f16(p[i]).bits, bw = bf16(p[i]).bits;
    bad += h.data<f16>()[i].bits != hw || b.data<bf16>()[i].bits != bw;
    if (std::isfinite(p[i]) && std::fabs(p[i]) < 2e9f) bad += k.data<int32_t>()[i] != int32_t(p[i]);
  }
  EXPECT_EQ(bad, 0);
}
