// An Identity that writes no graph output is dropped: its readers read its input. Exporters write
// one per use of a shared parameter (ALBERT's one layer run 12 times: 75 Identities of its
// weights), and an Identity of a constant over the fold budget stayed a node: a copy of the
// weight into the arena on every run (9 GB of intermediates for ALBERT-xxlarge), read by its
// MatMul as a run-time operand that oneDNN cannot prepack. Read through, every layer's MatMul
// reads the one constant, packed once.
#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

bool forward_identities(Graph& g) {
  std::vector<std::vector<Node>> replace(g.nodes.size());
  std::vector<bool> drop(g.nodes.size(), false);
  std::vector<int> same(g.values.size(), -1);  // a dropped Identity's output -> its source
  bool changed = false;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (n.op != "Identity" || !n.domain.empty() || n.inputs.size() != 1 || n.inputs[0] < 0 ||
        n.outputs.size() != 1 || n.outputs[0] < 0 || is_graph_output(g, n.outputs[0]))
      continue;
    const int x = same[size_t(n.inputs[0])] >= 0 ? same[size_t(n.inputs[0])] : n.inputs[0];
    const Value &xv = g.value(x), &yv = g.value(n.outputs[0]);
    if (!xv.typed || xv.dtype != yv.dtype || xv.shape != yv.shape) continue;
    same[size_t(n.outputs[0])] = x;
    drop[k] = true;
    changed = true;
  }
  if (!changed) return false;
  // The nodes are in order, so a chain of Identities resolved to its first input above.
  read_through(g, same);
  splice_nodes(g, replace, drop);
  return true;
}

}  // namespace brrr
