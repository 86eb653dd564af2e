// The terminal report: attribution, top kernels, class table, batch scaling, remedies, verdict.
#include <fmt/format.h>

#include <algorithm>

#include "brrr/doctor.hpp"

namespace brrr::doctor {

namespace {

std::string join_ops(const std::vector<std::string>& ops, size_t max_len = 28) {
  std::string s;
  for (const auto& o : ops) s += (s.empty() ? "" : "+") + o;
  if (s.size() > max_len) s = s.substr(0, max_len - 3) + "...";
  return s;
}

std::string trunc(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

std::string attribution_line(const Attribution& a) {
  return fmt::format(
      "wall {:.3f} ms = compute {:.3f} ms ({:.0f}%) + memory {:.3f} ms ({:.0f}%) + overhead "
      "{:.3f} ms ({:.0f}%; host gaps {:.3f} ms{})",
      a.wall_ms, a.compute_ms, 100 * a.share(Regime::compute), a.memory_ms,
      100 * a.share(Regime::memory), a.overhead_ms, 100 * a.share(Regime::overhead), a.gap_ms,
      slow_kernels_clause(a));
}


std::string class_rows(const std::vector<ClassRow>& rows) {
  std::string s = fmt::format("  {:<27} {:>7} {:>12} {:>14} {:>12}\n", "class", "kernels",
                              "FLOPs share", "runtime share", "time ms");
  double total = 0;
  for (const auto& r : rows) {
    total += r.time_ms;
    if (r.cls == kBetweenKernels)
      s += fmt::format("  {:<27} {:>7} {:>12} {:>13.1f}% {:>12.3f}\n", r.cls, "-", "-",
                       100 * r.time_share, r.time_ms);
    else
      s += fmt::format("  {:<27} {:>7} {:>11.1f}% {:>13.1f}% {:>12.3f}\n", r.cls, r.kernels,
                       100 * r.flops_share, 100 * r.time_share, r.time_ms);
  }
  s += fmt::format("  {:<27} {:>7} {:>12} {:>14} {:>12.3f}\n", "total", "", "", "", total);
  // Negative only when kernel times were taken apart from the wall (eager events against a graph
  // replay, medians without per-run samples): said, not hidden.
  if (!rows.empty() && rows.back().cls == kBetweenKernels && rows.back().time_ms < 0)
    s += fmt::format("  (the kernels' times exceed the wall by {:.3f} ms: they were not timed in "
                     "the wall's runs; see timing)\n",
                     -rows.back().time_ms);
  return s;
}

// The first `n` names, then how many more.
std::string list(const std::vector<std::string>& v, size_t n) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < n; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > n) s += fmt::format(" and {} more", v.size() - n);
  return s;
}

std::string spread(const KernelAnalysis& k) {
  if (k.p90_ms <= 0) return "-";
  return fmt::format("{:.4f}-{:.4f}", k.p10_ms, k.p90_ms);
}

}  // namespace

std::string slow_kernels_clause(const Attribution& a) {
  if (a.slow_ms <= 0.0005) return "";  // below the reports' 0.001 ms resolution
  return fmt::format(", slow tiny kernels beyond their fixed cost {:.3f} ms", a.slow_ms);
}

// The spread of the runs and the machine's load, and whether they leave the numbers usable.
std::string trust_line(const Reliability& t) {
  std::string s = fmt::format("trust: {} timed run{}", t.samples, t.samples == 1 ? "" : "s");
  if (t.samples >= 2) s += fmt::format(", wall p10 {:.4f} ms / p90 {:.4f} ms", t.wall_p10_ms, t.wall_p90_ms);
  if (t.other_busy_cpus >= 0)
    s += fmt::format(", other processes busy on {:.1f} of {} CPUs", t.other_busy_cpus, t.online_cpus);
  if (t.cpu_capacity >= 0 && t.threads > 1)
    s += fmt::format(", {} threads at {:.2f} cores' worth", t.threads, t.cpu_capacity);
  s += t.reliable ? "; reliable" : "; UNRELIABLE: " + fmt::format("{}", fmt::join(t.reasons, "; "));
  return s;
}

