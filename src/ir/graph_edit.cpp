#include "ir/graph_edit.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "brrr/error.hpp"
#include "brrr/op.hpp"

namespace brrr {

std::string fresh_name(const Graph& g, const std::string& base) {
  std::string name = base;
  for (int k = 1; g.find_value(name) >= 0; ++k) name = fmt::format("{}_{}", base, k);
  return name;
}

void relink_producers(Graph& g) {
  for (auto& v : g.values) v.producer = -1;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int o : g.nodes[k].outputs)
      if (o >= 0) g.value(o).producer = int(k);
}

std::vector<std::vector<int>> value_readers(const Graph& g) {
  std::vector<std::vector<int>> readers(g.values.size());
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int i : g.nodes[k].inputs)
      if (i >= 0) readers[size_t(i)].push_back(int(k));
  return readers;
}

bool is_graph_output(const Graph& g, int v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

Node make_node(Graph& g, const char* op, const std::string& name, std::vector<int> inputs, int out,
               std::map<std::string, AttrValue> attrs) {
  Node n;
  n.op = op;
  n.name = name;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.outputs = {out >= 0 ? out : g.add_value(fresh_name(g, name + "_out"))};
  return n;
}

void read_through(Graph& g, const std::vector<int>& same) {
  for (Node& m : g.nodes)
    for (int& i : m.inputs)
      if (i >= 0 && size_t(i) < same.size() && same[size_t(i)] >= 0) i = same[size_t(i)];
}

void splice_nodes(Graph& g, std::vector<std::vector<Node>>& replace, const std::vector<bool>& drop) {
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (k < drop.size() && drop[k]) continue;
    if (k >= replace.size() || replace[k].empty()) {
      nodes.push_back(std::move(g.nodes[k]));
      continue;
    }
    for (Node& m : replace[k]) nodes.push_back(std::move(m));
  }
  g.nodes = std::move(nodes);
  relink_producers(g);
}

int add_constant(Graph& g, const std::string& base, Tensor t) {
  const int v = g.add_value(fresh_name(g, base));
  Value& val = g.value(v);
  val.dtype = t.dtype();
  val.shape = t.shape();
  val.constant = std::move(t);
  val.typed = true;
  return v;
}

int int64_constant(Graph& g, const std::string& base, std::vector<int64_t> v) {
  Shape s{int64_t(v.size())};
  return add_constant(g, base, Tensor::from_vector<int64_t>(s, v));
}

void type_node(Graph& g, Node& n, const char* pass) {
  n.def = OpTable::get().find(n.domain, n.op);
  if (!n.def)
    internal_assert_failed("n.def != nullptr", __FILE__, __LINE__,
                           fmt::format("{} made an unknown op {}", pass, n.op));
  InferCtx ctx{g, n, {}};
  n.def->infer(ctx);
  if (ctx.outputs.size() != n.outputs.size())
    internal_assert_failed("ctx.outputs.size() == n.outputs.size()", __FILE__, __LINE__,
                           fmt::format("{}: {} typed {} of {} outputs", pass, n.op,
                                       ctx.outputs.size(), n.outputs.size()));
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    Value& v = g.value(n.outputs[o]);
    v.dtype = ctx.outputs[o].first;
    v.shape = ctx.outputs[o].second;
    v.typed = true;
  }
}

}  // namespace brrr
