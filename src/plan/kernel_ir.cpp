#include "plan/kernel_ir.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "plan/library_desc.hpp"

namespace brrr::plan {

std::string_view kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::Fused: return "fused";
    case KernelKind::Library: return "library";
    case KernelKind::Copy: return "copy";
    case KernelKind::Reference: return "reference";
  }
  return "?";
}

bool Kernel::has_reduction() const {
  for (const Expr& e : exprs)
    if (e.kind == Expr::Reduce) return true;
  return false;
}

int64_t Kernel::cols() const { return space.empty() ? 1 : space.back(); }
int64_t Kernel::rows() const {
  int64_t r = 1;
  for (size_t i = 0; i + 1 < space.size(); ++i) r *= space[i];
  return r;
}

std::string Plan::print(const Graph& g) const {
  std::string s;
  for (const Kernel& k : kernels) {
    std::string ops;
    for (int n : k.nodes) ops += (ops.empty() ? "" : " ") + g.nodes[n].op;
    s += fmt::format("  {:<24} {:<9} {:>3} op(s) [{}]", k.name, kernel_kind_name(k.kind),
                     k.nodes.size(), ops);
    if (k.kind == KernelKind::Fused)
      s += fmt::format(" space {}{}", shape_str(k.space), k.has_reduction() ? " rows" : "");
    if (k.bias >= 0) s += " +bias";
    if (k.sum >= 0) s += " +sum";
    if (!k.activation.empty()) s += " +" + k.activation;
    if (k.kind == KernelKind::Fused && k.compute != DType::f32)
      s += fmt::format(" computes in {}", dtype_name(k.compute));
    if (k.kind == KernelKind::Library) {
      const GemmDesc* gd = desc_of<GemmDesc>(k);
      const ConvDesc* cd = desc_of<ConvDesc>(k);
      DType math = gd ? gd->math : cd ? cd->math : DType::f32;
      if (math != DType::f32) s += fmt::format(" reads {}", dtype_name(math));
      if (const AttentionDesc* ad = desc_of<AttentionDesc>(k))
        s += fmt::format(" b{} h{}/{} sq{} sk{} d{}{}{}{}", ad->batch, ad->heads, ad->kv_heads,
                         ad->seq_q, ad->seq_k, ad->head_dim, ad->mask >= 0 ? " +mask" : "",
                         ad->keep >= 0 ? " +bool-mask" : "", ad->causal ? " causal" : "");
    }
    if (!k.host.empty()) s += " on the host: " + k.host;
    s += "\n";
  }
  if (!boundaries.empty()) s += "  boundaries:\n";
  for (const Boundary& b : boundaries)
    s += fmt::format("    {} -> {} via '{}': {}\n", kernels[b.from_kernel].name,
                     kernels[b.to_kernel].name, g.value(b.value).name, b.reason);
  return s;
}

std::vector<int> level0_closure(const Kernel& k, const std::vector<int>& targets) {
  std::set<int> need;
  std::vector<int> stack = targets;
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    const Expr& e = k.exprs[size_t(id)];
    if (e.level != 0 || !need.insert(id).second) continue;
    if (e.kind != Expr::Reduce)
      for (int a : e.args)
        if (a >= 0) stack.push_back(a);
  }
  return {need.begin(), need.end()};
}

std::string float_lit(float v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  return fmt::format("{:a}f", v);
}

std::string imm_lit(const ScalarOperand& imm) {
  double v = imm.imm;
  if (imm.integer) return v < 0 ? fmt::format("({})", int64_t(v)) : fmt::format("{}", int64_t(v));
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  std::string s = fmt::format("{:.9g}", float(v));
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  s += "f";
  return v < 0 ? "(" + s + ")" : s;
}

bool scalar_op_is_call(ScalarOp op) {
  switch (op) {
    case ScalarOp::Identity: case ScalarOp::Add: case ScalarOp::Sub: case ScalarOp::Mul:
    case ScalarOp::Div: case ScalarOp::Where: case ScalarOp::Equal: case ScalarOp::Less:
    case ScalarOp::LessOrEqual: case ScalarOp::Greater: case ScalarOp::GreaterOrEqual:
    case ScalarOp::And: case ScalarOp::Or: case ScalarOp::Xor: case ScalarOp::Not:
    case ScalarOp::Reciprocal: case ScalarOp::Neg: case ScalarOp::IsNaN:
      return false;
    default: return true;
  }
}

}  // namespace brrr::plan
