// Ops that only reinterpret or permute dims: Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
// DepthToSpace, SpaceToDepth. Kernels are one strided copy of a view of the input.
#include "ops/movement_util.hpp"

namespace brrr::ops {

namespace {

void copy_kernel(KernelCtx& k) {
  copy_view(k.inputs[0], k.outputs[0]);
}

void infer_reshape(InferCtx& c) {
  const Shape& in = c.in_shape(0);
  std::vector<int64_t> spec;
  if (c.node.has_attr("shape")) {  // Reshape-1
    spec = c.node.attr_ints("shape");
  } else {
    require_int_input(c, 1, "shape");
    if (c.in_rank(1) != 1) c.fail("the shape input must be 1-D");
    spec = int_values(c.require_const(1, "shape"));
  }
  bool allowzero = c.node.attr_int("allowzero", 0) != 0;
  Shape out(spec.size());
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t v = spec[i];
    if (v == -1) {
      if (infer_at >= 0) c.fail("shape {} has more than one -1", shape_str(spec));
      infer_at = int(i);
      continue;
    }
    if (v == 0 && !allowzero) {
      if (i >= in.size())
        c.fail("shape {}: 0 at position {} has no input dim to copy", shape_str(spec), i);
      v = in[i];
    } else if (v < 0) {
      c.fail("shape {} has the negative dim {}", shape_str(spec), v);
    }
    out[i] = v;
    known = mul_dims(c, known, v);
  }
  int64_t total = shape_numel(in);
  if (infer_at >= 0) {
    if (known == 0)
      c.fail("shape {}: -1 cannot be inferred when the other dims multiply to 0", shape_str(spec));
    if (total % known != 0) c.fail("cannot reshape {} elements to {}", total, shape_str(spec));
    out[size_t(infer_at)] = total / known;
  } else if (known != total) {
    c.fail("cannot reshape {} ({} elements) to {} ({} elements)", shape_str(in), total,
           shape_str(out), known);
  }
  c.set_output(0, c.in_dtype(0), out);
}

void infer_flatten(InferCtx& c) {
  const Shape& in = c.in_shape(0);
  int64_t r = int64_t(in.size());
  int64_t a = c.node.attr_int("axis", 1);
  if (a < -r || a > r) c.fail("axis {} is out of range [{}, {}]", a, -r, r);
  if (a < 0) a += r;
  Shape lo(in.begin(), in.begin() + a), hi(in.begin() + a, in.end());
  c.set_output(0, c.in_dtype(0), {shape_numel(lo), shape_numel(hi)});
}

std::vector<int64_t> transpose_perm(const Node& n, int r) {
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (!n.has_attr("perm"))
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  return perm;
}

void infer_transpose(InferCtx& c) {
  const Shape& in = c.in_shape(0);
  int r = c.in_rank(0);
  std::vector<int64_t> perm = transpose_perm(c.node, r);
  if (int(perm.size()) != r)
    c.fail("perm {} has length {} but the input has rank {}", shape_str(perm), perm.size(), r);
  std::vector<bool> seen(size_t(r), false);
  Shape out(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) {
    int64_t p = perm[size_t(i)];
    if (p < 0 || p >= r || seen[size_t(p)])
      c.fail("perm {} is not a permutation of 0..{}", shape_str(perm), r - 1);
    seen[size_t(p)] = true;
    out[size_t(i)] = in[size_t(p)];
  }
  c.set_output(0, c.in_dtype(0), out);
}

void infer_squeeze(InferCtx& c) {
  const Shape& in = c.in_shape(0);
  int64_t r = int64_t(in.size());
  auto axes = ints_attr_or_input(c, "axes", 1, "axes");
  std::vector<bool> drop(in.size(), false);
  if (!axes) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  } else {
    for (int64_t a : normalize_axes(c, *axes, r)) {
      if (in[size_t(a)] != 1) c.fail("cannot squeeze axis {} of size {}", a, in[size_t(a)]);
      drop[size_t(a)] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  c.set_output(0, c.in_dtype(0), out);
}

void infer_unsqueeze(InferCtx& c) {
  const Shape& in = c.in_shape(0);
  auto axes = ints_attr_or_input(c, "axes", 1, "axes");
  if (!axes) c.fail("Unsqueeze needs axes");
  int64_t r = int64_t(in.size() + axes->size());
  std::vector<bool> ins(size_t(r), false);
  for (int64_t a : normalize_axes(c, *axes, r)) ins[size_t(a)] = true;
  Shape out;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(ins[size_t(i)] ? 1 : in[j++]);
  c.set_output(0, c.in_dtype(0), out);
}

int64_t blocksize(const InferCtx& c) {
  int64_t b = c.node.attr_int("blocksize", 0);
  if (b <= 0) c.fail("blocksize must be positive, got {}", b);
  if (c.in_rank(0) != 4) c.fail("input must be 4-D (N, C, H, W)");
  return b;
}

void infer_depth_to_space(InferCtx& c) {
  int64_t b = blocksize(c);
  std::string mode = c.node.attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") c.fail("unknown mode '{}'", mode);
  const Shape& s = c.in_shape(0);
  int64_t bb = mul_dims(c, b, b);
  if (s[1] % bb != 0) c.fail("channels {} are not divisible by blocksize^2 = {}", s[1], bb);
  c.set_output(0, c.in_dtype(0), {s[0], s[1] / bb, mul_dims(c, s[2], b), mul_dims(c, s[3], b)});
}

void depth_to_space(KernelCtx& k) {
  const Tensor& x = k.inputs[0];
  int64_t b = k.node.attr_int("blocksize", 1);
  int64_t n = x.dim(0), ch = x.dim(1) / (b * b), h = x.dim(2), w = x.dim(3);
  Tensor v = k.node.attr_string("mode", "DCR") == "DCR"
                 ? x.reshape({n, b, b, ch, h, w}).permute({0, 3, 4, 1, 5, 2})
                 : x.reshape({n, ch, b, b, h, w}).permute({0, 1, 4, 2, 5, 3});
  copy_view(v, k.outputs[0]);
}

void infer_space_to_depth(InferCtx& c) {
  int64_t b = blocksize(c);
  std::string mode = c.node.attr_string("mode", "DCR");  // mode: SpaceToDepth-28
  if (mode != "DCR" && mode != "CRD") c.fail("unknown mode '{}'", mode);
  const Shape& s = c.in_shape(0);
  if (s[2] % b != 0 || s[3] % b != 0)
    c.fail("spatial dims {}x{} are not divisible by blocksize {}", s[2], s[3], b);
  c.set_output(0, c.in_dtype(0), {s[0], mul_dims(c, s[1], mul_dims(c, b, b)), s[2] / b, s[3] / b});
}

void space_to_depth(KernelCtx& k) {
  const Tensor& x = k.inputs[0];
  int64_t b = k.node.attr_int("blocksize", 1);
  int64_t n = x.dim(0), ch = x.dim(1), h = x.dim(2) / b, w = x.dim(3) / b;
  Tensor v = x.reshape({n, ch, h, b, w, b});
  v = k.node.attr_string("mode", "DCR") == "DCR" ? v.permute({0, 3, 5, 1, 2, 4})
                                                 : v.permute({0, 1, 3, 5, 2, 4});
  copy_view(v, k.outputs[0]);
}

}  // namespace

void register_reshape_ops(OpTable& t) {
  using Infer = void (*)(InferCtx&);
  const std::pair<const char*, Infer> copies[] = {{"Reshape", infer_reshape}, {"Flatten", infer_flatten},
                                                  {"Squeeze", infer_squeeze},
                                                  {"Unsqueeze", infer_unsqueeze}};
  for (const auto& [name, infer] : copies) {
    OpDef d = movement_op(name, infer, copy_kernel);
    d.lowering = Lowering::Copy;  // the same elements: an alias or a copy, never arithmetic
    // Flatten is left out as before: GEMM operand views were written for exporters' Reshapes.
    if (std::string_view(name) != "Flatten") d.view = ViewKind::Reshape;
    t.add(std::move(d));
  }
  OpDef tr = movement_op("Transpose", infer_transpose, [](KernelCtx& k) {
    copy_view(k.inputs[0].permute(transpose_perm(k.node, k.inputs[0].rank())), k.outputs[0]);
  });
  tr.lowering = Lowering::View;  // strides of the loads that read it inside a fused kernel
  tr.view = ViewKind::Permute;
  t.add(std::move(tr));
  t.add(movement_op("DepthToSpace", infer_depth_to_space, depth_to_space));
  t.add(movement_op("SpaceToDepth", infer_space_to_depth, space_to_depth));
}

}  // namespace brrr::ops
