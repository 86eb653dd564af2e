// `brrr run MODEL.onnx`: load, bind input shapes, prepare, execute, print outputs and the load,
// compile and run times, with --save-outputs write them as a test_data_set, and with --check
// compare them with a test_data_set's expected outputs.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "brrr/doctor.hpp"
#include "brrr/error.hpp"
#include "brrr/onnx.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "cli/commands.hpp"
#include "cli/inputs.hpp"
#include "cli/compare.hpp"
#include "cli/options.hpp"
#include "cli/plan_file.hpp"
#include "cli/test_data.hpp"
#include "core/cpu_features.hpp"
#include "passes/pipeline.hpp"
#include "plan/target.hpp"

namespace fs = std::filesystem;

namespace brrr::cli {
namespace {

struct RunOptions {
  std::string model;
  std::string data;
  bool check = false;
  std::string backend = "cpu";  // cpu or cuda: compiled Session; reference: the oracle
  std::string precision = "fp32";
  bool no_graphs = false;
  bool no_fusion = false;
  std::vector<std::string> shapes;
  std::string save_outputs;
  std::string save_plan, load_plan;  // plan files (CPU)
  int threads = 0;
  int reps = 10;
  double rtol = -1;  // negative: the precision's default (default_tolerance)
  double atol = -1;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The one place that picks the executor: the compiled static-plan Session for cpu and cuda, the
// reference executor for reference. Either way the loaded graph goes through the compile pipeline
// once (the Session runs it; for the reference it stops after the graph passes).
struct Prepared {
  std::optional<Session> session;
  Graph reference;  // the prepared graph, for the reference executor
  const Graph& graph() const { return session ? session->graph() : reference; }
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) {
    return session ? session->run(inputs) : run_reference(reference, inputs);
  }
};

Prepared prepare(const Graph& loaded, const std::map<std::string, Shape>& shapes,
                 const RunOptions& o) {
  Prepared e;
  if (o.backend == "reference") {
    CompileOptions co;
    co.input_shapes = shapes;
    e.reference = compile(loaded, plan::Target::reference(), co).graph;
    return e;
  }
  SessionOptions so;
  so.backend = o.backend;
  so.precision = o.precision;
  if (o.no_graphs) so.graphs = 0;
  if (o.no_fusion) so.fusion = 0;
  if (o.backend == "cpu") so.threads = session_threads(o.threads);
  so.input_shapes = shapes;
  PlanKey key;
  if (!o.load_plan.empty() || !o.save_plan.empty()) key = plan_key(o.model, so);
  auto t0 = std::chrono::steady_clock::now();
  if (!o.load_plan.empty()) so.plan_binaries = load_plan_file(o.load_plan, key);
  double plan_ms = ms_since(t0);
  if (!o.save_plan.empty()) {
    if (!so.plan_binaries) so.plan_binaries = std::make_shared<PlanBinaries>();
    so.plan_binaries->record = true;
  }
  e.session.emplace(loaded, so);
  if (!o.load_plan.empty())
    std::printf(
        "plan: loaded %s in %.3g ms (%d generated module(s), %d packed weight(s) taken from it)\n",
                o.load_plan.c_str(), plan_ms, so.plan_binaries->modules_used,
                so.plan_binaries->weights_used);
  if (!o.save_plan.empty()) {
    save_plan_file(o.save_plan, key, *so.plan_binaries);
    std::printf("plan: saved %s (%zu generated module(s), %zu packed weight(s))\n",
                o.save_plan.c_str(), so.plan_binaries->modules.size(),
                so.plan_binaries->weights.size());
  }
  return e;
}

// What execute() measured: the first run's outputs, and the times `brrr run` prints.
struct Execution {
  std::vector<Tensor> outputs;
  double compile_ms = -1;  // Session construction: plan, generated code, libraries (-1: none)
  double first_ms = 0;     // the first run (pages in buffers, starts threads)
  std::vector<double> steady_ms;  // the runs after it, sorted
  int threads = 0;                // CPU: the threads the session ran on
};

// Runs the prepared model once for its outputs, then `reps` more times: the steady-state
// latencies, sorted.
Execution execute(Prepared& p, const std::map<std::string, Tensor>& inputs, int reps) {
  Execution ex;
  ex.threads = p.session ? p.session->threads() : 0;
  auto t0 = std::chrono::steady_clock::now();
  ex.outputs = p.run(inputs);
  ex.first_ms = ms_since(t0);
  for (int r = 0; r < reps; ++r) {
    t0 = std::chrono::steady_clock::now();
    (void)p.run(inputs);
    ex.steady_ms.push_back(ms_since(t0));
  }
  std::sort(ex.steady_ms.begin(), ex.steady_ms.end());
  return ex;
}

void check_model_path(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("model file '{}' does not exist", path);
  if (fs::is_directory(path, ec))
    fail("'{}' is a folder; give the model file (e.g. {}/model.onnx)", path, path);
  if (!fs::is_regular_file(path, ec)) fail("'{}' is not a regular file", path);
  if (fs::file_size(path, ec) == 0) fail("model file '{}' is empty", path);
}

// Shapes for every graph input: --data tensors, then --shape, else the declared shape with
// symbolic dims set to 1 (with a note: the rule run, bench and doctor share).
std::map<std::string, Shape> bind_shapes(const Graph& g, const std::map<std::string, Tensor>& data,
                                         const std::vector<std::string>& shape_args) {
  std::map<std::string, Shape> shapes = parse_shape_args(shape_args);
  for (int id : g.inputs) {
    const Value& v = g.value(id);
    auto d = data.find(v.name);
    if (d != data.end()) {
      const Shape& ds = d->second.shape();
      bool fits = v.shape.empty() && v.dim_names.empty();  // no declared shape
      if (!fits && ds.size() == v.shape.size()) {
        fits = true;
        for (size_t k = 0; k < ds.size(); ++k)
          fits = fits && (v.shape[k] < 0 || v.shape[k] == ds[k]);
      }
      if (!fits)
        fail("--data gives input '{}' shape {} but the model declares {}", v.name, shape_str(ds),
             declared_shape(v));
      auto s = shapes.find(v.name);
      if (s != shapes.end() && s->second != d->second.shape())
        fail("--shape {}:{} disagrees with the data file's shape {}", v.name, shape_str(s->second),
             shape_str(d->second.shape()));
      shapes[v.name] = d->second.shape();
    }
  }
  bind_symbolic_dims(g, shapes);
  return shapes;
}

// "time: load 0.4 ms, compile 120.3 ms, first run 0.52 ms, run 0.031 ms (median of 10, ...)".
void print_times(double load_ms, const Execution& ex) {
  std::string s = fmt::format("time: load {:.3g} ms", load_ms);
  s += ex.compile_ms >= 0 ? fmt::format(", compile {:.4g} ms", ex.compile_ms)
                          : std::string(", no compile (reference executor)");
  s += fmt::format(", first run {:.4g} ms", ex.first_ms);
  const std::vector<double>& t = ex.steady_ms;
  if (!t.empty())
    s += fmt::format(", run {:.4g} ms (median of {}, min {:.4g}, max {:.4g})", t[t.size() / 2],
                     t.size(), t.front(), t.back());
  std::printf("%s\n", s.c_str());
}

// --save-outputs DIR is checked before any work: a folder brrr can write, and not the --data
// folder (its expected outputs would be overwritten by the ones being checked).
void check_save_dir(const RunOptions& o) {
  check_output_dir(o.save_outputs, "--save-outputs");
  std::error_code ec;
  if (!o.data.empty() && fs::equivalent(o.save_outputs, o.data, ec))
    fail("--save-outputs '{}' is the --data folder: its output_N.pb files would be replaced",
         o.save_outputs);
}

// Writes DIR/input_K.pb (the inputs this run used, --data or synthetic) and DIR/output_K.pb in
// the ONNX model-zoo test_data_set layout, each TensorProto named after its graph value, so that
// `brrr run MODEL --data DIR --check` (or onnx.numpy_helper) reads them back.
void save_test_data(const std::string& dir, const Graph& loaded, const Graph& g,
                    const std::map<std::string, Tensor>& inputs, const std::vector<Tensor>& outs) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("--save-outputs '{}': cannot create the folder: {}", dir, ec.message());
  size_t k = 0;
  for (int id : loaded.inputs) {
    const std::string& name = loaded.value(id).name;
    auto it = inputs.find(name);
    if (it == inputs.end()) continue;  // an initializer's default, not an input of this run
    save_tensor_pb((fs::path(dir) / fmt::format("input_{}.pb", k++)).string(), it->second, name);
  }
  for (size_t i = 0; i < outs.size(); ++i)
    save_tensor_pb((fs::path(dir) / fmt::format("output_{}.pb", i)).string(), outs[i],
                   g.value(g.outputs[i]).name);
  // Numbered files left from an earlier, larger run would be read as part of this set.
  for (const char* prefix : {"input", "output"}) {
    size_t n = std::string(prefix) == "input" ? k : outs.size();
    if (fs::exists(fs::path(dir) / fmt::format("{}_{}.pb", prefix, n), ec))
      std::fprintf(stderr, "brrr: note: '%s' also holds %s_%zu.pb from before, not from this run\n",
                   dir.c_str(), prefix, n);
  }
  std::printf("saved: %zu inputs and %zu outputs in %s (input_N.pb, output_N.pb)\n", k,
              outs.size(), dir.c_str());
}

// The tolerance one output is checked with: its precision's default, with --rtol / --atol (when
// given) replacing the per-element bound and dropping the L2 bound, as the user asked.
Tolerance check_tolerance(const std::string& precision, const RunOptions& o) {
  Tolerance t = default_tolerance(precision);
  if (o.rtol >= 0 || o.atol >= 0) {
    if (o.rtol >= 0) t.rtol = o.rtol;
    if (o.atol >= 0) t.atol = o.atol;
    t.l2 = -1;
  }
  return t;
}

// Compares output i with its expected tensor and prints its lines: PASS/FAIL with the relative
// L2 error, the max abs error against max|exp| and the worst element; NaN/inf counts when any.
bool check_output(size_t i, const std::string& name, const Tensor& got, const Tensor& expected,
                  const Graph& g, const RunOptions& o) {
  std::string precision = output_precision(o.precision, g, got, expected);
  Tolerance tol = check_tolerance(precision, o);
  Comparison c = compare_tensors(got, expected, tol);
  if (!c.problem.empty()) {
    std::printf("check %zu '%s': FAIL (%s)\n", i, name.c_str(), c.problem.c_str());
    return false;
  }
  if (!is_floating(expected.dtype())) {
    std::printf("check %zu '%s': %s  [criterion: exact match]\n", i, name.c_str(),
                c.pass ? "PASS" : "FAIL");
    if (!c.pass)
      std::printf("  %lld of %lld elements differ; first at %s: got %.0f, expected %.0f\n",
                  (long long)c.mismatches, (long long)expected.numel(),
                  index_str(expected.shape(), c.worst).c_str(), c.worst_got, c.worst_expected);
    return c.pass;
  }
  std::printf(
      "check %zu '%s': %s  rel L2 err %.3g, max abs err %.3g (%.3g of max|exp| %.3g), max rel "
      "err %.3g (where |exp| >= 1e-3 max|exp|)  [%s criterion%s: %s]\n",
      i, name.c_str(), c.pass ? "PASS" : "FAIL", c.rel_l2, c.max_abs, c.max_abs / c.scale, c.scale,
      c.max_rel, precision.c_str(), tol.l2 < 0 ? " (--rtol/--atol)" : "",
      criterion_str(expected, tol, c).c_str());
  if (c.worst >= 0)
    std::printf("  worst element %s (flat %lld): got %.9g, expected %.9g; %lld of %lld outside\n",
                index_str(expected.shape(), c.worst).c_str(), (long long)c.worst, c.worst_got,
                c.worst_expected, (long long)c.mismatches, (long long)expected.numel());
  if (c.got_nan + c.got_inf + c.expected_nan + c.expected_inf > 0)
    std::printf("  non-finite: got %lld NaN, %lld inf; expected %lld NaN, %lld inf; %lld "
                "mismatched\n",
                (long long)c.got_nan, (long long)c.got_inf, (long long)c.expected_nan,
                (long long)c.expected_inf, (long long)c.nonfinite_mismatches);
  if (!c.l2_pass)
    std::printf("  rel L2 err %.3g is over the bound %g\n", c.rel_l2, tol.l2);
  return c.pass;
}

int run_command(const RunOptions& o) {
  check_model_path(o.model);
  if (o.check && o.data.empty()) fail("--check needs --data DIR with output_N.pb files");
  if (std::isnan(o.rtol) || std::isnan(o.atol) || (o.rtol < 0 && o.rtol != -1) ||
      (o.atol < 0 && o.atol != -1))
    fail("--rtol and --atol must be non-negative");
  check_backend_options(o.backend, o.threads, o.precision);
  if (o.backend == "cpu" && o.precision == "bf16") {
    // The probe's GEMM rates where this machine has them cached (never measured here).
    double ratio = 0;
    if (auto c = doctor::cached_ceilings("cpu")) {
      const auto b = c->library_gflops.find("bf16"), f = c->library_gflops.find("fp32");
      if (b != c->library_gflops.end() && f != c->library_gflops.end() && f->second > 0)
        ratio = b->second / f->second;
    }
    if (std::string note = plan::cpu_precision_note(o.precision, CpuFeatures::host(), ratio);
        !note.empty())
      std::fprintf(stderr, "brrr: note: --precision %s: %s\n", o.precision.c_str(), note.c_str());
  }
  if (!o.save_outputs.empty()) check_save_dir(o);
  check_plan_options(o.backend, o.save_plan, o.load_plan);
  auto load_start = std::chrono::steady_clock::now();
  Graph g = load_onnx(o.model);
  double load_ms = ms_since(load_start);

  std::map<std::string, Tensor> inputs;
  std::vector<std::string> output_files;
  if (!o.data.empty()) {
    std::vector<std::string> files = list_pb_files(o.data, "input");
    if (files.empty() && !g.inputs.empty())
      fail("data folder '{}' has no input_N.pb files", o.data);
    inputs = load_inputs(g, files);
    if (o.check) {
      output_files = list_pb_files(o.data, "output");
      if (output_files.empty()) fail("--check: data folder '{}' has no output_N.pb files", o.data);
    }
  }

  const Graph loaded = g;
  auto compile_start = std::chrono::steady_clock::now();
  Prepared prepared = prepare(loaded, bind_shapes(loaded, inputs, o.shapes), o);
  double compile_ms = o.backend == "reference" ? -1 : ms_since(compile_start);
  g = prepared.graph();
  for (int id : g.inputs)
    if (!inputs.count(g.value(id).name) && !g.value(id).default_value.defined())
      inputs[g.value(id).name] = random_tensor(g.value(id).dtype, g.value(id).shape, uint64_t(id));

  Execution ex = execute(prepared, inputs, o.reps);
  ex.compile_ms = compile_ms;
  const std::vector<Tensor>& outs = ex.outputs;

  std::printf("model: %s (%zu nodes after preparation), backend: %s%s%s\n", o.model.c_str(),
              g.nodes.size(), o.backend.c_str(),
              ex.threads > 0 ? fmt::format(", {} thread{}", ex.threads, ex.threads == 1 ? "" : "s").c_str() : "",
              o.precision == "fp32" ? "" : (", precision " + o.precision).c_str());
  if (o.data.empty() && !g.inputs.empty()) std::printf("inputs: synthetic (no --data given)\n");
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& t = outs[i];
    std::printf("output %zu '%s': %s %s  %s\n", i, g.value(g.outputs[i]).name.c_str(),
                std::string(dtype_name(t.dtype())).c_str(), shape_str(t.shape()).c_str(),
                tensor_summary(t).c_str());
  }
  print_times(load_ms, ex);
  if (!o.save_outputs.empty()) save_test_data(o.save_outputs, loaded, g, inputs, outs);
  if (!o.check) return 0;

