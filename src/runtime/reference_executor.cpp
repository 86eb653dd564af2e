#include <fmt/format.h>

#include "brrr/op.hpp"
#include "brrr/reference.hpp"

namespace brrr {

std::vector<Tensor> run_reference(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  std::vector<Tensor> vals(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].constant.defined()) vals[i] = g.values[i].constant;
  for (int id : g.inputs) {
    const Tensor& t = g.bound_input(id, inputs);
    vals[id] = t;
  }
  // Release each value after its last use so peak memory stays near the live set.
  std::vector<int> last_use(g.values.size(), -1);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int i : g.nodes[k].inputs)
      if (i >= 0) last_use[i] = int(k);
  for (int o : g.outputs) last_use[o] = int(g.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    std::vector<Tensor> ins;
    for (int i : n.inputs) ins.push_back(i >= 0 ? vals[i] : Tensor());
    std::vector<Tensor> outs = run_node_reference(g, n, std::move(ins));
    for (size_t o = 0; o < outs.size() && o < n.outputs.size(); ++o) vals[n.outputs[o]] = outs[o];
    for (int i : n.inputs)
      if (i >= 0 && last_use[i] == int(k) && !g.value(i).constant.defined()) vals[i] = Tensor();
  }
  std::vector<Tensor> result;
  for (int o : g.outputs) {
    BRRR_CHECK(vals[o].defined(), "graph output '{}' was not computed", g.value(o).name);
    result.push_back(vals[o]);
  }
  return result;
}

}  // namespace brrr
