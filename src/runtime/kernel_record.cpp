#include "runtime/kernel_record.hpp"

namespace brrr::runtime {

KernelRecord kernel_record(const Graph& g, const plan::Kernel& k) {
  KernelRecord rec;
  rec.name = k.name;
  rec.kind = std::string(plan::kernel_kind_name(k.kind));
  int rank = -1;  // contraction wins, then normalization, then elementwise, then movement
  auto class_rank = [](OpClass c) {
    switch (c) {
      case OpClass::contraction: return 3;
      case OpClass::normalization: return 2;
      case OpClass::elementwise: return 1;
      case OpClass::movement: return 0;
    }
    return 0;
  };
  for (int n : k.nodes) {
    const Node& node = g.nodes[size_t(n)];
    rec.ops.push_back(node.op);
    rec.nodes.push_back(node.name);
    Cost c = op_cost(g, node);
    rec.cost.flops += c.flops;
    for (const auto& [f, v] : c.special) rec.cost.special[f] += v;
    if (node.def && class_rank(node.def->cls) > rank) {
      rank = class_rank(node.def->cls);
      rec.cls = node.def->cls;
    }
  }
  // Compulsory bytes of the kernel as it runs: its inputs read once, its outputs written once
  // (for a fused kernel this is less than the sum over its nodes: that is the point).
  for (int v : k.inputs)
    rec.cost.bytes += double(shape_numel(g.value(v).shape)) * dtype_size(g.value(v).dtype);
  for (int v : k.outputs)
    rec.cost.bytes += double(shape_numel(g.value(v).shape)) * dtype_size(g.value(v).dtype);
  return rec;
}

}  // namespace brrr::runtime
