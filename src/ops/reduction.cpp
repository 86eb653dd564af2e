// Reductions: Reduce* (axes as attribute or input, keepdims, noop_with_empty_axes), ArgMax/ArgMin,
// CumSum and TopK. Float inputs accumulate in double; integer sums and products in int64
// (wrapping), so every dtype gets the most exact reference we can cheaply give.
#include <numeric>

#include "ops/reduce_util.hpp"

namespace brrr {
using namespace ops;

namespace {

enum class RK { sum, mean, max, min, prod, l1, l2, sumsq, logsum, logsumexp };

// Wrapping integer arithmetic: overflow in a model's int reduction must not be UB here.
template <typename A>
A add_(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return A(uint64_t(a) + uint64_t(b));
  else
    return a + b;
}
template <typename A>
A mul_(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return A(uint64_t(a) * uint64_t(b));
  else
    return a * b;
}

template <typename A>
bool isnan_(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return std::isnan(v);
  else
    return false;
}

// Value of the reduction over an empty set, in the accumulator type.
template <typename T, typename A>
A init_value(RK k) {
  constexpr bool fl = std::is_floating_point_v<compute_t<T>>;
  switch (k) {
    case RK::prod:
      return A(1);
    case RK::max:
      if constexpr (fl)
        return -std::numeric_limits<double>::infinity();
      else
        return A(std::numeric_limits<T>::lowest());
    case RK::min:
      if constexpr (fl)
        return std::numeric_limits<double>::infinity();
      else
        return A(std::numeric_limits<T>::max());
    default:
      return A(0);
  }
}

// One Reduce* node on storage type T with accumulator A (double or int64).
template <typename T, typename A>
void reduce_kernel(KernelCtx& k, RK kind) {
  Tensor x = k.inputs[0].contiguous();
  ReduceSpec spec = reduce_spec(k.node, k.has_input(1) ? &k.inputs[1] : nullptr, x.rank());
  Tensor& out = k.outputs[0];
  int64_t on = out.numel();
  if (on == 0) return;
  int64_t count = 1;
  for (int d = 0; d < x.rank(); ++d)
    if (spec.reduced[size_t(d)]) count *= x.dim(d);
  Shape ost = reduce_out_strides(x.shape(), spec.reduced);
  const T* p = x.data<T>();
  auto val = [&](int64_t i) { return A(compute_t<T>(p[i])); };
  std::vector<A> acc(size_t(on), init_value<T, A>(kind));

  // log-sum-exp subtracts the finite max of each slot first, so large inputs do not overflow.
  std::vector<double> shift;
  if (kind == RK::logsumexp) {
    std::vector<double> mx(size_t(on), -std::numeric_limits<double>::infinity());
    for_each_index<1>(x.shape(), {&ost}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      double v = double(val(i));
      if (std::isfinite(v) && v > mx[size_t(o[0])]) mx[size_t(o[0])] = v;
    });
    shift.resize(size_t(on));
    for (int64_t j = 0; j < on; ++j)
      shift[size_t(j)] = std::isfinite(mx[size_t(j)]) ? mx[size_t(j)] : 0;
  }

  for_each_index<1>(x.shape(), {&ost}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    A& a = acc[size_t(o[0])];
    A v = val(i);
    switch (kind) {
      case RK::sum:
      case RK::mean:
      case RK::logsum:
        a = add_(a, v);
        break;
      case RK::l1:
        a = add_(a, v < A(0) ? A(0) - v : v);
        break;
      case RK::l2:
      case RK::sumsq:
        a = add_(a, mul_(v, v));
        break;
      case RK::prod:
        a = mul_(a, v);
        break;
      case RK::max:
        if (!isnan_(a) && (isnan_(v) || v > a)) a = v;
        break;
      case RK::min:
        if (!isnan_(a) && (isnan_(v) || v < a)) a = v;
        break;
      case RK::logsumexp:
        a = A(double(a) + std::exp(double(v) - shift[size_t(o[0])]));
        break;
    }
  });

  T* po = out.data<T>();
  for (int64_t j = 0; j < on; ++j) {
    A a = acc[size_t(j)];
    double r;
    switch (kind) {
      case RK::mean:
        if constexpr (std::is_integral_v<A>) {
          if (count == 0) fail("{}: mean of an empty set of integers is undefined", k.node.label());
          po[j] = from_double<T>(double(a / count));  // integer mean truncates, like C
          continue;
        } else {
          r = double(a) / double(count);  // 0/0 = NaN for an empty set
        }
        break;
      case RK::l2:
        r = std::sqrt(double(a));
        break;
      case RK::logsum:
        r = std::log(double(a));
        break;
      case RK::logsumexp:
        r = std::log(double(a)) + shift[size_t(j)];
        break;
      default:
        if constexpr (std::is_integral_v<A>) {
          po[j] = T(a);
          continue;
        } else {
          r = a;
        }
    }
    po[j] = from_double<T>(r);
  }
}

