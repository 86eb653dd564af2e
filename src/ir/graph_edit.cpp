#include "ir/graph_edit.hpp"

#include <fmt/format.h>

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
