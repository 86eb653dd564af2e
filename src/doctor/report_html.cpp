// One self-contained HTML page: attribution, an SVG log-log roofline (bandwidth and compute
// ceilings, a dot per kernel, the top kernels numbered with a legend), the per-kernel table with
// ONNX node names and fusion-boundary reasons, the class table, the batch sweep and the compare
// run when they ran, remedies and the verdict. Inline CSS and SVG only: no scripts, no fetches.
// Every string from the model or a profile file (node, kernel and value names) is escaped: they
// are hostile input. The numbers are the JSON report's fields (report_json.cpp), formatted.
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
      case '\'':
        o += "&#39;";
        break;
      default:
        o += ch;
    }
  }
  return o;
}

// At most n bytes, cut back to a UTF-8 character boundary so a long name cannot end mid-character.
std::string trunc(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t cut = n - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// ONNX node names are long paths ("/m/encoder/layer.0/..."): let the table wrap them at the
// slashes instead of anywhere.
std::string wrap_at_slashes(const std::string& escaped) {
  std::string o;
  for (char ch : escaped) {
    o += ch;
    if (ch == '/') o += "<wbr>";
  }
  return o;
}

// Milliseconds with the text report's fixed decimals, but with three significant digits below
// 0.1 ms, where a small model's kernels would otherwise all read 0.000.
std::string ms(double v, int decimals = 3) {
  if (v == 0 || !std::isfinite(v) || std::fabs(v) >= 0.1)
    return fmt::format("{:.{}f}", v, decimals);
  return fmt::format("{:.3g}", v);
}

const char* regime_color(Regime r) {
  return r == Regime::compute ? "#d62728" : r == Regime::memory ? "#1f77b4" : "#7f7f7f";
}

// FLOPs with special functions converted at their measured cost relative to an fp32 FMA lane, so
// that a kernel's compute floor is its equivalent FLOPs over the fp32 peak.
double equivalent_flops(const KernelAnalysis& k, const Ceilings& c) {
  return k.compute_floor_ms * 1e-3 * c.peak_flops_per_s("fp32");
}

// The kernels by measured time, longest first; a kernel's rank (1-based) is its number on the
// roofline and in the tables.
std::vector<const KernelAnalysis*> by_time(const std::vector<KernelAnalysis>& ks) {
  std::vector<const KernelAnalysis*> v;
  for (const auto& k : ks) v.push_back(&k);
  std::stable_sort(v.begin(), v.end(),
                   [](auto* a, auto* b) { return a->rec.time_ms > b->rec.time_ms; });
  return v;
}

// How the kernel's time compares with its floor, said the right way round: the floor is a
// fraction of the time (or, above 100%, the kernel beat its floor and the text says so).
std::string floor_phrase(const KernelAnalysis& k) {
  if (k.floor_ms <= 0 || k.rec.time_ms <= 0) return "no floor (no work counted)";
  std::string s = fmt::format("floor {} ms = {:.1f}% of its time ({:.2f}x the floor)",
                              ms(k.floor_ms, 4), 100 * k.efficiency, k.rec.time_ms / k.floor_ms);
  if (k.roof != "dram") s += " against the " + esc(k.roof) + " roof";
  if (!k.over_reason.empty()) s += ": " + esc(k.over_reason);
  return s;
}

std::string roofline_svg(const Report& r, const std::vector<const KernelAnalysis*>& ranked,
                         size_t labelled) {
  const Ceilings& c = r.ceilings;
  const double W = 760, PH = 440, L = 70, R = 20, T = 20, B = 50, LINE = 15;
  double peak = c.peak_flops_per_s("fp32") / 1e9, bw = c.bandwidth_gbs;
  // Validated ceilings never get here degenerate, but a Report built otherwise must not make the
  // decade loops below run without bound.
  auto sane = [](double v) { return std::isfinite(v) && v > 1e-30 && v < 1e30; };
  if (!sane(peak) || !sane(bw))
    return fmt::format(
        "<p id=\"roofline\">No roofline: the ceilings are not usable ({:g} GFLOP/s, "
        "{:g} GB/s).</p>\n",
        peak, bw);
  struct Pt {
    double x, y;
    const KernelAnalysis* k;
    size_t rank;  // 1-based, by time
  };
  std::vector<Pt> pts;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const KernelAnalysis& k = *ranked[i];
    double f = equivalent_flops(k, c);
    if (k.rec.cost.bytes <= 0 || f <= 0 || k.rec.time_ms <= 0) continue;
    Pt p{f / k.rec.cost.bytes, f / (k.rec.time_ms * 1e-3) / 1e9, &k, i + 1};
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
    return PH - B -
           (std::log10(y) - std::log10(ymin)) / (std::log10(ymax) - std::log10(ymin)) *
               (PH - T - B);
  };
  // The legend of numbered kernels sits under the plot, inside the SVG, so a screenshot of the
  // figure alone still says which dot is which.
  size_t shown = std::min(labelled, ranked.size());
  const double H = PH + (shown ? 10 + LINE * double(shown + 1) : 0);
  std::string s = fmt::format(
      "<svg id=\"roofline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"11\">\n",
      W, H, W, H);
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fff\" "
      "stroke=\"#999\"/>\n",
      L, T, W - L - R, PH - T - B);
  // Decade grid lines and labels.
  for (int e = int(std::floor(std::log10(xmin))); e <= int(std::ceil(std::log10(xmax))); ++e) {
    double x = std::pow(10.0, e);
    if (x < xmin || x > xmax) continue;
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#eee\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">1e{4}</text>\n",
        lx(x), T, PH - B, PH - B + 14, e);
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
      (L + W - R) / 2, PH - 12);
  s += fmt::format(
      "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" "
      "text-anchor=\"middle\">attained GFLOP/s</text>\n",
      (T + PH - B) / 2, (T + PH - B) / 2);
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
  // The cache roofs, dashed: the slopes kernels whose bytes fit a cache level are judged against
  // (each level that beats DRAM; a kernel faces the smallest level it fits).
  for (const CacheLevel& level : c.cache_roofs()) {
    const double cbw = level.gbs, cx0 = std::max(xmin, ymin / cbw);
    if (!(sane(cbw) && cbw > bw && peak / cbw > cx0)) continue;
    s += fmt::format(
        "<polyline class=\"cache-ceiling\" fill=\"none\" stroke=\"#000\" stroke-width=\"1\" "
        "stroke-dasharray=\"5,3\" points=\"{:.1f},{:.1f} {:.1f},{:.1f}\"/>\n",
        lx(cx0), ly(cx0 * cbw), lx(peak / cbw), ly(peak));
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" transform=\"rotate(-{:.1f} {:.1f} {:.1f})\">"
        "{:.1f} GB/s {} (measured; kernels within {:.0f} MiB)</text>\n",
        lx(cx0 * 3), ly(cx0 * 3 * cbw) - 6,
        std::atan2(ly(cx0) - ly(peak / cbw), lx(peak / cbw) - lx(cx0)) * 180 / M_PI, lx(cx0 * 3),
        ly(cx0 * 3 * cbw) - 6, cbw, esc(level.name), level.bytes / 1048576);
  }
  // Dots: the unlabelled ones first, so the numbered top kernels are drawn on top.
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& p : pts) {
      bool top = p.rank <= shown;
      if (top != (pass == 1)) continue;
      s += fmt::format(
          "<circle class=\"kernel{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" "
          "fill-opacity=\"0.7\"{}><title>#{} {} ({}, {}): {} ms; {}</title></circle>\n",
          top ? " top" : "", lx(p.x), ly(p.y), top ? 5 : 4, regime_color(p.k->regime),
          top ? " stroke=\"#000\"" : "", p.rank, esc(p.k->rec.name), op_class_name(p.k->rec.cls),
          regime_name(p.k->regime), ms(p.k->rec.time_ms, 4), floor_phrase(*p.k));
    }
  // Numbers next to the top dots. Kernels of one kind sit close together (the GEMMs under the
  // roof), so each label takes the nearest free spot around its dot, with a leader line when it
  // had to move away, rather than piling up on its neighbours.
  struct Box {
    double x0, y0, x1, y1;
    bool hits(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  };
  std::vector<Box> taken;
  for (const auto& p : pts)
    if (p.rank <= shown) taken.push_back({lx(p.x) - 5, ly(p.y) - 5, lx(p.x) + 5, ly(p.y) + 5});
  std::vector<const Pt*> tops;
  for (const auto& p : pts)
    if (p.rank <= shown) tops.push_back(&p);
  std::sort(tops.begin(), tops.end(), [](auto* a, auto* b) { return a->rank < b->rank; });
  for (const Pt* p : tops) {
    const double cx = lx(p->x), cy = ly(p->y);
    const double w = 7.0 * double(std::to_string(p->rank).size()) + 2, hh = 6;
    Box best{cx + 6, cy - 17, cx + 6 + w, cy - 5};
    double bx = cx + 6 + w / 2, by = cy - 11;
    bool found = false;
    for (int ring = 1; ring <= 6 && !found; ++ring)
      for (int dir = 0; dir < 8 && !found; ++dir) {
        double a = -M_PI / 4 + dir * M_PI / 4, d = 11.0 * ring;
        double x = cx + d * std::cos(a), y = cy - d * std::sin(a);
        Box b{x - w / 2, y - hh, x + w / 2, y + hh};
        if (b.x0 < L || b.x1 > W - R || b.y0 < T || b.y1 > PH - B) continue;
        if (std::any_of(taken.begin(), taken.end(), [&](const Box& o) { return o.hits(b); }))
          continue;
        best = b, bx = x, by = y, found = true;
      }
    taken.push_back(best);
    if (std::hypot(bx - cx, by - cy) > 14)
      s += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#555\" "
          "stroke-width=\"0.7\"/>",
          cx, cy, bx, by);
    s += fmt::format(
        "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
        "font-weight=\"bold\">{}</text>\n",
        bx, by + 4, p->rank);
  }
  double ly0 = T + 12;
  for (Regime g : {Regime::compute, Regime::memory, Regime::overhead}) {
    s += fmt::format(
        "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}"
        "</text>\n",
        L + 12, ly0, regime_color(g), L + 20, ly0 + 4, regime_name(g));
    ly0 += 14;
  }
  if (shown) {
    double y = PH + 10;
    s += fmt::format(
        "<g id=\"roofline-legend\"><text x=\"{}\" y=\"{}\" font-weight=\"bold\">top {} kernels "
        "by time (number on the plot: kernel, its ONNX nodes, time, share of wall)</text>\n",
        L, y, shown);
    for (size_t i = 0; i < shown; ++i) {
      const KernelAnalysis& k = *ranked[i];
      y += LINE;
      bool plotted = std::any_of(pts.begin(), pts.end(), [&](const Pt& p) { return p.k == &k; });
      double share = r.attribution.wall_ms > 0 ? k.rec.time_ms / r.attribution.wall_ms : 0;
      s += fmt::format(
          "<text class=\"legend-entry\" x=\"{}\" y=\"{}\"><tspan font-weight=\"bold\">{}"
          "</tspan> {} [{}] {} ms, {:.1f}% of wall, {}{}</text>\n",
          L, y, i + 1, esc(trunc(k.rec.name, 40)), esc(trunc(join(k.rec.nodes, ", "), 60)),
          ms(k.rec.time_ms, 4), 100 * share, regime_name(k.regime),
          plotted ? "" : " (not plotted: no bytes or FLOPs)");
    }
    s += "</g>\n";
  }
  s += "</svg>\n";
  return s;
}

