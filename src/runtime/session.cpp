// Session: graph -> plan -> generated code + library primitives -> one arena -> a flat step list.
// run() walks the step list with a slot table (value id -> address) fixed at load time, except for
// the graph's inputs and outputs, which are rebound each run.
#include "brrr/reference.hpp"
#include "brrr/session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#ifdef BRRR_HAVE_CUDA
#include "backend/cuda/cuda_executor.hpp"
#endif
#include "backend/cpu/codegen_cpp.hpp"
#include "backend/cpu/compile_parts.hpp"
#include "backend/cpu/compiler.hpp"
#include "backend/cpu/library.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "brrr/onnx.hpp"
#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "passes/choose_layouts.hpp"
#include "passes/pipeline.hpp"
#include "passes/plan_memory.hpp"
#include "plan/kernel_ir.hpp"
#include "runtime/kernel_record.hpp"
#include "core/env.hpp"

namespace brrr {

using plan::KernelKind;

struct Session::Impl {
  Graph g;
  SessionOptions opts;
  plan::Plan plan;
  std::vector<std::shared_ptr<cpu::CompiledModule>> modules;  // translation units of fused code
  size_t num_functions = 0;                                    // distinct generated functions
  std::unique_ptr<cpu::ThreadPool> pool;  // CPU: runs the generated kernels' chunks
  std::shared_ptr<cpu::LoadState> load = std::make_shared<cpu::LoadState>();  // runs counted
  struct Step {
    KernelKind kind;
    cpu::KernelFn fn = nullptr;
    std::vector<int32_t> args;  // Fused: the slot ids fn reads and writes
    std::unique_ptr<cpu::LibraryKernel> lib;
    int src = -1, dst = -1;  // Copy
    size_t bytes = 0;
  };
  std::vector<Step> steps;
  std::vector<void*> slots;
  std::unique_ptr<char, decltype(&std::free)> arena{nullptr, &std::free};
  std::vector<Tensor> constants;  // contiguous copies the slots point into
  std::vector<Tensor> last_outputs;  // recycled output buffers
  MemoryStats mem;
#ifdef BRRR_HAVE_CUDA
  std::unique_ptr<cuda::CudaExecutor> cuda;  // backend "cuda": owns the device side of the plan
#endif
  double compile_ms = 0;
  bool from_cache = false;
  int num_nhwc = 0;      // values stored NHWC between library kernels
  int num_blocked = 0;   // ...and channel-blocked (nChw16c)
  cpu::Layouts layouts;  // per value (choose_layouts)

  void build();
  void choose_layouts();
  size_t num_kernels_fused() const {
    return size_t(std::count_if(plan.kernels.begin(), plan.kernels.end(),
                                [](const plan::Kernel& k) { return k.kind == KernelKind::Fused; }));
  }
  std::unique_ptr<cpu::LibraryKernel> make_library_kernel(const plan::Kernel& k,
                                                          const cpu::Layouts& l);
  void bind(const std::map<std::string, Tensor>& inputs, std::vector<Tensor>* outs,
            std::vector<Tensor>* keep);
  void exec(size_t i);
};

// A library kernel on the session's threads. A oneDNN kernel on several OpenMP threads gets a
// one-thread twin to fall back on when the machine is loaded (library_adaptive.cpp).
std::unique_ptr<cpu::LibraryKernel> Session::Impl::make_library_kernel(const plan::Kernel& k,
                                                                       const cpu::Layouts& l) {
  std::unique_ptr<cpu::LibraryKernel> kern = cpu::make_library_kernel(g, k, l);
  if (kern && kern->openmp && !env::flag("BRRR_NO_LOAD_ADAPTIVE")) {
    std::unique_ptr<cpu::LibraryKernel> one;
    {
      cpu::LibraryThreads one_thread(1);
      one = cpu::make_library_kernel(g, k, l);
    }
    if (one) kern = cpu::make_load_adaptive(std::move(kern), std::move(one), load);
  }
  if (kern) kern->pool = pool.get();
  return kern;
}

// The CPU's layout pass (src/passes/choose_layouts.cpp) on the plan the library accepted; kernels
// that touch a value it relayouts are made again with the layouts.
void Session::Impl::choose_layouts() {
  layouts = brrr::choose_layouts(g, plan);
  num_nhwc = int(std::count(layouts.begin(), layouts.end(), cpu::kNHWC));
  num_blocked = int(std::count(layouts.begin(), layouts.end(), cpu::kBlocked16));
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const plan::Kernel& k = plan.kernels[i];
    if (k.kind != KernelKind::Library) continue;
    bool touches = false;
    for (int v : k.inputs) touches = touches || layouts[size_t(v)] != cpu::kNCHW;
    for (int v : k.outputs) touches = touches || layouts[size_t(v)] != cpu::kNCHW;
    if (!touches) continue;
    steps[i].lib = make_library_kernel(k, layouts);
    BRRR_ASSERT(steps[i].lib != nullptr, "library kernel failed with NHWC/blocked layouts");
  }
}

