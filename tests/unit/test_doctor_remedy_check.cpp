// --compare's checks (issue 19, "predictions that miss"): a remedy's prediction is the doctor's
// own from the run without it, set against the run with it; the steady times keep a run that the
// machine preempted in one kernel from deciding the comparison.
#include <gtest/gtest.h>

#include "brrr/doctor.hpp"

using namespace brrr;
using namespace brrr::doctor;

namespace {

Ceilings ceilings() {
  Ceilings c;
  c.bandwidth_gbs = 10;
  c.peak_gflops = {{"fp32", 100}};
  c.kernel_call_us = 0.1;
  c.fork_join_us = 0.4;
  c.threads = 1;
  return c;
}

KernelRecord kernel(const std::string& name, std::vector<double> samples) {
  KernelRecord k;
  k.name = name;
  k.kind = "fused";
  k.ops = {"Relu"};
  k.cls = OpClass::elementwise;
  k.cost.bytes = 8e6;
  k.samples_ms = std::move(samples);
  k.time_ms = k.samples_ms[0];
  return k;
}

// Runs in which kernels took `samples` (per kernel, per run), plus `gap_ms` per run outside them.
RunProfile profile(std::vector<KernelRecord> ks, double gap_ms) {
  RunProfile p;
  p.backend = "cpu";
  p.threads = 1;
  p.online_cpus = 2;
  p.other_busy_cpus = 0.1;
  p.kernels_in_wall_runs = true;
  p.kernels = std::move(ks);
  for (size_t r = 0; r < p.kernels[0].samples_ms.size(); ++r) {
    double w = gap_ms;
    for (const auto& k : p.kernels) w += k.samples_ms[r];
    p.wall_samples_ms.push_back(w);
  }
  std::vector<double> sorted = p.wall_samples_ms;
  std::sort(sorted.begin(), sorted.end());
  p.wall_ms = sorted[sorted.size() / 2];
  return p;
}

}  // namespace

TEST(DoctorRemedyCheck, SteadyTimeIsKernelMediansPlusTheMedianGap) {
  // Three of five runs lost 4 ms to preemption in one kernel or the other: the median wall is a
  // preempted run, the steady time is not.
  RunProfile p = profile({kernel("a", {5, 1, 5, 1, 1}), kernel("b", {1, 5, 1, 1, 1})}, 0.1);
  EXPECT_NEAR(p.wall_ms, 6.1, 1e-9);
  EXPECT_NEAR(steady_ms(p), 2.1, 1e-9);
  // Without per-run samples it is the wall.
  p.kernels_in_wall_runs = false;
  EXPECT_NEAR(steady_ms(p), p.wall_ms, 1e-12);
}

TEST(DoctorRemedyCheck, PredictionIsTheDoctorsFromTheRunWithout) {
  // Two elementwise kernels with an 8 MB intermediate between them, then the two fused.
  KernelRecord a = kernel("k0_relu", {1, 1, 1, 1, 1}), b = kernel("k1_relu", {1, 1, 1, 1, 1});
  a.writes = {{"t", 4e6}};
  b.reads = {{"t", 4e6}};
  RunProfile before = profile({a, b}, 0.05);
  RunProfile after = profile({kernel("k0_fused", {1.2, 1.2, 1.2, 1.2, 1.2})}, 0.05);
  DoctorOptions o;
  o.fused = 0;
  const RemedyCheck k = check_remedy("fusion", "one kernel per op -> fused", before, after,
                                     ceilings(), o);
  double predicted = -1;
  for (const auto& rm : diagnose(before, ceilings(), o).remedies)
    if (rm.name == "fusion") predicted = rm.predicted_ms;
  EXPECT_DOUBLE_EQ(k.predicted_ms, predicted);
  EXPECT_LT(k.predicted_ms, k.before_ms);  // fusion removes the intermediate's write and read
  EXPECT_DOUBLE_EQ(k.before_ms, before.wall_ms);
  EXPECT_DOUBLE_EQ(k.measured_ms, after.wall_ms);
  EXPECT_NEAR(k.measured_steady_ms, 1.25, 1e-9);
  // The steady prediction keeps the same gain.
  EXPECT_NEAR(k.before_steady_ms - k.predicted_steady_ms, k.before_ms - k.predicted_ms, 1e-9);
  EXPECT_EQ(k.action.rfind("drop --no-fusion", 0), 0u) << k.action;
  EXPECT_EQ(k.library_before_ms, 0);  // no library kernel on either side
  EXPECT_EQ(k.library_after_ms, 0);
  EXPECT_TRUE(k.unreliable.empty()) << k.unreliable;
  // A loaded machine on either side is said.
  after.other_busy_cpus = 1.8;
  const RemedyCheck loaded = check_remedy("fusion", "", before, after, ceilings(), o);
  EXPECT_NE(loaded.unreliable.find("with: other processes"), std::string::npos)
      << loaded.unreliable;
}

