// Elementwise ops: unary math, binary arithmetic with broadcasting, comparisons, logic, Where,
// Cast, Clip and activations.
#include "brrr/scalar_ops.h"
#include "ops/op_util.hpp"

namespace brrr {
using namespace ops;

namespace {

void add_binary_arith(OpTable& t, const char* name, const char* expr, auto fn) {
  OpDef d;
  d.name = name;
  d.cls = OpClass::elementwise;
  d.infer = [](InferCtx& c) {
    require_same_dtype(c);
    infer_broadcast(c, c.in_dtype(0));
  };
  d.reference = [fn](KernelCtx& k) {
    dispatch_dtype(k.inputs[0].dtype(), [&]<typename T>() {
      if constexpr (std::is_same_v<T, bool>) {
        fail("{}: arithmetic on bool tensors is not defined", k.node.label());
      } else {
        map_binary<T, T, T>(k.inputs[0], k.inputs[1], k.outputs[0],
                            [&](auto a, auto b) { return fn(a, b); });
      }
    });
  };
  d.cost = cost_per_output(1);
  d.pointwise = expr;
  t.add(std::move(d));
}

}  // namespace

void register_elementwise_ops(OpTable& t) {
  add_binary_arith(t, "Add", "({0} + {1})", [](auto a, auto b) { return a + b; });

  {
    OpDef d;
    d.name = "Relu";
    d.cls = OpClass::elementwise;
    d.infer = [](InferCtx& c) { c.set_output(0, c.in_dtype(0), c.in_shape(0)); };
    d.reference = [](KernelCtx& k) {
      dispatch_dtype(k.inputs[0].dtype(), [&]<typename T>() {
        map_unary<T, T>(k.inputs[0], k.outputs[0], [](auto x) { return x > 0 ? x : decltype(x)(0); });
      });
    };
    d.cost = cost_per_output(1);
    d.pointwise = "brrr_relu({0})";
    t.add(std::move(d));
  }
}

}  // namespace brrr
