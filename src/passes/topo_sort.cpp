// topo_sort: orders nodes so that every input is produced before it is read.
#include <algorithm>
#include <queue>

#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

// Kahn's algorithm; stable (keeps file order among ready nodes).
void topo_sort(Graph& g) {
  std::vector<int> producer(g.values.size(), -1);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int o : g.nodes[k].outputs) {
      if (producer[o] != -1)
        fail("value '{}' is produced by two nodes: {} and {}", g.value(o).name,
             g.nodes[producer[o]].label(), g.nodes[k].label());
      producer[o] = int(k);
    }
  std::vector<int> pending(g.nodes.size(), 0);
  std::vector<std::vector<int>> users(g.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (int i : g.nodes[k].inputs) {
      if (i < 0) continue;
      const Value& v = g.value(i);
      if (producer[i] >= 0) {
        pending[k]++;
        users[producer[i]].push_back(int(k));
      } else if (!v.constant.defined() &&
                 std::find(g.inputs.begin(), g.inputs.end(), i) == g.inputs.end()) {
        fail("{}: input '{}' is not a graph input, an initializer or any node's output",
             g.nodes[k].label(), v.name);
      }
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (pending[k] == 0) ready.push(int(k));
  std::vector<int> order;
  while (!ready.empty()) {
    int k = ready.top();
    ready.pop();
    order.push_back(k);
    for (int u : users[k])
      if (--pending[u] == 0) ready.push(u);
  }
  if (order.size() != g.nodes.size()) {
    for (size_t k = 0; k < g.nodes.size(); ++k)
      if (pending[k] > 0) fail("the graph has a cycle through {}", g.nodes[k].label());
  }
  std::vector<Node> sorted;
  sorted.reserve(g.nodes.size());
  for (int k : order) sorted.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(sorted);
  relink_producers(g);
}

}  // namespace brrr
