// The rotary embedding as Hugging Face's models write it, x * cos + rotate_half(x) * sin with
// rotate_half(x) = Concat(-x[..., D/2:], x[..., :D/2]) on the last axis, rewritten over x viewed
// as [..., 2, D/2] (the two halves as an axis of their own):
//   x5 = Reshape(x, [..., 2, h])
//   rot = Where([[1], [0]], x5[..., 1:2, :], x5[..., 0:1, :]) * [[-1], [1]]
//   y = Reshape(x5 * Reshape(cos) + rot * Reshape(sin), shape(x))
// Every node of it is a view or pointwise, so with lazy views (Target::lazy_views) the fuser
// computes it in one kernel that reads the projection's output through strides; before, the
// Slices, the Neg, the Concat (a library kernel) and the products were about ten kernels per
// layer of Llama (q and k). The same values, rounded at the same points.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

namespace {

constexpr const char* kPass = "split_rotary_halves";

// The constant int64 values of input i of n, or nullopt.
std::optional<std::vector<int64_t>> ints(const Graph& g, const Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] < 0) return std::nullopt;
  const Value& v = g.value(n.inputs[i]);
  if (!v.constant.defined() || (v.dtype != DType::i64 && v.dtype != DType::i32)) return std::nullopt;
  const Tensor c = v.constant.contiguous();  // exactly: INT64_MAX ends are common
  std::vector<int64_t> out;
  for (int64_t k = 0; k < c.numel(); ++k)
    out.push_back(v.dtype == DType::i64 ? c.data<int64_t>()[k] : int64_t(c.data<int32_t>()[k]));
  return out;
}

// Where node s (a Slice of the last axis of x, unit step) starts, or -1.
int64_t last_axis_start(const Graph& g, const Node& s, int x) {
  if (op_id(s) != OpId::Slice || !s.domain.empty() || s.inputs.size() < 3 || s.inputs[0] != x ||
      s.outputs.size() != 1)
    return -1;
  const int64_t rank = int64_t(g.value(x).shape.size()), dim = g.value(x).shape.back();
  auto starts = ints(g, s, 1), ends = ints(g, s, 2);
  auto axes = s.inputs.size() > 3 && s.inputs[3] >= 0 ? ints(g, s, 3) : std::vector<int64_t>{rank - 1};
  auto steps = s.inputs.size() > 4 && s.inputs[4] >= 0 ? ints(g, s, 4) : std::vector<int64_t>{1};
  if (!starts || !ends || !axes || !steps || starts->size() != 1 || axes->size() != 1 ||
      steps->size() != 1 || (*steps)[0] != 1 || ((*axes)[0] != -1 && (*axes)[0] != rank - 1))
    return -1;
  int64_t b = (*starts)[0];
  if (b < 0) b += dim;
  return std::clamp<int64_t>(b, 0, dim);
}

// The one reader of value v (not a graph output), or -1.
int sole_reader(const Graph& g, const std::vector<std::vector<int>>& readers, int v) {
  return readers[size_t(v)].size() == 1 && !is_graph_output(g, v) ? readers[size_t(v)][0] : -1;
}

struct Rotary {
  int x = -1, cos = -1, sin = -1;
  std::vector<int> nodes;  // the matched nodes (dropped), the Add last
};