void add_reduce(OpTable& t, const char* name, RK kind) {
  OpDef d;
  d.name = name;
  d.since = 13;
  d.cls = OpClass::normalization;
  d.infer = [kind](InferCtx& c) {
    DType dt = c.in_dtype(0);
    bool minmax = kind == RK::max || kind == RK::min;
    if (dt == DType::boolean && !minmax) c.fail("{} does not accept bool input", c.node.op);
    if (c.has_input(1) && c.in_dtype(1) != DType::i64)
      c.fail("input 1 (axes) must be int64, got {}", dtype_name(c.in_dtype(1)));
    const Tensor* axes = c.has_input(1) ? &c.require_const(1, "axes") : nullptr;
    ReduceSpec s;
    try {
      s = reduce_spec(c.node, axes, c.in_rank(0));
    } catch (const Error& e) {
      c.fail_msg(e.what());
    }
    Shape out = reduced_shape(c.in_shape(0), s.reduced, s.keepdims);
    if (kind == RK::mean && !is_floating(dt) && shape_numel(out) > 0) {
      for (size_t i = 0; i < s.reduced.size(); ++i)
        if (s.reduced[i] && c.in_shape(0)[i] == 0)
          c.fail("the mean of an empty set of integers is undefined");
    }
    c.set_output(0, dt, out);
  };
  d.reference = [kind](KernelCtx& k) {
    bool via_double = kind == RK::l2 || kind == RK::logsum || kind == RK::logsumexp;
    dispatch_dtype(k.inputs[0].dtype(), [&]<typename T>() {
      if constexpr (std::is_floating_point_v<compute_t<T>>) {
        reduce_kernel<T, double>(k, kind);
      } else {
        if (via_double)
          reduce_kernel<T, double>(k, kind);
        else
          reduce_kernel<T, int64_t>(k, kind);
      }
    });
  };
  // 1 flop per input element (2 when squaring); special functions by name.
  d.cost = [kind](const Graph& g, const Node& n) {
    Cost c;
    double in = double(numel_of(g, n.inputs[0])), out = double(out_numel(g, n));
    switch (kind) {
      case RK::l2:
        c.flops = 2 * in;
        c.special["sqrt"] = out;
        break;
      case RK::sumsq:
        c.flops = 2 * in;
        break;
      case RK::l1:
        c.flops = 2 * in;
        break;
      case RK::mean:
        c.flops = in + out;
        break;
      case RK::logsum:
        c.flops = in;
        c.special["log"] = out;
        break;
      case RK::logsumexp:
        c.flops = 3 * in + out;  // max, subtract, add; add the max back
        c.special["exp"] = in;
        c.special["log"] = out;
        break;
      default:
        c.flops = in;
    }
    return c;
  };
  d.dtype_from_input0 = true;  // input 1 is the int64 axes
  // Over trailing axes, sums and means are row-reduction library kernels.
  if (kind == RK::sum || kind == RK::mean) d.library = LibraryKind::TrailingReduce;
  // Sum, max and mean over the last axis alone are reductions inside fused kernels.
  if (kind == RK::sum || kind == RK::max || kind == RK::mean) {
    d.lowering = Lowering::Reduction;
    d.reduce = kind == RK::sum ? ReduceKind::Sum : kind == RK::max ? ReduceKind::Max : ReduceKind::Mean;
    d.can_fuse = [](const Graph& g, const Node& n) -> std::string {
      size_t rank = input0_rank(g, n);
      std::vector<int64_t> axes = n.attr_ints("axes");
      if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
        const Tensor& a = g.value(n.inputs[1]).constant;
        if (!a.defined()) return "reduction axes are not constant";
        axes = a.to_int64_vector();
      }
      if (axes.empty() && rank == 1) axes = {0};
      if (axes.size() != 1 || !is_last_axis(axes[0], rank))
        return fmt::format("{} reduces over axes other than the last one", n.op);
      return "";
    };
  }
  t.add(std::move(d));
}

