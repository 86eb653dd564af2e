// `brrr bench MODEL.onnx`: what trtexec prints for an engine, for a brrr plan. Cold compile is a
// Session built on an empty kernel cache folder made for this run (every generated kernel is
// compiled); warm load is a second Session on the same folder (its code a cache hit); the report
// says where each one's generated code came from, as the session's plan summary states it. Both
// include what no disk cache holds (planning, library set-up: oneDNN primitives, cuBLASLt
// heuristics, cuDNN plans). Latencies come from Session::time_runs: the CPU's wall clock per run,
// CUDA events around each run on the GPU; inputs are bound once, so no host copies are timed.
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
#include "cli/bench_cuda.hpp"
#include "cli/inputs.hpp"
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

nlohmann::json bench_model(const std::string& path, const Graph& loaded, double load_ms,
                           const std::map<std::string, Shape>& shapes, const ModelBenchArgs& a) {
  SessionOptions so;
  so.backend = a.backend;
  so.precision = a.precision;
  so.threads = a.threads;
  so.input_shapes = shapes;
  if (a.no_graphs) so.graphs = 0;
  FreshCacheDir cache;
  so.cache_dir = cache.path;
  double cold_ms = 0;
  std::string cold_code;
  {
    auto t0 = Clock::now();
    Session cold(loaded, so);
    cold_ms = ms_since(t0);
    cold_code = code_source(cold);
  }  // freed before the warm session, so the two never hold memory together
  auto t0 = Clock::now();
  Session s(loaded, so);
  double warm_ms = ms_since(t0);
  std::string warm_code = code_source(s);

  const Graph& g = s.graph();
  std::map<std::string, Tensor> in = random_inputs(g, 42);
  for (int w = 0; w < a.warmup; ++w) s.run(in);
  std::vector<double> t = timed_runs(s, in, a);
  std::sort(t.begin(), t.end());
  double total = std::accumulate(t.begin(), t.end(), 0.0);
  double lat_min = t.front(), lat_max = t.back(), med = median(t);
  double p90 = percentile(t, 90), p99 = percentile(t, 99), mean = total / double(t.size());
  double per_s = total > 0 ? double(t.size()) / (total * 1e-3) : 0;
  int64_t batch = known_batch(loaded, shapes);
  std::string device = a.backend == "cuda" ? cuda_device_name() : cpu_model_name();

  std::map<std::string, int> kinds;
  for (const char* k : {"fused", "library", "copy", "reference"}) kinds[k] = s.num_kernels(k);
  fmt::print("model: {}\n", path);
  fmt::print("backend: {}{}, precision: {}, device: {}\n", a.backend,
             a.backend == "cpu" ? fmt::format(", threads: {} (CPU threads the session ran on)",
                                              s.threads())
                                : std::string(a.no_graphs ? ", no CUDA graph" : ", CUDA graph"),
             a.precision, device);
  fmt::print("shapes: {}\n", shapes_str(g));
  fmt::print("load: model file {}, cold compile {} (an empty kernel cache; generated code: {}), "
             "warm load {} (a second session on that cache; generated code: {})\n",
             time_str(load_ms), time_str(cold_ms), cold_code, time_str(warm_ms), warm_code);
  fmt::print("kernels: {} ({} generated, {} library, {} copy, {} on the host)\n", s.num_kernels(),
             kinds["fused"], kinds["library"], kinds["copy"], kinds["reference"]);
  fmt::print("timed: {} runs after {} warm-up runs ({}, inputs bound once)\n", t.size(), a.warmup,
             a.backend == "cuda" ? "CUDA events around each run" : "wall clock per run");
  fmt::print("latency: min {}, median {}, p90 {}, p99 {}, max {}, mean {} (percentiles by "
             "nearest rank)\n",
             time_str(lat_min), time_str(med), time_str(p90), time_str(p99), time_str(lat_max),
             time_str(mean));
  std::string tp = fmt::format("throughput: {:.4g} inferences/s (timed runs / their total time)",
                               per_s);
  if (batch > 0)
    tp += fmt::format(", {:.4g} samples/s (batch {}, the symbolic leading dim)",
                      per_s * double(batch), batch);
  fmt::print("{}\n", tp);

  nlohmann::json shapes_j = nlohmann::json::object();
  for (int id : g.inputs) shapes_j[g.value(id).name] = g.value(id).shape;
  nlohmann::json j = {
      {"workload", path}, {"variant", "fused"}, {"ms", med}, {"threads", s.threads()},
      {"backend", a.backend}, {"precision", a.precision}, {"device", device},
      {"brrr_version", BRRR_VERSION}, {"shapes", shapes_j}, {"warmup", a.warmup},
      {"iterations", t.size()},
      {"latency_ms",
       {{"min", lat_min}, {"median", med}, {"p90", p90}, {"p99", p99}, {"max", lat_max},
        {"mean", mean}}},
      {"throughput_per_s", per_s}, {"batch", batch},
      {"samples_per_s", batch > 0 ? nlohmann::json(per_s * double(batch)) : nlohmann::json(nullptr)},
      {"kernels", s.num_kernels()}, {"kernels_by_kind", kinds}, {"load_ms", load_ms},
      {"cold_compile_ms", cold_ms}, {"warm_load_ms", warm_ms}, {"cold_code", cold_code},
      {"warm_code", warm_code}};
  return j;
}

}  // namespace brrr::cli
