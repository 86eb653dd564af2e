// Elementwise ops with special typing or optional inputs: IsNaN, IsInf, Clip, PRelu, Cast,
// CastLike, Identity and inference-mode Dropout.
#include <cmath>

#include "ops/elementwise_util.hpp"

namespace brrr {
using namespace ops;

namespace {

// Float input -> bool output of the same shape; make(node) returns the float predicate.
template <typename Make>
void add_float_predicate(OpTable& t, const char* name, int since,
                         std::function<PointwiseForm(const Node&)> lower, Make make) {
  OpDef d = ew_def(name, since);
  d.infer = [](InferCtx& c) {
    require_dtype(c, 0, kFloat);
    c.set_output(0, DType::boolean, c.in_shape(0));
  };
  d.reference = [make](KernelCtx& k) {
    auto f = make(k.node);
    dispatch_dtype(k.inputs[0].dtype(), [&]<typename T>() {
      if constexpr (is_float_v<T>)
        map_unary<T, bool>(k.inputs[0], k.outputs[0], f);
      else
        fail("{} on {} tensors is not defined", k.node.op, dtype_name(dtype_of<T>()));
    });
  };
  d.cost = cost_per_output(1);
  d.pointwise = std::move(lower);
  t.add(std::move(d));
}

// Clip (opset 11+: min / max as optional scalar inputs; opset 6: float attributes).
void add_clip(OpTable& t) {
  OpDef d = ew_def("Clip", 6);
  d.activation = activation_is(Activation::Clip);  // constant bounds: a GEMM / conv epilogue's
  d.infer = [](InferCtx& c) {
    require_dtype(c, 0, kNumeric);
    for (int i = 1; i <= 2; ++i) {
      if (!c.has_input(i)) continue;
      if (c.in_dtype(i) != c.in_dtype(0))
        c.fail("{} (input {}) is {} but the input is {}", i == 1 ? "min" : "max", i,
               dtype_name(c.in_dtype(i)), dtype_name(c.in_dtype(0)));
      if (shape_numel(c.in_shape(i)) != 1)
        c.fail("{} (input {}) must be a scalar, not shape {}", i == 1 ? "min" : "max", i,
               shape_str(c.in_shape(i)));
    }
    c.set_output(0, c.in_dtype(0), c.in_shape(0));
  };
  d.reference = [](KernelCtx& k) {
    dispatch_dtype(k.inputs[0].dtype(), [&]<typename T>() {
      using C = compute_t<T>;
      if constexpr (std::is_same_v<T, bool>) {
        fail("Clip on bool tensors is not defined");
      } else {
        // A missing bound is no bound: -inf / +inf for floats, the type's range for integers.
        auto bound = [&](int i, const char* attr, C none) -> C {
          if (k.has_input(i)) return C(k.inputs[i].contiguous().data<T>()[0]);
          if (k.node.has_attr(attr)) {
            if constexpr (is_float_v<T>)
              return C(k.node.attr_float(attr, 0));
            else
              return saturate_to<C>(k.node.attr_float(attr, 0));
          }
          return none;
        };
        C lo, hi;
        if constexpr (is_float_v<T>) {
          lo = bound(1, "min", -C(INFINITY));
          hi = bound(2, "max", C(INFINITY));
        } else {
          lo = bound(1, "min", std::numeric_limits<C>::lowest());
          hi = bound(2, "max", std::numeric_limits<C>::max());
        }
        // Same order as brrr_clip: NaN x stays NaN, a NaN bound is no bound, lo > hi gives hi.
        map_unary<T, T>(k.inputs[0], k.outputs[0], [lo, hi](C x) {
          if (x != x) return x;
          if (x < lo) x = lo;
          if (x > hi) x = hi;
          return x;
        });
      }
    });
  };
  d.cost = cost_per_output(2);
  d.pointwise = [](const Node& n) {  // an omitted bound is NaN: no bound
    return PointwiseForm{ScalarOp::Clip, {{0, 0, false}, input_or_attr(n, 1, "min"), input_or_attr(n, 2, "max")}, false};
  };
  t.add(std::move(d));
}

// PRelu: slope broadcasts to X (unidirectionally); the output has X's shape.
void add_prelu(OpTable& t) {
  OpDef d = ew_def("PRelu", 7);
  d.infer = [](InferCtx& c) {
    require_dtype(c, 0, kNumeric);
    require_same_dtype(c);
    Shape s;
    try {
      s = broadcast_shapes(c.in_shape(0), c.in_shape(1));
    } catch (const Error& e) {
      c.fail_msg(e.what());
    }
    if (s != c.in_shape(0))
      c.fail("slope shape {} must broadcast to the input shape {}", shape_str(c.in_shape(1)),
             shape_str(c.in_shape(0)));
    c.set_output(0, c.in_dtype(0), s);
  };
  d.reference = [](KernelCtx& k) {
    dispatch_dtype(k.inputs[0].dtype(), [&]<typename T>() {
      if constexpr (std::is_same_v<T, bool>) {
        fail("PRelu on bool tensors is not defined");
      } else {
        map_binary<T, T, T>(k.inputs[0], k.inputs[1], k.outputs[0], [](auto x, auto s) {
          using C = decltype(x);
          if constexpr (std::is_unsigned_v<C>)
            return x;
          else
            return x < C(0) ? C(wrap_mul(s, x)) : x;
        });
      }
    });
  };
  d.cost = cost_per_output(2);
  d.pointwise = pointwise_of(ScalarOp::PRelu, 2);
  t.add(std::move(d));
}

DType cast_target(InferCtx& c) {
  auto it = c.node.attrs.find("to");
  if (it == c.node.attrs.end() || !std::holds_alternative<int64_t>(it->second))
    c.fail("needs the integer attribute 'to' (an ONNX TensorProto data type)");
  try {
    return dtype_from_onnx(int(std::get<int64_t>(it->second)));
  } catch (const Error& e) {
    c.fail_msg(e.what());
  }
}

// Compulsory bytes of a node that reads only input 0 and writes output 0.
Cost bytes_in0_out0(const Graph& g, const Node& n) {
  Cost c;
  const Value& in = g.value(n.inputs[0]);
  const Value& out = g.value(n.outputs[0]);
  c.bytes = double(in.nbytes()) + double(out.nbytes());
  return c;
}

// Cast, CastLike, Identity. Float -> integer truncates toward zero (NaN -> 0, out of range
// saturates: undefined in ONNX); -> bool is x != 0. The saturate attribute only concerns float8.
// No pointwise form: a float expression cannot express the rounding to the target type.
void add_casts(OpTable& t) {
  {
    OpDef d = ew_def("Cast", 6);
    d.infer = [](InferCtx& c) { c.set_output(0, cast_target(c), c.in_shape(0)); };
    d.reference = [](KernelCtx& k) { k.outputs[0] = k.inputs[0].cast(k.outputs[0].dtype()); };
    d.cost = bytes_in0_out0;
    t.add(std::move(d));
  }
  {
    OpDef d = ew_def("CastLike", 15);
    d.infer = [](InferCtx& c) { c.set_output(0, c.in_dtype(1), c.in_shape(0)); };
    d.reference = [](KernelCtx& k) { k.outputs[0] = k.inputs[0].cast(k.outputs[0].dtype()); };
    d.cost = bytes_in0_out0;
    t.add(std::move(d));
  }
  {
    OpDef d = ew_def("Identity", 1);
    d.infer = [](InferCtx& c) { c.set_output(0, c.in_dtype(0), c.in_shape(0)); };
    d.reference = [](KernelCtx& k) { k.outputs[0] = k.inputs[0].clone(); };
    d.cost = bytes_in0_out0;
    d.pointwise = pointwise_of(ScalarOp::Identity, 1);
    d.lowering = Lowering::Copy;  // a copy when the dtype stays; else the scalar identity
    t.add(std::move(d));
  }
}

// Dropout at inference: output = input, optional mask all true. Training mode with a nonzero
// ratio is random and is refused.
float dropout_ratio(const Node& n, const Tensor* ratio_input) {
  if (ratio_input) return float(ratio_input->at_double(0));
  return n.attr_float("ratio", 0.5f);  // opset < 12 attribute
}

void add_dropout(OpTable& t) {
  OpDef d = ew_def("Dropout", 1);
  d.infer = [](InferCtx& c) {
    require_dtype(c, 0, kFloat);
    if (c.has_input(1) && (!is_floating(c.in_dtype(1)) || shape_numel(c.in_shape(1)) != 1))
      c.fail("ratio (input 1) must be a float scalar");
    if (c.has_input(2) && (c.in_dtype(2) != DType::boolean || shape_numel(c.in_shape(2)) != 1))
      c.fail("training_mode (input 2) must be a bool scalar");
    const Tensor* mode = c.in_const(2);
    if (mode && mode->at_double(0) != 0 && (!c.has_input(1) || c.in_const(1))) {
      if (dropout_ratio(c.node, c.in_const(1)) != 0)
        c.fail("training-mode Dropout (random) is not supported; export the model for inference");
    }
    c.set_output(0, c.in_dtype(0), c.in_shape(0));
    if (c.node.outputs.size() > 1) c.set_output(1, DType::boolean, c.in_shape(0));
  };
  d.reference = [](KernelCtx& k) {
    if (k.has_input(2) && k.inputs[2].at_double(0) != 0 &&
        dropout_ratio(k.node, k.has_input(1) ? &k.inputs[1] : nullptr) != 0)
      fail("training-mode Dropout (random) is not supported; export the model for inference");
    k.outputs[0] = k.inputs[0].clone();
    if (k.outputs.size() > 1) {
      bool* m = k.outputs[1].data<bool>();
      for (int64_t i = 0; i < k.outputs[1].numel(); ++i) m[i] = true;
    }
  };
  d.cost = [](const Graph& g, const Node& n) { return Cost{}; };
  t.add(std::move(d));
}

}  // namespace

namespace ops {
void register_elementwise_misc(OpTable& t) {
  add_float_predicate(t, "IsNaN", 9, pointwise_of(ScalarOp::IsNaN, 1),
                      [](const Node&) { return [](auto x) { return x != x; }; });
  add_float_predicate(t, "IsInf", 10,
                      [](const Node& n) {
                        return PointwiseForm{ScalarOp::IsInf,
                                             {{0, 0, false},
                                              attr_operand(n, "detect_positive", 1, true),
                                              attr_operand(n, "detect_negative", 1, true)},
                                             false};
                      },
                      [](const Node& n) {
                        bool pos = n.attr_int("detect_positive", 1) != 0;
                        bool neg = n.attr_int("detect_negative", 1) != 0;
                        return [pos, neg](auto x) {
                          return (pos && x == INFINITY) || (neg && x == -INFINITY);
                        };
                      });
  add_clip(t);
  add_prelu(t);
  add_casts(t);
  add_dropout(t);
}
}  // namespace ops

}  // namespace brrr
