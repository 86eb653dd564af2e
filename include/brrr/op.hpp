// The op table: one OpDef per op (DESIGN.md section 2). Shape inference, dtype rule, cost model,
// class, reference CPU kernel and, for pointwise ops, the scalar function the code generators emit.
#pragma once
#include <cstdint>
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

// The scalar functions generated kernels compute, one per formula (brrr/scalar_ops.h holds the
// ones that are not a C operator or libm call). Ops of the op table map onto these; the emitters
// render each through their code_for_op tables (backend/cpu/codegen_cpp.hpp), so no C text of an
// op lives in the IR. CosUnit and SinUnit are Cos and Sin of an argument proven to lie in [-1, 1]
// (plan/value_range.hpp).
enum class ScalarOp : uint8_t {
  Identity, Add, Sub, Mul, Div, Pow, ModNumpy, ModFmod, Where,
  Equal, Less, LessOrEqual, Greater, GreaterOrEqual, And, Or, Xor, Not, Min, Max,
  Sqrt, Reciprocal, Exp, Log, Tanh, Erf, Cos, Sin, Tan, Acos, Asin, Atan, Sinh, Cosh,
  Floor, Ceil, Round, Neg, Abs, Sign, Relu, Sigmoid, LeakyRelu, Elu, Selu, Celu,
  ThresholdedRelu, HardSigmoid, HardSwish, Softplus, Softsign, Mish, GeluErf, GeluTanh,
  IsNaN, IsInf, Clip, PRelu, CosUnit, SinUnit,
  Count  // number of ops, not an op
};
std::string_view scalar_op_name(ScalarOp op);

// One operand of a pointwise form: node input `input`, or (input -1) the immediate `imm`, an
// attribute's number (`integer`: it was an INT attribute). NaN as an immediate is "no bound".
struct ScalarOperand {
  int input = -1;
  double imm = 0;
  bool integer = false;
};

struct PointwiseForm {
  ScalarOp op = ScalarOp::Identity;
  std::vector<ScalarOperand> operands;
  bool fold = false;  // variadic (Sum, Min, Max): the binary op folded over every input
};

// The form `op` over node inputs 0..arity-1 (the pointwise lowering of most ops).
std::function<PointwiseForm(const Node&)> pointwise_of(ScalarOp op, int arity);
// Operand helpers for lowerings with attributes: the number attribute `name` (`dflt` when
// absent; `want_int`: it must be an INT), input i when present, else attribute `name`, else NaN;
// and the index of the STRING/INT attribute's value in `words` (0 when absent). Each throws
// brrr::Error naming the node when the attribute has the wrong type or value.
ScalarOperand attr_operand(const Node& n, const std::string& name, double dflt, bool want_int = false);
ScalarOperand input_or_attr(const Node& n, int i, const std::string& name);
int attr_choice(const Node& n, const std::string& name, const std::vector<std::string>& words);

// How the fuser (src/plan/fusion.cpp) lowers a node of an op into generated code, when its
// dtypes and attributes allow (can_fuse); otherwise the node runs as a library call (chosen by the
// planner) or by its reference kernel.
enum class Lowering : uint8_t {
  None,       // no generated form
  Pointwise,  // one scalar function per element (`pointwise`)
  Reduction,  // `reduce` over the last axis
  Softmax,    // a row kernel: max, exp, sum, one reciprocal
  LayerNorm,  // a row kernel: mean, variance, scale and shift
  View,       // an index remap of the input (Transpose): strides, no arithmetic
  Copy,       // the same elements under a new shape (Reshape, Flatten, Squeeze, ...)
};
enum class ReduceKind : uint8_t { Sum, Max, Mean };

// The library kernel a node of this op may become; the Target says which ones a backend has, the
// fusion pass decides per node (dtypes, shapes, the pattern around it) and describe_library
// builds the kernel's descriptor (src/plan/library_desc.hpp) by this kind.
enum class LibraryKind : uint8_t {
  None,
  Gemm,          // MatMul, Gemm: GemmDesc, with a bias / activation epilogue
  Conv,          // ConvDesc, with a bias / residual / activation epilogue
  Pool,          // MaxPool, AveragePool: PoolDesc
  Concat,        // ConcatDesc
  GlobalMean,    // GlobalAveragePool: a RowReduceDesc over the spatial dims
  TrailingReduce,// ReduceMean, ReduceSum over trailing axes: RowReduceDesc
  ChannelScale,  // Mul as squeeze-excite's per-channel scale between convs: ChannelScaleDesc
  Split,         // SplitDesc: one device copy per output
  Gather,        // GatherDesc for the reference Gather a device target runs as a copy
};

