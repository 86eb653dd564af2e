#include "plan/value_range.hpp"

#include <algorithm>

namespace brrr::plan {

Range op_range(const Node& n, const std::vector<Range>& in) {
  const std::string& op = n.op;
  if (op == "Cos" || op == "Sin" || op == "Tanh" || op == "Erf") return {-1.0f, 1.0f};
  if (op == "Sigmoid" || op == "HardSigmoid") return {0.0f, 1.0f};
  if (in.empty()) return {};
  const Range& x = in[0];
  if (op == "Relu") return {std::max(x.lo, 0.0f), std::max(x.hi, 0.0f)};
  if (op == "Abs") {
    float a = std::fabs(x.lo), b = std::fabs(x.hi);
    return {x.lo <= 0 && x.hi >= 0 ? 0.0f : std::min(a, b), std::max(a, b)};
  }
  if (op == "Neg") return {-x.hi, -x.lo};
  if (op == "Clip" && n.inputs.size() == 1) {  // opset < 11: bounds are attributes
    float lo = n.attr_float("min", -INFINITY), hi = n.attr_float("max", INFINITY);
    return {std::clamp(x.lo, lo, hi), std::clamp(x.hi, lo, hi)};
  }
  return {};
}

std::string narrowed_code(const Node& n, const std::vector<Range>& in) {
  if (in.size() != 1 || !in[0].within(-1.0f, 1.0f)) return "";
  if (n.op == "Cos") return "brrr_cos_unit({0})";
  if (n.op == "Sin") return "brrr_sin_unit({0})";
  return "";
}

}  // namespace brrr::plan
