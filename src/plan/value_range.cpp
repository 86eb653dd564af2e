#include "plan/value_range.hpp"

#include <algorithm>

namespace brrr::plan {

Range op_range(const Expr& e, const std::vector<Range>& in) {
  switch (e.op) {
    case ScalarOp::Cos: case ScalarOp::Sin: case ScalarOp::CosUnit: case ScalarOp::SinUnit:
    case ScalarOp::Tanh: case ScalarOp::Erf:
      return {-1.0f, 1.0f};
    case ScalarOp::Sigmoid: case ScalarOp::HardSigmoid: return {0.0f, 1.0f};
    default: break;
  }
  if (in.empty()) return {};
  const Range& x = in[0];
  switch (e.op) {
    case ScalarOp::Relu: return {std::max(x.lo, 0.0f), std::max(x.hi, 0.0f)};
    case ScalarOp::Abs: {
      float a = std::fabs(x.lo), b = std::fabs(x.hi);
      return {x.lo <= 0 && x.hi >= 0 ? 0.0f : std::min(a, b), std::max(a, b)};
    }
    case ScalarOp::Neg: return {-x.hi, -x.lo};
    case ScalarOp::Clip: {  // bounds that are attributes (opset < 11); NaN is no bound
      if (e.args.size() != 3 || e.attrs.size() != 3 || e.args[1] >= 0 || e.args[2] >= 0) return {};
      float lo = float(e.attrs[1].imm), hi = float(e.attrs[2].imm);
      if (std::isnan(lo)) lo = -INFINITY;
      if (std::isnan(hi)) hi = INFINITY;
      return {std::clamp(x.lo, lo, hi), std::clamp(x.hi, lo, hi)};
    }
    default: return {};
  }
}

ScalarOp narrowed_op(ScalarOp op, const std::vector<Range>& in) {
  if (in.size() != 1 || !in[0].within(-1.0f, 1.0f)) return op;
  if (op == ScalarOp::Cos) return ScalarOp::CosUnit;
  if (op == ScalarOp::Sin) return ScalarOp::SinUnit;
  return op;
}

}  // namespace brrr::plan
