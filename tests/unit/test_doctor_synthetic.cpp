// The doctor on synthetic profiles and fixed ceilings: floors, regimes, attribution, class table,
// batch fit, remedies, compare, and the stable keys of the JSON and trace outputs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "brrr/doctor.hpp"

using namespace brrr;
using namespace brrr::doctor;

namespace {

// Round numbers: 100 GB/s, 1 TFLOP/s fp32, cos at 10 G/s, 2 us dispatch, 0.5 us compiled call.
Ceilings fixed_ceilings() {
  Ceilings c;
  c.bandwidth_gbs = 100;
  c.memcpy_gbs = 90;
  c.peak_gflops = {{"fp32", 1000}, {"fp64", 500}};
  c.special_gops = {{"cos", 10}, {"exp", 20}};
  c.dispatch_us = 2;
  c.kernel_call_us = 0.1;
  c.fork_join_us = 0.4;
  c.threads = 4;
  return c;
}

KernelRecord kernel(const std::string& name, OpClass cls, double flops, double bytes, double ms,
                    const std::string& kind = "reference") {
  KernelRecord k;
  k.name = name;
  k.kind = kind;
  k.ops = {name};
  k.nodes = {name};
  k.cls = cls;
  k.cost.flops = flops;
  k.cost.bytes = bytes;
  k.time_ms = ms;
  return k;
}

}  // namespace

TEST(DoctorRoofline, FloorsEfficiencyAndRegimes) {
  Ceilings c = fixed_ceilings();
  // 2 GFLOP on 12 MB: compute floor 2 ms, memory floor 0.12 ms.
  auto g = analyze_kernel(kernel("gemm", OpClass::contraction, 2e9, 12e6, 4.0), c);
  EXPECT_NEAR(g.compute_floor_ms, 2.0, 1e-9);
  EXPECT_NEAR(g.memory_floor_ms, 0.12, 1e-9);
  EXPECT_NEAR(g.efficiency, 0.5, 1e-9);
  EXPECT_EQ(g.regime, Regime::compute);
  // 400 MB with 100 MFLOP: memory floor 4 ms.
  auto m = analyze_kernel(kernel("add", OpClass::elementwise, 1e8, 4e8, 5.0), c);
  EXPECT_NEAR(m.floor_ms, 4.0, 1e-9);
  EXPECT_EQ(m.regime, Regime::memory);
  // Tiny: 64 bytes in 3 us, below 2x the 2 us dispatch.
  auto o = analyze_kernel(kernel("relu", OpClass::elementwise, 16, 64, 0.003), c);
  EXPECT_EQ(o.regime, Regime::overhead);
  // Slow but tiny work: the ideal time is below the fixed cost, still overhead.
  auto o2 = analyze_kernel(kernel("slow", OpClass::elementwise, 16, 64, 1.0), c);
  EXPECT_EQ(o2.regime, Regime::overhead);
  // The same time for a compiled kernel (0.5 us fixed cost) is not overhead when its floor is big.
  auto f = analyze_kernel(kernel("fused", OpClass::elementwise, 0, 4e5, 0.005, "fused"), c);
  EXPECT_NEAR(f.overhead_ms, 0.0005, 1e-12);
  EXPECT_EQ(f.regime, Regime::memory);
}

TEST(DoctorRoofline, SpecialFunctionsArePricedPerFunction) {
  Ceilings c = fixed_ceilings();
  KernelRecord k = kernel("cos", OpClass::elementwise, 0, 8e6, 1.0, "fused");  // 1M floats
  k.cost.special["cos"] = 1e6;
  EXPECT_NEAR(analyze_kernel(k, c).compute_floor_ms, 0.1, 1e-9);  // 1e6 / 10e9 s
  EXPECT_EQ(analyze_kernel(k, c).regime, Regime::compute);        // 0.1 ms > 0.08 ms
  k.cost.special["cos"] = 0;
  k.cost.special["exp"] = 1e6;
  EXPECT_EQ(analyze_kernel(k, c).regime, Regime::memory);  // 0.05 ms < 0.08 ms
  k.cost.special = {{"erf", 1e6}};                         // not probed: slowest measured
  EXPECT_NEAR(analyze_kernel(k, c).compute_floor_ms, 0.1, 1e-9);
}

TEST(DoctorAttribution, SharesSumToWallAndGapsAreOverhead) {
  Ceilings c = fixed_ceilings();
  RunProfile p;
  p.backend = "reference";
  p.wall_ms = 10;
  p.kernels = {kernel("gemm", OpClass::contraction, 2e9, 12e6, 4.0),
               kernel("add", OpClass::elementwise, 1e8, 4e8, 5.0),
               kernel("relu", OpClass::elementwise, 16, 64, 0.003)};
  Report r = diagnose(p, c);
  const Attribution& a = r.attribution;
  EXPECT_NEAR(a.compute_ms, 4.0, 1e-9);
  EXPECT_NEAR(a.memory_ms, 5.0, 1e-9);
  EXPECT_NEAR(a.gap_ms, 0.997, 1e-9);
  EXPECT_NEAR(a.overhead_ms, 1.0, 1e-9);
  EXPECT_NEAR(a.compute_ms + a.memory_ms + a.overhead_ms, a.wall_ms, 1e-9);
  EXPECT_NEAR(a.share(Regime::compute) + a.share(Regime::memory) + a.share(Regime::overhead), 1.0,
              1e-12);
  EXPECT_EQ(r.verdict.regime, Regime::memory);
  // Kernel time beyond the wall (timing noise on one lane) is scaled, not double counted.
  p.wall_ms = 8;
  Attribution b = attribute(p, r.kernels);
  EXPECT_NEAR(b.compute_ms + b.memory_ms + b.overhead_ms, 8.0, 1e-9);
  EXPECT_EQ(b.gap_ms, 0);
}

TEST(DoctorClassTable, FlopsShareVersusRuntimeShare) {
  Ceilings c = fixed_ceilings();
  std::vector<KernelAnalysis> ks = {
      analyze_kernel(kernel("mm", OpClass::contraction, 998, 10, 6.0), c),
      analyze_kernel(kernel("ln", OpClass::normalization, 1, 10, 3.0), c),
      analyze_kernel(kernel("gelu", OpClass::elementwise, 1, 10, 1.0), c)};
  auto rows = class_table(ks);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].cls, "contraction");
  EXPECT_NEAR(rows[0].flops_share, 0.998, 1e-12);
  EXPECT_NEAR(rows[0].time_share, 0.6, 1e-12);
  EXPECT_NEAR(rows[1].time_share, 0.3, 1e-12);
  EXPECT_EQ(rows[3].kernels, 0);
}

// With the wall, the class table gets a row for the wall outside kernels, and adds up to it.
TEST(DoctorClassTable, BetweenKernelsRowMakesTheWall) {
  Ceilings c = fixed_ceilings();
  std::vector<KernelAnalysis> ks = {
      analyze_kernel(kernel("mm", OpClass::contraction, 998, 10, 6.0), c),
      analyze_kernel(kernel("ln", OpClass::normalization, 1, 10, 3.0), c)};
  auto rows = class_table(ks, 10.0);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[4].cls, kBetweenKernels);
  EXPECT_NEAR(rows[4].time_ms, 1.0, 1e-12);
  double total = 0, share = 0;
  for (const auto& r : rows) total += r.time_ms, share += r.time_share;
  EXPECT_NEAR(total, 10.0, 1e-12);
  EXPECT_NEAR(share, 1.0, 1e-12);
  EXPECT_NEAR(rows[0].time_share, 0.6, 1e-12);
}

