// The fusion pass: walks the shape-inferred graph in topological order and lets each node join
// the fused kernel that computes its inputs when the index spaces agree; otherwise it starts a
// new kernel and the boundary records why.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "brrr/op.hpp"
#include "plan/attention.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/library_desc.hpp"
#include "plan/operand_view.hpp"
#include "plan/target.hpp"
#include "plan/value_range.hpp"
#include "core/env.hpp"
#include "ir/graph_edit.hpp"

namespace brrr::plan {

bool fusion_disabled_by_env() {
  return env::flag("BRRR_DISABLE_FUSION");
}

namespace {

// What the pass can do with a node.
enum class NodeKind { Pointwise, Reduce, Softmax, LayerNorm, Transpose, Library, Copy, Other };

struct NodeInfo {
  NodeKind kind = NodeKind::Other;
  ReduceKind reduce = ReduceKind::Sum;
  std::string why;   // for Other: why it is not fusible
  PointwiseForm form;  // for Pointwise: the node's scalar function (OpDef::pointwise)
  int divide_by = 0;   // for Pointwise: then divided by this count (Mean), when nonzero
  DType compute = DType::f32;  // Pointwise and Transpose: the type its kernel computes in
  bool to_bool = false;        // Pointwise Cast to bool: the value becomes 0 or 1 (x != 0)
};

// An in-kernel value: an expression, or a strided view of a materialized buffer (a transpose of
// a graph input, not yet loaded).
struct KVal {
  int expr = -1;
  int view_value = -1;
  Shape view_strides;
  int64_t view_offset = 0;
};

struct Group {
  Kernel k;
  std::map<int, KVal> vals;  // graph value id -> in-kernel value
  bool fused = false;        // a Fused kernel others may join
  std::string why;           // a Reference kernel: why nothing faster applies
  // (buffer, offset, level, strides) -> the Load expression reading it, so a kernel with many
  // loads finds its duplicates without a scan.
  std::map<std::tuple<int, int64_t, int, std::vector<int64_t>>, int> loads;
};

// The largest fused kernel, in expressions: g++ takes superlinear time on one huge function, so
// a longer chain continues in a new kernel (whose body is usually identical to the last one's and
// so is generated once, see codegen_cpp.cpp).
constexpr size_t kMaxKernelExprs = 128;

// Generated kernels compute in float32; with `float16` they may also load and store bfloat16
// and float16 buffers (converted in registers by both emitters), and
// with `booleans` bool buffers (0 or 1 in float32; stored as v != 0).
struct TypeSet {
  bool float16 = false, booleans = false;
};
bool float_ok(DType t, TypeSet ts) {
  return t == DType::f32 || (ts.float16 && (t == DType::bf16 || t == DType::f16)) ||
         (ts.booleans && t == DType::boolean);
}

bool all_float(const Graph& g, const Node& n, TypeSet ts) {
  for (int i : n.inputs)
    if (i >= 0 && !float_ok(g.value(i).dtype, ts)) return false;
  for (int o : n.outputs)
    if (o >= 0 && !float_ok(g.value(o).dtype, ts)) return false;
  return true;
}
bool all_f32(const Graph& g, const Node& n) { return all_float(g, n, {}); }

// An integer or bool scalar constant whose value float32 holds exactly: on a target with
// generated_casts a pointwise kernel takes it as a float immediate (Pow's int64 exponent).
bool exact_scalar_const(const Value& v) {
  if (!v.constant.defined() || v.constant.numel() != 1 || is_floating(v.dtype)) return false;
  double x = v.constant.at_double(0);
  return std::fabs(x) <= double(1 << 24);
}

// all_float, where the inputs may also be such scalar constants.
bool all_float_or_scalar(const Graph& g, const Node& n, TypeSet ts) {
  for (int i : n.inputs)
    if (i >= 0 && !float_ok(g.value(i).dtype, ts) && !exact_scalar_const(g.value(i))) return false;
  for (int o : n.outputs)
    if (o >= 0 && !float_ok(g.value(o).dtype, ts)) return false;
  return true;
}

// The pointwise forms a generated_casts target adds (Target::generated_casts): Cast and CastLike
// are the identity (float32 math; the store rounds to the output's dtype as Tensor::cast does:
// nearest-even to 16 bits, v != 0 to bool), inference Dropout is the identity, Mean a fold of
// Add (its division comes after, in emit). Empty operands: no such form.
PointwiseForm extra_pointwise_form(const Graph& g, const Node& n) {
  const OpId op = op_id(n);
  if (op == OpId::Cast || op == OpId::CastLike) return {ScalarOp::Identity, {{0, 0, false}}, false};
  if (op == OpId::Dropout) {
    // A training_mode input that is not a constant false could mean random masks.
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
      const Value& m = g.value(n.inputs[2]);
      if (!m.constant.defined() || m.constant.at_double(0) != 0) return {};
    }
    return {ScalarOp::Identity, {{0, 0, false}}, false};
  }
  if (op == OpId::Mean) {
    PointwiseForm f{ScalarOp::Add, {}, true};
    for (size_t i = 0; i < n.inputs.size(); ++i) f.operands.push_back({int(i), 0, false});
    return f;
  }
  return {};
}

// A reduction over two or more trailing axes (the fused kernels take the last axis alone).
bool trailing_reduce(const Graph& g, const Node& n) {
  if (n.inputs.empty() || n.inputs[0] < 0) return false;
  size_t rank = g.value(n.inputs[0]).shape.size();
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    const Tensor& a = g.value(n.inputs[1]).constant;
    if (!a.defined()) return false;
    axes = a.to_int64_vector();
  }
  if (axes.size() < 2) return false;
  std::set<int64_t> norm;
  for (int64_t a : axes) norm.insert(a < 0 ? a + int64_t(rank) : a);
  if (norm.size() != axes.size() || *norm.begin() < 0) return false;
  return *norm.rbegin() == int64_t(rank) - 1 && *norm.begin() == int64_t(rank - norm.size());
}

// The value y when node m is Mul(y, Sigmoid(y)) in either operand order (SiLU, as exporters
// write it), else -1.
int silu_input(const Graph& g, const Node& m) {
  if (op_id(m) != OpId::Mul || !m.domain.empty() || m.inputs.size() != 2) return -1;
  for (int first : {0, 1}) {
    const int y = m.inputs[size_t(first)], s = m.inputs[size_t(1 - first)];
    if (y < 0 || s < 0 || g.value(s).producer < 0) continue;
    const Node& sig = g.nodes[size_t(g.value(s).producer)];
    if (activation_of(sig) == Activation::Sigmoid && !sig.inputs.empty() && sig.inputs[0] == y)
      return y;
  }
  return -1;
}

// The Conv node whose output the node m computes the SiLU of, else nullptr.
const Node* silu_of_conv(const Graph& g, const Node& m) {
  const int y = silu_input(g, m);
  if (y < 0 || g.value(y).producer < 0) return nullptr;
  const Node& conv = g.nodes[size_t(g.value(y).producer)];
  return library_of(conv) == LibraryKind::Conv ? &conv : nullptr;
}

// Mul(x [N,C,H,W] from a Conv, s [N,C,1,1]) feeding a Conv alone: squeeze-excite's scale. As a
// library kernel it reads and writes the convs' NHWC layout, so neither conv reorders. `silu`:
// the target's convs take a SiLU epilogue (Target::conv_sigmoid_silu), so x may be one's SiLU
// (EfficientNet's blocks). `bf16_data`: bf16 x and s as well as float32
// (Target::library_16bit_channel_scale).
bool channel_scale_between_convs(const Graph& g, const Node& n, bool silu, bool bf16_data) {
  if (library_of(n) != LibraryKind::ChannelScale || n.inputs.size() != 2 || n.inputs[0] < 0 ||
      n.inputs[1] < 0)
    return false;
  const Value &a = g.value(n.inputs[0]), &b = g.value(n.inputs[1]), &o = g.value(n.outputs[0]);
  const Value& x = a.shape.size() == 4 && a.shape == o.shape ? a : b;
  const Value& s = &x == &a ? b : a;
  const bool type_ok = x.dtype == DType::f32 || (bf16_data && x.dtype == DType::bf16);
  if (!type_ok || s.dtype != x.dtype || o.dtype != x.dtype || x.shape != o.shape || x.shape.size() != 4 ||
      s.shape != Shape{x.shape[0], x.shape[1], 1, 1} || x.shape[2] * x.shape[3] <= 1)
    return false;
  if (x.producer < 0) return false;
  const Node* p = &g.nodes[size_t(x.producer)];
  if (const Node* conv = silu ? silu_of_conv(g, *p) : nullptr) p = conv;
  const Activation act = activation_of(*p);
  if ((act == Activation::Relu || act == Activation::HardSwish || act == Activation::Clip) &&
      p->inputs[0] >= 0 && g.value(p->inputs[0]).producer >= 0)
    p = &g.nodes[size_t(g.value(p->inputs[0]).producer)];  // a conv's activation
  if (library_of(*p) != LibraryKind::Conv) return false;
  int consumers = 0;
  bool conv = true;
  for (const Node& m : g.nodes)
    for (int i : m.inputs)
      if (i == n.outputs[0])
        consumers++, conv = conv && library_of(m) == LibraryKind::Conv && m.inputs[0] == i;
  return consumers == 1 && conv;
}

// A run-time input or an output with no elements (batch 0, K = 0). Library set-up may divide by
// the size (oneDNN's matmul does), so such nodes never become library kernels; generated loops
// over an empty space are fine when every output is empty too.
bool has_zero_size(const Graph& g, const Node& n) {
  for (int i : n.inputs)
    if (i >= 0 && !g.value(i).constant.defined() && g.value(i).typed &&
        shape_numel(g.value(i).shape) == 0)
      return true;
  for (int o : n.outputs)
    if (o >= 0 && g.value(o).typed && shape_numel(g.value(o).shape) == 0) return true;
  return false;
}
bool has_nonempty_output(const Graph& g, const Node& n) {
  for (int o : n.outputs)
    if (o >= 0 && g.value(o).typed && shape_numel(g.value(o).shape) != 0) return true;
  return false;
}

// The type a typed kernel would compute node n in (Target::generated_typed): int32, int64 or
// float64 when every tensor it reads or writes is that type or bool, and one it reads is that
// type; float32 (no typed kernel) otherwise.
DType typed_compute(const Graph& g, const Node& n) {
  DType t = DType::f32;
  bool read = false;
  auto note = [&](int v, bool input) {
    if (v < 0) return true;
    DType d = g.value(v).dtype;
    if (d == DType::boolean) return true;
    if (d != DType::i32 && d != DType::i64 && d != DType::f64) return false;
    if (t != DType::f32 && t != d) return false;
    t = d;
    read = read || input;
    return true;
  };
  for (int i : n.inputs)
    if (!note(i, true)) return DType::f32;
  for (int o : n.outputs)
    if (!note(o, false)) return DType::f32;
  return read ? t : DType::f32;
}

