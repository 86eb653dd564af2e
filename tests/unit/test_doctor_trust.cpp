// The doctor's trust checks on synthetic profiles: a wide spread between runs, other processes
// busy on the CPUs, and suspect ceilings each make the report say its measurements are
// unreliable, with the reason; a quiet, steady run does not. The load meter itself is checked
// against real CPU hogs in tests/timing/test_doctor_load.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "brrr/doctor.hpp"

using namespace brrr;
using namespace brrr::doctor;

namespace {

Ceilings quiet_ceilings() {
  Ceilings c;
  c.bandwidth_gbs = 100;
  c.peak_gflops = {{"fp32", 1000}, {"bf16", 2000}};
  c.kernel_call_us = 0.1;
  c.fork_join_us = 0.4;
  c.threads = 2;
  c.probe_other_busy_cpus = 0.05;
  c.probed_at = "2026-12-01T15:00:00Z";
  return c;
}

RunProfile steady_profile() {
  RunProfile p;
  p.backend = "cpu";
  p.threads = 2;
  p.online_cpus = 2;
  p.other_busy_cpus = 0.1;
  for (int i = 0; i < 20; ++i) p.wall_samples_ms.push_back(1.0 + 0.01 * (i % 5));
  p.wall_ms = 1.02;
  KernelRecord k;
  k.name = "k0_gemm";
  k.kind = "library";
  k.ops = {"MatMul"};
  k.cls = OpClass::contraction;
  k.cost.flops = 5e8;
  k.cost.bytes = 1e6;
  k.time_ms = 1.0;
  p.kernels = {k};
  return p;
}

}  // namespace

TEST(DoctorTrust, QuietSteadyRunIsReliable) {
  Report r = diagnose(steady_profile(), quiet_ceilings());
  EXPECT_TRUE(r.reliability.reliable);
  EXPECT_TRUE(r.reliability.reasons.empty());
  EXPECT_EQ(r.reliability.samples, 20);
  EXPECT_DOUBLE_EQ(r.reliability.wall_p10_ms, 1.0);
  EXPECT_DOUBLE_EQ(r.reliability.wall_p90_ms, 1.04);
  EXPECT_EQ(r.verdict.advice.find("unreliable"), std::string::npos) << r.verdict.advice;
  EXPECT_NE(render_table(r).find("; reliable"), std::string::npos);
  EXPECT_TRUE(report_json(r)["reliability"]["reliable"].get<bool>());
}

TEST(DoctorTrust, WideSpreadIsUnreliable) {
  RunProfile p = steady_profile();
  for (size_t i = 0; i < p.wall_samples_ms.size(); i += 3) p.wall_samples_ms[i] = 3.0;
  Report r = diagnose(p, quiet_ceilings());
  ASSERT_FALSE(r.reliability.reliable);
  EXPECT_NE(r.reliability.reasons[0].find("p90"), std::string::npos) << r.reliability.reasons[0];
  EXPECT_EQ(r.verdict.advice.rfind("unreliable measurements:", 0), 0u) << r.verdict.advice;
  // The diagnosis as measured is still there, after the warning.
  EXPECT_NE(r.verdict.advice.find("As measured:"), std::string::npos);
  EXPECT_NE(render_table(r).find("UNRELIABLE"), std::string::npos);
  EXPECT_FALSE(report_json(r)["reliability"]["reliable"].get<bool>());
  EXPECT_NE(render_html(r).find("Unreliable"), std::string::npos);
}

