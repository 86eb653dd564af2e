// Helpers shared by the op families: broadcasting loops, common infer rules and cost rules.
#pragma once
#include <array>
#include <cmath>

#include "brrr/op.hpp"

namespace brrr::ops {

// Fusion conditions (OpDef::can_fuse): the rank of input 0 (0 when absent), and whether `axis`
// names its last axis.
inline size_t input0_rank(const Graph& g, const Node& n) {
  return n.inputs.empty() || n.inputs[0] < 0 ? 0 : g.value(n.inputs[0]).shape.size();
}
inline bool is_last_axis(int64_t axis, size_t rank) {
  return rank > 0 && (axis == int64_t(rank) - 1 || axis == -1);
}

inline int64_t numel_of(const Graph& g, int value_id) {
  return value_id < 0 ? 0 : shape_numel(g.value(value_id).shape);
}
inline int64_t out_numel(const Graph& g, const Node& n, int i = 0) {
  return numel_of(g, n.outputs[size_t(i)]);
}

// Infer: output 0 has input 0's dtype and the broadcast of all inputs' shapes.
inline void infer_broadcast(InferCtx& c, DType out_dtype) {
  Shape s = c.in_shape(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    try {
      s = broadcast_shapes(s, c.in_shape(i));
    } catch (const Error& e) {
      c.fail_msg(e.what());
    }
  }
  c.set_output(0, out_dtype, s);
}

// Fails unless all given inputs share input 0's dtype.
inline void require_same_dtype(InferCtx& c) {
  for (int i = 1; i < c.num_inputs(); ++i)
    if (c.has_input(i) && c.in_dtype(i) != c.in_dtype(0))
      c.fail("input {} is {} but input 0 is {}", i, dtype_name(c.in_dtype(i)),
             dtype_name(c.in_dtype(0)));
}

// out[i] = f(a[i]) elementwise, with compute in compute_t<T>; R is the output storage type.
template <typename T, typename R, typename F>
void map_unary(const Tensor& a, Tensor& out, F&& f) {
  Tensor x = a.contiguous();
  const T* p = x.data<T>();
  R* o = out.data<R>();
  int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) o[i] = R(f(compute_t<T>(p[i])));
}

// out = f(a, b) with numpy broadcasting; A, B input storage types, R output storage type.
template <typename A, typename B, typename R, typename F>
void map_binary(const Tensor& a, const Tensor& b, Tensor& out, F&& f) {
  const Shape& s = out.shape();
  Tensor ea = a.expand(s), eb = b.expand(s);
  const A* pa = static_cast<const A*>(ea.raw());
  const B* pb = static_cast<const B*>(eb.raw());
  R* o = out.data<R>();
  for_each_index<2>(s, {&ea.strides(), &eb.strides()},
                    [&](int64_t i, const std::array<int64_t, 2>& off) {
                      o[i] = R(f(compute_t<A>(pa[off[0]]), compute_t<B>(pb[off[1]])));
                    });
}

// Cost rule: `per_elem` arithmetic flops per output element, plus optional special functions.
inline std::function<Cost(const Graph&, const Node&)> cost_per_output(
    double per_elem, std::map<std::string, double> special = {}) {
  return [per_elem, special](const Graph& g, const Node& n) {
    Cost c;
    double e = double(out_numel(g, n));
    c.flops = per_elem * e;
    for (const auto& [k, v] : special) c.special[k] = v * e;
    return c;
  };
}

}  // namespace brrr::ops