NodeInfo classify_node(const Graph& g, const Node& n, TypeSet ts, const Target& t) {
  NodeInfo info;
  const std::string& op = n.op;
  const LibraryKind lib = library_of(n);
  bool f32 = all_f32(g, n);
  // generated kernels can read and write its tensors
  bool gen = t.generated_casts ? all_float_or_scalar(g, n, ts) : all_float(g, n, ts);
  const OpDef* def = def_of(n);
  if (def && def->dtype_from_input0 && !n.inputs.empty() && n.inputs[0] >= 0) {
    f32 = g.value(n.inputs[0]).dtype == DType::f32 && g.value(n.outputs[0]).dtype == DType::f32;
    gen = float_ok(g.value(n.inputs[0]).dtype, ts) &&
          float_ok(g.value(n.outputs[0]).dtype, ts);
  }
  auto other = [&](std::string why) {
    info.kind = NodeKind::Other;
    info.why = std::move(why);
    return info;
  };
  if (!n.domain.empty()) return other(fmt::format("{} is in domain '{}'", op, n.domain));
  // Outputs computed from no elements (zeros, a bias, -inf): the reference kernel's job.
  if (has_zero_size(g, n) && has_nonempty_output(g, n))
    return other(fmt::format("{} reads a tensor with no elements", op));
  bool pool = lib == LibraryKind::Pool;
  if (lib == LibraryKind::Gemm || lib == LibraryKind::Conv || pool) {
    // What has a library lowering is the target's to say: 16-bit GEMMs have one on CUDA
    // (cuBLASLt); elsewhere they run by reference.
    bool same16 = ((t.library_16bit_gemm && lib == LibraryKind::Gemm) ||
                   (t.library_16bit_conv && lib == LibraryKind::Conv)) &&
                  !n.inputs.empty() && n.inputs[0] >= 0 &&
                  (g.value(n.inputs[0]).dtype == DType::bf16 ||
                   g.value(n.inputs[0]).dtype == DType::f16);
    for (int i : n.inputs)
      if (i >= 0 && g.value(i).dtype != g.value(n.inputs[0]).dtype) same16 = false;
    for (int o : n.outputs)
      if (o >= 0 && g.value(o).dtype != g.value(n.inputs[0]).dtype) same16 = false;
    bool single_out = n.outputs.size() == 1 || (n.outputs.size() > 1 && n.outputs[1] < 0);
    // 16-bit pools: a library kernel where generated kernels take 16-bit data (CUDA's pool
    // kernel); the CPU runs them by reference.
    bool pool16 = t.library_16bit_pool && pool && ts.float16 && gen && single_out && !f32;
    bool lib32 = t.library_f32_contractions && f32 && (!pool || single_out);
    if (lib32 || same16 || pool16) {
      info.kind = NodeKind::Library;
      return info;
    }
    if (pool && !single_out && (t.library_f32_contractions || t.library_16bit_pool))
      return other("MaxPool's Indices output is used: only the reference kernel computes it");
    return other(fmt::format("{} runs as a library or reference kernel", op));
  }
  // Hand-written library kernels (src/backend/cpu/library_cpu.cpp): channel concat and means
  // over trailing axes (global pooling, the squeeze of squeeze-excite blocks).
  // A device target's row-mean kernel takes float32 (and 16-bit data with
  // library_16bit_row_reduce); what it cannot take runs on the host, decided here.
  bool row16 = t.library_16bit_row_reduce && !n.inputs.empty() && n.inputs[0] >= 0 &&
               (g.value(n.inputs[0]).dtype == DType::bf16 ||
                g.value(n.inputs[0]).dtype == DType::f16) &&
               g.value(n.outputs[0]).dtype == g.value(n.inputs[0]).dtype;
  if (lib == LibraryKind::GlobalMean && t.device && !f32 && !row16)
    return other(fmt::format("GlobalAveragePool on {} (the device's row-mean kernel takes float32{})",
                             dtype_name(g.value(n.outputs[0]).dtype),
                             t.library_16bit_row_reduce ? ", bfloat16 and float16" : ""));
  if (lib == LibraryKind::Concat || lib == LibraryKind::GlobalMean ||
      channel_scale_between_convs(g, n, t.conv_sigmoid_silu, t.library_16bit_channel_scale)) {
    info.kind = NodeKind::Library;
    return info;
  }
  if (lib == LibraryKind::TrailingReduce && (f32 || row16) && trailing_reduce(g, n)) {
    info.kind = NodeKind::Library;
    return info;
  }
  // Split as device copies, one per output.
  if (lib == LibraryKind::Split && t.library_split) {
    info.kind = NodeKind::Library;
    return info;
  }
  // Slice and Expand as views (Target::generated_views): data of a generated or typed dtype.
  const ViewKind view = view_of(n);
  if (t.generated_views && (view == ViewKind::Slice || view == ViewKind::Expand) &&
      !n.inputs.empty() && n.inputs[0] >= 0 && n.outputs.size() == 1 && n.outputs[0] >= 0) {
    const DType d = g.value(n.inputs[0]).dtype;
    const bool typed_data = t.generated_typed && (d == DType::i32 || d == DType::i64 || d == DType::f64);
    std::vector<int64_t> start, step;
    std::string why = !float_ok(d, ts) && !typed_data ? fmt::format("{} of {} data", op, dtype_name(d))
                      : view == ViewKind::Slice ? slice_view(g, n, &start, &step)
                      : !const_ints(g, n, 1) ? "Expand to a computed shape" : "";
    if (!why.empty()) return other(why);
    info.kind = NodeKind::Transpose;
    info.compute = typed_data ? d : DType::f32;
    return info;
  }
  const Lowering lowering = n.def ? n.def->lowering : Lowering::None;
  if (lowering == Lowering::Copy) {
    if (n.outputs.size() == 1 && g.value(n.inputs[0]).dtype == g.value(n.outputs[0]).dtype) {
      info.kind = NodeKind::Copy;
      return info;
    }
  }
  // Typed kernels: integer and float64 pointwise math (and transposes) in their own type.
  DType typed = !gen && t.generated_typed ? typed_compute(g, n) : DType::f32;
  // A Cast with an int32 / int64 / float64 side computes in the output's type when it is one
  // (the load converts: float -> integer truncates toward zero, NaN -> 0, saturating, as
  // PTX's cvt.rzi does and the reference's cast), else in the input's (the store converts).
  auto typed_kind = [](DType d) { return d == DType::i32 || d == DType::i64 || d == DType::f64; };
  auto castable = [&](DType d) { return typed_kind(d) || float_ok(d, ts); };
  const OpId id = op_id(n);
  if (!gen && t.generated_typed && t.generated_casts && (id == OpId::Cast || id == OpId::CastLike) &&
      n.inputs[0] >= 0 && n.outputs.size() == 1) {
    const DType from = g.value(n.inputs[0]).dtype, to = g.value(n.outputs[0]).dtype;
    if (castable(from) && castable(to)) {
      info.kind = NodeKind::Pointwise;
      info.form = {ScalarOp::Identity, {{0, 0, false}}, false};
      info.compute = typed_kind(to) ? to : from;
      info.to_bool = to == DType::boolean;
      return info;
    }
  }
  if (typed != DType::f32 && lowering == Lowering::View) {
    if (n.def->can_fuse)
      if (std::string why = n.def->can_fuse(g, n); !why.empty()) return other(why);
    info.kind = NodeKind::Transpose;
    info.compute = typed;
    return info;
  }
  if (typed != DType::f32 && n.def && n.def->pointwise && n.outputs.size() == 1) {
    try {
      info.form = n.def->pointwise(n);
    } catch (const Error& e) {
      return other(e.what());
    }
    if (!t.generates(info.form.op, typed))
      return other(fmt::format("{} on {}: the device's {} kernels have no {}", op,
                               dtype_name(typed), dtype_name(typed),
                               scalar_op_name(info.form.op)));
    bool omitted = std::find(n.inputs.begin(), n.inputs.end(), -1) != n.inputs.end();
    bool imm = std::any_of(info.form.operands.begin(), info.form.operands.end(),
                           [](const ScalarOperand& o) { return o.input < 0; });
    if (info.form.operands.empty() || omitted || imm)
      return other(fmt::format("{}'s scalar expression has operands a {} kernel cannot bind", op,
                               dtype_name(typed)));
    info.kind = NodeKind::Pointwise;
    info.compute = typed;
    return info;
  }
  // An op with no generated form at all says so, whatever its tensors' types (Swin's Pad read
  // "Pad is not float32" for its int64 pads input, of float32 data).
  if (!gen && n.def && !n.def->pointwise && lowering == Lowering::None &&
      (!t.generated_casts || extra_pointwise_form(g, n).operands.empty()))
    return other(fmt::format("{} has no generated kernel", op));
  if (!gen)
    return other(fmt::format("{} is not float32{}{} (generated kernels compute in float32{})", op,
                             ts.float16 ? ", bfloat16, float16" : "",
                             ts.booleans ? " or bool" : "",
                             t.generated_typed ? "; typed kernels in int32, int64 or float64 alone"
                                               : ""));
  PointwiseForm extra = t.generated_casts ? extra_pointwise_form(g, n) : PointwiseForm{};
  if ((n.def && n.def->pointwise) || !extra.operands.empty()) {
    // Attributes become immediates, omitted optional inputs NaN ("no bound").
    try {
      info.form = !extra.operands.empty() ? extra : n.def->pointwise(n);
    } catch (const Error& e) {
      return other(e.what());
    }
    // Dropout's mask output, when used, is all true: a second store of the constant 1.
    if (id == OpId::Dropout && !extra.operands.empty() && n.outputs.size() > 1 && n.outputs[1] >= 0)
      return other("Dropout's mask output is used (generated kernels store one value per node)");
    bool omitted = std::find(n.inputs.begin(), n.inputs.end(), -1) != n.inputs.end();
    size_t outs = n.outputs.size();
    if (!extra.operands.empty())  // Dropout's unused mask output
      outs = size_t(std::count_if(n.outputs.begin(), n.outputs.end(), [](int o) { return o >= 0; }));
    if (id == OpId::Mean && !extra.operands.empty()) info.divide_by = int(n.inputs.size());
    info.to_bool = (id == OpId::Cast || id == OpId::CastLike) && !extra.operands.empty() &&
                   g.value(n.outputs[0]).dtype == DType::boolean;
    if (info.form.operands.empty() || outs != 1 || n.outputs[0] < 0 || (info.form.fold && omitted))
      return other(fmt::format("{}'s scalar expression has operands the fuser cannot bind", op));
    info.kind = NodeKind::Pointwise;
    return info;
  }
  // Reductions, row kernels and views: the op's own condition, then the kind of IR it becomes.
  if (lowering != Lowering::None && lowering != Lowering::Copy && n.def->can_fuse) {
    std::string why = n.def->can_fuse(g, n);
    if (!why.empty()) return other(why);
  }
  switch (lowering) {
    case Lowering::Reduction:
      info.kind = NodeKind::Reduce;
      info.reduce = n.def->reduce;
      return info;
    case Lowering::Softmax: info.kind = NodeKind::Softmax; return info;
    case Lowering::LayerNorm: info.kind = NodeKind::LayerNorm; return info;
    case Lowering::View: info.kind = NodeKind::Transpose; return info;
    default: break;
  }
  return other(fmt::format("{} has no generated kernel", op));
}