std::string cache_text(const CacheCheck& c, double wall_ms) {
  std::string s = fmt::format(
      "cache check: the {} library contraction kernel{} take{} {:.3f} ms in the runs (median "
      "each) and {:.3f} ms each repeated alone, cache-hot ({:+.0f}%)",
      c.kernels, c.kernels == 1 ? "" : "s", c.kernels == 1 ? "s" : "", c.in_runs_ms, c.hot_ms,
      c.hot_ms > 0 ? 100 * (c.in_runs_ms / c.hot_ms - 1) : 0.0);
  if (!c.slower) return s + ": the runs do not slow them";
  const std::string cache =
      c.cache_bytes > 0
          ? fmt::format("the {:.1f} MB {}", c.cache_bytes / 1e6, cache_level_label(c.cache_name))
                        : std::string("any cache the probe measured");
  const double share = wall_ms > 0 ? 100 * c.gap_ms() / wall_ms : 0.0;
  if (c.streams)
    s += fmt::format(
        ":\n  the {:.3f} ms between ({:.0f}% of the wall) is waiting on their {:.1f} MB of weights "
        "and activations, which outgrow {} and stream from memory each run; the roofline and the "
        "class table count it as compute",
        c.gap_ms(), share, c.bytes / 1e6, cache);
  else
    s += fmt::format(
        ":\n  {:.3f} ms ({:.0f}% of the wall), but their {:.1f} MB fit in {}, so memory traffic "
        "does not explain it (in the runs each kernel follows the others, not itself)",
        c.gap_ms(), share, c.bytes / 1e6, cache);
  if (!c.worst.empty()) s += fmt::format("\n  slowest against hot: {}", fmt::join(c.worst, ", "));
  return s;
}

std::string small_grids_text(const SmallGrids& g, double wall_ms) {
  return fmt::format(
      "small grids: {} kernel{} take{} {:.3f} ms ({:.0f}% of the wall) with fewer CTAs than the "
      "GPU's {} SMs, under half of {} roofs: idle SMs and latency, not bandwidth or FLOPs, "
      "set their time (slowest: {})",
      g.kernels, g.kernels == 1 ? "" : "s", g.kernels == 1 ? "s" : "", g.time_ms,
      wall_ms > 0 ? 100 * g.time_ms / wall_ms : 0.0, g.sms, g.kernels == 1 ? "its" : "their",
      fmt::join(g.worst, ", "));
}

std::string idle_gaps_text(const IdleGaps& g, double wall_ms) {
  return fmt::format("idle between kernels: {:.3f} ms ({:.0f}% of the wall) over {} boundar{} "
                     "(longest: {})",
                     g.total_ms, wall_ms > 0 ? 100 * g.total_ms / wall_ms : 0.0, g.boundaries,
                     g.boundaries == 1 ? "y" : "ies", fmt::join(g.worst, ", "));
}

