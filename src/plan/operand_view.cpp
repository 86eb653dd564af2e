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

using Dims = std::vector<std::vector<Factor>>;  // a view's dims, each as its factors

int64_t size_of(const std::vector<Factor>& dim) {
  int64_t n = 1;
  for (const Factor& f : dim) n *= f.size;
  return n;
}

// (dims, strides) as dims of one factor each.
Dims plain_dims(const Shape& dims, const std::vector<int64_t>& strides) {
  Dims d(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) d[i] = {Factor{dims[i], strides[i]}};
  return d;
}

// Sets v's dims, strides and factors from d.
void set_dims(OperandView* v, const Dims& d) {
  v->dims.assign(d.size(), 1);
  v->strides.assign(d.size(), 0);
  v->factors.clear();
  for (size_t i = 0; i < d.size(); ++i) {
    v->dims[i] = size_of(d[i]);
    if (d[i].size() == 1) {
      v->strides[i] = d[i][0].stride;
      continue;
    }
    v->factors.resize(d.size());
    v->factors[i] = d[i];
  }
}

// d with its dims reordered: dim i of the result is d[perm[i]] (factors move as a unit), or
// nullopt when perm is no permutation of d's dims.
std::optional<Dims> permute_dims(const Dims& d, const std::vector<int64_t>& perm) {
  if (perm.size() != d.size()) return std::nullopt;
  Dims out(d.size());
  std::vector<bool> seen(d.size(), false);
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= int64_t(d.size()) || seen[size_t(perm[i])]) return std::nullopt;
    seen[size_t(perm[i])] = true;
    out[i] = d[size_t(perm[i])];
  }
  return out;
}

// The permutation that undoes perm (entries out of range or repeated stay so: permute_dims
// refuses them).
std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size(), -1);
  for (size_t j = 0; j < perm.size(); ++j)
    if (perm[j] >= 0 && perm[j] < int64_t(perm.size())) inv[size_t(perm[j])] = int64_t(j);
  return inv;
}

// The view of the value `nodes` make from `source`, or nullopt when a node's result has no
// strided (or, with `factored`, factored) description.
std::optional<OperandView> view_from(const Graph& g, int source, const std::vector<int>& nodes,
                                     bool float16, bool factored) {
  OperandView v;
  v.source = source;
  v.nodes = nodes;
  const Shape& in = g.value(source).shape;
  Dims dims = plain_dims(in, row_major_strides(in));
  auto plain = [&](size_t axis) { return dims[axis].size() == 1; };
  int cur = source;
  for (int m : nodes) {
    const Node& n = g.nodes[size_t(m)];
    const Shape& out = g.value(n.outputs[0]).shape;
    const ViewKind view = view_of(n);
    if (view == ViewKind::Permute) {
      std::optional<std::vector<int64_t>> perm = perm_of(n, dims.size());
      std::optional<Dims> d = perm ? permute_dims(dims, *perm) : std::nullopt;
      if (!d) return std::nullopt;
      dims = std::move(*d);
    } else if (view == ViewKind::Pick) {  // one index: an offset, and its axis dropped (or kept as 1)
      std::optional<Pick> pick = gather_pick(g, n);
      if (!pick || !plain(pick->axis)) return std::nullopt;
      Factor& f = dims[pick->axis][0];
      v.offset += pick->index * f.stride;
      if (g.value(n.inputs[1]).shape.empty()) dims.erase(dims.begin() + int64_t(pick->axis));
      else f.size = 1;
    } else if (view == ViewKind::Slice) {  // unit steps: an offset, the same strides, fewer elements
      std::optional<std::vector<int64_t>> first = slice_starts(g, n);
      if (!first || first->size() != dims.size() || out.size() != dims.size()) return std::nullopt;
      for (size_t a = 0; a < first->size(); ++a) {
        if (!plain(a)) {  // a factored dim is only taken whole
          if ((*first)[a] != 0 || out[a] != size_of(dims[a])) return std::nullopt;
          continue;
        }
        v.offset += (*first)[a] * dims[a][0].stride;
        dims[a][0].size = out[a];
      }
    } else if (view == ViewKind::Reshape) {
      std::optional<Dims> d = reshape_factors(dims, out, factored);
      if (!d) return std::nullopt;
      dims = std::move(*d);
    } else {  // a scalar Mul
      std::optional<double> s = mul_scale(g, n, cur, float16);
      if (!s) return std::nullopt;
      v.scale *= *s;
    }
    set_dims(&v, dims);
    if (v.dims != out) return std::nullopt;
    cur = n.outputs[0];
  }
  set_dims(&v, dims);
  return v;
}

