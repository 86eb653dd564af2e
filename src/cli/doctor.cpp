// `brrr doctor MODEL.onnx`: profile the model, then attribute its time, judge every kernel against
// the measured ceilings, and predict what each remedy would gain.
#include "brrr/doctor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <fstream>
#include <optional>
#include <random>
#include <tuple>

#include "brrr/error.hpp"
#include "brrr/onnx.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/reference_profile.hpp"
#include "brrr/session.hpp"
#include "cli/commands.hpp"
#include "cli/inputs.hpp"
#include "cli/options.hpp"
#include "core/env.hpp"
#include "core/file_io.hpp"
#include "core/median.hpp"
#include "passes/pipeline.hpp"
#include "plan/kernel_record.hpp"
#include "plan/target.hpp"
#include "runtime/session_compile.hpp"

namespace brrr::cli {

namespace {

struct DoctorArgs {
  std::string model, backend = "cpu", json, trace, html, compare_profile, save_profile;
  std::string precision = "fp32";
  std::vector<std::string> shapes, applied;
  bool batch_sweep = false, refresh = false, compare = false, no_fusion = false;
  int reps = 5, top = 10, threads = 0;
};

std::map<std::string, Tensor> make_inputs(const Graph& g, uint32_t seed) {
  return random_inputs(g, seed);
}

// The model as `backend` runs it, through the compile pipeline once: a Session (the compiled
// static plan; fusion -1: the default, 0: one kernel per op, 1: fused) or, for the reference
// executor, the graph after the pipeline's graph passes.
struct Prepared {
  std::optional<Session> session;
  Graph reference;
  const Graph& graph() const { return session ? session->graph() : reference; }
};

Prepared prepare(const Graph& loaded, const InferOptions& opts, const std::string& backend,
                 int fusion, int threads, const std::string& precision, int graphs = -1) {
  Prepared p;
  if (backend == "reference") {
    CompileOptions co;
    co.input_shapes = opts.input_shapes;
    co.fold_budget_bytes = opts.fold_budget_bytes;
    p.reference = compile(loaded, plan::Target::reference(), co).graph;
    return p;
  }
  SessionOptions so;
  so.backend = backend;
  so.fusion = fusion;
  so.threads = threads;
  so.precision = precision;
  so.graphs = graphs;
  so.input_shapes = opts.input_shapes;
  p.session.emplace(loaded, so);
  return p;
}

// The kernels of the fused plan `backend` would compile for the model (a Session's compile
// options, no executor, nothing run): what the fusion remedy prices for a profile of the plan one
// kernel per op.
std::vector<KernelRecord> planned_fused_kernels(const Graph& loaded, const InferOptions& opts,
                                                const std::string& backend, int threads,
                                                const std::string& precision) {
  SessionOptions so;
  so.backend = backend;
  so.fusion = 1;
  so.threads = threads;
  so.precision = precision;
  so.input_shapes = opts.input_shapes;
  CompileOptions co = session_compile_options(so);
  co.fold_budget_bytes = opts.fold_budget_bytes;
  Compiled c = compile(loaded, plan::Target::named(backend, precision), co);
  // On the GPU the plan replays as one CUDA graph unless graphs are off: each kernel then costs a
  // graph node, not an eager launch (BERT-base bf16 b1 on an H100: 86 fused kernels priced at
  // 3.8 us launches predicted 0.511 ms after fusion, measured 0.444).
  const bool graph = backend == "cuda" && !env::flag("BRRR_DISABLE_GRAPHS");
  std::vector<KernelRecord> out;
  for (size_t i = 0; i < c.plan.kernels.size(); ++i) {
    out.push_back(plan::kernel_record(c.graph, c.plan, i));
    out.back().graph_node = graph;
  }
  return out;
}

// A plan's kernels with its library calls timed alone, for a remedy's price: their layouts and
// algorithms are the library's choice in that plan (the fused one, or one at another
// --precision), which no profile of the plan without the remedy shows. The CPU times each call by
// itself; the GPU takes the plan's CUPTI timeline (empty without CUPTI).
// `every`: every kernel of the plan, else its library kernels (their time in the plan).
std::vector<KernelRecord> timed_alone(Prepared& p, int reps, const std::string& what,
                                      bool every = false) {
  if (!p.session) return {};
  fmt::print(stderr, "doctor: timing the {}kernels of {} alone, {} rounds\n",
             every ? "" : "library ", what, reps);
  auto inputs = make_inputs(p.graph(), 0);
  return every ? p.session->time_kernels_alone(inputs, reps)
               : p.session->time_library_kernels_alone(inputs, reps);
}

// The timed runs: at least `reps`, and for a compiled plan that runs in under 20 ms at least
// 0.1 s of runs (at most 1000): at microseconds a run, five runs are noise (mlp_tiny, 7 us a run:
// its bf16 run measured 0.006 to 0.011 ms between invocations of the doctor).
int timed_runs(Prepared& p, int reps) {
  if (!p.session) return reps;
  using clk = std::chrono::steady_clock;
  auto inputs = make_inputs(p.graph(), 0);
  double best_ms = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = clk::now();
    p.session->run(inputs);
    best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(clk::now() - t0).count());
  }
  const double enough = std::ceil(100.0 / std::max(best_ms, 1e-3));
  return int(std::clamp<double>(enough, reps, std::max(reps, 1000)));
}

