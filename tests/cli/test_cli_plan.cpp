// `--save-plan FILE` / `--load-plan FILE` (run and bench): a round trip gives the same outputs
// without running the C++ compiler, a plan saved for another model, shape, thread count or
// backend is refused in one line, and a damaged, truncated or foreign file is refused in one line.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace brrr {
namespace {
using namespace cli_test;

ScratchCleanup cleanup;

std::string example(const std::string& name) {
  std::string readme = BRRR_README;
  return readme.substr(0, readme.rfind('/')) + "/examples/" + name + "/model.onnx";
}

std::string path(const std::string& name) { return (scratch() / name).string(); }

// An empty kernel cache of its own, so that nothing comes from an earlier test's cache.
std::string fresh_cache(const std::string& name) {
  fs::path d = scratch() / ("cache_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return "XDG_CACHE_HOME=" + d.string();
}

// Saves a plan for `model` (extra: its options) and returns the saved file's path.
std::string save(const std::string& model, const std::string& name, const std::string& extra = "") {
  std::string plan = path(name + ".plan");
  CliResult r = run_cli("run " + model + " --reps 0 --save-plan " + plan + " " + extra,
                        fresh_cache(name));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "plan: saved " + plan)) << r.out;
  return plan;
}

// Generated code and packed conv weights: outputs equal bit for bit, and the loading run needs
// no compiler (BRRR_CXX names none, the kernel cache is empty).
TEST(CliPlan, RoundTripGivesTheSameOutputsWithoutTheCompiler) {
  for (const char* name : {"mlp_tiny", "squeezenet1_1"}) {
    std::string m = example(name);
    std::string a = path(std::string(name) + "_saved"), b = path(std::string(name) + "_loaded");
    std::string plan = path(std::string(name) + ".plan");
    CliResult s = run_cli("run " + m + " --reps 0 --save-plan " + plan + " --save-outputs " + a,
                          fresh_cache(std::string(name) + "_s"));
    ASSERT_EQ(s.code, 0) << s.out << s.err;
    CliResult l = run_cli("run " + m + " --reps 0 --load-plan " + plan + " --save-outputs " + b,
                          fresh_cache(std::string(name) + "_l") + " BRRR_CXX=/nonexistent/c++");
    ASSERT_EQ(l.code, 0) << l.out << l.err;
    EXPECT_TRUE(has(l.out, "plan: loaded " + plan)) << l.out;
    // Every module and pack saved is taken (which packs are saved depends on their reorder
    // times, so the count is read from the save's line).
    const std::regex counts(R"(\((\d+) generated module\(s\), (\d+) packed)");
    std::smatch saved, taken;
    ASSERT_TRUE(std::regex_search(s.out, saved, counts)) << s.out;
    ASSERT_TRUE(std::regex_search(l.out, taken, counts)) << l.out;
    EXPECT_EQ(saved[1], taken[1]) << s.out << l.out;
    EXPECT_EQ(saved[2], taken[2]) << s.out << l.out;
    EXPECT_EQ(slurp(fs::path(a) / "output_0.pb"), slurp(fs::path(b) / "output_0.pb")) << name;
    // The same run without the plan needs the compiler it was denied (mlp_tiny has generated
    // kernels; squeezenet1_1 with oneDNN has none, so it only checks the outputs).
    if (std::string(name) == "mlp_tiny") {
      EXPECT_FALSE(has(l.out, "(0 generated module(s)")) << l.out;
      CliResult n = run_cli("run " + m + " --reps 0",
                            fresh_cache(std::string(name) + "_n") + " BRRR_CXX=/nonexistent/c++");
      EXPECT_NE(n.code, 0) << n.out;
    }
  }
}

TEST(CliPlan, RefusesAPlanSavedForSomethingElse) {
  std::string batch = cli_data() + "/symbolic_batch.onnx";
  std::string plan = save(batch, "batch", "--shape x:4x3 --threads 2");
  expect_usage_error(run_cli("run " + batch + " --shape x:2x3 --threads 2 --load-plan " + plan),
                     "was saved for shapes x:4x3, this run has x:2x3");
  expect_usage_error(run_cli("run " + batch + " --shape x:4x3 --threads 1 --load-plan " + plan),
                     "was saved for threads 2, this run has 1");
  expect_usage_error(run_cli("run " + cli_data() + "/add_relu.onnx --load-plan " + plan),
                     "was saved for model ");
  expect_usage_error(run_cli("run " + batch + " --shape x:4x3 --backend reference --load-plan " +
                             plan),
                     "--save-plan and --load-plan are for --backend cpu only");
}

TEST(CliPlan, RefusesDamagedOrForeignFiles) {
  std::string m = cli_data() + "/add_relu.onnx";
  std::string plan = save(m, "add_relu");
  std::string bytes = slurp(plan);
  ASSERT_GT(bytes.size(), 64u);
  auto write = [](const std::string& p, const std::string& data) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << data;
  };
  std::string bad = path("bad.plan");
  write(bad, bytes.substr(0, bytes.size() / 2));
  expect_usage_error(run_cli("run " + m + " --load-plan " + bad), "checksum mismatch");
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x20;
  write(bad, flipped);
  expect_usage_error(run_cli("run " + m + " --load-plan " + bad), "checksum mismatch");
  write(bad, "not a plan at all, just some text that is long enough to be read\n");
  expect_usage_error(run_cli("run " + m + " --load-plan " + bad), "not a brrr plan file");
  write(bad, "");
  expect_usage_error(run_cli("run " + m + " --load-plan " + bad), "not a brrr plan file");
  expect_usage_error(run_cli("run " + m + " --load-plan " + scratch().string()),
                     "not a readable regular file");
  expect_usage_error(run_cli("run " + m + " --load-plan " + path("missing.plan")),
                     "does not exist");
  // The output path is checked before any work.
  expect_usage_error(run_cli("run " + m + " --save-plan /nonexistent/dir/x.plan"), "--save-plan");
}

TEST(CliPlan, BenchSavesAndLoads) {
  std::string m = cli_data() + "/symbolic_batch.onnx";
  std::string plan = path("bench.plan"), json = path("bench.json");
  CliResult s = run_cli("bench " + m + " --shape x:4x3 --iterations 3 --save-plan " + plan);
  ASSERT_EQ(s.code, 0) << s.out << s.err;
  CliResult l = run_cli("bench " + m + " --shape x:4x3 --iterations 3 --load-plan " + plan +
                        " --json " + json);
  ASSERT_EQ(l.code, 0) << l.out << l.err;
  EXPECT_TRUE(has(l.out, "from --load-plan, its read included; generated code: from the plan file"))
      << l.out;
  nlohmann::json rec = nlohmann::json::parse(slurp(json))[0];
  EXPECT_EQ(rec["warm_from"], "plan file");
  EXPECT_EQ(rec["warm_code"], "from the plan file");
  EXPECT_GT(rec["first_run_ms"].get<double>(), 0);
  expect_usage_error(run_cli("bench " + m + " " + m + " --shape x:4x3 --load-plan " + plan),
                     "take one MODEL.onnx");
}

}  // namespace
}  // namespace brrr
