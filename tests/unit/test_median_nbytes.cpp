// The one median (core/median.hpp) and Value::nbytes(): the definitions the doctor, bench and
// cost model rely on.
#include <gtest/gtest.h>

#include <cstdint>

#include "brrr/graph.hpp"
#include "core/median.hpp"

using namespace brrr;

TEST(Median, OddCountIsTheMiddle) {
  EXPECT_EQ(median({5.0, 1.0, 3.0}), 3.0);
}

// An even count takes the upper middle sample: a time that was measured, not an average.
TEST(Median, EvenCountIsTheUpperMiddle) {
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 3.0);
}

TEST(Median, EmptyIsZero) {
  EXPECT_EQ(median({}), 0.0);
}

TEST(ValueNbytes, ElementsTimesElementSize) {
  Value v;
  v.dtype = DType::f16, v.shape = {2, 3};
  EXPECT_EQ(v.nbytes(), 12u);
  v.dtype = DType::i64, v.shape = {};
  EXPECT_EQ(v.nbytes(), 8u);
  v.shape = {4, 0};
  EXPECT_EQ(v.nbytes(), 0u);
}

// A shape whose byte count does not fit size_t saturates instead of wrapping to a small number.
TEST(ValueNbytes, SaturatesInsteadOfWrapping) {
  Value v;
  v.dtype = DType::f64, v.shape = {int64_t(1) << 31, int64_t(1) << 31};
  EXPECT_EQ(v.nbytes(), SIZE_MAX);
}
