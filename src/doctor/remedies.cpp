// Remedies with a predicted gain, computed from the profile and the ceilings before any is applied:
// fusion (intermediate traffic removed / bandwidth), a static plan (per-kernel dispatch removed),
// faster units (compute-bound work at the fastest measured ceiling).
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "brrr/doctor.hpp"

namespace brrr::doctor {

namespace {

// Can producer class `p` hand its output to consumer class `c` inside one kernel? Pointwise,
// reduction and view chains fuse; a contraction takes an elementwise epilogue.
bool fusable(OpClass p, OpClass c) {
  if (c == OpClass::contraction) return false;
  if (p == OpClass::contraction) return c == OpClass::elementwise;
  return true;
}

struct FusionEstimate {
  double bytes = 0;
  double ms = 0;        // time those bytes cost in the kernels that move them now
  double fixed_ms = 0;  // fixed per-kernel cost of the kernels that merging removes
  int merges = 0, groups = 0, kernels_in_groups = 0;
};

// Union-find over kernels joined by single-consumer intermediates. The removed write and read are
// priced at the bandwidth their kernel measurably reaches when it is memory-bound (never above
// the ceiling): a kernel at 60% of the copy rate saves time at 60% of it. Other kernels are
// priced at the ceiling.
// Each merge also removes a kernel, and with it one fixed per-kernel cost as the probe measured
// it (a kernel call and fork/join on the CPU, a launch, or a graph node in a CUDA graph). Not the
// small kernel's whole time: on the H200, bert_tiny's plan one kernel per op in a graph took
// 0.144 ms for 78 kernels of about 1.8 us each, and fused to 42 kernels 0.121 ms, 0.64 us per
// kernel removed, near the 0.505 us graph node cost.
FusionEstimate estimate_fusion(const RunProfile& p, const std::vector<KernelAnalysis>& ks,
                               const Ceilings& c) {
  const double ceiling = c.bandwidth_gbs * 1e9;
  auto rate = [&](size_t k) {
    const KernelRecord& r = p.kernels[k];
    if (k < ks.size() && ks[k].regime == Regime::memory && r.time_ms > 0 && r.cost.bytes > 0)
      return std::min(ceiling, r.cost.bytes / (r.time_ms * 1e-3));
    return ceiling;
  };
  FusionEstimate e;
  size_t n = p.kernels.size();
  std::map<std::string, int> producer;
  std::map<std::string, std::vector<int>> consumers;
  for (size_t k = 0; k < n; ++k) {
    for (const auto& w : p.kernels[k].writes) producer[w.name] = int(k);
    for (const auto& r : p.kernels[k].reads) consumers[r.name].push_back(int(k));
  }
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (size_t k = 0; k < n; ++k)
    for (const auto& w : p.kernels[k].writes) {
      auto it = consumers.find(w.name);
      if (it == consumers.end() || it->second.size() != 1) continue;  // graph output or shared
      int c = it->second[0];
      if (!fusable(p.kernels[k].cls, p.kernels[size_t(c)].cls)) continue;
      int a = find(int(k)), b = find(c);
      e.bytes += 2 * w.bytes;  // written once and read once, both gone when fused
      e.ms += (w.bytes / rate(k) + w.bytes / rate(size_t(c))) * 1e3;
      if (a != b) {
        parent[b] = a, e.merges++;
        if (k < ks.size() && size_t(c) < ks.size())
          e.fixed_ms += std::min(ks[k].overhead_ms, ks[size_t(c)].overhead_ms);
      }
    }
  std::map<int, int> sizes;
  for (size_t k = 0; k < n; ++k) sizes[find(int(k))]++;
  for (const auto& [root, s] : sizes)
    if (s > 1) e.groups++, e.kernels_in_groups += s;
  return e;
}

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

}  // namespace

std::vector<Remedy> predict_remedies(const RunProfile& p, const std::vector<KernelAnalysis>& ks,
                                     const Attribution& a, const Ceilings& c) {
  std::vector<Remedy> out;
  double floors = 0;
  for (const auto& k : ks) floors += k.floor_ms;
  double headroom = std::max(0.0, a.wall_ms - floors);  // no remedy beats the roofline
  // Faster units move the roof itself, so only they may go below the fp32 floors.
  // `lowers_floor_ms`: how much the remedy lowers the roofline itself (fusion removes bytes).
  auto add = [&](std::string name, double gain, std::string detail, double lowers_floor_ms = 0) {
    gain = std::clamp(gain, 0.0,
                      name == "faster_units" ? a.wall_ms
                                             : std::min(a.wall_ms, headroom + lowers_floor_ms));
    out.push_back({std::move(name), std::move(detail), gain, a.wall_ms - gain, std::nullopt});
  };

  // Fusion.
  FusionEstimate f = estimate_fusion(p, ks, c);
  double at_ceiling_ms = f.bytes / (c.bandwidth_gbs * 1e9) * 1e3;
  if (f.merges > 0)
    add("fusion", f.ms + f.fixed_ms,
        fmt::format("fusing {} kernels into {} removes {} of intermediate traffic, about {:.3f} ms "
                    "at the bandwidth those kernels reach ({:.3f} ms at the {:.1f} GB/s ceiling), "
                    "and {} kernel call{}{}",
                    f.kernels_in_groups, f.groups, human_bytes(f.bytes), f.ms, at_ceiling_ms,
                    c.bandwidth_gbs, f.merges, f.merges == 1 ? "" : "s",
                    f.fixed_ms > 0 ? fmt::format(", about {:.3f} ms of fixed per-kernel cost",
                                                 f.fixed_ms)
                                   : std::string()),
        at_ceiling_ms + f.fixed_ms);
  else
    add("fusion", 0,
        p.kernels.empty() || (p.kernels[0].reads.empty() && p.kernels[0].writes.empty())
            ? "no tensor reads/writes in this profile: cannot see intermediates"
            : "no single-consumer intermediates left to fuse");

  // Static plan: every kernel keeps its call but loses the executor's dispatch, and the host
  // gaps between kernels go away. On the GPU the static plan is one CUDA graph: each kernel then
  // costs a graph node. A compiled CPU plan is static already, and so is a CUDA plan replayed as
  // a graph: then the remedy is in effect, and what is left of the fixed cost is said instead.
  const bool gpu = c.backend == "cuda";
  const bool graphed = gpu && !p.kernels.empty() &&
                       std::all_of(p.kernels.begin(), p.kernels.end(),
                                   [](const KernelRecord& k) { return k.graph_node; });
  double static_us = c.per_kernel_overhead_us("fused", gpu);
  if (p.backend == "cpu" || graphed) {
    add("static_plan", 0,
        fmt::format(fmt::runtime(graphed
                                     ? "in effect: the plan is replayed as one CUDA graph ({} "
                                       "nodes at {:.3f} us each); {:.3f} ms of the wall is outside "
                                       "kernels"
                                     : "in effect: the plan is static ({} kernel calls at {:.3f} "
                                       "us each); {:.3f} ms of the wall is host gaps"),
                    ks.size(), static_us, a.gap_ms));
    out.back().in_effect = true;
  } else {
    double per_kernel_saving_ms = 0;
    for (const auto& k : ks) per_kernel_saving_ms += std::max(0.0, k.overhead_ms - static_us * 1e-3);
    double plan_ms = per_kernel_saving_ms + a.gap_ms;
    add("static_plan", plan_ms,
        fmt::format(fmt::runtime(gpu ? "a CUDA graph replaces {} launches ({:.3f} -> {:.3f} us each) "
                                       "and removes {:.3f} ms of idle GPU gaps, about {:.3f} ms"
                                     : "a static plan removes {} dispatches ({:.3f} -> {:.3f} us "
                                       "each) and {:.3f} ms of host gaps, about {:.3f} ms"),
                    ks.size(), ks.empty() ? 0.0 : ks[0].overhead_ms * 1e3, static_us, a.gap_ms,
                    plan_ms));
  }

  // Faster units: compute-bound kernels at the fastest measured ceiling.
  std::string unit = "fp32";
  for (const auto& [prec, v] : c.peak_gflops)
    if (v > c.peak_gflops.at(unit) && prec != "fp64") unit = prec;
  double peak = c.peak_flops_per_s(unit);
  double cb_ms = 0, cb_new_ms = 0;
  int n_cb = 0;
  for (const auto& k : ks) {
    if (k.regime != Regime::compute) continue;
    double special_ms = 0;
    for (const auto& [fn, n] : k.rec.cost.special) special_ms += n / c.special_per_s(fn) * 1e3;
    double t = std::max(k.memory_floor_ms, k.rec.cost.flops / peak * 1e3 + special_ms);
    cb_ms += k.rec.time_ms;
    cb_new_ms += std::min(k.rec.time_ms, t);
    n_cb++;
  }
  double units_ms = cb_ms - cb_new_ms;
  if (n_cb == 0)
    add("faster_units", 0,
        fmt::format("no compute-bound kernels: faster units cannot help (compute is {:.0f}% of "
                    "the time)",
                    100 * a.share(Regime::compute)));
  else
    add("faster_units", units_ms,
        fmt::format("{} compute-bound kernel{} take{} {:.3f} ms; at the {} ceiling ({:.1f} "
                    "GFLOP/s) {} floor is {:.3f} ms",
                    n_cb, n_cb == 1 ? "" : "s", n_cb == 1 ? "s" : "", cb_ms, unit, peak / 1e9,
                    n_cb == 1 ? "its" : "their", cb_new_ms));
  return out;
}

Verdict make_verdict(const Attribution& a, const std::vector<Remedy>& rs,
                     const std::optional<BatchScaling>& b) {
  Verdict v;
  double sc = a.share(Regime::compute), sm = a.share(Regime::memory),
         so = a.share(Regime::overhead);
  v.regime = so >= sc && so >= sm ? Regime::overhead : sc >= sm ? Regime::compute : Regime::memory;
  auto remedy = [&](const std::string& n) -> const Remedy& {
    static const Remedy none;
    for (const auto& r : rs)
      if (r.name == n) return r;
    return none;
  };
  auto gain = [&](const std::string& n) { return remedy(n).gain_ms; };
  std::string s;
  if (v.regime == Regime::overhead)
    s = fmt::format(
        "overhead-bound: {:.0f}% of the time is fixed per-kernel cost and host gaps. {}; fusion "
        "(fewer kernels) {:.3f} ms. Faster units cannot help: compute is {:.0f}% of the time.",
        100 * so,
        remedy("static_plan").in_effect
            ? std::string("The plan is static already, so fewer kernels is what is left")
            : fmt::format("A static plan saves about {:.3f} ms", gain("static_plan")),
        gain("fusion"), 100 * sc);
  else if (v.regime == Regime::memory)
    s = fmt::format(
        "memory-bound: {:.0f}% of the time moves bytes. Fusion saves about {:.3f} ms; faster "
        "units cannot help much (compute is {:.0f}%).",
        100 * sm, gain("fusion"), 100 * sc);
  else
    s = fmt::format(
        "compute-bound: {:.0f}% of the time is arithmetic. Faster units (a library GEMM, lower "
        "precision) save about {:.3f} ms; fusion {:.3f} ms.",
        100 * sc, gain("faster_units"), gain("fusion"));
  if (b) s += " Batch scaling: " + b->verdict + ".";
  v.advice = s;
  return v;
}

}  // namespace brrr::doctor
