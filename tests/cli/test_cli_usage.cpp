// The brrr binary's surface, as trtexec and onnxruntime users expect it: --version, `brrr help`,
// every usage error one `brrr: error:` line with exit 2, defaults in --help, the README's CLI
// section listing exactly the options --help lists, CPU-only and CUDA-only options refused where
// they would do nothing, and output paths checked before any work starts.
#include <regex>
#include <set>

#include "cli_util.hpp"

namespace brrr::cli_test {
namespace {

ScratchCleanup cleanup;

TEST(CliUsage, Version) {
  CliResult r = run_cli("--version");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_EQ(r.out.rfind("brrr 0.", 0), 0u) << r.out;
  for (const char* line : {"\ncommit: ", "\nbuild: ", "\nbackends: cpu, reference", "\nlibraries: "})
    EXPECT_TRUE(has(r.out, line)) << line << " in " << r.out;
  // The commit is a hex hash (possibly "-dirty") when built from a checkout.
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.out, m, std::regex("commit: ([0-9a-f]{7,}(-dirty)?|unknown)")))
      << r.out;
}

TEST(CliUsage, HelpCommand) {
  CliResult r = run_cli("help");
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* cmd : {"run", "bench", "doctor", "probe", "--version"})
    EXPECT_TRUE(has(r.out, cmd)) << cmd << " in " << r.out;
  EXPECT_EQ(run_cli("--help").out, r.out);
  CliResult run = run_cli("help run");
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(has(run.out, "--save-outputs")) << run.out;
  EXPECT_EQ(run_cli("run --help").out, run.out);
  expect_usage_error(run_cli("help nope"), "no command 'nope'");
}

TEST(CliUsage, UsageErrorsAreOneLine) {
  std::string m = cli_data() + "/add_relu.onnx";
  expect_usage_error(run_cli(""), "give a command: run, bench, doctor, probe or help");
  expect_usage_error(run_cli("frobnicate"), "frobnicate");
  expect_usage_error(run_cli("run " + m + " --backend gpu"), "--backend: gpu not in");
  expect_usage_error(run_cli("run " + m + " --backend gpu"), "brrr run --help");
  expect_usage_error(run_cli("bench --repetitions 100"), "--repetitions");
  expect_usage_error(run_cli("run"), "model");
  expect_usage_error(run_cli("run " + m + " --reps many"), "--reps");
  expect_usage_error(run_cli("doctor " + m + " --top 0"), "--top");
  expect_usage_error(run_cli("probe --backend tpu"), "--backend: tpu not in");
  // What no option took, named as typed (CLI11 lists it last first: "100 --iterations").
  expect_usage_error(run_cli("run " + m + " --iterations 100"),
                     "unknown option: --iterations 100 (brrr run --help lists the options)");
  expect_usage_error(run_cli("run " + m + " extra"), "argument not expected: extra");
  expect_usage_error(run_cli("--backend cpu run " + m),
                     "'--backend cpu' comes before the command: options follow it (brrr run "
                     "--backend cpu ...");
  expect_usage_error(run_cli("--bogus"), "'--bogus' is not an option of brrr; give a command");
}

TEST(CliUsage, HelpShowsDefaults) {
  CliResult b = run_cli("bench --help");
  EXPECT_TRUE(has(b.out, "--reps INT:INT in [1 - 10000]=10")) << b.out;
  EXPECT_TRUE(has(b.out, "--backend TEXT:{cpu,cuda}=cpu")) << b.out;
  CliResult d = run_cli("doctor --help");
  EXPECT_TRUE(has(d.out, "--reps INT:INT in [1 - 1000]=5")) << d.out;
  EXPECT_TRUE(has(d.out, "--top INT:INT in [1 - 100000]=10")) << d.out;
  CliResult r = run_cli("run --help");
  EXPECT_TRUE(has(r.out, "--rtol FLOAT=by precision")) << r.out;
  EXPECT_TRUE(has(r.out, "--threads INT:INT in [0 - 1024]=0")) << r.out;
}

