// A view node (Reshape, Squeeze, Unsqueeze, Transpose, one-index Gather, Slice, scalar Mul) whose
// result several view chains read, each ending in a MatMul operand, is cloned once per reader, so
// that every chain is read by its MatMul alone and becomes that GEMM's operand strides
// (plan/operand_view.hpp) instead of a copy kernel shared by all of them. ViT's packed in-
// projection (torchvision's MultiheadAttention) splits into q, k and v by Reshape -> Unsqueeze ->
// Transpose -> Squeeze -> Gather 0/1/2: without this the first four run as copies in every layer.
#include <fmt/format.h>

#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "ir/graph_edit.hpp"

namespace brrr {

namespace {

// The input node n is a view of, when n is a view-like node on float32 data, else -1. (Whether a
// chain really becomes strides is the fusion pass's call; a clone that does not costs a copy of
// the same size as the shared one.)
int viewed_input(const Graph& g, const Node& n) {
  if (!n.domain.empty() || n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1 ||
      n.outputs[0] < 0)
    return -1;
  const Value& out = g.value(n.outputs[0]);
  if (!out.typed || out.dtype != DType::f32) return -1;
  const ViewKind v = view_of(n);
  if (v == ViewKind::Permute || v == ViewKind::Reshape || v == ViewKind::Pick ||
      v == ViewKind::Slice)
    return n.inputs[0];
  if (op_id(n) == OpId::Mul && n.inputs.size() == 2) {  // by a one-element constant
    for (int i = 0; i < 2; ++i) {
      int x = n.inputs[size_t(i)], c = n.inputs[size_t(1 - i)];
      if (x >= 0 && c >= 0 && x != c && g.value(c).constant.defined() &&
          g.value(c).constant.numel() == 1 && g.value(x).shape == out.shape)
        return x;
    }
  }
  return -1;
}

bool is_matmul_operand(const Node& n, int v) {
  return op_id(n) == OpId::MatMul && n.domain.empty() && n.inputs.size() == 2 &&
         n.inputs[0] != n.inputs[1] && (n.inputs[0] == v || n.inputs[1] == v);
}

}  // namespace

bool split_shared_views(Graph& g) {
  const std::vector<std::vector<int>> consumers = value_readers(g);
  std::unordered_set<int> outputs(g.outputs.begin(), g.outputs.end());

  // Does every reader of v reach a MatMul operand through view nodes only? (memoized; a DAG)
  std::unordered_map<int, bool> memo;
  std::function<bool(int)> feeds_gemms = [&](int v) -> bool {
    auto it = memo.find(v);
    if (it != memo.end()) return it->second;
    bool ok = !consumers[size_t(v)].empty() && !outputs.count(v);
    for (int c : consumers[size_t(v)]) {
      if (!ok) break;
      const Node& n = g.nodes[size_t(c)];
      if (is_matmul_operand(n, v)) continue;
      ok = viewed_input(g, n) == v && feeds_gemms(n.outputs[0]);
    }
    return memo[v] = ok;
  };

  // Which nodes to clone, and how many times: walking back from the MatMuls, a shared view node
  // is cloned once per reader, which gives its own producer that many readers in turn.
  std::vector<int> copies(g.nodes.size(), 1);  // how many instances of each node there will be
  bool any = false;
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const Node& n = g.nodes[k];
    if (viewed_input(g, n) < 0) continue;
    const int out = n.outputs[0];
    int readers = 0;
    for (int c : consumers[size_t(out)]) readers += copies[size_t(c)];
    if (readers > 1 && feeds_gemms(out)) {
      copies[k] = readers;
      any = true;
    }
  }
  if (!any) return false;

  // Rebuild the node list: each cloned node is emitted once per reader instance; every reader
  // instance is handed its own instance of the value it reads.
  std::unordered_set<std::string> names;
  for (const Value& v : g.values) names.insert(v.name);
  // For a cloned node k: the output value of each of its instances; readers take them in order.
  std::unordered_map<int, std::vector<int>> instance_outputs;
  std::unordered_map<int, size_t> handed;  // cloned node -> instances handed out so far
  auto take_instance = [&](int v) -> int {
    const int p = g.value(v).producer;
    if (p < 0 || copies[size_t(p)] == 1) return v;
    const std::vector<int>& outs = instance_outputs.at(p);
    size_t& next = handed[p];
    BRRR_ASSERT(next < outs.size(), "split_shared_views: more readers than clones");
    return outs[next++];
  };
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    for (int inst = 0; inst < copies[k]; ++inst) {
      Node c = n;
      for (int& i : c.inputs)
        if (i >= 0) i = take_instance(i);
      if (copies[k] > 1) {
        int out = c.outputs[0];
        if (inst > 0) {
          std::string name = fmt::format("{}_view{}", g.value(out).name, inst);
          while (!names.insert(name).second) name += "_";
          const Value proto = g.value(out);
          int id = g.add_value(name);
          Value& v = g.value(id);
          v.dtype = proto.dtype;
          v.shape = proto.shape;
          v.typed = proto.typed;
          c.outputs[0] = id;
          c.name = fmt::format("{}_view{}", c.name, inst);
        }
        instance_outputs[int(k)].push_back(c.outputs[0]);
      }
      nodes.push_back(std::move(c));
    }
  }
  g.nodes = std::move(nodes);
  relink_producers(g);
  return true;
}

}  // namespace brrr
