// Distributes channel-linear consumers over a channel Concat so the concat is never materialized:
//   Conv(Concat(a, b), W, B)  ->  Add(Conv(a, W[:, :Ca]), Conv(b, W[:, Ca:], B))   (group 1)
//   Pool(Concat(a, b))        ->  Concat(Pool(a), Pool(b))                         (per channel)
// The CPU fusion pass turns each Add into the next conv's sum post-op (squeezenet's fire modules).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

namespace {

struct Uses {
  std::vector<std::vector<int>> consumers;  // value id -> consumer node indices (one per use)
  std::set<int> outputs;
};

Uses find_uses(const Graph& g) {
  Uses u;
  u.consumers = value_readers(g);
  u.outputs.insert(g.outputs.begin(), g.outputs.end());
  return u;
}

bool static_f32(const Value& v) {
  if (!v.typed || v.dtype != DType::f32 || v.shape.size() < 3) return false;
  for (int64_t d : v.shape)
    if (d < 0) return false;
  return true;
}

// The parts of a Concat along channels (axis 1) of static float32 activations, or empty.
std::vector<int> channel_parts(const Graph& g, const Node& n) {
  if (library_of(n) != LibraryKind::Concat || !n.domain.empty() || n.outputs.size() != 1 || n.outputs[0] < 0 ||
      n.inputs.size() < 2)
    return {};
  const Value& out = g.value(n.outputs[0]);
  if (!static_f32(out)) return {};
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += int64_t(out.shape.size());
  if (axis != 1) return {};
  for (int i : n.inputs) {
    if (i < 0) return {};
    const Value& v = g.value(i);
    if (!static_f32(v) || v.constant.defined() || v.shape.size() != out.shape.size() ||
        v.shape[1] == 0)
      return {};
  }
  return n.inputs;
}

// Conv node c reads value x as its data input only, with group 1 and constant weights whose
// input channels are x's.
bool splittable_conv(const Graph& g, const Node& c, int x) {
  if (library_of(c) != LibraryKind::Conv || !c.domain.empty() || c.outputs.size() != 1 || c.outputs[0] < 0)
    return false;
  if (c.inputs.size() < 2 || c.inputs[0] != x || c.inputs[1] < 0 || c.attr_int("group", 1) != 1)
    return false;
  for (size_t i = 1; i < c.inputs.size(); ++i)
    if (c.inputs[i] == x) return false;
  const Value& w = g.value(c.inputs[1]);
  const Shape& xs = g.value(x).shape;
  return w.constant.defined() && w.dtype == DType::f32 && w.shape.size() == xs.size() &&
         w.shape[1] == xs[1] && static_f32(g.value(c.outputs[0]));
}

// A concat's output value v disappears when every use is a splittable conv and the partial sums
// (each conv's output once per part after the first) move fewer bytes than the concat would.
bool absorbable(const Graph& g, const Uses& u, int v, size_t parts) {
  if (u.outputs.count(v) || u.consumers[size_t(v)].empty()) return false;
  int64_t partial = 0;
  for (int c : u.consumers[size_t(v)]) {
    if (!splittable_conv(g, g.nodes[size_t(c)], v)) return false;
    partial += shape_numel(g.value(g.nodes[size_t(c)].outputs[0]).shape);
  }
  return partial * int64_t(parts - 1) < shape_numel(g.value(v).shape);
}

// Pool node p (without an Indices output) is v's only consumer.
bool per_channel_pool(const Graph& g, const Uses& u, const Node& p, int v) {
  if (library_of(p) != LibraryKind::Pool || !p.domain.empty() || p.inputs.size() != 1 ||
      p.outputs.empty() || p.outputs[0] < 0)
    return false;
  for (size_t o = 1; o < p.outputs.size(); ++o)
    if (p.outputs[o] >= 0 && !g.value(p.outputs[o]).name.empty()) return false;
  return !u.outputs.count(v) && u.consumers[size_t(v)].size() == 1 &&
         static_f32(g.value(p.outputs[0]));
}

// Types node n's outputs with its op's shape inference (inputs are typed already).
void infer_node(Graph& g, Node& n) {
  n.def = OpTable::get().find(n.domain, n.op);
  BRRR_ASSERT(n.def != nullptr, "distribute_concat made an unknown op");
  InferCtx ctx{g, n, {}};
  n.def->infer(ctx);
  BRRR_ASSERT(ctx.outputs.size() >= n.outputs.size(), "distribute_concat: untyped output");
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    Value& v = g.value(n.outputs[o]);
    v.dtype = ctx.outputs[o].first;
    v.shape = ctx.outputs[o].second;
    v.typed = true;
  }
}

// Collects the rewritten node list. A new node goes right after the last original node that
// produces one of its inputs, so a partial conv (or pool) reads its part while it is in cache.
class Placer {
 public:
  explicit Placer(Graph& g) : g_(g), after_(g.nodes.size() + 1), anchor_(g.values.size(), 0) {
    for (size_t k = 0; k < g.nodes.size(); ++k)
      for (int o : g.nodes[k].outputs)
        if (o >= 0) anchor_[size_t(o)] = int(k) + 1;
  }

  // Adds a node whose output is `out`, or a fresh value named after the node.
  int add(const Node& like, const std::string& op, const std::string& name, std::vector<int> inputs,
          int out = -1) {
    Node n;
    n.op = op;
    n.name = name;
    n.inputs = std::move(inputs);
    if (op == like.op) n.attrs = like.attrs;
    if (out < 0) out = g_.add_value(fresh_name(g_, name + "_out"));
    n.outputs = {out};
    infer_node(g_, n);
    int at = 0;
    for (int i : n.inputs)
      if (i >= 0 && size_t(i) < anchor_.size()) at = std::max(at, anchor_[size_t(i)]);
    anchor_.resize(g_.values.size(), 0);
    anchor_[size_t(out)] = at;
    after_[size_t(at)].push_back(std::move(n));
    return out;
  }