// The options a command's --help lists ("--data", ...; not --help itself).
std::set<std::string> help_options(const std::string& cmd) {
  std::string text = run_cli(cmd + " --help").out;
  std::set<std::string> opts;
  std::regex re("\n  (?:-[a-z],)?(--[a-z-]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it)
    if ((*it)[1] != "--help") opts.insert((*it)[1]);
  return opts;
}

// The README's CLI section: the usage block's text for `brrr CMD` (its line and continuations).
std::string readme_usage(const std::string& cmd) {
  std::string readme = slurp(BRRR_README);
  size_t a = readme.find("\n## CLI\n");
  EXPECT_NE(a, std::string::npos);
  size_t b = readme.find("\n```\n", readme.find("```", a) + 3);
  std::string block = readme.substr(a, b - a), text;
  bool in = false;
  size_t p = 0;
  while (p < block.size()) {
    size_t q = block.find('\n', p);
    std::string line = block.substr(p, q == std::string::npos ? std::string::npos : q - p);
    p = q == std::string::npos ? block.size() : q + 1;
    if (line.rfind("brrr ", 0) == 0) in = line.rfind("brrr " + cmd + " ", 0) == 0;
    if (in) text += line + "\n";
  }
  return text;
}

TEST(CliUsage, ReadmeMatchesHelp) {
  for (const char* cmd : {"run", "bench", "doctor", "probe"}) {
    SCOPED_TRACE(cmd);
    std::string usage = readme_usage(cmd);
    ASSERT_FALSE(usage.empty()) << "README's CLI section has no `brrr " << cmd << "` line";
    std::set<std::string> help = help_options(cmd), readme;
    std::regex re("(--[a-z-]+)");
    for (auto it = std::sregex_iterator(usage.begin(), usage.end(), re);
         it != std::sregex_iterator(); ++it)
      readme.insert((*it)[1]);
    for (const auto& o : help) EXPECT_TRUE(readme.count(o)) << o << " is in --help, not the README";
    for (const auto& o : readme) EXPECT_TRUE(help.count(o)) << o << " is in the README, not --help";
  }
  std::string top = slurp(BRRR_README);
  EXPECT_TRUE(has(top, "brrr --version")) << "the README's CLI section names --version";
  EXPECT_TRUE(has(top, "brrr help")) << "the README's CLI section names brrr help";
}

TEST(CliUsage, PrecisionRefusedWhereNotImplemented) {
  std::string m = cli_data() + "/add_relu.onnx";
  for (const char* cmd : {"run ", "bench "}) {
    SCOPED_TRACE(cmd);
    expect_usage_error(run_cli(cmd + m + " --precision fp16"),
                       "--precision fp16 on --backend cpu: the CPU has no fp16 path");
    expect_usage_error(run_cli(cmd + m + " --precision tf32"),
                       "--precision tf32 on --backend cpu: tf32 is a GPU Tensor Core format");
  }
  expect_usage_error(run_cli("run " + m + " --backend reference --precision bf16"),
                     "the reference backend computes in float32 only");
  CliResult ok = run_cli("run " + m + " --precision fp32 --reps 1");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST(CliUsage, AppliedValidated) {
  std::string m = cli_data() + "/add_relu.onnx";
  expect_usage_error(run_cli("doctor " + m + " --compare --applied turbo"),
                     "--applied: turbo not in {fusion,static_plan,faster_units}");
  expect_usage_error(run_cli("doctor " + m + " --applied fusion"),
                     "give one of them");
}

TEST(CliUsage, ThreadsIsCpuOnly) {
  std::string m = cli_data() + "/add_relu.onnx";
  expect_usage_error(run_cli("run " + m + " --backend reference --threads 2"),
                     "--threads sets the CPU backend's threads");
  expect_usage_error(run_cli("run " + m + " --threads -1"), "--threads");
}

// A bad output path fails first: one error line and nothing on stdout (no profile, no table).
TEST(CliUsage, OutputPathsCheckedBeforeWork) {
  std::string m = cli_data() + "/add_relu.onnx";
  const std::string bad = "/nonexistent_brrr_dir/x";
  const std::pair<std::string, std::string> cases[] = {
      {"run " + m + " --save-outputs " + bad, "--save-outputs"},
      {"run " + m + " --save-outputs " + m, "exists and is not a folder"},
      {"run " + m + " --data " + cli_data() + "/data_ok --save-outputs " + cli_data() + "/data_ok",
       "is the --data folder"},
      {"bench " + m + " --json " + bad, "--json"},
      {"doctor " + m + " --json " + bad, "--json"},
      {"doctor " + m + " --trace " + bad, "--trace"},
      {"doctor " + m + " --html " + bad, "--html"},
      {"doctor " + m + " --save-profile " + bad, "--save-profile"},
      {"doctor " + m + " --json " + scratch().string(), "is a directory"},
      {"probe --json " + bad, "--json"},
      // An input the run needs at its end is read at its start too.
      {"doctor " + m + " --compare-profile " + bad, "--compare-profile: cannot read"},
      {"doctor " + m + " --compare-profile " + m, "--compare-profile '" + m + "': not JSON"},
      {"doctor " + m + " --compare --compare-profile " + m, "give one of them"},
  };
  for (const auto& [args, msg] : cases) {
    SCOPED_TRACE(args);
    CliResult r = run_cli(args);
    expect_usage_error(r, msg);
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_FALSE(fs::exists(cli_data() + "/data_ok/output_1.pb"));
}

}  // namespace
}  // namespace brrr::cli_test
