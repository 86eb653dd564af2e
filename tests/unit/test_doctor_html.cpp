// The HTML report is one self-contained page: roofline with the top kernels numbered and a
// legend, the per-kernel table (ONNX nodes, fusion boundaries), the batch-sweep and compare
// sections when they ran, every model string escaped. Checked as text, then rendered headless
// with chromium and checked in the DOM it builds (skipped with a clear line without chromium).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "brrr/doctor.hpp"
#include "brrr/session.hpp"
#include "runtime/graph_builder.hpp"

using namespace brrr;
using namespace brrr::doctor;

namespace {

const char* kHostile = "<script>alert(1)</script>";

Ceilings sample_ceilings() {
  Ceilings c;
  c.bandwidth_gbs = 20;
  c.peak_gflops = {{"fp32", 500}};
  c.special_gops = {{"cos", 5}};
  c.dispatch_us = 1;
  return c;
}

RunProfile sample_profile(double scale = 1) {
  RunProfile p;
  p.backend = "reference";
  p.wall_ms = 12 * scale;
  auto add = [&](const char* name, const char* node, OpClass cls, double flops, double bytes,
                 double ms) {
    KernelRecord k;
    k.name = name;
    k.kind = "reference";
    k.ops = {name};
    k.nodes = {node};
    k.cls = cls;
    k.cost.flops = flops;
    k.cost.bytes = bytes;
    k.time_ms = ms * scale;
    k.samples_ms = {0.9 * ms * scale, ms * scale, 1.1 * ms * scale};  // the p10-p90 column
    p.kernels.push_back(k);
  };
  add("gemm<a&b>", "/encoder/MatMul", OpClass::contraction, 2e9, 12e6, 8);
  add("layernorm", kHostile, OpClass::normalization, 5e6, 8e6, 2);
  add("relu", "/act/Relu'\"", OpClass::elementwise, 1e6, 8e6, 1.5);
  add("tiny", "/Shape", OpClass::movement, 4, 32, 0.001);
  p.kernels[1].boundaries = {"-> relu via 'ln_out': not fused: <b>reduction</b> output"};
  return p;
}

Report sample_report() {
  return diagnose(sample_profile(), sample_ceilings(), {.model = "m.onnx"});
}

// The same run with a batch sweep and a compare profile, so every optional section is there.
Report full_report() {
  static const RunProfile after = sample_profile(0.5);
  DoctorOptions o{.model = "m.onnx", .compare = &after};
  o.batch_runner = [](int64_t b) { return 3.0 + 1.5 * double(b); };
  return diagnose(sample_profile(), sample_ceilings(), o);
}

// full_report with the layernorm -> relu intermediate in the profile, so that the fusion remedy
// names its kernels, nodes and the plan's boundary reason (the page's newest columns).
Report fusable_report() {
  static const RunProfile after = sample_profile(0.5);
  RunProfile p = sample_profile();
  p.kernels[1].writes = {{"ln_out", 8e6}};
  p.kernels[2].reads = {{"ln_out", 8e6}};
  DoctorOptions o{.model = "m.onnx", .compare = &after};
  o.batch_runner = [](int64_t b) { return 3.0 + 1.5 * double(b); };
  return diagnose(p, sample_ceilings(), o);
}

size_t count(const std::string& h, const std::string& what) {
  size_t n = 0;
  for (size_t p = h.find(what); p != std::string::npos; p = h.find(what, p + 1)) ++n;
  return n;
}

std::string find_chromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

}  // namespace

TEST(DoctorHtml, PageIsSelfContainedWithRooflineAndClassTable) {
  std::string h = render_html(sample_report());
  EXPECT_NE(h.find("<svg id=\"roofline\""), std::string::npos);
  EXPECT_NE(h.find("class=\"ceiling\""), std::string::npos);
  EXPECT_NE(h.find("id=\"class-table\""), std::string::npos);
  EXPECT_NE(h.find("Verdict"), std::string::npos);
  EXPECT_NE(h.find("gemm&lt;a&amp;b&gt;"), std::string::npos);  // names are escaped
  EXPECT_EQ(h.find("<script"), std::string::npos);
  EXPECT_EQ(h.find("<link"), std::string::npos);
  EXPECT_EQ(h.find("src="), std::string::npos);
  EXPECT_EQ(h.find("http://"), h.find("http://www.w3.org/2000/svg"));  // no external fetches
  EXPECT_EQ(h.find("https://"), std::string::npos);
  // The tiny kernel has no intensity worth plotting on a log axis but still counts.
  EXPECT_EQ(count(h, "<circle class=\"kernel"), 4u);
}

