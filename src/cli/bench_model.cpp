// `brrr bench MODEL.onnx`: what trtexec prints for an engine, for a brrr plan. Cold compile is a
// Session built on an empty kernel cache folder made for this run (every generated kernel is
// compiled); warm load is a second Session on the same folder (its code a cache hit); the report
// says where each one's generated code came from, as the session's plan summary states it. Both
// include what no disk cache holds (planning, library set-up: oneDNN primitives, cuBLASLt
// heuristics, cuDNN plans). Latencies come from Session::time_runs: the CPU's wall clock per run,
// CUDA events around each run on the GPU; inputs are bound once, so no host copies are timed. On the
// GPU, Session::time_queued_runs adds the time per run with runs enqueued back to back.
#include "cli/bench_model.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "brrr/error.hpp"
#include "brrr/onnx.hpp"
#include "brrr/session.hpp"
#include "core/env.hpp"
#include "cli/bench_cuda.hpp"
#include "cli/inputs.hpp"
#include "cli/plan_file.hpp"
#include "core/median.hpp"

namespace fs = std::filesystem;

namespace brrr::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A fresh kernel cache folder for the cold compile, removed when the bench ends.
struct FreshCacheDir {
  std::string path;
  FreshCacheDir() {
    std::string tmpl = (fs::temp_directory_path() / "brrr-bench-cold-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) fail("bench: cannot make a temporary kernel cache folder");
    path = tmpl;
  }
  ~FreshCacheDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      size_t c = line.find(':');
      if (c != std::string::npos) return line.substr(line.find_first_not_of(" \t", c + 1));
    }
  return "unknown CPU";
}

// The batch: the value bound to a symbolic leading dim, when every input with one got the same
// value (0: not known, e.g. a model with static shapes only).
int64_t known_batch(const Graph& loaded, const std::map<std::string, Shape>& shapes) {
  int64_t batch = 0;
  for (int id : loaded.inputs) {
    const Value& v = loaded.value(id);
    auto s = shapes.find(v.name);
    if (v.shape.empty() || v.shape[0] >= 0 || s == shapes.end() || s->second.empty()) continue;
    if (batch && batch != s->second[0]) return 0;
    batch = s->second[0];
  }
  return batch;
}

// Timed runs: `iterations` of them, or batches of them until `duration_s` has passed.
std::vector<double> timed_runs(Session& s, const std::map<std::string, Tensor>& in,
                               const ModelBenchArgs& a) {
  if (a.duration_s <= 0) return s.time_runs(in, a.iterations);
  std::vector<double> t;
  auto start = Clock::now();
  int chunk = 1;
  while (t.empty() || ms_since(start) < a.duration_s * 1e3) {
    std::vector<double> more = s.time_runs(in, chunk);
    t.insert(t.end(), more.begin(), more.end());
    chunk = std::min(chunk * 2, 1024);
  }
  return t;
}

// Where a session's generated code came from, as its plan summary says it ("from cache" or
// "compiled"), so the report states what happened rather than what the cache folder implies.
std::string code_source(const Session& s) {
  std::string sum = s.plan_summary();
  if (sum.find("from the plan file") != std::string::npos) return "from the plan file";
  if (sum.find("from cache") != std::string::npos) return "from cache";
  if (sum.find("compiled") != std::string::npos) return "compiled";
  return "no generated code";
}

// A latency as people read it: "1.234 ms", or "12.3 us" below a millisecond.
std::string time_str(double ms) {
  return ms >= 1 ? fmt::format("{:.3f} ms", ms) : fmt::format("{:.3g} us", ms * 1e3);
}

std::string shapes_str(const Graph& g) {
  std::vector<std::string> items;
  for (int id : g.inputs)
    items.push_back(fmt::format("{}:{}", g.value(id).name, fmt::join(g.value(id).shape, "x")));
  return items.empty() ? "(no inputs)" : fmt::format("{}", fmt::join(items, ","));
}

}  // namespace

