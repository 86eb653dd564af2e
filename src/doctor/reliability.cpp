// Trust: whether the measured runs can carry a diagnosis (spread, machine load, ceilings).
#include <fmt/format.h>


#include "brrr/doctor.hpp"
#include "core/median.hpp"

namespace brrr::doctor {

namespace {

// Runs whose p90 is more than this times their p10 vary too much for a per-kernel diagnosis.
constexpr double kWideSpread = 1.5;
// Threads that get less than this share of a core each cannot run as the plan assumes.
constexpr double kCapacityShare = 0.75;
// Other processes busy on at least this many CPUs, more than the machine had to spare for
// brrr's threads, make every timing a share of a contended machine.
constexpr double kBusyCpus = 0.5;

// Other processes took CPUs that `threads` threads of ours needed: at least kBusyCpus busy, and
// more than the `online` CPUs had to spare (online unknown, <= 0: any kBusyCpus). The one rule
// for the measured runs and for the probe.
bool took_needed_cpus(double other_busy, int threads, int online) {
  if (other_busy < kBusyCpus) return false;
  if (online <= 0 || threads <= 0) return true;
  return other_busy + threads > online + 0.25;
}

}  // namespace

std::vector<std::string> ceilings_warnings(const Ceilings& c) {
  std::vector<std::string> w;
  auto peak = [&](const char* p) {
    auto it = c.peak_gflops.find(p);
    return it == c.peak_gflops.end() ? 0.0 : it->second;
  };
  const double fp32 = peak("fp32");
  // A GPU's Tensor Cores are never slower than its CUDA cores. A CPU's vdpbf16ps loop can be:
  // on the development Xeon (avx512_bf16, no AMX: cpuid and oneDNN agree) it ran at half the
  // fp32 FMA rate, quiet, in thread CPU time (104 against 207 GFLOP/s on one thread), so on the
  // CPU it says nothing about disturbance.
  for (const char* p : {"bf16", "fp16"})
    if (c.backend == "cuda" && peak(p) > 0 && fp32 > 0 && peak(p) < fp32)
      w.push_back(fmt::format("the {} peak ({:.1f} GFLOP/s) is below the fp32 peak ({:.1f}): a "
                              "16-bit unit is never slower, so the probe was disturbed",
                              p, peak(p), fp32));
  if (c.probe_contended())
    w.push_back(fmt::format("the probe ran while other processes kept {:.1f} CPUs busy{}",
                            c.probe_other_busy_cpus,
                            c.probed_at.empty() ? "" : " (" + c.probed_at + ")"));
  auto ds = c.datasheet.find("fp32_gflops");
  if (c.backend == "cpu" && ds != c.datasheet.end() && ds->second > 0 && fp32 > 0 &&
      fp32 < 0.25 * ds->second)
    w.push_back(fmt::format("the fp32 peak ({:.1f} GFLOP/s) is under a quarter of the datasheet "
                            "estimate ({:.1f})",
                            fp32, ds->second));
  return w;
}

bool Ceilings::probe_contended() const {
  return took_needed_cpus(probe_other_busy_cpus, probe_host_threads, probe_online_cpus);
}

Reliability assess_reliability(const RunProfile& p, const Ceilings& c) {
  Reliability r;
  r.samples = int(p.wall_samples_ms.size());
  r.wall_p10_ms = percentile(p.wall_samples_ms, 10);
  r.wall_p90_ms = percentile(p.wall_samples_ms, 90);
  r.other_busy_cpus = p.other_busy_cpus;
  r.online_cpus = p.online_cpus;
  r.threads = p.threads > 0 ? p.threads : 1;
  if (r.samples >= 5 && r.wall_p10_ms > 0 && r.wall_p90_ms > kWideSpread * r.wall_p10_ms)
    r.reasons.push_back(fmt::format("the wall time varies from {:.4f} ms (p10) to {:.4f} ms (p90) "
                                    "over {} runs",
                                    r.wall_p10_ms, r.wall_p90_ms, r.samples));
  if (r.online_cpus > 0 && took_needed_cpus(r.other_busy_cpus, r.threads, r.online_cpus))
    r.reasons.push_back(fmt::format("other processes kept {:.1f} of {} CPUs busy while brrr ran "
                                    "{} thread{}",
                                    r.other_busy_cpus, r.online_cpus, r.threads,
                                    r.threads == 1 ? "" : "s"));
  // The load meter sees processes of this machine, not the host under a VM: two vCPUs that are
  // one core's SMT siblings, or time-sliced, show as idle CPUs. On the 2-CPU development VM they
  // were at times (cpu_capacity 1.00 of 2 in some minutes, 2.00 in others), and mobilenet's runs
  // moved between 0.9 and 1.7 ms with them.
  r.cpu_capacity = p.cpu_capacity;
  if (p.cpu_capacity >= 0 && r.threads > 1 && p.cpu_capacity < kCapacityShare * r.threads)
    r.reasons.push_back(fmt::format(
        "the {} threads together did {:.2f} cores' worth of arithmetic right after the runs "
        "(dedicated cores: {}): the host shares these CPUs (SMT siblings or time slices), so "
        "parallel kernels run slower than the ceilings say and times move between runs",
        r.threads, p.cpu_capacity, r.threads));
  for (const auto& cw : ceilings_warnings(c)) r.reasons.push_back("ceilings: " + cw);
  r.reliable = r.reasons.empty();
  return r;
}

}  // namespace brrr::doctor
