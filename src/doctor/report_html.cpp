// One self-contained HTML page: attribution, an SVG log-log roofline (bandwidth and compute
// ceilings, a dot per kernel), the class table, remedies and the verdict. No scripts, no fetches.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "brrr/doctor.hpp"

namespace brrr::doctor {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += ch;
    }
  }
  return o;
}

const char* regime_color(Regime r) {
  return r == Regime::compute ? "#d62728" : r == Regime::memory ? "#1f77b4" : "#7f7f7f";
}

// FLOPs with special functions converted at their measured cost relative to an fp32 FMA lane, so
// that a kernel's compute floor is its equivalent FLOPs over the fp32 peak.
double equivalent_flops(const KernelAnalysis& k, const Ceilings& c) {
  return k.compute_floor_ms * 1e-3 * c.peak_flops_per_s("fp32");
}

std::string roofline_svg(const Report& r) {
  const Ceilings& c = r.ceilings;
  const double W = 720, H = 440, L = 70, R = 20, T = 20, B = 50;
  double peak = c.peak_flops_per_s("fp32") / 1e9, bw = c.bandwidth_gbs;
  // Validated ceilings never get here degenerate, but a Report built otherwise must not make the
  // decade loops below run without bound.
  auto sane = [](double v) { return std::isfinite(v) && v > 1e-30 && v < 1e30; };
  if (!sane(peak) || !sane(bw))
    return fmt::format("<p id=\"roofline\">No roofline: the ceilings are not usable ({:g} GFLOP/s, "
                       "{:g} GB/s).</p>\n",
                       peak, bw);
  struct Pt {
    double x, y;
    const KernelAnalysis* k;
  };
  std::vector<Pt> pts;
  for (const auto& k : r.kernels) {
    double f = equivalent_flops(k, c);
    if (k.rec.cost.bytes <= 0 || f <= 0 || k.rec.time_ms <= 0) continue;
    Pt p{f / k.rec.cost.bytes, f / (k.rec.time_ms * 1e-3) / 1e9, &k};
    if (sane(p.x) && sane(p.y)) pts.push_back(p);
  }
  double ridge = peak / bw;
  double xmin = ridge / 100, xmax = ridge * 100, ymin = peak / 1e4, ymax = peak * 4;
  for (const auto& p : pts) {
    xmin = std::min(xmin, p.x / 2), xmax = std::max(xmax, p.x * 2);
    ymin = std::min(ymin, p.y / 2), ymax = std::max(ymax, p.y * 2);
  }
  auto lx = [&](double x) {
    return L +
           (std::log10(x) - std::log10(xmin)) / (std::log10(xmax) - std::log10(xmin)) * (W - L - R);
  };
  auto ly = [&](double y) {
    return H - B -
           (std::log10(y) - std::log10(ymin)) / (std::log10(ymax) - std::log10(ymin)) * (H - T - B);
  };
  std::string s = fmt::format(
      "<svg id=\"roofline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"11\">\n",
      W, H, W, H);
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fff\" "
      "stroke=\"#999\"/>\n",
      L, T, W - L - R, H - T - B);
  // Decade grid lines and labels.
  for (int e = int(std::floor(std::log10(xmin))); e <= int(std::ceil(std::log10(xmax))); ++e) {
    double x = std::pow(10.0, e);
    if (x < xmin || x > xmax) continue;
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#eee\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">1e{4}</text>\n",
        lx(x), T, H - B, H - B + 14, e);
  }
  for (int e = int(std::floor(std::log10(ymin))); e <= int(std::ceil(std::log10(ymax))); ++e) {
    double y = std::pow(10.0, e);
    if (y < ymin || y > ymax) continue;
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#eee\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">1e{5}</text>\n",
        L, ly(y), W - R, L - 4, ly(y) + 4, e);
  }
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity "
      "(FLOP/byte, compulsory bytes)</text>\n",
      (L + W - R) / 2, H - 12);
  s += fmt::format(
      "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" "
      "text-anchor=\"middle\">attained GFLOP/s</text>\n",
      (T + H - B) / 2, (T + H - B) / 2);
  // Ceilings: bandwidth slope up to the ridge, then the compute roof.
  double x0 = std::max(xmin, ymin / bw);
  s += fmt::format(
      "<polyline class=\"ceiling\" fill=\"none\" stroke=\"#000\" stroke-width=\"2\" "
      "points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\"/>\n",
      lx(x0), ly(x0 * bw), lx(ridge), ly(peak), lx(xmax), ly(peak));
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{:.1f} GFLOP/s fp32 (measured)</text>\n",
                   lx(ridge) + 6, ly(peak) - 6, peak);
  s += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" transform=\"rotate(-{:.1f} {:.1f} {:.1f})\">"
      "{:.1f} GB/s (measured)</text>\n",
      lx(x0 * 3), ly(x0 * 3 * bw) - 6,
      std::atan2(ly(x0) - ly(ridge), lx(ridge) - lx(x0)) * 180 / M_PI, lx(x0 * 3),
      ly(x0 * 3 * bw) - 6, bw);
  for (const auto& p : pts)
    s += fmt::format(
        "<circle class=\"kernel\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\" "
        "fill-opacity=\"0.7\"><title>{} ({}): {:.4f} ms, {:.1f}% of floor, {}"
        "</title></circle>\n",
        lx(p.x), ly(p.y), regime_color(p.k->regime), esc(p.k->rec.name),
        esc(std::string(op_class_name(p.k->rec.cls))), p.k->rec.time_ms, 100 * p.k->efficiency,
        regime_name(p.k->regime));
  double ly0 = T + 12;
  for (Regime g : {Regime::compute, Regime::memory, Regime::overhead}) {
    s += fmt::format(
        "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}"
        "</text>\n",
        L + 12, ly0, regime_color(g), L + 20, ly0 + 4, regime_name(g));
    ly0 += 14;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace

std::string render_html(const Report& r) {
  const Attribution& a = r.attribution;
  std::string h;
  h += "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>brrr doctor: " + esc(r.model) +
       "</title>\n<style>body{font-family:sans-serif;margin:24px;max-width:1000px}"
       "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:"
       "right}td:first-child,th:first-child{text-align:left}.bar{display:flex;height:22px;width:"
       "720px}.bar div{color:#fff;font-size:11px;padding-left:4px;overflow:hidden}</style></head>"
       "<body>\n";
  h += fmt::format(
      "<h1>brrr doctor: {}</h1>\n<p>{} kernels on <b>{}</b>; wall time <b>{:.3f} ms"
      "</b>.</p>\n",
      esc(r.model), r.kernels.size(), esc(r.profile.backend), a.wall_ms);
  h += "<div class=\"bar\">";
  for (Regime g : {Regime::compute, Regime::memory, Regime::overhead})
    if (a.share(g) > 0)
      h += fmt::format("<div style=\"width:{:.1f}%;background:{}\">{} {:.0f}%</div>",
                       100 * a.share(g), regime_color(g), regime_name(g), 100 * a.share(g));
  h += "</div>\n";
  h += fmt::format("<h2>Verdict: {}</h2>\n<p>{}</p>\n", regime_name(r.verdict.regime),
                   esc(r.verdict.advice));
  h += "<h2>Roofline</h2>\n" + roofline_svg(r);
  h +=
      "<p>Conventions: FLOPs are 2 per multiply-add and 1 per other arithmetic op; special "
      "functions are converted to equivalent FLOPs at their measured throughput; bytes are "
      "compulsory (inputs read once, outputs written once); ceilings measured by brrr probe.</p>\n";
  h += "<h2>Class table</h2>\n<table id=\"class-table\"><tr><th>class</th><th>kernels</th>"
       "<th>share of FLOPs</th><th>share of runtime</th><th>time ms</th></tr>\n";
  for (const auto& c : r.classes)
    h += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{:.1f}%</td><td>{:.1f}%</td><td>{:.3f}</td>"
        "</tr>\n",
        c.cls, c.kernels, 100 * c.flops_share, 100 * c.time_share, c.time_ms);
  h += "</table>\n<h2>Remedies</h2>\n<table><tr><th>remedy</th><th>gain ms</th><th>predicted ms"
       "</th><th>measured ms</th><th>why</th></tr>\n";
  for (const auto& rm : r.remedies)
    h += fmt::format(
        "<tr><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{}</td><td style=\""
        "text-align:left\">{}</td></tr>\n",
        esc(rm.name), rm.gain_ms, rm.predicted_ms,
        rm.measured_ms ? fmt::format("{:.3f}", *rm.measured_ms) : std::string("-"), esc(rm.detail));
  h += "</table>\n";
  if (r.batch) h += "<h2>Batch scaling</h2>\n<p>" + esc(r.batch->verdict) + "</p>\n";
  h += "</body></html>\n";
  return h;
}

}  // namespace brrr::doctor
