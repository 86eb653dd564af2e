// Ceilings: JSON form, the per-machine cache, and the probe's terminal summary.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "brrr/doctor.hpp"
#include "brrr/error.hpp"
#include "core/env.hpp"
#include "core/machine_load.hpp"
#include "core/file_io.hpp"
#include "core/kernel_cache.hpp"

namespace brrr::doctor {

namespace fs = std::filesystem;
using nlohmann::json;

double Ceilings::per_kernel_overhead_us(const std::string& kind, bool graph_node) const {
  if (backend == "cuda") return graph_node ? graph_node_us : launch_us;
  if (kind == "reference") return dispatch_us;
  return kernel_call_us + fork_join_us;
}

std::vector<CacheLevel> Ceilings::cache_roofs() const {
  if (!cache_levels.empty()) return cache_levels;
  if (cache_bandwidth_gbs > 0 && cache_bytes > 0)
    return {CacheLevel{cache_roof_name(), cache_bytes, cache_bandwidth_gbs}};
  return {};
}

std::string cache_level_label(const std::string& name) {
  return name == "llc" ? "LLC" : name == "l2" ? "L2" : name;
}

double Ceilings::special_per_s(const std::string& fn) const {
  auto it = special_gops.find(fn);
  if (it != special_gops.end() && it->second > 0) return it->second * 1e9;
  // Not probed: price it like the slowest function measured (a conservative floor).
  double slowest = 0;
  for (const auto& [k, v] : special_gops)
    if (v > 0 && (slowest == 0 || v < slowest)) slowest = v;
  return slowest > 0 ? slowest * 1e9 : 1e9;
}

double Ceilings::peak_flops_per_s(const std::string& precision) const {
  auto it = peak_gflops.find(precision);
  if (it != peak_gflops.end() && it->second > 0) return it->second * 1e9;
  return 1e9;
}

namespace {

// Sane bounds: a rate is positive and below any machine's (1e8 GB/s, 1e9 GFLOP/s); a time is
// 0 (not measured on this backend) up to a second.
void check_range(const std::string& what, double v, double lo, double hi) {
  if (!std::isfinite(v) || v < lo || v > hi)
    fail("ceilings: {} = {} is outside [{}, {}]", what, v, lo, hi);
}

void validate_ceilings(const Ceilings& c) {
  BRRR_CHECK(c.threads >= 1 && c.threads <= 1 << 20, "ceilings: threads = {} is not sane",
             c.threads);
  check_range("bandwidth_gbs", c.bandwidth_gbs, 1e-3, 1e8);
  check_range("memcpy_gbs", c.memcpy_gbs, 0, 1e8);
  check_range("cache_bandwidth_gbs", c.cache_bandwidth_gbs, 0, 1e8);
  check_range("cache_bytes", c.cache_bytes, 0, 1e15);
  for (const auto& l : c.cache_levels) {
    BRRR_CHECK(!l.name.empty() && l.name.size() <= 16, "ceilings: a cache level has no short name");
    check_range("cache_levels." + l.name + ".bytes", l.bytes, 1, 1e15);
    check_range("cache_levels." + l.name + ".gbs", l.gbs, 1e-3, 1e8);
  }
  BRRR_CHECK(!c.peak_gflops.empty(), "ceilings: no peak_gflops");
  for (const auto& [k, v] : c.peak_gflops) check_range("peak_gflops." + k, v, 1e-3, 1e9);
  for (const auto& [k, v] : c.library_gflops) check_range("library_gflops." + k, v, 1e-3, 1e9);
  for (const auto& [k, v] : c.special_gops) check_range("special_gops." + k, v, 1e-6, 1e9);
  for (const auto& [k, v] : c.special_scalar_gops)
    check_range("special_scalar_gops." + k, v, 0, 1e9);
  for (const auto& [k, v] : c.datasheet) check_range("datasheet_estimates." + k, v, 0, 1e12);
  const std::pair<const char*, double> times[] = {
      {"dispatch_us", c.dispatch_us},       {"fork_join_us", c.fork_join_us},
      {"kernel_call_us", c.kernel_call_us}, {"launch_us", c.launch_us},
      {"graph_node_us", c.graph_node_us}};
  for (const auto& [k, v] : times) check_range(k, v, 0, 1e6);
  check_range("probe_seconds", c.probe_seconds, 0, 1e6);
  check_range("probe_other_busy_cpus", c.probe_other_busy_cpus, -1, 1 << 20);
  check_range("probe_online_cpus", c.probe_online_cpus, 0, 1 << 20);
  check_range("probe_host_threads", c.probe_host_threads, 0, 1 << 20);
  BRRR_CHECK(c.probed_at.size() <= 64, "ceilings: probed_at is {} characters long",
             c.probed_at.size());
}

// How the probe measures: 2 times the CPU's FMA peaks in thread CPU time (probe_kernels.cpp,
// CpuSpanTimer); 3 adds the CPU's library GEMM per precision (library_gflops); 4 the AMX tile
// loop as the bf16 peak where the CPU has AMX. A cached file from an older method is measured
// again.
constexpr int kProbeMethod = 4;
constexpr int kProbeMethodCuda = 2;  // the GPU probe has not changed since method 2

}  // namespace

json ceilings_to_json(const Ceilings& c) {
  json levels = json::array();
  for (const auto& l : c.cache_levels)
    levels.push_back(json{{"name", l.name}, {"bytes", l.bytes}, {"gbs", l.gbs}});
  return json{{"probe_method", kProbeMethod},
              {"backend", c.backend},
              {"host", c.host},
              {"cpu_model", c.cpu_model},
              {"isa", c.isa},
              {"threads", c.threads},
              {"bandwidth_gbs", c.bandwidth_gbs},
              {"memcpy_gbs", c.memcpy_gbs},
              {"cache_bandwidth_gbs", c.cache_bandwidth_gbs},
              {"cache_bytes", c.cache_bytes},
              {"cache_levels", levels},
              {"peak_gflops", c.peak_gflops},
              {"library_gflops", c.library_gflops},
              {"special_gops", c.special_gops},
              {"special_scalar_gops", c.special_scalar_gops},
              {"dispatch_us", c.dispatch_us},
              {"fork_join_us", c.fork_join_us},
              {"kernel_call_us", c.kernel_call_us},
              {"launch_us", c.launch_us},
              {"graph_node_us", c.graph_node_us},
              {"datasheet_estimates", c.datasheet},
              {"datasheet_note", c.datasheet_note},
              {"probe_seconds", c.probe_seconds},
              {"probed_at", c.probed_at},
              {"probe_other_busy_cpus", c.probe_other_busy_cpus},
              {"probe_online_cpus", c.probe_online_cpus},
              {"probe_host_threads", c.probe_host_threads}};
}

Ceilings ceilings_from_json(const json& j) {
  Ceilings c;
  try {
    c.backend = j.value("backend", "cpu");
    c.host = j.value("host", "");
    c.cpu_model = j.value("cpu_model", "");
    c.isa = j.value("isa", "");
    c.threads = j.value("threads", 1);
    c.bandwidth_gbs = j.at("bandwidth_gbs").get<double>();
    c.memcpy_gbs = j.value("memcpy_gbs", 0.0);
    c.cache_bandwidth_gbs = j.value("cache_bandwidth_gbs", 0.0);
    c.cache_bytes = j.value("cache_bytes", 0.0);
    if (j.contains("cache_levels"))
      for (const auto& l : j.at("cache_levels"))
        c.cache_levels.push_back(CacheLevel{l.at("name").get<std::string>(),
                                            l.at("bytes").get<double>(), l.at("gbs").get<double>()});
    c.peak_gflops = j.at("peak_gflops").get<std::map<std::string, double>>();
    c.library_gflops = j.value("library_gflops", std::map<std::string, double>{});
    c.special_gops = j.value("special_gops", std::map<std::string, double>{});
    c.special_scalar_gops = j.value("special_scalar_gops", std::map<std::string, double>{});
    c.dispatch_us = j.value("dispatch_us", 0.0);
    c.fork_join_us = j.value("fork_join_us", 0.0);
    c.kernel_call_us = j.value("kernel_call_us", 0.0);
    c.launch_us = j.value("launch_us", 0.0);
    c.graph_node_us = j.value("graph_node_us", 0.0);
    c.datasheet = j.value("datasheet_estimates", std::map<std::string, double>{});
    c.datasheet_note = j.value("datasheet_note", "");
    c.probe_seconds = j.value("probe_seconds", 0.0);
    c.probed_at = j.value("probed_at", "");
    c.probe_other_busy_cpus = j.value("probe_other_busy_cpus", -1.0);
    c.probe_online_cpus = j.value("probe_online_cpus", 0);
    c.probe_host_threads = j.value("probe_host_threads", 0);
  } catch (const json::exception& e) {
    fail("ceilings file is malformed: {}", e.what());
  }
  validate_ceilings(c);
  return c;
}

std::string ceilings_cache_path(const std::string& backend) {
  std::string user = env::user_cache_dir();
  fs::path dir = user.empty() ? KernelCache::private_temp_dir() : user;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return (dir / fmt::format("ceilings-{}-{}.json", host, backend)).string();
}

std::optional<Ceilings> cached_ceilings(const std::string& backend, std::string* why) {
  const std::string path = ceilings_cache_path(backend);
  if (!fs::exists(path)) {
    if (why) *why = "none cached";
    return std::nullopt;
  }
  try {
    std::string text;
    BRRR_CHECK(read_regular_file(path, 1 << 20, &text), "not a regular file of at most 1 MiB");
    json j = json::parse(text);
    Ceilings c = ceilings_from_json(j);
    BRRR_CHECK(c.backend == backend, "it holds '{}' ceilings", c.backend);
    const int method = backend == "cuda" ? kProbeMethodCuda : kProbeMethod;
    BRRR_CHECK(j.is_object() && j.value("probe_method", 1) >= method,
               "it was measured by an older probe (method {}, now {})",
               j.is_object() ? j.value("probe_method", 1) : 1, method);
    return c;
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
}

Ceilings load_or_probe(const std::string& backend, bool refresh, bool progress, bool* from_cache,
                       std::string* cache_error) {
  BRRR_CHECK(backend == "cpu" || backend == "cuda",
             "probe: unknown backend '{}' (expected cpu or cuda)", backend);
  std::string path = ceilings_cache_path(backend);
  if (from_cache) *from_cache = false;
  double cached_load = -1;  // >= 0: a cached probe taken under load is being measured again
  if (!refresh && fs::exists(path)) {
    std::string bad;
    if (std::optional<Ceilings> cached = cached_ceilings(backend, &bad)) {
      const Ceilings& c = *cached;
      // A probe that ran on a busy machine measured the contention, not the machine: measure
      // again, unless the machine is no quieter now (a probe now would measure the same load).
      double now = -1;
      if (c.probe_contended()) {
        LoadMeter m;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        now = m.other_busy_cpus();
      }
      if (!c.probe_contended() || now < 0 || now >= c.probe_other_busy_cpus - 0.25) {
        if (from_cache) *from_cache = true;
        return c;
      }
      fmt::print(stderr, "probe: the cached ceilings {} were measured while other processes kept "
                         "{:.1f} CPUs busy ({:.1f} now); measuring again\n",
                 path, c.probe_other_busy_cpus, now);
      cached_load = c.probe_other_busy_cpus;
    } else {
      fmt::print(stderr, "probe: ignoring the cached ceilings {} ({}); measuring again\n", path,
                 bad);
    }
  }
  Ceilings c = backend == "cuda" ? probe_cuda(progress) : probe_cpu(progress);
  // Measured again under no less load than the cached probe: keep the cached file.
  if (cached_load >= 0 && c.probe_other_busy_cpus >= cached_load) return c;
  // Temp file and rename: a concurrent reader never sees half a file, a full disk none at all.
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::string why;
  if (!try_replace_file(path, ceilings_to_json(c).dump(2) + "\n", &why)) {
    fmt::print(stderr, "probe: could not cache the ceilings: {}\n", why);
    if (cache_error) *cache_error = why;
  }
  return c;
}

static std::string render_ceilings_cuda(const Ceilings& c) {
  // Datasheet values are stored in the measured units (GB/s, GFLOP/s); peaks print in TFLOP/s.
  auto est = [&](const std::string& k, double scale = 1) -> std::string {
    auto it = c.datasheet.find(k);
    return it == c.datasheet.end() ? "-" : fmt::format("{:.1f}", it->second / scale);
  };
  std::string s;
  s += fmt::format("Ceilings for {} ({}, {}, {} SMs), measured in {:.1f}s\n", c.host, c.cpu_model,
                   c.isa, c.threads, c.probe_seconds);
  s += fmt::format("  {:<40} {:>16} {:>14}\n", "ceiling", "measured", "datasheet est.");
  s += fmt::format("  {:<40} {:>11.1f} GB/s {:>14}\n", "memory bandwidth (D2D copy, r+w)",
                   c.bandwidth_gbs, est("bandwidth_gbs"));
  if (c.cache_bandwidth_gbs > 0)
    s +=
        fmt::format("  {:<40} {:>11.1f} GB/s {:>14}\n",
                    fmt::format("L2 bandwidth (copy in {:.0f} MiB of L2)", c.cache_bytes / 1048576),
                    c.cache_bandwidth_gbs, "-");
  for (const auto& [prec, v] : c.peak_gflops) {
    std::string unit = prec == "fp32" ? "CUDA-core FMA kernel"
                       : prec.find("gemm") != std::string::npos ? "cuBLASLt, no Tensor Cores"
                                                                : "Tensor Cores, cuBLASLt";
    s += fmt::format("  {:<40} {:>8.1f} TFLOP/s {:>14}\n", "peak " + prec + " (" + unit + ")",
                     v / 1e3, est(prec + "_gflops", 1e3));
  }
  s += "  special functions, G evaluations/s (fp32 CUDA libdevice, +1 FMA each):\n";
  for (const auto& [fn, v] : c.special_gops) s += fmt::format("    {:<6} {:>9.1f}\n", fn, v);
  s += fmt::format("  {:<40} {:>13.3f} us\n", "kernel launch, eager, per kernel", c.launch_us);
  s += fmt::format("  {:<40} {:>13.3f} us\n", "CUDA graph, per node", c.graph_node_us);
  s += fmt::format("  {:<40} {:>13.3f} us\n", "brrr CUDA executor dispatch / kernel",
                   c.dispatch_us);
  for (const char* p : {"fp32", "bf16"})
    if (c.peak_gflops.count(p) && c.bandwidth_gbs > 0)
      s += fmt::format("  ridge point ({}): {:.1f} FLOP/byte\n", p,
                       c.peak_flops_per_s(p) / (c.bandwidth_gbs * 1e9));
  if (!c.datasheet_note.empty()) s += "  datasheet: " + c.datasheet_note + "\n";
  return s;
}

std::string render_ceilings(const Ceilings& c) {
  if (c.backend == "cuda") return render_ceilings_cuda(c);
  auto est = [&](const char* k) -> std::string {
    auto it = c.datasheet.find(k);
    return it == c.datasheet.end() ? "-" : fmt::format("{:.1f}", it->second);
  };
  std::string s;
  s += fmt::format("Ceilings for {} ({}), {} threads, {} kernels, measured in {:.1f}s\n", c.host,
                   c.cpu_model, c.threads, c.isa, c.probe_seconds);
  s += fmt::format("  {:<34} {:>12} {:>14}\n", "ceiling", "measured", "datasheet est.");
  s += fmt::format("  {:<34} {:>9.1f} GB/s {:>14}\n", "memory bandwidth (parallel copy)",
                   c.bandwidth_gbs, "-");
  s += fmt::format("  {:<34} {:>9.1f} GB/s {:>14}   (copy/memcpy = {:.2f})\n",
                   "memory bandwidth (memcpy, 1 thread)", c.memcpy_gbs, "-",
                   c.memcpy_gbs > 0 ? c.bandwidth_gbs / c.memcpy_gbs : 0.0);
  for (const auto& l : c.cache_roofs())
    s += fmt::format("  {:<34} {:>9.1f} GB/s {:>14}\n",
                     fmt::format("{} bandwidth ({:.0f} MiB, {} threads)",
                                 cache_level_label(l.name),
                                 l.bytes / 1048576, c.threads),
                     l.gbs, "-");
  // The bf16 peak is the AMX tile loop's where it beat the vdpbf16ps loop (probe_cpu.cpp).
  const bool amx = c.peak_gflops.count("fp32") && c.peak_gflops.count("bf16") &&
                   c.peak_gflops.at("bf16") > 4 * c.peak_gflops.at("fp32");
  for (const auto& [prec, v] : c.peak_gflops)
    s += fmt::format("  {:<34} {:>6.1f} GFLOP/s {:>14}\n",
                     "peak " + prec + (prec == "bf16" && amx ? " (AMX tiles, all threads)"
                                                             : " (FMA, all threads)"),
                     v, est((prec + "_gflops").c_str()));
  for (const auto& [prec, v] : c.library_gflops)
    s += fmt::format("  {:<34} {:>6.1f} GFLOP/s {:>14}\n", "library GEMM " + prec + " (oneDNN)", v,
                     "-");
  s += fmt::format("  special functions, G evaluations/s (vectorized SLEEF u10 | scalar libm):\n");
  for (const auto& [fn, v] : c.special_gops) {
    auto it = c.special_scalar_gops.find(fn);
    double sc = it == c.special_scalar_gops.end() ? 0 : it->second;
    s += fmt::format("    {:<6} {:>8.2f} | {:>6.2f}   ({:.1f}x)\n", fn, v, sc, sc > 0 ? v / sc : 0);
  }
  s += fmt::format("  {:<34} {:>9.3f} us\n", "reference executor dispatch / op", c.dispatch_us);
  s += fmt::format("  {:<34} {:>9.3f} us\n", "OpenMP fork/join / region", c.fork_join_us);
  s += fmt::format("  {:<34} {:>9.3f} us\n", "kernel call (function pointer)", c.kernel_call_us);
  double ridge = c.peak_flops_per_s("fp32") / (c.bandwidth_gbs * 1e9);
  s += fmt::format("  ridge point (fp32): {:.1f} FLOP/byte\n", ridge);
  if (!c.datasheet_note.empty()) s += "  datasheet: " + c.datasheet_note + "\n";
  return s;
}

}  // namespace brrr::doctor