// ArgMax / ArgMin: index of the first (or last, with select_last_index) extreme along `axis`.
void add_arg(OpTable& t, const char* name, bool is_max) {
  OpDef d;
  d.name = name;
  d.since = 13;
  d.cls = OpClass::normalization;
  d.infer = [](InferCtx& c) {
    if (c.in_dtype(0) == DType::boolean) c.fail("{} does not accept bool input", c.node.op);
    int64_t r = c.in_rank(0);
    int64_t a = c.axis(c.node.attr_int("axis", 0), r);
    bool keep = c.node.attr_int("keepdims", 1) != 0;
    std::vector<bool> m(size_t(r), false);
    if (r > 0) m[size_t(a)] = true;
    Shape out = reduced_shape(c.in_shape(0), m, keep);
    if (r > 0 && c.in_shape(0)[size_t(a)] == 0 && shape_numel(out) > 0)
      c.fail("cannot take {} over axis {}, which has size 0", c.node.op, a);
    c.set_output(0, DType::i64, out);
  };
  d.reference = [is_max](KernelCtx& k) {
    Tensor x = k.inputs[0].contiguous();
    int64_t r = x.rank();
    int64_t a = norm_axis(k.node.attr_int("axis", 0), r);
    bool last = k.node.attr_int("select_last_index", 0) != 0;
    AxisLayout L = r == 0 ? AxisLayout{} : axis_layout(x.shape(), a);
    int64_t* po = k.outputs[0].data<int64_t>();
    dispatch_dtype(x.dtype(), [&]<typename T>() {
      using C = compute_t<T>;
      const T* p = x.data<T>();
      // NaN counts as the extreme (numpy's argmax/argmin convention).
      auto better = [&](C v, C best) {
        if (isnan_(best)) return last && isnan_(v);
        if (isnan_(v)) return true;
        if (last) return is_max ? v >= best : v <= best;
        return is_max ? v > best : v < best;
      };
      for (int64_t o = 0; o < L.outer; ++o)
        for (int64_t i = 0; i < L.inner; ++i) {
          int64_t bi = 0;
          C best = C(p[L.at(o, 0, i)]);
          for (int64_t j = 1; j < L.n; ++j) {
            C v = C(p[L.at(o, j, i)]);
            if (better(v, best)) best = v, bi = j;
          }
          po[o * L.inner + i] = bi;
        }
    });
  };
  d.cost = [](const Graph& g, const Node& n) {
    Cost c;
    c.flops = double(numel_of(g, n.inputs[0]));
    return c;
  };
  t.add(std::move(d));
}

int64_t cumsum_axis(const Tensor& ax, int64_t r) {
  if (ax.numel() != 1 || ax.rank() > 1)
    fail("axis (input 1) must be a scalar, got shape {}", shape_str(ax.shape()));
  int64_t a = ax.at_int(0);
  int64_t lim = std::max<int64_t>(r, 1);
  if (a < -lim || a >= lim) fail("axis {} is out of range for rank {}", a, r);
  return a < 0 ? a + r : a;
}

void add_cumsum(OpTable& t) {
  OpDef d;
  d.name = "CumSum";
  d.since = 14;
  d.cls = OpClass::normalization;
  d.infer = [](InferCtx& c) {
    DType dt = c.in_dtype(0);
    if (dt == DType::boolean) c.fail("CumSum does not accept bool input");
    if (c.in_dtype(1) != DType::i64 && c.in_dtype(1) != DType::i32)
      c.fail("axis (input 1) must be int32 or int64, got {}", dtype_name(c.in_dtype(1)));
    if (const Tensor* ax = c.in_const(1)) {
      try {
        cumsum_axis(*ax, c.in_rank(0));
      } catch (const Error& e) {
        c.fail_msg(e.what());
      }
    }
    c.set_output(0, dt, c.in_shape(0));
  };
  d.reference = [](KernelCtx& k) {
    Tensor x = k.inputs[0].contiguous();
    int64_t r = x.rank();
    int64_t a = cumsum_axis(k.inputs[1], r);
    bool excl = k.node.attr_int("exclusive", 0) != 0;
    bool rev = k.node.attr_int("reverse", 0) != 0;
    AxisLayout L = r == 0 ? AxisLayout{} : axis_layout(x.shape(), a);
    dispatch_dtype(x.dtype(), [&]<typename T>() {
      using A = std::conditional_t<std::is_floating_point_v<compute_t<T>>, double, int64_t>;
      const T* p = x.data<T>();
      T* po = k.outputs[0].data<T>();
      for (int64_t o = 0; o < L.outer; ++o)
        for (int64_t i = 0; i < L.inner; ++i) {
          A acc = 0;
          for (int64_t s = 0; s < L.n; ++s) {
            int64_t j = rev ? L.n - 1 - s : s;
            int64_t at = L.at(o, j, i);
            A v = A(compute_t<T>(p[at]));
            if (!excl) acc = add_(acc, v);
            if constexpr (std::is_integral_v<A>)
              po[at] = T(acc);
            else
              po[at] = from_double<T>(acc);
            if (excl) acc = add_(acc, v);
          }
        }
    });
  };
  d.cost = cost_per_output(1);
  t.add(std::move(d));
}

