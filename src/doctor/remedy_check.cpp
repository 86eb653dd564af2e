// A remedy's prediction against its measurement: the doctor diagnoses the run without the remedy
// (as it would for a user who has not applied it yet) and the run with it gives the wall.
#include <fmt/format.h>

#include <algorithm>

#include "brrr/doctor.hpp"
#include "core/median.hpp"

namespace brrr::doctor {

double steady_ms(const RunProfile& p) {
  const size_t runs = p.wall_samples_ms.size();
  bool per_run = p.kernels_in_wall_runs && runs > 0 && !p.kernels.empty();
  for (const auto& k : p.kernels) per_run = per_run && k.samples_ms.size() == runs;
  if (!per_run) return p.wall_ms;
  double kernels = 0;
  std::vector<double> gaps = p.wall_samples_ms;
  for (const auto& k : p.kernels) {
    kernels += median(k.samples_ms);
    for (size_t r = 0; r < runs; ++r) gaps[r] -= k.samples_ms[r];
  }
  return kernels + std::max(0.0, median(gaps));
}

namespace {

double library_steady_ms(const RunProfile& p) {
  double t = 0;
  for (const auto& k : p.kernels)
    if (k.kind == "library") t += k.samples_ms.empty() ? k.time_ms : median(k.samples_ms);
  return t;
}

}  // namespace

RemedyCheck check_remedy(const std::string& remedy, const std::string& how,
                         const RunProfile& before, const RunProfile& after, const Ceilings& c,
                         const DoctorOptions& opts) {
  DoctorOptions o = opts;
  o.compare = nullptr;
  o.batch_runner = nullptr;
  const Report r = diagnose(before, c, o);
  RemedyCheck k;
  k.remedy = remedy;
  k.how = how;
  k.before_ms = r.attribution.wall_ms;
  k.predicted_ms = k.before_ms;
  for (const Remedy& rm : r.remedies)
    if (rm.name == remedy) {
      k.predicted_ms = rm.predicted_ms;
      k.action = rm.action;
    }
  k.measured_ms = one_timeline(after).wall_ms;
  // The gain is the doctor's; only the times it is taken from and compared with are steadier.
  k.before_steady_ms = steady_ms(before);
  k.predicted_steady_ms = std::max(0.0, k.before_steady_ms - (k.before_ms - k.predicted_ms));
  k.measured_steady_ms = steady_ms(after);
  k.library_before_ms = library_steady_ms(before);
  k.library_after_ms = library_steady_ms(after);
  std::string why;
  auto note = [&](const char* which, const Reliability& t) {
    for (const auto& s : t.reasons) why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", which, s);
  };
  note("without", r.reliability);
  note("with", assess_reliability(after, c));
  k.unreliable = why;
  return k;
}

}  // namespace brrr::doctor
