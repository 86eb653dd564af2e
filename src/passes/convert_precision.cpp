// convert_precision: `--precision bf16|fp16` on a float32 model, as trtexec's --bf16 / --fp16 do
// it. Weights and activations are stored in 16 bits; what computes stays as the backend does it
// for a 16-bit model (GEMMs and convs accumulate in float32; generated kernels, reductions,
// softmax and normalization statistics compute in float32 and round only when they store). The
// model's interface does not change: float32 inputs are cast to 16 bits once where they enter,
// float32 outputs are cast back where they leave, so callers and reference data stay float32.
//
// Which values convert: float32 values fall into groups that one node ties together (its float
// inputs and outputs share a type in ONNX); a Cast separates groups. A group keeps float32 when
// any value in it must: an input ONNX fixes at float (Resize's roi and scales, Upsample's
// scales) or one cast to an integer or bool (a shape or index computed in floats, where 16 bits
// would change the integer). Every other group converts: its constants are cast (float16 clamps
// to +-65504, so the -3.4e38 that masks use stays finite), a Cast or an attribute that produced
// float32 in it produces the 16-bit type, and shape inference runs again over the result.
#include <algorithm>
#include <numeric>
#include <set>

#include "brrr/error.hpp"
#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "core/f16_convert.hpp"
#include "core/pages.hpp"
#include "core/parallel.hpp"