TEST(DoctorTrust, OtherProcessesOnTheCpusMakeItUnreliable) {
  RunProfile p = steady_profile();
  p.other_busy_cpus = 1.8;  // two hogs on a 2-CPU machine, brrr on 2 threads
  Report r = diagnose(p, quiet_ceilings());
  ASSERT_FALSE(r.reliability.reliable);
  EXPECT_NE(r.reliability.reasons[0].find("other processes kept 1.8 of 2 CPUs busy"),
            std::string::npos)
      << r.reliability.reasons[0];
  // One thread on a 4-CPU machine with 1.8 CPUs busy elsewhere has room: still reliable.
  p.threads = 1;
  p.online_cpus = 4;
  EXPECT_TRUE(diagnose(p, quiet_ceilings()).reliability.reliable);
  // Not measured (-1) is not a reason.
  p = steady_profile();
  p.other_busy_cpus = -1;
  EXPECT_TRUE(diagnose(p, quiet_ceilings()).reliability.reliable);
}

TEST(DoctorTrust, SuspectCeilingsAreNamed) {
  Ceilings c = quiet_ceilings();
  c.backend = "cuda";
  c.peak_gflops["bf16"] = 80.9;
  c.peak_gflops["fp32"] = 144.6;
  auto w = ceilings_warnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("bf16 peak (80.9 GFLOP/s) is below the fp32 peak (144.6)"),
            std::string::npos)
      << w[0];
  c = quiet_ceilings();
  c.probe_other_busy_cpus = 1.6;
  w = ceilings_warnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("1.6 CPUs busy (2026-12-01T15:00:00Z)"), std::string::npos) << w[0];
  Report r = diagnose(steady_profile(), c);
  ASSERT_FALSE(r.reliability.reliable);
  EXPECT_EQ(r.reliability.reasons[0].rfind("ceilings: ", 0), 0u);
}

// A CPU's bf16 dot-product instruction may run at half its fp32 FMA rate (measured on a quiet
// Xeon with AMX: 104 against 207 GFLOP/s on one thread): not a sign of a disturbed probe, and
// not a reason to call every report on that machine unreliable.
TEST(DoctorTrust, SlowCpuBf16DotLoopIsNotSuspect) {
  Ceilings c = quiet_ceilings();
  ASSERT_EQ(c.backend, "cpu");
  c.peak_gflops["fp32"] = 414.8;
  c.peak_gflops["bf16"] = 207.4;
  EXPECT_TRUE(ceilings_warnings(c).empty());
  EXPECT_TRUE(diagnose(steady_profile(), c).reliability.reliable);
}

// A probe is disturbed when other processes took CPUs it needed, the rule the runs follow: on a
// GPU host of 16 CPUs, an export keeping 1.0 of them busy leaves the probe's one host thread its
// own CPU (this session's H200 reports all said UNRELIABLE for that), while on a 2-CPU machine
// whose probe runs 2 threads 0.6 busy CPUs is contention. Unknown CPU counts (older caches) keep
// the old rule: any 0.5 busy CPUs.
TEST(DoctorTrust, ProbeLoadCountsOnlyWhereItTookCpusTheProbeNeeded) {
  Ceilings gpu = quiet_ceilings();
  gpu.backend = "cuda";
  gpu.peak_gflops = {{"fp32", 60000}, {"bf16", 760000}};
  gpu.probe_other_busy_cpus = 1.0;
  gpu.probe_online_cpus = 16;
  gpu.probe_host_threads = 1;
  EXPECT_FALSE(gpu.probe_contended());
  EXPECT_TRUE(ceilings_warnings(gpu).empty());
  gpu.probe_other_busy_cpus = 15.5;  // every CPU but a quarter of one
  EXPECT_TRUE(gpu.probe_contended());
  EXPECT_EQ(ceilings_warnings(gpu).size(), 1u);

  Ceilings cpu = quiet_ceilings();
  cpu.probe_other_busy_cpus = 0.6;
  cpu.probe_online_cpus = 2;
  cpu.probe_host_threads = 2;
  EXPECT_TRUE(cpu.probe_contended());
  EXPECT_FALSE(diagnose(steady_profile(), cpu).reliability.reliable);
  cpu.probe_host_threads = 1;  // a one-thread probe on two CPUs had one to spare
  EXPECT_FALSE(cpu.probe_contended());
  cpu.probe_other_busy_cpus = 0.3;
  cpu.probe_host_threads = 2;
  EXPECT_FALSE(cpu.probe_contended());

  Ceilings old = quiet_ceilings();  // no CPU counts
  old.probe_other_busy_cpus = 0.6;
  EXPECT_TRUE(old.probe_contended());
  old.probe_other_busy_cpus = 0.4;
  EXPECT_FALSE(old.probe_contended());

  // The counts survive the cache; a cache without them loads as unknown.
  gpu.probe_other_busy_cpus = 1.0;
  Ceilings back = ceilings_from_json(ceilings_to_json(gpu));
  EXPECT_EQ(back.probe_online_cpus, 16);
  EXPECT_EQ(back.probe_host_threads, 1);
  EXPECT_FALSE(back.probe_contended());
  nlohmann::json j = ceilings_to_json(gpu);
  j.erase("probe_online_cpus");
  j.erase("probe_host_threads");
  back = ceilings_from_json(j);
  EXPECT_EQ(back.probe_online_cpus, 0);
  EXPECT_TRUE(back.probe_contended());
  j["probe_online_cpus"] = -3;
  EXPECT_THROW(ceilings_from_json(j), std::exception);
}

