// MatMuls that read the same activation with constant 2-D weights of the same K (BERT's Q, K and
// V projections; Llama's gate and up) become one MatMul on the weights concatenated along N, its
// bias Adds one Add on the concatenated biases, and each former result a Slice of the merged one:
//   Add(MatMul(x, Wq), bq), Add(MatMul(x, Wk), bk), ...
//     ->  y = Add(MatMul(x, [Wq Wk ...]), [bq bk ...]);  q = Slice(y, 0:Nq), k = Slice(y, Nq:Nq+Nk)
// One fuller GEMM instead of several that each fill a few SMs or cores. The Slices copy nothing
// where their readers take them as views: generated kernels' loads on a device target, GEMM operand
// strides on the CPU (plan/operand_view.cpp). With `only_into_gemm_views` a group is merged only
// when every use of every part is such a view chain ending in a MatMul; without it (a device
// target, where generated kernels read Slices) only when every part is split into heads that
// Transposes read, the Slice then part of the transpose kernel that runs anyway (a part that a
// pointwise kernel reads would cost a kernel more: Llama's gate and up stay apart). A Split whose
// parts are read that way (GPT-2's c_attn into q, k and v) becomes such Slices too.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "core/pages.hpp"
#include "core/parallel.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

namespace {

bool float_type(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

// One projection of a group: its MatMul, its bias Add (-1: none), the value its readers read.
struct Part {
  int matmul = -1, add = -1;
  int weight = -1, bias = -1;
  int result = -1;
  int64_t n = 0;
};

// MatMul node m as a projection: x[..., K] times a constant W[K, N] of x's type, or nullopt.
std::optional<Part> projection(const Graph& g, int m) {
  const Node& n = g.nodes[size_t(m)];
  if (op_id(n) != OpId::MatMul || !n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1 ||
      n.inputs[0] < 0 || n.inputs[1] < 0 || n.outputs[0] < 0)
    return std::nullopt;
  const Value &x = g.value(n.inputs[0]), &w = g.value(n.inputs[1]), &y = g.value(n.outputs[0]);
  if (!x.typed || !w.typed || !y.typed || x.constant.defined() || !w.constant.defined() ||
      !float_type(x.dtype) || w.dtype != x.dtype || y.dtype != x.dtype || x.shape.size() < 2 ||
      w.shape.size() != 2 || w.shape[0] != x.shape.back() || w.shape[1] <= 0)
    return std::nullopt;
  Part p;
  p.matmul = m;
  p.weight = n.inputs[1];
  p.result = n.outputs[0];
  p.n = w.shape[1];
  return p;
}

// The bias Add reading part p's product alone: Add(y, b) or Add(b, y) with a constant b[N] of y's
// type and y's shape out.
void find_bias(const Graph& g, const std::vector<std::vector<int>>& uses,
               const std::set<int>& outputs, Part* p) {
  int y = p->result;
  if (outputs.count(y) || uses[size_t(y)].size() != 1) return;
  const Node& a = g.nodes[size_t(uses[size_t(y)][0])];
  if (op_id(a) != OpId::Add || !a.domain.empty() || a.inputs.size() != 2 || a.outputs.size() != 1 ||
      a.outputs[0] < 0)
    return;
  int b = a.inputs[0] == y ? a.inputs[1] : a.inputs[1] == y ? a.inputs[0] : -1;
  if (b < 0 || b == y) return;
  const Value &bv = g.value(b), &out = g.value(a.outputs[0]);
  if (!bv.constant.defined() || bv.dtype != g.value(y).dtype || bv.shape != Shape{p->n} ||
      !out.typed || out.shape != g.value(y).shape || out.dtype != bv.dtype)
    return;
  p->add = uses[size_t(y)][0];
  p->bias = b;
  p->result = a.outputs[0];
}

// Whether every use of v is a Reshape, Transpose, Squeeze, Unsqueeze or scalar Mul chain (each
// link read by its next node alone) ending in a MatMul: what the CPU's GEMMs read through strides.
bool read_as_gemm_view(const Graph& g, const std::vector<std::vector<int>>& uses,
                       const std::set<int>& outputs, int v, int depth = 0) {
  if (outputs.count(v) || uses[size_t(v)].empty() || depth > 8) return false;
  for (int c : uses[size_t(v)]) {
    const Node& n = g.nodes[size_t(c)];
    if (!n.domain.empty()) return false;
    if (op_id(n) == OpId::MatMul) continue;
    bool view = view_of(n) == ViewKind::Permute || view_of(n) == ViewKind::Reshape;
    if (op_id(n) == OpId::Mul && n.inputs.size() == 2) {
      int other = n.inputs[0] == v ? n.inputs[1] : n.inputs[0];
      view = other >= 0 && g.value(other).constant.defined() && g.value(other).constant.numel() == 1;
    }
    if (!view || n.inputs.empty() || n.inputs[0] != v || n.outputs.size() != 1 ||
        uses[size_t(v)].size() != 1)
      return false;
    if (!read_as_gemm_view(g, uses, outputs, n.outputs[0], depth + 1)) return false;
  }
  return true;
}

// The parts' weights side by side ([K, sum N]), or their biases end to end. The copy is paid at
// every load (Llama-1B's gate/up: 1.1 GB, mostly page faults: the mapped file's pages read and
// the new tensor's zeroed by the kernel), so large ones are copied by several threads, each a
// band of rows with its own faults; the parts' pages are mapped in bulk and the new tensor takes
// huge pages (Tensor::empty). Llama-1B's merges on a 2-core VM: 1.05 s -> 0.66 s (bulk mapping,
// huge pages) -> 0.44-0.49 s with 2 threads; on the H200 machine's 16 cores 0.36 s with bands of
// 64 MB (one thread per layer's merge), now bands of 16 MB.
Tensor concat_columns(const Graph& g, const std::vector<Part>& parts, bool bias) {
  const Tensor& first = g.value(bias ? parts[0].bias : parts[0].weight).constant;
  const int64_t rows = bias ? 1 : first.shape()[0];
  int64_t total = 0;
  for (const Part& p : parts) total += p.n;
  Tensor out = Tensor::empty(first.dtype(), bias ? Shape{total} : Shape{rows, total});
  const size_t es = dtype_size(first.dtype());
  char* dst = static_cast<char*>(out.raw());
  std::vector<Tensor> srcs;
  for (const Part& p : parts) srcs.push_back(g.value(bias ? p.bias : p.weight).constant.contiguous());
  auto band = [&](int64_t r0, int64_t r1) {
    int64_t col = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const int64_t n = parts[i].n;
      const char* s = static_cast<const char*>(srcs[i].raw());
      prefault_for_reading(s + size_t(r0 * n) * es, size_t((r1 - r0) * n) * es);
      for (int64_t r = r0; r < r1; ++r)
        std::memcpy(dst + size_t(r * total + col) * es, s + size_t(r * n) * es, size_t(n) * es);
      col += n;
    }
  };
  for_bands(rows, out.nbytes(), size_t(16) << 20, band);
  return out;
}

// A Slice of x's [begin, end) along `axis` writing value `out`, whose type it must keep.
Node slice_node(Graph& g, const std::string& name, int x, int64_t axis, int64_t begin, int64_t end,
                int out) {
  Node s;
  s.op = "Slice";
  s.name = name;
  if (g.opset > 0 && g.opset < 10) {  // Slice-1 takes attributes
    s.attrs["starts"] = std::vector<int64_t>{begin};
    s.attrs["ends"] = std::vector<int64_t>{end};
    s.attrs["axes"] = std::vector<int64_t>{axis};
    s.inputs = {x};
  } else {
    s.inputs = {x, int64_constant(g, name + "/starts", {begin}),
                int64_constant(g, name + "/ends", {end}), int64_constant(g, name + "/axes", {axis})};
  }
  s.outputs = {out};
  const Value before = g.value(out);
  type_node(g, s, "merge_parallel_gemms");
  BRRR_ASSERT(g.value(out).shape == before.shape && g.value(out).dtype == before.dtype,
              "merge_parallel_gemms: a part's slice changed its shape");
  return s;
}

struct Uses {
  const std::vector<std::vector<int>>& consumers;
  const std::set<int>& outputs;
};

// D when every reader of `result` (a part of n elements on the last axis) is a Reshape splitting
// that axis into heads [..., H, D], H * D = n, itself read only by Transposes (the head split of
// attention); else 0. Such a part's Slice composes with the transpose into one generated kernel.
int64_t head_dim(const Graph& g, const Uses& u, int result, int64_t n) {
  const Shape& rs = g.value(result).shape;
  const std::vector<int>& readers = u.consumers[size_t(result)];
  if (u.outputs.count(result) || readers.empty() || rs.empty()) return 0;
  int64_t d = 0;
  for (int c : readers) {
    const Node& r = g.nodes[size_t(c)];
    if (op_id(r) != OpId::Reshape || !r.domain.empty() || r.inputs.empty() || r.inputs[0] != result ||
        r.outputs.size() != 1 || r.outputs[0] < 0 || !g.value(r.outputs[0]).typed)
      return 0;
    const Shape& os = g.value(r.outputs[0]).shape;
    if (os.size() != rs.size() + 1 || !std::equal(rs.begin(), rs.end() - 1, os.begin()) ||
        os.back() <= 0 || os[os.size() - 2] * os.back() != n || (d && os.back() != d))
      return 0;
    d = os.back();
    const int o = r.outputs[0];
    if (u.outputs.count(o) || u.consumers[size_t(o)].empty()) return 0;
    for (int t : u.consumers[size_t(o)])
      if (op_id(g.nodes[size_t(t)]) != OpId::Transpose || !g.nodes[size_t(t)].domain.empty()) return 0;
  }
  return d;
}

// Whether parts of these sizes, laid end to end, each split into heads whose size divides its
// place (every part's head_dim nonzero): on a device target, what merging must keep free.
bool heads_fit(const Graph& g, const Uses& u, const std::vector<std::pair<int, int64_t>>& parts) {
  int64_t total = 0;
  for (const auto& [r, n] : parts) total += n;
  int64_t begin = 0;
  for (const auto& [r, n] : parts) {
    const int64_t d = head_dim(g, u, r, n);
    if (d <= 0 || begin % d || total % d) return false;
    begin += n;
  }
  return true;
}

// The nodes giving its readers part [begin, begin + n) of y's `axis`, whose value was `result`.
// Where every reader is a Reshape splitting that (last) axis into heads [..., H, D] (BERT's and
// GPT-2's head split) and D divides the part's place, each reader's value becomes a Slice over
// the head axis of y reshaped to [..., total / D, D] (the reader dropped): y's own bytes, then a
// view the head transpose reads, where a Slice before a Reshape would be copied first. Else one
// Slice writing `result`.
std::vector<Node> part_nodes(Graph& g, const Uses& u, int y, int64_t axis, int64_t begin,
                             int64_t n, int result, const std::string& name, std::set<int>* drop) {
  const Shape ys = g.value(y).shape, rs = g.value(result).shape;
  const int64_t total = ys[size_t(axis)];
  const std::vector<int>& readers = u.consumers[size_t(result)];
  const int64_t hd = axis + 1 == int64_t(ys.size()) ? head_dim(g, u, result, n) : 0;
  const bool heads = hd > 0 && begin % hd == 0 && total % hd == 0;
  if (!heads) return {slice_node(g, name, y, axis, begin, begin + n, result)};
  std::vector<Node> out;
  for (size_t i = 0; i < readers.size(); ++i) {
    const Node r = g.nodes[size_t(readers[i])];
    Shape os = g.value(r.outputs[0]).shape;
    const int64_t d = os.back(), h = os[os.size() - 2];
    Shape to = os;
    to[to.size() - 2] = total / d;
    Node re;
    re.op = "Reshape";
    re.name = fmt::format("{}/heads{}", name, i);
    re.inputs = {y, int64_constant(g, re.name + "/shape", std::vector<int64_t>(to.begin(), to.end()))};
    re.outputs = {g.add_value(fresh_name(g, re.name + "_out"))};
    type_node(g, re, "merge_parallel_gemms");
    const int t = re.outputs[0];
    out.push_back(std::move(re));
    out.push_back(slice_node(g, fmt::format("{}/head_slice{}", name, i), t, int64_t(to.size()) - 2,
                             begin / d, begin / d + h, r.outputs[0]));
    drop->insert(readers[i]);
  }
  return out;
}

// The constants concatenated so far, by (bias?, the parts' values): a model that shares its
// weights between layers (ALBERT's 12 layers read one set of Q, K and V) concatenates them once
// (ALBERT-xxlarge on the CPU: 6.5 GB resident with a [4096, 12288] copy per layer).
using MergedConstants = std::map<std::vector<int>, int>;

// The merged MatMul (and Add), then one Slice per part writing that part's former result.
std::vector<Node> merged_nodes(Graph& g, const Uses& u, const std::vector<Part>& parts,
                               std::set<int>* drop, MergedConstants* made) {
  const Node& first = g.nodes[size_t(parts[0].matmul)];
  const std::string base = first.name + "/merged";
  auto merged_constant = [&](bool bias) {
    std::vector<int> key{bias ? 1 : 0};
    for (const Part& p : parts) key.push_back(bias ? p.bias : p.weight);
    if (auto it = made->find(key); it != made->end()) return it->second;
    const int v = add_constant(g, base + (bias ? "/bias" : "/weight"), concat_columns(g, parts, bias));
    made->emplace(std::move(key), v);
    return v;
  };
  std::vector<Node> out;
  Node mm;
  mm.op = "MatMul";
  mm.name = base;
  int w = merged_constant(false);
  mm.inputs = {first.inputs[0], w};
  mm.outputs = {g.add_value(fresh_name(g, base + "_out"))};
  type_node(g, mm, "merge_parallel_gemms");
  int y = mm.outputs[0];
  out.push_back(std::move(mm));
  if (parts[0].bias >= 0) {
    Node add;
    add.op = "Add";
    add.name = base + "/bias";
    add.inputs = {y, merged_constant(true)};
    add.outputs = {g.add_value(fresh_name(g, base + "_biased"))};
    type_node(g, add, "merge_parallel_gemms");
    y = add.outputs[0];
    out.push_back(std::move(add));
  }
  const int64_t last = int64_t(g.value(y).shape.size()) - 1;
  int64_t begin = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    for (Node& n : part_nodes(g, u, y, last, begin, parts[i].n, parts[i].result,
                              fmt::format("{}/part{}", base, i), drop))
      out.push_back(std::move(n));
    begin += parts[i].n;
  }
  return out;
}

