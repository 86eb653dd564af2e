// diagnose(): the doctor's one entry point, from a profile and ceilings to a Report.
#include <fmt/format.h>

#include <cxxabi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "brrr/doctor.hpp"
#include "core/machine_load.hpp"
#include "core/median.hpp"

namespace brrr::doctor {

namespace {

// A GPU kernel's name as the doctor prints it: demangled, without its return type, template
// arguments and parameters, at most 60 characters ("splitKreduce_kernel" for
// "_Z19splitKreduce_kernelILi32ELi16Ei..."); cuBLASLt's unmangled names stay whole up to that.
std::string short_kernel_name(const std::string& name) {
  std::string s = name;
  if (s.rfind("_Z", 0) == 0) {
    int status = 0;
    char* d = abi::__cxa_demangle(s.c_str(), nullptr, nullptr, &status);
    if (status == 0 && d) s = d;
    std::free(d);
  }
  const size_t cut = s.find_first_of("<(");
  if (cut != std::string::npos) s.resize(cut);
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::vector<KernelAnalysis> analyze_all(const RunProfile& p, const Ceilings& c) {
  std::vector<KernelAnalysis> out;
  const double weights = model_weight_bytes(p);
  for (const auto& k : p.kernels) {
    KernelAnalysis a = analyze_kernel(k, c, weights);
    a.p10_ms = percentile(k.samples_ms, 10);
    a.p90_ms = percentile(k.samples_ms, 90);
    // One timeline keeps a spike of the reported run in its time (the wall paid it), but a
    // kernel judged by it alone reads as slow (ShuffleNet-v2's k122_conv: 0.183 ms, "overhead",
    // 0.3% efficient, in a run where its median over the five was 0.005 ms).
    if (k.samples_ms.size() >= 3) {
      const double med = median(k.samples_ms);
      if (k.time_ms > 3 * med && k.time_ms - med > 0.02)
        a.outlier_note = fmt::format(
            "an outlier in the reported run: median {:.4f} ms over {} runs (this row's regime and "
            "efficiency are that run's)",
            med, k.samples_ms.size());
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

std::optional<CacheCheck> cache_check(const RunProfile& p, const std::vector<KernelRecord>& hot,
                                      const Ceilings& ceil) {
  std::map<std::string, double> hot_ms;
  for (const auto& k : hot)
    if (!k.samples_ms.empty()) hot_ms[k.name] = median(k.samples_ms);
  CacheCheck c;
  std::vector<std::pair<double, std::string>> gaps;
  for (const auto& k : p.kernels) {
    if (k.kind != "library" || k.cls != OpClass::contraction) continue;
    const auto it = hot_ms.find(k.name);
    if (it == hot_ms.end()) continue;
    // The kernel's median over the runs, not the reported run's time: one spike is not a cache.
    const double run = k.samples_ms.empty() ? k.time_ms : median(k.samples_ms);
    ++c.kernels;
    c.in_runs_ms += run;
    c.hot_ms += it->second;
    c.bytes += k.cost.bytes;
    gaps.push_back({run - it->second,
                    fmt::format("{} ({:.3f} -> {:.3f} ms)", k.name, run, it->second)});
  }
  if (c.kernels == 0) return std::nullopt;
  std::sort(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < gaps.size() && i < 3 && gaps[i].first > 0; ++i)
    c.worst.push_back(gaps[i].second);
  for (const auto& l : ceil.cache_roofs())  // (older probe caches: their one level)
    if (l.gbs > 1.2 * ceil.bandwidth_gbs && l.bytes > c.cache_bytes)
      c.cache_name = l.name, c.cache_bytes = l.bytes;
  c.slower = c.gap_ms() > 0.05 * c.hot_ms && c.gap_ms() > 0.02 * p.wall_ms;
  c.streams = c.slower && c.bytes > c.cache_bytes;
  return c;
}

std::optional<SmallGrids> small_grids(const std::vector<KernelAnalysis>& ks, const Ceilings& c) {
  SmallGrids g;
  g.sms = c.threads;
  std::vector<const KernelAnalysis*> hit;
  for (const auto& k : ks)
    if (!k.grid_note.empty()) ++g.kernels, g.time_ms += k.rec.time_ms, hit.push_back(&k);
  if (g.kernels == 0) return std::nullopt;
  std::stable_sort(hit.begin(), hit.end(),
                   [](auto* a, auto* b) { return a->rec.time_ms > b->rec.time_ms; });
  for (size_t i = 0; i < hit.size() && i < 3; ++i)
    g.worst.push_back(fmt::format("{} ({} CTA{}, {:.4f} ms)", hit[i]->rec.name, hit[i]->rec.grid_ctas,
                                  hit[i]->rec.grid_ctas == 1 ? "" : "s", hit[i]->rec.time_ms));
  return g;
}

std::optional<IdleGaps> idle_gaps(const RunProfile& p) {
  if (p.kernels.empty() || p.wall_ms <= 0) return std::nullopt;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const KernelRecord& k = p.kernels[i];
    // Real timestamps of this run (not the CPU plan's cumulative starts), one stream.
    if (k.start_samples_ms.empty() || k.lane != p.kernels[0].lane) return std::nullopt;
    if (i && k.start_ms + 1e-9 < p.kernels[i - 1].start_ms) return std::nullopt;
  }
  IdleGaps g;
  std::vector<std::pair<double, std::string>> at;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const KernelRecord& k = p.kernels[i];
    const bool last = i + 1 == p.kernels.size();
    const double next = last ? p.wall_ms : p.kernels[i + 1].start_ms;
    const double idle = next - k.start_ms - k.time_ms;
    if (idle < 1e-6) continue;  // under a nanosecond: none
    g.total_ms += idle;
    ++g.boundaries;
    std::string acts;
    if (k.gpu_activities > 1) {
      std::string names;
      for (const std::string& a : k.gpu_activity_names)
        names += (names.empty() ? ": " : ", ") + short_kernel_name(a);
      acts = fmt::format(" ({} GPU activities{})", k.gpu_activities, names);
    }
    // Starts count from the run's first kernel, the wall from before its launch: the last
    // boundary's idle time is the run's launch (before the first kernel) and completion (after
    // the last) together.
    at.push_back({idle, last ? fmt::format("launch and completion (before {}, after {}{}) {:.4f} ms",
                                           p.kernels[0].name, k.name, acts, idle)
                             : fmt::format("{}{} -> {} {:.4f} ms", k.name, acts, p.kernels[i + 1].name, idle)});
  }
  if (g.boundaries == 0) return std::nullopt;
  std::stable_sort(at.begin(), at.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < at.size() && i < 3; ++i) g.worst.push_back(at[i].second);
  return g;
}

Report diagnose(const RunProfile& measured, const Ceilings& c, const DoctorOptions& opts) {
  Report r;
  r.model = opts.model;
  r.ceilings = c;
  // Every number below comes from this one timeline (the run whose wall is reported).
  const RunProfile p = one_timeline(measured, &r.timing);
  r.profile = p;
  r.top = opts.top;
  r.kernels = analyze_all(p, c);
  r.attribution = attribute(p, r.kernels);
  r.classes = class_table(r.kernels, r.attribution.wall_ms);
  r.cache = cache_check(p, opts.hot_kernels, c);
  if (opts.batch_runner) {
    try {
      std::vector<BatchPoint> pts;
      int64_t b = std::max<int64_t>(1, opts.base_batch);
      LoadMeter load;
      for (int i = 0; i < std::max(2, opts.batch_steps); ++i, b *= 2)
        pts.push_back({b, opts.batch_runner(b)});
      // /proc/stat counts in 10 ms ticks: a sweep shorter than 0.2 s is followed by a short
      // wait, as Session::profile does, so the load figure means something.
      if (const double e = load.elapsed_s(); e < 0.2)
        std::this_thread::sleep_for(std::chrono::duration<double>(0.2 - e));
      r.batch = fit_batch_scaling(pts, load.other_busy_cpus(), LoadMeter::online_cpus());
    } catch (const std::exception& e) {
      r.batch_error = e.what();
    }
  }
  r.remedies = predict_remedies(p, r.kernels, r.attribution, c, opts);
  r.verdict = make_verdict(r.attribution, r.remedies, r.batch);
  r.grids = small_grids(r.kernels, c);
  r.gaps = idle_gaps(p);
  // Where small grids are a fifth of the wall, the regime split alone would point at bandwidth.
  if (r.grids && r.attribution.wall_ms > 0 && r.grids->time_ms >= 0.2 * r.attribution.wall_ms)
    r.verdict.advice += fmt::format(
        " Small grids: {} kernel{} ({:.0f}% of the wall) launch fewer CTAs than the {} SMs and "
        "wait on latency; more work per kernel (a larger batch, merged or persistent kernels) "
        "is what shortens them.",
        r.grids->kernels, r.grids->kernels == 1 ? "" : "s",
        100 * r.grids->time_ms / r.attribution.wall_ms, r.grids->sms);
  r.reliability = assess_reliability(p, c);
  if (!r.reliability.reliable) {
    std::string why;
    for (const auto& s : r.reliability.reasons) why += (why.empty() ? "" : "; ") + s;
    r.verdict.advice = "unreliable measurements: " + why +
                       ". Rerun on a quiet machine (and `brrr probe --refresh` if the ceilings "
                       "are suspect) before acting on this. As measured: " +
                       r.verdict.advice;
  }
  if (opts.compare) {
    const RunProfile q = one_timeline(*opts.compare);
    r.after_profile = q;
    r.after_kernels = analyze_all(q, c);
    r.after = attribute(q, r.after_kernels);
    r.after_classes = class_table(r.after_kernels, r.after->wall_ms);
    // The compare run applied these remedies together: predicted = wall minus their gains.
    std::vector<std::string> applied = opts.applied;
    if (applied.empty())
      for (const auto& rm : r.remedies) applied.push_back(rm.name);
    Remedy combined;
    combined.name = "applied";
    double gain = 0;
    std::string names;
    for (auto& rm : r.remedies)
      if (std::find(applied.begin(), applied.end(), rm.name) != applied.end()) {
        gain += rm.gain_ms;
        names += (names.empty() ? "" : " + ") + rm.name;
        if (applied.size() == 1) rm.measured_ms = q.wall_ms;
      }
    // Each gain was bounded already by the roof that remedy can reach (fusion lowers the floors
    // it removes bytes from); the sum is bounded by the wall only.
    combined.gain_ms = std::clamp(gain, 0.0, r.attribution.wall_ms);
    combined.predicted_ms = r.attribution.wall_ms - combined.gain_ms;
    combined.measured_ms = q.wall_ms;
    combined.detail = "applied together: " + names + " (measured: " +
                      (q.backend.empty() ? std::string("compare profile") : q.backend) + ")";
    r.remedies.push_back(combined);
  }
  return r;
}

}  // namespace brrr::doctor
