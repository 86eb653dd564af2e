// Runs the ONNX backend node tests (generate_node_tests.py writes them) through brrr's loader,
// shape inference and reference executor, then through the compiled CPU plan (a Session: fused
// generated code, library kernels), and compares both with the expected outputs.
//
//   brrr_conformance DATA_DIR [--skip-list FILE] [--filter SUBSTR] [--report FILE] [--no-fork]
//                    [--reference-only]
//
// Each test runs in a forked child (with a time limit), so a crash or hang in one op is reported
// as that test's failure instead of ending the run. Exit status 1 when any non-skipped test fails.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "brrr/onnx.hpp"
#include "brrr/op.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "cli/compare.hpp"
#include "cli/test_data.hpp"
#include "passes/pipeline.hpp"

namespace fs = std::filesystem;
using namespace brrr;

namespace {

enum class Status { pass, fail, skip };

struct Result {
  Status status = Status::fail;
  std::string reason;  // one line
};

std::string first_line(const std::string& s) {
  std::string l = s.substr(0, s.find('\n'));
  return l.size() > 300 ? l.substr(0, 300) + "..." : l;
}

// brrr refusing a feature with a clean "unsupported" error is correct behaviour, not a wrong
// result: such tests count as skipped.
bool is_unsupported(const std::string& msg) {
  return msg.find("unsupported") != std::string::npos ||
         msg.find("not supported") != std::string::npos;
}

cli::Tolerance tolerance_for(DType t) {
  // ONNX's backend tests use rtol 1e-3; atol 1e-5 absorbs float rounding near zero. The 16-bit
  // floats round every intermediate of an expanded (function) test to their own precision, so
  // they get twice their machine epsilon (f16: 2^-10, bf16: 2^-7). Integers and bool compare
  // exactly (compare_tensors ignores the tolerance for them).
  if (t == DType::f16) return cli::Tolerance{2e-3, 2e-3, false};
  if (t == DType::bf16) return cli::Tolerance{1.6e-2, 1.6e-2, false};
  return cli::Tolerance{1e-3, 1e-5, false};
}

// The graph the reference executor runs: the compile pipeline for the reference target, with the
// test's input shapes bound.
Graph prepare(Graph g, const std::map<std::string, Tensor>& inputs) {
  CompileOptions co;
  for (int id : g.inputs) {
    auto it = inputs.find(g.value(id).name);
    if (it != inputs.end()) co.input_shapes[it->first] = it->second.shape();
  }
  return compile(std::move(g), plan::Target::reference(), co).graph;
}

// Turns every integer graph input into a constant holding the test's data.
void freeze_integer_inputs(Graph& g, std::map<std::string, Tensor>& inputs) {
  std::vector<int> keep;
  for (int id : g.inputs) {
    Value& v = g.value(id);
    auto it = inputs.find(v.name);
    // Integer tensors (axes, shapes, K) and scalars of any type (Range bounds, OneHot depth).
    if (it == inputs.end() || (is_floating(it->second.dtype()) && it->second.numel() != 1)) {
      keep.push_back(id);
      continue;
    }
    v.constant = it->second;
    v.dtype = it->second.dtype();
    v.shape = it->second.shape();
    v.typed = true;
    inputs.erase(it);
  }
  g.inputs = keep;
}

// The first output of `outs` that differs from `expected`, as a failure naming `who` (the
// reference or the CPU plan); nothing when all match.
std::optional<Result> check_outputs(const char* who, const fs::path& ds, const Graph& g,
                                    const std::vector<Tensor>& outs,
                                    const std::vector<Tensor>& expected) {
  for (size_t i = 0; i < outs.size() && i < expected.size(); ++i) {
    if (!expected[i].defined()) continue;
    cli::Tolerance tol = tolerance_for(expected[i].dtype());
    cli::Comparison c = cli::compare_tensors(outs[i], expected[i], tol);
    std::string where = fmt::format("{}: {} output {} '{}'", who, ds.filename().string(), i,
                                    g.value(g.outputs[i]).name);
    if (!c.problem.empty()) return Result{Status::fail, where + ": " + c.problem};
    if (!c.pass)
      return Result{
          Status::fail,
          fmt::format("{}: {} of {} elements differ (max abs {:.3g}, max rel {:.3g}; "
                      "at {}: got {:.7g}, expected {:.7g}; {})",
                      where, c.mismatches, expected[i].numel(), c.max_abs, c.max_rel, c.worst,
                      c.worst_got, c.worst_expected, cli::criterion_str(expected[i], tol, c))};
  }
  return std::nullopt;
}

// Whether each test also runs through the compiled CPU plan (off with --reference-only).
bool g_run_plan = true;

Result run_one(const fs::path& dir) {
  Graph g0;
  try {
    g0 = load_onnx((dir / "model.onnx").string());
  } catch (const Error& e) {
    std::string m = first_line(e.what());
    return {is_unsupported(m) ? Status::skip : Status::fail, "load: " + m};
  }
  const OpTable& table = OpTable::get();
  for (const Node& n : g0.nodes) {
    const OpDef* d = table.find(n.domain, n.op);
    std::string full = n.domain.empty() ? n.op : n.domain + "." + n.op;
    if (!d) return {Status::skip, "unsupported op " + full};
    if (g0.opset > 0 && g0.opset < d->since)
      return {Status::skip, fmt::format("op {} is implemented from opset {}; test uses opset {}",
                                        full, d->since, g0.opset)};
  }
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {Status::fail, "no test_data_set_N folder"};
  bool froze = false;
  for (const fs::path& ds : sets) {
    std::string stage = "inputs";
    try {
      Graph g = g0;
      std::map<std::string, Tensor> inputs = cli::load_inputs(g, cli::list_pb_files(ds, "input"));
      stage = "expected outputs";
      std::vector<Tensor> expected =
          cli::load_expected_outputs(g, cli::list_pb_files(ds, "output"));
      stage = "infer_shapes";
      try {
        g = prepare(g, inputs);  // a copy: on failure g stays as loaded for the retry
      } catch (const Error& e) {
        // brrr plans static shapes, so shape-giving inputs (axes, K, target shapes) must be
        // known at load time; the node tests feed them as graph inputs. Retry with the integer
        // inputs bound as constants, as a user of a static engine would.
        if (std::string(e.what()).find("must be a constant") == std::string::npos) throw;
        freeze_integer_inputs(g, inputs);
        g = prepare(std::move(g), inputs);
        froze = true;
      }
      stage = "run";
      std::vector<Tensor> outs = run_reference(g, inputs);
      if (auto r = check_outputs("reference", ds, g, outs, expected)) return *r;
      if (!g_run_plan) continue;
      // The same prepared graph through the compiled CPU plan: the path users run.
      stage = "cpu plan";
      Session plan(g);
      std::vector<Tensor> planned = plan.run(inputs);
      if (planned.size() != outs.size())
        return {Status::fail, fmt::format("cpu plan: {} outputs, the reference gives {}",
                                          planned.size(), outs.size())};
      if (auto r = check_outputs("cpu plan", ds, g, planned, expected)) return *r;
    } catch (const Error& e) {
      std::string m = first_line(e.what());
      // The reference ran this graph, so the plan refusing it is a failure, not a skip.
      bool skip = is_unsupported(m) && stage != "cpu plan";
      return {skip ? Status::skip : Status::fail, stage + ": " + m};
    } catch (const std::exception& e) {
      return {Status::fail, stage + ": exception: " + first_line(e.what())};
    }
  }
  return {Status::pass, froze ? "integer inputs bound as constants" : ""};
}

// Runs run_one in a child process; a crash, abort or timeout becomes a failure.
Result run_isolated(const fs::path& dir, unsigned timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return run_one(dir);
  std::cout.flush();
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(timeout_s);
    Result r = run_one(dir);
    std::string msg = std::to_string(int(r.status)) + " " + r.reason;
    ssize_t w = write(fds[1], msg.data(), msg.size());
    (void)w;
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, size_t(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    return {Status::fail, sig == SIGALRM
                              ? fmt::format("timed out after {} s", timeout_s)
                              : fmt::format("crashed with signal {} ({})", sig, strsignal(sig))};
  }
  if (msg.empty()) return {Status::fail, "child exited without a result"};
  size_t sp = msg.find(' ');
  return {Status(std::stoi(msg.substr(0, sp))), sp == std::string::npos ? "" : msg.substr(sp + 1)};
}

// "test_name  # reason" per line; blank lines and lines starting with '#' are ignored.
std::map<std::string, std::string> read_skip_list(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream f(path);
  if (!f) throw Error("cannot read skip list " + path);
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    size_t h = line.find('#');
    std::string name = line.substr(0, h), reason = h == std::string::npos ? "" : line.substr(h + 1);
    auto trim = [](std::string& s) {
      s.erase(0, s.find_first_not_of(" \t\r"));
      s.erase(s.find_last_not_of(" \t\r") + 1);
    };
    trim(name), trim(reason);
    if (name.empty()) continue;
    if (reason.empty())
      throw Error(fmt::format("{}:{}: '{}' has no '# reason'", path, lineno, name));
    out[name] = reason;
  }
  return out;
}