// Split node k (float data, every output used) as one Slice per output, or nothing.
std::vector<Node> split_as_slices(Graph& g, const Uses& u, int k, std::set<int>* drop) {
  const Node sp = g.nodes[size_t(k)];
  if (library_of(sp) != LibraryKind::Split || !sp.domain.empty() || sp.inputs.empty() || sp.inputs[0] < 0 ||
      sp.outputs.size() < 2)
    return {};
  const Value& x = g.value(sp.inputs[0]);
  if (!x.typed || !float_type(x.dtype)) return {};
  const int64_t rank = int64_t(x.shape.size());
  int64_t axis = sp.attr_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return {};
  for (int o : sp.outputs)
    if (o < 0 || !g.value(o).typed || g.value(o).shape.size() != size_t(rank)) return {};
  std::vector<Node> out;
  int64_t begin = 0;
  for (size_t i = 0; i < sp.outputs.size(); ++i) {  // each part's extent: its inferred shape
    const int64_t n = g.value(sp.outputs[i]).shape[size_t(axis)];
    for (Node& m : part_nodes(g, u, sp.inputs[0], axis, begin, n, sp.outputs[i],
                              fmt::format("{}/part{}", sp.name, i), drop))
      out.push_back(std::move(m));
    begin += n;
  }
  return out;
}

}  // namespace

