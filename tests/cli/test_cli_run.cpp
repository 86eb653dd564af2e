// `brrr run`, `bench` and `doctor` on models with symbolic input dims (one rule, one --shape
// parser), run's times and --save-outputs files (read back by onnx.numpy_helper), and the thread
// count the reports print.
#include <regex>

#include "../unit/onnx_builder.hpp"
#include "cli_util.hpp"

namespace brrr::cli_test {
namespace {

ScratchCleanup cleanup;

// Two inputs with a symbolic batch: a [batch, 3] and b [batch, 4]; outputs Relu(a), Relu(b).
std::string two_input_model() {
  static std::string path;
  if (!path.empty()) return path;
  onnx_builder::Model m;
  m.input("a", {-1, 3});
  m.input("b", {-1, 4});
  m.node("Relu", {"a"}, {"ya"});
  m.node("Relu", {"b"}, {"yb"});
  m.output("ya");
  m.output("yb");
  path = (scratch() / "two_inputs.onnx").string();
  m.save(path);
  return path;
}

// run, bench and doctor say the same note, and the --shape it names works when typed.
TEST(CliShapes, OneRuleForSymbolicDims) {
  std::string m = cli_data() + "/symbolic_batch.onnx";
  const std::string note =
      "brrr: note: input 'x' has symbolic dims [batch, 3]; using --shape x:1x3\n";
  for (const char* cmd : {"run ", "bench ", "doctor "}) {
    SCOPED_TRACE(cmd);
    std::string extra = std::string(cmd) == "run " ? "" : " --reps 1";
    CliResult r = run_cli(cmd + m + extra);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_EQ(r.err.rfind(note, 0) == 0 || has(r.err, "\n" + note), true) << r.err;
    // The example in the note, typed: no note.
    CliResult typed = run_cli(cmd + m + extra + " --shape x:1x3");
    EXPECT_EQ(typed.code, 0) << typed.out << typed.err;
    EXPECT_FALSE(has(typed.err, "note:")) << typed.err;
  }
  CliResult five = run_cli("bench " + m + " --reps 1 --shape x:5x3");
  EXPECT_EQ(five.code, 0) << five.err;
}

TEST(CliShapes, TrtexecStyleListAndRepeats) {
  std::string m = two_input_model();
  for (const char* shapes : {"--shape a:2x3,b:5x4", "--shape a:2x3 --shape b:5x4",
                             "--shape a:2,3 --shape b:5,4", "--shape b:5x4,a:2,3"}) {
    SCOPED_TRACE(shapes);
    CliResult r = run_cli("run " + m + " --reps 1 " + shapes);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;
    EXPECT_TRUE(has(r.out, "output 0 'ya': float32 [2, 3]")) << r.out;
    EXPECT_TRUE(has(r.out, "output 1 'yb': float32 [5, 4]")) << r.out;
  }
  // One given, one left open: the open one gets the note.
  CliResult half = run_cli("run " + m + " --reps 1 --shape a:2x3");
  EXPECT_EQ(half.code, 0) << half.err;
  EXPECT_EQ(half.err, "brrr: note: input 'b' has symbolic dims [N, 4]; using --shape b:1x4\n");
  CliResult bench = run_cli("bench " + m + " --reps 1 --shape a:2x3,b:5x4");
  EXPECT_EQ(bench.code, 0) << bench.err;
  EXPECT_TRUE(bench.err.empty()) << bench.err;
  expect_usage_error(run_cli("run " + m + " --shape a:2x3,a:2x3"), "--shape given twice for 'a'");
  expect_usage_error(run_cli("run " + m + " --shape a:2x3,c:1x1"),
                     "--shape names 'c', which is not an input of the model (its inputs: a, b)");
  expect_usage_error(run_cli("bench " + m + " --shape c:1"), "not an input of any MODEL.onnx");
  expect_usage_error(run_cli("doctor " + m + " --shape a:2x3,b:5xN"), "'N' is not a non-negative");
  expect_usage_error(run_cli("bench " + m + " --shape a:2x3,"), "ends with a separator");
}

TEST(CliRun, PrintsLoadCompileAndRunTimes) {
  std::string m = cli_data() + "/add_relu.onnx";
  CliResult r = run_cli("run " + m + " --reps 7");
  ASSERT_EQ(r.code, 0) << r.err;
  std::regex re(
      "time: load ([0-9.e+-]+) ms, compile ([0-9.e+-]+) ms, first run ([0-9.e+-]+) ms, run "
      "([0-9.e+-]+) ms \\(median of 7, min ([0-9.e+-]+), max ([0-9.e+-]+)\\)\n");
  std::smatch t;
  ASSERT_TRUE(std::regex_search(r.out, t, re)) << r.out;
  double load = std::stod(t[1]), compile = std::stod(t[2]), median = std::stod(t[4]),
         lo = std::stod(t[5]), hi = std::stod(t[6]);
  EXPECT_GT(load, 0);
  EXPECT_GT(compile, 0);
  EXPECT_LE(lo, median);
  EXPECT_LE(median, hi);
  CliResult ref = run_cli("run " + m + " --backend reference --reps 2");
  EXPECT_TRUE(has(ref.out, "no compile (reference executor)")) << ref.out;
  EXPECT_TRUE(has(ref.out, "(median of 2,")) << ref.out;
  CliResult none = run_cli("run " + m + " --reps 0");
  EXPECT_TRUE(has(none.out, "first run")) << none.out;
  EXPECT_FALSE(has(none.out, "median")) << none.out;
}

// --save-outputs writes a test_data_set: brrr --check reads it back, and so does onnx.
TEST(CliRun, SaveOutputsModelZooLayout) {
  std::string m = two_input_model();
  fs::path dir = scratch() / "saved" / "test_data_set_0";
  fs::create_directories(dir.parent_path());
  CliResult r = run_cli("run " + m + " --reps 0 --shape a:2x3,b:5x4 --save-outputs " +
                        dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "saved: 2 inputs and 2 outputs in " + dir.string())) << r.out;
  for (const char* f : {"input_0.pb", "input_1.pb", "output_0.pb", "output_1.pb"})
    EXPECT_TRUE(fs::is_regular_file(dir / f)) << f;
  CliResult check = run_cli("run " + m + " --reps 0 --data " + dir.string() + " --check");
  EXPECT_EQ(check.code, 0) << check.out << check.err;
  EXPECT_TRUE(has(check.out, "check: PASS")) << check.out;

