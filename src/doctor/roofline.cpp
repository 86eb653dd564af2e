// Per-kernel roofline: floors from the measured ceilings, efficiency, and regime.
#include <algorithm>

#include "brrr/doctor.hpp"

namespace brrr::doctor {

std::string regime_name(Regime r) {
  switch (r) {
    case Regime::compute:
      return "compute";
    case Regime::memory:
      return "memory";
    default:
      return "overhead";
  }
}

KernelAnalysis analyze_kernel(const KernelRecord& k, const Ceilings& c) {
  KernelAnalysis a;
  a.rec = k;
  a.memory_floor_ms = k.cost.bytes / (c.bandwidth_gbs * 1e9) * 1e3;
  // Compute at the precision the kernel ran at (a bf16 library GEMM: the bf16 Tensor Core peak);
  // fused kernels and unprobed precisions: the fp32 FMA peak.
  const std::string prec =
      !k.precision.empty() && c.peak_gflops.count(k.precision) ? k.precision : "fp32";
  double compute_s = k.cost.flops / c.peak_flops_per_s(prec);
  for (const auto& [fn, n] : k.cost.special) compute_s += n / c.special_per_s(fn);
  a.compute_floor_ms = compute_s * 1e3;
  a.overhead_ms = c.per_kernel_overhead_us(k.kind, k.graph_node) * 1e-3;
  a.floor_ms = std::max(a.memory_floor_ms, a.compute_floor_ms);
  a.efficiency = k.time_ms > 0 ? a.floor_ms / k.time_ms : 0;
  // Overhead-bound when the fixed per-kernel cost is comparable to the whole kernel, or when
  // even its ideal work would finish before the fixed cost is paid.
  if (k.time_ms < 2 * a.overhead_ms || a.floor_ms < a.overhead_ms)
    a.regime = Regime::overhead;
  else
    a.regime = a.compute_floor_ms >= a.memory_floor_ms ? Regime::compute : Regime::memory;
  return a;
}

}  // namespace brrr::doctor
