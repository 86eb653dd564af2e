#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <queue>
#include <set>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "core/env.hpp"

namespace brrr {

int debug_level() {
  static int lvl = int(env::integer("BRRR_DEBUG"));
  return lvl;
}

void debug_dump(const Graph& g, const char* after_pass) {
  if (debug_level() >= 2) std::cerr << "--- IR after " << after_pass << " ---\n" << g.print();
}

// Kahn's algorithm; stable (keeps file order among ready nodes).
static void topo_sort(Graph& g) {
  std::vector<int> producer(g.values.size(), -1);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int o : g.nodes[k].outputs) {
      if (producer[o] != -1)
        fail("value '{}' is produced by two nodes: {} and {}", g.value(o).name,
             g.nodes[producer[o]].label(), g.nodes[k].label());
      BRRR_CHECK(!g.value(o).constant.defined() || true, "");
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
  for (auto& v : g.values) v.producer = -1;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int o : g.nodes[k].outputs) g.value(o).producer = int(k);
}

static void bind_inputs(Graph& g, const InferOptions& opts) {
  for (const auto& [name, shape] : opts.input_shapes) {
    int id = g.find_value(name);
    if (id < 0 || std::find(g.inputs.begin(), g.inputs.end(), id) == g.inputs.end())
      fail("--shape names '{}', which is not an input of the model", name);
  }
  for (int id : g.inputs) {
    Value& v = g.value(id);
    auto it = opts.input_shapes.find(v.name);
    if (it != opts.input_shapes.end()) {
      const Shape& s = it->second;
      if (!v.shape.empty() || !v.dim_names.empty()) {
        if (s.size() != v.shape.size())
          fail("input '{}' has rank {} in the model but shape {} was given", v.name, v.shape.size(),
               shape_str(s));
        for (size_t d = 0; d < s.size(); ++d)
          if (v.shape[d] >= 0 && v.shape[d] != s[d])
            fail("input '{}' has dim {} fixed to {} in the model but {} was given", v.name, d,
                 v.shape[d], s[d]);
      }
      shape_numel(s);
      v.shape = s;
    } else {
      for (size_t d = 0; d < v.shape.size(); ++d)
        if (v.shape[d] < 0)
          fail("input '{}' has a symbolic dim '{}' (axis {}); give a shape, e.g. --shape {}:{}",
               v.name, d < v.dim_names.size() ? v.dim_names[d] : "?", d, v.name,
               fmt::join(std::vector<std::string>(v.shape.size(), "N"), "x"));
    }
    v.typed = true;
  }
}

void infer_shapes(Graph& g, const InferOptions& opts) {
  topo_sort(g);
  bind_inputs(g, opts);
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
    size_t out_bytes = 0;
    for (size_t o = 0; o < n.outputs.size() && o < ctx.outputs.size(); ++o) {
      Value& v = g.value(n.outputs[o]);
      v.dtype = ctx.outputs[o].first;
      v.shape = ctx.outputs[o].second;
      v.typed = true;
      out_bytes += size_t(shape_numel(v.shape)) * dtype_size(v.dtype);
    }
    // Fold when every input is a constant and the result is small.
    bool all_const = true;
    for (int i : n.inputs)
      if (i >= 0 && !g.value(i).constant.defined() && !n.def->shape_only) all_const = false;
    bool small = out_bytes <= opts.fold_budget_bytes || n.inputs.empty();
    if (all_const && small && n.def->foldable) {
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
    }
  }
  debug_dump(g, "infer_shapes");
}

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
  for (auto& v : g.values) v.producer = -1;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int o : g.nodes[k].outputs) g.value(o).producer = int(k);
  debug_dump(g, "eliminate_dead_nodes");
}

}  // namespace brrr
