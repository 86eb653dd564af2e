// Indexed writes: ScatterElements and ScatterND, with reduction none / add / mul / max / min.
// Every index is range-checked before it is used.
#include <cstring>

#include "ops/movement_util.hpp"

namespace brrr::ops {

namespace {

enum class Reduce { none, add, mul, max, min };

Reduce parse_reduction(const Node& n) {
  std::string r = n.attr_string("reduction", "none");
  if (r == "none") return Reduce::none;
  if (r == "add") return Reduce::add;
  if (r == "mul") return Reduce::mul;
  if (r == "max") return Reduce::max;
  if (r == "min") return Reduce::min;
  fail("{}: unknown reduction '{}'", n.label(), r);
}

template <typename T>
void combine(T& dst, T src, Reduce r) {
  if (r == Reduce::none) {
    dst = src;
    return;
  }
  if constexpr (std::is_same_v<T, bool>) {  // add = or, mul = and, max = or, min = and
    dst = (r == Reduce::add || r == Reduce::max) ? (dst || src) : (dst && src);
  } else {
    using C = compute_t<T>;
    C a = C(dst), b = C(src);
    C v = r == Reduce::add   ? C(a + b)
          : r == Reduce::mul ? C(a * b)
          : r == Reduce::max ? std::max(a, b)
                             : std::min(a, b);
    dst = T(v);
  }
}

int64_t checked_index(const Node& n, int64_t i, int64_t d, size_t axis, const Shape& data) {
  if (i < -d || i >= d)
    fail("{}: index {} is out of range for axis {} of size {} (data shape {})", n.label(), i, axis,
         d, shape_str(data));
  return i < 0 ? i + d : i;
}

void require_index_dtype(const InferCtx& c) {
  require_int_input(c, 1, "indices");
}

// --- ScatterElements ----------------------------------------------------------------------------

void infer_scatter_elements(InferCtx& c) {
  const Shape& data = c.in_shape(0);
  int64_t r = int64_t(data.size());
  if (r == 0) c.fail("data must have rank >= 1");
  int64_t ax = c.axis(c.node.attr_int("axis", 0), r);
  require_index_dtype(c);
  parse_reduction(c.node);
  if (c.in_shape(1) != c.in_shape(2)) c.fail("indices and updates must have the same shape");
  if (c.in_dtype(2) != c.in_dtype(0)) c.fail("updates must have data's dtype");
  if (c.in_rank(1) != r) c.fail("indices must have the same rank as data");
  for (int64_t d = 0; d < r; ++d)
    if (d != ax && c.in_shape(1)[size_t(d)] > data[size_t(d)])
      c.fail("indices dim {} is larger than data's", d);
  c.set_output(0, c.in_dtype(0), data);
}

void scatter_elements_kernel(KernelCtx& k) {
  Tensor& out = k.outputs[0];
  copy_view(k.inputs[0], out);
  int64_t r = out.rank(), a = k.node.attr_int("axis", 0);
  size_t ax = size_t(a < 0 ? a + r : a);
  Reduce red = parse_reduction(k.node);
  std::vector<int64_t> idx = int_values(k.inputs[1]);
  Tensor upd = k.inputs[2].contiguous();
  Shape base = out.strides();
  base[ax] = 0;
  int64_t d = out.dim(int(ax)), st = out.strides()[ax];
  // Check every index first so a bad one leaves no partial write behind.
  for (int64_t& i : idx) i = checked_index(k.node, i, d, ax, out.shape());
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    T* o = out.data<T>();
    const T* u = upd.data<T>();
    for_each_index<1>(upd.shape(), {&base}, [&](int64_t i, const std::array<int64_t, 1>& off) {
      combine(o[off[0] + idx[size_t(i)] * st], u[i], red);
    });
  });
}

// --- ScatterND ----------------------------------------------------------------------------------

void infer_scatter_nd(InferCtx& c) {
  const Shape& data = c.in_shape(0);
  const Shape& is = c.in_shape(1);
  int64_t r = int64_t(data.size()), q = int64_t(is.size());
  if (c.in_dtype(1) != DType::i64) c.fail("indices must be int64");
  parse_reduction(c.node);
  if (r < 1 || q < 1) c.fail("data and indices must have rank >= 1");
  int64_t m = is.back();
  if (m > r) c.fail("index tuples of length {} are longer than data's rank {}", m, r);
  Shape want(is.begin(), is.end() - 1);
  want.insert(want.end(), data.begin() + m, data.end());
  if (c.in_shape(2) != want)
    c.fail("updates have shape {} but indices and data need {}", shape_str(c.in_shape(2)),
           shape_str(want));
  if (c.in_dtype(2) != c.in_dtype(0)) c.fail("updates must have data's dtype");
  c.set_output(0, c.in_dtype(0), data);
}

void scatter_nd_kernel(KernelCtx& k) {
  Tensor& out = k.outputs[0];
  copy_view(k.inputs[0], out);
  Reduce red = parse_reduction(k.node);
  const Shape& s = out.shape();
  size_t m = size_t(k.inputs[1].shape().back());
  std::vector<int64_t> idx = int_values(k.inputs[1]);
  Tensor upd = k.inputs[2].contiguous();
  const Shape& is = k.inputs[1].shape();
  int64_t tuples = shape_numel(Shape(is.begin(), is.end() - 1));
  int64_t inner = 1;
  for (size_t i = m; i < s.size(); ++i) inner *= s[i];
  std::vector<int64_t> offs(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (size_t j = 0; j < m; ++j)
      off += checked_index(k.node, idx[size_t(t) * m + j], s[j], j, s) * out.strides()[j];
    offs[size_t(t)] = off;
  }
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    T* o = out.data<T>();
    const T* u = upd.data<T>();
    for (int64_t t = 0; t < tuples; ++t)
      for (int64_t e = 0; e < inner; ++e) combine(o[offs[size_t(t)] + e], u[t * inner + e], red);
  });
}

}  // namespace

void register_scatter_ops(OpTable& t) {
  t.add(movement_op("ScatterElements", infer_scatter_elements, scatter_elements_kernel));
  t.add(movement_op("ScatterND", infer_scatter_nd, scatter_nd_kernel));
}

}  // namespace brrr::ops
