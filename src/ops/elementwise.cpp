// Elementwise ops with two or more inputs: arithmetic with broadcasting (Add Sub Mul Div Pow Mod),
// comparisons, logic, Where and the variadic Min Max Sum Mean. Unary math and activations live in
// elementwise_unary.cpp; Cast, Clip, PRelu and friends in elementwise_misc.cpp.
#include <cmath>
#include <optional>

#include "ops/elementwise_util.hpp"

namespace brrr {
namespace ops {

bool dtype_in(DType t, unsigned set) {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::f64:
      return set & kFloat;
    case DType::i64:
    case DType::i32:
    case DType::i8:
      return set & kSignedInt;
    case DType::u8:
      return set & kUnsignedInt;
    case DType::boolean:
      return set & kBool;
  }
  return false;
}

static std::string set_name(unsigned set) {
  if (set == kAnyType) return "any type";
  std::vector<std::string> parts;
  if (set & kFloat) parts.push_back("float");
  if ((set & kInt) == kInt)
    parts.push_back("integer");
  else if (set & kSignedInt)
    parts.push_back("signed integer");
  else if (set & kUnsignedInt)
    parts.push_back("unsigned integer");
  if (set & kBool) parts.push_back("bool");
  return fmt::format("{}", fmt::join(parts, " or "));
}

void require_dtype(InferCtx& c, int i, unsigned set) {
  if (!dtype_in(c.in_dtype(i), set))
    c.fail("input {} is {}, but {} takes {} tensors", i, dtype_name(c.in_dtype(i)), c.node.op,
           set_name(set));
}

}  // namespace ops

using namespace ops;