// One row per kernel, longest first: the JSON report's per-kernel fields plus the achieved rates
// next to the ceilings they are bounded by.
std::string kernel_table(const char* id, const std::vector<const KernelAnalysis*>& ranked,
                         double wall_ms, const Ceilings& c, size_t limit) {
  std::string h = fmt::format(
      "<table id=\"{}\" class=\"kernels\"><tr><th>#</th><th>kernel</th><th>ONNX nodes</th>"
      "<th>kind</th><th>class</th><th>time ms</th><th>p10-p90 ms</th><th>share of wall</th>"
      "<th>regime</th>"
      "<th>floor ms</th><th>floor / time</th><th>GFLOP/s (ceiling)</th><th>GB/s (ceiling)</th>"
      "<th>fusion boundaries</th></tr>\n",
      id);
  size_t n = std::min(limit, ranked.size());
  for (size_t i = 0; i < n; ++i) {
    const KernelAnalysis& k = *ranked[i];
    double t = std::max(k.rec.time_ms, 1e-9) * 1e-3;
    std::string prec =
        !k.rec.precision.empty() && c.peak_gflops.count(k.rec.precision) ? k.rec.precision : "fp32";
    double peak = c.peak_flops_per_s(prec) / 1e9;
    std::string nodes;
    for (const auto& nd : k.rec.nodes)
      nodes += (nodes.empty() ? "" : "<br>") + wrap_at_slashes(esc(nd));
    std::string bounds;
    for (const auto& b : k.rec.boundaries) bounds += (bounds.empty() ? "" : "<br>") + esc(b);
    h += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td class=\"l\">{}</td><td class=\"l n\">{}</td>"
        "<td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"spread\">{}</td>"
        "<td>{:.1f}%</td>"
        "<td class=\"l\" style=\"color:{}\">{}</td><td>{}</td><td>{:.1f}%{}</td>"
        "<td>{:.2f} ({:.1f} {})</td><td>{:.2f} ({:.1f} {})</td><td class=\"l b\">{}</td></tr>\n",
        regime_name(k.regime), i + 1, esc(k.rec.name), nodes.empty() ? "-" : nodes, esc(k.rec.kind),
        op_class_name(k.rec.cls), ms(k.rec.time_ms, 4),
        k.p90_ms > 0 ? fmt::format("{:.4f}-{:.4f}", k.p10_ms, k.p90_ms) : std::string("-"),
        wall_ms > 0 ? 100 * k.rec.time_ms / wall_ms : 0.0, regime_color(k.regime),
        regime_name(k.regime), ms(k.floor_ms, 4), 100 * k.efficiency,
        (k.over_reason.empty() ? "" : "<br><span class=\"why\">" + esc(k.over_reason) + "</span>") +
            (k.outlier_note.empty() ? "" : "<br><span class=\"why\">" + esc(k.outlier_note) + "</span>") +
            (k.grid_note.empty() ? "" : "<br><span class=\"why\">" + esc(k.grid_note) + "</span>") +
            (k.rec.layout_note.empty()
                 ? ""
                 : "<br><span class=\"why\">converts layouts inside each run: " +
                       esc(k.rec.layout_note) + "</span>"),
        k.rec.cost.flops / t / 1e9, peak, esc(prec), k.rec.cost.bytes / t / 1e9, k.roof_gbs,
        esc(k.roof), bounds.empty() ? "-" : bounds);
  }
  h += "</table>\n";
  if (n < ranked.size())
    h += fmt::format("<p>{} shorter kernels not listed.</p>\n", ranked.size() - n);
  return h;
}

