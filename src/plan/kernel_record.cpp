#include "plan/kernel_record.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace brrr::plan {

namespace {

// The bytes kernel k reads of its input v: all of them, except where only Gathers read v as
// their data (an embedding table): then the rows they pick, as many bytes as they write
// (BERT's 94 MB word embedding table is not read whole for 128 tokens).
double read_bytes(const Graph& g, const Kernel& k, int v) {
  const double all = double(g.value(v).nbytes());
  double picked = 0;
  for (int n : k.nodes) {
    const Node& node = g.nodes[size_t(n)];
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] != v) continue;
      const bool gather = node.domain.empty() && i == 0 && !node.outputs.empty() &&
                          node.outputs[0] >= 0 &&
                          (node.op == "Gather" || node.op == "GatherElements" || node.op == "GatherND");
      if (!gather) return all;
      picked += double(g.value(node.outputs[0]).nbytes());
    }
  }
  return std::min(all, picked > 0 ? picked : all);
}

}  // namespace

KernelRecord kernel_record(const Graph& g, const Kernel& k) {
  KernelRecord rec;
  rec.name = k.name;
  rec.kind = std::string(kernel_kind_name(k.kind));
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
  // A library GEMM's tanh GELU epilogue (oneDNN's gelu_tanh post-op, cuBLASLt's and brrr's
  // epilogues) forms x^3 as two products, not a powf: its Pow is arithmetic. Priced at the probed
  // powf, GPT-2's MLP up-projections read 108-118% "efficient" on a 2-core Zen 3 (their floor
  // 4.72 ms, of which 1.5 ms was the Pow and the Tanh, against 4.0-4.8 ms measured).
  if (k.activation == "gelu_tanh")
    if (auto it = rec.cost.special.find("pow"); it != rec.cost.special.end()) {
      rec.cost.flops += 2 * it->second;
      rec.cost.special.erase(it);
    }
  // Compulsory bytes of the kernel as it runs: its inputs read once, its outputs written once
  // (for a fused kernel this is less than the sum over its nodes: that is the point).
  // Reads and writes by value let the doctor see which intermediates fusion would remove.
  auto use = [&](int v, double b) {
    const Value& val = g.value(v);
    rec.cost.bytes += b;
    return TensorUse{val.name.empty() ? fmt::format("%{}", v) : val.name, b,
                     val.constant.defined()};
  };
  for (int v : k.inputs) rec.reads.push_back(use(v, read_bytes(g, k, v)));
  for (int v : k.outputs) rec.writes.push_back(use(v, double(g.value(v).nbytes())));
  return rec;
}

KernelRecord kernel_record(const Graph& g, const Plan& plan, size_t i) {
  KernelRecord rec = kernel_record(g, plan.kernels[i]);
  for (const Boundary& b : plan.boundaries)
    if (b.from_kernel == int(i) && b.to_kernel >= 0 && size_t(b.to_kernel) < plan.kernels.size())
      rec.boundaries.push_back(fmt::format("-> {} via '{}': {}",
                                           plan.kernels[size_t(b.to_kernel)].name,
                                           g.value(b.value).name, b.reason));
  return rec;
}

}  // namespace brrr::plan