namespace {

// Opset < 7 binary ops could align B at `axis` (legacy broadcast); numpy-style suffix alignment
// (the only form without `axis`) is what infer_broadcast does.
void reject_legacy_axis(InferCtx& c) {
  if (c.node.attr_int("broadcast", 0) != 0 && c.node.has_attr("axis"))
    c.fail("legacy broadcast with an axis attribute (opset < 7) is not supported");
}

// Same-dtype inputs from `set`, broadcast shape; output dtype `out` (or the input dtype).
void infer_same(InferCtx& c, unsigned set, std::optional<DType> out = std::nullopt) {
  reject_legacy_axis(c);
  require_dtype(c, 0, set);
  require_same_dtype(c);
  infer_broadcast(c, out.value_or(c.in_dtype(0)));
}

// Binary op over same-dtype inputs: fn(a, b) on compute types returns the output element.
template <bool ToBool, typename Fn>
void add_binary(OpTable& t, const char* name, int since, unsigned set, ScalarOp op,
                double flops, Fn fn, LibraryKind library = LibraryKind::None) {
  OpDef d = ew_def(name, since);
  d.infer = [set](InferCtx& c) {
    if (c.num_inputs() != 2 || !c.has_input(1)) c.fail("takes exactly 2 inputs");
    infer_same(c, set, ToBool ? std::optional<DType>(DType::boolean) : std::nullopt);
  };
  d.reference = [fn](KernelCtx& k) {
    dispatch_dtype(k.inputs[0].dtype(), [&]<typename T>() {
      const Node& n = k.node;
      if constexpr (ToBool)
        map_binary<T, T, bool>(k.inputs[0], k.inputs[1], k.outputs[0],
                               [&](auto a, auto b) { return bool(fn(n, a, b)); });
      else if constexpr (!std::is_same_v<T, bool>)
        map_binary<T, T, T>(k.inputs[0], k.inputs[1], k.outputs[0],
                            [&](auto a, auto b) { return fn(n, a, b); });
      else
        fail("{} on bool tensors is not defined", n.op);
    });
  };
  d.cost = cost_per_output(flops);
  d.pointwise = pointwise_of(op, 2);
  d.library = library;
  t.add(std::move(d));
}

// Integer power by squaring; wraps on overflow like the other integer ops. Negative exponents
// give the truncated value of 1 / a^-e (0 unless |a| == 1); 0 to a negative power is an error.
template <typename C>
C int_pow(C base, int64_t e) {
  int64_t a = int64_t(base);
  if (e < 0) {
    if (a == 0) fail("integer Pow: 0 raised to the negative power {}", e);
    if (a == 1) return C(1);
    if (a == -1) return C((e & 1) ? -1 : 1);
    return C(0);
  }
  uint64_t r = 1, b = uint64_t(a);
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return C(int64_t(r));
}

template <typename C, typename E>
C pow_scalar(C a, E b) {
  if constexpr (std::is_integral_v<C>) {
    if constexpr (std::is_integral_v<E>)
      return int_pow<C>(a, int64_t(b));
    else
      return saturate_to<C>(std::pow(double(a), double(b)));
  } else {
    // Compute in the wider of the two (numpy promotes float32 ** float64 to float64).
    using W =
        std::conditional_t<std::is_same_v<C, double> || std::is_same_v<E, double>, double, float>;
    return C(std::pow(W(a), W(b)));
  }
}

void add_pow(OpTable& t) {
  OpDef d = ew_def("Pow", 7);
  d.infer = [](InferCtx& c) {
    reject_legacy_axis(c);
    require_dtype(c, 0, kNumeric);
    require_dtype(c, 1, kNumeric);
    infer_broadcast(c, c.in_dtype(0));
  };
  d.reference = [](KernelCtx& k) {
    dispatch_dtype(k.inputs[0].dtype(), [&]<typename T>() {
      dispatch_dtype(k.inputs[1].dtype(), [&]<typename E>() {
        if constexpr (std::is_same_v<T, bool> || std::is_same_v<E, bool>)
          fail("Pow on bool tensors is not defined");
        else
          map_binary<T, E, T>(k.inputs[0], k.inputs[1], k.outputs[0],
                              [](auto a, auto b) { return pow_scalar(a, b); });
      });
    });
  };
  d.cost = cost_per_output(0, {{"pow", 1}});
  d.pointwise = pointwise_of(ScalarOp::Pow, 2);
  t.add(std::move(d));
}

void add_mod(OpTable& t) {
  OpDef d = ew_def("Mod", 10);
  d.infer = [](InferCtx& c) {
    // Float with fmod=0 is outside opsets 10..21 but defined by newer ONNX as numpy's mod.
    infer_same(c, kNumeric);
  };
  d.reference = [](KernelCtx& k) {
    bool fmod = k.node.attr_int("fmod", 0) != 0;
    dispatch_dtype(k.inputs[0].dtype(), [&]<typename T>() {
      if constexpr (std::is_same_v<T, bool>) {
        fail("Mod on bool tensors is not defined");
      } else {
        map_binary<T, T, T>(k.inputs[0], k.inputs[1], k.outputs[0], [&](auto a, auto b) {
          using C = decltype(a);
          if constexpr (std::is_integral_v<C>) {
            if (b == 0) fail("integer Mod by zero (a zero in B, input 1)");
            if constexpr (std::is_signed_v<C>) {
              if (b == -1) return C(0);  // avoids INT_MIN % -1 overflow
              C r = C(a % b);
              // fmod=0: result takes the divisor's sign (Python %); fmod=1: the dividend's (C %).
              if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = C(r + b);
              return r;
            } else {
              return C(a % b);
            }
          } else {
            C r = C(std::fmod(a, b));
            if (fmod || b == 0) return r;
            // numpy mod: the result takes the divisor's sign, zero included.
            if (r != 0) return (r < 0) != (b < 0) ? C(r + b) : r;
            return C(std::copysign(C(0), b));
          }
        });
      }
    });
  };
  d.cost = [](const Graph& g, const Node& n) {
    bool flt = is_floating(g.value(n.inputs[0]).dtype);
    return cost_per_output(flt ? 0 : 1, flt ? std::map<std::string, double>{{"fmod", 1}}
                                            : std::map<std::string, double>{})(g, n);
  };
  d.pointwise = [](const Node& n) {  // numpy mod (fmod=0) or fmodf (fmod=1)
    bool fmod = attr_choice(n, "fmod", {"0", "1"}) == 1;
    return pointwise_of(fmod ? ScalarOp::ModFmod : ScalarOp::ModNumpy, 2)(n);
  };
  t.add(std::move(d));
}

void add_where(OpTable& t) {
  OpDef d = ew_def("Where", 9);
  d.infer = [](InferCtx& c) {
    if (c.in_dtype(0) != DType::boolean)
      c.fail("condition (input 0) must be bool, not {}", dtype_name(c.in_dtype(0)));
    if (c.in_dtype(1) != c.in_dtype(2))
      c.fail("X (input 1) is {} but Y (input 2) is {}", dtype_name(c.in_dtype(1)),
             dtype_name(c.in_dtype(2)));
    infer_broadcast(c, c.in_dtype(1));
  };
  d.reference = [](KernelCtx& k) {
    const Shape& s = k.outputs[0].shape();
    Tensor ec = k.inputs[0].expand(s), ex = k.inputs[1].expand(s), ey = k.inputs[2].expand(s);
    dispatch_dtype(k.outputs[0].dtype(), [&]<typename T>() {
      const bool* pc = static_cast<const bool*>(ec.raw());
      const T* px = static_cast<const T*>(ex.raw());
      const T* py = static_cast<const T*>(ey.raw());
      T* o = k.outputs[0].data<T>();
      for_each_index<3>(s, {&ec.strides(), &ex.strides(), &ey.strides()},
                        [&](int64_t i, const std::array<int64_t, 3>& off) {
                          o[i] = pc[off[0]] ? px[off[1]] : py[off[2]];
                        });
    });
  };
  d.cost = cost_per_output(1);
  d.pointwise = pointwise_of(ScalarOp::Where, 3);
  t.add(std::move(d));
}

// Variadic ops with broadcasting. They accumulate in the compute type (float for f16 / bf16);
// fn folds two compute-type values. Mean divides by the input count at the end.
template <typename Fn>
void add_variadic(OpTable& t, const char* name, int since, unsigned set, bool mean,
                  std::optional<ScalarOp> op, Fn fn) {
  OpDef d = ew_def(name, since);
  d.infer = [set](InferCtx& c) {
    if (c.num_inputs() < 1 || !c.has_input(0)) c.fail("needs at least one input");
    for (int i = 1; i < c.num_inputs(); ++i)
      if (!c.has_input(i)) c.fail("input {} is omitted, but every input of this op is required", i);
    infer_same(c, set);
  };
  d.reference = [fn, mean](KernelCtx& k) {
    dispatch_dtype(k.outputs[0].dtype(), [&]<typename T>() {
      using A = compute_t<T>;
      if constexpr (std::is_same_v<T, bool>) {
        fail("{} on bool tensors is not defined", k.node.op);
      } else {
        const Shape& s = k.outputs[0].shape();
        Tensor acc = k.inputs[0].expand(s).cast(dtype_of<A>());
        for (size_t i = 1; i < k.inputs.size(); ++i)
          map_binary<A, T, A>(acc, k.inputs[i], acc, [&](A a, A b) { return A(fn(a, b)); });
        if (mean) {
          A* p = acc.data<A>();
          for (int64_t i = 0; i < acc.numel(); ++i) p[i] = A(p[i] / A(k.inputs.size()));
        }
        k.outputs[0] = dtype_of<A>() == dtype_of<T>() ? acc : acc.cast(dtype_of<T>());
      }
    });
  };
  d.cost = [mean](const Graph& g, const Node& n) {
    double per = double(n.inputs.size()) - (mean ? 0.0 : 1.0);
    return cost_per_output(per)(g, n);
  };
  if (op)  // the binary op folded over all inputs
    d.pointwise = [op = *op](const Node& n) {
      PointwiseForm f{op, {}, true};
      for (size_t i = 0; i < n.inputs.size(); ++i) f.operands.push_back({int(i), 0, false});
      return f;
    };
  t.add(std::move(d));
}

// NaN-propagating min / max (numpy minimum / maximum), generic over compute types.
constexpr auto min_nan = [](auto a, auto b) {
  if constexpr (std::is_floating_point_v<decltype(a)>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return b < a ? b : a;
};
constexpr auto max_nan = [](auto a, auto b) {
  if constexpr (std::is_floating_point_v<decltype(a)>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return b > a ? b : a;
};

}  // namespace

void register_elementwise_ops(OpTable& t) {
  // Arithmetic: integer results wrap on overflow; integer Div truncates toward zero.
  add_binary<false>(t, "Add", 7, kNumeric, ScalarOp::Add, 1,
                    [](const Node&, auto a, auto b) { return wrap_add(a, b); });
  add_binary<false>(t, "Sub", 7, kNumeric, ScalarOp::Sub, 1,
                    [](const Node&, auto a, auto b) { return wrap_sub(a, b); });
  add_binary<false>(t, "Mul", 7, kNumeric, ScalarOp::Mul, 1,
                    [](const Node&, auto a, auto b) { return wrap_mul(a, b); },
                    LibraryKind::ChannelScale);  // between convs: squeeze-excite's scale
  add_binary<false>(t, "Div", 7, kNumeric, ScalarOp::Div, 1, [](const Node&, auto a, auto b) {
    using C = decltype(a);
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) fail("integer division by zero (a zero in B, input 1)");
      if constexpr (std::is_signed_v<C>)
        if (b == -1) return wrap_neg(a);  // INT_MIN / -1 overflows in C
      return C(a / b);
    } else {
      return C(a / b);
    }
  });
  add_pow(t);
  add_mod(t);

