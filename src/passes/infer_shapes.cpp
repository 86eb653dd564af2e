// infer_shapes: resolves every node's OpDef and infers the dtype and shape of every value.
#include "brrr/op.hpp"
#include "brrr/passes.hpp"

namespace brrr {

void infer_types(Graph& g, size_t fold_budget_bytes) {
  const OpTable& table = OpTable::get();
  for (Node& n : g.nodes) {
    n.def = table.find(n.domain, n.op);
    if (!n.def)
      fail("{}: unsupported op '{}{}{}'", n.label(), n.domain, n.domain.empty() ? "" : ".", n.op);
    for (int i : n.inputs)
      if (i >= 0) BRRR_ASSERT(g.value(i).typed, "input value not typed after topo sort");
    InferCtx ctx{g, n, {}};
    n.def->infer(ctx);
    if (ctx.outputs.size() < n.outputs.size()) {
      // Optional outputs the op did not produce are left untyped; ops that produce fewer
      // outputs than the node declares must say so.
      for (size_t o = ctx.outputs.size(); o < n.outputs.size(); ++o)
        if (!g.value(n.outputs[o]).name.empty())
          ctx.fail("the node declares {} outputs but the op produces {}", n.outputs.size(),
                   ctx.outputs.size());
    }
    for (size_t o = 0; o < n.outputs.size() && o < ctx.outputs.size(); ++o) {
      Value& v = g.value(n.outputs[o]);
      v.dtype = ctx.outputs[o].first;
      v.shape = ctx.outputs[o].second;
      v.typed = true;
    }
    // Folded here, node by node, not in a pass of its own: the shapes of later nodes read the
    // folded values (a Reshape's target shape computed by a Shape -> Gather -> Concat chain).
    fold_node(g, n, fold_budget_bytes);
  }
}

void infer_shapes(Graph& g, const InferOptions& opts) {
  topo_sort(g);
  bind_inputs(g, opts.input_shapes);
  infer_types(g, opts.fold_budget_bytes);
}

}  // namespace brrr
