// Checks each default-domain node's input and output counts and attribute types against the ONNX
// operator schema (from libonnx), so that kernels never see fewer inputs than the spec requires
// and every attribute is read as the type the spec declares.
#include <fmt/format.h>
#include <onnx/defs/schema.h>

#include <iterator>
#include <variant>

#include "brrr/op.hpp"
#include "frontend/onnx_schema_check.hpp"

namespace brrr {

namespace {

// The schema of n's op at the graph's opset, if libonnx knows it and brrr implements the op.
const onnx::OpSchema* schema_of(const Node& n, const Graph& g) {
  if (!n.domain.empty()) return nullptr;
  const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(n.op, g.opset, onnx::ONNX_DOMAIN);
  if (!s || !OpTable::get().find(n.domain, n.op)) return nullptr;
  return s;
}

onnx::AttributeProto::AttributeType type_of(const AttrValue& v) {
  using A = onnx::AttributeProto;
  constexpr A::AttributeType by_index[] = {A::INT,    A::FLOAT,   A::STRING, A::INTS,
                                           A::FLOATS, A::STRINGS, A::TENSOR};
  static_assert(std::variant_size_v<AttrValue> == std::size(by_index));
  return by_index[v.index()];
}

}  // namespace

void check_node_attributes(const Node& n, const Graph& g) {
  const onnx::OpSchema* s = schema_of(n, g);
  if (!s) return;
  for (const auto& [name, value] : n.attrs) {
    auto it = s->attributes().find(name);
    if (it == s->attributes().end()) continue;  // unknown attributes are ignored, as before
    auto want = it->second.type, got = type_of(value);
    // An INT for a FLOAT is still a number (attr_float converts it); nothing else converts.
    if (want == got || (want == onnx::AttributeProto::FLOAT && got == onnx::AttributeProto::INT))
      continue;
    fail("{}: attribute '{}' must be {} but is {}", n.label(), name,
         onnx::AttributeProto::AttributeType_Name(want),
         onnx::AttributeProto::AttributeType_Name(got));
  }
}

void check_node_arity(const Node& n, const Graph& g) {
  if (!n.domain.empty()) return;
  const auto& reg = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto range = reg.find(onnx::ONNX_DOMAIN);
  int known_max = range == reg.end() ? 0 : range->second.second;
  const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(n.op, g.opset, onnx::ONNX_DOMAIN);
  if (!s) return;  // unknown to this libonnx: the op table decides later
  // Ops brrr does not implement are reported as unsupported by shape inference instead.
  if (!OpTable::get().find(n.domain, n.op)) return;
  // Opsets newer than this libonnx knows may have added inputs or outputs: there only the lower
  // bounds are checked (kernels must never see fewer inputs than they read).
  bool exact = g.opset <= known_max;
  int nin = int(n.inputs.size()), nout = int(n.outputs.size());
  if (nin < s->min_input() || (exact && nin > s->max_input()))
    fail("{}: has {} inputs, but {} takes {} to {}", n.label(), nin, n.op, s->min_input(),
         s->max_input());
  if (nout < s->min_output() || (exact && nout > s->max_output()))
    fail("{}: has {} outputs, but {} produces {} to {}", n.label(), nout, n.op, s->min_output(),
         s->max_output());
  const auto& formals = s->inputs();
  for (size_t i = 0; exact && i < formals.size() && i < n.inputs.size(); ++i)
    if (formals[i].GetOption() == onnx::OpSchema::Single && n.inputs[i] < 0)
      fail("{}: required input {} ('{}') is empty", n.label(), i, formals[i].GetName());
}

}  // namespace brrr