// Kernel times come from the run whose wall is reported: medians per kernel would not add up.
TEST(DoctorTimeline, KernelTimesComeFromTheMedianRun) {
  RunProfile p;
  p.backend = "cpu";
  p.kernels_in_wall_runs = true;
  // Run 0: kernel a slow; run 1: kernel b slow; run 2 (the median wall): both quick.
  p.wall_samples_ms = {5.2, 5.3, 2.2};
  p.wall_ms = 5.2;
  auto a = kernel("a", OpClass::elementwise, 0, 8, 1);
  a.samples_ms = {4.0, 1.0, 1.0};
  auto b = kernel("b", OpClass::elementwise, 0, 8, 1);
  b.samples_ms = {1.0, 4.1, 1.1};
  p.kernels = {a, b};
  // Medians are 1.0 and 1.1 against a median wall of 5.2: the run behind the wall is run 0.
  std::string how;
  RunProfile q = one_timeline(p, &how);
  EXPECT_EQ(q.wall_ms, 5.2);
  EXPECT_EQ(q.kernels[0].time_ms, 4.0);
  EXPECT_EQ(q.kernels[1].time_ms, 1.0);
  EXPECT_NE(how.find("median run"), std::string::npos) << how;
  Report r = diagnose(p, fixed_ceilings());
  EXPECT_NEAR(r.attribution.gap_ms, 0.2, 1e-12);
  EXPECT_NEAR(r.classes.back().time_ms, 0.2, 1e-12);
  EXPECT_EQ(r.kernels[0].p10_ms, 1.0);
  EXPECT_EQ(r.kernels[0].p90_ms, 4.0);
  EXPECT_NE(render_table(r).find("1.0000-4.0000"), std::string::npos);
  EXPECT_EQ(report_json(r)["kernels"][0]["p90_ms"], 4.0);
  // Without per-run samples the medians stay, and the timing line says they need not add up.
  p.kernels_in_wall_runs = false;
  RunProfile m = one_timeline(p, &how);
  EXPECT_EQ(m.kernels[0].time_ms, 1.0);
  EXPECT_NE(how.find("need not add up"), std::string::npos) << how;
  // Kernel times of 1.0 + 1.0 against a wall of 1.9: the class table says they exceed it.
  p.wall_ms = 1.9;
  Report apart = diagnose(p, fixed_ceilings());
  EXPECT_NEAR(apart.classes.back().time_ms, -0.1, 1e-12);
  EXPECT_NE(render_table(apart).find("exceed the wall by 0.100 ms"), std::string::npos)
      << render_table(apart);
}

TEST(DoctorBatchScaling, FitRecoversFixedCostAndVerdict) {
  // time = 5 + 0.1 * batch: mostly fixed cost, sublinear growth.
  std::vector<BatchPoint> pts;
  for (int64_t b : {1, 2, 4, 8}) pts.push_back({b, 5 + 0.1 * double(b)});
  BatchScaling s = fit_batch_scaling(pts);
  EXPECT_NEAR(s.fixed_ms, 5, 1e-9);
  EXPECT_NEAR(s.per_item_ms, 0.1, 1e-9);
  EXPECT_TRUE(s.overhead_bound);
  EXPECT_LT(s.growth, 1.2);
  // Linear: no fixed cost.
  pts.clear();
  for (int64_t b : {4, 8, 16, 32}) pts.push_back({b, 2.0 * double(b)});
  s = fit_batch_scaling(pts);
  EXPECT_NEAR(s.fixed_ms, 0, 1e-9);
  EXPECT_FALSE(s.overhead_bound);
  EXPECT_THROW(fit_batch_scaling({{1, 1.0}}), Error);
  EXPECT_THROW(fit_batch_scaling({{2, 1.0}, {2, 3.0}}), Error);
}

namespace {
BatchScaling sweep(double (*t)(double)) {
  std::vector<BatchPoint> pts;
  for (int64_t b : {1, 2, 4, 8}) pts.push_back({b, t(double(b))});
  return fit_batch_scaling(pts);
}
}  // namespace

// Each growth class from synthetic timings, named only when a fit is good, with its quality said.
TEST(DoctorBatchScaling, ClassifiesGrowthWhenAFitIsGood) {
  BatchScaling flat = sweep([](double b) { return 2.0 + 0.002 * b; });
  EXPECT_EQ(flat.growth_class, Growth::flat);
  EXPECT_TRUE(flat.overhead_bound);
  EXPECT_NE(flat.verdict.find("flat, overhead-bound"), std::string::npos) << flat.verdict;
  EXPECT_LT(flat.max_residual, 0.01);

  BatchScaling lin = sweep([](double b) { return 0.5 * b; });
  EXPECT_EQ(lin.growth_class, Growth::linear);
  EXPECT_FALSE(lin.overhead_bound);
  EXPECT_NEAR(lin.r2, 1.0, 1e-12);
  EXPECT_NEAR(lin.exponent, 1.0, 1e-9);
  EXPECT_NE(lin.verdict.find("linear, throughput-bound"), std::string::npos) << lin.verdict;

  BatchScaling sub = sweep([](double b) { return 3.0 + 1.0 * b; });  // 4, 5, 7, 11 ms
  EXPECT_EQ(sub.growth_class, Growth::sublinear);
  EXPECT_TRUE(sub.overhead_bound);  // the fixed 3 ms is 75% of batch 1
  EXPECT_NEAR(sub.fixed_ms, 3.0, 1e-9);

  BatchScaling sup = sweep([](double b) { return 0.1 * b * b; });
  EXPECT_EQ(sup.growth_class, Growth::superlinear);
  EXPECT_NEAR(sup.exponent, 2.0, 1e-9);
  EXPECT_LT(sup.power_max_residual, 1e-9);
  EXPECT_NE(sup.verdict.find("superlinear"), std::string::npos) << sup.verdict;
  EXPECT_FALSE(sup.overhead_bound);
}

// A loaded machine: "537x for 8x the batch" fits neither model, and the sweep says it cannot
// classify, with the fit quality that says why.
TEST(DoctorBatchScaling, BadFitIsNotClassified) {
  // With the load measured during the sweep, the verdict blames it; a classified sweep on a
  // loaded machine says it is unreliable; a quiet one says neither.
  const std::vector<BatchPoint> noisy{{1, 0.5}, {2, 9.0}, {4, 0.6}, {8, 268.5}};
  BatchScaling loaded = fit_batch_scaling(noisy, 1.7, 2);
  EXPECT_NE(loaded.verdict.find("the timings are noise: other processes kept 1.7 of 2 CPUs busy "
                                "during the sweep"),
            std::string::npos)
      << loaded.verdict;
  EXPECT_EQ(loaded.verdict.find("a loaded machine?"), std::string::npos) << loaded.verdict;
  const std::vector<BatchPoint> linear{{1, 1.0}, {2, 2.0}, {4, 4.0}, {8, 8.0}};
  BatchScaling busy = fit_batch_scaling(linear, 0.9, 2);
  EXPECT_EQ(busy.growth_class, Growth::linear);
  EXPECT_NE(busy.verdict.find("(unreliable: other processes kept 0.9 of 2 CPUs busy during the "
                              "sweep)"),
            std::string::npos)
      << busy.verdict;
  EXPECT_EQ(fit_batch_scaling(linear, 0.1, 2).verdict.find("unreliable"), std::string::npos);
  BatchScaling s = fit_batch_scaling(noisy);
  EXPECT_EQ(s.growth_class, Growth::unclassified);
  EXPECT_FALSE(s.overhead_bound);
  EXPECT_GT(s.max_residual, 0.10);
  EXPECT_GT(s.power_max_residual, 0.10);
  EXPECT_NE(s.verdict.find("cannot classify"), std::string::npos) << s.verdict;
  EXPECT_NE(s.verdict.find("R^2"), std::string::npos) << s.verdict;
  EXPECT_EQ(s.verdict.find("overhead-bound"), std::string::npos) << s.verdict;
  EXPECT_EQ(report_json([&] {
              Report r;
              r.batch = s;
              return r;
            }())["batch_scaling"]["growth_class"],
            "unclassified");
}

TEST(DoctorBatchScaling, RunnerIsCalledAtDoublingBatches) {
  RunProfile p;
  p.wall_ms = 1;
  p.kernels = {kernel("k", OpClass::elementwise, 1, 1e8, 1.0)};
  DoctorOptions o;
  std::vector<int64_t> seen;
  o.batch_runner = [&](int64_t b) {
    seen.push_back(b);
    return 3.0 + 0.01 * double(b);
  };
  o.base_batch = 2;
  Report r = diagnose(p, fixed_ceilings(), o);
  EXPECT_EQ(seen, (std::vector<int64_t>{2, 4, 8, 16}));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_TRUE(r.batch->overhead_bound);
  EXPECT_NE(r.verdict.advice.find("Batch scaling"), std::string::npos);
}

