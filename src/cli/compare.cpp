#include "cli/compare.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace brrr::cli {

Comparison compare_tensors(const Tensor& got, const Tensor& expected, const Tolerance& tol) {
  Comparison c;
  if (got.dtype() != expected.dtype()) {
    c.problem = fmt::format("dtype {} but expected {}", dtype_name(got.dtype()),
                            dtype_name(expected.dtype()));
    return c;
  }
  if (got.shape() != expected.shape()) {
    c.problem = fmt::format("shape {} but expected {}", shape_str(got.shape()),
                            shape_str(expected.shape()));
    return c;
  }
  int64_t n = expected.numel();
  if (!is_floating(expected.dtype())) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t a = got.at_int(i), b = expected.at_int(i);
      if (a == b) continue;
      double d = std::fabs(double(a) - double(b));
      if (c.mismatches++ == 0) c.worst = i, c.worst_got = double(a), c.worst_expected = double(b);
      c.max_abs = std::max(c.max_abs, d);
      c.max_rel = std::max(c.max_rel, d / std::max(std::fabs(double(b)), 1.0));
    }
    c.scale = 1;
    c.pass = c.mismatches == 0;
    return c;
  }
  std::vector<double> a = got.to_double_vector(), b = expected.to_double_vector();
  double scale = 0;
  for (double v : b)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  c.scale = tol.scale_atol ? (scale > 0 ? scale : 1.0) : 1.0;
  const double tiny = std::numeric_limits<float>::min();
  double worst_excess = -1;
  for (int64_t i = 0; i < n; ++i) {
    double x = a[size_t(i)], y = b[size_t(i)];
    bool ok;
    double d = 0;
    if (std::isnan(x) || std::isnan(y)) {
      ok = std::isnan(x) && std::isnan(y);
      d = ok ? 0 : std::numeric_limits<double>::infinity();
    } else if (std::isinf(x) || std::isinf(y)) {
      ok = x == y;
      d = ok ? 0 : std::numeric_limits<double>::infinity();
    } else {
      d = std::fabs(x - y);
      ok = d <= tol.atol * c.scale + tol.rtol * std::fabs(y);
    }
    c.max_abs = std::max(c.max_abs, d);
    c.max_rel = std::max(c.max_rel, d / std::max(std::fabs(y), tiny));
    if (!ok) {
      ++c.mismatches;
      double excess = d - (tol.atol * c.scale + tol.rtol * std::fabs(y));
      if (std::isnan(excess) || excess > worst_excess) {
        worst_excess = std::isnan(excess) ? std::numeric_limits<double>::infinity() : excess;
        c.worst = i, c.worst_got = x, c.worst_expected = y;
      }
    }
  }
  c.pass = c.mismatches == 0;
  return c;
}

std::string criterion_str(const Tensor& expected, const Tolerance& tol, const Comparison& c) {
  if (!is_floating(expected.dtype())) return "exact match";
  if (!tol.scale_atol) return fmt::format("|got-exp| <= {:g} + {:g}*|exp|", tol.atol, tol.rtol);
  return fmt::format("|got-exp| <= {:g}*S + {:g}*|exp|, S = max|exp| = {:.3g}", tol.atol, tol.rtol,
                     c.scale);
}

std::string tensor_summary(const Tensor& t, int first_n) {
  int64_t n = t.numel();
  if (n == 0) return "(empty)";
  std::string first;
  for (int64_t i = 0; i < n && i < first_n; ++i) {
    if (i) first += ", ";
    first += is_floating(t.dtype()) ? fmt::format("{:.6g}", t.at_double(i))
                                    : fmt::format("{}", t.at_int(i));
  }
  if (n > first_n) first += ", ...";
  if (!is_floating(t.dtype())) {
    int64_t lo = t.at_int(0), hi = lo;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = t.at_int(i);
      lo = std::min(lo, v), hi = std::max(hi, v), sum += double(v);
    }
    return fmt::format("min={} max={} mean={:.6g} first=[{}]", lo, hi, sum / double(n), first);
  }
  std::vector<double> v = t.to_double_vector();
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  int64_t nans = 0;
  for (double x : v) {
    if (std::isnan(x)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, x), hi = std::max(hi, x), sum += x;
  }
  std::string s =
      nans == n ? "all NaN"
                : fmt::format("min={:.6g} max={:.6g} mean={:.6g}", lo, hi, sum / double(n - nans));
  if (nans && nans != n) s += fmt::format(" ({} NaN)", nans);
  return s + fmt::format(" first=[{}]", first);
}

}  // namespace brrr::cli
