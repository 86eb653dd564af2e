#include "ir/graph_edit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

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

// A constant int64 / int32 input's values, or nullopt when input i is absent or not constant.
std::optional<std::vector<int64_t>> const_ints(const Graph& g, const Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] < 0) return std::nullopt;
  const Value& v = g.value(n.inputs[i]);
  if (!v.constant.defined() || (v.dtype != DType::i64 && v.dtype != DType::i32)) return std::nullopt;
  return v.constant.to_int64_vector();
}

// Slice as a view (Target::generated_views): per input axis the first element taken and the step
// ("" when it can be one, else why not). Starts follow ONNX's rules: negative counts from the
// end, then clamped to [0, dim] (step > 0) or [0, dim - 1] (step < 0); the element counts are the
// output's shape, which shape inference derived by the same rules.
std::string slice_view(const Graph& g, const Node& n, std::vector<int64_t>* start,
                       std::vector<int64_t>* step) {
  const Shape& xs = g.value(n.inputs[0]).shape;
  const int64_t rank = int64_t(xs.size());
  std::vector<int64_t> starts, axes, steps;
  if (n.has_attr("starts")) {  // Slice-1: attributes
    starts = n.attr_ints("starts");
    axes = n.attr_ints("axes");
  } else {
    auto s = const_ints(g, n, 1), e = const_ints(g, n, 2);
    if (!s || !e) return "Slice with computed starts or ends";
    starts = *s;
    if (n.inputs.size() > 3 && n.inputs[3] >= 0) {
      auto a = const_ints(g, n, 3);
      if (!a) return "Slice with computed axes";
      axes = *a;
    }
    if (n.inputs.size() > 4 && n.inputs[4] >= 0) {
      auto st = const_ints(g, n, 4);
      if (!st) return "Slice with computed steps";
      steps = *st;
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (axes.size() != starts.size() || (!steps.empty() && steps.size() != starts.size()))
    return "Slice with mismatched starts, axes and steps";
  start->assign(size_t(rank), 0);
  step->assign(size_t(rank), 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank) return "Slice axis out of range";
    const int64_t d = xs[size_t(a)], st = steps.empty() ? 1 : steps[i];
    if (st == 0) return "Slice step 0";
    int64_t b = starts[i];
    if (b < 0) b = b < -d ? 0 : b + d;
    b = st > 0 ? std::min(b, d) : std::min(b, d - 1);
    (*start)[size_t(a)] = std::max<int64_t>(b, 0);
    (*step)[size_t(a)] = st;
  }
  return "";
}

}  // namespace brrr