std::string render_table(const Report& r) {
  const Ceilings& c = r.ceilings;
  std::string s;
  auto peak = [&](const char* p) { return c.peak_gflops.count(p) ? c.peak_gflops.at(p) : 0.0; };
  if (c.backend == "cuda") {
    s += fmt::format("brrr doctor: {} ({} kernels on {}, {}, {} SMs)\n", r.model,
                     r.kernels.size(), r.profile.backend, c.cpu_model, c.threads);
    s += fmt::format(
        "ceilings (measured, brrr probe): {:.1f} GB/s, {:.1f} TFLOP/s fp32 CUDA cores, {:.1f} "
        "bf16 / {:.1f} tf32 Tensor Cores, launch {:.2f} us, graph node {:.2f} us\n",
        c.bandwidth_gbs, peak("fp32") / 1e3, peak("bf16") / 1e3, peak("tf32") / 1e3, c.launch_us,
        c.graph_node_us);
    // The source (CUPTI records of the graph replays, or the event-timed fallback) is the
    // timing line's to say; this line must not name one.
    s += "kernel times: GPU busy time per kernel (host launch gaps excluded); idle gaps between "
         "kernels count as overhead\n";
  } else {
    // The threads the measured runs used (the session's), not the probe's.
    const int threads = r.profile.threads > 0 ? r.profile.threads : c.threads;
    s += fmt::format("brrr doctor: {} ({} kernels on {}, {} thread{})\n", r.model, r.kernels.size(),
                     r.profile.backend, threads, threads == 1 ? "" : "s");
    s += fmt::format(
        "ceilings (measured, brrr probe): {:.1f} GB/s, {:.1f} GFLOP/s fp32, dispatch {:.2f} us, "
        "kernel call + fork/join {:.2f} us\n",
        c.bandwidth_gbs, peak("fp32"), c.dispatch_us, c.kernel_call_us + c.fork_join_us);
  }
  s += "conventions: FLOPs = 2 per multiply-add, 1 per other arithmetic op; special functions "
       "priced per function at measured throughput; bytes = compulsory (inputs read once, "
       "outputs written once)\n\n";
  s += trust_line(r.reliability) + "\n";
  if (!r.timing.empty()) s += "timing: " + r.timing + "\n";
  s += attribution_line(r.attribution) + "\n\n";

  std::vector<const KernelAnalysis*> top;
  for (const auto& k : r.kernels) top.push_back(&k);
  std::stable_sort(top.begin(), top.end(),
                   [](auto* a, auto* b) { return a->rec.time_ms > b->rec.time_ms; });
  if (int(top.size()) > r.top) top.resize(size_t(r.top));
  s += fmt::format("top {} kernels by time:\n", top.size());
  s += fmt::format("  {:<24} {:<28} {:<13} {:>10} {:>15} {:>10} {:>7} {:>9} {:>8} {:<4}  {}\n",
                   "kernel", "ops", "class", "time ms", "p10-p90 ms", "floor ms", "eff",
                   "GFLOP/s", "GB/s", "roof", "regime");
  for (const auto* k : top) {
    double t = std::max(k->rec.time_ms, 1e-9) * 1e-3;
    s += fmt::format(
        "  {:<24} {:<28} {:<13} {:>10.4f} {:>15} {:>10.4f} {:>6.1f}% {:>9.2f} {:>8.2f} {:<4}  {}\n",
        trunc(k->rec.name, 24), join_ops(k->rec.ops), op_class_name(k->rec.cls), k->rec.time_ms,
        spread(*k), k->floor_ms, 100 * k->efficiency, k->rec.cost.flops / t / 1e9, k->rec.cost.bytes / t / 1e9,
        k->roof, regime_name(k->regime));
    // A number above its roof is never shown without why, right under it.
    if (!k->over_reason.empty()) s += "    eff > 100%: " + k->over_reason + "\n";
    if (!k->outlier_note.empty()) s += "    " + k->outlier_note + "\n";
    if (!k->grid_note.empty()) s += "    " + k->grid_note + "\n";
    if (!k->rec.layout_note.empty())
      s += "    converts layouts inside each run: " + k->rec.layout_note +
           " (those bytes are in its GB/s and memory floor)\n";
  }
  s += "\nclass table (share of FLOPs vs share of the wall):\n" + class_rows(r.classes);
  if (r.cache) s += "\n" + cache_text(*r.cache, r.attribution.wall_ms) + "\n";
  if (r.grids) s += "\n" + small_grids_text(*r.grids, r.attribution.wall_ms) + "\n";
  if (r.gaps) s += "\n" + idle_gaps_text(*r.gaps, r.attribution.wall_ms) + "\n";

  if (r.batch) {
    s += "\nbatch scaling (time = a + c * batch and time = k * batch^e, least squares):\n";
    for (const auto& p : r.batch->points)
      s += fmt::format("  batch {:>6}: {:.3f} ms\n", p.batch, p.ms);
    s += fmt::format("  a = {:.3f} ms, c = {:.4f} ms/item\n  {}\n", r.batch->fixed_ms,
                     r.batch->per_item_ms, r.batch->verdict);
  } else if (!r.batch_error.empty()) {
    s += "\nbatch scaling: not run: " + r.batch_error + "\n";
  }

  s += "\nremedies (predicted before applying; predictions keep what a remedy does not change):\n";
  s += fmt::format("  {:<13} {:>10} {:>14} {:>13}  {}\n", "remedy", "gain ms", "predicted ms",
                   "measured ms", "how");
  for (const auto& rm : r.remedies) {
    s += fmt::format(
        "  {:<13} {:>10.3f} {:>14.3f} {:>13}  {}\n", rm.name, rm.gain_ms, rm.predicted_ms,
        rm.measured_ms ? fmt::format("{:.3f}", *rm.measured_ms) : std::string("-"),
        rm.action.empty() ? rm.detail : rm.action);
    if (!rm.action.empty()) s += "      why: " + rm.detail + "\n";
    if (!rm.kernels.empty()) s += "      kernels: " + list(rm.kernels, 8) + "\n";
    if (!rm.nodes.empty()) s += "      ONNX nodes: " + list(rm.nodes, 8) + "\n";
    const size_t shown = std::min<size_t>(rm.boundaries.size(), 8);
    for (size_t i = 0; i < shown; ++i) s += "      boundary: " + rm.boundaries[i] + "\n";
    if (rm.boundaries.size() > shown)
      s += fmt::format("      ({} more boundaries in --json and --html)\n",
                       rm.boundaries.size() - shown);
  }
  if (!r.checks.empty()) {
    s += "\nremedies applied one at a time (--compare; interleaved rounds, each side its median "
         "round):\n";
    s += fmt::format("  {:<13} {:>10} {:>14} {:>13} {:>7} {:>20}  {}\n", "remedy", "before ms",
                     "predicted ms", "measured ms", "error", "steady: pred / meas",
                     "what changed");
    for (const auto& k : r.checks) {
      s += fmt::format("  {:<13} {:>10.3f} {:>14.3f} {:>13.3f} {:>6.1f}% {:>8.3f} / {:.3f} "
                       "{:>+5.0f}%  {}\n",
                       k.remedy, k.before_ms, k.predicted_ms, k.measured_ms, 100 * k.error(),
                       k.predicted_steady_ms, k.measured_steady_ms, 100 * k.steady_error(), k.how);
      if (k.library_before_ms > 0 || k.library_after_ms > 0)
        s += fmt::format("      library kernels (steady): {:.3f} -> {:.3f} ms{}\n",
                         k.library_before_ms, k.library_after_ms,
                         k.library_alone_ms >= 0
                             ? fmt::format(" (those but GEMMs priced at their time alone in "
                                           "the fused plan: {:.3f} ms)",
                                           k.library_alone_ms)
                         : k.remedy == "fusion"
                             ? std::string(" (fusion's prediction keeps them, convs and pools at "
                                           "most the library's probed rate)")
                             : std::string());
      for (const auto& c : k.changes) s += "      measured change: " + c + "\n";
      if (!k.unreliable.empty()) s += "      unreliable: " + k.unreliable + "\n";
    }
  }
  if (r.after) {
    s += "\nafter (compare profile, " + r.after_profile->backend + "):\n  " +
         attribution_line(*r.after) + "\n" + class_rows(r.after_classes);
  }
  s += "\nverdict: " + r.verdict.advice + "\n";
  return s;
}

}  // namespace brrr::doctor