namespace {
// x -> relu -> a -> add(a, w) -> b -> exp -> y, all 1M floats (4 MB each): the two intermediates
// a and b each cost a write and a read.
RunProfile elementwise_chain() {
  RunProfile p;
  p.backend = "reference";
  auto k1 = kernel("relu", OpClass::elementwise, 1e6, 8e6, 1.0);
  k1.reads = {{"x", 4e6}};
  k1.writes = {{"a", 4e6}};
  auto k2 = kernel("add", OpClass::elementwise, 1e6, 12e6, 1.0);
  k2.reads = {{"a", 4e6}, {"w", 4e6}};
  k2.writes = {{"b", 4e6}};
  auto k3 = kernel("exp", OpClass::elementwise, 0, 8e6, 1.0);
  k3.reads = {{"b", 4e6}};
  k3.writes = {{"y", 4e6}};
  p.kernels = {k1, k2, k3};
  p.wall_ms = 3.5;
  return p;
}

const Remedy& find(const std::vector<Remedy>& rs, const std::string& n) {
  for (const auto& r : rs)
    if (r.name == n) return r;
  static Remedy none;
  ADD_FAILURE() << "no remedy " << n;
  return none;
}
}  // namespace

TEST(DoctorRemedies, FusionStaticPlanAndFasterUnits) {
  Ceilings c = fixed_ceilings();
  RunProfile p = elementwise_chain();
  Report r = diagnose(p, c);
  const Remedy& f = find(r.remedies, "fusion");
  // a and b (4 MB each) are written and read by kernels that move 8 MB (relu, exp) and 12 MB
  // (add) in 1 ms less their 2 us dispatch: fusion saves the intermediates' share of that work
  // time, not the 0.16 ms the 100 GB/s ceiling implies, and two of the three dispatches.
  const double work = 1.0 - 0.002;
  EXPECT_NEAR(f.gain_ms, work * (4.0 / 8 + 4.0 / 12 + 4.0 / 12 + 4.0 / 8) + 2 * 0.002, 1e-9);
  EXPECT_NE(f.detail.find("16.0 MB"), std::string::npos) << f.detail;
  const Remedy& s = find(r.remedies, "static_plan");
  // 3 dispatches at 2 us, replaced by 0.5 us calls, plus 0.5 ms of gaps.
  EXPECT_NEAR(s.gain_ms, 3 * 0.0015 + 0.5, 1e-9);
  EXPECT_NEAR(s.predicted_ms, 3.5 - s.gain_ms, 1e-9);
  const Remedy& u = find(r.remedies, "faster_units");
  EXPECT_EQ(u.gain_ms, 0);
  EXPECT_NE(u.detail.find("cannot help"), std::string::npos);
  // A graph output with two readers is not an intermediate.
  p.kernels[2].reads.push_back({"a", 4e6});
  EXPECT_NEAR(find(diagnose(p, c).remedies, "fusion").gain_ms,
              work * (4.0 / 12 + 4.0 / 8) + 0.002, 1e-9);
}

// A compiled CPU plan is a static plan already: the remedy is reported in effect, with no gain,
// and the verdict does not offer it.
TEST(DoctorRemedies, StaticPlanInEffectOnACompiledPlan) {
  Ceilings c = fixed_ceilings();
  RunProfile p;
  p.backend = "cpu";
  p.wall_ms = 0.0105;
  for (int i = 0; i < 5; ++i) p.kernels.push_back(kernel("k", OpClass::elementwise, 10, 80, 0.002, "fused"));
  Report r = diagnose(p, c);
  const Remedy& s = find(r.remedies, "static_plan");
  EXPECT_TRUE(s.in_effect);
  EXPECT_EQ(s.gain_ms, 0);
  EXPECT_NE(s.detail.find("in effect"), std::string::npos) << s.detail;
  EXPECT_EQ(r.verdict.regime, Regime::overhead);
  EXPECT_NE(r.verdict.advice.find("static_plan: in effect: the compiled plan is static"),
            std::string::npos)
      << r.verdict.advice;
  // The reference executor dispatches each op: there the remedy is offered.
  p.backend = "reference";
  for (auto& k : p.kernels) k.kind = "reference";
  Report ref = diagnose(p, c);
  const Remedy& s2 = find(ref.remedies, "static_plan");
  EXPECT_FALSE(s2.in_effect);
  EXPECT_GT(s2.gain_ms, 0);
}

// Each kernel a fusion removes takes its fixed cost with it (here a compiled call and a fork/join,
// 0.5 us), not its whole time: three tiny 3 us kernels in a chain fused into one save two calls.
TEST(DoctorRemedies, FusionPricesTheKernelsItRemovesAtTheirFixedCost) {
  Ceilings c = fixed_ceilings();
  RunProfile p;
  p.backend = "cpu";
  const char* names[] = {"x", "a", "b", "y"};
  for (int i = 0; i < 3; ++i) {
    auto k = kernel(names[i + 1], OpClass::elementwise, 0, 8, 0.003, "fused");
    k.reads = {{names[i], 4}};
    k.writes = {{names[i + 1], 4}};
    p.kernels.push_back(k);
  }
  p.wall_ms = 0.009;
  Report r = diagnose(p, c);
  for (const auto& k : r.kernels) ASSERT_EQ(k.regime, Regime::overhead);
  const Remedy& f = find(r.remedies, "fusion");
  const double bytes_ms = 4 * 4 / 100e9 * 1e3;
  EXPECT_NEAR(f.gain_ms, 2 * 0.0005 + bytes_ms, 1e-12);
  EXPECT_NE(f.detail.find("2 kernel calls, about 0.001 ms of fixed per-kernel cost"),
            std::string::npos) << f.detail;
  // A fused plan left these apart and said nothing: brrr cannot fuse them, and says so.
  EXPECT_FALSE(f.applicable);
  EXPECT_EQ(f.action.rfind("brrr cannot do this yet", 0), 0u) << f.action;
  EXPECT_EQ(f.kernels, (std::vector<std::string>{"a", "b", "y"}));
  EXPECT_NE(r.verdict.advice.find(fmt::format("fusion would save about {:.3f} ms", f.gain_ms)),
            std::string::npos)
      << r.verdict.advice;
  // Profiled one kernel per op, the fused plan is one switch away.
  Report off = diagnose(p, c, {.fused = 0});
  const Remedy& f0 = find(off.remedies, "fusion");
  EXPECT_TRUE(f0.applicable);
  EXPECT_NE(f0.action.find("--no-fusion"), std::string::npos) << f0.action;
  EXPECT_NE(off.verdict.advice.find("Do: fusion, drop --no-fusion"), std::string::npos)
      << off.verdict.advice;
}

