// `brrr probe` for the CPU: measures every ceiling the doctor prices kernels with. Each step runs
// its kernel long enough to be timed (calibrated), takes the best of a few runs, and says what it
// is doing on stderr. The whole probe stays under ~20 s.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <cstdio>
#include <sstream>

#include "brrr/doctor.hpp"
#include "brrr/error.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "core/machine_load.hpp"
#include "doctor/probe_kernels.hpp"
#include "passes/pipeline.hpp"

namespace brrr::doctor {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Best rate (work / second) of run(iters) over `reps` runs of about `target_s` each; run returns
// the work it did. Time is the slowest thread's loop (kern::last_span_s), so the fork/join of a
// busy machine does not count as compute. Iterations are calibrated from short first runs.
template <typename F>
double best_rate(F&& run, int64_t iters, double target_s, int reps) {
  for (;;) {
    run(iters);
    double t = kern::last_span_s();
    if (t >= 0.01 || iters > (int64_t(1) << 40)) {
      iters = std::max<int64_t>(1, int64_t(double(iters) * target_s / std::max(t, 1e-9)));
      break;
    }
    iters *= 8;
  }
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    double work = run(iters);
    best = std::max(best, work / std::max(kern::last_span_s(), 1e-9));
  }
  return best;
}

// Fastest seconds per call of f(reps) / reps over `rounds` rounds calibrated to ~target_s each:
// an overhead ceiling is the cost the machine can achieve, not its worst moments under load.
template <typename F>
double fastest_per_call(F&& f, double target_s, int rounds) {
  int64_t reps = 1;
  for (;;) {
    auto t0 = Clock::now();
    f(reps);
    double t = seconds_since(t0);
    if (t >= 0.005) {
      reps = std::max<int64_t>(1, int64_t(double(reps) * target_s / t));
      break;
    }
    reps *= 8;
  }
  std::vector<double> v;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    f(reps);
    v.push_back(seconds_since(t0) / double(reps));
  }
  return *std::min_element(v.begin(), v.end());
}

struct Progress {
  bool on;
  int step = 0, total;
  Clock::time_point t0 = Clock::now();
  void operator()(const std::string& what) {
    if (on)
      fmt::print(stderr, "probe [{}/{}] {:5.1f}s  {}\n", ++step, total, seconds_since(t0), what);
  }
};