TEST(DoctorTrust, CeilingsKeepWhenAndUnderWhatLoad) {
  Ceilings c = quiet_ceilings();
  Ceilings back = ceilings_from_json(ceilings_to_json(c));
  EXPECT_EQ(back.probed_at, c.probed_at);
  EXPECT_DOUBLE_EQ(back.probe_other_busy_cpus, c.probe_other_busy_cpus);
  // A cache written before these fields: unknown, not an error.
  nlohmann::json j = ceilings_to_json(c);
  j.erase("probed_at");
  j.erase("probe_other_busy_cpus");
  back = ceilings_from_json(j);
  EXPECT_EQ(back.probed_at, "");
  EXPECT_DOUBLE_EQ(back.probe_other_busy_cpus, -1);
  j["probe_other_busy_cpus"] = -7;
  EXPECT_THROW(ceilings_from_json(j), std::exception);
}

// The CPU probe's library GEMM rates survive the cache; a cache without them loads with none.
TEST(DoctorTrust, CeilingsKeepTheLibraryGemmRates) {
  Ceilings c = quiet_ceilings();
  c.library_gflops = {{"fp32", 390.5}, {"bf16", 1210.25}};
  Ceilings back = ceilings_from_json(ceilings_to_json(c));
  EXPECT_EQ(back.library_gflops, c.library_gflops);
  nlohmann::json j = ceilings_to_json(c);
  j.erase("library_gflops");
  EXPECT_TRUE(ceilings_from_json(j).library_gflops.empty());
  j["library_gflops"] = {{"bf16", -1.0}};
  EXPECT_THROW(ceilings_from_json(j), std::exception);
}

// The report's kernel times are one run's (the median run by wall time), so they add up to its
// wall; a kernel that spiked in that run says so beside its row, with its median over the runs,
// rather than passing for a slow kernel (ShuffleNet-v2 showed a conv at 0.183 ms, "overhead",
// 0.3% efficient, whose median over the five runs was 0.005 ms). A steady kernel has no note.
TEST(DoctorTrust, AKernelThatSpikedInTheReportedRunSaysSo) {
  RunProfile p = steady_profile();
  p.kernels_in_wall_runs = true;
  p.wall_samples_ms = {1.0, 1.1, 1.2, 1.3, 1.4};
  p.kernels[0].samples_ms = {0.9, 1.0, 1.05, 0.95, 1.0};
  KernelRecord spiky = p.kernels[0];
  spiky.name = "k1_conv";
  spiky.ops = {"Conv"};
  spiky.samples_ms = {0.005, 0.004, 0.183, 0.006, 0.005};  // run 2 is the median run by wall
  p.kernels.push_back(spiky);
  Report r = diagnose(p, quiet_ceilings());
  ASSERT_EQ(r.kernels.size(), 2u);
  EXPECT_DOUBLE_EQ(r.kernels[1].rec.time_ms, 0.183);  // the reported run's time, as the wall's
  EXPECT_TRUE(r.kernels[0].outlier_note.empty()) << r.kernels[0].outlier_note;
  EXPECT_NE(r.kernels[1].outlier_note.find("an outlier in the reported run: median 0.0050 ms over "
                                           "5 runs"),
            std::string::npos)
      << r.kernels[1].outlier_note;
  EXPECT_NE(render_table(r).find("    an outlier in the reported run"), std::string::npos)
      << render_table(r);
  EXPECT_EQ(report_json(r)["kernels"][1]["outlier_note"].get<std::string>(),
            r.kernels[1].outlier_note);
}

