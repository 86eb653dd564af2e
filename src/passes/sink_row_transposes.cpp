// A Transpose that keeps the last axis, read only by a MatMul with a 2-D constant weight (and
// that product's row-wise bias Add), moves after them: a product row depends on its input row
// alone, so permuting rows before or after is the same. ViT's batch_first MultiheadAttention
// transposes x [B, S, E] to [S, B, E] for its in-projection; moved past it, the Transpose joins
// the view chain that the fused attention reads q, k and v through (plan/attention.cpp), so
// neither Transpose runs as a kernel.
#include <algorithm>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

namespace {

// The one node reading v (not a graph output), else -1.
int sole_reader(const Graph& g, int v, const std::vector<std::vector<int>>& readers) {
  if (readers[size_t(v)].size() != 1 ||
      std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end())
    return -1;
  return readers[size_t(v)][0];
}

// A Transpose whose perm moves rows only: the last axis stays, and two axes longer than 1 swap
// order. One that only moves axes of 1 (ViT's [1, S, E] -> [S, 1, E] at batch 1) is a reshape
// and stays: sunk there it measured slower on the H200 (ViT-B/16 bf16 batch 1, fastest of 200
// runs: 736 us against 713-714 us kept), with nothing to gain.
bool permutes_rows(const Node& t, const Shape& in) {
  const size_t rank = in.size();
  if (op_id(t) != OpId::Transpose || !t.domain.empty() || t.inputs.size() != 1 || rank < 2)
    return false;
  std::vector<int64_t> perm;
  try {
    perm = t.attr_ints("perm", {});
  } catch (const Error&) {
    return false;
  }
  if (perm.size() != rank || perm.back() != int64_t(rank) - 1) return false;
  int64_t prev = -1;  // the last axis longer than 1 taken so far
  for (int64_t p : perm) {
    if (p < 0 || p >= int64_t(rank)) return false;
    if (in[size_t(p)] == 1) continue;
    if (p < prev) return true;
    prev = p;
  }
  return false;
}

// Add(y, bias) with a constant bias that is the same for every row (1s but for the last dim)
// and leaves y's shape: the other input, else -1.
int row_bias(const Graph& g, const Node& a, int y) {
  if (op_id(a) != OpId::Add || !a.domain.empty() || a.inputs.size() != 2) return -1;
  const int b = a.inputs[0] == y ? a.inputs[1] : a.inputs[1] == y ? a.inputs[0] : -1;
  if (b < 0 || b == y || !g.value(b).constant.defined()) return -1;
  const Shape& bs = g.value(b).shape;
  const Shape& ys = g.value(y).shape;
  if (bs.size() > ys.size() || g.value(a.outputs[0]).shape != ys) return -1;
  for (size_t i = 0; i + 1 < bs.size(); ++i)
    if (bs[i] != 1) return -1;
  return b;
}

}  // namespace

bool sink_row_transposes(Graph& g) {
  const std::vector<std::vector<int>> readers = value_readers(g);
  std::vector<int> after(g.nodes.size(), -1);  // Transpose node -> the node it now follows
  for (size_t t = 0; t < g.nodes.size(); ++t) {
    Node& tr = g.nodes[t];
    if (tr.inputs.empty() || tr.inputs[0] < 0 || tr.outputs.size() != 1) continue;
    const int x = tr.inputs[0], xt = tr.outputs[0];
    if (!g.value(x).typed || !permutes_rows(tr, g.value(x).shape)) continue;
    const int m = sole_reader(g, xt, readers);
    if (m < 0) continue;
    Node& mm = g.nodes[size_t(m)];
    if (op_id(mm) != OpId::MatMul || !mm.domain.empty() || mm.inputs.size() != 2 ||
        mm.inputs[0] != xt || mm.inputs[1] == xt || mm.outputs.size() != 1 ||
        !g.value(mm.inputs[1]).constant.defined() || g.value(mm.inputs[1]).shape.size() != 2)
      continue;
    // The last row-wise node: the MatMul, or its bias Add.
    int last = m;
    const int a = sole_reader(g, mm.outputs[0], readers);
    if (a >= 0 && row_bias(g, g.nodes[size_t(a)], mm.outputs[0]) >= 0) last = a;
    // Only where views read the result (q, k and v's head split): elsewhere the Transpose would
    // run as a kernel after the product, which may be wider than x.
    const int y = g.nodes[size_t(last)].outputs[0];
    bool views = !readers[size_t(y)].empty() &&
                 std::find(g.outputs.begin(), g.outputs.end(), y) == g.outputs.end();
    for (int r : readers[size_t(y)]) views = views && view_of(g.nodes[size_t(r)]) != ViewKind::None;
    if (!views) continue;
    // Rewire: the MatMul reads x; the rows come out in x's order into xt (reshaped to them);
    // the Transpose then writes the value the last node wrote, for its readers as before.
    Shape rows = g.value(x).shape;
    rows.back() = g.value(mm.outputs[0]).shape.back();
    mm.inputs[0] = x;
    if (last != m) g.value(mm.outputs[0]).shape = rows;
    g.value(xt).shape = rows;
    g.value(xt).dtype = g.value(y).dtype;
    g.nodes[size_t(last)].outputs[0] = xt;
    tr.inputs[0] = xt;
    tr.outputs[0] = y;
    after[t] = last;
  }
  if (std::all_of(after.begin(), after.end(), [](int n) { return n < 0; })) return false;
  // Each moved Transpose goes right after the node it now reads, keeping the order topological.
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  std::vector<std::vector<int>> follows(g.nodes.size());
  for (size_t t = 0; t < after.size(); ++t)
    if (after[t] >= 0) follows[size_t(after[t])].push_back(int(t));
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (after[k] >= 0) continue;
    nodes.push_back(std::move(g.nodes[k]));
    for (int t : follows[k]) nodes.push_back(std::move(g.nodes[size_t(t)]));
  }
  g.nodes = std::move(nodes);
  relink_producers(g);
  return true;
}

}  // namespace brrr
