// brrr bench: built-in workloads and ONNX models, each run fused and unfused; median time,
// achieved GB/s (compulsory bytes: graph inputs, weights and outputs once) and GFLOP/s.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "brrr/error.hpp"
#include "brrr/onnx.hpp"
#include "brrr/op.hpp"
#include "brrr/session.hpp"
#include "cli/bench_cuda.hpp"
#include "cli/bench_model.hpp"
#include "cli/commands.hpp"
#include "cli/inputs.hpp"
#include "cli/options.hpp"
#include "runtime/graph_builder.hpp"
#include "core/env.hpp"
#include "core/median.hpp"
#include "core/file_io.hpp"

namespace brrr::cli {

namespace {

struct Workload {
  std::string name, what;
  std::function<Graph()> build;
};

std::vector<Workload> builtins() {
  const int64_t n = int64_t(1) << 25;
  std::vector<Workload> w;
  w.push_back({"add_mul", "(x+1)*2 on 2^25 float32", [n] {
                 GraphBuilder b;
                 int x = b.input("x", {n});
                 b.output(b.node("Mul", {b.node("Add", {x, b.scalar(1)}), b.scalar(2)}));
                 return b.g;
               }});
  w.push_back({"cos_cos", "cos(cos(x)) on 2^25 float32", [n] {
                 GraphBuilder b;
                 int x = b.input("x", {n});
                 b.output(b.node("Cos", {b.node("Cos", {x})}));
                 return b.g;
               }});
  w.push_back({"layernorm", "LayerNormalization on 8192x1024 float32", [] {
                 GraphBuilder b;
                 std::mt19937 rng(1);
                 int x = b.input("x", {8192, 1024});
                 int g = b.constant("gamma", random_tensor(DType::f32, {1024}, rng()));
                 int be = b.constant("beta", random_tensor(DType::f32, {1024}, rng()));
                 b.output(b.node("LayerNormalization", {x, g, be}, {{"epsilon", 1e-5f}}));
                 return b.g;
               }});
  w.push_back({"softmax", "Softmax(axis=-1) on 8192x1024 float32", [] {
                 GraphBuilder b;
                 int x = b.input("x", {8192, 1024});
                 b.output(b.node("Softmax", {x}, {{"axis", int64_t(-1)}}));
                 return b.g;
               }});
  w.push_back({"gelu_mlp", "GELU(x@W+b), 1024x1024x1024 float32, erf GELU as ONNX ops", [] {
                 GraphBuilder b;
                 std::mt19937 rng(2);
                 int x = b.input("x", {1024, 1024});
                 int W = b.constant("W", random_tensor(DType::f32, {1024, 1024}, rng()));
                 int bias = b.constant("b", random_tensor(DType::f32, {1024}, rng()));
                 int h = b.node("Add", {b.node("MatMul", {x, W}), bias});
                 int e = b.node("Erf", {b.node("Div", {h, b.scalar(1.41421356f)})});
                 b.output(b.node("Mul", {b.node("Mul", {h, b.node("Add", {e, b.scalar(1)})}),
                                         b.scalar(0.5f)}));
                 return b.g;
               }});
  return w;
}

struct Result {
  std::string workload, variant;
  double ms = 0, gbps = 0, gflops = 0;
  int kernels = 0;
};

// Compulsory bytes (graph inputs, weights and outputs once) and flops of a graph.
std::pair<double, double> bytes_flops(const Graph& G) {
  double bytes = 0, flops = 0;
  auto vbytes = [&](int v) { return double(G.value(v).nbytes()); };
  std::set<int> read;
  for (const Node& n : G.nodes)
    for (int i : n.inputs)
      if (i >= 0 && (G.value(i).producer < 0)) read.insert(i);
  for (int v : read) bytes += vbytes(v);
  for (int v : G.outputs) bytes += vbytes(v);
  for (const Node& n : G.nodes) {
    Cost c = op_cost(G, n);
    flops += c.flops;
    for (const auto& [f, k] : c.special) flops += k;  // 1 per special-function evaluation
  }
  return {bytes, flops};
}

Result measure(const std::string& name, Session& s, int reps) {
  const Graph& G = s.graph();
  std::map<std::string, Tensor> in = random_inputs(G, 42);
  auto [bytes, flops] = bytes_flops(G);

  s.run(in);  // warm-up: compile is done; this pages in buffers and starts threads
  s.run(in);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    s.run(in);
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  Result res;
  res.workload = name;
  res.ms = median(t);
  res.gbps = bytes / (res.ms * 1e-3) / 1e9;
  res.gflops = flops / (res.ms * 1e-3) / 1e9;
  res.kernels = s.num_kernels();
  if (env::integer("BRRR_DEBUG") > 0) fmt::print(stderr, "{}", s.plan_summary());
  return res;
}

// `base` carries the input shapes and threads; fusion is set here.
Result bench_one(const std::string& name, Graph g, bool fused, int reps, SessionOptions o,
                 int* threads) {
  o.fusion = fused ? 1 : 0;
  Session s(std::move(g), o);
  *threads = s.threads();
  Result res = measure(name, s, reps);
  res.variant = fused ? "fused" : "unfused";
  return res;
}

struct Item {
  std::string name;
  std::function<Graph()> build;
};

// An ONNX model to time, loaded before anything runs (so a bad model or shape fails first), with
// the --shape entries naming its inputs; bind_symbolic_dims adds the rest once every entry is
// known to name some model's input.
struct ModelItem {
  std::string path;
  Graph graph;
  double load_ms = 0;
  std::map<std::string, Shape> shapes;
};

ModelItem load_model_item(const std::string& path, const std::map<std::string, Shape>& all_shapes,
                          std::set<std::string>& used) {
  ModelItem m;
  m.path = path;
  auto t0 = std::chrono::steady_clock::now();
  m.graph = load_onnx(path);
  m.load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (int id : m.graph.inputs) {
    auto s = all_shapes.find(m.graph.value(id).name);
    if (s == all_shapes.end()) continue;
    m.shapes.insert(*s);
    used.insert(s->first);
  }
  return m;
}

bool is_model_path(const std::string& item) {
  return item.size() > 5 && item.substr(item.size() - 5) == ".onnx";
}

struct Args {
  std::vector<std::string> items;
  std::string backend = "cpu", json, precision = "fp32";
  std::vector<std::string> shapes;
  bool no_graphs = false;
  bool list = false;
  int reps = 10;
  int threads = 0;
  int warmup = 2;
  int iterations = 0;  // 0: --reps
  double duration = 0;
  std::string save_plan, load_plan;  // MODEL.onnx on the CPU: plan files (plan_file.hpp)
};

// The built-in CPU workloads named in `names` (all when `all_of_them`), fused and unfused, as one
// table; appends their --json records.
void bench_cpu_builtins(const std::vector<std::string>& names, bool all_of_them, const Args& a,
                        nlohmann::json& records) {
  auto all = builtins();
  std::vector<Item> todo;
  for (const auto& w : all)
    if (all_of_them || std::find(names.begin(), names.end(), w.name) != names.end())
      todo.push_back({w.name, w.build});
  SessionOptions base;
  base.threads = session_threads(a.threads);
  fmt::print("GB/s: compulsory bytes (graph inputs, weights, outputs once); GFLOP/s counts 2 per\n"
             "multiply-add, 1 per arithmetic op and 1 per special-function evaluation.\n");
  fmt::print("{:<12} {:<8} {:>10} {:>9} {:>10} {:>8} {:>8}\n", "workload", "variant", "ms", "GB/s",
             "GFLOP/s", "kernels", "speedup");
  int threads = 0;
  std::vector<Result> results;
  for (const auto& item : todo) {
    Result u = bench_one(item.name, item.build(), false, a.reps, base, &threads);
    Result f = bench_one(item.name, item.build(), true, a.reps, base, &threads);
    fmt::print("{:<12} {:<8} {:>10.3f} {:>9.1f} {:>10.1f} {:>8}\n", u.workload, u.variant, u.ms,
               u.gbps, u.gflops, u.kernels);
    fmt::print("{:<12} {:<8} {:>10.3f} {:>9.1f} {:>10.1f} {:>8} {:>7.2f}x\n", f.workload,
               f.variant, f.ms, f.gbps, f.gflops, f.kernels, u.ms / f.ms);
    results.push_back(u);
    results.push_back(f);
  }
  fmt::print("threads: {} (CPU threads each session ran on)\n", threads);
  for (const auto& r : results)
    records.push_back({{"workload", r.workload}, {"variant", r.variant}, {"ms", r.ms},
                       {"gbps", r.gbps}, {"gflops", r.gflops}, {"threads", threads}});
}

void bench_command(const Args& a) {
  if (!a.json.empty()) check_output_path(a.json, "--json");
  check_backend_options(a.backend, a.threads, a.precision);
  check_plan_options(a.backend, a.save_plan, a.load_plan);
  std::vector<std::string> names, models;
  for (const auto& it : a.items) (is_model_path(it) ? models : names).push_back(it);
  if ((!a.save_plan.empty() || !a.load_plan.empty()) && (models.size() != 1 || !names.empty()))
    fail("--save-plan and --load-plan take one MODEL.onnx (a plan file is one model's)");
  bool timing_flags = a.iterations > 0 || a.duration > 0 || a.warmup != 2;
  if (timing_flags && models.empty())
    fail("--warmup, --iterations and --duration time MODEL.onnx files; built-in workloads take "
         "--reps");
  if (a.backend == "cuda" && (!models.empty() || !a.shapes.empty())) {
    if (!names.empty())
      fail("bench --backend cuda: give built-in workloads or MODEL.onnx files, not both");
    if (models.empty()) fail("--shape: bench --backend cuda takes it for MODEL.onnx files only");
  } else if (a.backend == "cuda") {
    CudaBenchArgs ca{names, a.json, a.precision, a.no_graphs, a.list, std::max(a.reps, 20)};
    bench_cuda(ca);
    return;
  }
  auto all = builtins();
  if (a.list) {
    for (const auto& w : all) fmt::print("{:<10} {}\n", w.name, w.what);
    return;
  }
  for (const auto& n : names)
    if (std::none_of(all.begin(), all.end(), [&](const Workload& w) { return w.name == n; }))
      fail("unknown workload '{}' (see brrr bench --list) and not an .onnx path", n);
  std::map<std::string, Shape> shapes = parse_shape_args(a.shapes);
  std::set<std::string> used_shapes;
  std::vector<ModelItem> todo;
  for (const auto& m : models) todo.push_back(load_model_item(m, shapes, used_shapes));
  for (const auto& [name, s] : shapes)
    if (!used_shapes.count(name))
      fail("--shape names '{}', which is not an input of any MODEL.onnx given", name);
  for (auto& m : todo) bind_symbolic_dims(m.graph, m.shapes);

  nlohmann::json records = nlohmann::json::array();
  if (!names.empty() || a.items.empty()) bench_cpu_builtins(names, a.items.empty(), a, records);
  ModelBenchArgs ma;
  ma.backend = a.backend;
  ma.precision = a.precision;
  ma.no_graphs = a.no_graphs;
  ma.threads = a.backend == "cpu" ? session_threads(a.threads) : 0;
  ma.warmup = a.warmup;
  ma.iterations = a.iterations > 0 ? a.iterations : a.reps;
  ma.duration_s = a.duration;
  ma.save_plan = a.save_plan;
  ma.load_plan = a.load_plan;
  for (size_t i = 0; i < todo.size(); ++i) {
    if (i > 0 || !names.empty()) fmt::print("\n");
    const ModelItem& m = todo[i];
    records.push_back(bench_model(m.path, m.graph, m.load_ms, m.shapes, ma));
  }
  if (!a.json.empty()) write_file(a.json, records.dump(2) + "\n");
}

}  // namespace

void setup_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "time MODEL.onnx files (trtexec-style) or built-in workloads (fused vs unfused)");
  auto args = std::make_shared<Args>();
  cmd->add_option("items", args->items,
                  "MODEL.onnx paths or built-in workload names (default: all built-ins)")
      ->default_str("");
  cmd->add_option("--backend", args->backend,
                  "cpu or cuda (cuda: MODEL.onnx files, or its own workload set, see --list)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--precision", args->precision,
                  "cuda: bf16|fp16 store the whole model in 16 bits, tf32 the matrix products "
                  "only; cpu: fp32, or bf16 GEMMs/convs on avx512_bf16/AMX")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
  add_shape_option(cmd, args->shapes);
  add_threads_option(cmd, args->threads);
  cmd->add_flag("--no-graphs", args->no_graphs, "cuda: no CUDA graph (same as BRRR_DISABLE_GRAPHS=1)");
  cmd->add_option("--json", args->json,
                  "write one record per workload and variant (MODEL.onnx: latency percentiles, "
                  "throughput, kernels, load times, backend, precision, shapes, device, version)");
  cmd->add_option("--reps", args->reps,
                  "timed repetitions (median is reported; cuda built-ins: at least 20; MODEL.onnx: "
                  "unless --iterations or --duration)")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--warmup", args->warmup, "MODEL.onnx: untimed runs before timing")
      ->check(CLI::Range(0, 100000));
  auto* iters = cmd->add_option("--iterations", args->iterations,
                                "MODEL.onnx: timed runs (0: --reps)")
                    ->check(CLI::Range(0, 10000000));
  cmd->add_option("--duration", args->duration,
                  "MODEL.onnx: time runs for this many seconds instead (0: off)")
      ->check(CLI::Range(0.0, 86400.0))
      ->excludes(iters);
  add_plan_options(cmd, args->save_plan, args->load_plan);
  cmd->add_flag("--list", args->list, "list built-in workloads");
  cmd->callback([args] { bench_command(*args); });
}

}  // namespace brrr::cli
