// A remedy's prediction against its measurement: the doctor diagnoses the run without the remedy
// (as it would for a user who has not applied it yet) and the run with it gives the wall.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

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

double steady_kernel_ms(const KernelRecord& k) {
  return k.samples_ms.empty() ? k.time_ms : median(k.samples_ms);
}

std::string kernel_list(const std::vector<const KernelRecord*>& ks, double ms) {
  if (ks.empty()) return "no kernel with these ONNX nodes (the plan renamed or removed them)";
  std::string names;
  const size_t shown = std::min<size_t>(ks.size(), 3);
  for (size_t i = 0; i < shown; ++i) names += (i ? ", " : "") + ks[i]->name;
  if (ks.size() > shown) names += ", ...";
  return ks.size() == 1 ? fmt::format("{} ({:.3f} ms)", names, ms)
                        : fmt::format("{} ({} kernels, {:.3f} ms)", names, ks.size(), ms);
}

// Kernels of `before` and `after` joined where they cover a common ONNX node (union-find over
// both plans' kernels), each group's steady time on either side; the largest changes first.
std::vector<std::string> measured_changes(const RunProfile& before, const RunProfile& after,
                                          size_t top = 3) {
  const size_t nb = before.kernels.size(), n = nb + after.kernels.size();
  std::vector<size_t> parent(n);
  for (size_t i = 0; i < n; ++i) parent[i] = i;
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  std::map<std::string, size_t> owner;  // node -> the first kernel seen covering it
  auto kernel_at = [&](size_t i) -> const KernelRecord& {
    return i < nb ? before.kernels[i] : after.kernels[i - nb];
  };
  for (size_t i = 0; i < n; ++i)
    for (const auto& node : kernel_at(i).nodes) {
      auto [it, fresh] = owner.emplace(node, i);
      if (!fresh) parent[find(i)] = find(it->second);
    }
  struct Group {
    std::vector<const KernelRecord*> b, a;
    double b_ms = 0, a_ms = 0;
  };
  std::map<size_t, Group> groups;
  for (size_t i = 0; i < n; ++i) {
    Group& g = groups[find(i)];
    (i < nb ? g.b : g.a).push_back(&kernel_at(i));
    (i < nb ? g.b_ms : g.a_ms) += steady_kernel_ms(kernel_at(i));
  }
  std::vector<const Group*> order;
  for (const auto& [root, g] : groups) order.push_back(&g);
  std::stable_sort(order.begin(), order.end(), [](const Group* x, const Group* y) {
    return std::abs(x->a_ms - x->b_ms) > std::abs(y->a_ms - y->b_ms);
  });
  std::vector<std::string> out;
  for (size_t i = 0; i < std::min(top, order.size()); ++i)
    out.push_back(kernel_list(order[i]->b, order[i]->b_ms) + " -> " +
                  kernel_list(order[i]->a, order[i]->a_ms));
  return out;
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
  if (remedy == "fusion")
    for (const KernelRecord& f : o.fused_kernels)
      if (priced_alone(f))
        k.library_alone_ms = std::max(k.library_alone_ms, 0.0) + median(f.samples_ms);
  k.changes = measured_changes(before, after);
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
