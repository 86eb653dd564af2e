// Per-kernel roofline: floors from the measured ceilings, efficiency, and regime.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>

#include "brrr/doctor.hpp"

namespace brrr::doctor {

namespace {

// The smallest cache level a kernel's compulsory bytes fit in (nullptr: none, DRAM).
std::optional<CacheLevel> fitting_cache(const KernelRecord& k, const Ceilings& c) {
  for (const auto& l : c.cache_roofs())
    if (l.gbs > 0 && k.cost.bytes <= l.bytes) return l;
  return std::nullopt;
}

bool has_op(const KernelRecord& k, const char* op) {
  return std::find(k.ops.begin(), k.ops.end(), op) != k.ops.end();
}

// Why a kernel beat its floor. The floor is the larger of two roofs, so the explanation is
// about the one that set it.
std::string roof_reason(const KernelAnalysis& a, const Ceilings& c, const std::string& prec,
                        double flops_s) {
  const KernelRecord& k = a.rec;
  if (a.compute_floor_ms >= a.memory_floor_ms) {
    // The special functions priced into the floor are what it beat when its FLOPs alone fit its
    // time (GPT-2's tanh GELU in a bf16 GEMM's epilogue: 12.5 us of FLOPs at the bf16 peak, 9.9
    // us of tanh at the probed rate, 19.4 us measured).
    if (!k.cost.special.empty() &&
        (flops_s * 1e3 < a.compute_floor_ms / 2 || flops_s * 1e3 <= k.time_ms)) {
      std::vector<std::string> fns;
      for (const auto& [fn, n] : k.cost.special) fns.push_back(fn);
      return fmt::format(
          "faster than the probed throughput of {}: this kernel evaluates them faster than the "
          "probe's loop, or on fewer elements than counted (the ceiling is low)",
          fmt::join(fns, ", "));
    }
    std::string s = fmt::format(
        "faster than the probed {} peak: the probe's FMA loop reaches less than this {} kernel "
        "(the ceiling is low)",
        prec, k.kind);
    if (has_op(k, "Conv") || has_op(k, "ConvTranspose"))
      s += ", or it does fewer FLOPs than the nominal count (Winograd, FFT)";
    return s;
  }
  if (a.streamed_weight_bytes > 0)
    return fmt::format(
        "faster than its {:.1f} MiB of weights from DRAM allow: the model's weights outgrow the "
        "cache, yet part of this kernel's stayed resident or was prefetched before it started",
        a.streamed_weight_bytes / 1048576);
  if (a.roof != "dram")
    return fmt::format("cache-resident data faster than the measured {} roof ({:.1f} GB/s)", a.roof,
                       a.roof_gbs);
  if (c.cache_bandwidth_gbs <= 0)
    return "faster than the DRAM roof: its data was likely cache-resident, and these ceilings "
           "have no cache roof (probe again: brrr probe --refresh)";
  return fmt::format(
      "faster than the DRAM roof: its {:.1f} MiB exceed the {:.1f} MiB cache, but part of them "
      "was cache-resident (an input just written, or weights reused)",
      k.cost.bytes / 1048576, c.cache_bytes / 1048576);
}

std::string over_roof_reason(const KernelAnalysis& a, const Ceilings& c, const std::string& prec,
                             double flops_s) {
  std::string s = roof_reason(a, c, prec, flops_s);
  // Ceilings measured under load are low for every kernel; say so beside the specific reason.
  if (c.probe_contended())
    s += fmt::format("; the probe also ran while other processes kept {:.1f} CPUs busy",
                     c.probe_other_busy_cpus);
  return s;
}

}  // namespace

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

double model_weight_bytes(const RunProfile& p) {
  std::map<std::string, double> w;
  for (const auto& k : p.kernels)
    for (const auto& u : k.reads)
      if (u.constant) w[u.name] = std::max(w[u.name], u.bytes);
  double s = 0;
  for (const auto& [name, b] : w) s += b;
  return s;
}

KernelAnalysis analyze_kernel(const KernelRecord& k, const Ceilings& c, double weight_bytes) {
  KernelAnalysis a;
  a.rec = k;
  // A kernel whose compulsory bytes fit in the cache below DRAM can stream them at that level's
  // speed (its inputs were just written, or its weights stayed resident); judging it against
  // DRAM would put it above 100%.
  // The smallest level it fits is the fastest that holds it (a private L2 before a shared LLC).
  const std::optional<CacheLevel> cached = fitting_cache(k, c);
  a.roof = cached ? cached->name : "dram";
  // A cache roof measured below DRAM's (a loaded probe, or an "LLC" that a VM reports for the
  // whole host) must not raise the floor.
  a.roof_gbs = cached ? std::max(cached->gbs, c.bandwidth_gbs) : c.bandwidth_gbs;
  a.memory_floor_ms = k.cost.bytes / (a.roof_gbs * 1e9) * 1e3;
  // Its weights stay in that level from one run to the next only if all the model's weights fit
  // there; where they outgrow it, every run reads each weight from DRAM once, so those bytes
  // are judged against DRAM and only the activations against the cache (BERT-base bf16 on an
  // H100: 170 MB of weights, a 50 MB L2; its 4.7 MB FFN GEMMs had been judged against L2).
  double own = 0;
  for (const auto& u : k.reads)
    if (u.constant) own += u.bytes;
  own = std::min(own, k.cost.bytes);
  if (cached && own > 0 && weight_bytes > cached->bytes) {
    const double rest = k.cost.bytes - own;
    a.streamed_weight_bytes = own;
    a.memory_floor_ms = (own / c.bandwidth_gbs + rest / a.roof_gbs) * 1e-6;
    if (own >= rest) a.roof = "dram";
    a.roof_gbs = a.memory_floor_ms > 0 ? k.cost.bytes / (a.memory_floor_ms * 1e6) : a.roof_gbs;
  }
  // Compute at the precision the kernel ran at (a bf16 library GEMM: the bf16 Tensor Core peak);
  // fused kernels and unprobed precisions: the fp32 FMA peak.
  const std::string prec =
      !k.precision.empty() && c.peak_gflops.count(k.precision) ? k.precision : "fp32";
  const double flops_s = k.cost.flops / c.peak_flops_per_s(prec);
  double special_s = 0;
  for (const auto& [fn, n] : k.cost.special) special_s += n / c.special_per_s(fn);
  // On a GPU, FLOPs priced at a Tensor Core peak (a 16-bit or tf32 GEMM) leave the CUDA cores
  // free for an epilogue's special functions, and other warps' MMAs run while one evaluates them:
  // the floor is the longer of the two (GPT-2's tanh GELU in a bf16 GEMM's epilogue, 12.5 us of
  // FLOPs and 9.9 us of tanh, measured 19.4 us: 115% of their sum). Elsewhere both share the
  // FMA units and add up.
  const bool own_units = c.backend == "cuda" && prec != "fp32";
  const double compute_s = own_units ? std::max(flops_s, special_s) : flops_s + special_s;
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
  if (a.efficiency > 1) a.over_reason = over_roof_reason(a, c, prec, flops_s);
  // On a GPU (ceilings' threads: its SMs) a grid of fewer CTAs than SMs leaves the rest idle for
  // the whole kernel, and its few CTAs each load, then compute, in sequence: far below either roof
  // however fast the code (cuBLASLt's 128-row GEMMs of BERT-base at batch 1).
  if (c.backend == "cuda" && k.grid_ctas > 0 && c.threads > 0 && k.grid_ctas < c.threads &&
      a.efficiency < 0.5)
    a.grid_note = fmt::format(
        "small grid: {} CTA{} on {} SMs leave{} {} SMs idle for the whole kernel; it waits on "
        "latency, not on the {} roof",
        k.grid_ctas, k.grid_ctas == 1 ? "" : "s", c.threads, k.grid_ctas == 1 ? "s" : "",
        c.threads - k.grid_ctas, a.regime == Regime::compute ? "compute" : a.roof);
  return a;
}

}  // namespace brrr::doctor
