// A Conv whose kernel tiles its input (strides equal to the kernel, no padding, no dilation, one
// group: ViT's patch embedding, 16x16 patches of a 224x224 image) is a GEMM on the patches: x
// [N, C, H, W] -> [N, OH, kh, ... ] patches [N*OH*OW, C*kh*kw] (one transpose) times the weight
// as [C*kh*kw, OC], plus the bias. cuDNN ran ViT-B/16's bf16 patch conv in 93 us at batch 1 and
// 272 us at batch 32 on the H200 (0.2 and 27 TFLOP/s), a GEMM of that size takes a few.
// The product comes out channels-last, [N, OH, OW, OC]; where the conv's only reader is ViT's
// own Reshape to [N, OC, OH*OW] and Transpose to [N, OH*OW, OC], that pair becomes one Reshape of
// the product; elsewhere a Transpose back to [N, OC, OH, OW] writes the conv's output.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

namespace {

constexpr const char* kPass = "patchify_convs";

// The conv's patch size {kh, kw} when node c is such a Conv over typed float data with a constant
// weight (and bias), else {0, 0}.
std::pair<int64_t, int64_t> patch_of(const Graph& g, const Node& c) {
  const std::pair<int64_t, int64_t> no{0, 0};
  if (op_id(c) != OpId::Conv || !c.domain.empty() || c.inputs.size() < 2 || c.outputs.size() != 1)
    return no;
  const int x = c.inputs[0], w = c.inputs[1], b = c.inputs.size() > 2 ? c.inputs[2] : -1;
  if (x < 0 || w < 0 || !g.value(x).typed || !g.value(w).constant.defined()) return no;
  if (b >= 0 && !g.value(b).constant.defined()) return no;
  const Shape& xs = g.value(x).shape;
  const Shape& ws = g.value(w).shape;
  const DType dt = g.value(x).dtype;
  if (xs.size() != 4 || ws.size() != 4 || g.value(w).dtype != dt ||
      (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16))
    return no;
  if (b >= 0 && (g.value(b).dtype != dt || g.value(b).shape != Shape{ws[0]})) return no;
  const int64_t kh = ws[2], kw = ws[3];
  if (kh * kw < 2 || ws[1] != xs[1] || xs[2] % kh != 0 || xs[3] % kw != 0 || xs[0] < 1) return no;
  try {
    if (c.attr_int("group", 1) != 1) return no;
    const std::string pad = c.attr_string("auto_pad", "NOTSET");
    if (pad != "NOTSET" && pad != "VALID") return no;
    const std::vector<int64_t> k = c.attr_ints("kernel_shape", {kh, kw});
    const std::vector<int64_t> s = c.attr_ints("strides", {1, 1});
    const std::vector<int64_t> p = c.attr_ints("pads", {0, 0, 0, 0});
    const std::vector<int64_t> d = c.attr_ints("dilations", {1, 1});
    if (k != std::vector<int64_t>{kh, kw} || s != k || d != std::vector<int64_t>{1, 1} ||
        std::any_of(p.begin(), p.end(), [](int64_t v) { return v != 0; }))
      return no;
  } catch (const Error&) {
    return no;
  }
  return {kh, kw};
}

// W [OC, C, kh, kw] as the GEMM's B, [C*kh*kw, OC].
Tensor patch_weight(const Tensor& w) {
  Tensor src = w.contiguous();
  const int64_t oc = src.shape()[0], ck = src.numel() / oc;
  Tensor out = Tensor::empty(src.dtype(), {ck, oc});
  const size_t es = dtype_size(src.dtype());
  const char* s = static_cast<const char*>(src.raw());
  char* d = static_cast<char*>(out.raw());
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t i = 0; i < ck; ++i) std::memcpy(d + size_t(i * oc + o) * es, s + size_t(o * ck + i) * es, es);
  return out;
}

}  // namespace