TEST(DoctorHtml, HostileNamesAreEscapedEverywhere) {
  std::string h = render_html(full_report());
  EXPECT_EQ(h.find(kHostile), std::string::npos);
  EXPECT_EQ(h.find("<script"), std::string::npos);
  EXPECT_EQ(h.find("<b>reduction</b>"), std::string::npos);
  EXPECT_NE(h.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(h.find("/act/Relu&#39;&quot;"), std::string::npos);
  // The model path, backend names, batch error and remedy text are outside input too.
  Report r = full_report();
  r.model = r.profile.backend = r.after_profile->backend = kHostile;
  r.remedies[0].detail = kHostile;
  r.batch.reset();
  r.batch_error = kHostile;
  std::string h2 = render_html(r);
  EXPECT_EQ(h2.find("<script"), std::string::npos);
  EXPECT_GE(count(h2, "&lt;script&gt;alert(1)&lt;/script&gt;"), 6u);
}

TEST(DoctorHtml, KernelTableHasNodesBoundariesAndTheJsonNumbers) {
  Report r = sample_report();
  std::string h = render_html(r);
  size_t at = h.find("<table id=\"kernel-table\"");
  ASSERT_NE(at, std::string::npos);
  std::string table = h.substr(at, h.find("</table>", at) - at);
  EXPECT_EQ(count(table, "<tr class="), r.kernels.size());
  EXPECT_NE(table.find("/<wbr>encoder/<wbr>MatMul"), std::string::npos);
  EXPECT_NE(table.find("not fused: &lt;b&gt;reduction&lt;/b&gt; output"), std::string::npos);
  // Longest first, and the numbers are the JSON report's fields: time, share, floor / time.
  EXPECT_LT(table.find("gemm&lt;a&amp;b&gt;"), table.find("layernorm"));
  EXPECT_LT(table.find("layernorm"), table.find("relu"));
  auto j = report_json(r);
  const auto& k0 = j["kernels"][0];
  EXPECT_NE(table.find(fmt::format("<td>{:.4f}</td>", k0["time_ms"].get<double>())),
            std::string::npos);
  EXPECT_NE(table.find(fmt::format("<td>{:.1f}%</td>",
                                   100 * k0["time_ms"].get<double>() / j["wall_ms"].get<double>())),
            std::string::npos);
  EXPECT_NE(table.find(fmt::format("<td>{:.1f}%</td>", 100 * k0["efficiency"].get<double>())),
            std::string::npos);
  EXPECT_NE(table.find(fmt::format(">{}</td>", k0["regime"].get<std::string>())),
            std::string::npos);
}

// The reasons come from a real plan: the CPU profile records them on the producing kernel, the
// profile file (--compare-profile) keeps them, and the page shows them.
TEST(DoctorHtml, FusionBoundaryReasonsComeFromThePlan) {
  GraphBuilder b;
  int x = b.input("x", {6, 10});
  int r = b.node("ReduceSum", {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}});
  b.output(b.node("ReduceMax", {r}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(1)}}));
  Session s(b.g, SessionOptions{});
  Tensor in = Tensor::zeros(DType::f32, {6, 10});
  RunProfile p = s.profile({{"x", in}}, 1);
  ASSERT_EQ(p.kernels.size(), 2u) << s.plan_summary();
  ASSERT_EQ(p.kernels[0].boundaries.size(), 1u) << s.plan_summary();
  EXPECT_NE(p.kernels[0].boundaries[0].find("not fused: reduction feeds a reduction"),
            std::string::npos)
      << p.kernels[0].boundaries[0];
  EXPECT_TRUE(p.kernels[1].boundaries.empty());
  EXPECT_EQ(profile_from_json(profile_to_json(p)).kernels[0].boundaries, p.kernels[0].boundaries);
  Report rep = diagnose(p, sample_ceilings(), {.model = "m.onnx"});
  EXPECT_EQ(report_json(rep)["kernels"][0]["boundaries"][0], p.kernels[0].boundaries[0]);
  EXPECT_NE(render_html(rep).find("not fused: reduction feeds a reduction"), std::string::npos);
}