RunProfile profile_prepared(Prepared& p, int reps) {
  auto inputs = make_inputs(p.graph(), 0);
  if (!p.session) return profile_reference(p.reference, inputs, reps);
  RunProfile r = p.session->profile(inputs, reps);
  if (r.backend == "cpu" && r.threads > 1) r.cpu_capacity = doctor::cpu_capacity(r.threads);
  return r;
}

// Profiles `a` and `b` in alternating rounds, so that a machine whose load changes meanwhile
// slows both alike; each side keeps its median round by wall time (a measured profile). With
// `alone`, each round also times b's library kernels alone (timed_alone) between the two, for a
// remedy's price: their samples over all rounds, each kernel's time their median.
std::pair<RunProfile, RunProfile> profile_interleaved(Prepared& a, Prepared& b, int reps,
                                                      int rounds = 3,
                                                      std::vector<KernelRecord>* alone = nullptr,
                                                      const std::string& what = "",
                                                      bool every = false) {
  std::vector<RunProfile> pa, pb;
  for (int r = 0; r < rounds; ++r) {
    pa.push_back(profile_prepared(a, reps));
    // The price comes from runs of its own, never from the runs it is checked against (on the
    // GPU a plan's kernels "alone" are its CUPTI timeline, which b's profile also takes).
    if (alone) {
      std::vector<KernelRecord> t = timed_alone(b, std::max(reps, 10), what, every);
      if (alone->empty()) {
        *alone = std::move(t);
      } else if (t.size() == alone->size()) {
        for (size_t k = 0; k < t.size(); ++k)
          for (double x : t[k].samples_ms) (*alone)[k].samples_ms.push_back(x);
      }
    }
    pb.push_back(profile_prepared(b, reps));
  }
  if (alone)
    for (KernelRecord& k : *alone)
      if (!k.samples_ms.empty()) k.time_ms = median(k.samples_ms);
  auto median_round = [](std::vector<RunProfile>& ps) {
    std::vector<size_t> order(ps.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return ps[x].wall_ms < ps[y].wall_ms; });
    return std::move(ps[order[order.size() / 2]]);
  };
  return {median_round(pa), median_round(pb)};
}