std::string class_table_html(const char* id, const std::vector<ClassRow>& rows) {
  std::string h = fmt::format(
      "<table id=\"{}\"><tr><th>class</th><th>kernels</th><th>share of FLOPs</th>"
      "<th>share of runtime</th><th>time ms</th></tr>\n",
      id);
  for (const auto& c : rows)
    h += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{:.1f}%</td><td>{:.1f}%</td><td>{}</td>"
        "</tr>\n",
        esc(c.cls), c.cls == kBetweenKernels ? std::string("-") : std::to_string(c.kernels),
        100 * c.flops_share, 100 * c.time_share, ms(c.time_ms));
  double total = 0;
  for (const auto& c : rows) total += c.time_ms;
  h += fmt::format("<tr><td>total</td><td></td><td></td><td></td><td>{}</td></tr>\n", ms(total));
  return h + "</table>\n";
}

std::string attribution_bar(const Attribution& a) {
  std::string h = "<div class=\"bar\">";
  for (Regime g : {Regime::compute, Regime::memory, Regime::overhead})
    if (a.share(g) > 0)
      h += fmt::format("<div style=\"width:{:.1f}%;background:{}\">{} {:.0f}%</div>",
                       100 * a.share(g), regime_color(g), regime_name(g), 100 * a.share(g));
  return h + "</div>\n";
}