namespace {

// What one bench of a model measured.
struct ModelBench {
  std::string path, device, shapes, cold_code, warm_code;
  double load_ms = 0, cold_ms = 0, warm_ms = 0;
  double first_ms = -1;  // the first run of the warm session (-1: --warmup 0, not timed apart)
  bool from_plan = false;  // the warm session started from --load-plan
  int threads = 0, kernels = 0;
  std::map<std::string, int> kinds;  // kernels by kind
  std::vector<double> t;             // timed runs, sorted (ms)
  nlohmann::json shapes_json;
  int64_t batch = 0;
  double per_s = 0;  // timed runs / their total time
  // CUDA: per-run times of rounds of `queued_runs` runs enqueued back to back (empty elsewhere)
  std::vector<double> queued;
  int queued_runs = 0;
};

// Cold compile, warm load, warm-up and the timed runs.
ModelBench measure(const std::string& path, const Graph& loaded, double load_ms,
                   const std::map<std::string, Shape>& shapes, const ModelBenchArgs& a) {
  SessionOptions so;
  so.backend = a.backend;
  so.precision = a.precision;
  so.threads = a.threads;
  so.input_shapes = shapes;
  if (a.no_graphs) so.graphs = 0;
  FreshCacheDir cache;
  so.cache_dir = cache.path;
  ModelBench r;
  r.path = path;
  r.load_ms = load_ms;
  PlanKey key;
  if (!a.save_plan.empty() || !a.load_plan.empty()) key = plan_key(path, so);
  {
    SessionOptions cold_opts = so;
    if (!a.save_plan.empty()) {
      cold_opts.plan_binaries = std::make_shared<PlanBinaries>();
      cold_opts.plan_binaries->record = true;
    }
    auto t0 = Clock::now();
    Session cold(loaded, cold_opts);
    r.cold_ms = ms_since(t0);
    r.cold_code = code_source(cold);
    if (!a.save_plan.empty()) save_plan_file(a.save_plan, key, *cold_opts.plan_binaries);
  }  // freed before the warm session, so the two never hold memory together
  auto t0 = Clock::now();
  if (!a.load_plan.empty()) so.plan_binaries = load_plan_file(a.load_plan, key);
  r.from_plan = !a.load_plan.empty();
  Session s(loaded, so);
  r.warm_ms = ms_since(t0);
  r.warm_code = code_source(s);
  if (env::integer("BRRR_DEBUG") > 0) fmt::print(stderr, "{}", s.plan_summary());

  const Graph& g = s.graph();
  std::map<std::string, Tensor> in = random_inputs(g, 42);
  for (int w = 0; w < a.warmup; ++w) {
    auto t1 = Clock::now();
    s.run(in);
    if (w == 0) r.first_ms = ms_since(t1);
  }
  r.t = timed_runs(s, in, a);
  std::sort(r.t.begin(), r.t.end());
  double total = std::accumulate(r.t.begin(), r.t.end(), 0.0);
  r.per_s = total > 0 ? double(r.t.size()) / (total * 1e-3) : 0;
  if (a.backend == "cuda") {
    r.queued_runs = std::clamp(int(r.t.size()) / 5, 10, 200);
    r.queued = s.time_queued_runs(in, r.queued_runs, 5);
    std::sort(r.queued.begin(), r.queued.end());
  }
  r.batch = known_batch(loaded, shapes);
  r.device = a.backend == "cuda" ? cuda_device_name() : cpu_model_name();
  r.threads = s.threads();
  r.kernels = s.num_kernels();
  for (const char* k : {"fused", "library", "copy", "reference"}) r.kinds[k] = s.num_kernels(k);
  r.shapes = shapes_str(g);
  r.shapes_json = nlohmann::json::object();
  for (int id : g.inputs) r.shapes_json[g.value(id).name] = g.value(id).shape;
  return r;
}

double mean_of(const std::vector<double>& t) {
  return std::accumulate(t.begin(), t.end(), 0.0) / double(t.size());
}

void print_report(const ModelBench& r, const ModelBenchArgs& a) {
  fmt::print("model: {}\n", r.path);
  fmt::print("backend: {}{}, precision: {}, device: {}\n", a.backend,
             a.backend == "cpu"
                 ? fmt::format(", threads: {} (CPU threads the session ran on)", r.threads)
                 : std::string(a.no_graphs ? ", no CUDA graph" : ", CUDA graph"),
             a.precision, r.device);
  fmt::print("shapes: {}\n", r.shapes);
  fmt::print(
      "load: model file {}, cold compile {} (an empty kernel cache; generated code: {}), "
      "warm load {} ({}; generated code: {}){}\n",
      time_str(r.load_ms), time_str(r.cold_ms), r.cold_code, time_str(r.warm_ms),
      r.from_plan ? "a second session from --load-plan, its read included"
                  : "a second session on that cache",
      r.warm_code,
      r.first_ms >= 0 ? fmt::format(", first run {}", time_str(r.first_ms)) : std::string());
  fmt::print("kernels: {} ({} generated, {} library, {} copy, {} on the host)\n", r.kernels,
             r.kinds.at("fused"), r.kinds.at("library"), r.kinds.at("copy"),
             r.kinds.at("reference"));
  fmt::print("timed: {} runs after {} warm-up runs ({}, inputs bound once)\n", r.t.size(), a.warmup,
             a.backend == "cuda" ? "CUDA events around each run, after 50 ms more of untimed runs"
                                : "wall clock per run");
  fmt::print(
      "latency: min {}, median {}, p90 {}, p99 {}, max {}, mean {} (percentiles by nearest "
      "rank)\n",
      time_str(r.t.front()), time_str(median(r.t)), time_str(percentile(r.t, 90)),
      time_str(percentile(r.t, 99)), time_str(r.t.back()), time_str(mean_of(r.t)));
  if (!r.queued.empty()) {
    const double q = median(r.queued), lat = median(r.t);
    fmt::print(
        "queued: {} per run (median of {} rounds of {} runs enqueued back to back, one wait at the "
        "end: each run's launch overlaps the run before it); latency's median is {} more: the "
        "launch and the wait a lone call pays\n",
        time_str(q), r.queued.size(), r.queued_runs, lat >= q ? time_str(lat - q) : "-" + time_str(q - lat));
  }
  std::string tp =
      fmt::format("throughput: {:.4g} inferences/s (timed runs / their total time)", r.per_s);
  if (r.batch > 0)
    tp += fmt::format(", {:.4g} samples/s (batch {}, the symbolic leading dim)",
                      r.per_s * double(r.batch), r.batch);
  fmt::print("{}\n", tp);
}

// The --json record: workload, variant and ms as the built-ins' records have them (scripts read
// those), then everything the report prints.
nlohmann::json to_json(const ModelBench& r, const ModelBenchArgs& a) {
  nlohmann::json latency = {{"min", r.t.front()},         {"median", median(r.t)},
                            {"p90", percentile(r.t, 90)}, {"p99", percentile(r.t, 99)},
                            {"max", r.t.back()},          {"mean", mean_of(r.t)}};
  nlohmann::json samples = nullptr;
  if (r.batch > 0) samples = r.per_s * double(r.batch);
  nlohmann::json queued = nullptr;
  if (!r.queued.empty())
    queued = {{"median", median(r.queued)}, {"rounds", r.queued}, {"runs_per_round", r.queued_runs}};
  return {{"workload", r.path},
          {"variant", "fused"},
          {"ms", median(r.t)},
          {"threads", r.threads},
          {"backend", a.backend},
          {"precision", a.precision},
          {"device", r.device},
          {"brrr_version", BRRR_VERSION},
          {"shapes", r.shapes_json},
          {"warmup", a.warmup},
          {"iterations", r.t.size()},
          {"latency_ms", latency},
          {"queued_ms_per_run", queued},
          {"throughput_per_s", r.per_s},
          {"batch", r.batch},
          {"samples_per_s", samples},
          {"kernels", r.kernels},
          {"kernels_by_kind", r.kinds},
          {"load_ms", r.load_ms},
          {"cold_compile_ms", r.cold_ms},
          {"warm_load_ms", r.warm_ms},
          {"cold_code", r.cold_code},
          {"warm_code", r.warm_code},
          {"warm_from", r.from_plan ? "plan file" : "cache"},
          {"first_run_ms", r.first_ms >= 0 ? nlohmann::json(r.first_ms) : nlohmann::json()}};
}

}  // namespace

nlohmann::json bench_model(const std::string& path, const Graph& loaded, double load_ms,
                           const std::map<std::string, Shape>& shapes, const ModelBenchArgs& a) {
  ModelBench r = measure(path, loaded, load_ms, shapes, a);
  print_report(r, a);
  return to_json(r, a);
}

}  // namespace brrr::cli
