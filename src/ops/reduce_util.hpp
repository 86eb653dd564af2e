// Helpers shared by the reduction and normalization families: axes resolution (attribute or
// input), reduced shapes, index maps from input positions to reduced positions, and conversions
// to and from double for reference kernels that compute in double.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/op_util.hpp"

namespace brrr::ops {

// Normalizes axes for a tensor of rank r; throws Error on an out-of-range or repeated axis.
inline std::vector<bool> axes_mask(const std::vector<int64_t>& axes, int64_t r) {
  std::vector<bool> m(size_t(r), false);
  int64_t lim = std::max<int64_t>(r, 1);
  for (int64_t a : axes) {
    if (a < -lim || a >= lim) fail("axis {} is out of range for rank {}", a, r);
    if (r == 0) continue;  // reducing a scalar over its only "axis" leaves it unchanged
    int64_t k = a < 0 ? a + r : a;
    if (m[size_t(k)]) fail("axis {} appears twice in axes [{}]", a, fmt::join(axes, ", "));
    m[size_t(k)] = true;
  }
  return m;
}

// Axis normalization inside kernels (infer has already range-checked it).
inline int64_t norm_axis(int64_t a, int64_t r) {
  return a < 0 ? a + r : a;
}

struct ReduceSpec {
  std::vector<bool> reduced;  // per input axis
  bool keepdims = true;
};

// Resolves the reduced axes of a Reduce* node: the `axes` attribute (ReduceSum < 13, others < 18)
// or input 1 (later opsets; `axes_in` null when omitted). Empty axes reduce everything unless
// noop_with_empty_axes=1, which reduces nothing (numpy's axis=(), so ReduceSumSquare still
// squares). Throws Error without node context; callers add it.
inline ReduceSpec reduce_spec(const Node& n, const Tensor* axes_in, int64_t rank) {
  ReduceSpec s;
  s.keepdims = n.attr_int("keepdims", 1) != 0;
  bool noop = n.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<int64_t> axes;
  if (n.has_attr("axes")) {
    if (axes_in && axes_in->numel() > 0) fail("axes are given both as an attribute and as input 1");
    axes = n.attr_ints("axes");
  } else if (axes_in) {
    if (axes_in->dtype() != DType::i64 || axes_in->rank() > 1)
      fail("input 1 (axes) must be a 1-D int64 tensor, got {}{}", dtype_name(axes_in->dtype()),
           shape_str(axes_in->shape()));
    axes = axes_in->to_int64_vector();
  }
  if (axes.empty()) {
    s.reduced.assign(size_t(rank), !noop);
    return s;
  }
  s.reduced = axes_mask(axes, rank);
  return s;
}

inline Shape reduced_shape(const Shape& in, const std::vector<bool>& reduced, bool keepdims) {
  Shape o;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!reduced[d])
      o.push_back(in[d]);
    else if (keepdims)
      o.push_back(1);
  }
  return o;
}

// Strides that map a row-major position in `in` to the flat index of its reduction slot in the
// (keepdims) output: contiguous output strides with 0 on reduced axes.
inline Shape reduce_out_strides(const Shape& in, const std::vector<bool>& reduced) {
  Shape os(in.size(), 0);
  int64_t st = 1;
  for (int d = int(in.size()) - 1; d >= 0; --d) {
    if (reduced[size_t(d)]) continue;
    os[size_t(d)] = st;
    st *= in[size_t(d)];
  }
  return os;
}

inline int64_t prod_dims(const Shape& s, size_t lo, size_t hi) {
  int64_t p = 1;
  for (size_t d = lo; d < hi && d < s.size(); ++d) p *= s[d];
  return p;
}

// A single-axis view of a contiguous tensor: element (o, j, i) lives at (o * n + j) * inner + i.
struct AxisLayout {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t at(int64_t o, int64_t j, int64_t i) const { return (o * n + j) * inner + i; }
};
inline AxisLayout axis_layout(const Shape& s, int64_t axis) {
  return {prod_dims(s, 0, size_t(axis)), s.empty() ? 1 : s[size_t(axis)],
          prod_dims(s, size_t(axis) + 1, s.size())};
}

// Storage value from a double: rounds through float for the 16-bit floats, saturates for ints.
template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    return T(float(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return T(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    if (std::isnan(v)) return T(0);
    if (v <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return T(v);
  }
}

// All elements of t in row-major order as doubles.
inline std::vector<double> load_f64(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<double> v(size_t(c.numel()));
  dispatch_dtype(c.dtype(), [&]<typename T>() {
    const T* p = c.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = double(compute_t<T>(p[i]));
  });
  return v;
}

// Writes doubles into a contiguous output tensor of any dtype.
inline void store_f64(Tensor& out, const std::vector<double>& v) {
  BRRR_ASSERT(int64_t(v.size()) == out.numel(), "store_f64 size mismatch");
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    T* p = out.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = from_double<T>(v[i]);
  });
}

// Fails unless input i has a floating dtype.
inline void require_float(InferCtx& c, int i) {
  if (!is_floating(c.in_dtype(i)))
    c.fail("input {} must be float16, bfloat16, float or double, got {}", i,
           dtype_name(c.in_dtype(i)));
}

}  // namespace brrr::ops
