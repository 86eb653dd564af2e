// CudaExecutor's timing: per-step GPU busy times free of host launch gaps (profile) and whole
// runs as the session does them (profile's wall, time_runs).
#include <algorithm>
#include <chrono>

#include "core/median.hpp"
#include "backend/cuda/cuda_executor_impl.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "plan/kernel_record.hpp"

namespace brrr::cuda {

namespace {

// Holds the stream for `ns` nanoseconds, so the host can enqueue work behind it.
const char* kSpinSource = R"cuda(
extern "C" __global__ void brrr_spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
)cuda";

}  // namespace

// Per-kernel times are GPU busy times, free of host launch gaps: a spin kernel holds the stream
// while the host enqueues a chunk of steps with an event after each, so the chunk then runs back
// to back and event differences measure kernels, not launch latency (a chunk is re-timed with a
// longer spin when the host was not done in time). The wall time is the run as the session does
// it (graph replay or eager launches); wall - busy = idle gaps, which the doctor counts as
// overhead. Start offsets: eager runs from the per-step events of the median run; graph replays
// spread the gap evenly over the nodes (no per-node timestamps without CUPTI).
RunProfile CudaExecutor::profile(const std::map<std::string, Tensor>& inputs, int reps) {
  using Clock = std::chrono::steady_clock;
  Impl& m = *impl_;
  m.dev.make_current();
  reps = std::max(reps, 1);
  m.bind(inputs);
  m.exec_all(true);  // warm-up
  m.stream.synchronize("profile warm-up");
  if (!m.spin_module) {
    NvrtcCompiler nv(m.dev.info().arch(), m.opts.cache_dir.empty()
                                              ? default_cuda_cache_dir()
                                              : m.opts.cache_dir + "/cuda",
                     m.opts.dump_dir);
    m.spin_module = std::make_unique<Module>(nv.compile(kSpinSource, "brrr_spin").cubin, "spin");
    m.spin = m.spin_module->function("brrr_spin");
  }
  const size_t n = m.steps.size(), kChunk = 128;
  std::vector<std::unique_ptr<Event>> ev;
  for (size_t i = 0; i <= n; ++i) ev.push_back(std::make_unique<Event>());
  std::vector<std::vector<double>> times(n);
  for (size_t lo = 0; lo < n;) {
    size_t hi = lo + 1;  // a host step (synchronizes the stream) is timed alone, ungated
    const bool gated = m.steps[lo].type != Step::Host;
    if (gated)
      while (hi < n && hi - lo < kChunk && m.steps[hi].type != Step::Host) ++hi;
    double spin_us = 200 + 30.0 * double(hi - lo);
    const int attempts = 4 * reps;
    for (int got = 0, at = 0; got < reps && at < attempts; ++at) {
      if (gated) {
        unsigned long long ns = static_cast<unsigned long long>(spin_us * 1e3);
        void* args[] = {&ns};
        launch(m.spin, {1}, {1}, 0, m.stream, args);
      }
      ev[lo]->record(m.stream);
      auto t0 = Clock::now();
      for (size_t i = lo; i < hi; ++i) {
        m.exec(i);
        ev[i + 1]->record(m.stream);
      }
      double host_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      ev[hi]->synchronize();
      if (gated && host_us > 0.8 * spin_us && at + 1 < attempts) {
        spin_us *= 2;  // the GPU caught up with the host: gaps in the chunk; again, longer gate
        continue;
      }
      for (size_t i = lo; i < hi; ++i) times[i].push_back(Event::elapsed_ms(*ev[i], *ev[i + 1]));
      ++got;
    }
    lo = hi;
  }
  // Wall: the run as the session does it. Eager runs keep per-step end stamps.
  const bool graph = m.graph.has_value();
  std::vector<double> walls;
  std::vector<std::vector<double>> ends(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    ev[0]->record(m.stream);
    if (graph) {
      m.exec_all(true);
      ev[n]->record(m.stream);
    } else {
      for (size_t i = 0; i < n; ++i) {
        m.exec(i);
        ev[i + 1]->record(m.stream);
      }
    }
    ev[n]->synchronize();
    walls.push_back(Event::elapsed_ms(*ev[0], *ev[n]));
    if (!graph)
      for (size_t i = 0; i < n; ++i) ends[size_t(r)].push_back(Event::elapsed_ms(*ev[0], *ev[i + 1]));
  }
  RunProfile prof;
  prof.backend = "cuda";
  prof.wall_ms = median(walls);
  prof.wall_samples_ms = walls;
  int med_run = 0;
  for (int r = 0; r < reps; ++r)
    if (walls[size_t(r)] == prof.wall_ms) med_run = r;
  double busy = 0;
  for (size_t i = 0; i < n; ++i) busy += median(times[i]);
  const double gap_per_node = n ? std::max(0.0, prof.wall_ms - busy) / double(n) : 0;
  double t = 0;
  for (size_t i = 0; i < n; ++i) {
    KernelRecord rec = plan::kernel_record(m.g, m.plan, i);
    rec.time_ms = median(times[i]);
    rec.graph_node = graph;
    if (m.steps[i].type == Step::Library) rec.precision = to_string(m.steps[i].gemm().prec);
    if (m.steps[i].type == Step::Conv) rec.precision = to_string(m.steps[i].conv().math);
    if (graph) {
      rec.start_ms = t + gap_per_node;
    } else {
      double end = ends[size_t(med_run)][i];
      rec.start_ms = std::max(t, end - rec.time_ms);
    }
    t = rec.start_ms + rec.time_ms;
    if (m.steps[i].type == Step::InChain && !prof.kernels.empty()) {
      // One launch ran the whole chain: its record covers every layer (ops, cost, tensors).
      KernelRecord& c = prof.kernels.back();
      c.name += "+" + rec.name;
      c.ops.insert(c.ops.end(), rec.ops.begin(), rec.ops.end());
      c.nodes.insert(c.nodes.end(), rec.nodes.begin(), rec.nodes.end());
      c.cost.flops += rec.cost.flops;
      c.cost.bytes += rec.cost.bytes;
      for (const auto& [fn, n] : rec.cost.special) c.cost.special[fn] += n;
      c.time_ms += rec.time_ms;
      c.reads.insert(c.reads.end(), rec.reads.begin(), rec.reads.end());
      c.writes.insert(c.writes.end(), rec.writes.begin(), rec.writes.end());
      continue;
    }
    if (m.steps[i].type == Step::Chain) rec.kind = "gemm_chain";
    prof.kernels.push_back(std::move(rec));
  }
  return prof;
}

std::vector<double> CudaExecutor::time_runs(const std::map<std::string, Tensor>& inputs, int reps,
                                            const std::function<void()>& between) {
  Impl& m = *impl_;
  m.dev.make_current();
  m.bind(inputs);
  m.exec_all(true);  // warm-up
  m.stream.synchronize("time_runs warm-up");
  Event e0, e1;
  std::vector<double> t;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    if (between) {
      between();
      m.dev.make_current();
    }
    e0.record(m.stream);
    m.exec_all(true);
    e1.record(m.stream);
    e1.synchronize();
    t.push_back(Event::elapsed_ms(e0, e1));
  }
  return t;
}

}  // namespace brrr::cuda
