// The describe_library pass: every Library kernel gets its typed descriptor
// (plan/library_desc.hpp), read once from its node's ONNX attributes and the shapes around it, so
// that no backend reads an attribute. Runs at plan time; nothing here is on the run path.
#include <fmt/format.h>

#include <algorithm>

#include "plan/library_desc.hpp"
#include "plan/operand_view.hpp"

namespace brrr::plan {

namespace {

int input_or_none(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : -1; }

// Transpose t swaps the last two of its input's `rank` axes and keeps the others.
bool swaps_last_two(const Node& t, size_t rank) {
  std::vector<int64_t> perm;
  try {
    perm = t.attr_ints("perm", {});
  } catch (const Error&) {
    return false;
  }
  if (perm.empty() && rank == 2) return true;  // the default reverses the axes
  if (rank < 2 || perm.size() != rank) return false;
  for (size_t i = 0; i < rank; ++i)
    if (perm[i] != int64_t(i < rank - 2 ? i : (i == rank - 1 ? rank - 2 : rank - 1))) return false;
  return true;
}

// The fusion pass's epilogue of kernel k.
Epilogue epilogue_of(const Kernel& k) {
  Epilogue e;
  e.bias = k.bias;
  e.sum = k.sum;
  // A 16-bit CUDA GEMM's erf GELU runs as the library's tanh form (fusion.cpp,
  // Target::gemm_gelu_erf_as_tanh_16bit); the name keeps what the model asked for.
  e.act = k.activation == "gelu_erf_as_tanh" ? Activation::GeluTanh
                                               : activation_from_name(k.activation);
  e.alpha = k.act_alpha;
  e.beta = k.act_beta;
  e.act_name = k.activation;
  return e;
}

GemmDesc describe_gemm(const Graph& g, const Node& n, const Kernel& k, bool views_16bit) {
  GemmDesc d;
  d.a = input_or_none(n, 0), d.b = input_or_none(n, 1);
  d.out = k.outputs.empty() ? -1 : k.outputs[0];
  d.epi = epilogue_of(k);
  if (d.a < 0 || d.b < 0 || d.out < 0) {
    d.why = n.op + " without A, B or an output";
    return d;
  }
  if (op_id(n) == OpId::Gemm) {
    d.trans_a = n.attr_int("transA", 0) != 0;
    d.trans_b = n.attr_int("transB", 0) != 0;
    d.alpha = n.attr_float("alpha", 1.0f);
    d.beta = n.attr_float("beta", 1.0f);
    d.c = input_or_none(n, 2);
  }
  // An operand made by a Transpose of its last two axes in the kernel is its input read
  // transposed; one in a longer view (its input made in the kernel too), or of other axes, is
  // read through the view's strides below.
  auto in_kernel = [&](int m) {
    return std::find(k.nodes.begin(), k.nodes.end(), m) != k.nodes.end();
  };
  for (int m : k.nodes) {
    const Node& t = g.nodes[size_t(m)];
    if (op_id(t) != OpId::Transpose || t.outputs.empty() || t.inputs.empty() || t.inputs[0] < 0) continue;
    if (in_kernel(g.value(t.inputs[0]).producer) || !swaps_last_two(t, g.value(t.inputs[0]).shape.size()))
      continue;
    if (t.outputs[0] == d.a) d.a = t.inputs[0], d.trans_a = !d.trans_a;
    else if (t.outputs[0] == d.b) d.b = t.inputs[0], d.trans_b = !d.trans_b;
  }
  // A MatMul operand made by other view nodes in the kernel (Reshape, Transpose, a scalar Mul:
  // the fusion pass's find_operand_views) is its source read through strides.
  if (library_of(n) == LibraryKind::Gemm) {  // a Gemm's: Reshapes alone (row-major)
    double scale = 1;
    for (int slot = 0; slot < 2; ++slot) {
      int& v = slot == 0 ? d.a : d.b;
      if (v != n.inputs[size_t(slot)]) continue;  // read through a last-two-axes swap above
      OperandView view = operand_view(g, v, in_kernel, views_16bit);
      if (view.nodes.empty()) continue;
      v = view.source;
      (slot == 0 ? d.a_dims : d.b_dims) = view.dims;
      (slot == 0 ? d.a_strides : d.b_strides) = view.strides;
      (slot == 0 ? d.a_offset : d.b_offset) = view.offset;
      scale *= view.scale;
    }
    d.scale = float(scale);
  }
  // A result written through the Reshapes and Transposes after the GEMM (output_view), or a
  // Reshape in the epilogue that keeps the last axis (the same bytes under another shape): the
  // library computes the node's own shape.
  bool reshaped = false;
  for (int m : k.nodes)
    reshaped = reshaped || (m > k.nodes[0] && op_id(g.nodes[size_t(m)]) == OpId::Reshape);
  OperandView out = output_view(g, n.outputs[0], in_kernel, views_16bit);
  const bool out_viewed = !out.nodes.empty() && out.source == d.out;
  if (out_viewed) {
    d.out_dims = out.dims;
    d.out_strides = out.strides;
  } else if (reshaped) {
    d.out_dims = g.value(n.outputs[0]).shape;
  }
  if (!is_row_major(d.out_dims, d.out_strides) &&
      (d.epi.bias >= 0 || d.epi.sum >= 0 || d.epi.act != Activation::None))
    d.why = n.op + " with an epilogue and a strided result";
  // The library adds its bias before any post-op scale (the fusion pass keeps them apart).
  if (d.scale != 1.0f && d.epi.bias >= 0) d.why = n.op + " with a scaled operand and a bias";
  // A row-keeping Reshape alone leaves the result's bytes where a plain GEMM writes them.
  const bool viewed = !d.a_dims.empty() || !d.b_dims.empty() || out_viewed;
  const Shape &as = g.value(d.a).shape, &bs = g.value(d.b).shape, &os = g.value(d.out).shape;
  if (d.alpha != 1.0f) d.why = "Gemm alpha != 1";
  if (d.c >= 0) {  // Gemm's C is a bias only as one value per output column, added once
    const Shape& cs = g.value(d.c).shape;
    bool row = !cs.empty() && !os.empty() && shape_numel(cs) == os.back() && cs.back() == os.back();
    if (d.beta != 1.0f || !row) d.why = "Gemm C is not a bias row (beta 1, one value per column)";
    d.epi.bias = d.c;
  }
  if (viewed) {
    d.strided_why = n.op + " read or written through a view";
    return d;
  }
  if (as.size() < 2 || bs.size() < 2) {
    d.strided_why = "MatMul on vectors";
    return d;
  }
  const size_t ra = as.size(), rb = bs.size();
  d.K = d.trans_a ? as[ra - 2] : as[ra - 1];
  if (d.K <= 0 || shape_numel(as) == 0) {
    d.strided_why = "GEMM with no elements";
    return d;
  }
  if (rb == 2 && d.trans_a && ra > 2) {
    d.strided_why = "batched MatMul with a transposed A";
    return d;
  }
  if (rb == 2) {  // a shared B: A's batch dims fold into M
    d.M = shape_numel(as) / d.K;
    d.N = d.trans_b ? bs[0] : bs[1];
  } else if (ra == rb && std::equal(as.begin(), as.end() - 2, bs.begin())) {
    d.M = d.trans_a ? as[ra - 1] : as[ra - 2];
    d.N = d.trans_b ? bs[rb - 2] : bs[rb - 1];
    d.batch = shape_numel(as) / (d.M * d.K);
  } else {
    d.strided_why = "batched MatMul with broadcast batch dims";
    return d;
  }
  d.stride_a = d.M * d.K;
  d.stride_b = rb == 2 ? 0 : d.K * d.N;
  d.stride_c = d.M * d.N;
  return d;
}

ConcatDesc describe_concat(const Graph& g, const Node& n) {
  ConcatDesc d;
  d.out = n.outputs.empty() ? -1 : n.outputs[0];
  d.inputs = n.inputs;
  if (d.out < 0) {
    d.why = "Concat without an output";
    return d;
  }
  const Shape& ys = g.value(d.out).shape;
  const int64_t rank = int64_t(ys.size());
  d.axis = n.attr_int("axis", 0);
  if (d.axis < 0) d.axis += rank;
  if (d.axis < 0 || d.axis >= rank) d.why = fmt::format("Concat axis out of range for {}", shape_str(ys));
  else if (std::find(d.inputs.begin(), d.inputs.end(), -1) != d.inputs.end())
    d.why = "Concat with a missing input";
  return d;
}

RowReduceDesc describe_row_reduce(const Graph& g, const Node& n) {
  RowReduceDesc d;
  d.x = input_or_none(n, 0);
  d.y = n.outputs.empty() ? -1 : n.outputs[0];
  if (d.x < 0 || d.y < 0) {
    d.why = n.op + " without an input or output";
    return d;
  }
  const Shape &xs = g.value(d.x).shape, &ys = g.value(d.y).shape;
  const int64_t numel = shape_numel(xs);
  d.rows = shape_numel(ys);
  if (d.rows <= 0 || numel <= 0 || numel % d.rows) {
    d.why = fmt::format("{} from {} to {} is not a reduction over trailing axes", n.op,
                        shape_str(xs), shape_str(ys));
    return d;
  }
  if (library_of(n) == LibraryKind::GlobalMean && xs.size() < 3) {
    d.why = "GlobalAveragePool on an input without spatial dims";
    return d;
  }
  d.cols = numel / d.rows;
  d.scale = def_of(n)->reduce == ReduceKind::Sum ? 1.f : 1.f / float(d.cols);  // else a mean
  return d;
}

ChannelScaleDesc describe_channel_scale(const Graph& g, const Node& n) {
  ChannelScaleDesc d;
  d.y = n.outputs.empty() ? -1 : n.outputs[0];
  if (n.inputs.size() != 2 || n.inputs[0] < 0 || n.inputs[1] < 0 || d.y < 0) {
    d.why = "Mul without two inputs";
    return d;
  }
  const Shape& ys = g.value(d.y).shape;
  d.x = n.inputs[0], d.s = n.inputs[1];
  if (g.value(d.x).shape != ys) std::swap(d.x, d.s);
  const Shape& xs = g.value(d.x).shape;
  if (xs != ys || xs.size() != 4 || g.value(d.s).shape != Shape{xs[0], xs[1], 1, 1}) {
    d.why = "Mul is not a channel scale x[N,C,H,W] * s[N,C,1,1]";
    return d;
  }
  d.images = xs[0], d.channels = xs[1], d.pixels = xs[2] * xs[3];
  return d;
}

GatherDesc describe_gather(const Graph& g, const Node& n) {
  GatherDesc d;
  d.y = n.outputs.empty() ? -1 : n.outputs[0];
  if (n.inputs.size() != 2 || n.inputs[0] < 0 || n.inputs[1] < 0 || d.y < 0) {
    d.why = "Gather without data or indices";
    return d;
  }
  d.x = n.inputs[0], d.indices = n.inputs[1];
  const Shape& xs = g.value(d.x).shape;
  const int64_t rank = int64_t(xs.size());
  d.axis = n.attr_int("axis", 0);
  if (d.axis < 0) d.axis += rank;
  if (rank == 0 || d.axis < 0 || d.axis >= rank) {
    d.why = "Gather axis out of range";
    return d;
  }
  for (int64_t i = 0; i < d.axis; ++i) d.outer *= xs[size_t(i)];
  for (int64_t i = d.axis + 1; i < rank; ++i) d.inner *= xs[size_t(i)];
  d.axis_len = xs[size_t(d.axis)];
  return d;
}

SplitDesc describe_split(const Graph& g, const Node& n) {
  SplitDesc d;
  d.x = input_or_none(n, 0);
  d.outputs = n.outputs;
  if (d.x < 0 || n.outputs.empty()) {
    d.why = "Split without an input or outputs";
    return d;
  }
  const Shape& xs = g.value(d.x).shape;
  const int64_t rank = int64_t(xs.size());
  d.axis = n.attr_int("axis", 0);
  if (d.axis < 0) d.axis += rank;
  if (d.axis < 0 || d.axis >= rank) {
    d.why = "Split axis out of range";
    return d;
  }
  // The shares of an omitted output: what the present ones leave (at most one may be omitted).
  int64_t known = 0, omitted = 0;
  for (int o : n.outputs) {
    if (o >= 0) known += g.value(o).shape[size_t(d.axis)];
    else ++omitted;
  }
  if (omitted > 1) {
    d.why = "Split with more than one omitted output";
    return d;
  }
  for (int o : n.outputs)
    d.sizes.push_back(o >= 0 ? g.value(o).shape[size_t(d.axis)] : xs[size_t(d.axis)] - known);
  if (!omitted && known != xs[size_t(d.axis)]) d.why = "Split outputs do not add up to the input";
  return d;
}

// A Conv kernel: the window from the shapes, the fusion pass's epilogue, and its own bias.
ConvDesc describe_conv_kernel(const Graph& g, const Node& n, const Kernel& k) {
  ConvDesc d;
  const int x = input_or_none(n, 0), w = input_or_none(n, 1);
  if (x < 0 || w < 0 || n.outputs.empty() || k.outputs.empty()) {
    d.why = "Conv without X or W";
  } else {
    d = describe_conv(n, g.value(x).shape, g.value(w).shape);
    d.x = x, d.w = w, d.y = n.outputs[0], d.out = k.outputs[0];
  }
  d.epi = epilogue_of(k);
  const int b = input_or_none(n, 2);
  if (b >= 0 && k.bias >= 0 && d.why.empty()) d.why = "Conv with its own bias and a fused one";
  if (b >= 0) d.epi.bias = b;
  return d;
}

// The descriptor of kernel k, by the library kind of its first node's op (OpDef::library).
LibraryDesc describe_kernel(const Graph& g, const Kernel& k, bool views_16bit) {
  const Node& n = g.nodes[size_t(k.nodes[0])];
  const LibraryKind lib = library_of(n);
  if (k.kind == KernelKind::Reference)
    return k.nodes.size() == 1 && lib == LibraryKind::Gather ? LibraryDesc(describe_gather(g, n))
                                                             : LibraryDesc();
  switch (lib) {
    case LibraryKind::Gemm: return describe_gemm(g, n, k, views_16bit);
    case LibraryKind::Conv: return describe_conv_kernel(g, n, k);
    case LibraryKind::Pool: return describe_pool(g, n);
    case LibraryKind::Concat: return describe_concat(g, n);
    case LibraryKind::GlobalMean:
    case LibraryKind::TrailingReduce: return describe_row_reduce(g, n);
    case LibraryKind::ChannelScale: return describe_channel_scale(g, n);
    case LibraryKind::Split: return describe_split(g, n);
    case LibraryKind::Gather:
    case LibraryKind::None: break;
  }
  return LibraryDesc();
}

}  // namespace

ConvDesc describe_conv(const Node& n, const Shape& xs, const Shape& ws) {
  ConvDesc d;
  try {
    d.groups = n.attr_int("group", 1);
    if (xs.size() < 3 || ws.size() != xs.size()) {
      d.why = fmt::format("Conv on input {} with weights {}", shape_str(xs), shape_str(ws));
      return d;
    }
    d.window = ops::forward_window(n, {xs.begin() + 2, xs.end()}, {ws.begin() + 2, ws.end()}, false);
  } catch (const Error& e) {
    d.why = std::string("Conv window: ") + e.what();
  }
  return d;
}

PoolDesc describe_pool(const Graph& g, const Node& n) {
  PoolDesc d;
  d.max = def_of(n) && def_of(n)->reduce == ReduceKind::Max;
  d.x = input_or_none(n, 0);
  d.y = n.outputs.empty() ? -1 : n.outputs[0];
  d.indices_used = d.max && n.outputs.size() > 1 && n.outputs[1] >= 0;
  try {
    d.storage_order = n.attr_int("storage_order", 0);
    d.ceil_mode = n.attr_int("ceil_mode", 0) != 0;
    d.include_pad = !d.max && n.attr_int("count_include_pad", 0) != 0;
    if (d.x < 0 || d.y < 0) {
      d.why = n.op + " without X or Y";
      return d;
    }
    const Shape& xs = g.value(d.x).shape;
    std::vector<int64_t> k = n.attr_ints("kernel_shape", {});
    if (xs.size() < 3 || k.size() != xs.size() - 2) {
      d.why = "kernel_shape does not match the input's spatial dims";
      return d;
    }
    d.window = ops::forward_window(n, {xs.begin() + 2, xs.end()}, k, d.ceil_mode);
  } catch (const Error& e) {
    d.why = n.op + " window: " + e.what();
  }
  return d;
}

void describe_library(const Graph& g, Plan& plan, bool views_16bit) {
  for (Kernel& k : plan.kernels) {
    if ((k.kind != KernelKind::Library && k.kind != KernelKind::Reference) || k.nodes.empty())
      continue;
    if (k.lib) continue;  // made by the fusion pass with the kernel (attention)
    LibraryDesc d;
    try {
      d = describe_kernel(g, k, views_16bit);
    } catch (const Error&) {  // an attribute of the wrong type: no library call
      d = LibraryDesc();
    }
    if (d.index() != 0) k.lib = std::make_shared<const LibraryDesc>(std::move(d));
  }
}

}  // namespace brrr::plan
