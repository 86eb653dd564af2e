// fold_constants: a node whose inputs are all constant is computed now, by its reference kernel,
// and its outputs become constants (shape subgraphs: Shape -> Gather -> Concat -> Reshape).
#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"

namespace brrr {

bool fold_node(Graph& g, const Node& n, size_t fold_budget_bytes) {
  bool all_const = true;
  for (int i : n.inputs)
    if (i >= 0 && !g.value(i).constant.defined() && !n.def->shape_only) all_const = false;
  if (!all_const || !n.def->foldable) return false;
  size_t out_bytes = 0;
  for (int o : n.outputs)
    if (o >= 0 && g.value(o).typed)
      out_bytes += size_t(shape_numel(g.value(o).shape)) * dtype_size(g.value(o).dtype);
  // Large results stay nodes: folding them would bloat the plan's constants.
  if (out_bytes > fold_budget_bytes && !n.inputs.empty()) return false;
  std::vector<Tensor> ins;
  for (int i : n.inputs) {
    if (i < 0) ins.push_back(Tensor());
    else if (g.value(i).constant.defined()) ins.push_back(g.value(i).constant);
    // shape_only ops see a one-element stand-in broadcast to the value's shape.
    else ins.push_back(Tensor::zeros(g.value(i).dtype, {}).expand(g.value(i).shape));
  }
  std::vector<Tensor> outs = run_node_reference(g, n, std::move(ins));
  for (size_t o = 0; o < n.outputs.size() && o < outs.size(); ++o)
    g.value(n.outputs[o]).constant = outs[o];
  return true;
}

}  // namespace brrr