  std::vector<Tensor> expected = load_expected_outputs(g, output_files);
  bool all_pass = true;
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string& name = g.value(g.outputs[i]).name;
    if (!expected[i].defined()) {
      std::printf("check %zu '%s': no expected output file; not compared\n", i, name.c_str());
      continue;
    }
    all_pass = check_output(i, name, outs[i], expected[i], g, o) && all_pass;
  }
  std::printf("%s\n", all_pass ? "check: PASS" : "check: FAIL");
  return all_pass ? 0 : 1;
}

}  // namespace

void setup_run(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "run a model and print its outputs (--check: compare)");
  cmd->add_option("model", opts->model, "ONNX model file")->required();
  cmd->add_option("--data", opts->data, "test_data_set folder with input_N.pb (and output_N.pb)");
  cmd->add_flag("--check", opts->check,
                "compare outputs with the folder's output_N.pb (default tolerance: by the precision "
                "the output was computed at)");
  cmd->add_option("--backend", opts->backend,
                  "cpu (compiled plan, default), cuda (compiled plan on the GPU) or reference "
                  "(the oracle)")
      ->check(CLI::IsMember({"cpu", "cuda", "reference"}));
  cmd->add_option("--precision", opts->precision,
                  "cuda: bf16 or fp16 store the whole model in 16 bits (float32 accumulation, "
                  "reductions and statistics; float32 inputs and outputs), tf32 the matrix "
                  "products only; cpu: fp32, or bf16 on avx512_bf16/AMX (the model stored in "
                  "bf16 as on cuda; a model with pools: bf16 matrix products and convs only); "
                  "reference: fp32")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
  cmd->add_flag("--no-graphs", opts->no_graphs, "cuda: launch kernels one by one (no CUDA Graph)");
  cmd->add_flag("--no-fusion", opts->no_fusion, "one generated kernel per op");
  add_shape_option(cmd, opts->shapes);
  add_threads_option(cmd, opts->threads);
  cmd->add_option("--reps", opts->reps,
                  "timed runs after the first (the median is the steady-state latency)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--save-outputs", opts->save_outputs,
                  "write the inputs and outputs as DIR/input_N.pb and output_N.pb (a "
                  "test_data_set folder)");
  add_plan_options(cmd, opts->save_plan, opts->load_plan);
  cmd->add_option("--rtol", opts->rtol,
                  "--check: relative tolerance per element (replaces the precision's default "
                  "bounds)")
      ->default_str("by precision");
  cmd->add_option("--atol", opts->atol,
                  "--check: absolute tolerance per element, times max|expected| (replaces the "
                  "precision's default bounds)")
      ->default_str("by precision");
  cmd->callback([opts] {
    std::fflush(stdout);
    int rc = run_command(*opts);
    std::fflush(stdout);
    if (rc != 0) throw ExitWith{rc};
  });
}

}  // namespace brrr::cli