// Runs the model at batch b (dim 0 of every input whose dim 0 is symbolic); median of 5 runs.
doctor::BatchRunner batch_runner(const Graph& loaded, const InferOptions& base,
                                 std::vector<std::string> batch_inputs, std::string backend,
                                 int threads, std::string precision) {
  return [&loaded, base, batch_inputs, backend, threads, precision](int64_t b) {
    InferOptions o = base;
    for (const auto& name : batch_inputs) {
      const Value& v = loaded.value(loaded.find_value(name));
      Shape s = o.input_shapes.count(name) ? o.input_shapes[name] : v.shape;
      s[0] = b;
      for (auto& d : s)
        if (d < 0) fail("batch sweep: input '{}' has other symbolic dims; give --shape", name);
      o.input_shapes[name] = s;
    }
    Prepared p = prepare(loaded, o, backend, -1, threads, precision);
    auto in = make_inputs(p.graph(), 1);
    auto once = [&] {
      p.session ? (void)p.session->run(in) : (void)run_reference(p.reference, in);
    };
    once();
    std::vector<double> t;
    for (int r = 0; r < 5; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      once();
      t.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    fmt::print(stderr, "doctor: batch {}: {:.3f} ms\n", b, t[2]);
    return t[2];
  };
}

RunProfile read_profile(const std::string& path) {
  std::ifstream f(path);
  BRRR_CHECK(f.good(), "--compare-profile: cannot read '{}'", path);
  try {
    return doctor::profile_from_json(nlohmann::json::parse(f));
  } catch (const nlohmann::json::exception& e) {
    fail("--compare-profile '{}': not JSON: {}", path, e.what());
  }
}

// --compare: each remedy brrr can apply on this backend, alone, against the plan without it:
// fusion (one kernel per op -> fused; the profiles already taken), CUDA graphs (off -> on), and
// the precision the faster-units remedy names (fp32 -> --precision X), each pair interleaved.
std::vector<doctor::RemedyCheck> check_remedies(const Graph& loaded, const InferOptions& opts,
                                                const DoctorArgs& a, int threads,
                                                const RunProfile& unfused, const RunProfile& fused,
                                                Prepared& fused_plan, const doctor::Ceilings& c,
                                                const doctor::DoctorOptions& base) {
  doctor::DoctorOptions o = base;
  o.compare = nullptr;
  o.applied.clear();
  o.fused = 0;
  std::vector<doctor::RemedyCheck> out;
  out.push_back(doctor::check_remedy("fusion", "one kernel per op -> fused", unfused, fused, c, o));
  o.fused = 1;
  if (a.backend == "cuda") {
    fmt::print(stderr, "doctor: checking static_plan: the fused plan without CUDA graphs, "
                       "interleaved with it\n");
    Prepared eager = prepare(loaded, opts, a.backend, 1, threads, a.precision, 0);
    auto [without, with] = profile_interleaved(eager, fused_plan, a.reps);
    out.push_back(doctor::check_remedy("static_plan", "CUDA graphs off -> on", without, with, c, o));
  }
  // The precision the remedy itself names, as a user would apply it.
  std::string action;
  for (const auto& rm : doctor::diagnose(fused, c, o).remedies)
    if (rm.name == "faster_units") action = rm.action;
  const std::string flag = "--precision ";
  if (a.precision != "fp32" || action.rfind(flag, 0) != 0) {
    fmt::print(stderr, "doctor: faster_units not checked: {}\n",
               a.precision != "fp32" ? "the run is not fp32" : action);
    return out;
  }
  const std::string unit = action.substr(flag.size());
  fmt::print(stderr, "doctor: checking faster_units: the fused plan at --precision {}, "
                     "interleaved with fp32\n", unit);
  try {
    Prepared narrow = prepare(loaded, opts, a.backend, 1, threads, unit);
    // Priced from its kernels timed alone (CPU), as the plain report prices it.
    std::vector<KernelRecord> alone;
    auto [without, with] = profile_interleaved(fused_plan, narrow, a.reps, 3, &alone,
                                               "the fused plan at --precision " + unit, true);
    if (!alone.empty()) o.unit_kernels[unit] = std::move(alone);
    out.push_back(doctor::check_remedy("faster_units", "fp32 -> --precision " + unit, without,
                                       with, c, o));
  } catch (const Error& e) {
    fmt::print(stderr, "doctor: faster_units not checked: --precision {}: {}\n", unit, e.what());
  }
  return out;
}

void run_doctor(const DoctorArgs& given) {
  DoctorArgs a = given;
  // Output paths first: a bad one fails now, not after minutes of profiling.
  const std::pair<const std::string*, const char*> outputs[] = {
      {&a.json, "--json"}, {&a.trace, "--trace"}, {&a.html, "--html"},
      {&a.save_profile, "--save-profile"}};
  for (const auto& [path, what] : outputs)
    if (!path->empty()) check_output_path(*path, what);
  check_backend_options(a.backend, a.threads, a.precision);
  if (a.compare && !a.compare_profile.empty())
    fail("--compare profiles the remedies itself; --compare-profile reads them from a file: give "
         "one of them");
  if (!a.applied.empty() && !a.compare && a.compare_profile.empty())
    fail("--applied names what a --compare or --compare-profile run applied; give one of them");
  const int threads = a.backend == "cpu" ? session_threads(a.threads) : 0;
  // The saved profile is read first too: a bad file fails before the profiling.
  std::optional<RunProfile> after;
  if (!a.compare_profile.empty()) after = read_profile(a.compare_profile);
  Graph loaded = load_onnx(a.model);
  InferOptions opts;
  opts.input_shapes = parse_shape_args(a.shapes);
  bind_symbolic_dims(loaded, opts.input_shapes);
  // With --compare the baseline is one kernel per op and the remedies are applied by compiling
  // the fused plan; otherwise the model is profiled as brrr runs it.
  bool fused = !a.no_fusion && !a.compare;
  std::optional<Prepared> p = prepare(loaded, opts, a.backend, fused ? 1 : 0, threads, a.precision);
  Graph g = p->graph();
  a.reps = timed_runs(*p, a.reps);
  // The reference executor runs on the CPU: it is judged against the CPU ceilings.
  doctor::Ceilings c = doctor::load_or_probe(a.backend == "cuda" ? "cuda" : "cpu", a.refresh, true);
  fmt::print(stderr, "doctor: profiling {} nodes on {} ({}), {} runs\n", g.nodes.size(), a.backend,
             a.backend == "reference" ? "reference executor"
             : fused                  ? "compiled plan, fused"
                                      : "compiled plan, one kernel per op",
             a.reps);
  RunProfile prof;
  std::optional<Prepared> fused_plan;  // --compare: the plan with the remedies applied
  std::vector<KernelRecord> timed_fused;  // its kernels, library calls timed alone (CPU)
  if (a.compare) {
    BRRR_CHECK(a.backend != "reference", "--compare needs a compiled backend (cpu or cuda)");
    fmt::print(stderr, "doctor: applying the remedies: profiling the fused static plan, "
                       "interleaved with the plan one kernel per op\n");
    fused_plan.emplace(prepare(loaded, opts, a.backend, 1, threads, a.precision));
    // The fused plan's library calls are timed in it: fused, convs change layout and algorithm
    // (the CPU's blocked activations; the GPU's channels-last 16-bit convs with their epilogues
    // in cuDNN: ResNet-50 bf16 b1 on an H100 was predicted at 0.982 ms after fusion from its
    // unfused convs, measured 0.369), and attention becomes one call of another algorithm.
    std::tie(prof, after) =
        profile_interleaved(*p, *fused_plan, a.reps, 3, &timed_fused, "the fused plan");
  } else {
    prof = profile_prepared(*p, a.reps);
  }
  // The cache check: each library kernel of the profiled plan repeated alone, cache-hot (CPU).
  std::vector<KernelRecord> hot;
  if (a.backend == "cpu" && p->session) {
    fmt::print(stderr, "doctor: repeating each library kernel alone, cache-hot, 5 times\n");
    hot = p->session->time_library_kernels_hot(make_inputs(p->graph(), 0), 5);
  }
  p.reset();  // its buffers are not needed by what follows
  if (!a.save_profile.empty()) write_file(a.save_profile, doctor::profile_to_json(prof).dump(1));

  doctor::DoctorOptions dopts;
  dopts.model = a.model;
  // The remedies offer only what this backend takes: its own validation says which --precision
  // values those are, and why not when none is.
  for (const char* prec : {"bf16", "fp16", "tf32"}) {
    try {
      check_backend_options(a.backend, 0, prec);
      dopts.precisions.push_back(prec);
    } catch (const Error& e) {
      if (dopts.precision_refusal.empty()) dopts.precision_refusal = e.what();
    }
  }
  // Each precision's library kernels are timed alone in the plan profiled (fused or not), for the
  // faster-units price (--compare checks its own: the fused plan's): on the CPU one by one, on the
  // GPU on the device's timeline of that plan.
  if (a.backend != "reference" && a.precision == "fp32" && !a.compare)
    for (const auto& prec : dopts.precisions) {
      try {
        Prepared u = prepare(loaded, opts, a.backend, fused ? 1 : 0, threads, prec);
        dopts.unit_kernels[prec] =
            timed_alone(u, std::max(a.reps, 10),
                        std::string(fused ? "the fused plan" : "the plan one kernel per op") +
                            " at --precision " + prec,
                        true);
      } catch (const Error& e) {
        fmt::print(stderr, "doctor: --precision {} not timed: {}\n", prec, e.what());
      }
    }
  dopts.fused = a.backend == "reference" ? 0 : fused ? 1 : 0;
  if (dopts.fused == 0 && a.backend != "reference" && timed_fused.empty()) {  // --no-fusion
    Prepared f = prepare(loaded, opts, a.backend, 1, threads, a.precision);
    timed_fused = timed_alone(f, std::max(a.reps, 10), "the fused plan");
  }
  if (dopts.fused == 0 && a.backend != "reference")
    dopts.fused_kernels = !timed_fused.empty() ? std::move(timed_fused)
                                               : planned_fused_kernels(loaded, opts, a.backend,
                                                                       threads, a.precision);
  dopts.hot_kernels = std::move(hot);
  dopts.top = a.top;
  dopts.applied = a.applied;
  if (after) dopts.compare = &*after;
  if (a.compare && a.applied.empty()) dopts.applied = {"fusion"};
  std::vector<doctor::RemedyCheck> checks;
  if (a.compare) checks = check_remedies(loaded, opts, a, threads, prof, *after, *fused_plan, c,
                                         dopts);
  fused_plan.reset();
  std::vector<std::string> batch_inputs;
  for (int id : loaded.inputs) {
    const Value& v = loaded.value(id);
    if (!v.shape.empty() && v.shape[0] < 0) batch_inputs.push_back(v.name);
  }
  std::string batch_error;
  if (a.batch_sweep) {
    if (batch_inputs.empty()) {
      batch_error = "no model input has a symbolic batch dimension (dim 0)";
    } else {
      dopts.batch_runner = batch_runner(loaded, opts, batch_inputs, a.backend, threads,
                                         a.precision);
      dopts.base_batch = g.value(g.find_value(batch_inputs[0])).shape[0];
    }
  }
  doctor::Report r = doctor::diagnose(prof, c, dopts);
  if (r.batch_error.empty()) r.batch_error = batch_error;
  r.checks = std::move(checks);
  fmt::print("{}", doctor::render_table(r));
  if (!a.json.empty()) write_file(a.json, doctor::report_json(r).dump(2) + "\n");
  if (!a.trace.empty()) write_file(a.trace, doctor::trace_json(r).dump() + "\n");
  if (!a.html.empty()) write_file(a.html, doctor::render_html(r));
}

}  // namespace

