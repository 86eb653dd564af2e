// Pointwise lowerings: the helpers ops use to say which scalar function a node computes and
// with which attribute values (conventions in op.hpp). Only numbers read through their type and
// the template's own choices reach generated code, never text of the model.
#include <cmath>

#include "brrr/op.hpp"

namespace brrr {

std::string_view scalar_op_name(ScalarOp op) {
  static constexpr std::string_view names[] = {
      "identity", "add", "sub", "mul", "div", "pow", "mod_numpy", "mod_fmod", "where",
      "equal", "less", "less_or_equal", "greater", "greater_or_equal", "and", "or", "xor", "not",
      "min", "max", "sqrt", "reciprocal", "exp", "log", "tanh", "erf", "cos", "sin", "tan",
      "acos", "asin", "atan", "sinh", "cosh", "floor", "ceil", "round", "neg", "abs", "sign",
      "relu", "sigmoid", "leaky_relu", "elu", "selu", "celu", "thresholded_relu", "hardsigmoid",
      "hardswish", "softplus", "softsign", "mish", "gelu_erf", "gelu_tanh", "isnan", "isinf",
      "clip", "prelu", "cos_unit", "sin_unit"};
  static_assert(std::size(names) == size_t(ScalarOp::Count), "a ScalarOp without a name");
  return size_t(op) < std::size(names) ? names[size_t(op)] : "?";
}

std::function<PointwiseForm(const Node&)> pointwise_of(ScalarOp op, int arity) {
  return [op, arity](const Node&) {
    PointwiseForm f{op, {}, false};
    for (int i = 0; i < arity; ++i) f.operands.push_back({i, 0, false});
    return f;
  };
}

ScalarOperand attr_operand(const Node& n, const std::string& name, double dflt, bool want_int) {
  if (!n.has_attr(name)) return {-1, want_int ? double(int64_t(dflt)) : double(float(dflt)), want_int};
  const AttrValue& a = n.attrs.at(name);
  if (const auto* i = std::get_if<int64_t>(&a)) return {-1, double(*i), true};
  if (const auto* f = std::get_if<float>(&a); f && !want_int) return {-1, double(*f), false};
  fail("{}: attribute '{}' must be {} for the pointwise expression", n.label(), name,
       want_int ? "an INT" : "a FLOAT or INT");
}

ScalarOperand input_or_attr(const Node& n, int i, const std::string& name) {
  if (i < int(n.inputs.size()) && n.inputs[size_t(i)] >= 0) return {i, 0, false};
  if (n.has_attr(name)) return attr_operand(n, name, 0);
  return {-1, NAN, false};
}

int attr_choice(const Node& n, const std::string& name, const std::vector<std::string>& words) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return 0;
  std::string got;
  if (const auto* s = std::get_if<std::string>(&it->second))
    got = *s;
  else if (const auto* i = std::get_if<int64_t>(&it->second))
    got = std::to_string(*i);
  else
    fail("{}: attribute '{}' has the wrong type for the pointwise expression", n.label(), name);
  for (size_t w = 0; w < words.size(); ++w)
    if (words[w] == got) return int(w);
  std::string list;
  for (const auto& w : words) list += (list.empty() ? "" : ",") + w;
  fail("{}: attribute '{}' = '{}' is not one of {}", n.label(), name, got.substr(0, 40), list);
}

}  // namespace brrr
