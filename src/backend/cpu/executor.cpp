// The CPU executor: a plan's fused kernels as generated C++ compiled into one or more modules,
// its library kernels on oneDNN and brrr's own, its intermediates in one arena, all walked as a
// flat step list. run() uses a slot table (value id -> address) fixed at load time, except for
// the graph's inputs and outputs, which are rebound each run.
#include "backend/executor.hpp"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "backend/cpu/codegen_cpp.hpp"
#include "backend/cpu/compile_parts.hpp"
#include "backend/cpu/compiler.hpp"
#include "backend/cpu/library.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "core/env.hpp"
#include "core/machine_load.hpp"
#include "passes/choose_layouts.hpp"
#include "passes/plan_memory.hpp"
#include "plan/kernel_record.hpp"
#include "plan/library_desc.hpp"
#include "core/median.hpp"

namespace brrr::cpu {

namespace {

using plan::KernelKind;

class CpuExecutor final : public Executor {
 public:
  CpuExecutor(const Graph& g, plan::Plan& plan, const SessionOptions& opts)
      : g(g), plan(plan), opts(opts) {
    build();
  }
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) override;
  RunProfile profile(const std::map<std::string, Tensor>& inputs, int reps) override;
  std::vector<double> time_runs(const std::map<std::string, Tensor>& inputs, int reps,
                                const std::function<void()>& between) override;
  std::vector<KernelRecord> time_library_kernels_alone(const std::map<std::string, Tensor>& inputs,
                                                       int reps) override;
  std::vector<KernelRecord> time_kernels_alone(const std::map<std::string, Tensor>& inputs,
                                               int reps) override;
  std::vector<KernelRecord> time_library_kernels_hot(const std::map<std::string, Tensor>& inputs,
                                                     int reps) override;
  std::string summary() const override;
  MemoryStats memory() const override { return mem; }
  int threads() const override { return pool->threads(); }
  int num_generated_functions() const override { return int(num_functions); }
  int num_translation_units() const override { return int(modules.size()); }

 private:
  // every_kernel: generated kernels too; hot: each kernel repeated back to back (after one
  // untimed call) instead of once per round in plan order.
  std::vector<KernelRecord> time_alone(const std::map<std::string, Tensor>& inputs, int reps,
                                       bool every_kernel, bool hot = false);

  const Graph& g;
  plan::Plan& plan;
  SessionOptions opts;
  std::vector<std::shared_ptr<CompiledModule>> modules;  // translation units of fused code
  size_t num_functions = 0;                               // distinct generated functions
  std::unique_ptr<ThreadPool> pool;  // runs the generated kernels' chunks
  std::shared_ptr<LoadState> load = std::make_shared<LoadState>();  // runs counted
  struct Step {
    KernelKind kind;
    KernelFn fn = nullptr;
    std::vector<int32_t> args;  // Fused: the slot ids fn reads and writes
    std::unique_ptr<LibraryKernel> lib;
    int src = -1, dst = -1;  // Copy
    size_t bytes = 0;
  };
  std::vector<Step> steps;
  std::vector<void*> slots;
  std::unique_ptr<char, decltype(&std::free)> arena{nullptr, &std::free};
  // The library kernels' run-time memory (scratchpads, staging buffers): one block they share.
  std::unique_ptr<char, decltype(&std::free)> work{nullptr, &std::free};
  size_t work_bytes = 0, work_sum = 0;  // its size, and what the kernels would hold each alone
  std::vector<Tensor> constants;     // contiguous copies the slots point into
  std::vector<Tensor> last_outputs;  // recycled output buffers
  MemoryStats mem;
  double compile_ms = 0;
  bool from_cache = false;
  bool from_plan = false;  // every module from a plan file
  std::vector<bool> aliased;  // per kernel: a copy whose output is its input's buffer (no work)
  int num_aliased = 0;           // of which concats in place:
  int num_concats_in_place = 0;
  int num_nhwc = 0;     // values stored NHWC between library kernels
  int num_blocked = 0;  // ...and channel-blocked (nChw16c or nChw8c)
  Layouts layouts;      // per value (choose_layouts)

