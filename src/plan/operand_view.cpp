// Strided views of GEMM operands (plan/operand_view.hpp): a walk back from the operand through
// view-like nodes, then the strides computed forward from the source buffer.
#include "plan/operand_view.hpp"

#include <algorithm>
#include <optional>

#include "brrr/op.hpp"

namespace brrr::plan {

std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

bool is_row_major(const Shape& dims, const std::vector<int64_t>& strides) {
  if (strides.empty()) return true;
  std::vector<int64_t> want = row_major_strides(dims);
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != 1 && strides[i] != want[i]) return false;
  return true;
}

namespace {

// A Transpose's perm for an input of `rank` dims (reversed when absent), or nullopt when the
// attribute is not a list of ints of that length.
std::optional<std::vector<int64_t>> perm_of(const Node& n, size_t rank) {
  std::vector<int64_t> perm;
  try {
    perm = n.attr_ints("perm", {});
  } catch (const Error&) {
    return std::nullopt;
  }
  if (perm.empty())
    for (size_t i = rank; i-- > 0;) perm.push_back(int64_t(i));
  if (perm.size() != rank) return std::nullopt;
  return perm;
}

// The data types a view may have: float32, and with `float16` bfloat16 and float16 too.
bool view_dtype(DType t, bool float16) {
  return t == DType::f32 || (float16 && (t == DType::bf16 || t == DType::f16));
}

// The one-element float constant input of a Mul other than `x`, when the Mul scales x.
std::optional<double> mul_scale(const Graph& g, const Node& n, int x, bool float16) {
  if (n.inputs.size() != 2) return std::nullopt;
  int other = n.inputs[0] == x ? n.inputs[1] : n.inputs[1] == x ? n.inputs[0] : -1;
  if (other < 0 || other == x) return std::nullopt;
  const Value& c = g.value(other);
  if (!c.constant.defined() || c.constant.numel() != 1 || !view_dtype(c.dtype, float16))
    return std::nullopt;
  return c.constant.at_double(0);
}

// A Gather of one constant index (a 0-d or one-element index tensor) on a typed input: the axis
// (normalized) and the index (in range), else nullopt.
struct Pick {
  size_t axis = 0;
  int64_t index = 0;
};
std::optional<Pick> gather_pick(const Graph& g, const Node& n) {
  if (n.inputs.size() != 2 || n.inputs[1] < 0) return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  const Value& i = g.value(n.inputs[1]);
  if (!x.typed || !i.constant.defined() || i.constant.numel() != 1 || i.shape.size() > 1 ||
      (i.dtype != DType::i64 && i.dtype != DType::i32))
    return std::nullopt;
  int64_t axis = 0, rank = int64_t(x.shape.size());
  try {
    axis = n.attr_int("axis", 0);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  const int64_t dim = x.shape[size_t(axis)];
  int64_t index = i.constant.at_int(0);
  if (index < 0) index += dim;
  if (index < 0 || index >= dim) return std::nullopt;
  return Pick{size_t(axis), index};
}

// A Slice with constant starts (and axes), unit steps, on a typed input: the first element taken
// on each axis (ONNX's rules: negative counts from the end, then clamped to the dim), else
// nullopt. The element counts are its output's shape (shape inference used the same rules).
std::optional<std::vector<int64_t>> slice_starts(const Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  auto ints = [&](size_t i) -> std::optional<std::vector<int64_t>> {
    if (i >= n.inputs.size() || n.inputs[i] < 0) return std::vector<int64_t>{};
    const Value& c = g.value(n.inputs[i]);
    if (!c.constant.defined() || (c.dtype != DType::i64 && c.dtype != DType::i32))
      return std::nullopt;
    return c.constant.to_int64_vector();
  };
  if (!x.typed || n.has_attr("starts") || n.inputs.size() < 3) return std::nullopt;  // Slice-10 on
  auto starts = ints(1), axes = ints(3), steps = ints(4);
  if (!starts || !axes || !steps || !ints(2)) return std::nullopt;
  const int64_t rank = int64_t(x.shape.size());
  if (axes->empty())
    for (size_t i = 0; i < starts->size(); ++i) axes->push_back(int64_t(i));
  if (axes->size() != starts->size()) return std::nullopt;
  std::vector<int64_t> first(size_t(rank), 0);
  for (size_t i = 0; i < axes->size(); ++i) {
    int64_t a = (*axes)[i] < 0 ? (*axes)[i] + rank : (*axes)[i];
    if (a < 0 || a >= rank || (!steps->empty() && (*steps)[i] != 1)) return std::nullopt;
    const int64_t d = x.shape[size_t(a)];
    int64_t b = (*starts)[i];
    if (b < 0) b = b < -d ? 0 : b + d;
    first[size_t(a)] = std::min(b, d);
  }
  return first;
}

// Node n in a view: the input it reads the viewed value through, or -1 when it is no view node.
int view_input(const Graph& g, const Node& n, bool float16) {
  if (!n.domain.empty() || n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1) return -1;
  const Value& out = g.value(n.outputs[0]);
  if (!view_dtype(out.dtype, float16) || !out.typed) return -1;
  const ViewKind view = view_of(n);
  if (view == ViewKind::Permute || view == ViewKind::Reshape) return n.inputs[0];
  if (view == ViewKind::Pick && gather_pick(g, n)) return n.inputs[0];
  if (view == ViewKind::Slice && slice_starts(g, n)) return n.inputs[0];
  if (op_id(n) == OpId::Mul) {
    for (int x : n.inputs)
      if (x >= 0 && g.value(x).shape == out.shape && mul_scale(g, n, x, float16)) return x;
  }
  return -1;
}

// Strides of `to` as a reshape of a view (dims, strides) without a copy, or nullopt when the
// reshape merges dims the view does not keep adjacent in memory. Dims are grouped into runs that
// are contiguous in the view; each run of the old shape must be covered exactly by new dims.
std::optional<std::vector<int64_t>> reshape_strides(const Shape& dims,
                                                    const std::vector<int64_t>& strides,
                                                    const Shape& to) {
  std::vector<int64_t> out(to.size(), 0);
  int64_t view_d = int64_t(to.size()) - 1;
  int64_t base = strides.empty() ? 1 : strides.back();
  int64_t old_numel = 1, new_numel = 1;
  for (int64_t d = int64_t(dims.size()) - 1; d >= 0; --d) {
    old_numel *= dims[size_t(d)];
    // A run ends where the next outer dim does not continue this one in memory.
    bool run_ends = d == 0 || (dims[size_t(d - 1)] != 1 &&
                               strides[size_t(d - 1)] != old_numel * base);
    if (!run_ends) continue;
    while (view_d >= 0 && (new_numel < old_numel || to[size_t(view_d)] == 1)) {
      out[size_t(view_d)] = new_numel * base;
      new_numel *= to[size_t(view_d)];
      --view_d;
    }
    if (new_numel != old_numel) return std::nullopt;
    if (d > 0) {
      base = strides[size_t(d - 1)];
      old_numel = new_numel = 1;
    }
  }
  if (view_d != -1) {
    for (; view_d >= 0; --view_d)  // leading 1s
      if (to[size_t(view_d)] != 1) return std::nullopt;
  }
  return out;
}

// The view of the value `nodes` make from `source`, or nullopt when a Reshape cannot be a view.
std::optional<OperandView> view_from(const Graph& g, int source, const std::vector<int>& nodes,
                                     bool float16) {
  OperandView v;
  v.source = source;
  v.nodes = nodes;
  v.dims = g.value(source).shape;
  v.strides = row_major_strides(v.dims);
  int cur = source;
  for (int m : nodes) {
    const Node& n = g.nodes[size_t(m)];
    const Shape& out = g.value(n.outputs[0]).shape;
    const ViewKind view = view_of(n);
    if (view == ViewKind::Permute) {
      std::optional<std::vector<int64_t>> p = perm_of(n, v.dims.size());
      if (!p) return std::nullopt;
      const std::vector<int64_t>& perm = *p;
      Shape d(perm.size());
      std::vector<int64_t> s(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) {
        if (perm[i] < 0 || perm[i] >= int64_t(perm.size())) return std::nullopt;
        d[i] = v.dims[size_t(perm[i])];
        s[i] = v.strides[size_t(perm[i])];
      }
      if (d != out) return std::nullopt;
      v.dims = d, v.strides = s;
    } else if (view == ViewKind::Pick) {  // one index: an offset, and its axis dropped (or kept as 1)
      std::optional<Pick> pick = gather_pick(g, n);
      if (!pick) return std::nullopt;
      v.offset += pick->index * v.strides[pick->axis];
      if (g.value(n.inputs[1]).shape.empty()) {
        v.dims.erase(v.dims.begin() + int64_t(pick->axis));
        v.strides.erase(v.strides.begin() + int64_t(pick->axis));
      } else {
        v.dims[pick->axis] = 1;
      }
      if (v.dims != out) return std::nullopt;
    } else if (view == ViewKind::Slice) {  // unit steps: an offset, the same strides, fewer elements
      std::optional<std::vector<int64_t>> first = slice_starts(g, n);
      if (!first || first->size() != v.dims.size() || out.size() != v.dims.size())
        return std::nullopt;
      for (size_t a = 0; a < first->size(); ++a) v.offset += (*first)[a] * v.strides[a];
      v.dims = out;
    } else if (view == ViewKind::Reshape) {
      if (shape_numel(out) != shape_numel(v.dims)) return std::nullopt;
      auto s = reshape_strides(v.dims, v.strides, out);
      if (!s) return std::nullopt;
      v.dims = out, v.strides = *s;
    } else {  // a scalar Mul
      std::optional<double> s = mul_scale(g, n, cur, float16);
      if (!s) return std::nullopt;
      v.scale *= *s;
    }
    cur = n.outputs[0];
  }
  return v;
}

}  // namespace

OperandView operand_view(const Graph& g, int v, const std::function<bool(int node)>& take,
                         bool float16) {
  // Walk back while the producer is a view node the caller lets go.
  std::vector<int> chain;  // operand side first
  std::vector<int> inputs;  // the value each chain node reads
  for (int cur = v; cur >= 0 && g.value(cur).producer >= 0;) {
    int p = g.value(cur).producer;
    int in = view_input(g, g.nodes[size_t(p)], float16);
    if (in < 0 || !take(p)) break;
    chain.push_back(p);
    inputs.push_back(in);
    cur = in;
  }
  // The longest suffix (source side cut first) that is a view the GEMM can read.
  for (size_t start = chain.size(); start > 0; --start) {
    int source = inputs[start - 1];
    const Value& sv = g.value(source);
    if (sv.constant.defined() || !view_dtype(sv.dtype, float16) || !sv.typed) continue;
    std::vector<int> nodes(chain.rend() - int64_t(start), chain.rend());
    std::optional<OperandView> view = view_from(g, source, nodes, float16);
    if (!view || view->dims.size() < 2) continue;
    const size_t r = view->dims.size();
    if (view->strides[r - 1] != 1 && view->strides[r - 2] != 1) continue;
    return *view;
  }
  return {};
}

OperandView output_view(const Graph& g, int v, const std::function<bool(int node)>& take,
                        bool float16) {
  std::vector<int> chain;  // from v on
  for (int cur = v;;) {
    int c = -1;
    for (size_t m = 0; m < g.nodes.size() && c < 0; ++m)
      for (int i : g.nodes[m].inputs)
        if (i == cur) c = int(m);
    if (c < 0) break;
    const Node& n = g.nodes[size_t(c)];
    // Transposes and Reshapes (written back through their inverses; Squeeze is not taken).
    if ((view_of(n) != ViewKind::Permute && op_id(n) != OpId::Reshape) ||
        view_input(g, n, float16) != cur || !take(c))
      break;
    chain.push_back(c);
    cur = n.outputs[0];
  }
  // The longest prefix whose result v can be written through: strides computed back from the
  // last value, row-major, through each node's inverse.
  for (size_t len = chain.size(); len > 0; --len) {
    OperandView view;
    view.nodes.assign(chain.begin(), chain.begin() + int64_t(len));
    view.source = g.nodes[size_t(chain[len - 1])].outputs[0];
    Shape dims = g.value(view.source).shape;
    std::vector<int64_t> strides = row_major_strides(dims);
    bool ok = true;
    for (size_t i = len; i-- > 0 && ok;) {
      const Node& n = g.nodes[size_t(chain[i])];
      const Shape& in = g.value(n.inputs[0]).shape;
      if (view_of(n) == ViewKind::Permute) {
        std::optional<std::vector<int64_t>> p = perm_of(n, in.size());
        if (!p || p->size() != dims.size()) {
          ok = false;
          break;
        }
        const std::vector<int64_t>& perm = *p;
        std::vector<int64_t> s(in.size(), -1);
        for (size_t j = 0; j < perm.size(); ++j) {
          if (perm[j] < 0 || perm[j] >= int64_t(in.size()) || s[size_t(perm[j])] >= 0) {
            ok = false;
            break;
          }
          s[size_t(perm[j])] = strides[j];
        }
        strides = s;
      } else {
        auto s = reshape_strides(dims, strides, in);
        if (!s) ok = false;
        else strides = *s;
      }
      dims = in;
    }
    if (!ok || dims.size() < 2) continue;
    const size_t r = dims.size();
    if (strides[r - 1] != 1 && strides[r - 2] != 1) continue;
    view.dims = dims;
    view.strides = strides;
    return view;
  }
  return {};
}

}  // namespace brrr::plan