void Session::Impl::build() {
  BRRR_CHECK(opts.backend == "cpu" || opts.backend == "cuda",
             "unknown backend '{}' (use cpu or cuda)", opts.backend);
  BRRR_CHECK(opts.precision == "fp32" || opts.precision == "tf32" || opts.precision == "bf16" ||
                 opts.precision == "fp16",
             "unknown precision '{}' (use fp32, tf32, bf16 or fp16)", opts.precision);
  CompileOptions copts;
  copts.input_shapes = opts.input_shapes;
  copts.fusion = opts.fusion < 0 ? !plan::fusion_disabled_by_env() : opts.fusion != 0;
  // Partial convs pay off only when their Adds become sum post-ops, i.e. with fusion on.
  copts.concat_split = opts.concat_split < 0
                           ? copts.fusion && !env::flag("BRRR_DISABLE_CONCAT_SPLIT")
                           : opts.concat_split != 0;
  Compiled c = compile(std::move(g), plan::Target::named(opts.backend), copts);
  g = std::move(c.graph);
  plan = std::move(c.plan);
  // BRRR_DEBUG=1: how long each build step took (compile time must stay near-linear in size).
  auto t_last = std::chrono::steady_clock::now();
  auto phase = [&](const char* what) {
    auto now = std::chrono::steady_clock::now();
    if (debug_level() >= 1)
      fmt::print(stderr, "brrr: build {:<14} {:9.1f} ms\n", what,
                 std::chrono::duration<double, std::milli>(now - t_last).count());
    t_last = now;
  };
  if (opts.backend == "cuda") {
#ifdef BRRR_HAVE_CUDA
    cuda::CudaExecOptions co;
    co.precision = opts.precision;
    co.graphs = opts.graphs < 0 ? !env::flag("BRRR_DISABLE_GRAPHS") : opts.graphs != 0;
    co.cache_dir = opts.cache_dir;
    co.dump_dir = opts.dump_dir;
    cuda = std::make_unique<cuda::CudaExecutor>(g, plan, co);
    mem = cuda->memory();
    return;
#else
    fail("backend 'cuda' is not available: brrr was built without the CUDA toolkit");
#endif
  }
  pool = std::make_unique<cpu::ThreadPool>(cpu::resolve_thread_count(opts.threads));
  cpu::LibraryThreads lib_threads(pool->threads());
  steps.resize(plan.kernels.size());
  // Library kernels oneDNN cannot do become reference kernels (with all their outputs stored).
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    plan::Kernel& k = plan.kernels[i];
    steps[i].kind = k.kind;
    if (k.kind != KernelKind::Library) continue;
    steps[i].lib = make_library_kernel(k, {});
    if (steps[i].lib) continue;
    k.kind = steps[i].kind = KernelKind::Reference;
    // Its nodes run one by one: no library epilogue, so the plan shows no +bias, +sum or +relu.
    k.bias = k.sum = -1;
    k.activation.clear();
    k.outputs.clear();
    for (int n : k.nodes)
      for (int o : g.nodes[size_t(n)].outputs)
        if (o >= 0) k.outputs.push_back(o);
  }
  choose_layouts();
  phase("library+layout");
  // Memory: every kernel output that is not a graph output lives in the arena (plan_memory.cpp).
  ArenaPlan ap = plan_memory(g, plan, [&](int v) { return cpu::value_bytes(g, v, layouts); });
  mem.arena_bytes = ap.arena_bytes;
  mem.intermediate_bytes = ap.intermediate_bytes;
  mem.num_buffers = ap.num_buffers;
  arena.reset(static_cast<char*>(std::aligned_alloc(64, std::max<size_t>(ap.arena_bytes, 64))));
  BRRR_CHECK(arena != nullptr, "out of memory allocating a {}-byte arena", ap.arena_bytes);
  slots.assign(g.values.size(), nullptr);
  for (size_t v = 0; v < g.values.size(); ++v)
    if (ap.offset[v] >= 0) slots[v] = arena.get() + ap.offset[v];
  for (size_t v = 0; v < g.values.size(); ++v)
    if (ap.share[v] >= 0) slots[v] = slots[size_t(ap.share[v])];
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].constant.defined()) {
      constants.push_back(g.values[v].constant.contiguous());
      slots[v] = constants.back().raw();
    }
  phase("memory_plan");
  // Generated code: one function per distinct fused kernel, in one or more translation units.
  bool any_fused = std::any_of(plan.kernels.begin(), plan.kernels.end(),
                               [](const plan::Kernel& k) { return k.kind == KernelKind::Fused; });
  if (any_fused) {
    cpu::CodegenOptions co;
    co.vector_math = cpu::sleef_gnuabi_available();
    if (opts.cpp_part_bytes > 0) co.part_bytes = opts.cpp_part_bytes;
    co.max_parts = opts.cpp_max_parts > 0 ? opts.cpp_max_parts
                                          : int(std::max(1u, std::thread::hardware_concurrency()));
    cpu::CppSource src = cpu::generate_cpp(g, plan, co);
    phase("codegen");
    cpu::CompileOptions cc;
    cc.cache_dir = opts.cache_dir;
    cc.dump_dir = opts.dump_dir;
    cc.vector_math = co.vector_math;
    auto t0 = std::chrono::steady_clock::now();
    modules = cpu::compile_parts(src.parts, cc);
    compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    from_cache = std::all_of(modules.begin(), modules.end(),
                             [](const auto& m) { return m->from_cache(); });
    num_functions = src.num_functions;
    for (size_t i = 0; i < plan.kernels.size(); ++i)
      if (!src.symbols[i].empty()) {
        steps[i].fn = reinterpret_cast<cpu::KernelFn>(
            modules[size_t(src.part[i])]->symbol(src.symbols[i]));
        steps[i].args = std::move(src.args[i]);
      }
    phase("compile+load");
  }
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const plan::Kernel& k = plan.kernels[i];
    if (k.kind != KernelKind::Copy) continue;
    steps[i].src = k.inputs.at(0);
    steps[i].dst = k.outputs.at(0);
    const Value& v = g.value(steps[i].dst);
    steps[i].bytes = size_t(shape_numel(v.shape)) * dtype_size(v.dtype);
  }
}