// Profiled one kernel per op, with the fused plan's kernels given (DoctorOptions::fused_kernels),
// fusion is priced kernel by kernel: a GELU absorbed into its GEMM saves the generated kernels'
// whole time (the library call keeps its measured time); two generated kernels fused become one
// fixed cost plus their bytes at the share of the roof this run's generated kernels reached; a
// conv that joins its activation is priced at most at the library's probed rate (another layout
// and algorithm in the fused plan); an unchanged kernel keeps its time.
TEST(DoctorRemedies, FusionPricesTheFusedPlanKernelByKernel) {
  Ceilings c = fixed_ceilings();
  c.library_gflops = {{"fp32", 500}};
  RunProfile p;
  p.backend = "cpu";
  p.kernels.push_back(kernel("mm", OpClass::contraction, 2e9, 12e6, 2.5, "library"));
  for (const char* n : {"div", "erf", "mul", "add2", "relu2"})
    p.kernels.push_back(kernel(n, OpClass::elementwise, 0, 8e6, 0.2, "fused"));
  p.kernels.push_back(kernel("resh", OpClass::movement, 0, 8e6, 0.05, "copy"));
  p.kernels.push_back(kernel("cv", OpClass::contraction, 1e9, 8e6, 5.0, "library"));
  p.kernels.push_back(kernel("cvrelu", OpClass::elementwise, 0, 8e6, 0.2, "fused"));
  p.wall_ms = 0;
  for (const auto& k : p.kernels) p.wall_ms += k.time_ms;  // 9 kernels, 8.75 ms
  auto planned = [](const std::string& name, const std::string& kind,
                    std::vector<std::string> nodes, std::vector<std::string> ops, double flops) {
    KernelRecord k = kernel(name, OpClass::elementwise, flops, 8e6, 0, kind);
    k.nodes = std::move(nodes);
    k.ops = std::move(ops);
    return k;
  };
  DoctorOptions o;
  o.fused = 0;
  o.fused_kernels = {
      planned("mm_gelu", "library", {"mm", "div", "erf", "mul"}, {"MatMul", "Div", "Erf", "Mul"}, 2e9),
      planned("add_relu", "fused", {"add2", "relu2"}, {"Add", "Relu"}, 0),
      planned("resh", "copy", {"resh"}, {"Reshape"}, 0),
      planned("cv_relu", "library", {"cv", "cvrelu"}, {"Conv", "Relu"}, 1e9)};
  const Report r = diagnose(p, c, o);
  const Remedy& f = find(r.remedies, "fusion");
  // Fixed cost 0.5 us (0.1 us call + 0.4 us fork/join); each generated kernel's 8 MB take 0.08 ms
  // at 100 GB/s of its 0.1995 ms of work: a share of 0.401, so add_relu costs 0.0005 + 0.1995.
  const double mm = 0.6, chain = 0.4 - 0.2, conv = 5.2 - (0.0005 + 1e9 / 500e9 * 1e3);
  EXPECT_NEAR(f.gain_ms, mm + chain + conv, 1e-9) << f.detail;
  EXPECT_TRUE(f.applicable);
  EXPECT_NE(f.detail.find("runs 4 kernels instead of 9"), std::string::npos) << f.detail;
  EXPECT_NE(f.detail.find("40% of their memory roof"), std::string::npos) << f.detail;
  // Without the plan's kernels the estimate counts intermediates, and these records name none.
  const Report bare = diagnose(p, c, {.fused = 0});
  EXPECT_EQ(find(bare.remedies, "fusion").gain_ms, 0);

  // A conv timed alone in the fused plan (the CPU's Session::time_library_kernels_alone) is
  // priced at that time, not its measured call or the probed rate: 1.0 ms with its Relu (its
  // rate price would be 2.0005 ms). A GEMM keeps its measured call even when timed alone (its
  // layout does not change; alone its inputs are not fresh from the kernel before). The
  // generated and copy kernels are priced as before.
  o.fused_kernels[0].samples_ms = {2.8, 2.9, 3.0};
  o.fused_kernels[3].samples_ms = {1.2, 1.0, 0.9};
  const Report timed = diagnose(p, c, o);
  const Remedy& ft = find(timed.remedies, "fusion");
  EXPECT_NEAR(ft.gain_ms, mm + chain + (5.2 - 1.0), 1e-9) << ft.detail;
  EXPECT_NE(ft.detail.find("its 1 library kernels but GEMMs (convs, pools, channel scales, "
                           "attention) timed alone in the fused plan's own layouts and algorithms "
                           "(1.000 ms; the calls of their nodes here took 5.000 ms), GEMMs keep "
                           "their measured time"),
            std::string::npos)
      << ft.detail;
  // An unchanged library call timed alone is priced too: its layout may change with its
  // neighbours' (a lone conv between two fused convs runs blocked).
  RunProfile lone;
  lone.backend = "cpu";
  lone.kernels = {kernel("cv", OpClass::contraction, 1e9, 8e6, 5.0, "library")};
  lone.kernels[0].ops = {"Conv"};
  lone.wall_ms = 5.0;
  DoctorOptions lo;
  lo.fused = 0;
  lo.fused_kernels = {planned("cv", "library", {"cv"}, {"Conv"}, 1e9)};
  EXPECT_EQ(find(diagnose(lone, c, lo).remedies, "fusion").gain_ms, 0);
  lo.fused_kernels[0].samples_ms = {3.0};
  EXPECT_NEAR(find(diagnose(lone, c, lo).remedies, "fusion").gain_ms, 2.0, 1e-9);
}

// A fused attention call of the fused plan (both batched GEMMs, the scale, the mask and the
// softmax in one library call: cuDNN's SDPA or brrr's flash kernel) is another algorithm: with
// its time in the fused plan (the GPU's CUPTI timeline) it is priced at that time, not at its
// GEMMs' measured calls plus the softmax's floor (GPT-2 bf16 b1 on an H100 was predicted at
// 0.639 ms after fusion that way, measured 0.468). Without a time it keeps the old price.
TEST(DoctorRemedies, FusionPricesAFusedAttentionAtItsTimeInTheFusedPlan) {
  Ceilings c = fixed_ceilings();
  c.backend = "cuda";
  c.graph_node_us = 1;
  c.launch_us = 4;
  RunProfile p;
  p.backend = "cuda";
  p.kernels.push_back(kernel("qk", OpClass::contraction, 1e6, 1e5, 0.010, "library"));
  p.kernels.push_back(kernel("scale", OpClass::elementwise, 0, 1e5, 0.003, "fused"));
  p.kernels.push_back(kernel("softmax", OpClass::normalization, 0, 1e5, 0.004, "fused"));
  p.kernels.push_back(kernel("pv", OpClass::contraction, 1e6, 1e5, 0.009, "library"));
  p.kernels[0].ops = {"MatMul"}, p.kernels[3].ops = {"MatMul"};
  p.kernels[1].ops = {"Mul"}, p.kernels[2].ops = {"Softmax"};
  for (auto& k : p.kernels) k.graph_node = true;
  p.wall_ms = 0.026;
  KernelRecord attn = kernel("attention", OpClass::contraction, 2e6, 3e5, 0, "library");
  attn.nodes = {"qk", "scale", "softmax", "pv"};
  attn.ops = {"MatMul", "Mul", "Softmax", "MatMul"};
  attn.graph_node = true;
  DoctorOptions o;
  o.fused = 0;
  o.fused_kernels = {attn};
  const double untimed = find(diagnose(p, c, o).remedies, "fusion").gain_ms;
  o.fused_kernels[0].samples_ms = {0.006, 0.005, 0.007};
  const Report timed = diagnose(p, c, o);
  const Remedy& f = find(timed.remedies, "fusion");
  EXPECT_NEAR(f.gain_ms, 0.026 - 0.006, 1e-9) << f.detail;
  EXPECT_GT(f.gain_ms, untimed + 0.003) << f.detail;
  EXPECT_NE(f.detail.find("attention) timed on its CUPTI timeline"), std::string::npos)
      << f.detail;
  // Idle GPU time between the kernels (0.008 ms here) goes with the boundaries: 4 kernels become
  // 1, so three quarters of it.
  p.wall_ms = 0.034;
  const Report gaps = diagnose(p, c, o);
  const Remedy& g = find(gaps.remedies, "fusion");
  EXPECT_NEAR(g.gain_ms, 0.020 + 0.006, 1e-9) << g.detail;
  EXPECT_NE(g.detail.find("the 0.008 ms of idle GPU time between kernels shrinks with their "
                          "number (-0.006 ms)"),
            std::string::npos)
      << g.detail;
}

// A pointwise op that the fused plan runs in a library call's epilogue (a GELU's Erf after a
// GEMM) loses its bytes and its fixed cost, not its arithmetic: the call is priced at its measured
// time plus the op's compute floor (bert_tiny: predicted 18% faster than measured without it).
TEST(DoctorRemedies, FusionKeepsTheArithmeticOfAnEpilogue) {
  Ceilings c = fixed_ceilings();
  RunProfile p;
  p.backend = "cpu";
  p.kernels.push_back(kernel("mm", OpClass::contraction, 2e9, 12e6, 2.5, "library"));
  p.kernels[0].ops = {"MatMul"};
  p.kernels.push_back(kernel("act", OpClass::elementwise, 0, 8e6, 0.2, "fused"));
  p.kernels[1].cost.special = {{"exp", 1e6}};  // 0.05 ms at the probed 20 G/s
  p.wall_ms = 2.7;
  KernelRecord mm_act = kernel("mm_act", OpClass::contraction, 2e9, 12e6, 0, "library");
  mm_act.nodes = {"mm", "act"};
  mm_act.ops = {"MatMul", "Exp"};
  DoctorOptions o;
  o.fused = 0;
  o.fused_kernels = {mm_act};
  const Report r = diagnose(p, c, o);
  ASSERT_NEAR(r.kernels[1].compute_floor_ms, 0.05, 1e-9);
  EXPECT_NEAR(find(r.remedies, "fusion").gain_ms, 0.2 - 0.05, 1e-9);
}