  void build();
  void choose_layouts();
  void share_work();
  void warm_up_kernels();
  bool float_only(const plan::Kernel& k) const;
  bool worth_warming(size_t i) const;
  int num_cold = 0;  // kernels too large to be worth running at build
  // Runnable threads of other processes, sampled during the build (machine_load.hpp).
  std::vector<int> others_runnable;
  void sample_load() {
    if (int n = other_runnable_threads(); n >= 0) others_runnable.push_back(n);
  }
  bool started_serial = false;
  int others_median = 0;
  void choose_first_mode();
  double warm_ms = -1;  // the kernels' build-time run (-1: none)
  int num_warmed = 0;
  size_t num_kernels_fused() const {
    return size_t(std::count_if(plan.kernels.begin(), plan.kernels.end(),
                                [](const plan::Kernel& k) { return k.kind == KernelKind::Fused; }));
  }
  std::unique_ptr<LibraryKernel> make_library_kernel(const plan::Kernel& k, const Layouts& l,
                                                     bool twin);
  void add_twin(size_t i);
  void bind(const std::map<std::string, Tensor>& inputs, std::vector<Tensor>* outs,
            std::vector<Tensor>* keep);
  void exec(size_t i);
  // Around every whole run: while the session's load state says loaded, the pool and oneDNN run
  // serially; a threaded run whose joins waited on a descheduled worker marks the machine loaded.
  void begin_run();
  void end_run();
  bool adaptive = !env::flag("BRRR_NO_LOAD_ADAPTIVE");
  std::optional<cpu::LoadRun> load_run;  // between begin_run and end_run
};

void CpuExecutor::begin_run() { load_run.emplace(*load, *pool, adaptive); }
void CpuExecutor::end_run() { load_run.reset(); }

// A library kernel on the session's threads. A oneDNN kernel on several OpenMP threads gets a
// one-thread twin to fall back on when the machine is loaded (library_adaptive.cpp), with `twin`
// now, else later (add_twin): the first pass's kernels that the layout pass makes again never
// get one (on squeezenet1_1 the twins made for those were half its library set-up time).
std::unique_ptr<LibraryKernel> CpuExecutor::make_library_kernel(const plan::Kernel& k,
                                                               const Layouts& l, bool twin) {
  std::unique_ptr<cpu::LibraryKernel> kern = cpu::make_library_kernel(g, k, l);
  if (kern && kern->openmp && twin && adaptive) {
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

// The twin of a first-pass kernel the layout pass kept.
void CpuExecutor::add_twin(size_t i) {
  std::unique_ptr<LibraryKernel>& kern = steps[i].lib;
  if (!kern || !kern->openmp || !adaptive) return;
  std::unique_ptr<cpu::LibraryKernel> one;
  {
    cpu::LibraryThreads one_thread(1);
    one = cpu::make_library_kernel(g, plan.kernels[i], layouts);
  }
  if (one) {
    kern = cpu::make_load_adaptive(std::move(kern), std::move(one), load);
    kern->pool = pool.get();
  }
}

// The CPU's layout pass (src/passes/choose_layouts.cpp) on the plan the library accepted; kernels
// that touch a value it relayouts are made again with the layouts.
void CpuExecutor::choose_layouts() {
  layouts = brrr::choose_layouts(g, plan);
  num_nhwc = int(std::count(layouts.begin(), layouts.end(), cpu::kNHWC));
  num_blocked = int(std::count(layouts.begin(), layouts.end(), cpu::kBlocked));
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const plan::Kernel& k = plan.kernels[i];
    if (k.kind != KernelKind::Library) continue;
    bool touches = false;
    for (int v : k.inputs) touches = touches || layouts[size_t(v)] != cpu::kNCHW;
    for (int v : k.outputs) touches = touches || layouts[size_t(v)] != cpu::kNCHW;
    if (!touches) {
      add_twin(i);
      continue;
    }
    steps[i].lib = make_library_kernel(k, layouts, true);
    BRRR_ASSERT(steps[i].lib != nullptr, "library kernel failed with NHWC/blocked layouts");
  }
}

// `n` bytes, zeroed, every page mapped (null when out of memory). From 2 MiB up on 2 MiB
// boundaries, whole 2 MiB pages, where the kernel backs them with huge pages (transparent huge
// pages "always", or "madvise" with this madvise): one fault per 2 MiB instead of 512, in the
// build and in the runs' TLB.
char* alloc_paged_in(size_t n) {
  constexpr size_t kHuge = size_t(2) << 20;
  const bool huge = n >= kHuge;
  const size_t align = huge ? kHuge : 4096;
  const size_t bytes = (n + align - 1) / align * align;
  char* p = static_cast<char*>(std::aligned_alloc(align, bytes));
  if (!p) return nullptr;
#ifdef MADV_HUGEPAGE
  if (huge) (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
  std::memset(p, 0, bytes);
  return p;
}

// One work block for all library kernels, as large as the largest needs, paged in here: kernels
// run one at a time, and each holding its own (squeezenet1_1: MB of Winograd scratchpads and
// staging buffers) made the first run fault in every page of each.
void CpuExecutor::share_work() {
  size_t need = 0;
  work_sum = 0;
  for (const Step& s : steps)
    if (s.lib) {
      need = std::max(need, s.lib->work_bytes());
      work_sum += s.lib->work_bytes();
    }
  work_bytes = need;
  if (need == 0) return;
  work.reset(alloc_paged_in(need));
  BRRR_CHECK(work != nullptr, "out of memory allocating {} bytes of library work space", need);
  for (Step& s : steps)
    if (s.lib) s.lib->use_work(work.get());
}

void CpuExecutor::build() {
  // BRRR_DEBUG=1: how long each build step took (compile time must stay near-linear in size).
  auto t_last = std::chrono::steady_clock::now();
  auto phase = [&](const char* what) {
    auto now = std::chrono::steady_clock::now();
    if (debug_level() >= 1)
      fmt::print(stderr, "brrr: build {:<14} {:9.1f} ms\n", what,
                 std::chrono::duration<double, std::milli>(now - t_last).count());
    t_last = now;
  };
  sample_load();
  pool = std::make_unique<cpu::ThreadPool>(cpu::resolve_thread_count(opts.threads));
  cpu::LibraryThreads lib_threads(pool->threads());
  cpu::PlanWeights plan_weights(opts.plan_binaries.get());  // packs shared in the build; plan file
  // One scope for the whole build: a twin made after the layout pass still takes its kernel's
  // packed GEMM weights.
  cpu::SharedPacks packs;
  steps.resize(plan.kernels.size());
  // Library kernels oneDNN cannot do become reference kernels (with all their outputs stored).
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    plan::Kernel& k = plan.kernels[i];
    steps[i].kind = k.kind;
    if (k.kind != KernelKind::Library) continue;
    steps[i].lib = make_library_kernel(k, {}, false);
    if (steps[i].lib) continue;
    k.kind = steps[i].kind = KernelKind::Reference;
    // In graph (topological) order: a GEMM's operand views follow it in k.nodes.
    std::sort(k.nodes.begin(), k.nodes.end());
    // Its nodes run one by one: no library epilogue, so the plan shows no +bias, +sum or +relu.
    k.bias = k.sum = -1;
    k.activation.clear();
    k.outputs.clear();
    for (int n : k.nodes)
      for (int o : g.nodes[size_t(n)].outputs)
        if (o >= 0) k.outputs.push_back(o);
  }
  phase("library");
  sample_load();
  choose_layouts();
  // OpenMP's team is made here, not by the first run: the weight reorders run on one thread now,
  // and the first threaded oneDNN kernel would otherwise pay for creating it (mobilenet_v3_small,
  // 12 interleaved starts at load 7: first run median 3.7 ms before, 7.1 ms without this).
  if (std::any_of(steps.begin(), steps.end(), [](const Step& s) { return s.lib && s.lib->openmp; })) {
#pragma omp parallel
    {
    }
  }
  phase("layout+twins");
  share_work();
  std::vector<std::string> impls;
  for (const Step& s : steps)
    if (s.lib) impls.push_back(s.lib->impl);
  std::jthread gemm_jit_init = cpu::start_gemm_jit_init(impls);  // joined when build ends or throws
  // Memory: every kernel output that is not a graph output lives in the arena (plan_memory.cpp).
  // A channel Concat at batch 1 in NCHW or blocked layouts is its inputs' buffers back to back;
  // NHWC interleaves them per pixel.
  auto concat_chunks = [&](size_t i) {
    const auto* d = plan::desc_of<plan::ConcatDesc>(plan.kernels[i]);
    if (!d || d->out < 0 || cpu::is_nhwc(layouts, d->out)) return false;
    const Shape& s = g.value(d->out).shape;
    if (d->axis < 0 || size_t(d->axis) >= s.size()) return false;
    for (int64_t a = 0; a < d->axis; ++a)
      if (s[size_t(a)] != 1) return false;
    return std::all_of(d->inputs.begin(), d->inputs.end(), [&](int v) {
      return v >= 0 && layout_of(layouts, v) == layout_of(layouts, d->out);
    });
  };
  ArenaPlan ap = plan_memory(
      g, plan, [&](int v) { return cpu::value_bytes(g, v, layouts); }, concat_chunks);
  mem.arena_bytes = ap.arena_bytes;
  mem.intermediate_bytes = ap.intermediate_bytes;
  mem.num_buffers = ap.num_buffers;
  // Paged in now, not by the first run's kernels (on squeezenet1_1, one thread, the first run's
  // convs and pools took 1.5 ms more than the second's, mostly faulting in these pages).
  arena.reset(alloc_paged_in(std::max<size_t>(ap.arena_bytes, 64)));
  BRRR_CHECK(arena != nullptr, "out of memory allocating a {}-byte arena", ap.arena_bytes);
  slots.assign(g.values.size(), nullptr);
  aliased.assign(plan.kernels.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v)
    if (ap.offset[v] >= 0) slots[v] = arena.get() + ap.offset[v];
  for (size_t v = 0; v < g.values.size(); ++v)
    if (ap.share[v] >= 0)
      slots[v] = static_cast<char*>(slots[size_t(ap.share[v])]) + ap.share_offset[v];
  for (size_t i = 0; i < plan.kernels.size(); ++i)
    if (copy_aliases_input(plan, i, ap) || ap.concat_in_place[i]) aliased[i] = true;
  num_aliased = int(std::count(aliased.begin(), aliased.end(), true));
  num_concats_in_place =
      int(std::count(ap.concat_in_place.begin(), ap.concat_in_place.end(), true));
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].constant.defined()) {
      constants.push_back(g.values[v].constant.contiguous());
      slots[v] = constants.back().raw();
    }
  phase("memory_plan");
  sample_load();
  // Generated code: one function per distinct fused kernel, in one or more translation units.
  bool any_fused = std::any_of(plan.kernels.begin(), plan.kernels.end(),
                               [](const plan::Kernel& k) { return k.kind == KernelKind::Fused; });
  if (any_fused) {
    cpu::CodegenOptions co;
    co.vector_math = cpu::sleef_gnuabi_available();
    co.row_cache = !env::flag("BRRR_NO_ROW_CACHE");
    if (opts.cpp_part_bytes > 0) co.part_bytes = opts.cpp_part_bytes;
    co.max_parts = opts.cpp_max_parts > 0 ? opts.cpp_max_parts
                                          : int(std::max(1u, std::thread::hardware_concurrency()));
    cpu::CppSource src = cpu::generate_cpp(g, plan, co);
    phase("codegen");
    cpu::CompileOptions cc;
    cc.cache_dir = opts.cache_dir;
    cc.dump_dir = opts.dump_dir;
    cc.vector_math = co.vector_math;
    cc.plan = opts.plan_binaries.get();
    auto t0 = std::chrono::steady_clock::now();
    modules = cpu::compile_parts(src.parts, cc);
    compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& m : modules) m->prefault();
    from_cache = std::all_of(modules.begin(), modules.end(),
                             [](const auto& m) { return m->from_cache(); });
    from_plan = std::all_of(modules.begin(), modules.end(),
                            [](const auto& m) { return m->from_plan(); });
    num_functions = src.num_functions;
    for (size_t i = 0; i < plan.kernels.size(); ++i)
      if (!src.symbols[i].empty()) {
        steps[i].fn = reinterpret_cast<cpu::KernelFn>(
            modules[size_t(src.part[i])]->symbol(src.symbols[i]));
        steps[i].args = std::move(src.args[i]);
      }
    phase("compile+load");
  }
  sample_load();
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const plan::Kernel& k = plan.kernels[i];
    if (k.kind != KernelKind::Copy) continue;
    steps[i].src = k.inputs.at(0);
    steps[i].dst = k.outputs.at(0);
    const Value& v = g.value(steps[i].dst);
    steps[i].bytes = aliased[i] ? 0 : v.nbytes();  // an alias: the bytes are already there
  }
  if (gemm_jit_init.joinable()) {
    gemm_jit_init.join();
    phase("gemm:jit init");
  }
  sample_load();
  choose_first_mode();
  // A session whose inputs are not all of known shape cannot run at all (nor at build).
  bool shapes_known = std::all_of(g.inputs.begin(), g.inputs.end(), [&](int id) {
    const Shape& s = g.value(id).shape;
    return std::all_of(s.begin(), s.end(), [](int64_t d) { return d >= 0; });
  });
  if (shapes_known && !env::flag("BRRR_NO_WARMUP")) {
    warm_up_kernels();
    phase("warm-up");
  }
}

