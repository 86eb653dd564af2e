// Ops that create or mask values by position: ConstantOfShape, Range, EyeLike, Trilu, OneHot.
// Sizes come from constants and go through set_output's overflow check before anything is built.
#include <cmath>
#include <cstring>

#include "ops/movement_util.hpp"

namespace brrr::ops {

namespace {

// --- ConstantOfShape ----------------------------------------------------------------------------

Tensor fill_value(const Node& n) {
  if (const Tensor* v = n.attr_tensor("value")) {
    if (v->numel() != 1) fail("{}: 'value' must have exactly one element", n.label());
    return *v;
  }
  return Tensor::scalar<float>(0.0f);
}

void infer_constant_of_shape(InferCtx& c) {
  require_int_input(c, 0, "shape");
  if (c.in_rank(0) != 1) c.fail("the shape input must be 1-D");
  std::vector<int64_t> shape = int_values(c.require_const(0, "shape"));
  for (int64_t d : shape)
    if (d < 0) c.fail("shape {} has a negative dim", shape_str(shape));
  c.set_output(0, fill_value(c.node).dtype(), shape);
}

// --- Range --------------------------------------------------------------------------------------

// Element count of Range(start, limit, delta): max(ceil((limit - start) / delta), 0).
int64_t range_count(const InferCtx& c, const Tensor& s, const Tensor& l, const Tensor& d) {
  if (is_floating(s.dtype())) {
    double a = s.at_double(0), b = l.at_double(0), st = d.at_double(0);
    if (st == 0) c.fail("delta is 0");
    double n = std::ceil((b - a) / st);
    if (!(n > 0)) return 0;  // also NaN
    if (n >= 9.0e18) c.fail("Range({}, {}, {}) has too many elements", a, b, st);
    return int64_t(n);
  }
  __int128 a = s.at_int(0), b = l.at_int(0), st = d.at_int(0);
  if (st == 0) c.fail("delta is 0");
  __int128 diff = b - a;
  if (st < 0) diff = -diff, st = -st;
  if (diff <= 0) return 0;
  __int128 n = (diff + st - 1) / st;
  if (n > __int128(INT64_MAX)) c.fail("Range has more than 2^63 elements");
  return int64_t(n);
}

void infer_range(InferCtx& c) {
  DType t = c.in_dtype(0);
  if (t == DType::boolean) c.fail("Range is not defined for bool");
  for (int i = 0; i < 3; ++i) {
    if (c.in_dtype(i) != t) c.fail("start, limit and delta must have the same dtype");
    if (shape_numel(c.in_shape(i)) != 1) c.fail("input {} must be a scalar", i);
  }
  const char* names[] = {"start", "limit", "delta"};
  int64_t n = range_count(c, c.require_const(0, names[0]), c.require_const(1, names[1]),
                          c.require_const(2, names[2]));
  c.set_output(0, t, {n});
}

void range_kernel(KernelCtx& k) {
  bool fp = is_floating(k.inputs[0].dtype());
  double a = k.inputs[0].at_double(0), st = k.inputs[2].at_double(0);
  int64_t ia = fp ? 0 : k.inputs[0].at_int(0), ist = fp ? 0 : k.inputs[2].at_int(0);
  dispatch_dtype(k.outputs[0].dtype(), [&]<typename T>() {
    T* o = k.outputs[0].data<T>();
    int64_t n = k.outputs[0].numel();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<compute_t<T>>)
        o[i] = T(compute_t<T>(a + double(i) * st));
      else
        o[i] = T(int64_t(uint64_t(ia) + uint64_t(i) * uint64_t(ist)));  // exact, no UB
    }
  });
}

// --- EyeLike ------------------------------------------------------------------------------------

DType eye_dtype(const Node& n, DType in) {
  return n.has_attr("dtype") ? dtype_from_onnx(int(n.attr_int("dtype", 1))) : in;
}

void infer_eye_like(InferCtx& c) {
  if (c.in_rank(0) != 2) c.fail("input must be 2-D");
  c.set_output(0, eye_dtype(c.node, c.in_dtype(0)), c.in_shape(0));
}

void eye_like_kernel(KernelCtx& k) {
  Tensor& out = k.outputs[0];
  std::memset(out.raw(), 0, out.nbytes());
  Tensor one = Tensor::scalar<float>(1.0f).cast(out.dtype());
  int64_t rows = out.dim(0), cols = out.dim(1), off = k.node.attr_int("k", 0);
  size_t es = dtype_size(out.dtype());
  char* o = static_cast<char*>(out.raw());
  for (int64_t i = 0; i < rows; ++i) {
    if (off > cols || off < -rows) break;
    int64_t j = i + off;
    if (j >= 0 && j < cols) std::memcpy(o + (i * cols + j) * int64_t(es), one.raw(), es);
  }
}

