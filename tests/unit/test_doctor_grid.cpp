// The doctor's small-grid diagnosis on synthetic GPU profiles (KernelAnalysis::grid_note,
// small_grids): a GPU kernel under half of its roof whose grid (KernelRecord::grid_ctas, from
// CUPTI's records) has fewer CTAs than the GPU has SMs says how many SMs sat idle; the report
// sums such kernels, and where they are a fifth of the wall the verdict says so. Not for a grid
// that fills the SMs, a kernel near its roof, an untraced kernel or a CPU run.
#include <gtest/gtest.h>

#include "brrr/doctor.hpp"

using namespace brrr;
using namespace brrr::doctor;

namespace {

// An H100 as the probe sees it, rounded: 132 SMs, 3.0 TB/s, bf16 Tensor Cores at 700 TFLOP/s.
Ceilings h100() {
  Ceilings c;
  c.backend = "cuda";
  c.cpu_model = "NVIDIA H100";
  c.threads = 132;
  c.bandwidth_gbs = 3000;
  c.peak_gflops = {{"fp32", 50000}, {"bf16", 700000}, {"tf32", 350000}};
  c.launch_us = 2.0;
  c.graph_node_us = 1.0;
  c.probe_other_busy_cpus = 0.0;
  c.probe_online_cpus = 16;
  c.probe_host_threads = 1;
  c.probed_at = "2026-12-06T01:00:00Z";
  return c;
}

// A bf16 GEMM of `bytes` (mostly weights) in `ms`, launching a grid of `ctas`.
KernelRecord gemm(const std::string& name, double ms, double bytes, int64_t ctas) {
  KernelRecord k;
  k.name = name;
  k.kind = "library";
  k.ops = {"MatMul"};
  k.cls = OpClass::contraction;
  k.precision = "bf16";
  k.graph_node = true;
  k.cost.flops = 2.0 * 128 * 768 * 768;
  k.cost.bytes = bytes;
  k.time_ms = ms;
  k.samples_ms = {ms, ms, ms};
  k.gpu_activities = 1;
  k.grid_ctas = ctas;
  return k;
}

// BERT-base at batch 1, in small: three 128-row GEMMs (1.2 MB of weights at 5.5 us each, about
// 7% of the 3 TB/s roof) on 12, 96 and 264 CTAs, and one GEMM near its roof on 48 CTAs.
RunProfile bert_b1() {
  RunProfile p;
  p.backend = "cuda";
  p.wall_ms = 0.030;
  p.wall_samples_ms = {0.030, 0.030, 0.030, 0.030, 0.030};
  p.kernels_in_wall_runs = true;
  p.online_cpus = 16;
  p.other_busy_cpus = 0.0;
  p.kernels = {gemm("k0_matmul", 0.0055, 1.2e6, 12), gemm("k1_matmul", 0.0055, 1.2e6, 96),
               gemm("k2_matmul", 0.0055, 1.2e6, 264), gemm("k3_matmul", 0.0060, 12e6, 48)};
  for (size_t i = 0; i < p.kernels.size(); ++i) p.kernels[i].start_ms = 0.0065 * double(i);
  return p;
}

const KernelAnalysis& by_name(const Report& r, const std::string& n) {
  for (const auto& k : r.kernels)
    if (k.rec.name == n) return k;
  throw std::runtime_error("no kernel " + n);
}

}  // namespace

TEST(DoctorGrid, KernelsOnFewerCtasThanSmsSayHowManySmsSatIdle) {
  const Report r = diagnose(bert_b1(), h100());
  const KernelAnalysis& k0 = by_name(r, "k0_matmul");
  EXPECT_LT(k0.efficiency, 0.5);
  EXPECT_NE(k0.grid_note.find("12 CTAs on 132 SMs leave 120 SMs idle"), std::string::npos)
      << k0.grid_note;
  EXPECT_NE(k0.grid_note.find("latency"), std::string::npos);
  EXPECT_NE(by_name(r, "k1_matmul").grid_note.find("96 CTAs on 132 SMs leave 36 SMs idle"),
            std::string::npos);
  // A grid that covers the SMs, and a kernel near its roof, are not small-grid kernels.
  EXPECT_TRUE(by_name(r, "k2_matmul").grid_note.empty());
  const KernelAnalysis& k3 = by_name(r, "k3_matmul");
  EXPECT_GE(k3.efficiency, 0.5);
  EXPECT_TRUE(k3.grid_note.empty());

  ASSERT_TRUE(r.grids.has_value());
  EXPECT_EQ(r.grids->kernels, 2);
  EXPECT_NEAR(r.grids->time_ms, 0.011, 1e-9);
  EXPECT_EQ(r.grids->sms, 132);
  ASSERT_EQ(r.grids->worst.size(), 2u);
  EXPECT_NE(r.grids->worst[0].find("CTAs"), std::string::npos);
  // 0.011 of 0.030 ms: over a fifth of the wall, so the verdict says it.
  EXPECT_NE(r.verdict.advice.find("Small grids: 2 kernels (37% of the wall)"), std::string::npos)
      << r.verdict.advice;

  const std::string text = render_table(r);
  EXPECT_NE(text.find("small grid: 12 CTAs on 132 SMs"), std::string::npos);
  EXPECT_NE(text.find("small grids: 2 kernels take 0.011 ms (37% of the wall)"), std::string::npos)
      << text;
  const nlohmann::json j = report_json(r);
  EXPECT_EQ(j.at("small_grids").at("kernels").get<int>(), 2);
  bool found = false;
  for (const auto& kj : j.at("kernels"))
    if (kj.at("name") == "k1_matmul") {
      found = true;
      EXPECT_EQ(kj.at("grid_ctas").get<int64_t>(), 96);
      EXPECT_FALSE(kj.at("grid_note").get<std::string>().empty());
    }
  EXPECT_TRUE(found);
  EXPECT_NE(render_html(r).find("id=\"small-grids\""), std::string::npos);
}