void Session::Impl::bind(const std::map<std::string, Tensor>& inputs, std::vector<Tensor>* outs,
                         std::vector<Tensor>* keep) {
  for (int id : g.inputs) {
    const Tensor& t = g.bound_input(id, inputs);
    Tensor c = t.contiguous();
    keep->push_back(c);
    slots[size_t(id)] = const_cast<void*>(c.raw());
  }
  // Output buffers are recycled when the caller has dropped the previous run's results, so a
  // steady loop allocates (and page-faults) nothing.
  outs->clear();
  if (last_outputs.size() != g.outputs.size()) last_outputs.assign(g.outputs.size(), Tensor());
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    int o = g.outputs[k];
    const Value& v = g.value(o);
    Tensor& prev = last_outputs[k];
    if (!prev.defined() || prev.storage_use_count() > 1) prev = Tensor::empty(v.dtype, v.shape);
    outs->push_back(prev);
    if (v.producer >= 0) slots[size_t(o)] = outs->back().raw();
  }
}

void Session::Impl::exec(size_t i) {
  Step& s = steps[i];
  switch (s.kind) {
    case KernelKind::Fused: s.fn(slots.data(), s.args.data(), pool->c_api()); return;
    case KernelKind::Library: s.lib->run(slots.data()); return;
    case KernelKind::Copy:
      if (s.bytes) std::memcpy(slots[size_t(s.dst)], slots[size_t(s.src)], s.bytes);
      return;
    case KernelKind::Reference:
      // The slow path for ops without generated or library code: views over the slot buffers.
      for (int n : plan.kernels[i].nodes) {
        const Node& node = g.nodes[size_t(n)];
        KernelCtx ctx{node, {}, {}};
        for (int v : node.inputs)
          ctx.inputs.push_back(v < 0 ? Tensor()
                                     : Tensor::from_blob(slots[size_t(v)], g.value(v).dtype,
                                                         g.value(v).shape));
        for (int v : node.outputs)
          ctx.outputs.push_back(v < 0 ? Tensor()
                                      : Tensor::from_blob(slots[size_t(v)], g.value(v).dtype,
                                                          g.value(v).shape));
        call_reference(node, ctx);
      }
      return;
  }
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
#ifdef BRRR_HAVE_CUDA
  if (impl_->cuda) return impl_->cuda->run(inputs);
#endif
  std::vector<Tensor> outs, keep;
  impl_->bind(inputs, &outs, &keep);
  cpu::LibraryThreads lib_threads(impl_->pool->threads());
  if (debug_level() >= 1) {
    // BRRR_DEBUG=1: one line per kernel (time, GFLOP/s, GB/s); the doctor adds regimes.
    for (size_t i = 0; i < impl_->steps.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      impl_->exec(i);
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      KernelRecord r = runtime::kernel_record(impl_->g, impl_->plan.kernels[i]);
      double fl = r.cost.flops;
      for (const auto& [f, n] : r.cost.special) fl += n;
      fmt::print(stderr, "brrr: {:<28} {:<8} {:9.4f} ms {:9.2f} GFLOP/s {:8.2f} GB/s  [{}]\n",
                 r.name, r.kind, ms, ms > 0 ? fl / ms * 1e-6 : 0.0,
                 ms > 0 ? r.cost.bytes / ms * 1e-6 : 0.0, fmt::join(r.ops, " "));
    }
  } else {
    for (size_t i = 0; i < impl_->steps.size(); ++i) impl_->exec(i);
  }
  ++impl_->load->run;
  // Outputs that no kernel writes (a graph input or constant passed through).
  const Graph& g = impl_->g;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const Value& v = g.value(g.outputs[k]);
    if (v.producer < 0 && outs[k].nbytes())
      std::memcpy(outs[k].raw(), impl_->slots[size_t(g.outputs[k])], outs[k].nbytes());
  }
  return outs;
}

