// A channel shuffle as exporters write it (ShuffleNet's, with g groups):
//   Reshape x [N, C, H, W] -> [N, g, C/g, H, W], Transpose [0, 2, 1, 3, 4], Reshape -> [N, C, H, W]
// becomes Gather(x, idx, axis 1) with idx[c] = (c % g) * (C / g) + c / g, and a Slice of channels
// of a constant-index channel Gather becomes a Gather of those indices. ShuffleNet-v2 reads the
// shuffled channels only through two Slices (its next block's split): each is then one Gather of
// the Concat before the shuffle, a copy of whole H x W planes, where the plan ran a Transpose and
// two Slices over the Reshapes (copy kernels that fusion does not see through), and the Concat
// feeding a Gather can be planned in place.
#include <algorithm>
#include <numeric>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

namespace {

constexpr const char* kPass = "channel_shuffles";

bool static_shape(const Value& v, size_t rank) {
  if (!v.typed || v.shape.size() != rank) return false;
  return std::all_of(v.shape.begin(), v.shape.end(), [](int64_t d) { return d >= 0; });
}

// The producer node of v when it is op `op` (default domain), else -1.
int producer_of(const Graph& g, int v, const char* op) {
  if (v < 0) return -1;
  const int p = g.value(v).producer;
  if (p < 0) return -1;
  const Node& n = g.nodes[size_t(p)];
  return n.op == op && n.domain.empty() ? p : -1;
}

// The channel permutation of a shuffle ending at Reshape node r (its output), with x its input,
// or empty.
std::vector<int64_t> shuffle_at(const Graph& g, const std::vector<std::vector<int>>& readers,
                                const Node& r, int* x) {
  if (r.inputs.empty() || r.outputs.size() != 1 || r.outputs[0] < 0) return {};
  const int t_id = producer_of(g, r.inputs[0], "Transpose");
  if (t_id < 0) return {};
  const Node& t = g.nodes[size_t(t_id)];
  const std::vector<int64_t> perm = t.attr_ints("perm", {});
  if (perm != std::vector<int64_t>{0, 2, 1, 3, 4} || t.inputs.empty()) return {};
  const int r1_id = producer_of(g, t.inputs[0], "Reshape");
  if (r1_id < 0) return {};
  const Node& r1 = g.nodes[size_t(r1_id)];
  if (r1.inputs.empty() || r1.inputs[0] < 0) return {};
  const Value &in = g.value(r1.inputs[0]), &mid = g.value(r1.outputs[0]),
              &out = g.value(r.outputs[0]);
  // Each intermediate read by the next step alone and no graph output.
  for (int v : {r1.outputs[0], t.outputs[0]})
    if (readers[size_t(v)].size() != 1 || is_graph_output(g, v)) return {};
  if (!static_shape(in, 4) || !static_shape(mid, 5) || out.shape != in.shape) return {};
  const int64_t C = in.shape[1], groups = mid.shape[1];
  if (mid.shape[0] != in.shape[0] || groups <= 0 || mid.shape[2] * groups != C ||
      mid.shape[3] != in.shape[2] || mid.shape[4] != in.shape[3])
    return {};
  std::vector<int64_t> idx(static_cast<size_t>(C));
  const int64_t per = C / groups;
  for (int64_t c = 0; c < C; ++c) idx[size_t(c)] = (c % groups) * per + c / groups;
  *x = r1.inputs[0];
  return idx;
}

// The channels Slice s keeps of its 4-D input when it slices channels only (slice_view's start
// and step on axis 1, its output's channel count), or empty.
std::vector<int64_t> sliced_channels(const Graph& g, const Node& s) {
  std::vector<int64_t> start, step;
  if (s.inputs.empty() || s.outputs.size() != 1 || !slice_view(g, s, &start, &step).empty())
    return {};
  const Shape &in = g.value(s.inputs[0]).shape, &out = g.value(s.outputs[0]).shape;
  if (in.size() != 4 || out.size() != 4 || step[1] <= 0) return {};
  for (size_t a : {size_t(0), size_t(2), size_t(3)})
    if (start[a] != 0 || step[a] != 1 || out[a] != in[a]) return {};
  std::vector<int64_t> keep;
  for (int64_t k = 0; k < out[1]; ++k) keep.push_back(start[1] + k * step[1]);
  return keep;
}

}  // namespace

bool channel_shuffles(Graph& g) {
  bool changed = false;
  // 1. Shuffles become Gathers (the Reshape that ends one is replaced; the Transpose and the
  // first Reshape are left to dead-node elimination).
  {
    const auto readers = value_readers(g);
    std::vector<std::vector<Node>> replace(g.nodes.size());
    std::vector<bool> drop(g.nodes.size(), false);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const Node& r = g.nodes[k];
      if (r.op != "Reshape" || !r.domain.empty()) continue;
      int x = -1;
      std::vector<int64_t> idx = shuffle_at(g, readers, r, &x);
      if (idx.empty()) continue;
      const int iv = int64_constant(g, r.name + "_channels", std::move(idx));
      Node gather = make_node(g, "Gather", r.name.empty() ? std::string("shuffle") : r.name,
                              {x, iv}, r.outputs[0], {{"axis", int64_t(1)}});
      type_node(g, gather, kPass);
      replace[k].push_back(std::move(gather));
      changed = true;
    }
    if (changed) splice_nodes(g, replace, drop);
  }
  // 2. Slices of channels of a constant-index channel Gather become Gathers of their indices.
  bool sliced = false;
  {
    std::vector<std::vector<Node>> replace(g.nodes.size());
    std::vector<bool> drop(g.nodes.size(), false);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const Node& s = g.nodes[k];
      if (s.op != "Slice" || !s.domain.empty() || s.inputs.empty() || s.outputs.size() != 1 ||
          s.outputs[0] < 0)
        continue;
      const int gid = producer_of(g, s.inputs[0], "Gather");
      if (gid < 0) continue;
      const Node& ga = g.nodes[size_t(gid)];
      const int64_t axis = ga.attr_int("axis", 0);
      if (ga.inputs.size() != 2 || ga.inputs[0] < 0 || (axis != 1 && axis != -3)) continue;
      const Value& src = g.value(ga.inputs[0]);
      const std::vector<int64_t> idx = const_ints(g, ga, 1).value_or(std::vector<int64_t>{});
      const Value& gv = g.value(s.inputs[0]);
      if (!static_shape(src, 4) || !static_shape(gv, 4) || idx.size() != size_t(gv.shape[1]))
        continue;
      if (std::any_of(idx.begin(), idx.end(),
                      [&](int64_t i) { return i < 0 || i >= src.shape[1]; }))
        continue;
      const std::vector<int64_t> keep = sliced_channels(g, s);
      if (keep.empty() || keep.back() >= gv.shape[1]) continue;
      std::vector<int64_t> sub;
      for (int64_t c : keep) sub.push_back(idx[size_t(c)]);
      const int iv = int64_constant(g, s.name + "_channels", std::move(sub));
      Node gather = make_node(g, "Gather", s.name.empty() ? std::string("slice") : s.name,
                              {ga.inputs[0], iv}, s.outputs[0],
                              {{"axis", int64_t(1)}});
      type_node(g, gather, kPass);
      replace[k].push_back(std::move(gather));
      sliced = true;
    }
    if (sliced) splice_nodes(g, replace, drop);
  }
  if (changed || sliced) eliminate_dead_nodes(g);
  return changed || sliced;
}

}  // namespace brrr
