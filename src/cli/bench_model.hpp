// `brrr bench MODEL.onnx`: a user's model timed as trtexec times one (bench_model.cpp), on the CPU
// or the GPU through the same Session path.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brrr/graph.hpp"

namespace brrr::cli {

struct ModelBenchArgs {
  std::string backend = "cpu";
  std::string precision = "fp32";
  bool no_graphs = false;
  int threads = 0;        // CPU: SessionOptions::threads (session_threads already applied)
  int warmup = 2;         // Session::run calls before timing
  int iterations = 10;    // timed runs, unless duration_s > 0
  double duration_s = 0;  // > 0: timed runs until this many seconds have passed
  std::string save_plan;  // CPU: the cold session's binaries written here (plan_file.hpp)
  std::string load_plan;  // CPU: the warm session starts from this plan file, not the cache
};

// Loads, compiles cold (an empty kernel cache) and warm (a second Session on that cache, or on
// args.load_plan), times the first run, then
// `args.iterations` runs (or `args.duration_s` seconds of them) and prints latency percentiles,
// throughput, kernel counts and the load times. Returns the --json record.
// `loaded` is the model as load_onnx gave it (in `load_ms`); `shapes` binds every symbolic dim.
nlohmann::json bench_model(const std::string& path, const Graph& loaded, double load_ms,
                           const std::map<std::string, Shape>& shapes, const ModelBenchArgs& args);

}  // namespace brrr::cli
