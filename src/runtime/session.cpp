// Session: a thin owner. The compile pipeline (src/passes/pipeline.cpp) turns the loaded graph
// into the prepared graph and its plan; the backend's executor (backend/executor.hpp) builds from
// them and runs them.
#include "brrr/session.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "backend/executor.hpp"
#include "brrr/onnx.hpp"
#include "brrr/passes.hpp"
#include "core/env.hpp"
#include "core/machine_load.hpp"
#include "passes/pipeline.hpp"
#include "plan/kernel_ir.hpp"
#include "runtime/session_compile.hpp"

namespace brrr {

struct Session::Impl {
  Graph g;
  SessionOptions opts;
  plan::Plan plan;
  PrecisionReport precision;  // what convert_precision did, when it ran
  std::unique_ptr<Executor> exec;  // refers to g and plan, so it is declared (and dies) after them

  void build();
};

CompileOptions session_compile_options(const SessionOptions& opts) {
  CompileOptions copts;
  copts.input_shapes = opts.input_shapes;
  copts.fusion = opts.fusion < 0 ? !plan::fusion_disabled_by_env() : opts.fusion != 0;
  // Partial convs pay off only when their Adds become sum post-ops, i.e. with fusion on.
  copts.concat_split = opts.concat_split < 0
                           ? copts.fusion && !env::flag("BRRR_DISABLE_CONCAT_SPLIT")
                           : opts.concat_split != 0;
  if (!env::flag("BRRR_PRECISION_GEMMS_ONLY")) {
    if (opts.precision == "bf16") copts.storage = DType::bf16;
    if (opts.precision == "fp16") copts.storage = DType::f16;
  }
  return copts;
}

void Session::Impl::build() {
  BRRR_CHECK(opts.backend == "cpu" || opts.backend == "cuda",
             "unknown backend '{}' (use cpu or cuda)", opts.backend);
  BRRR_CHECK(opts.precision == "fp32" || opts.precision == "tf32" || opts.precision == "bf16" ||
                 opts.precision == "fp16",
             "unknown precision '{}' (use fp32, tf32, bf16 or fp16)", opts.precision);
  Compiled c = compile(std::move(g), plan::Target::named(opts.backend, opts.precision),
                       session_compile_options(opts));
  g = std::move(c.graph);
  plan = std::move(c.plan);
  precision = c.precision;
  exec = opts.backend == "cuda" ? cuda::make_cuda_executor(g, plan, opts)
                                : cpu::make_cpu_executor(g, plan, opts);
}

Session::Session(Graph g, SessionOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->g = std::move(g);
  impl_->opts = std::move(opts);
  impl_->build();
  if (debug_level() >= 2) std::cerr << "--- final plan ---\n" << plan_summary();
}

Session::Session(const std::string& onnx_path, SessionOptions opts)
    : Session(load_onnx(onnx_path), std::move(opts)) {}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::vector<Tensor> Session::run(const std::map<std::string, Tensor>& inputs) {
  return impl_->exec->run(inputs);
}

void Session::run_device(const std::map<std::string, DeviceTensor>& inputs,
                         const std::vector<DeviceTensor>& outputs) {
  impl_->exec->run_device(inputs, outputs);
}

std::vector<double> Session::time_runs(const std::map<std::string, Tensor>& inputs, int reps,
                                       const std::function<void()>& between) {
  return impl_->exec->time_runs(inputs, reps, between);
}

std::vector<double> Session::time_queued_runs(const std::map<std::string, Tensor>& inputs,
                                              int runs, int rounds) {
  return impl_->exec->time_queued_runs(inputs, std::max(runs, 1), std::max(rounds, 1));
}

std::vector<KernelRecord> Session::time_library_kernels_alone(
    const std::map<std::string, Tensor>& inputs, int reps) {
  return impl_->exec->time_library_kernels_alone(inputs, std::max(reps, 1));
}

std::vector<KernelRecord> Session::time_kernels_alone(const std::map<std::string, Tensor>& inputs,
                                                      int reps) {
  return impl_->exec->time_kernels_alone(inputs, std::max(reps, 1));
}

std::vector<KernelRecord> Session::time_library_kernels_hot(
    const std::map<std::string, Tensor>& inputs, int reps) {
  return impl_->exec->time_library_kernels_hot(inputs, std::max(reps, 1));
}

RunProfile Session::profile(const std::map<std::string, Tensor>& inputs, int reps) {
  LoadMeter load;
  RunProfile p = impl_->exec->profile(inputs, std::max(reps, 1));
  // /proc/stat counts in 10 ms ticks: a profile shorter than 0.2 s is followed by a short
  // wait, so the load figure covers enough time to mean something (the machine as brrr left it).
  const double min_s = 0.2;
  if (double e = load.elapsed_s(); e < min_s)
    std::this_thread::sleep_for(std::chrono::duration<double>(min_s - e));
  p.other_busy_cpus = load.other_busy_cpus();
  p.online_cpus = LoadMeter::online_cpus();
  return p;
}

std::string Session::plan_summary() const {
  const Impl& m = *impl_;
  MemoryStats mem = m.exec->memory();
  std::string s = fmt::format("plan: {} kernel(s) for {} node(s), fusion {}\n", m.plan.kernels.size(),
                              m.g.nodes.size(), m.plan.fusion_enabled ? "on" : "off");
  if (m.precision.converted + m.precision.kept > 0) {
    s += fmt::format("precision {}: {} float value(s) stored in 16 bits, {} kept float32{}{}\n",
                     m.opts.precision, m.precision.converted, m.precision.kept,
                     m.precision.kept_why.empty() ? "" : " (",
                     m.precision.kept_why.empty()
                         ? ""
                         : fmt::format("{})", fmt::join(m.precision.kept_why, "; ")));
  }
  s += m.plan.print(m.g);
  s += fmt::format(
      "memory: arena {} bytes for {} intermediate buffer(s) totalling {} bytes (reuse saves {:.1f}%)\n",
      mem.arena_bytes, mem.num_buffers, mem.intermediate_bytes,
      mem.intermediate_bytes
          ? 100.0 * (1.0 - double(mem.arena_bytes) / double(mem.intermediate_bytes))
          : 0.0);
  return s + m.exec->summary();
}

const Graph& Session::graph() const { return impl_->g; }
MemoryStats Session::memory() const { return impl_->exec->memory(); }
int Session::threads() const { return impl_->exec->threads(); }
int Session::num_kernels() const { return int(impl_->plan.kernels.size()); }
int Session::num_generated_functions() const { return impl_->exec->num_generated_functions(); }
int Session::num_translation_units() const { return impl_->exec->num_translation_units(); }
int Session::num_kernels(const std::string& kind) const {
  int n = 0;
  for (const auto& k : impl_->plan.kernels) n += plan::kernel_kind_name(k.kind) == kind;
  return n;
}
std::vector<std::vector<int>> Session::kernel_nodes() const {
  std::vector<std::vector<int>> v;
  for (const auto& k : impl_->plan.kernels) v.push_back(k.nodes);
  return v;
}

}  // namespace brrr