// One library call of the fused plan for several measured ones (Q/K/V projections merged into
// one GEMM): the slowest call plus the others' floors, not the sum of three fixed latencies.
TEST(DoctorRemedies, FusionPricesAMergedCallAtItsSlowestPartPlusTheOthersFloors) {
  Ceilings c = fixed_ceilings();
  RunProfile p;
  p.backend = "cuda";
  for (const char* n : {"q", "k", "v"}) {
    p.kernels.push_back(kernel(n, OpClass::contraction, 1e6, 1e4, 0.005, "library"));
    p.kernels.back().ops = {"MatMul"};
  }
  p.kernels[2].time_ms = 0.006;
  p.wall_ms = 0.016;
  KernelRecord qkv = kernel("qkv", OpClass::contraction, 3e6, 3e4, 0, "library");
  qkv.nodes = {"q", "k", "v"};
  qkv.ops = {"MatMul"};
  DoctorOptions o;
  o.fused = 0;
  o.fused_kernels = {qkv};
  const Report r = diagnose(p, c, o);
  const Remedy& f = find(r.remedies, "fusion");
  double floors = 0;
  for (const auto& k : r.kernels) floors += k.floor_ms;
  const double each_floor = r.kernels[0].floor_ms;
  ASSERT_GT(each_floor, 0);
  // Before 0.016 ms; after: the slowest call (0.006) plus two floors.
  EXPECT_NEAR(f.gain_ms, 0.016 - (0.006 + 2 * each_floor), 1e-9) << f.detail;
  EXPECT_NEAR(floors, 3 * each_floor, 1e-12);
}

// The plan's boundary reasons travel with the fusion remedy into its action, the text report, the
// JSON and the HTML page.
TEST(DoctorRemedies, FusionActionIsTheBoundaryReason) {
  Ceilings c = fixed_ceilings();
  RunProfile p;
  p.backend = "cpu";
  auto k1 = kernel("k1_gather", OpClass::movement, 0, 8e6, 0.5, "reference");
  k1.nodes = {"/emb/Gather"};
  k1.reads = {{"ids", 4e6}};
  k1.writes = {{"g", 4e6}};
  k1.boundaries = {"-> k2_add via 'g': not fused: Gather runs as a reference kernel"};
  auto k2 = kernel("k2_add", OpClass::elementwise, 1e6, 8e6, 0.5, "fused");
  k2.nodes = {"/emb/Add"};
  k2.reads = {{"g", 4e6}};
  k2.writes = {{"y", 4e6}};
  p.kernels = {k1, k2};
  p.wall_ms = 1.0;
  Report r = diagnose(p, c, {.fused = 1});
  const Remedy& f = find(r.remedies, "fusion");
  EXPECT_FALSE(f.applicable);
  EXPECT_EQ(f.action.rfind("brrr cannot do this yet: not fused: Gather runs as a reference kernel", 0),
            0u)
      << f.action;
  EXPECT_EQ(f.kernels, (std::vector<std::string>{"k1_gather", "k2_add"}));
  EXPECT_EQ(f.nodes, (std::vector<std::string>{"/emb/Gather", "/emb/Add"}));
  ASSERT_EQ(f.boundaries.size(), 1u);
  const std::string reason = "Gather runs as a reference kernel";
  EXPECT_NE(render_table(r).find("boundary: k1_gather -> k2_add via 'g'"), std::string::npos);
  EXPECT_NE(report_json(r)["remedies"][0]["boundaries"][0].get<std::string>().find(reason),
            std::string::npos);
  EXPECT_NE(render_html(r).find(reason), std::string::npos);
}

// The verdict is the remedy table in words: every remedy that gains something is named with its
// own gain, the largest first, and nothing the table does not say.
TEST(DoctorVerdict, IsGeneratedFromTheRemedyTable) {
  Ceilings c = fixed_ceilings();
  c.peak_gflops["bf16"] = 4000;
  RunProfile p = elementwise_chain();
  auto mm = kernel("mm", OpClass::contraction, 2e9, 12e6, 4.0, "library");
  mm.ops = {"MatMul"};
  p.kernels.push_back(mm);
  p.wall_ms += 4.0;
  Report r = diagnose(p, c, {.precisions = {"bf16"}, .fused = 0});
  size_t last = 0;
  std::vector<const Remedy*> by_gain;
  for (const auto& rm : r.remedies) by_gain.push_back(&rm);
  std::stable_sort(by_gain.begin(), by_gain.end(),
                   [](auto* a, auto* b) { return a->gain_ms > b->gain_ms; });
  for (const Remedy* rm : by_gain) {
    if (rm->gain_ms <= 0) continue;
    size_t at = r.verdict.advice.find(fmt::format("{}, {}: saves about {:.3f} ms", rm->name,
                                                  rm->action, rm->gain_ms));
    ASSERT_NE(at, std::string::npos) << rm->name << ": " << r.verdict.advice;
    EXPECT_GE(at, last) << "not in gain order: " << r.verdict.advice;
    last = at;
  }
  EXPECT_EQ(r.verdict.advice.find("Nothing brrr offers"), std::string::npos);
}

// On the GPU the plan at bf16 is timed on its own timeline, every kernel: a float32 GEMM and the
// generated GELU kernel after it are one GEMM with a GELU epilogue at bf16, priced together at its
// time there (left to the rates, GPT-2 fp32's prediction at bf16 was 22% over on an H100). A GEMM
// without a timed twin keeps the rates, its memory floor at 16-bit bytes: half of float32's.
TEST(DoctorRemedies, GpuFasterUnitsPricesAGemmAndItsGeluByTheirOneKernelAtBf16) {
  Ceilings c = fixed_ceilings();
  c.backend = "cuda";
  c.graph_node_us = 1;
  c.peak_gflops["bf16"] = 16000;
  RunProfile p;
  p.backend = "cuda";
  auto gemm = kernel("k0_matmul", OpClass::contraction, 2e6, 1e5, 0.020, "library");
  gemm.ops = {"MatMul"};
  gemm.nodes = {"mm"};
  auto gelu = kernel("k1_gelu", OpClass::elementwise, 0, 1e5, 0.005, "fused");
  gelu.nodes = {"gelu"};
  // 4 MB at 100 GB/s: memory-bound at either precision, 0.04 ms of floor at float32 bytes.
  auto gemm2 = kernel("k2_matmul", OpClass::contraction, 2e6, 4e6, 0.1, "library");
  gemm2.ops = {"MatMul"};
  gemm2.nodes = {"mm2"};
  for (KernelRecord* k : {&gemm, &gelu, &gemm2}) k->graph_node = true;
  p.kernels = {gemm, gelu, gemm2};
  p.wall_ms = 0.125;
  DoctorOptions o{.precisions = {"bf16"}};
  auto gemm_gelu16 = kernel("k0_matmul_gelu", OpClass::contraction, 2e6, 5e4, 0, "library");
  gemm_gelu16.ops = {"MatMul", "Gelu"};
  gemm_gelu16.nodes = {"mm", "gelu"};
  gemm_gelu16.precision = "bf16";
  gemm_gelu16.samples_ms = {0.004, 0.005, 0.003};
  o.unit_kernels["bf16"] = {gemm_gelu16};
  const Report r = diagnose(p, c, o);
  ASSERT_EQ(r.kernels.size(), 3u);
  ASSERT_EQ(r.kernels[2].regime, Regime::memory);
  const double work2 = 0.1 - r.kernels[2].overhead_ms;
  const Remedy& u = find(r.remedies, "faster_units");
  EXPECT_NEAR(u.gain_ms, (0.025 - 0.004) + work2 * 0.5, 1e-9) << u.detail;
  EXPECT_NE(u.detail.find("1 generated kernel takes 0.005 -> 0.001 ms there, timed alone"),
            std::string::npos)
      << u.detail;
}

// A 16-bit model's library GEMMs already run at its precision: faster units have nothing to
// move, and say so, instead of calling them generated kernels that compute in fp32.
TEST(DoctorRemedies, FasterUnitsOnA16BitModelMovesNothing) {
  Ceilings c = fixed_ceilings();
  c.peak_gflops["bf16"] = 4000;
  RunProfile p;
  p.backend = "cuda";
  p.wall_ms = 4.5;
  auto gemm = kernel("gemm", OpClass::contraction, 2e9, 12e6, 4.0, "library");
  gemm.ops = {"Gemm", "Mul", "Tanh"};
  gemm.precision = "bf16";
  auto gen = kernel("gen", OpClass::contraction, 1e8, 1e3, 0.5, "fused");
  // A memory-bound kernel of a 16-bit model already stores 16 bits: no bytes to halve.
  auto ln = kernel("ln", OpClass::normalization, 1e3, 8e6, 0.2, "fused");
  p.kernels = {gemm, gen, ln};
  p.wall_ms = 4.7;
  Report r = diagnose(p, c, {.precisions = {"bf16"}});
  const Remedy& u = find(r.remedies, "faster_units");
  EXPECT_EQ(u.gain_ms, 0) << u.detail;
  EXPECT_EQ(u.detail.find("store 16 bits"), std::string::npos) << u.detail;
  EXPECT_FALSE(u.applicable);
  EXPECT_NE(u.detail.find("no float32 library GEMM or conv to move"), std::string::npos) << u.detail;
  EXPECT_NE(u.detail.find("1 library GEMM and conv (4.000 ms) already runs in bf16"),
            std::string::npos)
      << u.detail;
  EXPECT_EQ(u.detail.find("0 library kernels"), std::string::npos) << u.detail;
  // Not an action: the verdict names no --precision flag for it.
  EXPECT_EQ(u.action.rfind("none", 0), 0u) << u.action;
  EXPECT_NE(r.verdict.advice.find("faster_units: no float32 library GEMM"), std::string::npos)
      << r.verdict.advice;
  EXPECT_EQ(r.verdict.advice.find("but --precision"), std::string::npos) << r.verdict.advice;
  // The generated kernel is the only one said to compute in fp32.
  EXPECT_NE(u.detail.find("1 compute-bound kernel that is not library GEMMs or convs (0.500 ms)"),
            std::string::npos)
      << u.detail;
}