TEST(DoctorHtml, TopKernelsAreNumberedWithALegendAndTheTooltipReadsRight) {
  Report r = sample_report();
  std::string h = render_html(r);
  EXPECT_EQ(count(h, "<text class=\"label\""), 4u);
  EXPECT_NE(h.find("id=\"roofline-legend\""), std::string::npos);
  EXPECT_EQ(count(h, "class=\"legend-entry\""), 4u);
  EXPECT_EQ(h.find("(not plotted"), std::string::npos);
  // With --top 2 only the two longest are numbered; every kernel still has its dot.
  r.top = 2;
  std::string h2 = render_html(r);
  EXPECT_EQ(count(h2, "<text class=\"label\""), 2u);
  EXPECT_EQ(count(h2, "class=\"legend-entry\""), 2u);
  EXPECT_EQ(count(h2, "<circle class=\"kernel"), 4u);
  // The floor is a fraction of the kernel's time, never the other way round.
  const KernelAnalysis& gemm = r.kernels[0];
  EXPECT_EQ(h.find("of floor"), std::string::npos);
  EXPECT_NE(h.find(fmt::format("<title>#1 gemm&lt;a&amp;b&gt; (contraction, {}): 8.0000 ms; floor "
                               "{:.4f} ms = {:.1f}% of its time ({:.2f}x the floor)</title>",
                               regime_name(gemm.regime), gemm.floor_ms, 100 * gemm.efficiency,
                               8.0 / gemm.floor_ms)),
            std::string::npos)
      << h;
}

TEST(DoctorHtml, BatchSweepAndCompareSectionsOnlyWhenRun) {
  std::string plain = render_html(sample_report());
  EXPECT_EQ(plain.find("id=\"batch-sweep\""), std::string::npos);
  EXPECT_EQ(plain.find("id=\"compare\""), std::string::npos);

  Report r = full_report();
  std::string h = render_html(r);
  ASSERT_TRUE(r.batch);
  EXPECT_NE(h.find("id=\"batch-sweep\""), std::string::npos);
  size_t at = h.find("<table id=\"batch-table\"");
  ASSERT_NE(at, std::string::npos);
  std::string bt = h.substr(at, h.find("</table>", at) - at);
  EXPECT_EQ(count(bt, "<tr><td>"), r.batch->points.size());
  EXPECT_NE(bt.find("<td>8</td><td>15.000</td>"), std::string::npos);  // 3 + 1.5 * 8
  EXPECT_NE(h.find(fmt::format("{:.3f} ms + {:.4f} ms", r.batch->fixed_ms, r.batch->per_item_ms)),
            std::string::npos);

  EXPECT_NE(h.find("id=\"compare\""), std::string::npos);
  EXPECT_NE(h.find("<tr><td>wall</td><td>12.000</td><td>6.000</td><td>0.50x</td></tr>"),
            std::string::npos);
  EXPECT_NE(h.find("id=\"compare-kernel-table\""), std::string::npos);
  EXPECT_NE(h.find("id=\"compare-class-table\""), std::string::npos);

  Report failed = sample_report();
  failed.batch_error = "the model has no batch dimension";
  EXPECT_NE(render_html(failed).find("Not run: the model has no batch dimension"),
            std::string::npos);
}

