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
#include "brrr/op.hpp"
#include "brrr/session.hpp"
#include "cli/bench_cuda.hpp"
#include "cli/commands.hpp"
#include "cli/inputs.hpp"
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

Result bench_one(const std::string& name, Graph g, bool fused, int reps) {
  SessionOptions o;
  o.fusion = fused ? 1 : 0;
  Session s(std::move(g), o);
  Result res = measure(name, s, reps);
  res.variant = fused ? "fused" : "unfused";
  return res;
}

}  // namespace

void setup_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "benchmark built-in workloads or ONNX models, fused vs unfused");
  struct Args {
    std::vector<std::string> items;
    std::string backend = "cpu", json, precision = "fp32";
    bool no_graphs = false;
    bool list = false;
    int reps = 10;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("items", args->items, "built-in workload names or MODEL.onnx paths (default: all built-ins)");
  cmd->add_option("--backend", args->backend, "cpu or cuda (cuda: its own workload set, see --list)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--precision", args->precision, "cuda: float32 GEMM precision fp32|tf32|bf16|fp16")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
  cmd->add_flag("--no-graphs", args->no_graphs, "cuda: no CUDA graph (same as BRRR_DISABLE_GRAPHS=1)");
  cmd->add_option("--json", args->json, "write {workload, variant, ms, gbps, gflops} records");
  cmd->add_option("--reps", args->reps, "timed repetitions (median is reported)")->check(CLI::Range(1, 10000));
  cmd->add_flag("--list", args->list, "list built-in workloads");
  cmd->callback([args] {
    if (!args->json.empty()) check_output_path(args->json, "--json");
    if (args->backend == "cuda") {
      CudaBenchArgs ca{args->items, args->json, args->precision, args->no_graphs, args->list,
                       std::max(args->reps, 20)};
      bench_cuda(ca);
      return;
    }
    auto all = builtins();
    if (args->list) {
      for (const auto& w : all) fmt::print("{:<10} {}\n", w.name, w.what);
      return;
    }
    std::vector<std::pair<std::string, std::function<Graph()>>> todo;
    if (args->items.empty())
      for (const auto& w : all) todo.push_back({w.name, w.build});
    for (const auto& it : args->items) {
      auto f = std::find_if(all.begin(), all.end(), [&](const Workload& w) { return w.name == it; });
      if (f != all.end()) {
        todo.push_back({f->name, f->build});
      } else if (it.size() > 5 && it.substr(it.size() - 5) == ".onnx") {
        todo.push_back({it, [it] { return Session(it).graph(); }});
      } else {
        fail("unknown workload '{}' (see brrr bench --list) and not an .onnx path", it);
      }
    }
    fmt::print("GB/s: compulsory bytes (graph inputs, weights, outputs once); GFLOP/s counts 2 per\n"
               "multiply-add, 1 per arithmetic op and 1 per special-function evaluation.\n");
    fmt::print("{:<12} {:<8} {:>10} {:>9} {:>10} {:>8} {:>8}\n", "workload", "variant", "ms", "GB/s",
               "GFLOP/s", "kernels", "speedup");
    std::vector<Result> results;
    for (const auto& [name, build] : todo) {
      Result u = bench_one(name, build(), false, args->reps);
      Result f = bench_one(name, build(), true, args->reps);
      fmt::print("{:<12} {:<8} {:>10.3f} {:>9.1f} {:>10.1f} {:>8}\n", u.workload, u.variant, u.ms,
                 u.gbps, u.gflops, u.kernels);
      fmt::print("{:<12} {:<8} {:>10.3f} {:>9.1f} {:>10.1f} {:>8} {:>7.2f}x\n", f.workload, f.variant,
                 f.ms, f.gbps, f.gflops, f.kernels, u.ms / f.ms);
      results.push_back(u);
      results.push_back(f);
    }
    if (!args->json.empty()) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& r : results)
        j.push_back({{"workload", r.workload}, {"variant", r.variant}, {"ms", r.ms}, {"gbps", r.gbps},
                     {"gflops", r.gflops}});
      write_file(args->json, j.dump(2) + "\n");
    }
  });
}

}  // namespace brrr::cli
