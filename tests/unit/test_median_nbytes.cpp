// The one median (core/median.hpp) and Value::nbytes(): the definitions the doctor, bench and
// cost model rely on.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

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

// Nearest rank: sorted v[ceil(p/100 * n) - 1], always a sample.
TEST(Percentile, NearestRank) {
  std::vector<double> v;
  for (int i = 10; i >= 1; --i) v.push_back(double(i));  // 1..10, unsorted
  EXPECT_EQ(percentile(v, 0), 1.0);
  EXPECT_EQ(percentile(v, 10), 1.0);
  EXPECT_EQ(percentile(v, 11), 2.0);
  EXPECT_EQ(percentile(v, 50), 5.0);  // lower middle; median() is the upper one
  EXPECT_EQ(median(v), 6.0);
  EXPECT_EQ(percentile(v, 90), 9.0);  // exactly 90% at or below 9, despite 0.9 * 10 rounding
  EXPECT_EQ(percentile(v, 99), 10.0);
  EXPECT_EQ(percentile(v, 100), 10.0);
  EXPECT_EQ(percentile(v, 250), 10.0);
  EXPECT_EQ(percentile(v, -5), 1.0);
}

TEST(Percentile, SmallAndEmpty) {
  EXPECT_EQ(percentile({}, 50), 0.0);
  EXPECT_EQ(percentile({7.0}, 99), 7.0);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(double(i));
  EXPECT_EQ(percentile(hundred, 99), 99.0);
  EXPECT_EQ(percentile(hundred, 99.5), 100.0);
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