TEST(DoctorGrid, TheGridSurvivesTheProfileFileAndAHostileOneIsClamped) {
  RunProfile p = bert_b1();
  RunProfile q = profile_from_json(profile_to_json(p));
  ASSERT_EQ(q.kernels.size(), p.kernels.size());
  for (size_t i = 0; i < p.kernels.size(); ++i) EXPECT_EQ(q.kernels[i].grid_ctas, p.kernels[i].grid_ctas);
  nlohmann::json j = profile_to_json(p);
  j["kernels"][0]["grid_ctas"] = -5;
  EXPECT_EQ(profile_from_json(j).kernels[0].grid_ctas, 0);
}

TEST(DoctorGrid, NoGridNoteUntracedOnTheCpuOrBelowAFifthInTheVerdict) {
  RunProfile untraced = bert_b1();
  for (auto& k : untraced.kernels) k.grid_ctas = 0;
  const Report u = diagnose(untraced, h100());
  EXPECT_FALSE(u.grids.has_value());
  for (const auto& k : u.kernels) EXPECT_TRUE(k.grid_note.empty());
  EXPECT_EQ(u.verdict.advice.find("Small grids"), std::string::npos);

  // The same records on a CPU backend: threads are threads, not SMs.
  RunProfile cpu = bert_b1();
  cpu.backend = "cpu";
  Ceilings cc = h100();
  cc.backend = "cpu";
  cc.threads = 2;
  cc.peak_gflops = {{"fp32", 200}};
  cc.bandwidth_gbs = 40;
  for (const auto& k : diagnose(cpu, cc).kernels) EXPECT_TRUE(k.grid_note.empty());

  // One small-grid kernel in a long wall: listed in the report, not in the verdict.
  RunProfile longer = bert_b1();
  longer.kernels[1].grid_ctas = 264;
  longer.wall_ms = 0.2;
  longer.wall_samples_ms.assign(5, 0.2);
  const Report l = diagnose(longer, h100());
  ASSERT_TRUE(l.grids.has_value());
  EXPECT_EQ(l.grids->kernels, 1);
  EXPECT_EQ(l.verdict.advice.find("Small grids"), std::string::npos) << l.verdict.advice;
  EXPECT_NE(render_table(l).find("small grids: 1 kernel takes"), std::string::npos);
}

// Overhead that is tiny kernels running far past their fixed cost (ShuffleNet-v2's 16-bit 1x1
// convs on an H100: 23 us each against a 0.8 us graph node and a 0.1 us floor) is their own
// latency: the wall line and the verdict say how much, apart from launches and host gaps; kernels
// near their fixed cost keep the plain sentence.
TEST(DoctorGrid, OverheadSaysWhichPartIsSlowTinyKernels) {
  RunProfile p = bert_b1();
  p.kernels.resize(3);
  for (auto& k : p.kernels) k.cost.flops = 1e6, k.cost.bytes = 2e5, k.time_ms = 0.023, k.samples_ms.assign(3, 0.023);
  p.wall_ms = 0.075;
  p.wall_samples_ms.assign(5, 0.075);
  const Report r = diagnose(p, h100());
  for (const auto& k : r.kernels) ASSERT_EQ(k.regime, Regime::overhead);
  EXPECT_NEAR(r.attribution.slow_ms, 3 * (0.023 - 0.001), 1e-9);
  EXPECT_NE(r.verdict.advice.find("tiny work done slowly inside kernels (0.066 ms"), std::string::npos)
      << r.verdict.advice;
  EXPECT_NE(render_table(r).find("slow tiny kernels beyond their fixed cost 0.066 ms"), std::string::npos);
  EXPECT_NEAR(report_json(r).at("attribution").at("slow_ms").get<double>(), 0.066, 1e-9);
  EXPECT_NE(render_html(r).find("slow tiny kernels beyond their fixed cost 0.066 ms"), std::string::npos);

  // Kernels at 1.5x their 1 us graph-node cost (not past 4x): launches are the story.
  for (auto& k : p.kernels) k.time_ms = 0.0015, k.samples_ms.assign(3, 0.0015);
  p.wall_ms = 0.005;
  p.wall_samples_ms.assign(5, 0.005);
  const Report q = diagnose(p, h100());
  EXPECT_EQ(q.attribution.slow_ms, 0.0);
  EXPECT_NE(q.verdict.advice.find("fixed per-kernel cost and host gaps"), std::string::npos);
  EXPECT_EQ(q.verdict.advice.find("slowly"), std::string::npos) << q.verdict.advice;
}

