#include <gtest/gtest.h>

#include "brrr/tensor.hpp"

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