bool patchify_convs(Graph& g) {
  const std::vector<std::vector<int>> readers = value_readers(g);
  std::vector<std::vector<Node>> replace(g.nodes.size());
  std::vector<bool> rewritten(g.nodes.size(), false);
  std::set<int> drop;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const auto [kh, kw] = patch_of(g, g.nodes[k]);
    if (kh == 0) continue;
    const Node c = g.nodes[k];
    const int x = c.inputs[0], y = c.outputs[0];
    const Shape xs = g.value(x).shape, ys = g.value(y).shape;
    const int64_t n = xs[0], ch = xs[1], oh = xs[2] / kh, ow = xs[3] / kw;
    const int64_t oc = g.value(c.inputs[1]).shape[0];
    if (ys != Shape{n, oc, oh, ow}) continue;
    const std::string base = fresh_name(g, (c.name.empty() ? std::string("conv") : c.name) + "/patches");
    auto shape = [&](const std::string& what, std::vector<int64_t> v) {
      return int64_constant(g, base + "/" + what, std::move(v));
    };
    std::vector<Node>& out = replace[k];
    // Patches: [N, C, OH, kh, OW, kw] -> [N, OH, OW, C, kh, kw] -> [N*OH*OW, C*kh*kw].
    out.push_back(make_node(g, "Reshape", base + "/split", {x, shape("split", {n, ch, oh, kh, ow, kw})}, -1));
    out.push_back(make_node(g, "Transpose", base + "/gather", {out.back().outputs[0]}, -1,
                       {{"perm", std::vector<int64_t>{0, 2, 4, 1, 3, 5}}}));
    out.push_back(make_node(g, "Reshape", base + "/rows",
                       {out.back().outputs[0], shape("rows", {n * oh * ow, ch * kh * kw})}, -1));
    const int wt = add_constant(g, base + "/weight", patch_weight(g.value(c.inputs[1]).constant));
    out.push_back(make_node(g, "MatMul", base + "/gemm", {out.back().outputs[0], wt}, -1));
    if (c.inputs.size() > 2 && c.inputs[2] >= 0)
      out.push_back(make_node(g, "Add", base + "/bias", {out.back().outputs[0], c.inputs[2]}, -1));
    const int prod = out.back().outputs[0];  // [N*OH*OW, OC]
    // ViT's Reshape [N, OC, OH*OW] then Transpose [0, 2, 1] of the conv: one Reshape.
    int r = -1, t = -1;
    if (readers[size_t(y)].size() == 1 && !is_graph_output(g, y)) {
      r = readers[size_t(y)][0];
      const Node& rn = g.nodes[size_t(r)];
      const int rv = rn.outputs.empty() ? -1 : rn.outputs[0];
      if (op_id(rn) == OpId::Reshape && rn.domain.empty() && rn.inputs[0] == y && rv >= 0 &&
          g.value(rv).shape == Shape{n, oc, oh * ow} && readers[size_t(rv)].size() == 1 &&
          !is_graph_output(g, rv)) {
        t = readers[size_t(rv)][0];
        const Node& tn = g.nodes[size_t(t)];
        bool perm021 = false;
        try {
          perm021 = tn.attr_ints("perm", {}) == std::vector<int64_t>{0, 2, 1};
        } catch (const Error&) {
        }
        if (op_id(tn) != OpId::Transpose || !tn.domain.empty() || !perm021 ||
            tn.outputs.size() != 1 || t <= r || rewritten[size_t(t)])
          t = -1;
      }
    }
    if (t >= 0) {
      out.push_back(make_node(g, "Reshape", base + "/tokens",
                         {prod, shape("tokens", {n, oh * ow, oc})}, g.nodes[size_t(t)].outputs[0]));
      drop.insert(r);
      drop.insert(t);
    } else {
      out.push_back(make_node(g, "Reshape", base + "/nhwc", {prod, shape("nhwc", {n, oh, ow, oc})}, -1));
      out.push_back(make_node(g, "Transpose", base + "/nchw", {out.back().outputs[0]}, y,
                         {{"perm", std::vector<int64_t>{0, 3, 1, 2}}}));
    }
    for (Node& m : out) {
      const std::vector<int> outs = m.outputs;
      Shape before;
      if (outs[0] == y || (t >= 0 && outs[0] == g.nodes[size_t(t)].outputs[0]))
        before = g.value(outs[0]).shape;
      type_node(g, m, kPass);
      if (!before.empty())
        BRRR_ASSERT(g.value(outs[0]).shape == before, "patchify_convs changed an output's shape");
    }
    rewritten[k] = true;
  }
  if (std::none_of(rewritten.begin(), rewritten.end(), [](bool b) { return b; })) return false;
  std::vector<bool> dropped(g.nodes.size(), false);
  for (int k : drop) dropped[size_t(k)] = true;
  splice_nodes(g, replace, dropped);
  return true;
}

}  // namespace brrr
