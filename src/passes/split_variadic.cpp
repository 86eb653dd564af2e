// Variadic Sum, Min and Max over many inputs become a chain of nodes of at most kMaxArity inputs
// each, folding left to right as the one node does (same order, same rounding), so neither a
// fused kernel nor one generated expression grows with the input count.
#include <fmt/format.h>

#include <unordered_set>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

namespace {

constexpr size_t kMaxArity = 8;

bool splittable(const Graph& g, const Node& n) {
  if (!n.domain.empty() || (n.op != "Sum" && n.op != "Min" && n.op != "Max")) return false;
  if (n.inputs.size() <= kMaxArity || n.outputs.size() != 1 || n.outputs[0] < 0) return false;
  // float32 only: 16-bit types accumulate in float32 across all inputs of the one node.
  for (int i : n.inputs)
    if (i < 0 || g.value(i).dtype != DType::f32) return false;
  return g.value(n.outputs[0]).dtype == DType::f32;
}

}  // namespace

bool split_variadic(Graph& g) {
  std::unordered_set<std::string> names;
  bool any = false;
  for (const Node& n : g.nodes) any = any || splittable(g, n);
  if (!any) return false;
  for (const Value& v : g.values) names.insert(v.name);
  std::vector<Node> nodes;
  for (Node& n : g.nodes) {
    if (!splittable(g, n)) {
      nodes.push_back(std::move(n));
      continue;
    }
    int acc = -1;
    for (size_t i = 0, part = 0; i < n.inputs.size(); ++part) {
      Node p;
      p.op = n.op;
      p.name = fmt::format("{}_part{}", n.name, part);
      p.attrs = n.attrs;
      p.def = n.def;
      if (acc >= 0) p.inputs.push_back(acc);
      while (p.inputs.size() < kMaxArity && i < n.inputs.size()) p.inputs.push_back(n.inputs[i++]);
      if (i == n.inputs.size()) {
        p.outputs = n.outputs;
      } else {
        std::string name = fmt::format("{}_part{}", g.value(n.outputs[0]).name, part);
        while (!names.insert(name).second) name += "_";
        acc = g.add_value(name);
        p.outputs = {acc};
        InferCtx ctx{g, p, {}};
        p.def->infer(ctx);
        BRRR_ASSERT(ctx.outputs.size() == 1, "split_variadic: untyped partial result");
        Value& v = g.value(acc);
        v.dtype = ctx.outputs[0].first;
        v.shape = ctx.outputs[0].second;
        v.typed = true;
      }
      nodes.push_back(std::move(p));
    }
  }
  g.nodes = std::move(nodes);
  relink_producers(g);
  return true;
}

}  // namespace brrr
