#include "core/median.hpp"

#include <algorithm>

namespace brrr {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  auto mid = v.begin() + std::ptrdiff_t(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace brrr