// --- Trilu --------------------------------------------------------------------------------------

void infer_trilu(InferCtx& c) {
  if (c.in_rank(0) < 2) c.fail("input must have rank >= 2");
  if (c.has_input(1)) {
    require_int_input(c, 1, "k");
    if (shape_numel(c.in_shape(1)) != 1) c.fail("k must be a scalar");
  }
  c.set_output(0, c.in_dtype(0), c.in_shape(0));
}

void trilu_kernel(KernelCtx& k) {
  Tensor& out = k.outputs[0];
  copy_view(k.inputs[0], out);
  int64_t rows = out.dim(-2), cols = out.dim(-1);
  int64_t diag = k.has_input(1) ? k.inputs[1].at_int(0) : 0;
  diag = std::clamp<int64_t>(diag, -rows - 1, cols + 1);  // beyond this nothing changes
  bool upper = k.node.attr_int("upper", 1) != 0;
  size_t es = dtype_size(out.dtype());
  char* o = static_cast<char*>(out.raw());
  int64_t mats = rows * cols == 0 ? 0 : out.numel() / (rows * cols);
  for (int64_t b = 0; b < mats; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        bool keep = upper ? j - i >= diag : j - i <= diag;
        if (!keep) std::memset(o + ((b * rows + i) * cols + j) * int64_t(es), 0, es);
      }
}

// --- OneHot -------------------------------------------------------------------------------------

// Integer value of element i of a numeric tensor, truncated toward zero; nullopt for NaN / inf.
std::optional<int64_t> as_index(const Tensor& t, int64_t i) {
  if (!is_floating(t.dtype())) return t.at_int(i);
  double v = t.at_double(i);
  if (!std::isfinite(v) || std::fabs(v) > 9.0e18) return std::nullopt;
  return int64_t(v);
}

void infer_one_hot(InferCtx& c) {
  const Tensor& depth_t = c.require_const(1, "depth");
  if (depth_t.numel() != 1) c.fail("depth must have exactly one element");
  auto depth = as_index(depth_t, 0);
  if (!depth || *depth < 0) c.fail("depth must be a non-negative number");
  if (shape_numel(c.in_shape(2)) != 2) c.fail("values must have two elements [off, on]");
  int64_t r = c.in_rank(0) + 1;
  int64_t a = c.node.attr_int("axis", -1);
  if (a < -r || a >= r) c.fail("axis {} is out of range for output rank {}", a, r);
  if (a < 0) a += r;
  Shape out = c.in_shape(0);
  out.insert(out.begin() + a, *depth);
  c.set_output(0, c.in_dtype(2), out);
}

void one_hot_kernel(KernelCtx& k) {
  Tensor& out = k.outputs[0];
  const Tensor& ind = k.inputs[0];
  Tensor values = k.inputs[2].reshape({2});
  int64_t r = out.rank(), a = k.node.attr_int("axis", -1);
  if (a < 0) a += r;
  int64_t depth = out.dim(int(a));
  fill_with(out, values.slice(0, 0, 1, 1));
  int64_t inner = 1;
  for (int64_t d = a + 1; d < r; ++d) inner *= out.dim(int(d));
  size_t es = dtype_size(out.dtype());
  char* o = static_cast<char*>(out.raw());
  Tensor on = values.slice(0, 1, 2, 1);
  int64_t n = ind.numel();
  for (int64_t i = 0; i < n; ++i) {
    auto v = as_index(ind, i);
    if (!v) continue;
    int64_t j = *v < 0 ? *v + depth : *v;
    if (j < 0 || j >= depth) continue;  // out-of-range indices give an all-off row (spec)
    int64_t outer = i / inner, in = i % inner;
    std::memcpy(o + ((outer * depth + j) * inner + in) * int64_t(es), on.raw(), es);
  }
}

}  // namespace

void register_generator_ops(OpTable& t) {
  t.add(movement_op("ConstantOfShape", infer_constant_of_shape,
                    [](KernelCtx& k) { fill_with(k.outputs[0], fill_value(k.node)); }));
  t.add(movement_op("Range", infer_range, range_kernel));
  OpDef eye = movement_op("EyeLike", infer_eye_like, eye_like_kernel);
  eye.shape_only = true;  // the output depends only on the input's shape
  t.add(std::move(eye));
  t.add(movement_op("Trilu", infer_trilu, trilu_kernel));
  t.add(movement_op("OneHot", infer_one_hot, one_hot_kernel));
}

}  // namespace brrr::ops