std::vector<double> Session::time_runs(const std::map<std::string, Tensor>& inputs, int reps,
                                       const std::function<void()>& between) {
  using clk = std::chrono::steady_clock;
#ifdef BRRR_HAVE_CUDA
  if (impl_->cuda) return impl_->cuda->time_runs(inputs, reps, between);
#endif
  Impl& m = *impl_;
  run(inputs);  // warm-up
  std::vector<Tensor> outs, keep;
  m.bind(inputs, &outs, &keep);
  std::vector<double> t;
  cpu::LibraryThreads lib_threads(m.pool->threads());
  for (int r = 0; r < std::max(reps, 1); ++r) {
    if (between) between();
    auto t0 = clk::now();
    for (size_t i = 0; i < m.steps.size(); ++i) m.exec(i);
    ++m.load->run;
    t.push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
  }
  return t;
}

RunProfile Session::profile(const std::map<std::string, Tensor>& inputs, int reps) {
  using clk = std::chrono::steady_clock;
  reps = std::max(reps, 1);
#ifdef BRRR_HAVE_CUDA
  if (impl_->cuda) return impl_->cuda->profile(inputs, reps);
#endif
  RunProfile prof;
  prof.backend = "cpu";
  prof.threads = impl_->pool->threads();
  Impl& m = *impl_;
  run(inputs);  // warm-up: page in the arena, spin up the thread pool
  std::vector<std::vector<double>> times(m.steps.size());
  std::vector<double> walls;
  std::vector<Tensor> outs, keep;
  m.bind(inputs, &outs, &keep);
  cpu::LibraryThreads lib_threads(m.pool->threads());
  for (int r = 0; r < reps; ++r) {
    auto w0 = clk::now();
    for (size_t i = 0; i < m.steps.size(); ++i) {
      auto t0 = clk::now();
      m.exec(i);
      times[i].push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
    }
    walls.push_back(std::chrono::duration<double, std::milli>(clk::now() - w0).count());
    ++m.load->run;
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  prof.wall_ms = median(walls);
  double start = 0;
  for (size_t i = 0; i < m.steps.size(); ++i) {
    const plan::Kernel& k = m.plan.kernels[i];
    KernelRecord rec = runtime::kernel_record(m.g, k);
    rec.time_ms = median(times[i]);
    rec.start_ms = start;
    start += rec.time_ms;
    prof.kernels.push_back(std::move(rec));
  }
  return prof;
}

std::string Session::plan_summary() const {
  const Impl& m = *impl_;
  std::string s = fmt::format("plan: {} kernel(s) for {} node(s), fusion {}\n", m.plan.kernels.size(),
                              m.g.nodes.size(), m.plan.fusion_enabled ? "on" : "off");
  s += m.plan.print(m.g);
  s += fmt::format(
      "memory: arena {} bytes for {} intermediate buffer(s) totalling {} bytes (reuse saves {:.1f}%)\n",
      m.mem.arena_bytes, m.mem.num_buffers, m.mem.intermediate_bytes,
      m.mem.intermediate_bytes
          ? 100.0 * (1.0 - double(m.mem.arena_bytes) / double(m.mem.intermediate_bytes))
          : 0.0);
#ifdef BRRR_HAVE_CUDA
  if (m.cuda) s += m.cuda->summary();
#endif
  if (m.num_nhwc) s += fmt::format("layout: {} value(s) kept NHWC between library kernels\n", m.num_nhwc);
  if (m.num_blocked)
    s += fmt::format("layout: {} value(s) kept channel-blocked (nChw16c) between library kernels\n",
                     m.num_blocked);
  if (!m.modules.empty()) {
    std::string how =
        m.from_cache ? "from cache" : fmt::format("compiled in {:.0f} ms", m.compile_ms);
    if (m.modules.size() == 1) s += fmt::format("code: {} ({})\n", m.modules[0]->path(), how);
    else
      s += fmt::format("code: {} translation units, first {} ({})\n", m.modules.size(),
                       m.modules[0]->path(), how);
    s += fmt::format("code: {} generated function(s) for {} fused kernel(s)\n", m.num_functions,
                     m.num_kernels_fused());
  }
  return s;
}

const Graph& Session::graph() const { return impl_->g; }
MemoryStats Session::memory() const { return impl_->mem; }
int Session::threads() const { return impl_->pool ? impl_->pool->threads() : 0; }
int Session::num_kernels() const { return int(impl_->plan.kernels.size()); }
int Session::num_generated_functions() const { return int(impl_->num_functions); }
int Session::num_translation_units() const { return int(impl_->modules.size()); }
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