  if (!fs::exists(BRRR_PYTHON)) GTEST_SKIP() << "no " << BRRR_PYTHON << " (scripts/setup.sh)";
  // onnx reads each file; the outputs are Relu of the inputs, with the graph's names and shapes.
  fs::path script = scratch() / "read_pb.py";
  std::ofstream(script) << "import sys, numpy as np, onnx\n"
                           "from onnx import numpy_helper\n"
                           "def load(f):\n"
                           "    t = onnx.TensorProto()\n"
                           "    t.ParseFromString(open(f, 'rb').read())\n"
                           "    return t.name, numpy_helper.to_array(t)\n"
                           "d = sys.argv[1]\n"
                           "for i, (x, y) in enumerate([('a', 'ya'), ('b', 'yb')]):\n"
                           "    ni, a = load(f'{d}/input_{i}.pb')\n"
                           "    no, b = load(f'{d}/output_{i}.pb')\n"
                           "    assert (ni, no) == (x, y), (ni, no)\n"
                           "    assert a.dtype == np.float32 and a.shape == b.shape, (a, b)\n"
                           "    assert np.array_equal(np.maximum(a, 0), b), (a, b)\n"
                           "    print(no, b.shape)\n";
  CliResult py{};
  std::string cmd = std::string("'") + BRRR_PYTHON + "' '" + script.string() + "' '" +
                    dir.string() + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  char buf[512];
  while (fgets(buf, sizeof buf, p)) py.out += buf;
  int st = pclose(p);
  EXPECT_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0) << py.out;
  EXPECT_EQ(py.out, "ya (2, 3)\nyb (5, 4)\n");
}

// What the reports print is the thread count the session ran on: --threads, BRRR_THREADS and
// OMP_NUM_THREADS each give one thread.
TEST(CliRun, ThreadsReported) {
  std::string m = cli_data() + "/add_relu.onnx";
  for (const auto& [args, env] : std::vector<std::pair<std::string, std::string>>{
           {"--threads 1", ""}, {"", "OMP_NUM_THREADS=1"}, {"", "BRRR_THREADS=1"}}) {
    SCOPED_TRACE(args + env);
    CliResult r = run_cli("run " + m + " --reps 1 " + args, env);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "backend: cpu, 1 thread\n")) << r.out;
    CliResult d = run_cli("doctor " + m + " --reps 1 " + args, env);
    EXPECT_EQ(d.code, 0) << d.err;
    EXPECT_TRUE(has(d.out, "kernels on cpu, 1 thread)")) << d.out;
    fs::path json = scratch() / "bench.json";
    CliResult b = run_cli("bench " + m + " --reps 1 --json " + json.string() + " " + args, env);
    EXPECT_EQ(b.code, 0) << b.err;
    EXPECT_TRUE(has(b.out, "threads: 1 ")) << b.out;
    EXPECT_TRUE(has(slurp(json), "\"threads\": 1")) << slurp(json);
  }
  CliResult two = run_cli("run " + m + " --reps 1 --threads 2", "OMP_NUM_THREADS=1");
  EXPECT_TRUE(has(two.out, "backend: cpu, 2 threads\n")) << two.out;
}

// libgomp's spin after each OpenMP region (GOMP_SPINCOUNT 300000) takes the cores of a busy
// machine; brrr runs itself again with a short spin (100000) unless the user chose a policy or a
// count. libgomp prints its settings at load (OMP_DISPLAY_ENV=verbose), so the re-executed process
// shows its own.
TEST(CliRun, OpenMPSpinDefaultsToShort) {
  auto last_spincount = [](const std::string& err) {
    size_t at = err.rfind("GOMP_SPINCOUNT = '");
    if (at == std::string::npos) return std::string();
    at += 18;
    return err.substr(at, err.find('\'', at) - at);
  };
  CliResult d =
      run_cli("--version", "-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose");
  EXPECT_EQ(d.code, 0) << d.err;
  if (last_spincount(d.err).empty()) GTEST_SKIP() << "not libgomp: " << d.err;
  EXPECT_EQ(last_spincount(d.err), "100000") << d.err;
  // The user's choice is kept: active spins far longer than the default, a count is taken as is.
  CliResult active = run_cli("--version", "OMP_DISPLAY_ENV=verbose OMP_WAIT_POLICY=active");
  EXPECT_EQ(active.code, 0) << active.err;
  EXPECT_NE(last_spincount(active.err), "0") << active.err;
  CliResult set = run_cli("--version", "OMP_DISPLAY_ENV=verbose GOMP_SPINCOUNT=1234");
  EXPECT_EQ(last_spincount(set.err), "1234") << set.err;
}

}  // namespace
}  // namespace brrr::cli_test