NodeInfo classify(const Graph& g, const Node& n, TypeSet ts, const Target& t) {
  NodeInfo info = classify_node(g, n, ts, t);
  if (info.kind == NodeKind::Library && has_zero_size(g, n)) {
    info.kind = NodeKind::Other;
    info.why = n.op + " has a tensor with no elements (no library call)";
  }
  return info;
}

Shape row_shape_keep(const Shape& s) {
  Shape r = s;
  if (!r.empty()) r.back() = 1;
  return r;
}
Shape row_shape_drop(const Shape& s) { return s.empty() ? s : Shape(s.begin(), s.end() - 1); }

class Fuser {
 public:
  Fuser(const Graph& g, const FusionOptions& o, const Target& t) : g_(g), opts_(o), target_(t) {
    kernel_of_value_.assign(g.values.size(), -1);
    consumers_.resize(g.values.size());
    for (size_t k = 0; k < g.nodes.size(); ++k)
      for (int i : g.nodes[k].inputs)
        if (i >= 0) consumers_[i].push_back(int(k));
  }

  Plan run() {
    if (opts_.enable && target_.attention_max_head_dim > 0) find_attention_blocks();
    if (opts_.enable && (target_.gemm_strided_operands || target_.gemm_transposed_constant_b))
      find_strided_operands();
    if (opts_.enable && target_.gemm_operand_views) find_operand_views();
    for (size_t k = 0; k < g_.nodes.size(); ++k) place(int(k));
    if (lazy_on()) materialize_pending();
    return finish();
  }

 private:
  const Graph& g_;
  FusionOptions opts_;
  Target target_;
  std::vector<Group> groups_;
  std::vector<int> kernel_of_value_;  // producing kernel of each value
  std::vector<std::vector<int>> consumers_;
  std::map<std::pair<int, int>, std::string> refusals_;  // (value, consumer node) -> reason
  std::set<int> absorbed_;  // nodes folded into a library kernel (epilogues, strided operands)
  std::map<int, std::vector<int>> operand_views_;  // GEMM node -> view nodes it reads through
  std::set<int> view_nodes_;                       // every node in operand_views_
  std::set<int> scaled_gemms_;                     // GEMMs whose views fold a scalar Mul
  std::map<int, AttentionMatch> attention_;        // fused attention, by its last node
  std::vector<std::set<int>> reads_;                     // kernels each kernel reads from
  // Lazy values (Target::lazy_views). A view of a buffer: each kernel reading it loads the
  // buffer through these strides; a copy is made only for readers that need a buffer.
  struct LazyView {
    int base = -1;  // the buffer: a graph input, a constant or a kernel's output
    Shape strides;
    int64_t offset = 0;
    std::vector<int> nodes;  // the view nodes from the base on
  };
  std::map<int, LazyView> lazy_;
  std::map<int, int> deferred_;  // value -> the pointwise node computed in its reader's kernel
  std::map<int, int> deferred_size_;  // value -> the deferred nodes its tree holds
  static constexpr int kMaxDeferred = 16;
  std::set<int> attributed_;     // lazy view nodes already listed in a kernel

  const Shape& shape(int v) const { return g_.value(v).shape; }

  int add_expr(Group& G, Expr e) {
    G.k.exprs.push_back(std::move(e));
    return int(G.k.exprs.size()) - 1;
  }

  // Load of value `v` (graph buffer or in-kernel view), broadcast to shape `o` and mapped onto
  // the kernel's space: `o` is the space itself or one of its per-row shapes.
  int load(Group& G, int v, const Shape& o) {
    const Shape& S = G.k.space;
    if (auto it = G.vals.find(v); it != G.vals.end() && it->second.expr >= 0) return it->second.expr;
    const Value& val = g_.value(v);
    bool other_scalar = target_.generated_casts && exact_scalar_const(val);
    if (G.k.compute == DType::f32 && val.constant.defined() && val.constant.numel() == 1 &&
        (val.dtype == DType::f32 || other_scalar)) {
      Expr c;
      c.kind = Expr::Const;
      c.level = 1;
      c.constant = float(val.constant.at_double(0));
      // The C++ emitter reads a float32 one through its pointer (kernels then share code).
      c.value = other_scalar ? -1 : v;
      if (!std::isnan(c.constant)) c.lo = c.hi = c.constant;
      return add_expr(G, c);
    }
    int buf = v;
    Shape vst = contiguous_strides(val.shape);
    int64_t off = 0;
    if (auto it = G.vals.find(v); it != G.vals.end()) {  // a view
      buf = it->second.view_value;
      vst = it->second.view_strides;
      off = it->second.view_offset;
    } else if (auto lz = lazy_.find(v); lz != lazy_.end()) {  // a lazy view: listed before its reader
      buf = lz->second.base;
      vst = lz->second.strides;
      off = lz->second.offset;
      for (int m : lz->second.nodes)
        if (attributed_.insert(m).second)
          G.k.nodes.insert(G.k.nodes.end() - (G.k.nodes.empty() ? 0 : 1), m);
    }
    // Broadcast val.shape -> o (right-aligned).
    Shape st(o.size(), 0);
    int d = int(val.shape.size()) - 1;
    for (int i = int(o.size()) - 1; i >= 0 && d >= 0; --i, --d)
      if (val.shape[d] == o[i] && o[i] != 1) st[i] = vst[d];
    // Map o onto S: equal, S[:-1]+[1] (last stride 0), or S[:-1] (append 0).
    if (o.size() + 1 == S.size()) st.push_back(0);
    if (o != S && !st.empty()) st.back() = 0;
    Expr e;
    e.kind = Expr::Load;
    e.value = buf;
    e.strides = st;
    e.offset = off;
    e.level = (!st.empty() && st.back() != 0) ? 0 : 1;
    if (S.empty()) e.level = 0;
    // One load per buffer view, however many readers.
    auto [it, fresh] = G.loads.try_emplace({e.value, e.offset, e.level, e.strides}, -1);
    if (fresh) it->second = add_expr(G, std::move(e));
    return it->second;
  }

  // A pointwise expression; `attrs` (sized like args, or empty) holds the immediate operands
  // where args has -1.
  int pw(Group& G, ScalarOp op, std::vector<int> args, std::vector<ScalarOperand> attrs = {}) {
    Expr e;
    e.kind = Expr::Pointwise;
    e.op = op;
    e.level = 1;
    for (int a : args)
      if (a >= 0) e.level = std::min(e.level, G.k.exprs[size_t(a)].level);
    e.args = std::move(args);
    e.attrs = std::move(attrs);
    return add_expr(G, e);
  }
  int red(Group& G, ReduceKind kind, int arg) {
    Expr e;
    e.kind = Expr::Reduce;
    e.reduce = kind;
    e.level = 1;
    e.args = {arg};
    return add_expr(G, e);
  }
  int cst(Group& G, float v) {
    Expr e;
    e.kind = Expr::Const;
    e.level = 1;
    e.constant = v;
    if (!std::isnan(v)) e.lo = e.hi = v;
    return add_expr(G, e);
  }

  // Does kernel h read (transitively) from kernel g?
  bool depends_on(int h, int g) {
    // Visited marks are a stamp per kernel, not a set per call (wide graphs ask this often).
    seen_.resize(groups_.size(), 0);
    ++stamp_;
    stack_.assign(1, h);
    while (!stack_.empty()) {
      int k = stack_.back();
      stack_.pop_back();
      if (k == g) return true;
      if (seen_[size_t(k)] == stamp_) continue;
      seen_[size_t(k)] = stamp_;
      for (int r : reads_[size_t(k)]) stack_.push_back(r);
    }
    return false;
  }
  std::vector<unsigned> seen_;
  std::vector<int> stack_;
  unsigned stamp_ = 0;
  void note_reads(int gi, const Node& node) {
    for (int i : node.inputs)
      for_each_source(i, [&](int b) {
        if (kernel_of_value_[b] >= 0 && kernel_of_value_[b] != gi)
          reads_[size_t(gi)].insert(kernel_of_value_[b]);
      });
  }
  // The values a kernel reading v reads: v, or for a lazy view its buffer, for a deferred node
  // the sources of its inputs.
  template <class F>
  void for_each_source(int v, const F& f) const {
    if (v < 0) return;
    if (auto lz = lazy_.find(v); lz != lazy_.end() && kernel_of_value_[v] < 0) return f(lz->second.base);
    if (auto d = deferred_.find(v); d != deferred_.end()) {
      for (int i : g_.nodes[size_t(d->second)].inputs) for_each_source(i, f);
      return;
    }
    f(v);
  }

  bool in_group(const Group& G, int v) const { return v >= 0 && G.vals.count(v); }
  bool computed_in(const Group& G, int v) const {
    auto it = G.vals.find(v);
    return it != G.vals.end() && it->second.expr >= 0;
  }
  int level_of(const Group& G, int v) const {
    return G.k.exprs[size_t(G.vals.at(v).expr)].level;
  }