namespace brrr {

namespace {

struct Groups {  // union-find over value ids
  std::vector<int> parent;
  explicit Groups(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int v) {
    while (parent[size_t(v)] != v) v = parent[size_t(v)] = parent[size_t(parent[size_t(v)])];
    return v;
  }
  void join(int a, int b) { parent[size_t(find(a))] = find(b); }
};

bool is_f32(const Graph& g, int v) { return v >= 0 && g.value(v).dtype == DType::f32; }

// Inputs ONNX types as float whatever the data's type: they are not tied to the node's T
// (OpDef::float32_inputs: Resize's scales and roi, Upsample's scales when brrr has them).
bool fixed_float_input(const Node& n, size_t slot) {
  const OpDef* d = n.domain.empty() ? def_of(n) : nullptr;
  return d && std::find(d->float32_inputs.begin(), d->float32_inputs.end(), int(slot)) !=
                  d->float32_inputs.end();
}

bool float_type(int onnx_code) {
  DType t = dtype_from_onnx(onnx_code);
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}

Tensor to_16bit(const Tensor& t, DType to) {
  if (to != DType::f16) return t.cast(to);
  // float16 clamps to its largest finite value (NaN stays NaN): one pass over the weights, by
  // bands on several threads (Tensor::cast), instead of three.
  Tensor c = t.dtype() == DType::f32 ? t.contiguous() : t.cast(DType::f32);
  Tensor out = Tensor::empty(DType::f16, c.shape());
  const float* s = c.data<float>();
  f16* d = out.data<f16>();
  const int64_t n = c.numel();
  for_bands(n, size_t(n) * 6, size_t(8) << 20, [&](int64_t i0, int64_t i1) {
    if (size_t(i1 - i0) * 4 >= (size_t(1) << 20)) prefault_for_reading(s + i0, size_t(i1 - i0) * 4);
    f32_to_f16(s + i0, d + i0, i1 - i0, /*saturate=*/true);
  });
  return out;
}

// Every node input that reads `from` reads `to` instead.
void replace_uses(Graph& g, int from, int to) {
  for (Node& n : g.nodes)
    for (int& i : n.inputs)
      if (i == from) i = to;
}

// The producer of `from` writes `to` instead, and every reader follows.
void replace_output(Graph& g, int from, int to) {
  Node& p = g.nodes[size_t(g.value(from).producer)];
  for (int& o : p.outputs)
    if (o == from) o = to;
  g.value(to).producer = g.value(from).producer;
  replace_uses(g, from, to);
}

// Graph inputs feed a Cast to `to`; graph outputs come from a Cast back to float32. Returns the
// new Casts' node indices (appended; topo_sort orders them).
std::vector<size_t> add_interface_casts(Graph& g, DType to) {
  std::vector<size_t> casts;
  auto cast_node = [&](int in, int out, DType t) {
    Node c;
    c.op = "Cast";
    c.name = "brrr_precision_cast_" + g.value(out).name;
    c.inputs = {in};
    c.outputs = {out};
    c.attrs["to"] = int64_t(dtype_to_onnx(t));
    g.nodes.push_back(std::move(c));
    casts.push_back(g.nodes.size() - 1);
    g.value(out).producer = int(g.nodes.size() - 1);
  };
  const std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  for (int x : g.inputs) {
    if (!is_f32(g, x)) continue;
    const std::string name = g.value(x).name + ".brrr_" + std::string(dtype_name(to));
    int y = g.add_value(name);
    replace_uses(g, x, y);
    cast_node(x, y, to);
  }
  for (int y : outputs) {
    if (!is_f32(g, y) || g.value(y).producer < 0) continue;
    const std::string name = g.value(y).name + ".brrr_" + std::string(dtype_name(to));
    int inner = g.add_value(name);
    replace_output(g, y, inner);
    cast_node(inner, y, DType::f32);
  }
  return casts;
}

}  // namespace

PrecisionReport convert_precision(Graph& g, DType to, size_t fold_budget_bytes) {
  BRRR_CHECK(to == DType::bf16 || to == DType::f16, "convert_precision: {} is not a 16-bit float",
             dtype_name(to));
  PrecisionReport rep;
  std::vector<size_t> casts = add_interface_casts(g, to);
  const size_t n_values = g.values.size();
  Groups groups(n_values);
  std::vector<std::string> keep_why(n_values);  // by value id, then by group root
  for (const Node& n : g.nodes) {
    if (n.domain.empty() && op_id(n) == OpId::Cast) {
      const bool to_number = float_type(int(n.attr_int("to", 1)));
      if (!to_number && is_f32(g, n.inputs[0]))
        keep_why[size_t(n.inputs[0])] = n.label() + " casts it to an integer or bool";
      continue;
    }
    int tie = -1;
    auto link = [&](int v) {
      if (!is_f32(g, v)) return;
      if (tie < 0) tie = v;
      else groups.join(v, tie);
    };
    if (n.domain.empty() && op_id(n) == OpId::CastLike) {  // the output takes the target's type
      if (n.inputs.size() > 1) link(n.inputs[1]);
      link(n.outputs[0]);
      continue;
    }
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      if (!fixed_float_input(n, s)) link(n.inputs[s]);
      else if (is_f32(g, n.inputs[s]))
        keep_why[size_t(n.inputs[s])] = n.label() + " takes it as float32 by definition";
    }
    for (int o : n.outputs) link(o);
  }
  std::vector<std::string> group_keep(n_values);
  for (size_t v = 0; v < n_values; ++v)
    if (!keep_why[v].empty() && group_keep[size_t(groups.find(int(v)))].empty())
      group_keep[size_t(groups.find(int(v)))] = keep_why[v];
  std::vector<bool> convert(n_values, false);
  const std::set<int> interface(g.inputs.begin(), g.inputs.end());
  const std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  for (size_t v = 0; v < n_values; ++v) {
    if (!is_f32(g, int(v)) || interface.count(int(v)) || outputs.count(int(v))) continue;
    const std::string& why = group_keep[size_t(groups.find(int(v)))];
    convert[v] = why.empty();
    if (convert[v]) ++rep.converted;
    else {
      ++rep.kept;
      if (rep.kept_why.size() < 5 &&
          std::find(rep.kept_why.begin(), rep.kept_why.end(), why) == rep.kept_why.end())
        rep.kept_why.push_back(why);
    }
  }
  // An interface Cast whose far side stays float32 is dropped again: it would cast to itself.
  std::vector<bool> drop(g.nodes.size(), false);
  for (size_t c : casts) {
    Node& n = g.nodes[c];
    const bool into = n.attr_int("to", 1) != dtype_to_onnx(DType::f32);
    const int inner = into ? n.outputs[0] : n.inputs[0];
    if (convert[size_t(inner)]) continue;
    const int outer = into ? n.inputs[0] : n.outputs[0];
    if (into) replace_uses(g, inner, outer);
    else replace_output(g, inner, outer);
    drop[c] = true;
  }
  for (size_t v = 0; v < n_values; ++v) {
    if (!convert[v]) continue;
    Value& val = g.value(int(v));
    if (val.constant.defined()) {
      val.constant = to_16bit(val.constant, to);
      val.dtype = to;  // a constant is not inferred again
    }
    if (val.producer < 0) continue;
    Node& p = g.nodes[size_t(val.producer)];
    if (p.domain.empty() && op_id(p) == OpId::Cast) p.attrs["to"] = int64_t(dtype_to_onnx(to));
    if (auto it = p.attrs.find("dtype");
        it != p.attrs.end() && std::holds_alternative<int64_t>(it->second) &&
        std::get<int64_t>(it->second) == dtype_to_onnx(DType::f32))
      it->second = int64_t(dtype_to_onnx(to));
    if (auto it = p.attrs.find("value"); it != p.attrs.end() &&
                                         std::holds_alternative<Tensor>(it->second) &&
                                         std::get<Tensor>(it->second).dtype() == DType::f32)
      it->second = to_16bit(std::get<Tensor>(it->second), to);
  }
  std::vector<Node> kept_nodes;
  kept_nodes.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) kept_nodes.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept_nodes);
  topo_sort(g);
  infer_types(g, fold_budget_bytes);
  eliminate_dead_nodes(g);
  return rep;
}

}  // namespace brrr