int64_t topk_k(const Tensor& kt) {
  if (kt.numel() != 1 || kt.rank() > 1)
    fail("K (input 1) must hold a single value, got shape {}", shape_str(kt.shape()));
  return kt.at_int(0);
}

void add_topk(OpTable& t) {
  OpDef d;
  d.name = "TopK";
  d.since = 11;
  d.cls = OpClass::normalization;
  d.infer = [](InferCtx& c) {
    if (c.in_dtype(0) == DType::boolean) c.fail("TopK does not accept bool input");
    if (c.in_dtype(1) != DType::i64) c.fail("K (input 1) must be int64");
    int64_t r = c.in_rank(0);
    if (r == 0) c.fail("TopK needs an input of rank >= 1");
    int64_t a = c.axis(c.node.attr_int("axis", -1), r);
    int64_t kk;
    try {
      kk = topk_k(c.require_const(1, "K"));
    } catch (const Error& e) {
      c.fail_msg(e.what());
    }
    if (kk < 0 || kk > c.in_shape(0)[size_t(a)])
      c.fail("K = {} is outside [0, {}] (the size of axis {})", kk, c.in_shape(0)[size_t(a)], a);
    Shape s = c.in_shape(0);
    s[size_t(a)] = kk;
    c.set_output(0, c.in_dtype(0), s);
    c.set_output(1, DType::i64, s);
  };
  d.reference = [](KernelCtx& k) {
    Tensor x = k.inputs[0].contiguous();
    int64_t r = x.rank();
    int64_t a = norm_axis(k.node.attr_int("axis", -1), r);
    bool largest = k.node.attr_int("largest", 1) != 0;
    int64_t kk = topk_k(k.inputs[1]);
    AxisLayout L = axis_layout(x.shape(), a);
    AxisLayout LO{L.outer, kk, L.inner};
    int64_t* pi = k.outputs[1].data<int64_t>();
    dispatch_dtype(x.dtype(), [&]<typename T>() {
      using C = compute_t<T>;
      const T* p = x.data<T>();
      T* pv = k.outputs[0].data<T>();
      std::vector<int64_t> idx(size_t(L.n));
      for (int64_t o = 0; o < L.outer; ++o)
        for (int64_t i = 0; i < L.inner; ++i) {
          std::iota(idx.begin(), idx.end(), 0);
          // Ties keep the lower index first (spec); NaN sorts as the largest value.
          auto before = [&](int64_t u, int64_t w) {
            C cu = C(p[L.at(o, u, i)]), cw = C(p[L.at(o, w, i)]);
            bool nu = isnan_(cu), nw = isnan_(cw);
            if (nu || nw) {
              if (nu && nw) return u < w;
              return largest ? nu : nw;
            }
            if (cu != cw) return largest ? cu > cw : cu < cw;
            return u < w;
          };
          std::partial_sort(idx.begin(), idx.begin() + kk, idx.end(), before);
          for (int64_t j = 0; j < kk; ++j) {
            pv[LO.at(o, j, i)] = p[L.at(o, idx[size_t(j)], i)];
            pi[LO.at(o, j, i)] = idx[size_t(j)];
          }
        }
    });
  };
  d.cost = [](const Graph& g, const Node& n) {
    Cost c;
    double in = double(numel_of(g, n.inputs[0]));
    c.flops = in * std::max(1.0, std::log2(std::max(2.0, double(out_numel(g, n)))));
    return c;
  };
  t.add(std::move(d));
}

}  // namespace

void register_reduction_ops(OpTable& t) {
  add_reduce(t, "ReduceSum", RK::sum);
  add_reduce(t, "ReduceMean", RK::mean);
  add_reduce(t, "ReduceMax", RK::max);
  add_reduce(t, "ReduceMin", RK::min);
  add_reduce(t, "ReduceProd", RK::prod);
  add_reduce(t, "ReduceL1", RK::l1);
  add_reduce(t, "ReduceL2", RK::l2);
  add_reduce(t, "ReduceSumSquare", RK::sumsq);
  add_reduce(t, "ReduceLogSum", RK::logsum);
  add_reduce(t, "ReduceLogSumExp", RK::logsumexp);
  add_arg(t, "ArgMax", true);
  add_arg(t, "ArgMin", false);
  add_cumsum(t);
  add_topk(t);
}

}  // namespace brrr
