// Value ranges inside a fused kernel. Each expression carries the interval its non-NaN values
// lie in; ops with bounded outputs (Cos, Sin, Tanh, Sigmoid, Erf, Relu, Clip, ...) narrow it.
// A pointwise op whose input range is known small can then use a cheaper, equally accurate
// form: cos and sin of a value in [-1, 1] are short polynomials, with no range reduction (so
// cos(cos(x)) pays for one reduction, not two). Only fusion sees the producer's range, so
// this is a fusion-only gain.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "brrr/graph.hpp"

namespace brrr::plan {

struct Range {
  float lo = -INFINITY, hi = INFINITY;
  bool within(float a, float b) const { return lo >= a && hi <= b; }
};

// The range of op's output given its inputs' ranges (unbounded when not known).
Range op_range(const Node& n, const std::vector<Range>& in);

// A cheaper scalar expression for op over inputs {0}, ... with these ranges, with the same
// accuracy as the general one; "" when there is none.
std::string narrowed_code(const Node& n, const std::vector<Range>& in);

}  // namespace brrr::plan