void setup_doctor(CLI::App& app) {
  auto a = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand("doctor", "where the time goes: regimes, ceilings, remedies");
  cmd->add_option("model", a->model, "ONNX model file")->required();
  cmd->add_option("--backend", a->backend, "backend to profile")
      ->check(CLI::IsMember({"cpu", "cuda", "reference"}));
  add_shape_option(cmd, a->shapes);
  add_threads_option(cmd, a->threads);
  cmd->add_option("--precision", a->precision,
                  "precision of matrix products and convs, as in run: cuda fp32|tf32|bf16|fp16; "
                  "cpu fp32, or bf16 on avx512_bf16/AMX")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
  cmd->add_option("--reps", a->reps,
                  "timed runs (median): at least this many, and at least 0.1 s of runs (up to "
                  "1000) for a model that runs faster")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--top", a->top, "kernels in the top table")->check(CLI::Range(1, 100000));
  cmd->add_option("--json", a->json, "write the report as JSON");
  cmd->add_option("--trace", a->trace, "write a Chrome trace-event JSON (Perfetto)");
  cmd->add_option("--html", a->html, "write a self-contained HTML page with the roofline");
  cmd->add_flag("--batch-sweep", a->batch_sweep, "run at batch b, 2b, 4b, 8b and fit a + c*batch");
  cmd->add_flag("--compare", a->compare,
                "profile one kernel per op, apply each remedy brrr can apply here alone (fusion; "
                "cuda: CUDA graphs; the --precision the faster-units remedy names), and print "
                "predicted against measured");
  cmd->add_flag("--no-fusion", a->no_fusion, "profile the plan with one kernel per op");
  cmd->add_option(
      "--compare-profile", a->compare_profile,
      "a RunProfile JSON of the same model with remedies applied: predicted vs measured");
  cmd->add_option("--applied", a->applied,
                  "remedies the --compare or --compare-profile run applied (fusion, "
                  "static_plan, faster_units); default: fusion with --compare, else all")
      ->delimiter(',')
      ->default_str("")
      ->check(CLI::IsMember({"fusion", "static_plan", "faster_units"}));
  cmd->add_option("--save-profile", a->save_profile, "write this run's RunProfile as JSON");
  cmd->add_flag("--refresh-ceilings", a->refresh, "probe the machine again");
  cmd->callback([a] { run_doctor(*a); });
}

}  // namespace brrr::cli