// A library kernel that converts its activations' layout inside each run says so under its row,
// in the text, JSON and HTML reports, and a saved profile keeps the note.
TEST(DoctorTrust, AKernelThatConvertsLayoutsInsideSaysSo) {
  RunProfile p = steady_profile();
  p.kernels[0].layout_note = "output nChw16c -> nchw";
  Report r = diagnose(p, quiet_ceilings());
  const std::string line =
      "    converts layouts inside each run: output nChw16c -> nchw (those bytes are in its GB/s "
      "and memory floor)";
  EXPECT_NE(render_table(r).find(line), std::string::npos) << render_table(r);
  EXPECT_EQ(report_json(r)["kernels"][0]["layout_note"].get<std::string>(), "output nChw16c -> nchw");
  EXPECT_NE(render_html(r).find("converts layouts inside each run: output nChw16c -&gt; nchw"),
            std::string::npos);
  EXPECT_EQ(profile_from_json(profile_to_json(p)).kernels[0].layout_note, "output nChw16c -> nchw");
}

// Two threads that got one core's worth of arithmetic (the host runs the two vCPUs on one core's
// SMT siblings, or time-slices them: the load meter sees idle CPUs) make the report unreliable,
// with the figure in the trust line, the JSON and a saved profile; near two cores' worth does not.
TEST(DoctorTrust, ThreadsSharingACoreMakeItUnreliable) {
  RunProfile p = steady_profile();
  p.cpu_capacity = 1.02;
  Report r = diagnose(p, quiet_ceilings());
  EXPECT_FALSE(r.reliability.reliable);
  ASSERT_EQ(r.reliability.reasons.size(), 1u);
  EXPECT_NE(r.reliability.reasons[0].find("1.02 cores' worth"), std::string::npos)
      << r.reliability.reasons[0];
  EXPECT_NE(render_table(r).find("2 threads at 1.02 cores' worth"), std::string::npos);
  EXPECT_DOUBLE_EQ(report_json(r)["reliability"]["cpu_capacity"].get<double>(), 1.02);
  EXPECT_DOUBLE_EQ(profile_from_json(profile_to_json(p)).cpu_capacity, 1.02);

  p.cpu_capacity = 1.93;
  Report ok = diagnose(p, quiet_ceilings());
  EXPECT_TRUE(ok.reliability.reliable) << fmt::format("{}", fmt::join(ok.reliability.reasons, "; "));
  EXPECT_NE(render_table(ok).find("2 threads at 1.93 cores' worth"), std::string::npos);

  p.cpu_capacity = -1;  // not measured (a saved profile from before, a GPU run): no figure
  EXPECT_EQ(render_table(diagnose(p, quiet_ceilings())).find("cores' worth"), std::string::npos);
}

// The measurement itself: one thread is one core's worth by definition; a team's figure is a
// positive share of its size (how much of it, the machine decides).
TEST(DoctorTrust, CpuCapacityIsAShareOfTheTeam) {
  EXPECT_DOUBLE_EQ(cpu_capacity(1), 1.0);
  const double two = cpu_capacity(2);
  EXPECT_GT(two, 0.0);
  EXPECT_LT(two, 3.0);
}
