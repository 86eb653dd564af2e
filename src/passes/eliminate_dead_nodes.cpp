// eliminate_dead_nodes: drops nodes nothing downstream needs (folded or unused outputs).
#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

void eliminate_dead_nodes(Graph& g) {
  std::vector<bool> live(g.values.size(), false);
  for (int o : g.outputs) live[o] = true;
  std::vector<bool> keep(g.nodes.size(), false);
  for (int k = int(g.nodes.size()) - 1; k >= 0; --k) {
    const Node& n = g.nodes[k];
    bool needed = false;
    for (int o : n.outputs)
      if (live[o] && !g.value(o).constant.defined()) needed = true;
    if (!needed) continue;
    keep[k] = true;
    for (int i : n.inputs)
      if (i >= 0) live[i] = true;
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (keep[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
  relink_producers(g);
}

}  // namespace brrr
