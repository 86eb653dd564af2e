// The HTML report is one self-contained page whose roofline SVG survives a real browser: rendered
// headless with chromium (skipped with a clear line when chromium is not installed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "brrr/doctor.hpp"

using namespace brrr;
using namespace brrr::doctor;

namespace {

Report sample_report() {
  Ceilings c;
  c.bandwidth_gbs = 20;
  c.peak_gflops = {{"fp32", 500}};
  c.special_gops = {{"cos", 5}};
  c.dispatch_us = 1;
  RunProfile p;
  p.backend = "reference";
  p.wall_ms = 12;
  auto add = [&](const char* name, OpClass cls, double flops, double bytes, double ms) {
    KernelRecord k;
    k.name = name;
    k.kind = "reference";
    k.ops = {name};
    k.cls = cls;
    k.cost.flops = flops;
    k.cost.bytes = bytes;
    k.time_ms = ms;
    p.kernels.push_back(k);
  };
  add("gemm<a&b>", OpClass::contraction, 2e9, 12e6, 8);
  add("layernorm", OpClass::normalization, 5e6, 8e6, 2);
  add("relu", OpClass::elementwise, 1e6, 8e6, 1.5);
  add("tiny", OpClass::movement, 4, 32, 0.001);
  return diagnose(p, c, {.model = "sample.onnx"});
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
  EXPECT_EQ(h.find("http://"), h.find("http://www.w3.org/2000/svg"));  // no external fetches
  // The tiny kernel has no intensity worth plotting on a log axis but still counts.
  size_t dots = 0;
  for (size_t p = h.find("class=\"kernel\""); p != std::string::npos;
       p = h.find("class=\"kernel\"", p + 1))
    ++dots;
  EXPECT_EQ(dots, 4u);
}

TEST(DoctorHtml, ChromiumRendersTheRooflineSvg) {
  std::string chromium = find_chromium();
  if (chromium.empty())
    GTEST_SKIP() << "chromium is not installed (apt-get install chromium); headless render test "
                    "skipped";
  auto dir = std::filesystem::temp_directory_path() / ("brrr_html_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto page = dir / "report.html";
  std::ofstream(page) << render_html(sample_report());
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
  EXPECT_NE(dom.find("<circle class=\"kernel\""), std::string::npos);
  EXPECT_NE(dom.find("<polyline class=\"ceiling\""), std::string::npos);
  EXPECT_NE(dom.find("class-table"), std::string::npos);
}