std::string batch_section(const Report& r) {
  if (!r.batch) {
    if (r.batch_error.empty()) return "";
    return "<section id=\"batch-sweep\"><h2>Batch sweep</h2>\n<p>Not run: " + esc(r.batch_error) +
           "</p></section>\n";
  }
  const BatchScaling& b = *r.batch;
  std::string h = "<section id=\"batch-sweep\"><h2>Batch sweep</h2>\n";
  h += fmt::format(
      "<p>Fit (least squares): time = {} ms + {} ms &times; batch; the fixed part is "
      "{:.1f}% of the first point; time grew {:.2f}x over a {:.0f}x batch range{}.</p>\n",
      ms(b.fixed_ms), ms(b.per_item_ms, 4), 100 * b.fixed_share, b.growth, b.batch_ratio,
      b.overhead_bound ? " (overhead-bound)" : "");
  h += "<table id=\"batch-table\"><tr><th>batch</th><th>wall ms</th><th>ms per item</th>"
       "<th>fit ms</th></tr>\n";
  for (const auto& p : b.points)
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", p.batch, ms(p.ms),
                     ms(p.batch > 0 ? p.ms / double(p.batch) : 0.0, 4),
                     ms(b.fixed_ms + b.per_item_ms * double(p.batch)));
  h += "</table>\n<p>" + esc(b.verdict) + "</p></section>\n";
  return h;
}