std::string read_cpu_field(const std::string& key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) {
        std::string v = line.substr(p + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  return "";
}

// Datasheet-style estimates from /proc/cpuinfo: lanes x 2 (FMA) x FMA ports x clock x cores.
void fill_datasheet(Ceilings& c) {
  std::string flags = " " + read_cpu_field("flags") + " ";
  auto has = [&](const char* f) {
    return flags.find(std::string(" ") + f + " ") != std::string::npos;
  };
  double mhz = std::atof(read_cpu_field("cpu MHz").c_str());
  if (mhz <= 0) return;
  int lanes32 = has("avx512f") ? 16 : has("avx2") ? 8 : has("sse2") ? 4 : 1;
  int ports = has("fma") ? 2 : 1;  // two FMA ports on current server cores (an assumption)
  double ghz = mhz / 1000.0;
  int cores = c.threads;
  c.datasheet["freq_ghz"] = ghz;
  c.datasheet["fp32_gflops"] = lanes32 * 2.0 * ports * ghz * cores;
  c.datasheet["fp64_gflops"] = lanes32 / 2 * 2.0 * ports * ghz * cores;
  if (has("avx512_bf16")) c.datasheet["bf16_gflops"] = lanes32 * 4.0 * ports * ghz * cores;
  // AMX: one 16 x 16 x 32 bf16 tile product (16384 FLOP) per 16 cycles per core.
  if (has("amx_bf16")) c.datasheet["bf16_gflops"] = 1024.0 * ghz * cores;
  c.datasheet_note = fmt::format(
      "estimate, not measured: {} fp32 lanes x 2 (FMA) x {} FMA ports x {:.2f} GHz (cpu MHz in "
      "/proc/cpuinfo) x {} cores; no bandwidth figure is known for this machine",
      lanes32, ports, ghz, cores);
}

// A chain of n Relu nodes on a 4-element tensor: what the reference executor costs per op when
// the op itself does nothing.
Graph tiny_chain(int n) {
  Graph g;
  g.name = "probe_tiny_chain";
  int x = g.add_value("x");
  g.value(x).dtype = DType::f32;
  g.value(x).shape = {4};
  g.inputs.push_back(x);
  int prev = x;
  for (int i = 0; i < n; ++i) {
    int y = g.add_value(fmt::format("y{}", i));
    Node nd;
    nd.op = "Relu";
    nd.name = fmt::format("relu{}", i);
    nd.inputs = {prev};
    nd.outputs = {y};
    g.nodes.push_back(nd);
    prev = y;
  }
  g.outputs.push_back(prev);
  return compile(std::move(g), plan::Target::reference(), {}).graph;
}

// One MatMul x[m,k] . w[k,n] with a constant weight: as a Session runs it, a single library
// GEMM (oneDNN on the CPU).
Graph gemm_graph(int64_t m, int64_t k, int64_t n) {
  Graph g;
  g.name = "probe_gemm";
  int x = g.add_value("x");
  g.value(x).dtype = DType::f32;
  g.value(x).shape = {m, k};
  g.value(x).typed = true;
  g.inputs.push_back(x);
  int w = g.add_value("w");
  Tensor wt = Tensor::zeros(DType::f32, {k, n});
  for (int64_t i = 0; i < wt.numel(); ++i) wt.data<float>()[i] = 1e-3f * float(i % 17);
  g.value(w).dtype = DType::f32;
  g.value(w).shape = {k, n};
  g.value(w).constant = wt;
  g.value(w).typed = true;
  int y = g.add_value("y");
  Node nd;
  nd.op = "MatMul";
  nd.name = "probe_matmul";
  nd.inputs = {x, w};
  nd.outputs = {y};
  g.nodes.push_back(nd);
  g.outputs.push_back(y);
  return g;
}

// The library GEMM's rate at each precision the CPU backend accepts (fp32, and bf16 where the CPU
// has avx512_bf16 or AMX): what `--precision` does to a GEMM, which the FMA loops cannot say (on
// a CPU with AMX oneDNN's bf16 GEMMs use the tile unit, while the vdpbf16ps loop can run at half
// the fp32 FMA rate). The precisions run in alternating rounds, so that a load on the machine
// falls on both alike; each keeps its fastest run. Wall time: a GEMM call is what the kernels pay.
std::map<std::string, double> library_gemm_gflops(int threads, double q) {
  const int64_t m = 256, k = 1024, n = 1024;
  const double flops = 2.0 * double(m) * double(k) * double(n);
  Graph g = gemm_graph(m, k, n);
  std::map<std::string, Tensor> in{{"x", Tensor::zeros(DType::f32, {m, k})}};
  for (int64_t i = 0; i < m * k; ++i) in.at("x").data<float>()[i] = 1e-2f * float(i % 13);
  std::vector<std::pair<std::string, std::unique_ptr<Session>>> sessions;
  for (const char* prec : {"fp32", "bf16"}) {
    SessionOptions so;
    so.backend = "cpu";
    so.threads = threads;
    so.precision = prec;
    try {
      sessions.emplace_back(prec, std::make_unique<Session>(g, so));
    } catch (const Error&) {
      // Refused on this CPU (no bf16 path): not a unit `--precision` can move a GEMM to.
    }
  }
  std::map<std::string, double> best;
  // A build without oneDNN runs the MatMul as generated code: no library GEMM to measure. At
  // bf16 the model is stored in 16 bits, so casts in and out run around the GEMM: the GEMM's
  // own time is read from the profile.
  std::vector<size_t> gemm(sessions.size());
  for (size_t i = 0; i < sessions.size(); ++i) {
    // Also warms: packed weights, first-touch buffers.
    const RunProfile one = sessions[i].second->profile(in, 1);
    int library = 0;
    for (size_t j = 0; j < one.kernels.size(); ++j)
      if (one.kernels[j].kind == "library") ++library, gemm[i] = j;
    if (library != 1 || (one.kernels.size() != 1 && sessions[i].first == std::string("fp32")))
      return best;
  }
  const int per_round = q < 1 ? 2 : 8;
  for (int round = 0; round < 5; ++round)
    for (size_t i = 0; i < sessions.size(); ++i) {
      auto& [prec, s] = sessions[i];
      double sec = 0;
      if (s->num_kernels() == 1) {
        auto t0 = Clock::now();
        for (int r = 0; r < per_round; ++r) s->run(in);
        sec = seconds_since(t0);
      } else {
        sec = s->profile(in, per_round).kernels[gemm[i]].time_ms * per_round / 1e3;
      }
      if (sec > 0) best[prec] = std::max(best[prec], flops * per_round / sec / 1e9);
    }
  return best;
}

// The data and unified caches of cpu0 from level 2 up, as sysfs lists them (sizes read like
// "2048K"), each with what `threads` threads hold in it together: a level shared by k CPUs
// counts once per k threads. The last is named "llc"; a level that holds no more than the one
// below it is left out. Without sysfs: sysconf's L3 alone (glibc may report the whole package).
std::vector<CacheLevel> cache_levels(int threads) {
  std::vector<CacheLevel> out;
  for (int i = 0; i < 16; ++i) {
    std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", i);
    std::ifstream lf(dir + "level"), sf(dir + "size"), tf(dir + "type"), cf(dir + "shared_cpu_list");
    int level = 0;
    std::string size, type, shared;
    if (!(lf >> level) || !(sf >> size)) break;
    tf >> type;
    if (type == "Instruction" || level < 2) continue;
    char* end = nullptr;
    double v = std::strtod(size.c_str(), &end);
    double mul = *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : *end == 'G' ? 1073741824.0 : 1.0;
    // "0-1,4-5": count the CPUs.
    cf >> shared;
    int sharing = 0;
    for (std::stringstream ss(shared); ss.good();) {
      std::string part;
      std::getline(ss, part, ',');
      int lo = 0, hi = 0;
      if (std::sscanf(part.c_str(), "%d-%d", &lo, &hi) == 2) sharing += hi - lo + 1;
      else if (!part.empty()) sharing++;
    }
    const int copies = std::max(1, threads / std::max(1, sharing));
    if (v > 0) out.push_back({fmt::format("l{}", level), v * mul * copies, 0});
  }
  if (out.empty()) {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) out.push_back({"llc", double(l3), 0});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const CacheLevel& a, const CacheLevel& b) { return a.bytes < b.bytes; });
  std::vector<CacheLevel> kept;
  for (const auto& l : out)
    if (kept.empty() || l.bytes > kept.back().bytes) kept.push_back(l);
  if (!kept.empty()) kept.back().name = "llc";
  return kept;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

