// The batch-scaling test: two fits, time = a + c * batch and time = k * batch^e (least squares on
// logs). Growth is named only when one of them fits every point closely; on a loaded machine the
// points are noise, and then the sweep says it cannot classify, and why.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "brrr/doctor.hpp"
#include "brrr/error.hpp"

namespace brrr::doctor {

namespace {

// A fit is good when no point is further than this from it, relative to the point. R^2 alone
// cannot say it: flat timings have almost no variance to explain, so a perfect flat fit can
// score an R^2 near 0.
constexpr double kGoodResidual = 0.10;
// The power law's exponent bands: below kFlat time barely grows over the range, inside
// [kLinearLo, kLinearHi] it grows with batch, above kLinearHi faster than batch.
constexpr double kFlat = 0.15, kLinearLo = 0.85, kLinearHi = 1.15;

struct Line {
  double slope = 0, intercept = 0;
};

Line least_squares(const std::vector<double>& x, const std::vector<double>& y) {
  double n = double(x.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i];
  double den = n * sxx - sx * sx;
  BRRR_CHECK(den > 0, "batch scaling needs at least two different batch sizes");
  Line l;
  l.slope = (n * sxy - sx * sy) / den;
  l.intercept = (sy - l.slope * sx) / n;
  return l;
}

// R^2 and the largest |y - fit| / y of a fit's predictions `f` of `y`.
std::pair<double, double> quality(const std::vector<double>& y, const std::vector<double>& f) {
  double mean = 0;
  for (double v : y) mean += v;
  mean /= double(y.size());
  double ss_res = 0, ss_tot = 0, worst = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    ss_res += (y[i] - f[i]) * (y[i] - f[i]);
    ss_tot += (y[i] - mean) * (y[i] - mean);
    worst = std::max(worst, y[i] > 0 ? std::abs(y[i] - f[i]) / y[i] : INFINITY);
  }
  return {ss_tot > 0 ? 1 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0), worst};
}

}  // namespace

std::string growth_name(Growth g) {
  switch (g) {
    case Growth::flat: return "flat";
    case Growth::sublinear: return "sublinear";
    case Growth::linear: return "linear";
    case Growth::superlinear: return "superlinear";
    default: return "unclassified";
  }
}

BatchScaling fit_batch_scaling(const std::vector<BatchPoint>& pts, double other_busy_cpus,
                               int online_cpus) {
  BRRR_CHECK(pts.size() >= 2, "batch scaling needs at least two batch sizes, got {}", pts.size());
  BatchScaling s;
  s.points = pts;
  s.other_busy_cpus = other_busy_cpus;
  s.online_cpus = online_cpus;
  // assess_reliability's threshold: half a CPU busy elsewhere on average.
  const bool loaded = other_busy_cpus >= 0.5;
  const std::string load =
      loaded ? fmt::format("other processes kept {:.1f} of {} CPUs busy during the sweep",
                           other_busy_cpus, online_cpus)
             : std::string();
  std::vector<double> x, y, lx, ly;
  bool positive = true;
  for (const auto& p : pts) {
    x.push_back(double(p.batch)), y.push_back(p.ms);
    positive = positive && p.batch > 0 && p.ms > 0;
  }
  Line lin = least_squares(x, y);
  s.per_item_ms = lin.slope;
  s.fixed_ms = lin.intercept;
  const auto &first = pts.front(), &last = pts.back();
  s.growth = first.ms > 0 ? last.ms / first.ms : 0;
  s.batch_ratio = double(last.batch) / double(first.batch);
  s.fixed_share = first.ms > 0 ? std::max(0.0, s.fixed_ms) / first.ms : 0;
  std::vector<double> f;
  for (double v : x) f.push_back(lin.intercept + lin.slope * v);
  std::tie(s.r2, s.max_residual) = quality(y, f);
  if (positive) {
    for (size_t i = 0; i < x.size(); ++i) lx.push_back(std::log(x[i])), ly.push_back(std::log(y[i]));
    Line pw = least_squares(lx, ly);
    s.exponent = pw.slope;
    std::vector<double> fp;
    for (double v : lx) fp.push_back(std::exp(pw.intercept + pw.slope * v));
    std::tie(s.power_r2, s.power_max_residual) = quality(y, fp);
  } else {
    s.power_max_residual = INFINITY;
  }
  const std::string fit = fmt::format(
      "time grows {:.2f}x for {:.0f}x the batch; linear fit a = {:.3f} ms + {:.4f} ms/item "
      "(R^2 {:.3f}, worst point {:.0f}% off), power law exponent {:.2f} (R^2 {:.3f}, worst point "
      "{:.0f}% off)",
      s.growth, s.batch_ratio, s.fixed_ms, s.per_item_ms, s.r2, 100 * s.max_residual, s.exponent,
      s.power_r2, 100 * s.power_max_residual);
  const bool linear_good = s.max_residual <= kGoodResidual;
  const bool power_good = s.power_max_residual <= kGoodResidual;
  if (!linear_good && !power_good) {
    s.verdict = fit + fmt::format(": cannot classify: neither fit comes within {:.0f}% of every "
                                  "point, so {}; rerun on a quiet machine",
                                  100 * kGoodResidual,
                                  loaded ? "the timings are noise: " + load
                                         : std::string("the timings are noise (a loaded "
                                                       "machine?) or the growth is irregular"));
    return s;
  }
  // The exponent names the growth; a superlinear claim needs the power law itself to fit.
  if (s.exponent < kFlat)
    s.growth_class = Growth::flat;
  else if (s.exponent > kLinearHi)
    s.growth_class = power_good ? Growth::superlinear : Growth::unclassified;
  else if (s.exponent >= kLinearLo)
    s.growth_class = Growth::linear;
  else
    s.growth_class = Growth::sublinear;
  s.overhead_bound = s.growth_class == Growth::flat ||
                     (s.growth_class == Growth::sublinear && s.fixed_share > 0.5);
  switch (s.growth_class) {
    case Growth::flat:
      s.verdict = fit + fmt::format(": flat, overhead-bound: a fixed {:.3f} ms per run dominates; "
                                    "batch more, or cut the fixed cost",
                                    std::max(s.fixed_ms, 0.0));
      break;
    case Growth::sublinear:
      s.verdict = fit + fmt::format(": sublinear: a fixed {:.3f} ms per run ({:.0f}% of batch {}) "
                                    "amortized by bigger batches; {}",
                                    s.fixed_ms, 100 * s.fixed_share, first.batch,
                                    s.overhead_bound ? "overhead-bound at this batch"
                                                     : "throughput-bound past it");
      break;
    case Growth::linear:
      s.verdict = fit + ": linear, throughput-bound: each item costs the same, a bigger batch "
                        "does not amortize anything";
      break;
    case Growth::superlinear:
      s.verdict = fit + ": superlinear: time per item grows with the batch (a working set "
                        "outgrowing a cache, or a kernel whose cost grows faster than its input)";
      break;
    default:
      s.verdict = fit + ": cannot classify: the exponent says faster than linear but the power "
                        "law does not fit the points";
  }
  if (loaded) s.verdict += " (unreliable: " + load + ")";
  return s;
}

}  // namespace brrr::doctor