  // Empty if node n may join group G; otherwise the reason it may not.
  std::string can_join(const Group& G, int gi, int n, const NodeInfo& info) {
    const Node& node = g_.nodes[n];
    const Shape& S = G.k.space;
    if (info.compute != G.k.compute)
      return fmt::format("the kernel computes in {}, this node in {}", dtype_name(G.k.compute),
                         dtype_name(info.compute));
    if (G.k.exprs.size() >= kMaxKernelExprs)
      return fmt::format("the kernel has {} expressions, the most one generated function gets",
                         G.k.exprs.size());
    for (int i : node.inputs) {
      if (i < 0 || in_group(G, i)) continue;
      if (deferred_.count(i) && !fits(i, S, G.k.compute, n))
        return fmt::format("input '{}' (computed here from buffers) has another shape or type",
                           g_.value(i).name);
      std::string why;
      for_each_source(i, [&](int b) {
        if (b != i && computed_in(G, b))
          why = fmt::format("input '{}' is a view of a value computed inside the kernel (needs an "
                            "index remap)", g_.value(i).name);
        int pk = kernel_of_value_[b];
        if (why.empty() && pk >= 0 && pk != gi && depends_on(pk, gi))
          why = fmt::format("input '{}' comes from a kernel that depends on this one",
                            g_.value(i).name);
      });
      if (!why.empty()) return why;
    }
    switch (info.kind) {
      case NodeKind::Pointwise: {
        const Shape& O = shape(node.outputs[0]);
        bool elem = O == S;
        bool row = !elem && G.k.has_reduction() && (O == row_shape_keep(S) || O == row_shape_drop(S));
        if (!elem && !row)
          return fmt::format("output shape {} differs from the kernel's index space {}",
                             shape_str(O), shape_str(S));
        for (int i : node.inputs) {
          if (!computed_in(G, i)) continue;
          const Shape& is = shape(i);
          if (is == O) continue;
          if (elem && level_of(G, i) == 1 && is == row_shape_keep(S)) continue;
          return fmt::format("input '{}' ({}) would broadcast inside the kernel", g_.value(i).name,
                             shape_str(is));
        }
        if (row)
          for (int i : node.inputs)
            if (computed_in(G, i) && level_of(G, i) == 0)
              return "a per-row result mixes with per-element values";
        return "";
      }
      case NodeKind::Reduce:
      case NodeKind::Softmax:
      case NodeKind::LayerNorm: {
        int x = node.inputs[0];
        if (computed_in(G, x) && level_of(G, x) == 1)
          return "reduction feeds a reduction over a different axis";
        if (shape(x) != S)
          return fmt::format("reduction over {} differs from the kernel's index space {}",
                             shape_str(shape(x)), shape_str(S));
        if (info.kind == NodeKind::LayerNorm)
          for (size_t i = 1; i < node.inputs.size(); ++i)
            if (computed_in(G, node.inputs[i]))
              return "LayerNormalization scale/bias computed inside the kernel";
        return "";
      }
      case NodeKind::Transpose: {
        // A view of a view read by it alone (a Slice, then the head transpose): in a kernel
        // of nothing but views it composes their strides and becomes the index space.
        int x = node.inputs[0];
        if (in_group(G, x) && !computed_in(G, x) && G.k.exprs.empty() && sole_consumer(x) == n)
          return "";
        return "transpose of a value computed inside the kernel needs an index remap";
      }
      default: return "not a fusible op";
    }
  }

  // Emits node n's expressions into G (legality already checked).
  void emit(Group& G, int n, const NodeInfo& info) {
    const Node& node = g_.nodes[n];
    G.k.nodes.push_back(n);
    note_reads(int(&G - groups_.data()), node);
    int out = node.outputs[0];
    kernel_of_value_[out] = int(&G - groups_.data());
    const Shape& S = G.k.space;
    switch (info.kind) {
      case NodeKind::Pointwise: {
        // Every present input is loaded, in order, whether or not an operand reads it.
        const Shape& O = shape(out);
        std::vector<int> loaded(node.inputs.size(), -1);
        for (size_t i = 0; i < node.inputs.size(); ++i)
          if (node.inputs[i] >= 0) loaded[i] = load(G, node.inputs[i], O);
        const PointwiseForm& f = info.form;
        std::vector<int> args;
        std::vector<ScalarOperand> attrs;
        bool any_imm = false;
        for (ScalarOperand o : f.operands) {
          // An omitted optional input (-1, or past the node's inputs) is NaN: "no bound".
          bool present = o.input >= 0 && o.input < int(loaded.size()) && loaded[size_t(o.input)] >= 0;
          if (o.input >= 0 && !present) o = {-1, NAN, false};
          args.push_back(present ? loaded[size_t(o.input)] : -1);
          attrs.push_back(o);
          any_imm = any_imm || !present;
        }
        if (!any_imm) attrs.clear();
        int e = -1;
        if (f.fold && args.size() == 1) {  // a variadic op of one input is that input
          e = pw(G, ScalarOp::Identity, std::move(args), std::move(attrs));
        } else if (f.fold) {  // variadic: ((a0 op a1) op a2) ...
          e = args[0];
          for (size_t i = 1; i < args.size(); ++i) e = pw(G, f.op, {e, args[i]});
          if (info.divide_by > 1) e = pw(G, ScalarOp::Div, {e, cst(G, float(info.divide_by))});
        } else {
          std::vector<Range> ranges;
          for (int a : args)
            if (a >= 0) ranges.push_back({G.k.exprs[size_t(a)].lo, G.k.exprs[size_t(a)].hi});
          // Value-range variants (CosUnit, ...) are float32 forms: typed kernels keep the op.
          ScalarOp op = G.k.compute == DType::f32 ? narrowed_op(f.op, ranges) : f.op;
          e = pw(G, op, std::move(args), std::move(attrs));
          Range r = op_range(G.k.exprs[size_t(e)], ranges);
          G.k.exprs[size_t(e)].lo = r.lo;
          G.k.exprs[size_t(e)].hi = r.hi;
          // A bool read later in the kernel is 0 or 1, as the reference's cast makes it.
          if (info.to_bool) e = pw(G, ScalarOp::Not, {pw(G, ScalarOp::Not, {e})});
        }
        G.vals[out].expr = e;
        (void)S;
        break;
      }
      case NodeKind::Reduce: {
        int x = load(G, node.inputs[0], S);
        G.vals[out].expr = red(G, info.reduce, x);
        break;
      }
      case NodeKind::Softmax: {
        int x = load(G, node.inputs[0], S);
        int m = red(G, ReduceKind::Max, x);
        int e = pw(G, ScalarOp::Exp, {pw(G, ScalarOp::Sub, {x, m})});
        int s = red(G, ReduceKind::Sum, e);
        // One reciprocal per row, a multiply per element (as PyTorch's CPU softmax does): within
        // 1.5 ulp of the division, and a division per element is most of the ALU work of a
        // 16-bit softmax on the GPU.
        G.vals[out].expr = pw(G, ScalarOp::Mul, {e, pw(G, ScalarOp::Reciprocal, {s})});
        break;
      }
      case NodeKind::LayerNorm: {
        int x = load(G, node.inputs[0], S);
        int mean = red(G, ReduceKind::Mean, x);
        int d = pw(G, ScalarOp::Sub, {x, mean});
        int var = red(G, ReduceKind::Mean, pw(G, ScalarOp::Mul, {d, d}));
        int eps = cst(G, node.attr_float("epsilon", 1e-5f));
        int inv = pw(G, ScalarOp::Reciprocal, {pw(G, ScalarOp::Sqrt, {pw(G, ScalarOp::Add, {var, eps})})});
        int y = pw(G, ScalarOp::Mul, {pw(G, ScalarOp::Mul, {d, inv}), load(G, node.inputs[1], S)});
        if (node.inputs.size() > 2 && node.inputs[2] >= 0)
          y = pw(G, ScalarOp::Add, {y, load(G, node.inputs[2], S)});
        G.vals[out].expr = y;
        break;
      }
      case NodeKind::Transpose: {
        int src = node.inputs[0];
        const Shape& is = shape(src);
        Shape base = contiguous_strides(is);
        int bufv = src;
        int64_t off = 0;
        if (auto it = G.vals.find(src); it != G.vals.end()) {  // transpose of a view
          base = it->second.view_strides;
          bufv = it->second.view_value;
          off = it->second.view_offset;
        } else if (auto lz = lazy_.find(src); lz != lazy_.end() && kernel_of_value_[src] < 0) {
          base = lz->second.strides;
          bufv = lz->second.base;
          off = lz->second.offset;
        }
        KVal kv;
        kv.view_value = bufv;
        kv.view_offset = off;
        std::optional<Shape> st = view_strides(node, is, base, &kv.view_offset);
        BRRR_ASSERT(st.has_value(), "a fused view the fuser cannot stride");
        kv.view_strides = std::move(*st);
        G.vals[out] = kv;
        if (G.k.exprs.empty()) G.k.space = shape(out);  // views alone: the last one's space
        break;
      }
      default: BRRR_ASSERT(false, "emit of a non-fusible node");
    }
  }

  Group& new_group(KernelKind kind, int n) {
    groups_.emplace_back();
    reads_.emplace_back();
    Group& G = groups_.back();
    G.k.kind = kind;
    G.fused = kind == KernelKind::Fused;
    (void)n;
    return G;
  }

  bool lazy_on() const { return target_.lazy_views && opts_.enable; }
  TypeSet types() const { return TypeSet{opts_.float16, opts_.booleans}; }

  // The strides of view node `node`'s output over the buffer its input `is` reads with strides
  // `base` (offset added to *offset): a Slice (first element taken, then `step` apart), an Expand
  // (stride 0 on broadcast axes), a Transpose (permuted), a Reshape where strides describe it;
  // nullopt when none does.
  std::optional<Shape> view_strides(const Node& node, const Shape& is, const Shape& base,
                                    int64_t* offset) const {
    const Shape& os = shape(node.outputs[0]);
    Shape st;
    switch (view_of(node)) {
      case ViewKind::Slice: {
        std::vector<int64_t> start, step;
        if (!slice_view(g_, node, &start, &step).empty()) return std::nullopt;
        for (size_t d = 0; d < is.size(); ++d) {
          *offset += start[d] * base[d];
          st.push_back(base[d] * step[d]);
        }
        return st;
      }
      case ViewKind::Expand:
        st.assign(os.size(), 0);
        for (size_t i = 0; i < os.size() && i < is.size(); ++i) {
          size_t o = os.size() - 1 - i, d = is.size() - 1 - i;
          if (is[d] == os[o] && os[o] != 1) st[o] = base[d];
        }
        return st;
      case ViewKind::Permute: {
        auto perm = node.attr_ints("perm");
        if (perm.empty())
          for (int i = int(is.size()) - 1; i >= 0; --i) perm.push_back(i);
        for (auto p : perm) st.push_back(base[size_t(p < 0 ? p + int64_t(is.size()) : p)]);
        return st;
      }
      case ViewKind::Reshape: {
        std::vector<std::vector<Factor>> from;
        for (size_t d = 0; d < is.size(); ++d) from.push_back({Factor{is[d], base[d]}});
        auto to = reshape_factors(from, os, false);
        if (!to || to->size() != os.size()) return std::nullopt;
        for (const auto& f : *to) st.push_back(f.empty() ? 0 : f[0].stride);
        return st;
      }
      default: return std::nullopt;
    }
  }