const std::vector<std::string>& probed_special_functions() {
  static const std::vector<std::string> names(kern::kSpecialNames,
                                              kern::kSpecialNames + kern::kNumSpecial);
  return names;
}

void special_chain_f32(const std::string& fn, const float* x, float* y, int64_t n, int k) {
  const auto& names = probed_special_functions();
  auto it = std::find(names.begin(), names.end(), fn);
  BRRR_CHECK(it != names.end(), "special_chain_f32: unknown function '{}'", fn);
  BRRR_CHECK(k >= 0, "special_chain_f32: k must be >= 0, got {}", k);
  kern::special_chain(int(it - names.begin()), x, y, n, k);
}

double cpu_capacity(int threads) {
  if (threads <= 1) return 1.0;
  constexpr int64_t kIters = 1 << 18;  // ~1 ms of one core's FMAs (AVX-512, 3.5 GHz)
  kern::fma_team_s(threads, kIters / 8);  // wake the team
  double one = 1e30, team = 1e30;
  for (int r = 0; r < 3; ++r) {  // alternating, best of each: a passing hiccup is not the host
    one = std::min(one, kern::fma_team_s(1, kIters));
    team = std::min(team, kern::fma_team_s(threads, kIters));
  }
  return team > 0 ? double(threads) * one / team : 0.0;
}