// A view the GEMMs read: one of its last two dims with unit stride (what oneDNN's fast matmul
// reads).
bool unit_inner_stride(const OperandView& v) {
  const size_t r = v.dims.size();
  return r >= 2 && (v.strides[r - 1] == 1 || v.strides[r - 2] == 1);
}

}  // namespace

std::optional<Dims> reshape_factors(const Dims& from, const Shape& to, bool factored) {
  // The runs of memory `from` walks, outermost first: factors of 1 dropped, and neighbours that
  // memory keeps adjacent (the outer one's stride spans the inner one) merged into one.
  std::vector<Factor> runs;
  int64_t numel = 1;
  for (const std::vector<Factor>& dim : from)
    for (const Factor& f : dim) {
      numel *= f.size;
      if (f.size == 1) continue;
      if (!runs.empty() && runs.back().stride == f.size * f.stride)
        runs.back() = {runs.back().size * f.size, f.stride};
      else
        runs.push_back(f);
    }
  if (numel == 0 || numel != shape_numel(to)) return std::nullopt;
  // Each new dim, innermost first, takes the innermost runs (splitting the last one it needs only
  // in part): the common refinement of both shapes. A dim of 1 may have any stride; it gets the
  // one just past its inner neighbour, as GEMM descriptors have always been given.
  int64_t past = from.empty() || from.back().empty() ? 1 : from.back().back().stride;
  Dims out(to.size());
  for (size_t i = to.size(); i-- > 0;) {
    std::vector<Factor>& dim = out[i];  // built inner factor first, reversed below
    for (int64_t need = to[i]; need > 1;) {
      if (runs.empty()) return std::nullopt;
      Factor& r = runs.back();
      if (r.size <= need) {
        if (need % r.size != 0) return std::nullopt;
        dim.push_back(r);
        need /= r.size;
        runs.pop_back();
      } else {
        if (r.size % need != 0) return std::nullopt;
        dim.push_back({need, r.stride});
        r = {r.size / need, r.stride * need};
        need = 1;
      }
    }
    if (dim.empty()) dim.push_back({1, past});
    if (dim.size() > 1 && !factored) return std::nullopt;
    std::reverse(dim.begin(), dim.end());
    past = dim.front().size * dim.front().stride;
  }
  return out;
}

OperandView operand_view(const Graph& g, int v, const std::function<bool(int node)>& take,
                         bool float16, bool factored) {
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
    std::optional<OperandView> view = view_from(g, source, nodes, float16, factored);
    if (view && unit_inner_stride(*view)) return *view;
  }
  return {};
}

OperandView output_view(const Graph& g, int v, const std::function<bool(int node)>& take,
                        bool float16, bool factored) {
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
    const Shape& last = g.value(view.source).shape;
    std::optional<Dims> dims = plain_dims(last, row_major_strides(last));
    for (size_t i = len; i-- > 0 && dims;) {
      const Node& n = g.nodes[size_t(chain[i])];
      const Shape& in = g.value(n.inputs[0]).shape;
      if (view_of(n) == ViewKind::Permute) {
        std::optional<std::vector<int64_t>> perm = perm_of(n, in.size());
        dims = perm ? permute_dims(*dims, inverse(*perm)) : std::nullopt;
      } else {
        dims = reshape_factors(*dims, in, factored);
      }
      if (dims && dims->size() != in.size()) dims.reset();
    }
    if (!dims) continue;
    set_dims(&view, *dims);
    if (unit_inner_stride(view)) return view;
  }
  return {};
}

}  // namespace brrr::plan