// --precision moves library GEMMs to the fastest measured unit the backend accepts; a GEMM keeps
// its fixed cost and its share of the roof, and a backend that accepts no precision gets none.
TEST(DoctorRemedies, FasterUnitsUsesFastestAcceptedPrecision) {
  Ceilings c = fixed_ceilings();
  c.peak_gflops["bf16"] = 4000;
  c.peak_gflops["tf32"] = 2000;
  RunProfile p;
  p.backend = "cuda";
  p.wall_ms = 4.5;
  auto gemm = kernel("gemm", OpClass::contraction, 2e9, 12e6, 4.0, "library");
  gemm.ops = {"MatMul"};
  auto gen = kernel("gen", OpClass::contraction, 1e8, 1e3, 0.5, "fused");  // generated: fp32
  p.kernels = {gemm, gen};
  Report r = diagnose(p, c, {.precisions = {"tf32", "bf16"}});
  const Remedy& u = find(r.remedies, "faster_units");
  // 2 ms of floor at 50% efficiency; bf16 cuts the floor to 0.5 ms: the work (4 ms less the
  // fixed cost) scales by 0.25, the fixed cost stays, the generated kernel is not touched.
  const double fixed = r.kernels[0].overhead_ms;
  EXPECT_NEAR(u.gain_ms, (4.0 - fixed) * 0.75, 1e-9);
  EXPECT_EQ(u.action, "--precision bf16");
  EXPECT_TRUE(u.applicable);
  EXPECT_EQ(u.kernels, (std::vector<std::string>{"gemm"}));
  EXPECT_NE(u.detail.find("not library GEMMs"), std::string::npos) << u.detail;
  EXPECT_EQ(r.verdict.regime, Regime::compute);
  // A float32 library conv moves with the model to 16 bits (cuDNN's bf16 convs) like the GEMM;
  // at tf32 it takes TF32 math: at 2 TFLOP/s the 2 ms floors halve.
  auto conv = gemm;
  conv.name = "conv";
  conv.ops = {"Conv"};
  p.kernels.push_back(conv);
  p.wall_ms += 4.0;
  Report rc = diagnose(p, c, {.precisions = {"bf16"}});
  EXPECT_NEAR(find(rc.remedies, "faster_units").gain_ms, (4.0 - fixed) * (0.75 + 0.75), 1e-9);
  Report rt = diagnose(p, c, {.precisions = {"tf32"}});
  EXPECT_NEAR(find(rt.remedies, "faster_units").gain_ms, (4.0 - fixed) * (0.5 + 0.5), 1e-9);
  p.kernels.pop_back();
  p.wall_ms -= 4.0;
  // The CPU's validation accepts no precision: no faster unit, and the action says why.
  p.backend = "cpu";
  Report cpu = diagnose(p, c, {.precision_refusal = "--precision bf16 needs --backend cuda"});
  const Remedy& u2 = find(cpu.remedies, "faster_units");
  EXPECT_EQ(u2.gain_ms, 0);
  EXPECT_FALSE(u2.applicable);
  EXPECT_EQ(u2.action, "not on the cpu backend: --precision bf16 needs --backend cuda");
  EXPECT_EQ(cpu.verdict.advice.find("a library GEMM"), std::string::npos) << cpu.verdict.advice;
  EXPECT_NE(cpu.verdict.advice.find("Nothing brrr offers"), std::string::npos) << cpu.verdict.advice;
}

// A CUDA bf16 model: its GEMMs and its fused attention kernels (library kernels whose ops include
// MatMul) already run in 16 bits, which their records say (the CUDA executor writes each step's
// precision), so --precision moves nothing and predicts no gain; a float32 attention would move.
TEST(DoctorRemedies, SixteenBitLibraryKernelsAreNotMovedByPrecision) {
  Ceilings c = fixed_ceilings();
  c.peak_gflops["bf16"] = 4000;
  c.peak_gflops["fp16"] = 4000;
  RunProfile p;
  p.backend = "cuda";
  p.wall_ms = 8.0;
  auto attn = kernel("attention", OpClass::contraction, 2e9, 12e6, 4.0, "library");
  attn.ops = {"Reshape", "MatMul", "Softmax", "MatMul"};
  attn.precision = "bf16";
  auto gemm = kernel("gemm", OpClass::contraction, 2e9, 12e6, 4.0, "library");
  gemm.ops = {"MatMul"};
  gemm.precision = "bf16";
  p.kernels = {attn, gemm};
  Report r = diagnose(p, c, {.precisions = {"bf16", "fp16"}});
  const Remedy& u = find(r.remedies, "faster_units");
  EXPECT_EQ(u.gain_ms, 0) << u.detail;
  EXPECT_TRUE(u.kernels.empty()) << u.detail;
  p.kernels[0].precision = "fp32";
  Report f = diagnose(p, c, {.precisions = {"bf16"}});
  EXPECT_EQ(find(f.remedies, "faster_units").kernels, (std::vector<std::string>{"attention"}));
}

TEST(DoctorCompare, PredictedVersusMeasured) {
  Ceilings c = fixed_ceilings();
  RunProfile before = elementwise_chain();
  RunProfile after;
  after.backend = "cpu";
  after.wall_ms = 0.3;
  after.kernels = {kernel("fused_relu_add_exp", OpClass::elementwise, 2e6, 16e6, 0.3, "fused")};
  DoctorOptions o;
  o.compare = &after;
  o.applied = {"fusion"};
  Report r = diagnose(before, c, o);
  ASSERT_TRUE(r.after.has_value());
  EXPECT_NEAR(r.after->wall_ms, 0.3, 1e-12);
  const Remedy& f = find(r.remedies, "fusion");
  ASSERT_TRUE(f.measured_ms.has_value());
  EXPECT_NEAR(*f.measured_ms, 0.3, 1e-12);
  const Remedy& a = find(r.remedies, "applied");
  EXPECT_NEAR(a.predicted_ms, 3.5 - f.gain_ms, 1e-9);
  EXPECT_NE(render_table(r).find("after (compare profile, cpu)"), std::string::npos);
}

TEST(DoctorOutputs, JsonKeysAreStable) {
  Report r = diagnose(elementwise_chain(), fixed_ceilings(), {.model = "m.onnx"});
  nlohmann::json j = report_json(r);
  for (const char* k : {"model", "backend", "wall_ms", "shares", "kernels", "ceilings",
                        "class_table", "batch_scaling", "remedies", "verdict"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"compute", "memory", "overhead"}) EXPECT_TRUE(j["shares"].contains(k)) << k;
  ASSERT_EQ(j["kernels"].size(), 3u);
  for (const char* k : {"name", "ops", "class", "flops", "bytes", "time_ms", "floor_ms",
                        "efficiency", "regime", "fused_from"})
    EXPECT_TRUE(j["kernels"][0].contains(k)) << k;
  for (const char* k : {"name", "predicted_ms", "measured_ms", "in_effect"})
    EXPECT_TRUE(j["remedies"][0].contains(k)) << k;
  EXPECT_TRUE(j["verdict"].contains("regime"));
  EXPECT_TRUE(j["verdict"].contains("advice"));
  EXPECT_EQ(j["model"], "m.onnx");
}

