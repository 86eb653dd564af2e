// One timeline: the kernel times the doctor reports come from the run whose wall it reports, so
// the class table, the attribution and the top-kernel table add up to that wall.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "brrr/doctor.hpp"
#include "core/median.hpp"

namespace brrr::doctor {

namespace {

// Whether every kernel carries one sample per timed run, taken inside those runs.
bool has_run_samples(const RunProfile& p) {
  if (!p.kernels_in_wall_runs || p.wall_samples_ms.empty() || p.kernels.empty()) return false;
  for (const auto& k : p.kernels)
    if (k.samples_ms.size() != p.wall_samples_ms.size()) return false;
  return true;
}

}  // namespace

// The median of per-kernel medians is not one run: under load, a kernel slowed in one run and
// another slowed in the next both keep a high median while the median wall is a quiet run, and
// the kernels then "take" more than the wall. So the report uses one run, the median one (the
// run median() picks, always a measured run), and its kernels as they ran in it; the other runs
// give each kernel's spread.
RunProfile one_timeline(const RunProfile& p, std::string* how) {
  RunProfile q = p;
  const std::string source = p.timing_source.empty() ? "" : p.timing_source + "; ";
  if (!has_run_samples(p)) {
    if (how)
      *how = p.kernels.empty() ? source + "no kernels"
                               : source + "kernel times are medians over runs timed apart from "
                                          "the wall (no per-run samples): they need not add up "
                                          "to it";
    return q;
  }
  std::vector<size_t> order(p.wall_samples_ms.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return p.wall_samples_ms[a] < p.wall_samples_ms[b];
  });
  const size_t run = order[order.size() / 2];  // median(): the upper middle of the sorted walls
  q.wall_ms = p.wall_samples_ms[run];
  // Starts: the run's own when the executor kept them per run (CUPTI's timestamps), the reference
  // executor's real offsets (of this same run), else the CPU plan's cumulative kernel times,
  // recomputed for the times now reported.
  const bool cumulative = p.backend != "reference";
  double start = 0;
  for (auto& k : q.kernels) {
    k.time_ms = k.samples_ms[run];
    if (k.start_samples_ms.size() == p.wall_samples_ms.size()) k.start_ms = k.start_samples_ms[run];
    else if (cumulative) k.start_ms = start;
    start += k.time_ms;
  }
  if (how)
    *how = fmt::format("{}kernel times from the median run ({} of {} by wall time), the same run as "
                       "the wall; p10-p90 over all {} runs",
                       source, order.size() / 2 + 1, order.size(), order.size());
  return q;
}

}  // namespace brrr::doctor
