// An inference BatchNormalization of float32 data whose scale, bias, mean and variance are
// constants is one multiply-add per element: y = x * g + h with g = scale / sqrt(var + eps) and
// h = B - mean * g per channel (computed in double, stored as float32). As Mul and Add with
// [C, 1, ...] constants it fuses into the generated kernels around it; as its own op it has no
// kernel and ran on the reference executor. Exporters fold a BN that follows a conv into its
// weights; the ones left follow a Concat or an activation (DenseNet's pre-activation layers: 58
// BNs, each a reference kernel over the whole concatenated feature map). The reference executor
// keeps the op.
#include <algorithm>
#include <cmath>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

namespace {

constexpr const char* kPass = "decompose_batchnorm";

bool constant_vector(const Graph& g, const Node& n, size_t i, int64_t ch) {
  if (i >= n.inputs.size() || n.inputs[i] < 0) return false;
  const Value& v = g.value(n.inputs[i]);
  return v.constant.defined() && v.constant.numel() == ch &&
         (v.dtype == DType::f32 || v.dtype == DType::f64 || v.dtype == DType::bf16 || v.dtype == DType::f16);
}

}  // namespace

bool decompose_batchnorm(Graph& g) {
  std::vector<std::vector<Node>> replace(g.nodes.size());
  bool changed = false;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node bn = g.nodes[k];
    if (bn.op != "BatchNormalization" || !bn.domain.empty() || bn.outputs.empty() ||
        bn.inputs.empty() || bn.inputs[0] < 0)
      continue;
    const Value& x = g.value(bn.inputs[0]);
    const DType dt = x.dtype;
    // float32 data: in 16 bits the per-channel gain and shift would be rounded to 16 bits before
    // they meet x (the shift B - mean * g cancels), where the op itself rounds once, at the end.
    // A model stored in 16 bits by --precision converts these float32 constants with the rest.
    if (!x.typed || x.shape.size() < 2 || dt != DType::f32) continue;
    // Training mode's statistics outputs (shape inference refuses named ones already).
    bool stats_used = false;
    for (size_t o = 1; o < bn.outputs.size(); ++o)
      stats_used = stats_used || (bn.outputs[o] >= 0 && !g.value(bn.outputs[o]).name.empty());
    const int64_t ch = x.shape[1];
    bool constants = ch > 0;
    for (size_t i = 1; i <= 4; ++i) constants = constants && constant_vector(g, bn, i, ch);
    if (stats_used || !constants) continue;
    double eps = 1e-5;
    try {
      eps = bn.attr_float("epsilon", 1e-5f);
      if (bn.attr_int("training_mode", 0) != 0) continue;
    } catch (const Error&) {
      continue;
    }
    auto at = [&](size_t i, int64_t c) { return g.value(bn.inputs[i]).constant.at_double(c); };
    // [C, 1, ..., 1]: broadcast over every axis after the channel one.
    Shape cs{ch};
    cs.resize(x.shape.size() - 1, 1);
    Tensor gain = Tensor::empty(DType::f32, cs), shift = Tensor::empty(DType::f32, cs);
    for (int64_t c = 0; c < ch; ++c) {
      const double s = at(1, c) / std::sqrt(at(4, c) + eps);
      gain.data<float>()[c] = float(s);
      shift.data<float>()[c] = float(at(2, c) - at(3, c) * s);
    }
    const std::string base = fresh_name(g, (bn.name.empty() ? std::string("bn") : bn.name) + "/affine");
    const int gv = add_constant(g, base + "/gain", gain);
    const int hv = add_constant(g, base + "/shift", shift);
    std::vector<Node>& out = replace[k];
    out.push_back(make_node(g, "Mul", base + "/mul", {bn.inputs[0], gv}, -1));
    out.push_back(make_node(g, "Add", base + "/add", {out.back().outputs[0], hv}, bn.outputs[0]));
    const Shape before = g.value(bn.outputs[0]).shape;
    for (Node& m : out) type_node(g, m, kPass);
    BRRR_ASSERT(g.value(bn.outputs[0]).shape == before, "decompose_batchnorm changed a shape");
    changed = true;
  }
  if (!changed) return false;
  splice_nodes(g, replace, std::vector<bool>(g.nodes.size(), false));
  return true;
}

}  // namespace brrr