// The rotary pattern ending at Add node a, if it is one.
std::optional<Rotary> match(const Graph& g, const std::vector<std::vector<int>>& readers, int a) {
  const Node& add = g.nodes[size_t(a)];
  if (op_id(add) != OpId::Add || !add.domain.empty() || add.inputs.size() != 2 || add.outputs.size() != 1)
    return std::nullopt;
  const int y = add.outputs[0];
  for (int side = 0; side < 2; ++side) {
    const int mx = g.value(add.inputs[size_t(side)]).producer;
    const int mr = g.value(add.inputs[size_t(1 - side)]).producer;
    if (mx < 0 || mr < 0 || mx == mr) return std::nullopt;
    const Node& mulx = g.nodes[size_t(mx)];
    const Node& mulr = g.nodes[size_t(mr)];
    if (op_id(mulx) != OpId::Mul || op_id(mulr) != OpId::Mul || !mulx.domain.empty() ||
        !mulr.domain.empty() || mulx.inputs.size() != 2 || mulr.inputs.size() != 2 ||
        sole_reader(g, readers, mulx.outputs[0]) != a || sole_reader(g, readers, mulr.outputs[0]) != a)
      continue;
    // mulr = Concat(Neg(x2), x1) * sin, either operand order.
    for (int ro = 0; ro < 2; ++ro) {
      const int cat_v = mulr.inputs[size_t(ro)], sin = mulr.inputs[size_t(1 - ro)];
      const int c = g.value(cat_v).producer;
      if (c < 0 || sole_reader(g, readers, cat_v) != mr) continue;
      const Node& cat = g.nodes[size_t(c)];
      if (cat.op != "Concat" || !cat.domain.empty() || cat.inputs.size() != 2)
        continue;
      const int ng = g.value(cat.inputs[0]).producer, s1 = g.value(cat.inputs[1]).producer;
      if (ng < 0 || s1 < 0 || sole_reader(g, readers, cat.inputs[0]) != c ||
          sole_reader(g, readers, cat.inputs[1]) != c)
        continue;
      const Node& neg = g.nodes[size_t(ng)];
      if (neg.op != "Neg" || !neg.domain.empty() || neg.inputs.size() != 1) continue;
      const int s2 = g.value(neg.inputs[0]).producer;
      if (s2 < 0 || sole_reader(g, readers, neg.inputs[0]) != ng) continue;
      const int x = g.nodes[size_t(s2)].inputs.empty() ? -1 : g.nodes[size_t(s2)].inputs[0];
      if (x < 0) continue;
      const Shape& xs = g.value(x).shape;
      const DType dt = g.value(x).dtype;
      if (xs.empty() || xs.back() < 2 || xs.back() % 2 != 0 ||
          (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16))
        continue;
      const int64_t d = xs.back(), h = d / 2;
      int64_t axis = 0;
      try {
        axis = cat.attr_int("axis", 0);
      } catch (const Error&) {
        continue;
      }
      if (axis != -1 && axis != int64_t(xs.size()) - 1) continue;
      // x2 = x[..., h:], x1 = x[..., :h], each h wide.
      if (last_axis_start(g, g.nodes[size_t(s2)], x) != h || last_axis_start(g, g.nodes[size_t(s1)], x) != 0 ||
          g.value(neg.inputs[0]).shape.back() != h || g.value(cat.inputs[1]).shape.back() != h)
        continue;
      // mulx = x * cos, either order.
      const int cos = mulx.inputs[0] == x ? mulx.inputs[1] : mulx.inputs[1] == x ? mulx.inputs[0] : -1;
      if (cos < 0 || cos == x) continue;
      // cos and sin: the same type, last axis D, broadcasting to x; the result x's shape.
      bool ok = g.value(y).shape == xs && g.value(y).dtype == dt;
      for (int t : {cos, sin}) {
        const Shape& ts = g.value(t).shape;
        ok = ok && g.value(t).dtype == dt && !ts.empty() && ts.size() <= xs.size() && ts.back() == d;
        for (size_t i = 1; ok && i < ts.size(); ++i) {
          const int64_t a1 = ts[ts.size() - 1 - i], b1 = xs[xs.size() - 1 - i];
          ok = a1 == b1 || a1 == 1;
        }
      }
      if (!ok) continue;
      Rotary r;
      r.x = x;
      r.cos = cos;
      r.sin = sin;
      r.nodes = {s2, s1, ng, c, mx, mr, a};
      return r;
    }
  }
  return std::nullopt;
}

}  // namespace