// Whether every reader of v is a pointwise node (which a lazy-view target's generated kernels
// run, reading a Slice of the merged product through strides).
bool read_pointwise(const Graph& g, const Uses& u, int v) {
  if (u.outputs.count(v) || u.consumers[size_t(v)].empty()) return false;
  for (int c : u.consumers[size_t(v)]) {
    const Node& n = g.nodes[size_t(c)];
    if (!n.domain.empty() || !n.def || !n.def->pointwise) return false;
  }
  return true;
}

bool merge_parallel_gemms(Graph& g, bool only_into_gemm_views, bool pointwise_readers) {
  const std::vector<std::vector<int>> uses = value_readers(g);
  const std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  const Uses u{uses, outputs};
  // Groups by (activation, K, with a bias): K is the activation's last dim, the type its own.
  std::map<std::pair<int, bool>, std::vector<Part>> groups;
  for (size_t m = 0; m < g.nodes.size(); ++m) {
    std::optional<Part> p = projection(g, int(m));
    if (!p) continue;
    find_bias(g, uses, outputs, &*p);
    if (only_into_gemm_views && !read_as_gemm_view(g, uses, outputs, p->result)) continue;
    groups[{g.nodes[m].inputs[0], p->bias >= 0}].push_back(*p);
  }
  std::map<int, std::vector<Node>> at;  // first MatMul of a group -> the nodes replacing it
  std::set<int> drop;
  // A Split of such a product (GPT-2's c_attn into q, k and v) is cheap splits too.
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (library_of(n) != LibraryKind::Split) continue;
    bool views = true;
    std::vector<std::pair<int, int64_t>> sizes;
    for (int o : n.outputs) {
      views = views && o >= 0 && read_as_gemm_view(g, uses, outputs, o);
      if (o >= 0 && !g.value(o).shape.empty()) sizes.push_back({o, g.value(o).shape.back()});
    }
    const int64_t rank = int64_t(g.value(n.inputs.at(0)).shape.size());
    const bool last = n.attr_int("axis", 0) == rank - 1 || n.attr_int("axis", 0) == -1;
    if (only_into_gemm_views ? !views : !(last && heads_fit(g, u, sizes))) continue;
    std::vector<Node> slices = split_as_slices(g, u, int(k), &drop);
    if (slices.empty()) continue;
    drop.insert(int(k));
    at[int(k)] = std::move(slices);
  }
  MergedConstants made;
  for (auto& [key, parts] : groups) {
    if (parts.size() < 2) continue;
    std::vector<std::pair<int, int64_t>> sizes;
    for (const Part& p : parts) sizes.push_back({p.result, p.n});
    // A part read by a generated kernel other than its head transpose would be a kernel more,
    // unless such kernels read it lazily.
    // Only while each part's product is small enough to leave SMs idle: on an H200, Llama-1B's
    // gate and up (N = 8192 each) merged ran 1.335 -> 1.312 ms at 128 rows and 4.54 -> 4.78 ms
    // at 1024. About one wave of 128x128 tiles on a 132-SM GPU: 2^21 elements.
    int64_t widest = 0;
    for (const Part& p : parts) widest = std::max(widest, p.n);
    const int64_t rows = shape_numel(g.value(key.first).shape) / std::max<int64_t>(1, g.value(key.first).shape.back());
    const bool lazy = pointwise_readers && rows * widest <= (int64_t(1) << 21) &&
                      std::all_of(parts.begin(), parts.end(), [&](const Part& p) {
                        return read_pointwise(g, u, p.result);
                      });
    if (!only_into_gemm_views && !heads_fit(g, u, sizes) && !lazy) continue;
    for (const Part& p : parts) {
      drop.insert(p.matmul);
      if (p.add >= 0) drop.insert(p.add);
    }
    at[parts[0].matmul] = merged_nodes(g, u, parts, &drop, &made);
  }
  if (at.empty()) return false;
  // The merged nodes take the first MatMul's place: their inputs (the activation, constants) exist
  // there, and every reader of a part comes after that part's own MatMul.
  std::vector<Node> nodes;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    auto it = at.find(int(k));
    if (it != at.end())
      for (Node& n : it->second) nodes.push_back(std::move(n));
    if (!drop.count(int(k))) nodes.push_back(std::move(g.nodes[k]));
  }
  g.nodes = std::move(nodes);
  relink_producers(g);
  eliminate_dead_nodes(g);  // the parts' products, now unread
  return true;
}

}  // namespace brrr
