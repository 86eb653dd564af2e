// The kernel IR (DESIGN.md section 3): a plan is a flat list of kernels, each Fused, Library or
// Copy (plus Reference: an op run by its reference kernel when nothing faster applies). A Fused
// kernel is an index space plus an expression DAG; both the C++ and the CUDA emitter read it.
#pragma once
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "brrr/graph.hpp"
#include "brrr/op.hpp"
#include "plan/target.hpp"

namespace brrr::plan {

enum class KernelKind { Fused, Library, Copy, Reference };
std::string_view kernel_kind_name(KernelKind k);

using brrr::ReduceKind;  // Sum, Max, Mean (brrr/op.hpp)

struct LibraryDesc;  // plan/library_desc.hpp

// One node of a fused kernel's expression DAG. Expressions are float32 and live either per
// element of the index space (level 0) or per row (level 1: constant along the last axis).
struct Expr {
  enum Kind { Load, Const, Pointwise, Reduce } kind = Const;
  int level = 0;
  // Load: buffer (a graph value id) and its element strides over the kernel's space dims
  // (0 = broadcast; transposes and slices are other strides and offsets).
  int value = -1;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  float constant = 0;       // Const (value: the scalar initializer it came from, or -1)
  ScalarOp op = ScalarOp::Identity;  // Pointwise: the scalar function (brrr/op.hpp)
  // Pointwise operands (expr ids; -1 where operand k is the immediate attrs[k], an attribute's
  // number), or the single Reduce argument.
  std::vector<int> args;
  std::vector<ScalarOperand> attrs;  // Pointwise: sized like args when any operand is immediate
  ReduceKind reduce = ReduceKind::Sum;
  // The interval the expression's non-NaN values lie in (plan/value_range.hpp).
  float lo = -INFINITY, hi = INFINITY;
};

// A result the kernel writes: expression `expr` into graph value `value` (contiguous), per
// element (level 0) or per row (level 1).
struct Store {
  int expr = -1;
  int value = -1;
};

struct Kernel {
  KernelKind kind = KernelKind::Fused;
  std::string name;           // "k3_softmax": numbered, never taken from model text
  std::vector<int> nodes;     // graph node indices covered, in order
  std::vector<int> inputs;    // graph value ids read
  std::vector<int> outputs;   // graph value ids written
  // Fused: the index space. rows = prod(space[:-1]), cols = space.back() (1 for a scalar space).
  Shape space;
  // Fused: the type the expressions compute in. float32 (16-bit and bool buffers convert in
  // registers), or int32 / int64 / float64 for a device target's typed kernels, whose buffers all
  // hold that type or bool (Target::generated_typed).
  DType compute = DType::f32;
  std::vector<Expr> exprs;    // topologically ordered: args precede users
  std::vector<Store> stores;
  // Library: epilogue fused into the library call (a bias value id, then an activation).
  int bias = -1;
  // "", "relu", "gelu_erf", "gelu_tanh", "gelu_erf_as_tanh" (the erf GELU computed in the tanh
  // form: 16-bit GEMMs, Target::gemm_gelu_erf_as_tanh_16bit); Conv also "hardswish", "hardsigmoid" (alpha, beta),
  // "clip" (alpha = min, beta = max); GEMMs on the CPU also "sigmoid", "tanh".
  std::string activation;
  float act_alpha = 0, act_beta = 0;
  int sum = -1;  // Conv, CPU GEMM: a same-shape value added to the result before the activation
  // Library (and Gather): the typed descriptor of the call, built once from the node's
  // attributes by describe_library (plan/library_desc.hpp); backends read only this.
  std::shared_ptr<const LibraryDesc> lib;
  // Device targets (Target::device): non-empty when the device cannot run this kernel, which then
  // runs its reference kernel on host copies of the device buffers; says why. Decided by the
  // fusion pass, read by the executor.
  std::string host;
  bool has_reduction() const;
  int64_t rows() const;
  int64_t cols() const;
};

// Why two neighbouring nodes ended up in different kernels.
struct Boundary {
  int value = -1;        // the graph value crossing the boundary
  int from_kernel = -1;  // producer kernel
  int to_kernel = -1;    // consumer kernel
  std::string reason;    // "not fused: ..."
};

struct Plan {
  std::vector<Kernel> kernels;
  std::vector<Boundary> boundaries;
  bool fusion_enabled = true;
  // Readable listing: one line per kernel with its ops and index space, then the boundaries.
  std::string print(const Graph& g) const;
};

struct FusionOptions {
  bool enable = true;  // false: one kernel per node (pointwise nodes still get generated code)
  // Generated kernels may load and store bfloat16/float16 buffers, computing in float32 (both
  // emitters convert in registers).
  bool float16 = false;
  // ... and bool buffers: read as 0 or 1, stored as v != 0 (both emitters).
  bool booleans = false;
};

// Groups a shape-inferred graph into kernels for `target` (src/plan/fusion.cpp). The compile
// pipeline (src/passes/pipeline.cpp) calls it; tests call it directly.
Plan build_plan(const Graph& g, const FusionOptions& opts, const Target& target = Target::cpu());

// True when BRRR_DISABLE_FUSION is set to something other than "0".
bool fusion_disabled_by_env();

// Per-element (level-0) expressions that `targets` need, transitively, in topological order
// (expression ids ascend with dependencies). Reductions are leaves: their inputs are computed in
// the reduction's own loop. Shared by the C++ and CUDA emitters.
std::vector<int> level0_closure(const Kernel& k, const std::vector<int>& targets);

// Emitter helpers shared by the C++ and CUDA code generators: a float as an exact C literal
// (hex float; NAN and INFINITY by name), and an immediate operand as the C literal of the
// attribute it came from (an INT as an integer, a FLOAT in %.9g form, which reads back exactly).
std::string float_lit(float v);
std::string imm_lit(const ScalarOperand& imm);

// Ops whose C form is a function call (libm or brrr/scalar_ops.h) rather than an operator: a
// row kernel computes such a per-element value once and keeps it for later passes over the row.
bool scalar_op_is_call(ScalarOp op);

}  // namespace brrr::plan