std::string compare_section(const Report& r) {
  if (!r.after || !r.after_profile) return "";
  const Attribution &a = r.attribution, &b = *r.after;
  std::string h = "<section id=\"compare\"><h2>Compare: before and after the remedies</h2>\n";
  h += fmt::format("<p>Baseline on <b>{}</b>; compare run on <b>{}</b>.</p>\n",
                   esc(r.profile.backend), esc(r.after_profile->backend));
  h += attribution_bar(b);
  h += "<table id=\"compare-table\"><tr><th>time ms</th><th>before</th><th>after</th>"
       "<th>after / before</th></tr>\n";
  auto row = [&](const char* what, double x, double y) {
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", what, ms(x), ms(y),
                     x > 0 ? fmt::format("{:.2f}x", y / x) : std::string("-"));
  };
  row("wall", a.wall_ms, b.wall_ms);
  row("compute", a.compute_ms, b.compute_ms);
  row("memory", a.memory_ms, b.memory_ms);
  row("overhead", a.overhead_ms, b.overhead_ms);
  row("host gaps", a.gap_ms, b.gap_ms);
  h += fmt::format("<tr><td>kernels</td><td>{}</td><td>{}</td><td></td></tr>\n", r.kernels.size(),
                   r.after_kernels.size());
  h += "</table>\n<h3>Class table after</h3>\n" +
       class_table_html("compare-class-table", r.after_classes);
  h += fmt::format("<h3>Top {} kernels after</h3>\n",
                   std::min<size_t>(size_t(std::max(r.top, 1)), r.after_kernels.size()));
  h += kernel_table("compare-kernel-table", by_time(r.after_kernels), b.wall_ms, r.ceilings,
                    size_t(std::max(r.top, 1)));
  if (!r.checks.empty()) {
    h += "<h3>Remedies applied one at a time</h3>\n<table id=\"remedy-checks\"><tr><th>remedy</th>"
         "<th>what changed</th><th>before ms</th><th>predicted ms</th><th>measured ms</th>"
         "<th>error</th><th>steady predicted / measured ms</th><th>unreliable</th></tr>\n";
    for (const auto& k : r.checks)
      h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:+.1f}%"
                       "</td><td>{} / {} ({:+.1f}%)</td><td>{}</td></tr>\n",
                       esc(k.remedy), esc(k.how), ms(k.before_ms), ms(k.predicted_ms),
                       ms(k.measured_ms), 100 * k.error(), ms(k.predicted_steady_ms),
                       ms(k.measured_steady_ms), 100 * k.steady_error(), esc(k.unreliable));
    h += "</table>\n";
    for (const auto& k : r.checks)
      if (!k.changes.empty()) {
        h += "<p class=\"remedy-changes\">" + esc(k.remedy) + ", measured changes by ONNX node "
             "group:</p>\n<ul>\n";
        for (const auto& c : k.changes) h += "<li>" + esc(c) + "</li>\n";
        h += "</ul>\n";
      }
  }
  return h + "</section>\n";
}

}  // namespace

