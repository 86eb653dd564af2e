// Ops that describe tensors rather than move data: Constant, Shape, Size.
#include "ops/movement_util.hpp"

namespace brrr::ops {

namespace {

// The tensor a Constant node stands for, from whichever value* attribute it carries.
Tensor constant_value(const Node& n) {
  const char* forms[] = {"value", "value_float", "value_floats", "value_int", "value_ints"};
  int found = 0;
  for (const char* f : forms) found += n.has_attr(f);
  for (const char* f : {"sparse_value", "value_string", "value_strings"})
    if (n.has_attr(f)) fail("{}: attribute '{}' is not supported", n.label(), f);
  if (found != 1) fail("{}: needs exactly one value attribute, has {}", n.label(), found);
  if (const Tensor* t = n.attr_tensor("value")) return *t;
  if (n.has_attr("value_float")) return Tensor::scalar<float>(n.attr_float("value_float", 0));
  if (n.has_attr("value_int")) return Tensor::scalar<int64_t>(n.attr_int("value_int", 0));
  if (n.has_attr("value_floats")) {
    std::vector<float> v = n.attr_floats("value_floats");
    return Tensor::from_vector<float>({int64_t(v.size())}, v);
  }
  std::vector<int64_t> v = n.attr_ints("value_ints");
  return Tensor::from_vector<int64_t>({int64_t(v.size())}, v);
}

// Shape's [start, end) window over the dims, with ONNX's clamping (opset 15).
std::pair<int64_t, int64_t> shape_window(const Node& n, int64_t r) {
  auto clampi = [r](int64_t v) {
    if (v < 0) v += r;
    return std::clamp<int64_t>(v, 0, r);
  };
  int64_t s = clampi(n.attr_int("start", 0));
  int64_t e = n.has_attr("end") ? clampi(n.attr_int("end", r)) : r;
  return {s, std::max(e, s)};
}

}  // namespace

void register_shape_ops(OpTable& t) {
  t.add(movement_op(
      "Constant",
      [](InferCtx& c) {
        Tensor v = constant_value(c.node);
        c.set_output(0, v.dtype(), v.shape());
      },
      [](KernelCtx& k) { copy_view(constant_value(k.node), k.outputs[0]); }));

  OpDef shape = movement_op(
      "Shape",
      [](InferCtx& c) {
        auto [s, e] = shape_window(c.node, c.in_rank(0));
        c.set_output(0, DType::i64, {e - s});
      },
      [](KernelCtx& k) {
        const Shape& in = k.inputs[0].shape();
        auto [s, e] = shape_window(k.node, int64_t(in.size()));
        int64_t* o = k.outputs[0].data<int64_t>();
        for (int64_t i = s; i < e; ++i) o[i - s] = in[size_t(i)];
      });
  shape.shape_only = true;
  t.add(std::move(shape));

  OpDef size = movement_op(
      "Size", [](InferCtx& c) { c.set_output(0, DType::i64, {}); },
      [](KernelCtx& k) { k.outputs[0].data<int64_t>()[0] = k.inputs[0].numel(); });
  size.shape_only = true;
  t.add(std::move(size));
}

}  // namespace brrr::ops