// Whether the first runs are serial. Threaded runs pay for every OpenMP region whose thread the OS
// has descheduled: on this 2-core machine with another process compiling, each threaded GEMM of
// bert_tiny's first run took 2.5 ms (15.5 ms against 0.35 ms for the run after), and the load
// state only learns that from a run. So when the samples taken during the build found other
// processes' runnable threads filling the CPUs this session's extra threads would need, the first
// stretch of runs is serial (as after a loaded run); the runs then judge the load as before.
// The median of the samples: one sample often catches a burst or a lull.
void CpuExecutor::choose_first_mode() {
  if (!adaptive || pool->threads() < 2 || others_runnable.empty()) return;
  std::vector<int> seen = others_runnable;
  std::nth_element(seen.begin(), seen.begin() + seen.size() / 2, seen.end());
  others_median = seen[seen.size() / 2];
  // Oversubscribed by a quarter of the session's threads at least (one, on this 2-core machine):
  // a serial run costs up to `threads` times a threaded one, so a many-core session needs more
  // than a stray thread of another process to go serial.
  const int threads = pool->threads();
  started_serial = others_median >= LoadMeter::online_cpus() - threads + std::max(1, threads / 4);
  if (debug_level() >= 1)
    fmt::print(stderr, "brrr: build other runnable threads {}: first runs {}\n",
               fmt::join(others_runnable, " "), started_serial ? "serial" : "threaded");
  if (started_serial) load->loaded();
}