  // Node n as a lazy view (Target::lazy_views): a float Transpose, Slice or Expand, or a Reshape
  // whose strides describe it, of a buffer or of another lazy view. False: placed as before.
  bool try_lazy_view(int n, const NodeInfo& info) {
    const Node& node = g_.nodes[size_t(n)];
    const ViewKind vk = view_of(node);
    const bool reshape = info.kind == NodeKind::Copy && vk == ViewKind::Reshape;
    if ((info.kind != NodeKind::Transpose || info.compute != DType::f32) && !reshape) return false;
    if (node.inputs.empty() || node.inputs[0] < 0 || node.outputs.size() != 1 || node.outputs[0] < 0)
      return false;
    const int x = node.inputs[0], out = node.outputs[0];
    if (deferred_.count(x) || !float_ok(g_.value(x).dtype, types())) return false;
    LazyView lv;
    if (auto lz = lazy_.find(x); lz != lazy_.end()) lv = lz->second;
    else lv = {x, contiguous_strides(shape(x)), 0, {}};
    std::optional<Shape> st = view_strides(node, shape(x), lv.strides, &lv.offset);
    if (!st) return false;
    lv.strides = std::move(*st);
    lv.nodes.push_back(n);
    lazy_[out] = std::move(lv);
    return true;
  }

  // Node n deferred into its reader's kernel: pointwise, reading no value a fused kernel
  // computes, its one reader a pointwise node that no library kernel has taken.
  bool try_defer(int n, const NodeInfo& info) {
    const Node& node = g_.nodes[size_t(n)];
    if (info.kind != NodeKind::Pointwise || info.compute != DType::f32 || node.outputs.size() != 1 ||
        node.outputs[0] < 0)
      return false;
    const int c = sole_consumer(node.outputs[0]);
    if (c < 0 || absorbed_.count(c) || attention_.count(c) ||
        classify(g_, g_.nodes[size_t(c)], types(), target_).kind != NodeKind::Pointwise)
      return false;
    int size = 1;  // deferred nodes in the tree it would root
    for (int i : node.inputs) {
      if (i < 0 || lazy_.count(i)) continue;
      if (auto d = deferred_size_.find(i); d != deferred_size_.end() && deferred_.count(i)) {
        size += d->second;
        continue;
      }
      const int k = kernel_of_value_[i];
      if (k >= 0 && groups_[size_t(k)].fused) return false;  // it joins that kernel instead
    }
    // A long chain of such nodes is placed as before: kernels of bounded size, no deep recursion.
    if (size > kMaxDeferred) return false;
    deferred_[node.outputs[0]] = n;
    deferred_size_[node.outputs[0]] = size;
    return true;
  }

  // Whether deferred value v can be computed in a kernel of space S computing in `compute`,
  // read by node `reader`: its nodes have that output shape (row-level joins are not tried).
  bool fits(int v, const Shape& S, DType compute, int reader) const {
    const Node& r = g_.nodes[size_t(reader)];
    const NodeInfo ri = classify(g_, r, types(), target_);
    if (ri.kind != NodeKind::Pointwise && (r.inputs.empty() || r.inputs[0] != v)) return false;
    const int d = deferred_.at(v);
    if (shape(v) != S || classify(g_, g_.nodes[size_t(d)], types(), target_).compute != compute)
      return false;
    for (int i : g_.nodes[size_t(d)].inputs)
      if (deferred_.count(i) && !fits(i, S, compute, d)) return false;
    return true;
  }
  // Emits the deferred nodes node n reads into kernel gi (fits() holds), inputs first.
  void realize_inputs(int gi, int n) {
    for (int i : g_.nodes[size_t(n)].inputs) {
      auto d = deferred_.find(i);
      if (d == deferred_.end()) continue;
      const int m = d->second;
      deferred_.erase(d);
      realize_inputs(gi, m);
      emit(groups_[size_t(gi)], m, classify(g_, g_.nodes[size_t(m)], types(), target_));
    }
  }
  // Deferred value v in a kernel of its own (its reader needs another space, or a buffer).
  int place_deferred(int v) {
    const int d = deferred_.at(v);
    const NodeInfo info = classify(g_, g_.nodes[size_t(d)], types(), target_);
    for (int i : g_.nodes[size_t(d)].inputs)
      if (deferred_.count(i) && !fits(i, shape(v), info.compute, d)) place_deferred(i);
    const int gi = int(groups_.size());
    Group& G = new_group(KernelKind::Fused, d);
    G.k.compute = info.compute;
    G.k.space = shape(v);
    deferred_.erase(v);
    realize_inputs(gi, d);
    emit(groups_[size_t(gi)], d, info);
    return gi;
  }
  // A kernel that writes lazy or deferred value v as a buffer (a library kernel or a graph
  // output reads it); its index.
  int materialize(int v) {
    if (deferred_.count(v)) return place_deferred(v);
    if (kernel_of_value_[v] >= 0 || !lazy_.count(v)) return kernel_of_value_[v];
    const LazyView lv = lazy_.at(v);
    const int node = lv.nodes.back();
    const Node& nd = g_.nodes[size_t(node)];
    const int gi = int(groups_.size());
    const int in = nd.inputs[0];
    const bool copy = classify(g_, nd, types(), target_).kind == NodeKind::Copy;
    // A Reshape of a Reshape of a buffer: the inner one becomes the buffer (an alias) first.
    if (copy && lazy_.count(in) && kernel_of_value_[in] < 0) {
      bool reshapes = true;
      for (int m : lazy_.at(in).nodes)
        reshapes = reshapes && classify(g_, g_.nodes[size_t(m)], types(), target_).kind == NodeKind::Copy;
      if (reshapes) materialize(in);
    }
    const bool in_buffer = !lazy_.count(in) ||
                           (kernel_of_value_[in] >= 0 &&
                            groups_[size_t(kernel_of_value_[in])].k.kind == KernelKind::Copy);
    if (copy && in_buffer) {
      // A Reshape of a buffer: a copy kernel, which the memory plan makes an alias. (Of a lazy
      // view: the strided copy below, from the view's own buffer.)
      Group& C = new_group(KernelKind::Copy, node);
      C.k.nodes.push_back(node);
      attributed_.insert(node);
      note_reads(gi, nd);
      refusals_.try_emplace({in, node}, nd.op + " is a copy");
      kernel_of_value_[v] = gi;  // lazy_ keeps v: later readers find its kernel
      return gi;
    }
    Group& G = new_group(KernelKind::Fused, node);
    G.k.space = shape(v);
    KVal kv;
    kv.view_value = lv.base;
    kv.view_strides = lv.strides;
    kv.view_offset = lv.offset;
    G.vals[v] = kv;
    for (int m : lv.nodes)
      if (attributed_.insert(m).second) G.k.nodes.push_back(m);
    if (G.k.nodes.empty()) G.k.nodes.push_back(node);
    if (kernel_of_value_[lv.base] >= 0) reads_[size_t(gi)].insert(kernel_of_value_[lv.base]);
    kernel_of_value_[v] = gi;
    return gi;
  }
  // Buffers for the lazy and deferred values that library, copy and reference kernels and the
  // graph's outputs read.
  void materialize_pending() {
    for (size_t gi = 0; gi < groups_.size(); ++gi) {  // grows as it goes
      if (groups_[gi].k.kind == KernelKind::Fused) continue;
      const std::vector<int> nodes = groups_[gi].k.nodes;
      for (int n : nodes)
        for (int i : g_.nodes[size_t(n)].inputs)
          if (i >= 0 && (lazy_.count(i) || deferred_.count(i))) {  // each reader waits for it
            const int m = materialize(i);  // grows reads_: no reference into it across the call
            reads_[gi].insert(m);
          }
    }
    for (int o : g_.outputs)
      if (o >= 0 && kernel_of_value_[o] < 0 && (lazy_.count(o) || deferred_.count(o))) materialize(o);
    while (!deferred_.empty()) place_deferred(deferred_.begin()->first);  // read by nothing now
  }

  void place(int n) {
    if (auto a = attention_.find(n); a != attention_.end()) return place_attention(a->second);
    if (absorbed_.count(n)) return;
    const Node& node = g_.nodes[n];
    NodeInfo info = classify(g_, node, TypeSet{opts_.float16, opts_.booleans}, target_);
    if (lazy_on() && (try_lazy_view(n, info) || try_defer(n, info))) return;
    bool fusible = info.kind == NodeKind::Pointwise || info.kind == NodeKind::Reduce ||
                   info.kind == NodeKind::Softmax || info.kind == NodeKind::LayerNorm ||
                   info.kind == NodeKind::Transpose;
    const Shape space = (info.kind == NodeKind::Pointwise || info.kind == NodeKind::Transpose)
                            ? shape(node.outputs[0])
                            : node.inputs.empty() || node.inputs[0] < 0 ? Shape{}
                                                                         : shape(node.inputs[0]);
    // Deferred inputs of another shape than n's kernel get kernels of their own first.
    if (fusible)
      for (int i : node.inputs)
        if (deferred_.count(i) && !fits(i, space, info.compute, n)) place_deferred(i);
    // Candidate kernels: fused kernels holding one of n's inputs, latest first.
    std::set<int, std::greater<int>> cands;
    for (int i : node.inputs)
      if (i >= 0 && kernel_of_value_[i] >= 0 && groups_[kernel_of_value_[i]].fused)
        cands.insert(kernel_of_value_[i]);
    if (fusible && opts_.enable) {
      for (int gi : cands) {
        std::string why = can_join(groups_[gi], gi, n, info);
        if (why.empty()) {
          realize_inputs(gi, n);
          emit(groups_[gi], n, info);
          return;
        }
        for (int i : node.inputs)
          if (i >= 0 && kernel_of_value_[i] == gi) refusals_[{i, n}] = why;
      }
    } else {
      std::string why = !opts_.enable ? "fusion disabled" : info.why;
      if (info.kind == NodeKind::Library) why = node.op + " runs as a library kernel";
      if (info.kind == NodeKind::Copy) why = node.op + " is a copy";
      for (int i : node.inputs)
        if (i >= 0) refusals_[{i, n}] = why;
    }
    if (fusible) {
      const int gi = int(groups_.size());
      Group& G = new_group(KernelKind::Fused, n);
      G.k.compute = info.compute;
      G.k.space = space;
      realize_inputs(gi, n);
      emit(groups_[size_t(gi)], n, info);
      return;
    }
    int gi = int(groups_.size());
    KernelKind kind = info.kind == NodeKind::Library ? KernelKind::Library
                      : info.kind == NodeKind::Copy  ? KernelKind::Copy
                                                     : KernelKind::Reference;
    Group& G = new_group(kind, n);
    G.k.nodes.push_back(n);
    if (kind == KernelKind::Reference) G.why = info.why;
    note_reads(gi, node);
    for (int o : node.outputs)
      if (o >= 0) kernel_of_value_[o] = gi;
    if (kind == KernelKind::Library && opts_.enable) {
      auto views = operand_views_.find(n);
      if (views != operand_views_.end())
        for (int t : views->second) absorb(G, gi, t);  // before the epilogue: see finish()
      absorb_epilogue(G, gi, n);
      absorb_output_view(G, gi, n);
    }
  }