// On the CPU --precision bf16 reaches oneDNN's convs as well as its GEMMs (the remedy used to
// count GEMMs only, and offered squeezenet1_1, all convs, no gain).
TEST(DoctorRemedyCheck, CpuPrecisionMovesConvsToo) {
  Ceilings c = ceilings();
  c.peak_gflops["bf16"] = 400;
  KernelRecord conv = kernel("k0_conv", {4, 4, 4, 4, 4});
  conv.kind = "library";
  conv.ops = {"Conv"};
  conv.cls = OpClass::contraction;
  conv.cost.flops = 3e8;  // a 3 ms floor at 100 GFLOP/s: compute-bound
  conv.cost.bytes = 1e6;
  RunProfile p = profile({conv}, 0.01);
  DoctorOptions o;
  o.precisions = {"bf16"};
  const Report r = diagnose(p, c, o);
  const Remedy* u = nullptr;
  for (const auto& rm : r.remedies)
    if (rm.name == "faster_units") u = &rm;
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->action, "--precision bf16");
  EXPECT_TRUE(u->applicable);
  EXPECT_GT(u->gain_ms, 0);
  EXPECT_EQ(u->kernels, (std::vector<std::string>{"k0_conv"}));
}

// Where the time moved is measured, not modelled: kernels of both plans sharing an ONNX node form
// one group, and the groups that changed most are named with their steady times (medians).
TEST(DoctorRemedyCheck, MeasuredChangesGroupKernelsByTheirOnnxNodes) {
  KernelRecord mm = kernel("k0_matmul", {3, 3, 3}), div = kernel("k1_div", {1, 1, 1}),
               erf = kernel("k2_erf", {6, 6, 9}), soft = kernel("k3_softmax", {2, 2, 2});
  mm.nodes = {"MatMul_0"};
  div.nodes = {"Div_1"};
  erf.nodes = {"Erf_2"};
  soft.nodes = {"Softmax_3"};
  KernelRecord gelu = kernel("k0_matmul_erf", {4, 4, 4}), soft2 = kernel("k1_softmax", {1.5, 1.5, 1.5});
  gelu.nodes = {"MatMul_0", "Div_1", "Erf_2"};
  soft2.nodes = {"Softmax_3"};
  RunProfile before = profile({mm, div, erf, soft}, 0.01), after = profile({gelu, soft2}, 0.01);
  DoctorOptions o;
  o.fused = 0;
  const RemedyCheck k = check_remedy("fusion", "", before, after, ceilings(), o);
  ASSERT_EQ(k.changes.size(), 2u);
  EXPECT_EQ(k.changes[0], "k0_matmul, k1_div, k2_erf (3 kernels, 10.000 ms) -> k0_matmul_erf "
                          "(4.000 ms)");
  EXPECT_EQ(k.changes[1], "k3_softmax (2.000 ms) -> k1_softmax (1.500 ms)");
  // In every report (the HTML shows checks in its compare section).
  o.compare = &after;
  Report r = diagnose(before, ceilings(), o);
  r.checks = {k};
  EXPECT_NE(render_table(r).find("measured change: " + k.changes[0]), std::string::npos);
  EXPECT_EQ(report_json(r)["checks"][0]["changes"][1], k.changes[1]);
  EXPECT_NE(render_html(r).find("k3_softmax (2.000 ms) -&gt; k1_softmax (1.500 ms)"),
            std::string::npos);
}
