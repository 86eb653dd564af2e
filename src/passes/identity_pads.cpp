// A Pad whose pads are all zero copies its input: its readers read the input instead (an
// Identity where the Pad writes a graph output). Swin-T pads each window partition to a
// multiple of the window, and at 224 x 224 every feature map is one already: its 15 Pads ran on
// the reference executor (Pad has no generated kernel), 8 ms of a 77 ms run on two cores.
#include <algorithm>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

namespace {

constexpr const char* kPass = "identity_pads";

bool zero_pads(const Graph& g, const Node& n) {
  std::vector<int64_t> pads;
  try {
    if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
      const Tensor& t = g.value(n.inputs[1]).constant;
      if (!t.defined()) return false;
      pads = t.to_int64_vector();
    } else {
      pads = n.attr_ints("pads", {});  // opset < 11
    }
  } catch (const Error&) {
    return false;
  }
  return !pads.empty() && std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
}

}  // namespace

bool identity_pads(Graph& g) {
  std::vector<std::vector<Node>> replace(g.nodes.size());
  std::vector<bool> drop(g.nodes.size(), false);
  std::vector<int> same(g.values.size(), -1);  // a dropped Pad's output -> the value it copies
  bool changed = false;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (n.op != "Pad" || !n.domain.empty() || n.inputs.empty() || n.inputs[0] < 0 ||
        n.outputs.size() != 1 || n.outputs[0] < 0)
      continue;
    const int x = same[size_t(n.inputs[0])] >= 0 ? same[size_t(n.inputs[0])] : n.inputs[0];
    const int y = n.outputs[0];
    if (!g.value(x).typed || g.value(x).shape != g.value(y).shape || !zero_pads(g, n)) continue;
    changed = true;
    if (is_graph_output(g, y)) {  // the output must be written: a copy
      Node id = make_node(g, "Identity", n.name.empty() ? std::string("pad") : n.name, {x}, y);
      type_node(g, id, kPass);
      replace[k].push_back(std::move(id));
      continue;
    }
    same[size_t(y)] = x;
    drop[k] = true;
  }
  if (!changed) return false;
  // Readers read the input itself, so they fuse with its producer (one pass over the nodes; a
  // chain of such Pads resolved to its first input above, the nodes being in order).
  read_through(g, same);
  splice_nodes(g, replace, drop);
  return true;
}

}  // namespace brrr