  // The original nodes (but those in `drop`) with the new ones in place.
  void finish(const std::set<int>& drop) {
    std::vector<Node> nodes;
    for (Node& n : after_[0]) nodes.push_back(std::move(n));
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      if (!drop.count(int(k))) nodes.push_back(std::move(g_.nodes[k]));
      for (Node& n : after_[k + 1]) nodes.push_back(std::move(n));
    }
    g_.nodes = std::move(nodes);
  }

 private:
  Graph& g_;
  std::vector<std::vector<Node>> after_;  // [k]: new nodes after original node k - 1
  std::vector<int> anchor_;               // value -> 1 + its (original) producer, 0 if none
};

void set_producers(Graph& g) {
  relink_producers(g);
}

// Pool(Concat(parts)) -> Concat(Pool(part) for each part) where the pooled concat is absorbable.
bool push_concats_below_pools(Graph& g) {
  Uses u = find_uses(g);
  std::map<int, std::vector<int>> pool_parts;  // pool node -> the concat's parts
  for (const Node& n : g.nodes) {
    std::vector<int> parts = channel_parts(g, n);
    if (parts.empty()) continue;
    int v = n.outputs[0];
    if (u.consumers[size_t(v)].size() != 1) continue;
    int p = u.consumers[size_t(v)][0];
    if (!per_channel_pool(g, u, g.nodes[size_t(p)], v)) continue;
    if (!absorbable(g, u, g.nodes[size_t(p)].outputs[0], parts.size())) continue;
    pool_parts[p] = parts;
  }
  if (pool_parts.empty()) return false;
  Placer place(g);
  std::set<int> drop;
  for (const auto& [p, parts] : pool_parts) {
    const Node& pool = g.nodes[size_t(p)];
    drop.insert(p);
    std::vector<int> pooled;
    for (size_t i = 0; i < parts.size(); ++i)
      pooled.push_back(
          place.add(pool, pool.op, fmt::format("{}/part{}", pool.name, i), {parts[i]}));
    Node cat;
    cat.op = "Concat";
    cat.attrs["axis"] = int64_t(1);
    place.add(cat, "Concat", pool.name + "/concat", pooled, pool.outputs[0]);
  }
  place.finish(drop);
  eliminate_dead_nodes(g);  // the old concats
  return true;
}

// Conv(Concat(parts), W, B) -> partial convs over W's channel slices, summed by Adds (the last
// partial carries the bias); each Add's other input is computed before its partial conv, so the
// fusion pass folds the Add into that conv as a sum post-op.
bool split_convs_over_concats(Graph& g) {
  Uses u = find_uses(g);
  std::map<int, std::vector<int>> concat_parts;  // concat node -> parts
  std::map<int, int> conv_concat;                // conv node -> its concat node
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    std::vector<int> parts = channel_parts(g, g.nodes[k]);
    int v = parts.empty() ? -1 : g.nodes[k].outputs[0];
    if (v < 0 || !absorbable(g, u, v, parts.size())) continue;
    concat_parts[int(k)] = parts;
    for (int c : u.consumers[size_t(v)]) conv_concat[c] = int(k);
  }
  if (concat_parts.empty()) return false;
  Placer place(g);
  std::set<int> drop;
  for (const auto& [k, cat] : conv_concat) {
    drop.insert(k);
    drop.insert(cat);
    const Node& conv = g.nodes[size_t(k)];
    const std::vector<int>& parts = concat_parts[cat];
    const Tensor w = g.value(conv.inputs[1]).constant;
    int bias = conv.inputs.size() > 2 ? conv.inputs[2] : -1;
    std::string wname = g.value(conv.inputs[1]).name;
    // Summed in the order the parts are computed, so each partial conv adds the previous ones.
    std::vector<int64_t> off(parts.size() + 1, 0);
    std::vector<size_t> order(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      off[i + 1] = off[i] + g.value(parts[i]).shape[1];
      order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return g.value(parts[a]).producer < g.value(parts[b]).producer;
    });
    int sum = -1;
    for (size_t j = 0; j < parts.size(); ++j) {
      size_t i = order[j];
      Tensor slice = w.slice(1, off[i], off[i + 1], 1).contiguous();
      int wv = g.add_value(fresh_name(g, fmt::format("{}/part{}", wname, i)));
      Value& wval = g.value(wv);
      wval.dtype = slice.dtype();
      wval.shape = slice.shape();
      wval.constant = slice;
      wval.typed = true;
      bool last = j + 1 == parts.size();
      std::vector<int> ins{parts[i], wv};
      if (last && bias >= 0) ins.push_back(bias);
      int partial = place.add(conv, "Conv", fmt::format("{}/part{}", conv.name, i), ins);
      if (sum < 0) {
        sum = partial;
        continue;
      }
      sum = place.add(conv, "Add", fmt::format("{}/sum{}", conv.name, i), {sum, partial},
                      last ? conv.outputs[0] : -1);
    }
  }
  place.finish(drop);
  set_producers(g);
  return true;
}

}  // namespace

bool distribute_concat(Graph& g) {
  bool pooled = push_concats_below_pools(g);
  bool split = split_convs_over_concats(g);
  return pooled || split;
}

}  // namespace brrr