std::string render_html(const Report& r) {
  const Attribution& a = r.attribution;
  const Ceilings& c = r.ceilings;
  const auto ranked = by_time(r.kernels);
  const size_t labelled = size_t(std::clamp(r.top, 0, 10));
  std::string h;
  h += "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>brrr doctor: " + esc(r.model) +
       "</title>\n<style>body{font-family:sans-serif;margin:24px;max-width:1400px}"
       "table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ccc;padding:3px 8px;"
       "text-align:right;vertical-align:top}td:first-child,th:first-child,td.l{text-align:left}"
       "th{background:#f4f4f4;text-align:center}table.kernels "
       "td{font-size:12px}td.l{overflow-wrap:anywhere}td.n{min-width:180px}td.b{min-width:220px}"
       "span.why{font-size:11px;color:#555}"
       ".bar{display:flex;height:22px;width:720px}.bar div{color:#fff;font-size:11px;"
       "padding-left:4px;overflow:hidden}</style></head><body>\n";
  h += fmt::format(
      "<h1>brrr doctor: {}</h1>\n<p>{} kernels on <b>{}</b>{}; wall time <b>{} ms"
      "</b> = compute {} ms + memory {} ms + overhead {} ms (host gaps {} ms{})."
      "</p>\n",
      esc(r.model), r.kernels.size(), esc(r.profile.backend),
      r.profile.threads > 0 ? fmt::format(", {} threads", r.profile.threads) : std::string(),
      ms(a.wall_ms), ms(a.compute_ms), ms(a.memory_ms), ms(a.overhead_ms), ms(a.gap_ms),
      slow_kernels_clause(a));
  h += fmt::format(
      "<p>Ceilings (measured by brrr probe on {}): {:.1f} GB/s, {:.1f} GFLOP/s fp32.</p>\n",
      esc(c.cpu_model.empty() ? c.backend : c.cpu_model), c.bandwidth_gbs,
      c.peak_flops_per_s("fp32") / 1e9);
  h += attribution_bar(a);
  h += fmt::format("<h2>Verdict: {}</h2>\n<p>{}</p>\n", regime_name(r.verdict.regime),
                   esc(r.verdict.advice));
  {
    const Reliability& t = r.reliability;
    std::string why;
    for (const auto& x : t.reasons) why += "<li>" + esc(x) + "</li>";
    h += fmt::format(
        "<p id=\"trust\">Trust: {} timed runs, wall p10 {:.4f} ms, p90 {:.4f} ms{}{}. {}</p>\n",
        t.samples, t.wall_p10_ms, t.wall_p90_ms,
        t.other_busy_cpus >= 0
            ? fmt::format(", other processes busy on {:.1f} of {} CPUs", t.other_busy_cpus,
                          t.online_cpus)
            : std::string(),
        t.cpu_capacity >= 0 && t.threads > 1
            ? fmt::format(", {} threads at {:.2f} cores' worth", t.threads, t.cpu_capacity)
            : std::string(),
        t.reliable ? std::string("Reliable.") : "Unreliable:<ul>" + why + "</ul>");
    if (!r.timing.empty()) h += "<p id=\"timing\">Timing: " + esc(r.timing) + ".</p>\n";
  }
  h += "<h2>Roofline</h2>\n" + roofline_svg(r, ranked, labelled);
  h += "<p>Conventions: FLOPs are 2 per multiply-add and 1 per other arithmetic op; special "
       "functions are converted to equivalent FLOPs at their measured throughput; bytes are "
       "compulsory (inputs read once, outputs written once); ceilings measured by brrr probe. "
       "A kernel's floor is the longer of its memory and compute floors; floor / time is the "
       "share of its time the floor accounts for (100% = at the ceiling).</p>\n";
  h += "<h2>Kernels</h2>\n<p>Every kernel, longest first; # is its number on the roofline. "
       "Fusion boundaries say why a kernel's output was not fused into its consumer. A floor / "
       "time above 100% means the kernel ran faster than the measured ceilings allow for the "
       "work counted: a ceiling or a count is off for it.</p>\n";
  h += kernel_table("kernel-table", ranked, a.wall_ms, c, ranked.size());
  h += "<h2>Class table</h2>\n" + class_table_html("class-table", r.classes);
  if (r.cache)  // kernel names are the model's: escaped
    h += "<p id=\"cache-check\">" + esc(cache_text(*r.cache, r.attribution.wall_ms)) + "</p>\n";
  if (r.grids)
    h += "<p id=\"small-grids\">" + esc(small_grids_text(*r.grids, r.attribution.wall_ms)) + "</p>\n";
  if (r.gaps)
    h += "<p id=\"idle-gaps\">" + esc(idle_gaps_text(*r.gaps, r.attribution.wall_ms)) + "</p>\n";
  h += batch_section(r);
  h += compare_section(r);
  h += "<h2>Remedies</h2>\n<table id=\"remedies\"><tr><th>remedy</th><th>gain ms</th>"
       "<th>predicted ms</th><th>measured ms</th><th>how</th><th>why</th><th>kernels (ONNX "
       "nodes)</th><th>fusion boundaries</th></tr>\n";
  for (const auto& rm : r.remedies) {
    std::string ks, bs;
    for (const auto& k : rm.kernels) ks += (ks.empty() ? "" : ", ") + esc(k);
    if (!rm.nodes.empty()) ks += " (" + esc(join(rm.nodes, ", ")) + ")";
    for (const auto& b : rm.boundaries) bs += (bs.empty() ? "" : "<br>") + esc(b);
    h += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td>"
        "<td class=\"l\">{}{}</td><td class=\"l n\">{}</td><td class=\"l b\">{}</td></tr>\n",
        esc(rm.name), ms(rm.gain_ms), ms(rm.predicted_ms),
        rm.measured_ms ? ms(*rm.measured_ms) : std::string("-"),
        rm.action.empty() ? std::string("-") : esc(rm.action), rm.in_effect ? "(in effect) " : "",
        esc(rm.detail), ks.empty() ? "-" : ks, bs.empty() ? "-" : bs);
  }
  h += "</table>\n</body></html>\n";
  return h;
}

}  // namespace brrr::doctor