Ceilings probe_cpu(bool progress_on, bool quick) {
  const double q = quick ? 0.2 : 1.0;  // quick: shorter timings and buffers (tests)
  Ceilings c;
  c.backend = "cpu";
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  c.host = host;
  c.cpu_model = read_cpu_field("model name");
  c.isa = kern::isa_name();
  c.threads = kern::max_threads();
  auto t_start = Clock::now();
  LoadMeter load;
  Progress step{progress_on, 0, 8};

  // 1. Memory bandwidth: buffers well beyond the last-level cache, pages placed by first touch.
  {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t bytes = std::max<size_t>(size_t(256) << 20, l3 > 0 ? size_t(l3) * 2 : 0);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) bytes = std::min(bytes, size_t(pages) * size_t(psz) / 8);
    bytes = std::min(bytes, quick ? size_t(96) << 20 : size_t(1) << 30) & ~size_t(4095);
    step(fmt::format("memory bandwidth: parallel copy and memcpy of {} MiB (read + write)",
                     bytes >> 20));
    std::unique_ptr<void, FreeDeleter> src(std::aligned_alloc(4096, bytes));
    std::unique_ptr<void, FreeDeleter> dst(std::aligned_alloc(4096, bytes));
    BRRR_CHECK(src && dst, "probe: cannot allocate {} MiB for the bandwidth test", bytes >> 20);
    kern::parallel_fill(src.get(), bytes);
    kern::parallel_fill(dst.get(), bytes);
    double best_omp = 0, best_memcpy = 0;
    for (int r = 0; r < (quick ? 2 : 4); ++r) {
      auto t0 = Clock::now();
      kern::parallel_copy(dst.get(), src.get(), bytes);
      best_omp = std::max(best_omp, 2.0 * double(bytes) / seconds_since(t0));
      t0 = Clock::now();
      std::memcpy(dst.get(), src.get(), bytes);
      best_memcpy = std::max(best_memcpy, 2.0 * double(bytes) / seconds_since(t0));
    }
    c.bandwidth_gbs = best_omp / 1e9;
    c.memcpy_gbs = best_memcpy / 1e9;
  }

  // 1b. Cache bandwidth, per level below DRAM: source + destination fill half of what the
  // threads can hold in that level, so both stay resident while every thread copies its chunk
  // back and forth many times. A level private to each CPU holds one chunk per thread. Each level
  // is the roof for kernels whose bytes fit it and not a smaller one: judging a 300 kB GEMM by a
  // 480 MiB LLC that a VM reports for its whole host (measured at DRAM speed) priced its floor
  // at DRAM's rate, though its data sat in the 2 MiB L2.
  {
    const auto levels = cache_levels(c.threads);
    std::vector<std::string> within;
    for (const auto& l : levels) within.push_back(fmt::format("{:.1f} MiB of {}", l.bytes / 1048576, l.name));
    step(levels.empty() ? std::string("cache bandwidth: the cache sizes are unknown; kernels face "
                                      "DRAM only")
                        : fmt::format("cache bandwidth: parallel copy within {}, repeated",
                                      fmt::join(within, ", ")));
    for (CacheLevel l : levels) {
      size_t bytes = (size_t(l.bytes) / 4) & ~size_t(4095);
      if (bytes < 4096) continue;
      std::unique_ptr<void, FreeDeleter> a(std::aligned_alloc(4096, bytes));
      std::unique_ptr<void, FreeDeleter> b(std::aligned_alloc(4096, bytes));
      BRRR_CHECK(a && b, "probe: cannot allocate {} KiB for the cache test", bytes >> 10);
      kern::parallel_fill(a.get(), bytes);
      kern::parallel_fill(b.get(), bytes);
      auto copy = [&](int64_t passes) { return kern::cache_copy(a.get(), b.get(), bytes, passes); };
      l.gbs = best_rate(copy, 4, 0.05 * q, 3) / 1e9;
      c.cache_levels.push_back(l);
    }
    if (!c.cache_levels.empty()) {
      c.cache_bandwidth_gbs = c.cache_levels.back().gbs;
      c.cache_bytes = c.cache_levels.back().bytes;
    }
  }

  // 2. Peak FLOP/s per precision.
  step(fmt::format("peak FLOP/s: {} FMA, fp32 / fp64 / bf16, {} threads", c.isa, c.threads));
  c.peak_gflops["fp32"] = best_rate(kern::fma_f32, 1 << 12, 0.12 * q, 3) / 1e9;
  c.peak_gflops["fp64"] = best_rate(kern::fma_f64, 1 << 12, 0.12 * q, 3) / 1e9;
  if (kern::dot_bf16(1) > 0)
    c.peak_gflops["bf16"] = best_rate(kern::dot_bf16, 1 << 12, 0.12 * q, 3) / 1e9;
  // With AMX the bf16 roof is the tile unit's, where oneDNN's bf16 GEMMs and convs run: judged
  // against the vdpbf16ps loop (212 GFLOP/s on two Sapphire Rapids cores), BERT-base's bf16
  // GEMMs showed 390-470% of "peak".
  if (kern::amx_bf16(1) > 0)
    c.peak_gflops["bf16"] = std::max(c.peak_gflops["bf16"],
                                     best_rate(kern::amx_bf16, 1 << 10, 0.12 * q, 3) / 1e9);

  // 2b. The library GEMM per precision the backend accepts.
  step("library GEMM: oneDNN 256x1024x1024 matmul at fp32 and at each --precision this CPU "
       "takes");
  c.library_gflops = library_gemm_gflops(c.threads, q);

  // 3. Special functions, vectorized (SLEEF) and scalar libm, on in-cache data.
  step(fmt::format("special functions: {} (SLEEF {}) and scalar libm",
                   fmt::join(probed_special_functions(), ", "),
                   kern::have_sleef() ? c.isa : "absent"));
  for (int fn = 0; fn < kern::kNumSpecial; ++fn) {
    const char* name = kern::kSpecialNames[fn];
    auto vec = [&](int64_t passes) { return kern::special_run(fn, true, 2048, passes); };
    auto sca = [&](int64_t passes) { return kern::special_run(fn, false, 2048, passes); };
    if (kern::have_sleef()) c.special_gops[name] = best_rate(vec, 4, 0.05 * q, 3) / 1e9;
    c.special_scalar_gops[name] = best_rate(sca, 1, 0.04 * q, 2) / 1e9;
    if (!kern::have_sleef()) c.special_gops[name] = c.special_scalar_gops[name];
  }

  // 4. Overheads.
  step("overhead: reference executor dispatch per op (64 Relu on 4 floats)");
  {
    Graph g = tiny_chain(64);
    std::map<std::string, Tensor> in{{"x", Tensor::zeros(DType::f32, {4})}};
    double per_run = fastest_per_call(
        [&](int64_t reps) {
          for (int64_t r = 0; r < reps; ++r) run_reference(g, in);
        },
        0.1 * q, 5);
    c.dispatch_us = per_run / 64 * 1e6;
  }
  step("overhead: OpenMP fork/join of one parallel region");
  {
    // Regions timed one by one; the fastest is what a region costs when both threads are on a
    // core. (A loaded machine stalls regions for a whole scheduler slice: the 10th percentile
    // used before read 1318 us for a 0.64 us region on a loaded 2-core machine, and every
    // kernel then looked overhead-bound until the next probe.)
    kern::fork_join(100);
    std::vector<double> t;
    for (int r = 0; r < (quick ? 400 : 2000); ++r) {
      auto t0 = Clock::now();
      kern::fork_join(1);
      t.push_back(seconds_since(t0));
    }
    std::sort(t.begin(), t.end());
    c.fork_join_us = t.front() * 1e6;
  }
  step("overhead: kernel call through a function pointer on 16 floats");
  {
    float x[16] = {0}, y[16];
    kern::TinyKernel volatile k = kern::tiny_kernel();
    c.kernel_call_us = fastest_per_call(
                           [&](int64_t reps) {
                             for (int64_t r = 0; r < reps; ++r) k(x, y, 16);
                           },
                           0.02 * q, 5) *
                       1e6;
  }
  fill_datasheet(c);
  c.probe_seconds = seconds_since(t_start);
  c.probed_at = utc_timestamp();
  c.probe_other_busy_cpus = load.other_busy_cpus();
  c.probe_online_cpus = LoadMeter::online_cpus();
  c.probe_host_threads = c.threads;
  if (progress_on) fmt::print(stderr, "probe done in {:.1f}s\n", c.probe_seconds);
  return c;
}

}  // namespace brrr::doctor