  // Comparisons produce bool.
  add_binary<true>(t, "Equal", 7, kAnyType, ScalarOp::Equal, 1,
                   [](const Node&, auto a, auto b) { return a == b; });
  add_binary<true>(t, "Less", 7, kAnyType, ScalarOp::Less, 1,
                   [](const Node&, auto a, auto b) { return a < b; });
  add_binary<true>(t, "LessOrEqual", 12, kAnyType, ScalarOp::LessOrEqual, 1,
                   [](const Node&, auto a, auto b) { return a <= b; });
  add_binary<true>(t, "Greater", 7, kAnyType, ScalarOp::Greater, 1,
                   [](const Node&, auto a, auto b) { return a > b; });
  add_binary<true>(t, "GreaterOrEqual", 12, kAnyType, ScalarOp::GreaterOrEqual, 1,
                   [](const Node&, auto a, auto b) { return a >= b; });

  // Logic on bool tensors.
  add_binary<true>(t, "And", 7, kBool, ScalarOp::And, 1,
                   [](const Node&, auto a, auto b) { return a && b; });
  add_binary<true>(t, "Or", 7, kBool, ScalarOp::Or, 1,
                   [](const Node&, auto a, auto b) { return a || b; });
  add_binary<true>(t, "Xor", 7, kBool, ScalarOp::Xor, 1,
                   [](const Node&, auto a, auto b) { return a != b; });

  add_where(t);

  add_variadic(t, "Min", 8, kNumeric, false, ScalarOp::Min, min_nan);
  add_variadic(t, "Max", 8, kNumeric, false, ScalarOp::Max, max_nan);
  add_variadic(t, "Sum", 8, kFloat, false, ScalarOp::Add, [](auto a, auto b) { return a + b; });
  add_variadic(t, "Mean", 8, kFloat, true, std::nullopt, [](auto a, auto b) { return a + b; });

  register_elementwise_unary(t);
  register_elementwise_misc(t);
}

}  // namespace brrr
