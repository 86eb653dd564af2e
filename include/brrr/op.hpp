// The op table: one OpDef per op (DESIGN.md section 2). Shape inference, dtype rule, cost model,
// class, reference CPU kernel and, for pointwise ops, the scalar expression the code generators emit.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "brrr/graph.hpp"

namespace brrr {

enum class OpClass { contraction, normalization, elementwise, movement };
std::string_view op_class_name(OpClass c);

// Shape inference context for one node. Input accessors take the node's input position.
struct InferCtx {
  const Graph& graph;
  const Node& node;
  std::vector<std::pair<DType, Shape>> outputs;  // filled by the op's infer()

  int num_inputs() const { return int(node.inputs.size()); }
  bool has_input(int i) const { return i < num_inputs() && node.inputs[i] >= 0; }
  const Value& in(int i) const;
  DType in_dtype(int i) const { return in(i).dtype; }
  const Shape& in_shape(int i) const { return in(i).shape; }
  int in_rank(int i) const { return int(in(i).shape.size()); }
  // Constant value of input i, or nullptr when it is only known at run time.
  const Tensor* in_const(int i) const;
  // Like in_const, but fails with a clear message when the input is not a constant.
  const Tensor& require_const(int i, const char* what) const;
  void set_output(int i, DType t, Shape s);
  // Throws brrr::Error naming the node, its op and its input shapes.
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    fail_msg(fmt::format(f, std::forward<Args>(args)...));
  }
  [[noreturn]] void fail_msg(const std::string& msg) const;
  // Normalizes a possibly negative axis for a tensor of rank r; fails when out of range.
  int64_t axis(int64_t a, int64_t r) const;
};

// Reference-kernel context: inputs as given (may be non-contiguous views), outputs pre-allocated
// contiguous with the inferred dtypes and shapes.
struct KernelCtx {
  const Node& node;
  std::vector<Tensor> inputs;   // undefined Tensor for omitted optional inputs
  std::vector<Tensor> outputs;
  bool has_input(int i) const { return i < int(inputs.size()) && inputs[i].defined(); }
};

// Work of one node. Special functions are counted per function (their cost differs widely).
struct Cost {
  double flops = 0;                       // 2 per multiply-add, 1 per scalar arithmetic op
  std::map<std::string, double> special;  // e.g. {"exp": n, "erf": n}
  double bytes = 0;                       // compulsory: inputs read once, outputs written once
};

struct OpDef {
  std::string name;
  std::string domain;  // "" = ai.onnx
  int since = 1;       // lowest opset this entry implements
  OpClass cls = OpClass::elementwise;
  std::function<void(InferCtx&)> infer;
  std::function<void(KernelCtx&)> reference;
  // Arithmetic of the node given inferred shapes; bytes are filled in by op_cost() when left 0.
  std::function<Cost(const Graph&, const Node&)> cost;
  // Pointwise ops: a C expression over inputs {0}, {1}, ... using functions from
  // include/brrr/scalar_ops.h, shared by the CPU and CUDA code generators. Empty if not pointwise.
  // Placeholders: {name=default} is the node's number attribute `name` (default when absent) as
  // a C literal; {name@w0,w1} is the word, of the template's own, that a STRING/INT attribute
  // equals (w0 when absent); {i|name} is input i, else attribute `name`; see expand_pointwise().
  std::string pointwise;
  // Constant folding may run this op at load time (false for ops with huge or random outputs).
  bool foldable = true;
  // Output depends only on the inputs' shapes and dtypes (Shape, Size): folds even when the
  // inputs are run-time values, so shape subgraphs of dynamic-looking models become constants.
  bool shape_only = false;
};

class OpTable {
 public:
  static const OpTable& get();
  void add(OpDef def);
  const OpDef* find(const std::string& domain, const std::string& name) const;
  std::vector<const OpDef*> all() const;

 private:
  std::map<std::pair<std::string, std::string>, OpDef> ops_;
};

// Cost of node `n` (cost() plus compulsory bytes from the inferred shapes).
Cost op_cost(const Graph& g, const Node& n);

// The C expression of a pointwise node: def.pointwise with {i} replaced by args[i], an omitted
// optional input (node input -1 or i >= args.size()) by NAN ("no bound" to the helpers), {i|name}
// by input i or else attribute `name`, {name=default} by the attribute as a float or int literal,
// {name@w0,...} by the matching template word: no text of the model reaches the expression.
// Sum/Min/Max fold their two-input form over all args. Throws brrr::Error for an op with no
// pointwise form.
std::string expand_pointwise(const OpDef& def, const Node& n, const std::vector<std::string>& args);

// One registration function per op family (src/ops/<family>.cpp).
void register_elementwise_ops(OpTable& t);
void register_movement_ops(OpTable& t);
void register_contraction_ops(OpTable& t);
void register_normalization_ops(OpTable& t);
void register_reduction_ops(OpTable& t);
void register_pooling_ops(OpTable& t);

}  // namespace brrr
