#include "core/median.hpp"

#include <algorithm>
#include <cmath>

namespace brrr {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  auto mid = v.begin() + std::ptrdiff_t(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  double n = double(v.size());
  // Rank in 1..n; the small slack keeps p = 90 of n = 10 at rank 9, not 10 through rounding.
  double rank = std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * n - 1e-9);
  size_t k = size_t(std::clamp(rank, 1.0, n)) - 1;
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
  return v[k];
}

}  // namespace brrr
