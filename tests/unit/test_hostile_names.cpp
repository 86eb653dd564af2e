// Model text (node, value and graph names) must never become generated code, a dump file name or
// a broken log: names full of C syntax, colliding names and a 1 MB name run through the compiled
// Session (checked against the reference) and through `brrr run`.
#include <regex>

#include "hostile_util.hpp"

namespace brrr::hostile {
namespace {

// Strings from names.onnx that would be code if pasted into the generated C++ (short words such as
// "int" or "return" occur in any C++ file, so the check uses the distinctive ones).
const std::vector<std::string> kHostile = {"#include <stdlib.h>\\",
                                           "system(\"touch",
                                           "brrr_pwned",
                                           "#define float int",
                                           "int main() { return 1; }",
                                           "}\n#pragma once\n{",
                                           "\\\nabort();",
                                           "%s%n",
                                           "graph */"};

std::map<std::string, Tensor> names_inputs() {
  return {
      {"x\n\"*/ #include <stdlib.h>\\", Tensor::from_vector<float>({4}, {-1.5f, 0.25f, 2, -0.f})}};
}

// Every dumped file is named brrr_<hex key>.cpp and holds none of the hostile strings.
void check_dump(const fs::path& dir, int min_files) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    std::string fname = e.path().filename().string();
    EXPECT_TRUE(std::regex_match(fname, std::regex("brrr_[0-9a-f]{32}\\.cpp"))) << fname;
    std::string text = slurp(e.path());
    for (const auto& h : kHostile) EXPECT_EQ(text.find(h), std::string::npos) << h;
  }
  EXPECT_GE(files, min_files);
}

TEST(HostileNames, SessionMatchesReferenceAndDumpHasNoModelText) {
  fs::path dump = scratch() / "dump_names";
  for (int fusion : {1, 0}) {
    SessionOptions so = session_options(dump.string());
    so.fusion = fusion;
    // SLEEF u10 vs libm tanhf differ by an ulp; at x = -0 the output is (0.125 - tanh(0.125)) *
    // 0.125, a cancellation that turns 1 ulp of tanh into ~100 ulps of y (both are within 1e-5
    // of the exact value). Which one runs depends on whether GCC vectorizes a 4-element loop.
    session_matches_reference(fixture("names.onnx"), names_inputs(), so, 256);
  }
  check_dump(dump, 1);
  EXPECT_FALSE(fs::exists("/tmp/brrr_pwned"));
}

TEST(HostileNames, CollidingNamesStayDistinct) {
  // a.b, a_b (an initializer), a-b and "a b" are four different values: if they shared one
  // generated identifier the result would differ from the reference (checked above) and here.
  Session s(fixture("names.onnx"), session_options());
  auto out = s.run(names_inputs());
  const float x[4] = {-1.5f, 0.25f, 2, -0.f}, c1[4] = {0.5f, -1, 2, 0.25f},
              c2[4] = {3, 1, -2, 0.5f};
  for (int i = 0; i < 4; ++i) {
    float ab = x[i] > 0 ? x[i] : 0.f, amb = ab + c1[i], asb = amb * c2[i], in = asb - x[i];
    float y1 = (-std::tanh(in) + asb) * in;
    EXPECT_NEAR(out[0].data<float>()[i], y1, 1e-5f) << i;
    EXPECT_NEAR(out[1].data<float>()[i], 1 / (1 + std::exp(-std::fabs(ab))), 1e-6f) << i;
  }
  // The plan summary (a log) prints the names without crashing.
  EXPECT_FALSE(s.plan_summary().empty());
}

TEST(HostileNames, HugeNameThroughSessionAndDump) {
  fs::path dump = scratch() / "dump_huge";
  std::map<std::string, Tensor> in = {
      {"x", Tensor::from_vector<float>({8}, {-2, -1, -0.f, 0, 0.5f, 1, 2, 3})}};
  SessionOptions so = session_options(dump.string());
  Session s(fixture("huge_name.onnx"), so);
  EXPECT_EQ(s.graph().nodes.size() > 0, true);
  auto got = s.run(in);
  auto want = reference(fixture("huge_name.onnx"), in);
  expect_same(got[0], want[0], "y", 2);
  EXPECT_GT(s.plan_summary().size(), 0u);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dump)) {
    ++files;
    EXPECT_LT(fs::file_size(e.path()), size_t(1) << 19) << "model text in the dumped source?";
    EXPECT_EQ(slurp(e.path()).find("return*/"), std::string::npos);
  }
  EXPECT_GE(files, 1);
}

TEST(HostileNames, CliRunsAndDumpsNoModelText) {
  fs::path dump = scratch() / "dump_cli";
  CliResult r =
      run_cli("run '" + fixture("names.onnx") + "'", "BRRR_DUMP_DIR='" + dump.string() + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("output 1"), std::string::npos) << r.out;
  check_dump(dump, 1);
  // BRRR_DEBUG=2 logs the IR after every pass, names included: still no crash.
  CliResult d = run_cli("run '" + fixture("names.onnx") + "'", "BRRR_DEBUG=2");
  EXPECT_EQ(d.code, 0) << d.err.substr(0, 2000);
  CliResult h = run_cli("run '" + fixture("huge_name.onnx") + "'", "BRRR_DEBUG=2");
  EXPECT_EQ(h.code, 0) << h.err.substr(0, 2000);
  EXPECT_NE(h.out.find("output 0 'y'"), std::string::npos) << h.out.substr(0, 2000);
  EXPECT_FALSE(fs::exists("/tmp/brrr_pwned"));
}

}  // namespace
}  // namespace brrr::hostile
