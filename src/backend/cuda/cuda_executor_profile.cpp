// CudaExecutor's timing: per-step times and the wall from the same runs through CUPTI, or GPU busy
// times free of host launch gaps from CUDA events (profile), and whole runs as the session does
// them (time_runs).
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/median.hpp"
#include "backend/cuda/cuda_executor_impl.hpp"
#include "backend/cuda/cupti_trace.hpp"
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

// The kernels and the wall come from the same runs where CUPTI can be loaded: its activity
// records of the real runs (graph replays when graphs are on) give each kernel's start and end,
// so kernel times, the gaps between them and the wall add up (the doctor's one timeline). Without
// CUPTI, or when its records do not match the plan, event timing is the labelled fallback.
std::vector<KernelRecord> CudaExecutor::time_library_kernels_alone(
    const std::map<std::string, Tensor>& inputs, int reps) {
  RunProfile p = profile(inputs, reps);
  if (p.timing_source.rfind("CUPTI", 0) != 0) return {};
  return std::move(p.kernels);
}

RunProfile CudaExecutor::profile(const std::map<std::string, Tensor>& inputs, int reps) {
  Impl& m = *impl_;
  reps = std::max(reps, 1);
  m.warm_up(inputs, "profile warm-up");
  RunProfile prof;
  std::string why;
  const bool traced = m.profile_cupti(reps, &prof, &why);
  if (!traced) {
    prof = RunProfile{};
    m.profile_events(reps, &prof);
    prof.timing_source = "CUDA events (fallback: " + why + ")";
  }
  m.last_timed = std::chrono::steady_clock::now();
  return prof;
}

namespace {

// Holds the host for `us` microseconds, so that host timestamps taken between GPU work lie well
// clear of the records' own (CUPTI maps GPU time onto its clock with a small error).
void hold_host(double us) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  while (std::chrono::duration<double, std::micro>(Clock::now() - t0).count() < us) {
  }
}

}  // namespace

// 1. Each step alone, eagerly, with a CUPTI timestamp after each: which kernels, copies and fills
// each step launches (cuBLASLt and cuDNN launch kernels brrr did not name, and their number
// varies). 2. The timed runs as the session does them, a timestamp after each, CUDA events
// around each for the wall (as time_runs). Each run's records are then split into steps in the
// signature's order; a run that does not match it fails the trace (fallback, with the reason).
bool CudaExecutor::Impl::profile_cupti(int reps, RunProfile* prof, std::string* why) {
  for (const Step& s : steps)
    if (s.type == Step::Host) {
      *why = "a plan kernel runs on the host between GPU steps";
      return false;
    }
  // The untraced wall first: it is the wall reported. CUPTI's records stretch the idle time
  // between kernels (BERT-base bf16 at batch 1 on an H200: 1.008 ms traced against 0.678 ms
  // untraced, 206 kernels), not the kernels' own durations, so each traced run's gaps are scaled
  // down to the untraced wall below.
  std::vector<double> plain;
  Event e0, e1;
  auto timed_run = [&] {
    e0.record(stream);
    exec_all(true);
    e1.record(stream);
    e1.synchronize();
    return double(Event::elapsed_ms(e0, e1));
  };
  for (int r = 0; r < std::max(reps, 20); ++r) plain.push_back(timed_run());
  std::unique_ptr<CuptiTrace> trace = CuptiTrace::start(why);
  if (!trace) return false;
  // Replays of the graph as captured while CUPTI traces (an identical capture of the same
  // launches): CUPTI need not see the nodes of a graph instantiated before it was enabled.
  if (graph) {
    try {
      CudaGraph fresh = CudaGraph::capture(stream, [&] { exec_all(false); }, "the plan");
      graph = std::move(fresh);
    } catch (const Error& e) {
      *why = std::string("the plan's CUDA graph could not be captured again under CUPTI: ") +
             e.what();
      return false;
    }
  }
  std::vector<uint64_t> step_marks, run_marks;
  auto mark = [&](std::vector<uint64_t>& marks) {
    stream.synchronize("profile");
    hold_host(50);
    marks.push_back(trace->now());
    hold_host(50);
  };
  const size_t n = steps.size();
  mark(step_marks);
  for (size_t i = 0; i < n; ++i) {
    exec(i);
    mark(step_marks);
  }
  run_marks.push_back(step_marks.back());
  std::vector<double> walls;
  for (int r = 0; r < reps; ++r) {
    walls.push_back(timed_run());
    mark(run_marks);
  }
  std::vector<GpuActivity> recs;
  if (!trace->stop(&recs, why)) return false;
  // The L2 prefetches run beside the plan's steps (a side branch of the graph), not as steps.
  recs.erase(std::remove_if(recs.begin(), recs.end(),
                            [](const GpuActivity& a) { return a.name == "brrr_l2_prefetch"; }),
             recs.end());
  StepSignature sig(n);
  size_t total = 0;
  std::vector<std::vector<GpuActivity>> by_step = bucket_by_marks(recs, step_marks);
  for (size_t i = 0; i < n; ++i) {
    for (const GpuActivity& a : by_step[i]) sig[i].push_back(a.name);
    total += sig[i].size();
  }
  if (total == 0) {
    *why = "CUPTI recorded no GPU activity for the plan's steps";
    return false;
  }
  std::vector<std::vector<GpuActivity>> by_run = bucket_by_marks(std::move(recs), run_marks);
  std::vector<std::vector<double>> samples(n), starts(n);
  std::vector<StepTiming> t;
  const double traced = median(walls), untraced = median(plain);
  const double excess = std::max(0.0, traced - untraced);  // what tracing added to a run
  for (int r = 0; r < reps; ++r) {
    std::string err;
    if (!map_run(by_run[size_t(r)], sig, &t, &err)) {
      *why = fmt::format("CUPTI records of run {} do not match the plan: {}", r + 1, err);
      return false;
    }
    double busy = 0;
    for (const StepTiming& st : t) busy += st.time_ms;
    const double idle = walls[size_t(r)] - busy;
    const double fit = std::max(busy, walls[size_t(r)] - excess);  // this run, untraced
    if (idle > 0) scale_gaps(&t, (fit - busy) / idle);
    walls[size_t(r)] = fit;
    for (size_t i = 0; i < n; ++i) {
      samples[i].push_back(t[i].time_ms);
      starts[i].push_back(t[i].start_ms);
    }
  }
  prof->backend = "cuda";
  prof->wall_ms = median(walls);
  prof->wall_samples_ms = walls;
  prof->kernels_in_wall_runs = true;
  prof->timing_source = fmt::format(
      "CUPTI activity records of the {} ({} GPU activities per run from {}); wall {:.3f} ms "
      "untraced (median of {} runs); tracing stretched the gaps between kernels to {:.3f} ms, "
      "so each traced run's gaps are scaled to the untraced wall",
      graph ? "CUDA-graph replays" : "eager runs", total, trace->library(), untraced,
      plain.size(), traced);
  std::vector<double> time(n), start(n);
  std::vector<int64_t> grids(n);
  for (size_t i = 0; i < n; ++i) {
    time[i] = median(samples[i]);
    start[i] = median(starts[i]);
    // The grid of the step's longest kernel in the marked eager run (a graph replays the same).
    uint64_t longest = 0;
    for (const GpuActivity& a : by_step[i])
      if (a.ctas > 0 && a.end_ns - a.start_ns >= longest) longest = a.end_ns - a.start_ns, grids[i] = a.ctas;
  }
  add_step_records(prof, time, start, samples, starts, sig, grids);
  return true;
}

