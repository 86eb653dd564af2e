// Unary elementwise ops: math functions and activations. Each reference lambda is generic over
// the compute type (float for f32 / f16 / bf16, double for f64, the integer itself for ints) and
// calls the generic form (namespace brrr_scalar, brrr/scalar_ops.h) of the function generated code
// calls, so each formula is written once and fused and unfused f32 results agree.
#include <cmath>

#include "ops/elementwise_util.hpp"

namespace brrr {
using namespace ops;

namespace {

// `make(node)` returns the scalar function for that node (attributes read once, not per element).
// Set: the input dtypes the op accepts; the output has the input's dtype and shape.
template <unsigned Set, typename Make>
OpDef unary_def(const char* name, int since, std::function<PointwiseForm(const Node&)> lower, double flops,
                std::map<std::string, double> special, Make make) {
  OpDef d = ew_def(name, since);
  d.infer = [](InferCtx& c) {
    require_dtype(c, 0, Set);
    c.set_output(0, c.in_dtype(0), c.in_shape(0));
  };
  d.reference = [make](KernelCtx& k) {
    auto f = make(k.node);
    dispatch_dtype(k.inputs[0].dtype(), [&]<typename T>() {
      if constexpr ((type_bit<T>() & Set) != 0)
        map_unary<T, T>(k.inputs[0], k.outputs[0], f);
      else
        fail("{} on {} tensors is not defined", k.node.op, dtype_name(dtype_of<T>()));
    });
  };
  d.cost = cost_per_output(flops, std::move(special));
  d.pointwise = std::move(lower);
  return d;
}

template <unsigned Set, typename Make>
void add_unary(OpTable& t, const char* name, int since, std::function<PointwiseForm(const Node&)> lower, double flops,
               std::map<std::string, double> special, Make make, Activation act = Activation::None) {
  OpDef d = unary_def<Set>(name, since, std::move(lower), flops, std::move(special), make);
  if (act != Activation::None) d.activation = activation_is(act);  // a GEMM / conv epilogue's
  t.add(std::move(d));
}

// A node-independent scalar function.
#define BRRR_FN(...)         \
  [](const Node&) {          \
    return [](auto x) {      \
      using C = decltype(x); \
      return C(__VA_ARGS__); \
    };                       \
  }

void add_float_math(OpTable& t) {
  add_unary<kFloat>(t, "Sqrt", 6, pointwise_of(ScalarOp::Sqrt, 1), 0, {{"sqrt", 1}}, BRRR_FN(std::sqrt(x)));
  add_unary<kFloat>(t, "Reciprocal", 6, pointwise_of(ScalarOp::Reciprocal, 1), 1, {}, BRRR_FN(C(1) / x));
  add_unary<kFloat>(t, "Exp", 6, pointwise_of(ScalarOp::Exp, 1), 0, {{"exp", 1}}, BRRR_FN(std::exp(x)));
  add_unary<kFloat>(t, "Log", 6, pointwise_of(ScalarOp::Log, 1), 0, {{"log", 1}}, BRRR_FN(std::log(x)));
  add_unary<kFloat>(t, "Tanh", 6, pointwise_of(ScalarOp::Tanh, 1), 0, {{"tanh", 1}}, BRRR_FN(std::tanh(x)),
                    Activation::Tanh);
  add_unary<kFloat>(t, "Erf", 9, pointwise_of(ScalarOp::Erf, 1), 0, {{"erf", 1}}, BRRR_FN(std::erf(x)));
  add_unary<kFloat>(t, "Cos", 7, pointwise_of(ScalarOp::Cos, 1), 0, {{"cos", 1}}, BRRR_FN(std::cos(x)));
  add_unary<kFloat>(t, "Sin", 7, pointwise_of(ScalarOp::Sin, 1), 0, {{"sin", 1}}, BRRR_FN(std::sin(x)));
  add_unary<kFloat>(t, "Tan", 7, pointwise_of(ScalarOp::Tan, 1), 0, {{"tan", 1}}, BRRR_FN(std::tan(x)));
  add_unary<kFloat>(t, "Acos", 7, pointwise_of(ScalarOp::Acos, 1), 0, {{"acos", 1}}, BRRR_FN(std::acos(x)));
  add_unary<kFloat>(t, "Asin", 7, pointwise_of(ScalarOp::Asin, 1), 0, {{"asin", 1}}, BRRR_FN(std::asin(x)));
  add_unary<kFloat>(t, "Atan", 7, pointwise_of(ScalarOp::Atan, 1), 0, {{"atan", 1}}, BRRR_FN(std::atan(x)));
  add_unary<kFloat>(t, "Sinh", 9, pointwise_of(ScalarOp::Sinh, 1), 0, {{"sinh", 1}}, BRRR_FN(std::sinh(x)));
  add_unary<kFloat>(t, "Cosh", 9, pointwise_of(ScalarOp::Cosh, 1), 0, {{"cosh", 1}}, BRRR_FN(std::cosh(x)));
  add_unary<kFloat>(t, "Floor", 6, pointwise_of(ScalarOp::Floor, 1), 1, {}, BRRR_FN(std::floor(x)));
  add_unary<kFloat>(t, "Ceil", 6, pointwise_of(ScalarOp::Ceil, 1), 1, {}, BRRR_FN(std::ceil(x)));
  // Half to even: rint under the default rounding mode (std::round would round half away).
  add_unary<kFloat>(t, "Round", 11, pointwise_of(ScalarOp::Round, 1), 1, {}, BRRR_FN(std::rint(x)));
}

void add_signed_math(OpTable& t) {
  add_unary<kBool>(t, "Not", 1, pointwise_of(ScalarOp::Not, 1), 1, {}, BRRR_FN(!x));
  add_unary<kSigned>(t, "Neg", 6, pointwise_of(ScalarOp::Neg, 1), 1, {}, BRRR_FN(wrap_neg(x)));
  add_unary<kNumeric>(t, "Abs", 6, pointwise_of(ScalarOp::Abs, 1), 1, {}, [](const Node&) {
    return [](auto x) {
      using C = decltype(x);
      if constexpr (std::is_floating_point_v<C>)
        return C(std::fabs(x));
      else if constexpr (std::is_unsigned_v<C>)
        return x;
      else
        return x < 0 ? wrap_neg(x) : x;
    };
  });
  add_unary<kNumeric>(t, "Sign", 9, pointwise_of(ScalarOp::Sign, 1), 1, {}, [](const Node&) {
    return [](auto x) {
      using C = decltype(x);
      if constexpr (std::is_unsigned_v<C>)
        return C(x != 0);
      else
        return brrr_scalar::sign(x);  // keeps NaN
    };
  });
  // Relu keeps NaN (numpy clip in the ONNX reference); opset 14 added signed integers.
  add_unary<kNumeric>(t, "Relu", 6, pointwise_of(ScalarOp::Relu, 1), 1, {}, [](const Node&) {
    return [](auto x) {
      using C = decltype(x);
      if constexpr (std::is_unsigned_v<C>)
        return x;
      else
        return brrr_scalar::relu(x);
    };
  }, Activation::Relu);
}

void add_activations(OpTable& t) {
  add_unary<kFloat>(t, "Sigmoid", 6, pointwise_of(ScalarOp::Sigmoid, 1), 2, {{"exp", 1}},
                    BRRR_FN(brrr_scalar::sigmoid(x)), Activation::Sigmoid);
  add_unary<kFloat>(t, "LeakyRelu", 6, [](const Node& n) { return PointwiseForm{ScalarOp::LeakyRelu, {{0, 0, false}, attr_operand(n, "alpha", 0.01)}, false}; }, 2, {},
                    [](const Node& n) {
                      float alpha = n.attr_float("alpha", 0.01f);
                      return [alpha](auto x) {
                        using C = decltype(x);
                        return brrr_scalar::leaky_relu(x, C(alpha));
                      };
                    });
  add_unary<kFloat>(t, "Elu", 6, [](const Node& n) { return PointwiseForm{ScalarOp::Elu, {{0, 0, false}, attr_operand(n, "alpha", 1.0)}, false}; }, 2, {{"exp", 1}}, [](const Node& n) {
    float alpha = n.attr_float("alpha", 1.0f);
    return [alpha](auto x) {
      using C = decltype(x);
      return brrr_scalar::elu(x, C(alpha));
    };
  });
  add_unary<kFloat>(
      t, "Selu", 6,
      [](const Node& n) { return PointwiseForm{ScalarOp::Selu, {{0, 0, false}, attr_operand(n, "alpha", 1.67326319217681884765625), attr_operand(n, "gamma", 1.05070102214813232421875)}, false}; }, 3,
      {{"exp", 1}}, [](const Node& n) {
        float alpha = n.attr_float("alpha", 1.67326319217681884765625f);
        float gamma = n.attr_float("gamma", 1.05070102214813232421875f);
        return [alpha, gamma](auto x) {
          using C = decltype(x);
          return brrr_scalar::selu(x, C(alpha), C(gamma));
        };
      });
  add_unary<kFloat>(t, "Celu", 12, [](const Node& n) { return PointwiseForm{ScalarOp::Celu, {{0, 0, false}, attr_operand(n, "alpha", 1.0)}, false}; }, 3, {{"exp", 1}},
                    [](const Node& n) {
                      float alpha = n.attr_float("alpha", 1.0f);
                      return [alpha](auto x) {
                        using C = decltype(x);
                        return brrr_scalar::celu(x, C(alpha));
                      };
                    });
  add_unary<kFloat>(t, "ThresholdedRelu", 10, [](const Node& n) { return PointwiseForm{ScalarOp::ThresholdedRelu, {{0, 0, false}, attr_operand(n, "alpha", 1.0)}, false}; }, 1, {},
                    [](const Node& n) {
                      float alpha = n.attr_float("alpha", 1.0f);
                      return [alpha](auto x) {
                        using C = decltype(x);
                        return brrr_scalar::thresholded_relu(x, C(alpha));
                      };
                    });
  add_unary<kFloat>(t, "HardSigmoid", 6, [](const Node& n) { return PointwiseForm{ScalarOp::HardSigmoid, {{0, 0, false}, attr_operand(n, "alpha", 0.2), attr_operand(n, "beta", 0.5)}, false}; }, 4, {},
                    [](const Node& n) {
                      float alpha = n.attr_float("alpha", 0.2f), beta = n.attr_float("beta", 0.5f);
                      return [alpha, beta](auto x) {
                        using C = decltype(x);
                        return brrr_scalar::hardsigmoid(x, C(alpha), C(beta));
                      };
                    }, Activation::HardSigmoid);
  add_unary<kFloat>(t, "HardSwish", 14, pointwise_of(ScalarOp::HardSwish, 1), 5, {},
                    BRRR_FN(brrr_scalar::hardswish(x)), Activation::HardSwish);
  add_unary<kFloat>(t, "Softplus", 1, pointwise_of(ScalarOp::Softplus, 1), 2, {{"exp", 1}, {"log", 1}},
                    BRRR_FN(brrr_scalar::softplus(x)));
  add_unary<kFloat>(t, "Softsign", 1, pointwise_of(ScalarOp::Softsign, 1), 3, {},
                    BRRR_FN(brrr_scalar::softsign(x)));
  add_unary<kFloat>(t, "Mish", 18, pointwise_of(ScalarOp::Mish, 1), 3, {{"exp", 1}, {"log", 1}, {"tanh", 1}},
                    BRRR_FN(brrr_scalar::mish(x)));

  // Gelu (opset 20): approximate = "none" (erf) or "tanh"; the pointwise helper name carries it.
  OpDef gelu =
      unary_def<kFloat>("Gelu", 20, [](const Node& n) {
        bool tanh_form = attr_choice(n, "approximate", {"none", "tanh"}) == 1;
        return pointwise_of(tanh_form ? ScalarOp::GeluTanh : ScalarOp::GeluErf, 1)(n);
      }, 4, {}, [](const Node& n) {
        bool tanh_form = n.attr_string("approximate", "none") == "tanh";
        return [tanh_form](auto x) {
          return tanh_form ? brrr_scalar::gelu_tanh(x) : brrr_scalar::gelu_erf(x);
        };
      });
  gelu.infer = [](InferCtx& c) {
    require_dtype(c, 0, kFloat);
    std::string a = c.node.attr_string("approximate", "none");
    if (a != "none" && a != "tanh")
      c.fail("approximate must be \"none\" or \"tanh\", not \"{}\"", a);
    c.set_output(0, c.in_dtype(0), c.in_shape(0));
  };
  gelu.cost = [](const Graph& g, const Node& n) {
    if (n.attr_string("approximate", "none") == "tanh")
      return cost_per_output(7, {{"tanh", 1}})(g, n);
    return cost_per_output(4, {{"erf", 1}})(g, n);
  };
  gelu.activation = [](const Node& n) {
    return n.attr_string("approximate", "none") == "tanh" ? Activation::GeluTanh : Activation::GeluErf;
  };
  t.add(std::move(gelu));
}

#undef BRRR_FN

}  // namespace

namespace ops {
void register_elementwise_unary(OpTable& t) {
  add_float_math(t);
  add_signed_math(t);
  add_activations(t);
}
}  // namespace ops

}  // namespace brrr
