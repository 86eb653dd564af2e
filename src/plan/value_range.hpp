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

#include "plan/kernel_ir.hpp"

namespace brrr::plan {

struct Range {
  float lo = -INFINITY, hi = INFINITY;
  bool within(float a, float b) const { return lo >= a && hi <= b; }
};

// The range of pointwise expression e's output given its expression arguments' ranges, in
// operand order (unbounded when not known).
Range op_range(const Expr& e, const std::vector<Range>& in);

// A cheaper op with the same accuracy as `op` over arguments with these ranges (an IR rewrite:
// Cos -> CosUnit, Sin -> SinUnit on [-1, 1]); `op` itself when there is none.
ScalarOp narrowed_op(ScalarOp op, const std::vector<Range>& in);

}  // namespace brrr::plan