  // Attention blocks (plan/attention.hpp), each one library kernel placed at its last node, when
  // every value it reads has been computed; its other nodes are absorbed.
  void find_attention_blocks() {
    auto free = [&](int n) { return !absorbed_.count(n); };
    for (AttentionMatch& m : find_attention(g_, target_.attention_max_head_dim, free)) {
      if (m.desc.dtype != DType::f32 && !target_.attention_16bit) continue;
      if (m.desc.seq_k < target_.attention_min_keys) continue;
      const int last = m.nodes.back();
      for (int n : m.nodes)
        if (n != last) absorbed_.insert(n);
      attention_.emplace(last, std::move(m));
    }
  }
  // Node n belongs to an attention block: absorbed, or the last node, where the block is placed
  // (GEMM operand views must not take it: the block writes its output).
  bool in_attention(int n) const { return absorbed_.count(n) || attention_.count(n); }
  void place_attention(const AttentionMatch& m) {
    const int gi = int(groups_.size());
    Group& G = new_group(KernelKind::Library, m.nodes.back());
    for (int n : m.nodes) {
      G.k.nodes.push_back(n);
      note_reads(gi, g_.nodes[size_t(n)]);
      for (int o : g_.nodes[size_t(n)].outputs)
        if (o >= 0) kernel_of_value_[o] = gi;
    }
    G.k.lib = std::make_shared<const LibraryDesc>(m.desc);
  }

  int sole_consumer(int v) const {
    if (consumers_[v].size() != 1) return -1;
    if (std::find(g_.outputs.begin(), g_.outputs.end(), v) != g_.outputs.end()) return -1;
    return consumers_[v][0];
  }

  // Conv followed by its only consumer Add of a same-shape value computed earlier (a residual:
  // oneDNN's sum post-op), then Relu / HardSwish / HardSigmoid / Clip (an eltwise post-op).
  void absorb_conv_epilogue(Group& G, int gi, int n) {
    int cur = g_.nodes[n].outputs[0];
    int c = sole_consumer(cur);
    auto plain = [&](int c, OpId op) {
      return c >= 0 && op_id(g_.nodes[c]) == op && g_.nodes[c].domain.empty();
    };
    if (plain(c, OpId::Add)) {
      const Node& add = g_.nodes[c];
      int other = add.inputs[0] == cur ? add.inputs[1] : add.inputs[0];
      const Value& ov = g_.value(other);
      if (other != cur && ov.dtype == g_.value(cur).dtype && ov.shape == shape(cur) &&
          shape(add.outputs[0]) == shape(cur) && ov.producer < n) {
        G.k.sum = other;
        G.k.nodes.push_back(c);
        note_reads(gi, add);
        absorbed_.insert(c);
        cur = add.outputs[0];
        kernel_of_value_[cur] = gi;
        c = sole_consumer(cur);
      }
    }
    if (target_.conv_sigmoid_silu && absorb_conv_silu(G, gi, cur)) return;
    if (c < 0 || !g_.nodes[c].domain.empty()) return;
    const Node& act = g_.nodes[c];
    Kernel& k = G.k;
    const Activation a = activation_of(act);  // the ones a conv's eltwise post-op takes
    if (a == Activation::Relu || a == Activation::HardSwish ||
        (a == Activation::Sigmoid && target_.conv_sigmoid_silu)) {
      k.activation = activation_name(a);
    } else if (a == Activation::HardSigmoid) {
      k.activation = activation_name(a);
      k.act_alpha = act.attr_float("alpha", 0.2f);
      k.act_beta = act.attr_float("beta", 0.5f);
    } else if (a == Activation::Clip) {
      float lo = -INFINITY, hi = INFINITY;
      if (act.has_attr("min")) lo = act.attr_float("min", lo);
      if (act.has_attr("max")) hi = act.attr_float("max", hi);
      for (size_t i = 1; i < act.inputs.size() && i < 3; ++i) {
        if (act.inputs[i] < 0) continue;
        const Value& b = g_.value(act.inputs[i]);
        if (!b.constant.defined() || b.constant.numel() != 1) return;  // a computed bound
        (i == 1 ? lo : hi) = float(b.constant.at_double(0));
      }
      k.activation = activation_name(a);
      k.act_alpha = lo;
      k.act_beta = hi;
    } else {
      return;
    }
    k.nodes.push_back(c);
    absorbed_.insert(c);
    kernel_of_value_[act.outputs[0]] = gi;
  }

  // y * Sigmoid(y) on the conv's output y (either operand order), where y and the Sigmoid have
  // no other reader: the conv's SiLU epilogue.
  bool absorb_conv_silu(Group& G, int gi, int y) {
    if (consumers_[y].size() != 2 ||
        std::find(g_.outputs.begin(), g_.outputs.end(), y) != g_.outputs.end())
      return false;
    for (int first : {0, 1}) {
      const int si = consumers_[y][size_t(first)], mi = consumers_[y][size_t(1 - first)];
      const Node &sig = g_.nodes[size_t(si)], &mul = g_.nodes[size_t(mi)];
      if (silu_input(g_, mul) != y || activation_of(sig) != Activation::Sigmoid ||
          sig.outputs.empty() || mul.outputs.empty() || sole_consumer(sig.outputs[0]) != mi ||
          shape(mul.outputs[0]) != shape(y) || g_.value(mul.outputs[0]).dtype != g_.value(y).dtype)
        continue;
      G.k.activation = activation_name(Activation::Silu);
      for (int n : {si, mi}) {
        G.k.nodes.push_back(n);
        absorbed_.insert(n);
        kernel_of_value_[g_.nodes[size_t(n)].outputs[0]] = gi;
      }
      return true;
    }
    return false;
  }

  // Transposes of the last two axes whose only reader is a library MatMul/Gemm: the GEMM reads
  // their input with swapped strides (describe_gemm flips trans_a / trans_b), so no copy runs.
  // With gemm_transposed_constant_b alone (CUDA), only a constant B's 2-D Transpose.
  void find_strided_operands() {
    const TypeSet ts{opts_.float16, opts_.booleans};
    for (size_t m = 0; m < g_.nodes.size(); ++m) {
      const Node& mm = g_.nodes[m];
      if (library_of(mm) != LibraryKind::Gemm || mm.inputs.size() < 2 ||
          mm.inputs[0] == mm.inputs[1] || classify(g_, mm, ts, target_).kind != NodeKind::Library ||
          in_attention(int(m)))
        continue;
      for (int slot = 0; slot < 2; ++slot) {
        int v = mm.inputs[size_t(slot)];
        if (v < 0 || g_.value(v).producer < 0 || sole_consumer(v) != int(m)) continue;
        int t = g_.value(v).producer;
        if (in_attention(t)) continue;
        const Node& tr = g_.nodes[size_t(t)];
        if (op_id(tr) != OpId::Transpose || !tr.domain.empty() || tr.inputs.empty() || tr.inputs[0] < 0 ||
            !float_ok(g_.value(tr.inputs[0]).dtype, {ts.float16, false}))
          continue;
        if (!target_.gemm_strided_operands &&
            (slot != 1 || !g_.value(tr.inputs[0]).constant.defined() || g_.value(v).shape.size() != 2))
          continue;
        const size_t r = g_.value(v).shape.size();
        std::vector<int64_t> perm;
        try {
          perm = tr.attr_ints("perm", {});
        } catch (const Error&) {
          continue;
        }
        bool swap_last = r >= 2 && perm.size() == r && perm[r - 1] == int64_t(r) - 2 &&
                         perm[r - 2] == int64_t(r) - 1;
        for (size_t i = 0; i + 2 < r && swap_last; ++i) swap_last = perm[i] == int64_t(i);
        if (!swap_last) continue;
        operand_views_[int(m)].push_back(t);
        absorbed_.insert(t);
        view_nodes_.insert(t);
      }
    }
  }

  // Reshapes, Transposes and scalar Muls between an earlier buffer and a library MatMul, each
  // read only by the next: the MatMul reads that buffer through strides (plan/operand_view.hpp)
  // and scales its product, so the head split of attention runs no copy kernel.
  void find_operand_views() {
    const TypeSet ts{opts_.float16, opts_.booleans};
    for (size_t m = 0; m < g_.nodes.size(); ++m) {
      const Node& mm = g_.nodes[m];
      // A Gemm (2-D operands, transA / transB, alpha) takes only views that are its operand's
      // buffer under another shape (GPT-2's Reshape [1,S,D] -> [S,D] before each Gemm).
      const bool gemm = op_id(mm) == OpId::Gemm;
      if ((op_id(mm) != OpId::MatMul && !gemm) || !mm.domain.empty() || mm.inputs.size() < 2 ||
          (!gemm && mm.inputs.size() != 2) || mm.inputs[0] == mm.inputs[1] ||
          classify(g_, mm, ts, target_).kind != NodeKind::Library || in_attention(int(m)))
        continue;
      double scale = 1;
      for (int slot = 0; slot < 2; ++slot) {
        int v = mm.inputs[size_t(slot)];
        if (v < 0 || g_.value(v).producer < 0 || absorbed_.count(g_.value(v).producer) ||
            in_attention(g_.value(v).producer))
          continue;
        // A node may fold when its output is read by the next node of the view alone.
        int next = int(m);
        std::set<int> taken;
        auto take = [&](int p) {
          if (absorbed_.count(p) || in_attention(p) ||
              sole_consumer(g_.nodes[size_t(p)].outputs[0]) != next)
            return false;
          next = p;
          return true;
        };
        OperandView view = operand_view(g_, v, take, target_.gemm_operand_views_16bit);
        if (gemm && (view.scale != 1 || !is_row_major(view.dims, view.strides) ||
                     mm.attr_int(slot == 0 ? "transA" : "transB", 0) != 0))
          continue;
        // A scalar Mul alone gains nothing (it fuses into its producer's kernel) and may be the
        // last node of an activation the producer's epilogue takes.
        bool moves = false;
        for (int p : view.nodes) moves = moves || op_id(g_.nodes[size_t(p)]) != OpId::Mul;
        if (!moves) continue;
        for (int p : view.nodes) {
          operand_views_[int(m)].push_back(p);
          absorbed_.insert(p);
          view_nodes_.insert(p);
        }
        scale *= view.scale;
      }
      if (scale != 1) scaled_gemms_.insert(int(m));
    }
  }