// Groups skip reasons for the summary: drops the model path and replaces numbers with N.
std::string reason_key(const std::string& reason) {
  if (reason.rfind("unsupported op ", 0) == 0) return reason;
  std::string r = reason;
  size_t m = r.find("model.onnx: ");
  if (m != std::string::npos) r = r.substr(0, r.find("load: ") + 6) + r.substr(m + 12);
  std::string out;
  for (size_t i = 0; i < r.size(); ++i) {
    if (std::isdigit((unsigned char)r[i])) {
      if (out.empty() || out.back() != 'N') out += 'N';
    } else {
      out += r[i];
    }
  }
  return out.size() > 90 ? out.substr(0, 90) + "..." : out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data, skip_path, filter, report_path;
  bool fork_each = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--skip-list")
      skip_path = next();
    else if (a == "--filter")
      filter = next();
    else if (a == "--report")
      report_path = next();
    else if (a == "--no-fork")
      fork_each = false;
    else if (a == "--reference-only")
      g_run_plan = false;
    else if (data.empty() && a[0] != '-')
      data = a;
    else {
      std::cerr << "usage: brrr_conformance DATA_DIR [--skip-list FILE] [--filter SUBSTR] "
                   "[--report FILE] [--no-fork] [--reference-only]\n";
      return 2;
    }
  }
  if (data.empty() || !fs::is_directory(data)) {
    std::cerr << "brrr_conformance: node test folder '" << data
              << "' is missing; generate it with tests/conformance/generate_node_tests.py\n";
    return 2;
  }
  std::map<std::string, std::string> skip_list;
  try {
    if (!skip_path.empty()) skip_list = read_skip_list(skip_path);
  } catch (const Error& e) {
    std::cerr << "brrr_conformance: " << e.what() << "\n";
    return 2;
  }
  std::vector<fs::path> tests;
  for (const auto& e : fs::directory_iterator(data))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx") &&
        e.path().filename().string().find(filter) != std::string::npos)
      tests.push_back(e.path());
  std::sort(tests.begin(), tests.end());

  std::vector<std::pair<std::string, Result>> results;
  for (const fs::path& t : tests) {
    std::string name = t.filename().string();
    auto sk = skip_list.find(name);
    Result r = sk != skip_list.end() ? Result{Status::skip, "skip list: " + sk->second}
               : fork_each           ? run_isolated(t, 60)
                                     : run_one(t);
    results.push_back({name, r});
  }

  int np = 0, nf = 0, ns = 0, nfrozen = 0;
  std::map<std::string, int> skip_reasons;
  for (const auto& [name, r] : results) {
    if (r.status == Status::pass) ++np, nfrozen += !r.reason.empty();
    if (r.status == Status::fail) ++nf;
    if (r.status == Status::skip) {
      ++ns;
      skip_reasons[reason_key(r.reason)]++;
    }
  }
  if (!report_path.empty()) {
    std::ofstream rep(report_path);
    for (const auto& [name, r] : results)
      rep << (r.status == Status::pass   ? "PASS"
              : r.status == Status::fail ? "FAIL"
                                         : "SKIP")
          << " " << name << (r.reason.empty() ? "" : "  # " + r.reason) << "\n";
  }
  if (nf) {
    std::cout << "failures:\n";
    for (const auto& [name, r] : results)
      if (r.status == Status::fail) std::cout << "  FAIL " << name << ": " << r.reason << "\n";
  }
  std::vector<std::pair<int, std::string>> top;
  for (const auto& [k, v] : skip_reasons) top.push_back({v, k});
  std::sort(top.rbegin(), top.rend());
  std::cout << "most common skip reasons:\n";
  for (size_t i = 0; i < top.size() && i < 15; ++i)
    std::cout << fmt::format("  {:5d}  {}\n", top[i].first, top[i].second);
  std::cout << "ONNX node tests: " << np << " passed, " << nf << " failed, " << ns
            << " skipped, of " << results.size() << "\n";
  std::cout << "(" << nfrozen << " of the passes bind integer inputs such as axes or K as "
            << "constants, since brrr plans static shapes)\n";
  return nf ? 1 : 0;
}