bool split_rotary_halves(Graph& g) {
  const std::vector<std::vector<int>> readers = value_readers(g);
  std::vector<std::vector<Node>> replace(g.nodes.size());
  std::vector<bool> drop(g.nodes.size(), false);
  bool changed = false;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    std::optional<Rotary> r = match(g, readers, int(k));
    if (!r || std::any_of(r->nodes.begin(), r->nodes.end(), [&](int m) { return drop[size_t(m)]; }))
      continue;
    const Node& add = g.nodes[k];
    const int y = add.outputs[0];
    const Shape xs = g.value(r->x).shape;
    const DType dt = g.value(r->x).dtype;
    const int64_t h = xs.back() / 2;
    const std::string base = fresh_name(g, (add.name.empty() ? std::string("rotary") : add.name) + "/halves");
    auto halves = [&](int v, const std::string& what) {  // [..., D] -> [..., 2, h]
      Shape s = g.value(v).shape;
      s.back() = 2;
      s.push_back(h);
      return make_node(g, "Reshape", base + "/" + what,
                  {v, int64_constant(g, base + "/" + what + "_shape", std::vector<int64_t>(s.begin(), s.end()))});
    };
    auto slice_half = [&](int x5, int64_t which, const std::string& what) {
      const int64_t axis = int64_t(xs.size()) - 1;  // the new [2] axis of x5
      return make_node(g, "Slice", base + "/" + what,
                  {x5, int64_constant(g, base + "/" + what + "_starts", {which}),
                   int64_constant(g, base + "/" + what + "_ends", {which + 1}),
                   int64_constant(g, base + "/" + what + "_axes", {axis})});
    };
    Tensor first = Tensor::zeros(DType::boolean, {2, 1});
    static_cast<uint8_t*>(first.raw())[0] = 1;
    const int first_v = add_constant(g, base + "/first", first);
    const int sign_v = add_constant(g, base + "/sign",
                                    Tensor::from_vector<float>({2, 1}, {-1.0f, 1.0f}).cast(dt));
    std::vector<Node>& out = replace[k];
    out.push_back(halves(r->x, "x"));
    const int x5 = out.back().outputs[0];
    out.push_back(slice_half(x5, 1, "hi"));
    const int hi = out.back().outputs[0];
    out.push_back(slice_half(x5, 0, "lo"));
    const int lo = out.back().outputs[0];
    out.push_back(make_node(g, "Where", base + "/swap", {first_v, hi, lo}));
    out.push_back(make_node(g, "Mul", base + "/signed", {out.back().outputs[0], sign_v}));
    const int rot = out.back().outputs[0];
    out.push_back(halves(r->cos, "cos"));
    const int c5 = out.back().outputs[0];
    out.push_back(halves(r->sin, "sin"));
    const int s5 = out.back().outputs[0];
    out.push_back(make_node(g, "Mul", base + "/xcos", {x5, c5}));
    const int xc = out.back().outputs[0];
    out.push_back(make_node(g, "Mul", base + "/rotsin", {rot, s5}));
    const int rs = out.back().outputs[0];
    out.push_back(make_node(g, "Add", base + "/sum", {xc, rs}));
    const int y5 = out.back().outputs[0];
    out.push_back(make_node(g, "Reshape", base + "/y",
                       {y5, int64_constant(g, base + "/y_shape", std::vector<int64_t>(xs.begin(), xs.end()))}, y));
    for (Node& m : out) type_node(g, m, kPass);
    BRRR_ASSERT(g.value(y).shape == xs && g.value(y).dtype == dt, "split_rotary_halves changed an output");
    for (int m : r->nodes) drop[size_t(m)] = true;
    drop[k] = false;  // replaced in place of the Add (its inputs all come before it)
    changed = true;
  }
  if (!changed) return false;
  splice_nodes(g, replace, drop);
  return true;
}

}  // namespace brrr