TEST(DoctorOutputs, TraceHasOneCompleteEventPerKernel) {
  RunProfile p = elementwise_chain();
  p.kernels[1].lane = 1;
  nlohmann::json t = trace_json(diagnose(p, fixed_ceilings()));
  int x = 0, names = 0;
  double last_end = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "X") {
      ++x;
      EXPECT_TRUE(e["args"].contains("flops"));
      EXPECT_TRUE(e["args"].contains("bytes"));
      EXPECT_TRUE(e["args"].contains("regime"));
      EXPECT_TRUE(e["args"].contains("efficiency"));
      EXPECT_GE(e["ts"].get<double>(), last_end - 1e-9);  // laid out in order
      last_end = e["ts"].get<double>() + e["dur"].get<double>();
    }
    if (e["ph"] == "M" && e["name"] == "thread_name") ++names;
  }
  EXPECT_EQ(x, 3);
  EXPECT_EQ(names, 2);
}

TEST(DoctorOutputs, ProfileAndCeilingsRoundTripThroughJson) {
  RunProfile p = elementwise_chain();
  p.kernels[0].cost.special["cos"] = 7;
  RunProfile q = profile_from_json(profile_to_json(p));
  ASSERT_EQ(q.kernels.size(), 3u);
  EXPECT_EQ(q.kernels[1].reads.size(), 2u);
  EXPECT_EQ(q.kernels[0].cost.special.at("cos"), 7);
  EXPECT_EQ(q.wall_ms, p.wall_ms);
  Ceilings c = fixed_ceilings();
  Ceilings d = ceilings_from_json(ceilings_to_json(c));
  EXPECT_EQ(d.peak_gflops, c.peak_gflops);
  EXPECT_EQ(d.dispatch_us, c.dispatch_us);
  EXPECT_THROW(ceilings_from_json(nlohmann::json::object()), Error);
  EXPECT_THROW(profile_from_json(nlohmann::json{{"kernels", 3}}), Error);
}

// On the CPU `--precision bf16` moves GEMMs and convs to oneDNN's bf16 kernels, which run on one
// unit (AMX tiles on a Xeon that has them, else vdpbf16ps): both are priced at the library GEMM
// rates the probe measured, not at the peak loops (the AMX tile loop's peak is 14x the fp32 FMA
// loop's on two Sapphire Rapids cores; oneDNN's bf16 GEMM 6.5x its fp32 one). Where the bf16
// library rate is below fp32's (no AMX), they cost more (a negative share).
TEST(DoctorRemedies, CpuBf16PricesGemmsAndConvsAtTheLibraryRate) {
  Ceilings c = fixed_ceilings();
  c.peak_gflops["bf16"] = 14000;  // the tile loop: not what either kernel reaches
  c.library_gflops = {{"fp32", 800}, {"bf16", 3200}};
  RunProfile p;
  p.backend = "cpu";
  auto gemm = kernel("gemm", OpClass::contraction, 2e9, 12e6, 5.0, "library");
  gemm.ops = {"MatMul"};
  auto conv = kernel("conv", OpClass::contraction, 1e9, 1e6, 2.0, "library");
  conv.ops = {"Conv"};
  p.kernels = {gemm, conv};
  p.wall_ms = 7.0;
  Report r = diagnose(p, c, {.precisions = {"bf16"}});
  const Remedy& u = find(r.remedies, "faster_units");
  const double fixed = r.kernels[0].overhead_ms;
  // Each keeps a quarter of its work (the library's rate ratio), and pays one more fixed cost:
  // casting its activations to bf16 (a second oneDNN call).
  const double gemm_gain = (5.0 - fixed) * 0.75 - fixed, conv_gain = (2.0 - fixed) * 0.75 - fixed;
  EXPECT_NEAR(u.gain_ms, gemm_gain + conv_gain, 1e-9);
  EXPECT_NEAR(u.predicted_ms, 7.0 - (gemm_gain + conv_gain), 1e-9);
  EXPECT_EQ(u.action, "--precision bf16");
  EXPECT_TRUE(u.applicable);
  EXPECT_EQ(u.kernels, (std::vector<std::string>{"gemm", "conv"}));
  EXPECT_NE(u.detail.find("library GEMM rate measured at bf16 (3200.0 GFLOP/s against 800.0"),
            std::string::npos)
      << u.detail;
  EXPECT_EQ(u.detail.find("peak loop"), std::string::npos) << u.detail;
  // A CPU whose bf16 library rate is half its fp32 one (vdpbf16ps, no AMX): a conv-only model
  // is predicted slower; the precision is still named (so --compare checks it), not offered.
  c.library_gflops = {{"fp32", 800}, {"bf16", 400}};
  const double conv_loss = (2.0 - fixed) * (1 - 2.0) - fixed;
  p.kernels = {conv};
  p.wall_ms = 2.0;
  Report rc = diagnose(p, c, {.precisions = {"bf16"}});
  const Remedy& uc = find(rc.remedies, "faster_units");
  EXPECT_NEAR(uc.gain_ms, conv_loss, 1e-9);
  EXPECT_GT(uc.predicted_ms, 2.0);
  EXPECT_EQ(uc.action, "--precision bf16");
  EXPECT_FALSE(uc.applicable);
  EXPECT_EQ(rc.verdict.advice.find("Do: faster_units"), std::string::npos) << rc.verdict.advice;
  EXPECT_NE(uc.detail.find("1 of them runs slower there"), std::string::npos) << uc.detail;
  // The verdict says it is a loss, with the remedy table's numbers.
  EXPECT_NE(rc.verdict.advice.find(fmt::format(
                "faster_units: not --precision bf16: predicted {:.3f} ms slower (2.000 -> {:.3f} ms;",
                -conv_loss, uc.predicted_ms)),
            std::string::npos)
      << rc.verdict.advice;
  // With the plan at bf16 timed alone (the CPU CLI's unit_kernels), each moved kernel is priced
  // at its own time there, casts included: no rate, no extra fixed cost; a kernel without a
  // timed twin keeps the rate price.
  c.library_gflops = {{"fp32", 800}, {"bf16", 3200}};
  p.kernels = {gemm, conv};
  p.wall_ms = 7.0;
  DoctorOptions timed{.precisions = {"bf16"}};
  KernelRecord gemm_bf16 = gemm, conv_bf16 = conv;
  gemm_bf16.samples_ms = {1.1, 1.0, 0.9};
  conv_bf16.samples_ms = {3.0};
  timed.unit_kernels["bf16"] = {gemm_bf16, conv_bf16};
  const Report rt = diagnose(p, c, timed);
  const Remedy& ut = find(rt.remedies, "faster_units");
  EXPECT_NEAR(ut.gain_ms, (5.0 - 1.0) + (2.0 - 3.0), 1e-9) << ut.detail;
  EXPECT_NE(ut.detail.find("2 library kernels (7.000 ms) at 2 timed alone in the plan at "
                           "--precision bf16 (4.000 ms; 7.000 ms here); 1 of them runs slower "
                           "there (+1.000 ms)"),
            std::string::npos)
      << ut.detail;
  timed.unit_kernels["bf16"] = {gemm_bf16};
  const Report rh = diagnose(p, c, timed);
  const Remedy& half = find(rh.remedies, "faster_units");
  EXPECT_NEAR(half.gain_ms, (5.0 - 1.0) + conv_gain, 1e-9) << half.detail;
  EXPECT_NE(half.detail.find("1 timed alone in the plan at --precision bf16 (1.000 ms; 5.000 ms "
                             "here), the others at the library GEMM rate measured at bf16"),
            std::string::npos)
      << half.detail;
}