  // A MatMul with no epilogue whose result only Reshapes and Transposes read (attention's
  // heads merged back, Transpose [0,2,1,3]): it writes their last output through strides
  // (plan/operand_view.hpp), so no copy kernel runs.
  void absorb_output_view(Group& G, int gi, int n) {
    const Node& mm = g_.nodes[size_t(n)];
    if (!target_.gemm_operand_views || op_id(mm) != OpId::MatMul || G.k.bias >= 0 || G.k.sum >= 0 ||
        !G.k.activation.empty())
      return;
    // The epilogue may have taken Reshapes that keep the last axis: the view starts before them.
    auto mine = [&](int c) {
      return std::find(G.k.nodes.begin(), G.k.nodes.end(), c) != G.k.nodes.end();
    };
    int cur = mm.outputs[0];
    auto take = [&](int c) {
      if ((absorbed_.count(c) && !mine(c)) || sole_consumer(cur) != c) return false;
      cur = g_.nodes[size_t(c)].outputs[0];
      return true;
    };
    OperandView view = output_view(g_, mm.outputs[0], take, target_.gemm_operand_views_16bit);
    for (int c : view.nodes)
      if (!mine(c)) absorb(G, gi, c);
  }

  // Node c joins library kernel gi: its reads are the kernel's, its outputs the kernel's values.
  void absorb(Group& G, int gi, int c) {
    const Node& node = g_.nodes[size_t(c)];
    G.k.nodes.push_back(c);
    note_reads(gi, node);
    absorbed_.insert(c);
    for (int o : node.outputs)
      if (o >= 0) kernel_of_value_[o] = gi;
  }

  // The value of v when it is a one-element float constant.
  std::optional<double> scalar_of(int v) const {
    if (v < 0 || !g_.value(v).constant.defined() || g_.value(v).constant.numel() != 1)
      return std::nullopt;
    return g_.value(v).constant.at_double(0);
  }
  // The input of binary node c other than v, when c is a plain `op` reading v.
  int other_input(int c, int v, OpId op) const {
    if (c < 0) return -2;
    const Node& m = g_.nodes[size_t(c)];
    if (op_id(m) != op || !m.domain.empty() || m.inputs.size() != 2 || m.outputs.size() != 1) return -2;
    if (m.inputs[0] == v && m.inputs[1] != v) return m.inputs[1];
    if (m.inputs[1] == v && m.inputs[0] != v) return m.inputs[0];
    return -2;
  }
  // v is `want` as its type holds it: within 1e-4, or half a 16-bit type's ulp (sqrt(2) is
  // 1.4140625 in bfloat16, the erf GELU's constant in a model stored in 16 bits).
  bool is_scalar(int v, double want) const {
    std::optional<double> x = scalar_of(v);
    const DType t = v >= 0 ? g_.value(v).dtype : DType::f32;
    const double rel = t == DType::bf16 ? 1.0 / 256 : t == DType::f16 ? 1.0 / 2048 : 1e-4;
    return x && std::abs(*x - want) <= rel * std::abs(want);
  }

  // The erf GELU as exporters write it, x * 0.5 * (1 + erf(x / sqrt(2))) in any order of the
  // two products (TorchScript: (x * (1 + erf)) * 0.5; Hugging Face: (x * 0.5) * (1 + erf); the
  // dynamo exporter: x * (0.5 * (1 + erf))), with
  // x / sqrt(2) also as x * (1 / sqrt(2)). Returns its nodes in graph order, last the output's.
  std::vector<int> gelu_erf_nodes(int x) const {
    if (consumers_[x].size() != 2 ||
        std::find(g_.outputs.begin(), g_.outputs.end(), x) != g_.outputs.end())
      return {};
    for (int first = 0; first < 2; ++first) {
      int scale = consumers_[x][size_t(first)], half = consumers_[x][size_t(1 - first)];
      int s = other_input(scale, x, OpId::Div);
      bool ok = s >= 0 ? is_scalar(s, std::sqrt(2.0))
                       : is_scalar(other_input(scale, x, OpId::Mul), std::sqrt(0.5));
      if (!ok) continue;
      int erf = sole_consumer(g_.nodes[size_t(scale)].outputs[0]);
      if (erf < 0 || op_id(g_.nodes[size_t(erf)]) != OpId::Erf || !g_.nodes[size_t(erf)].domain.empty())
        continue;
      int e = g_.nodes[size_t(erf)].outputs[0];
      int plus = sole_consumer(e);
      if (!is_scalar(other_input(plus, e, OpId::Add), 1.0)) continue;
      int p = g_.nodes[size_t(plus)].outputs[0];
      int last = -1;
      if (other_input(half, x, OpId::Mul) == p && sole_consumer(p) == half) {  // (x*(1+erf))*0.5
        int h = g_.nodes[size_t(half)].outputs[0];
        last = sole_consumer(h);
        if (!is_scalar(other_input(last, h, OpId::Mul), 0.5)) continue;
      } else if (is_scalar(other_input(half, x, OpId::Mul), 0.5)) {  // (x * 0.5) * (1 + erf)
        int h = g_.nodes[size_t(half)].outputs[0];
        last = sole_consumer(h);
        if (last < 0 || sole_consumer(p) != last || other_input(last, h, OpId::Mul) != p) continue;
      } else if (int m = sole_consumer(p); is_scalar(other_input(m, p, OpId::Mul), 0.5) &&
                 other_input(half, x, OpId::Mul) == g_.nodes[size_t(m)].outputs[0] &&
                 sole_consumer(g_.nodes[size_t(m)].outputs[0]) == half) {  // x * (0.5 * (1 + erf)): dynamo
        last = half;
        half = m;
      } else {
        continue;
      }
      std::vector<int> nodes = {scale, erf, plus, half, last};
      std::sort(nodes.begin(), nodes.end());
      for (int m : nodes)  // its last scalar Mul may already be a later MatMul's operand view
        if (absorbed_.count(m)) return {};
      return nodes;
    }
    return {};
  }

  // The tanh GELU as GPT-2's exports write it, (x * 0.5) * (1 + tanh(sqrt(2/pi) * (x + 0.044715
  // * x^3))), each product and sum in either operand order. Its nodes in graph order, or none.
  std::vector<int> gelu_tanh_nodes(int x) const {
    if (consumers_[x].size() != 3 ||
        std::find(g_.outputs.begin(), g_.outputs.end(), x) != g_.outputs.end())
      return {};
    int half = -1, pow = -1, plus_x = -1;
    for (int c : consumers_[x]) {
      const Node& m = g_.nodes[size_t(c)];
      if (!m.domain.empty()) return {};
      if (op_id(m) == OpId::Pow && m.inputs.size() == 2 && m.inputs[0] == x && is_scalar(m.inputs[1], 3.0))
        pow = c;
      else if (is_scalar(other_input(c, x, OpId::Mul), 0.5)) half = c;
      else if (other_input(c, x, OpId::Add) >= 0) plus_x = c;
    }
    if (half < 0 || pow < 0 || plus_x < 0) return {};
    int p = g_.nodes[size_t(pow)].outputs[0];
    int cube = sole_consumer(p);  // 0.044715 * x^3
    if (!is_scalar(other_input(cube, p, OpId::Mul), 0.044715)) return {};
    int cu = g_.nodes[size_t(cube)].outputs[0];
    if (other_input(plus_x, x, OpId::Add) != cu || sole_consumer(cu) != plus_x) return {};
    int a = g_.nodes[size_t(plus_x)].outputs[0];
    int inner = sole_consumer(a);  // sqrt(2/pi) * (...)
    if (!is_scalar(other_input(inner, a, OpId::Mul), std::sqrt(2.0 / M_PI))) return {};
    int in = g_.nodes[size_t(inner)].outputs[0];
    int th = sole_consumer(in);
    if (th < 0 || op_id(g_.nodes[size_t(th)]) != OpId::Tanh || !g_.nodes[size_t(th)].domain.empty())
      return {};
    int t = g_.nodes[size_t(th)].outputs[0];
    int one = sole_consumer(t);
    if (!is_scalar(other_input(one, t, OpId::Add), 1.0)) return {};
    int u = g_.nodes[size_t(one)].outputs[0];
    int h = g_.nodes[size_t(half)].outputs[0];
    int last = sole_consumer(u);
    if (last < 0 || sole_consumer(h) != last || other_input(last, u, OpId::Mul) != h) return {};
    std::vector<int> nodes = {half, pow, cube, plus_x, inner, th, one, last};
    std::sort(nodes.begin(), nodes.end());
    for (int m : nodes)
      if (absorbed_.count(m)) return {};
    return nodes;
  }

  // A Reshape that keeps the last axis, read only by the next node: the GEMM's rows as another
  // shape, the same bytes. On targets with operand views the epilogue continues through it.
  bool is_row_reshape(int cur, int c) const {
    if (c < 0 || absorbed_.count(c)) return false;
    const Node& r = g_.nodes[size_t(c)];
    if (op_id(r) != OpId::Reshape || !r.domain.empty() || r.inputs.empty() || r.inputs[0] != cur ||
        r.outputs.size() != 1)
      return false;
    const Shape& to = shape(r.outputs[0]);
    return !to.empty() && !shape(cur).empty() && to.back() == shape(cur).back();
  }
  bool absorb_row_reshape(Group& G, int gi, int* cur, int* c) {
    if (!target_.gemm_operand_views || !is_row_reshape(*cur, *c)) return false;
    const DType t = g_.value(g_.nodes[size_t(*c)].outputs[0]).dtype;
    if (t != DType::f32 && !(target_.gemm_post_ops_16bit && (t == DType::bf16 || t == DType::f16)))
      return false;
    absorb(G, gi, *c);
    *cur = g_.nodes[size_t(*c)].outputs[0];
    *c = sole_consumer(*cur);
    return true;
  }