TEST(DoctorHtml, ChromiumRendersTheCompletePage) {
  std::string chromium = find_chromium();
  if (chromium.empty())
    GTEST_SKIP() << "chromium is not installed (apt-get install chromium); headless render test "
                    "skipped";
  auto dir = std::filesystem::temp_directory_path() / ("brrr_html_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto page = dir / "report.html";
  std::ofstream(page) << render_html(fusable_report());
  std::string cmd = chromium + " --headless --no-sandbox --disable-gpu --user-data-dir=" +
                    (dir / "profile").string() + " --dump-dom file://" + page.string() +
                    " 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string dom;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) dom.append(buf, n);
  int rc = pclose(f);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(rc, 0) << "chromium failed: " << cmd;
  EXPECT_NE(dom.find("<svg id=\"roofline\""), std::string::npos) << dom.substr(0, 500);
  EXPECT_NE(dom.find("<circle class=\"kernel top\""), std::string::npos);
  EXPECT_NE(dom.find("<polyline class=\"ceiling\""), std::string::npos);
  EXPECT_EQ(count(dom, "<text class=\"label\""), 4u);
  EXPECT_NE(dom.find("<g id=\"roofline-legend\">"), std::string::npos);
  // The tables are real tables in the DOM (the parser put the rows in a tbody), with every kernel.
  size_t at = dom.find("<table id=\"kernel-table\"");
  ASSERT_NE(at, std::string::npos);
  std::string table = dom.substr(at, dom.find("</table>", at) - at);
  EXPECT_NE(table.find("<tbody>"), std::string::npos);
  EXPECT_EQ(count(table, "<tr class="), 4u);
  EXPECT_NE(table.find("/<wbr>encoder/<wbr>MatMul"), std::string::npos);
  EXPECT_NE(table.find("not fused:"), std::string::npos);
  // Each kernel's spread over the runs: the gemm's 7.2-8.8 ms (p10, p90 by nearest rank).
  EXPECT_NE(table.find("<th>p10-p90 ms</th>"), std::string::npos);
  EXPECT_NE(table.find("<td class=\"spread\">7.2000-8.8000</td>"), std::string::npos) << table;
  // The class table adds up to the wall: its last class row is the time between kernels.
  at = dom.find("<table id=\"class-table\"");
  ASSERT_NE(at, std::string::npos);
  std::string classes = dom.substr(at, dom.find("</table>", at) - at);
  EXPECT_NE(classes.find("<td>between kernels / dispatch</td>"), std::string::npos) << classes;
  EXPECT_NE(classes.find("<td>total</td>"), std::string::npos);
  // Remedies name their kernels, ONNX nodes and the fusion boundaries they quote.
  at = dom.find("<table id=\"remedies\"");
  ASSERT_NE(at, std::string::npos);
  std::string remedies = dom.substr(at, dom.find("</table>", at) - at);
  for (const char* col :
       {"<th>kernels (ONNX nodes)</th>", "<th>fusion boundaries</th>", "<th>how</th>"})
    EXPECT_NE(remedies.find(col), std::string::npos) << col;
  EXPECT_NE(remedies.find("/encoder/MatMul"), std::string::npos) << remedies;
  EXPECT_NE(remedies.find("layernorm, relu (&lt;script&gt;alert(1)&lt;/script&gt;, /act/Relu"),
            std::string::npos)
      << remedies;
  EXPECT_NE(remedies.find("layernorm -&gt; relu via 'ln_out'"), std::string::npos) << remedies;
  EXPECT_NE(remedies.find("not fused: &lt;b&gt;reduction&lt;/b&gt; output"), std::string::npos)
      << remedies;
  EXPECT_NE(dom.find("<section id=\"batch-sweep\">"), std::string::npos);
  EXPECT_NE(dom.find("<table id=\"batch-table\">"), std::string::npos);
  EXPECT_NE(dom.find("<section id=\"compare\">"), std::string::npos);
  EXPECT_NE(dom.find("<table id=\"compare-kernel-table\""), std::string::npos);
  // The hostile node name is text on the page, not an element: no script ever ran or exists.
  EXPECT_EQ(dom.find("<script"), std::string::npos);
  EXPECT_NE(dom.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(dom.find("<b>reduction</b>"), std::string::npos);
}