// The plan at bf16 need not have the same kernels: a conv that fp32's plan splits over a Concat
// ("<node>/part<i>" and "/sum<i>", distribute_concat) is one conv there; a pool it does not move
// reads bf16 data there at its own speed; a Concat it copies is a kernel fp32's plan did not run.
// All are priced by their times alone there (squeezenet1_1 at bf16: the rate-priced split convs
// and the unpriced pools and copies had it predicted 1.11 ms, measured 1.45 ms).
TEST(DoctorRemedies, CpuBf16PricesThePlanAtBf16KernelsByTheNodesTheyCover) {
  Ceilings c = fixed_ceilings();
  c.library_gflops = {{"fp32", 800}, {"bf16", 3200}};
  RunProfile p;
  p.backend = "cpu";
  auto part0 = kernel("k0_conv", OpClass::contraction, 1e9, 1e6, 1.0, "library");
  part0.ops = {"Conv"};
  part0.nodes = {"/squeeze/Conv/part0"};
  auto part1 = kernel("k1_conv_relu", OpClass::contraction, 1e9, 1e6, 3.0, "library");
  part1.ops = {"Conv", "Add", "Relu"};
  part1.nodes = {"/squeeze/Conv/part1", "/squeeze/Conv/sum1", "/squeeze/Relu"};
  auto pool = kernel("k2_maxpool", OpClass::normalization, 0, 4e6, 0.5, "library");
  pool.ops = {"MaxPool"};
  auto relu = kernel("k3_relu", OpClass::elementwise, 0, 1e6, 0.05, "fused");
  p.kernels = {part0, part1, pool, relu};
  p.wall_ms = 4.55;
  DoctorOptions o{.precisions = {"bf16"}};
  auto conv16 = kernel("k0_conv_relu", OpClass::contraction, 2e9, 1e6, 0, "library");
  conv16.ops = {"Conv", "Relu"};
  conv16.nodes = {"/squeeze/Conv", "/squeeze/Relu"};
  conv16.samples_ms = {1.0};
  auto pool16 = pool, concat16 = kernel("k5_concat", OpClass::movement, 0, 1e6, 0, "library");
  pool16.samples_ms = {0.75};
  concat16.samples_ms = {0.125};
  // A generated kernel is not timed alone: it is priced as the profile's generated kernels ran
  // (this cast moves the Relu's bytes: the Relu's 0.05 ms).
  auto cast16 = kernel("k6_cast", OpClass::elementwise, 0, 1e6, 0, "fused");
  // The generated Relu timed alone there, on bf16 data: its time there.
  auto relu16 = relu;
  relu16.samples_ms = {0.025};
  o.unit_kernels["bf16"] = {conv16, pool16, concat16, cast16, relu16};
  const Report r = diagnose(p, c, o);
  const Remedy& u = find(r.remedies, "faster_units");
  // The two parts share the conv's 1.0 ms in proportion (0.25 and 0.75); the pool is 0.25 ms
  // slower; the copy adds 0.125 ms and the cast 0.05 ms; the Relu saves 0.025 ms.
  EXPECT_NEAR(u.gain_ms, (4.0 - 1.0) - 0.25 - 0.125 - 0.05 + 0.025, 1e-9) << u.detail;
  EXPECT_NEAR(u.predicted_ms, 4.55 - 2.6, 1e-9);
  EXPECT_NE(u.detail.find("2 library kernels (4.000 ms) at 2 timed alone in the plan at "
                          "--precision bf16 (1.000 ms; 4.000 ms here)"),
            std::string::npos)
      << u.detail;
  EXPECT_NE(u.detail.find("1 other library kernel (pools and the like, on its data) takes 0.500 "
                          "-> 0.750 ms there, timed alone; 1 generated kernel takes 0.050 -> "
                          "0.025 ms there, timed alone; the plan at --precision bf16 adds 2 "
                          "kernels (0.175 ms timed alone or priced)"),
            std::string::npos)
      << u.detail;
  EXPECT_EQ(u.kernels, (std::vector<std::string>{"k1_conv_relu", "k0_conv"}));
}

// A precision the backend accepts but the probe measured no rate for is said so, not replaced by
// another precision's refusal (this CPU: "--precision fp16 ... no fp16 path" while bf16 runs).
TEST(DoctorRemedies, AcceptedPrecisionWithoutAMeasuredRateIsNamed) {
  Ceilings c = fixed_ceilings();
  RunProfile p;
  p.backend = "cpu";
  auto gemm = kernel("gemm", OpClass::contraction, 2e9, 12e6, 5.0, "library");
  gemm.ops = {"MatMul"};
  p.kernels = {gemm};
  p.wall_ms = 5.0;
  Report r = diagnose(p, c, {.precisions = {"bf16"}, .precision_refusal = "no fp16 path"});
  const Remedy& u = find(r.remedies, "faster_units");
  EXPECT_EQ(u.gain_ms, 0);
  EXPECT_FALSE(u.applicable);
  EXPECT_EQ(u.action, "none: the probe measured no rate for --precision bf16");
}

// A small library GEMM far from both roofs is memory-bound by its floors, so its floors cannot
// move; where the probe measured the library GEMM at both precisions, its work scales by their
// ratio instead, down to its memory floor and no further.
TEST(DoctorRemedies, CpuLibraryGemmScalesByTheMeasuredRateRatioDownToItsMemoryFloor) {
  Ceilings c = fixed_ceilings();
  c.library_gflops = {{"fp32", 200}, {"bf16", 800}};
  RunProfile p;
  p.backend = "cpu";
  // 2e6 FLOPs (0.002 ms at 1000 GFLOP/s), 4e6 bytes (0.04 ms at 100 GB/s), measured 0.5 ms.
  auto gemm = kernel("small_gemm", OpClass::contraction, 2e6, 4e6, 0.5, "library");
  gemm.ops = {"MatMul"};
  p.kernels = {gemm};
  p.wall_ms = 0.5;
  Report r = diagnose(p, c, {.precisions = {"bf16"}});
  ASSERT_EQ(r.kernels[0].regime, Regime::memory);
  const double fixed = r.kernels[0].overhead_ms, work = 0.5 - fixed;
  EXPECT_NEAR(find(r.remedies, "faster_units").gain_ms, work * 0.75 - fixed, 1e-9);
  // Near its memory floor already: it cannot go below it.
  p.kernels[0].time_ms = 0.05;
  p.wall_ms = 0.05;
  Report near = diagnose(p, c, {.precisions = {"bf16"}});
  const double w2 = 0.05 - near.kernels[0].overhead_ms;
  EXPECT_NEAR(find(near.remedies, "faster_units").gain_ms, w2 - 0.04 - near.kernels[0].overhead_ms,
              1e-9);
}

// The cast before a bf16 library call costs one fixed per-kernel cost, but never more than the
// kernel takes whole: a fixed cost measured on a loaded machine (1.3 ms per fork/join) must not
// turn --precision into a loss of milliseconds per kernel.
TEST(DoctorRemedies, CpuCastCostIsBoundedByTheKernel) {
  Ceilings c = fixed_ceilings();
  c.fork_join_us = 1300;  // a probe disturbed by load
  c.library_gflops = {{"fp32", 800}, {"bf16", 3200}};
  RunProfile p;
  p.backend = "cpu";
  auto gemm = kernel("gemm", OpClass::contraction, 2e6, 4e4, 0.05, "library");
  gemm.ops = {"MatMul"};
  p.kernels = {gemm};
  p.wall_ms = 0.05;
  Report r = diagnose(p, c, {.precisions = {"bf16"}});
  ASSERT_GT(r.kernels[0].overhead_ms, 0.05);
  // All of it is fixed cost, so no work moves; the cast adds at most the kernel's 0.05 ms.
  EXPECT_NEAR(find(r.remedies, "faster_units").gain_ms, -0.05, 1e-9);
}

// Kernels a compiled plan runs on brrr's reference executor (here a 1-D Conv, as Whisper's audio
// front end ran before oneDNN took 1-D convs) are named as what they are: brrr's missing kernel,
// priced up to their roofline floors, with no flag to offer. A reference-executor profile, where
// every kernel is one, gets no such remedy (its action is --backend cpu).
TEST(DoctorRemedies, ReferenceKernelsInACompiledPlanAreNamed) {
  Ceilings c = fixed_ceilings();
  RunProfile p;
  p.backend = "cpu";
  KernelRecord conv = kernel("k2_conv", OpClass::contraction, 1e9, 4e6, 10.0);
  conv.ops = {"Conv"};
  p.kernels = {kernel("k1_matmul", OpClass::contraction, 1e9, 4e6, 1.5, "library"), conv};
  p.wall_ms = 11.5;
  Report r = diagnose(p, c, {});
  const Remedy& ref = find(r.remedies, "reference_kernels");
  EXPECT_FALSE(ref.applicable);
  EXPECT_NEAR(ref.gain_ms, 10.0 - 1.0, 1e-9);  // down to its 1 ms compute floor
  EXPECT_EQ(ref.action.rfind("brrr cannot do this yet: Conv (1 kernel) runs on the reference executor", 0), 0u)
      << ref.action;
  EXPECT_EQ(ref.kernels, std::vector<std::string>{"k2_conv"});
  EXPECT_NE(r.verdict.advice.find("reference_kernels would save about 9.000 ms (k2_conv)"),
            std::string::npos)
      << r.verdict.advice;
  p.backend = "reference";
  Report ref_run = diagnose(p, c, {});
  EXPECT_TRUE(std::none_of(ref_run.remedies.begin(), ref_run.remedies.end(),
                           [](const Remedy& m) { return m.name == "reference_kernels"; }));
}
