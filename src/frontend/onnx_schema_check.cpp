// Checks each default-domain node's input and output counts against the ONNX operator schema
// (from libonnx), so that kernels never see fewer inputs than the spec requires.
#include <fmt/format.h>
#include <onnx/defs/schema.h>

#include "brrr/op.hpp"
#include "frontend/onnx_schema_check.hpp"

namespace brrr {

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