// Whether every value kernel k's nodes read or write is floating point: a generated kernel on
// such values may run on any bytes (no integer division to trap, no data-dependent address).
bool CpuExecutor::float_only(const plan::Kernel& k) const {
  for (int n : k.nodes)
    for (const std::vector<int>* vs : {&g.nodes[size_t(n)].inputs, &g.nodes[size_t(n)].outputs})
      for (int v : *vs)
        if (v >= 0 && !is_floating(g.value(v).dtype)) return false;
  return true;
}

// Whether kernel i is small enough that its first execution's extra cost (20-50 us for a oneDNN
// primitive) is a large part of its run: then the build runs it once. A large kernel's run would
// cost the build more than it saves the first run (squeezenet1_1's 3x3 and final convs: most of
// a run's time, and their first executions only 5-10% slower than their next ones once the work
// space is paged in). Its estimated time: FLOPs at 50 GFLOP/s, bytes at 10 GB/s, under 0.1 ms.
bool CpuExecutor::worth_warming(size_t i) const {
  const Cost c = plan::kernel_record(g, plan, i).cost;
  double flops = c.flops;
  for (const auto& [f, n] : c.special) flops += n;
  return flops < 5e6 && c.bytes < 1e6;
}

// Every library kernel, and every generated one on floating-point values only, run once in plan
// order, on the arena as it is (zeros) and on zero inputs. This moves the first
// executions' cost (page faults in oneDNN's code, cold JIT code, lazily made kernels) from the
// first run into the build, at the price of one run of the library kernels there.
void CpuExecutor::warm_up_kernels() {
  auto t0 = std::chrono::steady_clock::now();
  // Zeros for the inputs, bound as a run binds them: that path is warmed too, and the output
  // buffers it makes are the ones the first run recycles.
  std::map<std::string, Tensor> zeros;
  for (int id : g.inputs) zeros[g.value(id).name] = Tensor::zeros(g.value(id).dtype, g.value(id).shape);
  std::vector<Tensor> outs, keep;
  bind(zeros, &outs, &keep);
  // In the mode the first run will take: serial when the session starts serial.
  pool->set_serial(load->serial());
  {
    std::optional<cpu::LibraryThreads> one;
    if (load->serial()) one.emplace(1);
    for (size_t i = 0; i < steps.size(); ++i) {
      Step& s = steps[i];
      if (!s.lib && !(s.kind == KernelKind::Fused && float_only(plan.kernels[i]))) continue;
      if (!worth_warming(i)) {
        ++num_cold;
        continue;
      }
      if (s.lib) s.lib->warm_up(slots.data());
      else exec(i);
      ++num_warmed;
    }
  }
  pool->set_serial(false);
  for (const std::vector<int>* ids : {&g.inputs, &g.outputs})
    for (int v : *ids)
      if (g.value(v).producer >= 0 || ids == &g.inputs) slots[size_t(v)] = nullptr;
  warm_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void CpuExecutor::bind(const std::map<std::string, Tensor>& inputs, std::vector<Tensor>* outs,
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

void CpuExecutor::exec(size_t i) {
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

std::vector<Tensor> CpuExecutor::run(const std::map<std::string, Tensor>& inputs) {
  std::vector<Tensor> outs, keep;
  bind(inputs, &outs, &keep);
  cpu::LibraryThreads lib_threads(pool->threads());
  begin_run();
  if (debug_level() >= 1) {
    // BRRR_DEBUG=1: one line per kernel (time, GFLOP/s, GB/s); the doctor adds regimes.
    for (size_t i = 0; i < steps.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      exec(i);
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      KernelRecord r = plan::kernel_record(g, plan.kernels[i]);
      double fl = r.cost.flops;
      for (const auto& [f, n] : r.cost.special) fl += n;
      fmt::print(stderr, "brrr: {:<28} {:<8} {:9.4f} ms {:9.2f} GFLOP/s {:8.2f} GB/s  [{}]\n",
                 r.name, r.kind, ms, ms > 0 ? fl / ms * 1e-6 : 0.0,
                 ms > 0 ? r.cost.bytes / ms * 1e-6 : 0.0, fmt::join(r.ops, " "));
    }
  } else {
    for (size_t i = 0; i < steps.size(); ++i) exec(i);
  }
  end_run();
  // Outputs that no kernel writes (a graph input or constant passed through).
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const Value& v = g.value(g.outputs[k]);
    if (v.producer < 0 && outs[k].nbytes())
      std::memcpy(outs[k].raw(), slots[size_t(g.outputs[k])], outs[k].nbytes());
  }
  return outs;
}

std::vector<double> CpuExecutor::time_runs(const std::map<std::string, Tensor>& inputs, int reps,
                                       const std::function<void()>& between) {
  using clk = std::chrono::steady_clock;
  CpuExecutor& m = *this;
  run(inputs);  // warm-up
  std::vector<Tensor> outs, keep;
  m.bind(inputs, &outs, &keep);
  std::vector<double> t;
  cpu::LibraryThreads lib_threads(m.pool->threads());
  for (int r = 0; r < std::max(reps, 1); ++r) {
    if (between) between();
    m.begin_run();
    auto t0 = clk::now();
    for (size_t i = 0; i < m.steps.size(); ++i) m.exec(i);
    m.end_run();
    t.push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
  }
  return t;
}

RunProfile CpuExecutor::profile(const std::map<std::string, Tensor>& inputs, int reps) {
  using clk = std::chrono::steady_clock;
  reps = std::max(reps, 1);
  RunProfile prof;
  prof.backend = "cpu";
  prof.threads = pool->threads();
  CpuExecutor& m = *this;
  run(inputs);  // warm-up: page in the arena, spin up the thread pool
  std::vector<std::vector<double>> times(m.steps.size());
  std::vector<double> walls;
  std::vector<Tensor> outs, keep;
  m.bind(inputs, &outs, &keep);
  cpu::LibraryThreads lib_threads(m.pool->threads());
  for (int r = 0; r < reps; ++r) {
    m.begin_run();
    auto w0 = clk::now();
    for (size_t i = 0; i < m.steps.size(); ++i) {
      auto t0 = clk::now();
      m.exec(i);
      times[i].push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
    }
    walls.push_back(std::chrono::duration<double, std::milli>(clk::now() - w0).count());
    m.end_run();
  }
  prof.wall_ms = median(walls);
  prof.wall_samples_ms = walls;
  prof.kernels_in_wall_runs = true;
  double start = 0;
  for (size_t i = 0; i < m.steps.size(); ++i) {
    KernelRecord rec = plan::kernel_record(m.g, m.plan, i);
    if (m.steps[i].lib) {
      rec.precision = m.steps[i].lib->precision;
      rec.layout_note = m.steps[i].lib->layout_note;
      rec.cost.bytes += double(m.steps[i].lib->reorder_bytes);  // its reorders move them too
    }
    if (m.aliased[i]) rec.cost.bytes = 0;  // moves nothing: its output is its input's buffer
    rec.time_ms = median(times[i]);
    rec.samples_ms = times[i];
    rec.start_ms = start;
    start += rec.time_ms;
    prof.kernels.push_back(std::move(rec));
  }
  return prof;
}

// Each round runs the plan's kernels in plan order and times the library kernels (or every
// kernel), so a kernel finds the cache as the kernels before it left it (not warmed by itself) and
// its inputs as a run makes them (a conv that adds into its output in place only grows them); hot
// (the cache check), one round in which each library kernel runs once more and is then timed
// `reps` times back to back. The load state is the session's
// again afterwards: rounds without the pool's joins and shorter than a run must not steer the
// runs that follow (--compare profiles this session next).
std::vector<KernelRecord> CpuExecutor::time_library_kernels_alone(
    const std::map<std::string, Tensor>& inputs, int reps) {
  return time_alone(inputs, reps, false);
}
std::vector<KernelRecord> CpuExecutor::time_kernels_alone(
    const std::map<std::string, Tensor>& inputs, int reps) {
  return time_alone(inputs, reps, true);
}
std::vector<KernelRecord> CpuExecutor::time_library_kernels_hot(
    const std::map<std::string, Tensor>& inputs, int reps) {
  return time_alone(inputs, reps, false, true);
}
std::vector<KernelRecord> CpuExecutor::time_alone(const std::map<std::string, Tensor>& inputs,
                                                  int reps, bool every_kernel, bool hot) {
  using clk = std::chrono::steady_clock;
  run(inputs);  // every buffer holds a run's values; pages and threads warm
  const LoadState saved = *load;
  std::vector<Tensor> outs, keep;
  bind(inputs, &outs, &keep);
  cpu::LibraryThreads lib_threads(pool->threads());
  std::vector<std::vector<double>> times(steps.size());
  // The plan's kernels as they run on its threads: no stretch of one-thread twins (a hiccup that
  // made the load-adaptive kernels serial for a stretch priced T5's bf16 GEMMs 2.35-2.52 ms
  // alone, 2.09-2.17 ms threaded, against 2.21 ms in the runs). The machine's load is the
  // reliability check's to report.
  const bool was_adaptive = adaptive;
  adaptive = false;
  // The kernels not timed run too, untimed, so that each timed kernel reads what a run gives it:
  // a library kernel's input made by a generated or copy kernel lives in a buffer that later
  // kernels of the run reuse (GPT-2's wte Gather read garbage ids, "index -4767524531305412157
  // is out of range", when only library kernels ran).
  for (int r = 0; r < (hot ? 1 : std::max(reps, 1)); ++r) {
    begin_run();
    for (size_t i = 0; i < steps.size(); ++i) {
      if (!steps[i].lib && !every_kernel) {
        exec(i);
        continue;
      }
      if (hot) exec(i);  // its operands into the caches
      for (int k = 0; k < (hot ? std::max(reps, 1) : 1); ++k) {
        auto t0 = clk::now();
        exec(i);
        times[i].push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
      }
    }
    end_run();
  }
  adaptive = was_adaptive;
  *load = saved;
  std::vector<KernelRecord> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    KernelRecord rec = plan::kernel_record(g, plan, i);
    if (steps[i].lib) rec.precision = steps[i].lib->precision;
    if (!times[i].empty()) {
      rec.time_ms = median(times[i]);
      rec.samples_ms = times[i];
    }
    out.push_back(std::move(rec));
  }
  return out;
}

std::string CpuExecutor::summary() const {
  std::string s;
  // The precision pass's choice as built: which oneDNN kernels read bf16 operands (a case with
  // no fast bf16 kernel is built in float32).
  std::map<std::string, int> narrow;
  int asked = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const plan::GemmDesc* gd = plan::desc_of<plan::GemmDesc>(plan.kernels[i]);
    const plan::ConvDesc* cd = plan::desc_of<plan::ConvDesc>(plan.kernels[i]);
    if (!steps[i].lib || !((gd && gd->math != DType::f32) || (cd && cd->math != DType::f32)))
      continue;
    ++asked;
    if (!steps[i].lib->precision.empty()) ++narrow[steps[i].lib->impl];
  }
  if (asked) {
    int n = 0;
    std::string impls;
    for (const auto& [impl, c] : narrow) {
      n += c;
      impls += fmt::format("{}{} x{}", impls.empty() ? "" : ", ", impl, c);
    }
    s += fmt::format("precision: {} of {} library GEMM/conv kernel(s) read bf16 operands{}{}\n", n,
                     asked, impls.empty() ? "" : ": ", impls);
  }
  // Which oneDNN implementation each library GEMM got: a strided operand oneDNN's brgemm refuses
  // falls back to the older gemm:jit (or a ref: kernel), which the plan alone does not show.
  std::map<std::string, int> gemm_impls;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].lib && !steps[i].lib->impl.empty() &&
        plan::desc_of<plan::GemmDesc>(plan.kernels[i]))
      ++gemm_impls[steps[i].lib->impl];
  if (!gemm_impls.empty()) {
    std::string impls;
    for (const auto& [impl, c] : gemm_impls)
      impls += fmt::format("{}{} x{}", impls.empty() ? "" : ", ", impl, c);
    s += fmt::format("library: oneDNN matmul implementations: {}\n", impls);
  }
  if (started_serial)
    s += fmt::format("threads: the first runs are serial: the machine was loaded during the build "
                     "(a median of {} other runnable thread(s) in {} samples, {} CPUs)\n",
                     others_median, others_runnable.size(), LoadMeter::online_cpus());
  if (warm_ms >= 0 && num_warmed)
    s += fmt::format("build: {} small kernel(s) run once on zeros ({:.2f} ms), so the first run "
                     "finds them warm ({} larger one(s) not)\n",
                     num_warmed, warm_ms, num_cold);
  if (work_bytes)
    s += fmt::format("memory: library work space {} bytes, shared by the library kernels ({} bytes "
                     "if each held its own)\n",
                     work_bytes, work_sum);
  if (num_aliased > num_concats_in_place)
    s += fmt::format("memory: {} copy kernel(s) alias their input's buffer (no work)\n",
                     num_aliased - num_concats_in_place);
  if (num_concats_in_place)
    s += fmt::format("memory: {} concat(s) in place: their inputs are written inside their output "
                     "(no copy)\n",
                     num_concats_in_place);
  if (num_nhwc) s += fmt::format("layout: {} value(s) kept NHWC between library kernels\n", num_nhwc);
  if (num_blocked)
    s += fmt::format("layout: {} value(s) kept channel-blocked (nChw{}c) between library kernels\n",
                     num_blocked, cpu::channel_block());
  if (const PlanBinaries* pb = opts.plan_binaries.get(); pb && !pb->record)
    s += fmt::format("plan file: {} generated module(s) and {} packed weight(s) taken from it\n",
                     pb->modules_used, pb->weights_used);
  if (!modules.empty()) {
    std::string how = from_plan    ? "from the plan file"
                      : from_cache ? "from cache"
                                   : fmt::format("compiled in {:.0f} ms", compile_ms);
    if (modules.size() == 1) s += fmt::format("code: {} ({})\n", modules[0]->path(), how);
    else
      s += fmt::format("code: {} translation units, first {} ({})\n", modules.size(),
                       modules[0]->path(), how);
    s += fmt::format("code: {} generated function(s) for {} fused kernel(s)\n", num_functions,
                     num_kernels_fused());
  }
  return s;
}

}  // namespace

std::unique_ptr<Executor> make_cpu_executor(const Graph& g, plan::Plan& plan,
                                            const SessionOptions& opts) {
  return std::make_unique<CpuExecutor>(g, plan, opts);
}

}  // namespace brrr::cpu