  // MatMul/Gemm followed by its only consumer Add(bias over the last axis), then (where the
  // target's GEMM takes post-ops) an Add of a same-shape value computed earlier (a residual),
  // then an activation.
  void absorb_epilogue(Group& G, int gi, int n) {
    const Node& mm = g_.nodes[n];
    if (library_of(mm) == LibraryKind::Conv) return absorb_conv_epilogue(G, gi, n);
    if (library_of(mm) != LibraryKind::Gemm) return;
    bool has_c = op_id(mm) == OpId::Gemm && mm.inputs.size() > 2 && mm.inputs[2] >= 0;  // its own bias
    int cur = mm.outputs[0];
    int c = sole_consumer(cur);
    absorb_row_reshape(G, gi, &cur, &c);
    // oneDNN adds the bias before the views' scale (a post-op), so a scaled GEMM takes none.
    if (!has_c && !scaled_gemms_.count(n) && c >= 0 && op_id(g_.nodes[c]) == OpId::Add &&
        g_.nodes[c].domain.empty()) {
      const Node& add = g_.nodes[c];
      int other = add.inputs[0] == cur ? add.inputs[1] : add.inputs[0];
      const Shape& os = shape(other);
      int64_t N = shape(cur).back();
      bool bias_like = g_.value(other).constant.defined() && shape_numel(os) == N &&
                       !os.empty() && os.back() == N && shape(add.outputs[0]) == shape(cur);
      if (bias_like) {
        G.k.bias = other;
        absorb(G, gi, c);
        cur = add.outputs[0];
        c = sole_consumer(cur);
        absorb_row_reshape(G, gi, &cur, &c);
      }
    }
    const bool post_ops = target_.gemm_post_ops;
    if (post_ops) {
      int other = other_input(c, cur, OpId::Add);
      if (other >= 0) {
        const Value& ov = g_.value(other);
        // The sum may share dst's buffer where the GEMM's own inputs do not read it
        // (plan_memory); a strided operand's source counts as one of those inputs.
        bool read = false;
        for (int m : G.k.nodes)
          if (view_nodes_.count(m))
            for (int i : g_.nodes[size_t(m)].inputs) read = read || i == other;
        const bool typed = ov.dtype == DType::f32 ||
                           (target_.gemm_post_ops_16bit && ov.dtype == g_.value(cur).dtype &&
                            (ov.dtype == DType::bf16 || ov.dtype == DType::f16));
        if (!read && typed && ov.shape == shape(cur) &&
            shape(g_.nodes[size_t(c)].outputs[0]) == shape(cur) && ov.producer < n) {
          G.k.sum = other;
          absorb(G, gi, c);
          cur = g_.nodes[size_t(c)].outputs[0];
          c = sole_consumer(cur);
        }
      }
      std::vector<int> gelu = gelu_erf_nodes(cur);
      if (!gelu.empty()) {
        G.k.activation = "gelu_erf";
        for (int m : gelu) absorb(G, gi, m);
        return;
      }
      if (target_.gemm_gelu_tanh) gelu = gelu_tanh_nodes(cur);
      if (!gelu.empty()) {
        G.k.activation = "gelu_tanh";
        for (int m : gelu) absorb(G, gi, m);
        return;
      }
    }
    // A 16-bit result with a bias takes the erf GELU as the library's tanh-form GELU epilogue
    // (Target::gemm_gelu_erf_as_tanh_16bit: the two differ by at most 4.8e-4).
    const DType rt = g_.value(cur).dtype;
    const bool erf_as_tanh = target_.gemm_gelu_erf_as_tanh_16bit &&
                             (G.k.bias >= 0 || has_c || target_.gemm_gelu_without_bias) &&
                             G.k.sum < 0 && (rt == DType::bf16 || rt == DType::f16);
    if (erf_as_tanh && !post_ops) {
      // Also through a Reshape that keeps the rows (GPT-2's Conv1D: a 2-D Gemm, then its 3-D
      // view), which the GEMM's output buffer then holds.
      const int view = target_.gemm_gelu_through_reshape && is_row_reshape(cur, c)
                           ? g_.nodes[size_t(c)].outputs[0] : -1;
      for (int x : {cur, view}) {
        if (x < 0) continue;
        const char* form = "gelu_erf_as_tanh";
        std::vector<int> gelu = gelu_erf_nodes(x);
        if (gelu.empty()) form = "gelu_tanh", gelu = gelu_tanh_nodes(x);  // GPT-2's: the epilogue's own form
        if (gelu.empty()) continue;
        if (x == view) absorb(G, gi, c);
        G.k.activation = form;
        for (int m : gelu) absorb(G, gi, m);
        return;
      }
    }
    if (c < 0 || !g_.nodes[c].domain.empty()) return;
    // The activations every GEMM library takes, and those of post-op targets (oneDNN).
    const Activation a = activation_of(g_.nodes[c]);
    if (a == Activation::Relu || a == Activation::HardSwish || a == Activation::GeluErf ||
        a == Activation::GeluTanh || (post_ops && (a == Activation::Sigmoid || a == Activation::Tanh)))
      G.k.activation = a == Activation::GeluErf && erf_as_tanh ? "gelu_erf_as_tanh" : activation_name(a);
    else return;
    absorb(G, gi, c);
  }

  // The node whose outputs a kernel ends with: the last one, or for a library GEMM without an
  // epilogue the GEMM itself (its operand views follow it in k.nodes).
  int last_computed(const Kernel& k) const {
    for (auto it = k.nodes.rbegin(); it != k.nodes.rend(); ++it)
      if (!view_nodes_.count(*it)) return *it;
    return k.nodes[0];
  }

  Plan finish() {
    Plan p;
    p.fusion_enabled = opts_.enable;
    std::set<int> graph_out(g_.outputs.begin(), g_.outputs.end());
    // Kernels run in a topological order of their reads (a node may have joined an older
    // kernel, so creation order is not always valid); ties keep creation order.
    std::vector<int> order, pending(groups_.size(), 0), pos(groups_.size(), -1);
    std::vector<std::vector<int>> readers(groups_.size());
    for (size_t gi = 0; gi < groups_.size(); ++gi)
      for (int r : reads_[gi]) {
        pending[gi]++;
        readers[size_t(r)].push_back(int(gi));
      }
    std::set<int> ready;
    for (size_t gi = 0; gi < groups_.size(); ++gi)
      if (!pending[gi]) ready.insert(int(gi));
    while (!ready.empty()) {
      int k = *ready.begin();
      ready.erase(ready.begin());
      pos[size_t(k)] = int(order.size());
      order.push_back(k);
      for (int u : readers[size_t(k)])
        if (--pending[size_t(u)] == 0) ready.insert(u);
    }
    BRRR_ASSERT(order.size() == groups_.size(), "cycle between kernels");
    std::vector<int> kernel_of_node(g_.nodes.size(), -1);
    for (size_t gi = 0; gi < groups_.size(); ++gi)
      for (int n : groups_[gi].k.nodes) kernel_of_node[n] = int(gi);
    for (int gi : order) {
      Group& G = groups_[size_t(gi)];
      Kernel& k = G.k;
      std::set<int> ins, outs;
      if (k.kind == KernelKind::Fused) {
        // Store every value used outside the kernel; views get a load first.
        for (auto& [v, kv] : G.vals) {
          bool outside = graph_out.count(v) != 0;
          for (int c : consumers_[v])
            if (kernel_of_node[c] != int(gi)) outside = true;
          if (!outside) continue;
          if (kv.expr < 0) kv.expr = load(G, v, shape(v));
          k.stores.push_back({kv.expr, v});
          outs.insert(v);
        }
        for (const Expr& e : k.exprs)
          if (e.kind == Expr::Load) ins.insert(e.value);
      } else {
        for (int n : k.nodes) {
          for (int i : g_.nodes[n].inputs)
            if (i >= 0 && kernel_of_value_[i] != int(gi)) ins.insert(i);
          for (int o : g_.nodes[n].outputs)
            if (o >= 0) outs.insert(o);
        }
        if (k.kind == KernelKind::Copy) ins = {g_.nodes[k.nodes[0]].inputs[0]};
        if (k.kind == KernelKind::Library) {  // epilogue intermediates are never materialized
          outs.clear();
          for (int o : g_.nodes[size_t(last_computed(k))].outputs)
            if (o >= 0) outs.insert(o);
        }
      }
      k.inputs.assign(ins.begin(), ins.end());
      k.outputs.assign(outs.begin(), outs.end());
      if (target_.device && k.kind == KernelKind::Reference)
        k.host = G.why.empty() ? g_.nodes[k.nodes[0]].op + " has no generated or library kernel"
                               : G.why;
      std::string ops;
      const Node& first = g_.nodes[k.nodes[0]];
      std::string tag = first.op;
      if (last_computed(k) != k.nodes[0]) tag += "_" + g_.nodes[size_t(last_computed(k))].op;
      if (desc_of<AttentionDesc>(k)) tag = "attention";
      for (char& ch : tag) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      k.name = fmt::format("k{}_{}", p.kernels.size(), tag);  // op names come from the op table, not the model
      p.kernels.push_back(std::move(k));
    }
    // Boundaries: every value that crosses from one kernel to another.
    for (size_t n = 0; n < g_.nodes.size(); ++n)
      for (int i : g_.nodes[n].inputs) {
        if (i < 0 || kernel_of_value_[i] < 0) continue;
        int from = kernel_of_value_[i], to = kernel_of_node[n];
        if (from == to) continue;
        Boundary b{i, pos[size_t(from)], pos[size_t(to)], ""};
        auto it = refusals_.find({i, int(n)});
        std::string why;
        if (it != refusals_.end()) why = it->second;
        else if (groups_[size_t(from)].k.kind != KernelKind::Fused)
          why = fmt::format("{} runs as a {} kernel", g_.value(i).producer >= 0
                                                          ? g_.nodes[size_t(g_.value(i).producer)].op
                                                          : "producer",
                            kernel_kind_name(groups_[size_t(from)].k.kind));
        else why = "consumer placed in another kernel";
        b.reason = "not fused: " + why;
        if (consumers_[i].size() > 1)
          b.reason += fmt::format(" (output used by {} consumers)", consumers_[i].size());
        p.boundaries.push_back(std::move(b));
      }
    return p;
  }
};

// A Gather the target's gather kernel takes (element of 1, 2, 4 or 8 bytes, int32 or int64
// indices, a valid descriptor) becomes a Library kernel; "" when it does, else why not.
std::string device_gather(const Graph& g, const Kernel& k) {
  const GatherDesc* d = desc_of<GatherDesc>(k);
  if (!d) return "";  // not a Gather
  if (!d->why.empty()) return d->why;
  const Value& iv = g.value(d->indices);
  if (iv.dtype != DType::i64 && iv.dtype != DType::i32)
    return fmt::format("Gather indices are {} (the device's gather kernel takes int64 or int32)",
                       dtype_name(iv.dtype));
  const size_t es = dtype_size(g.value(d->x).dtype);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return fmt::format("Gather of {} elements", dtype_name(g.value(d->x).dtype));
  return "";
}

}  // namespace

Plan build_plan(const Graph& g, const FusionOptions& opts, const Target& target) {
  Plan p = Fuser(g, opts, target).run();
  describe_library(g, p, target.gemm_operand_views_16bit);  // the library calls' typed descriptors, read once from the attributes
  if (target.library_gather)
    for (size_t i = 0; i < p.kernels.size(); ++i) {
      Kernel& k = p.kernels[i];
      if (k.kind != KernelKind::Reference || !desc_of<GatherDesc>(k)) continue;
      std::string why = device_gather(g, k);
      if (!why.empty()) {
        if (target.device) k.host = why;  // a host kernel's reason: device targets only
        continue;
      }
      k.kind = KernelKind::Library;
      k.host.clear();
      // The boundaries the fuser wrote for the reference kernel it planned.
      const std::string was = " runs as a reference kernel", is = " runs as a library kernel";
      for (Boundary& b : p.boundaries)
        if (b.from_kernel == int(i))
          if (size_t at = b.reason.find(was); at != std::string::npos) b.reason.replace(at, was.size(), is);
    }
  return p;
}

}  // namespace brrr::plan