// Per-kernel times are GPU busy times, free of host launch gaps: a spin kernel holds the stream
// while the host enqueues a chunk of steps with an event after each, so the chunk then runs back
// to back and event differences measure kernels, not launch latency (a chunk is re-timed with a
// longer spin when the host was not done in time). The wall time is the run as the session does
// it (graph replay or eager launches), timed apart from the kernels; wall - busy = idle gaps,
// which the doctor counts as overhead. Start offsets: eager runs from the per-step events of the
// median run; graph replays spread the gap evenly over the nodes.
void CudaExecutor::Impl::profile_events(int reps, RunProfile* prof) {
  using Clock = std::chrono::steady_clock;
  Impl& m = *this;
  if (!m.spin_module) {
    NvrtcCompiler nv(m.dev.info().arch(), m.cache_dir(), m.opts.dump_dir);
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
  const bool graph_on = m.graph.has_value();
  std::vector<double> walls;
  std::vector<std::vector<double>> ends(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    ev[0]->record(m.stream);
    if (graph_on) {
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
    if (!graph_on)
      for (size_t i = 0; i < n; ++i) ends[size_t(r)].push_back(Event::elapsed_ms(*ev[0], *ev[i + 1]));
  }
  prof->backend = "cuda";
  prof->wall_ms = median(walls);
  prof->wall_samples_ms = walls;
  int med_run = 0;
  for (int r = 0; r < reps; ++r)
    if (walls[size_t(r)] == prof->wall_ms) med_run = r;
  double busy = 0;
  std::vector<double> time(n), start(n);
  for (size_t i = 0; i < n; ++i) busy += (time[i] = median(times[i]));
  const double gap_per_node = n ? std::max(0.0, prof->wall_ms - busy) / double(n) : 0;
  double t = 0;
  for (size_t i = 0; i < n; ++i) {
    start[i] = graph_on ? t + gap_per_node : std::max(t, ends[size_t(med_run)][i] - time[i]);
    t = start[i] + time[i];
  }
  add_step_records(prof, time, start, {}, {}, {}, {});
}

void CudaExecutor::Impl::add_step_records(RunProfile* prof, const std::vector<double>& time,
                                          const std::vector<double>& start,
                                          const std::vector<std::vector<double>>& samples,
                                          const std::vector<std::vector<double>>& start_samples,
                                          const std::vector<std::vector<std::string>>& activities,
                                          const std::vector<int64_t>& grids) {
  const bool graph_on = graph.has_value();
  for (size_t i = 0; i < steps.size(); ++i) {
    KernelRecord rec = plan::kernel_record(g, plan, i);
    rec.time_ms = time[i];
    rec.start_ms = start[i];
    if (!samples.empty()) rec.samples_ms = samples[i];
    if (!start_samples.empty()) rec.start_samples_ms = start_samples[i];
    if (!activities.empty()) {
      rec.gpu_activities = int(activities[i].size());
      if (activities[i].size() > 1) rec.gpu_activity_names = activities[i];
    }
    if (!grids.empty()) rec.grid_ctas = grids[i];
    rec.graph_node = graph_on;
    if (steps[i].type == Step::Library) rec.precision = to_string(steps[i].gemm().prec);
    if (steps[i].type == Step::Conv) rec.precision = to_string(steps[i].conv().math);
    if (steps[i].type == Step::Attention) {  // 16-bit attention already runs on Tensor Cores
      const DType t = steps[i].attention().dt;
      rec.precision = t == DType::bf16 ? "bf16" : t == DType::f16 ? "fp16" : "fp32";
    }
    if (steps[i].type == Step::InChain && !prof->kernels.empty()) {
      // One launch ran the whole chain: its record covers every layer (ops, cost, tensors).
      KernelRecord& c = prof->kernels.back();
      c.name += "+" + rec.name;
      c.ops.insert(c.ops.end(), rec.ops.begin(), rec.ops.end());
      c.nodes.insert(c.nodes.end(), rec.nodes.begin(), rec.nodes.end());
      c.cost.flops += rec.cost.flops;
      c.cost.bytes += rec.cost.bytes;
      for (const auto& [fn, v] : rec.cost.special) c.cost.special[fn] += v;
      c.time_ms += rec.time_ms;
      c.gpu_activities += rec.gpu_activities;
      c.gpu_activity_names.insert(c.gpu_activity_names.end(), rec.gpu_activity_names.begin(),
                                  rec.gpu_activity_names.end());
      c.grid_ctas = std::max(c.grid_ctas, rec.grid_ctas);
      for (size_t r = 0; r < c.samples_ms.size() && r < rec.samples_ms.size(); ++r)
        c.samples_ms[r] += rec.samples_ms[r];
      c.reads.insert(c.reads.end(), rec.reads.begin(), rec.reads.end());
      c.writes.insert(c.writes.end(), rec.writes.begin(), rec.writes.end());
      continue;
    }
    if (steps[i].type == Step::Chain) rec.kind = "gemm_chain";
    prof->kernels.push_back(std::move(rec));
  }
}

void CudaExecutor::Impl::warm_up(const std::map<std::string, Tensor>& inputs, const char* what) {
  dev.make_current();
  bind(inputs);
  // Untimed runs for at least kWarmUpMs (one at least), so that a GPU coming out of idle has
  // raised its clocks before the timed runs: 20 runs of a 0.4 ms plan take 8 ms, less than a
  // clock's ramp. Right after another timing (bench's queued runs after its latency runs, or
  // --duration's chunks) the clocks are up: one run.
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  constexpr double kWarmUpMs = 50, kStillWarmMs = 100;
  const bool warm = last_timed != Clock::time_point{} && ms_since(last_timed) < kStillWarmMs;
  const auto t0 = Clock::now();
  do {
    exec_all(true);
    stream.synchronize(what);
  } while (!warm && ms_since(t0) < kWarmUpMs);
}

std::vector<double> CudaExecutor::time_runs(const std::map<std::string, Tensor>& inputs, int reps,
                                            const std::function<void()>& between) {
  Impl& m = *impl_;
  m.warm_up(inputs, "time_runs warm-up");
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
  m.last_timed = std::chrono::steady_clock::now();
  return t;
}

std::vector<double> CudaExecutor::time_queued_runs(const std::map<std::string, Tensor>& inputs,
                                                   int runs, int rounds) {
  Impl& m = *impl_;
  m.warm_up(inputs, "time_queued_runs warm-up");
  Event e0, e1;
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    e0.record(m.stream);
    for (int i = 0; i < runs; ++i) m.exec_all(true);
    e1.record(m.stream);
    e1.synchronize();
    t.push_back(Event::elapsed_ms(e0, e1) / runs);
  }
  m.last_timed = std::chrono::steady_clock::now();
  return t;
}

}  // namespace brrr::cuda