// An activation a GEMM or conv library call can apply in its epilogue (plan/library_desc.hpp's
// Epilogue; the Target says which ones each library takes).
enum class Activation {
  None, Relu, GeluErf, GeluTanh, HardSwish, HardSigmoid, Clip,
  Sigmoid, Tanh,  // GEMMs on targets with gemm_post_ops (the CPU)
  Silu,           // x * sigmoid(x) (two nodes: Sigmoid and Mul); convs with conv_sigmoid_silu
  Other
};

// How a movement op can be read through as a strided view of its input, with no copy
// (plan/operand_view.cpp for GEMM operands, the fuser's loads on generated_views targets).
enum class ViewKind : uint8_t {
  None,
  Permute,  // Transpose: the strides permuted
  Reshape,  // Reshape, Squeeze, Unsqueeze: the same elements under a new shape, when strides allow
  Pick,     // Gather of one constant index: an offset, the axis dropped
  Slice,    // Slice with constant starts and steps: an offset and scaled strides
  Expand,   // Expand to a constant shape: stride 0 on the broadcast axes
};

// The ops passes match by identity inside a pattern (attention, GELU, the epilogues, a Cast's
// rewrite); every other op is Other. What an op *does* is its OpDef's fields, never its id.
enum class OpId : uint8_t {
  Other, Add, Mul, Div, Pow, Erf, Tanh, Where, IsNaN, MatMul, Gemm, Conv, Transpose, Reshape,
  Unsqueeze, Expand, Softmax, Cast, CastLike, Dropout, Mean, Gather, Slice,
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
  // Pointwise ops: how a node becomes one scalar function of its inputs and attributes (empty if
  // not pointwise). Both code generators render the ScalarOp through their code_for_op tables;
  // a node whose attributes the form cannot take throws brrr::Error (the fuser then leaves it
  // to the reference kernel, with that reason).
  std::function<PointwiseForm(const Node&)> pointwise;
  // Its generated-code lowering (Pointwise is set by OpTable::add for ops with a `pointwise`
  // form), the reduction a Reduction computes, and the node-specific condition for it: "" when
  // this node can be lowered so, else why not (as the fusion boundary then says).
  Lowering lowering = Lowering::None;
  ReduceKind reduce = ReduceKind::Sum;  // also a pool's window: Max for MaxPool
  std::function<std::string(const Graph&, const Node&)> can_fuse;
  // The library kernel it may become (None: generated code or its reference kernel).
  LibraryKind library = LibraryKind::None;
  // As a GEMM / conv epilogue: the activation a node of this op is (empty: it is none).
  std::function<Activation(const Node&)> activation;
  // Its float-ness is that of input 0 and output 0 alone (Reduce*: input 1 is int64 axes).
  bool dtype_from_input0 = false;
  // Read through as a view of input 0 (None: it computes or copies).
  ViewKind view = ViewKind::None;
  // convert_precision: inputs ONNX types as float whatever the data's type (Resize's scales),
  // which a model stored in 16 bits must keep in float32.
  std::vector<int> float32_inputs;
  // Set by OpTable::add from the name: the op's id where a pass matches a pattern by it.
  OpId id = OpId::Other;
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

// The activation `a` for every node of the op (OpDef::activation of Relu, HardSwish, ...).
std::function<Activation(const Node&)> activation_is(Activation a);

// The plan's name for activation a ("relu", "gelu_tanh", ...; "" for None), and back (Other for
// a name that is none of them).
std::string_view activation_name(Activation a);
Activation activation_from_name(std::string_view name);

// Node n's OpDef (resolved by shape inference, else looked up; nullptr for an unknown op), and
// what it says of n: its op id, library kind and epilogue activation (None when it is none).
const OpDef* def_of(const Node& n);
OpId op_id(const Node& n);
LibraryKind library_of(const Node& n);
ViewKind view_of(const Node& n);
Activation activation_of(const Node& n);

// Cost of node `n` (cost() plus compulsory bytes from the inferred shapes).
Cost op_cost(const Graph& g, const Node& n);

// One registration function per op family (src/ops/<family>.cpp).
void register_elementwise_ops(OpTable& t);
void register_movement_ops(OpTable& t);
void register_contraction_ops(OpTable& t);
void register_normalization_ops(OpTable& t);
void register_reduction_ops(OpTable& t);
void register_pooling_ops(OpTable& t);

}  // namespace brrr
