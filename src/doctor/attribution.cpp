// Whole-model attribution (wall = compute + memory + overhead) and the class table.
#include <algorithm>

#include "brrr/doctor.hpp"

namespace brrr::doctor {

double Attribution::share(Regime r) const {
  double total = compute_ms + memory_ms + overhead_ms;
  if (total <= 0) return 0;
  double v = r == Regime::compute ? compute_ms : r == Regime::memory ? memory_ms : overhead_ms;
  return v / total;
}

Attribution attribute(const RunProfile& p, const std::vector<KernelAnalysis>& ks) {
  Attribution a;
  for (const auto& k : ks) {
    a.kernel_ms += k.rec.time_ms;
    if (k.regime == Regime::compute)
      a.compute_ms += k.rec.time_ms;
    else if (k.regime == Regime::memory)
      a.memory_ms += k.rec.time_ms;
    else {
      a.overhead_ms += k.rec.time_ms;
      // Past 4x its fixed cost a kernel is not waiting on its launch.
      if (k.rec.time_ms > 4 * k.overhead_ms) a.slow_ms += k.rec.time_ms - k.overhead_ms;
    }
  }
  // Gaps: time the host spent between kernels (dispatch, allocation, bookkeeping). With one lane
  // the kernels cannot overlap, so kernel time beyond the wall is timing noise and is scaled away.
  a.wall_ms = p.wall_ms > 0 ? p.wall_ms : a.kernel_ms;
  a.gap_ms = std::max(0.0, a.wall_ms - a.kernel_ms);
  a.overhead_ms += a.gap_ms;
  double total = a.compute_ms + a.memory_ms + a.overhead_ms;
  if (total > a.wall_ms && total > 0) {
    double s = a.wall_ms / total;
    a.compute_ms *= s, a.memory_ms *= s, a.overhead_ms *= s, a.slow_ms *= s;
  }
  return a;
}

const char* const kBetweenKernels = "between kernels / dispatch";

std::vector<ClassRow> class_table(const std::vector<KernelAnalysis>& ks, double wall_ms) {
  const char* names[] = {"contraction", "normalization", "elementwise", "movement"};
  std::vector<ClassRow> rows(4);
  for (int i = 0; i < 4; ++i) rows[i].cls = names[i];
  double flops = 0, time = 0;
  for (const auto& k : ks) {
    ClassRow& r = rows[size_t(k.rec.cls)];
    r.kernels++;
    r.flops += k.rec.cost.flops;
    for (const auto& [fn, n] : k.rec.cost.special) r.special += n;
    r.bytes += k.rec.cost.bytes;
    r.time_ms += k.rec.time_ms;
    flops += k.rec.cost.flops;
    time += k.rec.time_ms;
  }
  // The wall not spent in kernels is a row of its own, never spread over the classes: it is the
  // host's time between kernels (dispatch, the timing itself, preemption under load).
  if (wall_ms > 0) {
    ClassRow gap;
    gap.cls = kBetweenKernels;
    gap.time_ms = wall_ms - time;
    rows.push_back(gap);
    time = wall_ms;
  }
  for (auto& r : rows) {
    r.flops_share = flops > 0 ? r.flops / flops : 0;
    r.time_share = time > 0 ? r.time_ms / time : 0;
  }
  return rows;
}

}  // namespace brrr::doctor