// Idle time between kernels by boundary (idle_gaps), from the reported run's CUPTI starts: the
// boundaries add up to the class table's "between kernels" row, the longest come first with the
// kernel pair, a library call's several GPU activities are named, and the wall past the last
// kernel's end counts as the run's launch and completion. A CPU run's cumulative starts (no per-run timestamps) have none to show.
TEST(DoctorGrid, IdleGapsNameTheirBoundariesAndAddUpToTheBetweenKernelsRow) {
  RunProfile p = bert_b1();
  // Starts 0, 0.0065, 0.0130, 0.0195 (times 0.0055, 0.0055, 0.0055, 0.0060): 1 us idle after
  // each of the first three; k3 ends at 0.0255, the wall at 0.030: 4.5 us idle at the end.
  p.kernels[3].gpu_activities = 2;
  for (auto& k : p.kernels) k.start_samples_ms.assign(p.wall_samples_ms.size(), k.start_ms);
  const Report r = diagnose(p, h100());
  ASSERT_TRUE(r.gaps.has_value());
  EXPECT_EQ(r.gaps->boundaries, 4);
  EXPECT_NEAR(r.gaps->total_ms, 0.0075, 1e-9);
  double between = 0;
  for (const ClassRow& c : r.classes)
    if (c.cls == kBetweenKernels) between = c.time_ms;
  EXPECT_NEAR(r.gaps->total_ms, between, 1e-9);
  ASSERT_EQ(r.gaps->worst.size(), 3u);
  EXPECT_EQ(r.gaps->worst[0],
            "launch and completion (before k0_matmul, after k3_matmul (2 GPU activities)) 0.0045 ms");
  EXPECT_NE(r.gaps->worst[1].find("_matmul -> k"), std::string::npos) << r.gaps->worst[1];
  EXPECT_NE(r.gaps->worst[1].find(" 0.0010 ms"), std::string::npos) << r.gaps->worst[1];
  const std::string text = render_table(r);
  EXPECT_NE(text.find("idle between kernels: 0.007 ms (25% of the wall) over 4 boundaries"),
            std::string::npos)
      << text;
  EXPECT_EQ(report_json(r)["idle_gaps"]["boundaries"], 4);
  EXPECT_NE(render_html(r).find("id=\"idle-gaps\""), std::string::npos);

  // With CUPTI's names of the activities: demangled, without templates and parameters, long
  // ones cut at 60 characters; they also reach the JSON report and the saved profile.
  RunProfile named = p;
  named.kernels[3].gpu_activity_names = {
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_kernel",
      "_Z19splitKreduce_kernelILi32ELi16EifEvPKT2_i"};
  const Report rn = diagnose(named, h100());
  ASSERT_TRUE(rn.gaps.has_value());
  EXPECT_EQ(rn.gaps->worst[0],
            "launch and completion (before k0_matmul, after k3_matmul (2 GPU activities: "
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x..., splitKreduce_kernel)) "
            "0.0045 ms");
  size_t in_json = 0;
  const nlohmann::json rj = report_json(rn);
  for (const auto& k : rj["kernels"])
    if (k["name"] == "k3_matmul") in_json = k["gpu_activity_names"].size();
  EXPECT_EQ(in_json, 2u);
  EXPECT_EQ(profile_from_json(profile_to_json(named)).kernels[3].gpu_activity_names,
            named.kernels[3].gpu_activity_names);

  RunProfile cpu = bert_b1();  // no per-run starts: nothing said
  EXPECT_FALSE(diagnose(cpu, h100()).gaps.has_value());
  RunProfile tight = p;  // back to back: no idle boundary
  for (size_t i = 0; i < tight.kernels.size(); ++i) {
    tight.kernels[i].start_ms = 0.0055 * double(i);
    tight.kernels[i].start_samples_ms.assign(tight.wall_samples_ms.size(), tight.kernels[i].start_ms);
  }
  tight.wall_ms = 0.0225;
  tight.wall_samples_ms.assign(5, 0.0225);
  tight.kernels[3].time_ms = 0.0060;
  tight.kernels[3].samples_ms.assign(3, 0.0060);
  EXPECT_FALSE(diagnose(tight, h100()).gaps.has_value());
}
