// A float32 tensor of uniform random values, drawn from the caller's generator (each test file
// keeps its own seeded generator, so its inputs stay the same from run to run).
#pragma once
#include <random>
#include <vector>

#include "brrr/tensor.hpp"

namespace brrr_test {

inline brrr::Tensor uniform_f32(const brrr::Shape& s, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(size_t(brrr::shape_numel(s)));
  for (auto& x : v) x = d(rng);
  return brrr::Tensor::from_vector<float>(s, v);
}

}  // namespace brrr_test
