// The batch-scaling test: time = a + c * batch by least squares; sublinear growth means the model
// pays a fixed cost per run (overhead) that a bigger batch amortizes.
#include <fmt/format.h>

#include "brrr/doctor.hpp"
#include "brrr/error.hpp"

namespace brrr::doctor {

BatchScaling fit_batch_scaling(const std::vector<BatchPoint>& pts) {
  BRRR_CHECK(pts.size() >= 2, "batch scaling needs at least two batch sizes, got {}", pts.size());
  BatchScaling s;
  s.points = pts;
  double n = double(pts.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& p : pts) {
    double x = double(p.batch), y = p.ms;
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  double den = n * sxx - sx * sx;
  BRRR_CHECK(den > 0, "batch scaling needs at least two different batch sizes");
  s.per_item_ms = (n * sxy - sx * sy) / den;
  s.fixed_ms = (sy - s.per_item_ms * sx) / n;
  const auto &first = pts.front(), &last = pts.back();
  s.growth = first.ms > 0 ? last.ms / first.ms : 0;
  s.batch_ratio = double(last.batch) / double(first.batch);
  s.fixed_share = first.ms > 0 ? std::max(0.0, s.fixed_ms) / first.ms : 0;
  // Overhead-bound: at the base batch, most of the time is the fixed cost (growth well below
  // linear in batch).
  s.overhead_bound = s.fixed_share > 0.5;
  if (s.fixed_ms <= 0) {
    s.verdict = fmt::format(
        "time grows {:.2f}x for {:.0f}x the batch: no measurable fixed cost (fit a = {:.3f} ms), "
        "{:.4f} ms per item; {}linear, not overhead-bound",
        s.growth, s.batch_ratio, s.fixed_ms, s.per_item_ms,
        s.growth > s.batch_ratio * 1.1 ? "super" : "");
    return s;
  }
  s.verdict = fmt::format(
      "time grows {:.2f}x for {:.0f}x the batch: fixed cost {:.3f} ms ({:.0f}% of batch {}), "
      "{:.4f} ms per item; {}",
      s.growth, s.batch_ratio, s.fixed_ms, 100 * s.fixed_share, first.batch, s.per_item_ms,
      s.overhead_bound ? "sublinear, overhead-bound: batch more, or cut the fixed cost"
                       : "close to linear, not overhead-bound at this batch");
  return s;
}

}  // namespace brrr::doctor
