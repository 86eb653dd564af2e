#include "brrr/op.hpp"

namespace brrr {


std::string_view op_class_name(OpClass c) {
  switch (c) {
    case OpClass::contraction: return "contraction";
    case OpClass::normalization: return "normalization";
    case OpClass::elementwise: return "elementwise";
    case OpClass::movement: return "movement";
  }
  return "?";
}

const OpTable& OpTable::get() {
  static const OpTable table = [] {
    OpTable t;
    register_elementwise_ops(t);
    register_movement_ops(t);
    register_contraction_ops(t);
    register_normalization_ops(t);
    register_reduction_ops(t);
    register_pooling_ops(t);
    return t;
  }();
  return table;
}

namespace {

// The ids of the ops a pass matches inside a pattern (brrr/op.hpp's OpId), by ai.onnx name.
OpId pattern_id(const std::string& domain, const std::string& name) {
  static const std::map<std::string, OpId> ids = {
      {"Add", OpId::Add},         {"Mul", OpId::Mul},           {"Div", OpId::Div},
      {"Pow", OpId::Pow},         {"Erf", OpId::Erf},           {"Tanh", OpId::Tanh},
      {"Where", OpId::Where},     {"IsNaN", OpId::IsNaN},       {"MatMul", OpId::MatMul},
      {"Gemm", OpId::Gemm},       {"Conv", OpId::Conv},         {"Transpose", OpId::Transpose},
      {"Reshape", OpId::Reshape}, {"Unsqueeze", OpId::Unsqueeze}, {"Expand", OpId::Expand},
      {"Softmax", OpId::Softmax}, {"Cast", OpId::Cast},         {"CastLike", OpId::CastLike},
      {"Dropout", OpId::Dropout}, {"Mean", OpId::Mean},         {"Gather", OpId::Gather},
      {"Slice", OpId::Slice},
  };
  if (!domain.empty()) return OpId::Other;
  auto it = ids.find(name);
  return it == ids.end() ? OpId::Other : it->second;
}

}  // namespace

std::function<Activation(const Node&)> activation_is(Activation a) {
  return [a](const Node&) { return a; };
}

std::string_view activation_name(Activation a) {
  switch (a) {
    case Activation::None: return "";
    case Activation::Relu: return "relu";
    case Activation::GeluErf: return "gelu_erf";
    case Activation::GeluTanh: return "gelu_tanh";
    case Activation::HardSwish: return "hardswish";
    case Activation::HardSigmoid: return "hardsigmoid";
    case Activation::Clip: return "clip";
    case Activation::Sigmoid: return "sigmoid";
    case Activation::Tanh: return "tanh";
    case Activation::Silu: return "silu";
    case Activation::Other: break;
  }
  return "?";
}

Activation activation_from_name(std::string_view name) {
  for (int a = 0; a < int(Activation::Other); ++a)
    if (activation_name(Activation(a)) == name) return Activation(a);
  return Activation::Other;
}

const OpDef* def_of(const Node& n) { return n.def ? n.def : OpTable::get().find(n.domain, n.op); }

OpId op_id(const Node& n) {
  const OpDef* d = def_of(n);
  return d ? d->id : OpId::Other;
}

LibraryKind library_of(const Node& n) {
  const OpDef* d = def_of(n);
  return d ? d->library : LibraryKind::None;
}

ViewKind view_of(const Node& n) {
  const OpDef* d = def_of(n);
  return d ? d->view : ViewKind::None;
}

Activation activation_of(const Node& n) {
  const OpDef* d = def_of(n);
  return d && d->activation ? d->activation(n) : Activation::None;
}

void OpTable::add(OpDef def) {
  auto key = std::make_pair(def.domain, def.name);
  BRRR_ASSERT(!ops_.count(key), "op registered twice");
  BRRR_ASSERT(def.infer && def.reference, "op without infer or reference");
  if (def.pointwise && def.lowering == Lowering::None) def.lowering = Lowering::Pointwise;
  def.id = pattern_id(def.domain, def.name);
  ops_.emplace(key, std::move(def));
}

const OpDef* OpTable::find(const std::string& domain, const std::string& name) const {
  std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = ops_.find({d, name});
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<const OpDef*> OpTable::all() const {
  std::vector<const OpDef*> v;
  for (const auto& [k, d] : ops_) v.push_back(&d);
  return v;
}

Cost op_cost(const Graph& g, const Node& n) {
  Cost c;
  if (n.def && n.def->cost) c = n.def->cost(g, n);
  if (c.bytes == 0) {
    for (int i : n.inputs)
      if (i >= 0 && g.value(i).typed)
        c.bytes += double(g.value(i).nbytes());
    for (int o : n.outputs)
      if (g.value(o).typed)
        c.bytes += double(g.value(o).nbytes());
  }
  return c;
}

const Value& InferCtx::in(int i) const {
  BRRR_CHECK(has_input(i), "{}: required input {} is missing", node.label(), i);
  return graph.value(node.inputs[i]);
}

const Tensor* InferCtx::in_const(int i) const {
  if (!has_input(i)) return nullptr;
  const Value& v = graph.value(node.inputs[i]);
  return v.constant.defined() ? &v.constant : nullptr;
}

const Tensor& InferCtx::require_const(int i, const char* what) const {
  const Tensor* t = in_const(i);
  if (!t)
    fail("input {} ('{}', {}) must be a constant or computable from shapes at load time", i,
         in(i).name, what);
  return *t;
}

void InferCtx::set_output(int i, DType t, Shape s) {
  int64_t n = 0;
  try {
    n = shape_numel(s);  // rejects negative dims and overflow
  } catch (const Error& e) {
    fail_msg(fmt::format("output {}: {}", i, e.what()));
  }
  // The memory budget, checked here so the error names the node that asks for too much.
  if (uint64_t(n) > max_tensor_bytes() / dtype_size(t))
    fail("output {} of shape {} ({}) needs {}, over the limit of {} bytes (BRRR_MAX_TENSOR_BYTES)",
         i, shape_str(s), dtype_name(t), byte_count(n, dtype_size(t)), max_tensor_bytes());
  if (int(outputs.size()) <= i) outputs.resize(size_t(i) + 1);
  outputs[i] = {t, std::move(s)};
}

void InferCtx::fail_msg(const std::string& msg) const {
  std::string shapes;
  for (int i = 0; i < num_inputs(); ++i) {
    if (i) shapes += ", ";
    if (!has_input(i)) shapes += "<none>";
    else shapes += fmt::format("{}{}", dtype_name(in_dtype(i)), shape_str(in_shape(i)));
  }
  throw Error(fmt::format("{}: {} (inputs: {})", node.label(), msg, shapes));
}

int64_t InferCtx::axis(int64_t a, int64_t r) const {
  if (r == 0) fail("axis {} given for a scalar (rank 0) input, which has no axes", a);
  int64_t lo = -r, hi = r - 1;
  if (a < lo || a > hi) fail("axis {} is out of range for rank {}", a, r);
  return a < 0 ? a + r : a;
}

}  // namespace brrr
