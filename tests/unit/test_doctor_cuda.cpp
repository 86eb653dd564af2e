// The doctor on the GPU: regime rules on hand-made CUDA ceilings (no device needed), and with a
// device: probe_cuda's ceilings and the doctor's verdict on GEMM-heavy, pointwise and tiny models.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "brrr/doctor.hpp"
#include "brrr/error.hpp"
#include "brrr/session.hpp"
#include "runtime/graph_builder.hpp"
#ifdef BRRR_HAVE_CUDA
#include "backend/cuda/cuda_runtime.hpp"
#endif

namespace brrr::doctor {
namespace {

Ceilings h200_like() {
  Ceilings c;
  c.backend = "cuda";
  c.cpu_model = "synthetic GPU";
  c.bandwidth_gbs = 4000;
  c.peak_gflops = {{"fp32", 56000}, {"tf32", 400000}, {"bf16", 800000}, {"fp16", 770000}};
  c.special_gops = {{"exp", 3000}, {"cos", 1100}};
  c.launch_us = 3.7;
  c.graph_node_us = 0.5;
  c.dispatch_us = 6;
  return c;
}

KernelRecord rec(const std::string& kind, double flops, double bytes, double ms) {
  KernelRecord k;
  k.name = kind;
  k.kind = kind;
  k.cost.flops = flops;
  k.cost.bytes = bytes;
  k.time_ms = ms;
  return k;
}

TEST(DoctorCudaRules, GemmUsesTheTensorCorePeakOfItsPrecision) {
  Ceilings c = h200_like();
  const double n = 4096, flops = 2 * n * n * n, bytes = 3 * n * n * 2;
  KernelRecord k = rec("library", flops, bytes, 0.2);
  k.precision = "bf16";
  KernelAnalysis a = analyze_kernel(k, c);
  EXPECT_NEAR(a.compute_floor_ms, flops / 800000e9 * 1e3, 1e-9);
  EXPECT_EQ(a.regime, Regime::compute);
  EXPECT_LE(a.efficiency, 1.0);
  // The same GEMM at fp32 is judged against the CUDA-core peak; an unprobed precision too.
  k.precision = "fp32";
  EXPECT_NEAR(analyze_kernel(k, c).compute_floor_ms, flops / 56000e9 * 1e3, 1e-9);
  k.precision = "fp8";
  EXPECT_NEAR(analyze_kernel(k, c).compute_floor_ms, flops / 56000e9 * 1e3, 1e-9);
}

TEST(DoctorCudaRules, FusedKernelsPayCudaCoresAndSpecialFunctions) {
  Ceilings c = h200_like();
  KernelRecord k = rec("fused", 1e9, 1e6, 1.0);
  k.cost.special["cos"] = 1.1e9;
  KernelAnalysis a = analyze_kernel(k, c);
  EXPECT_NEAR(a.compute_floor_ms, (1e9 / 56000e9 + 1.1e9 / 1100e9) * 1e3, 1e-9);
  EXPECT_EQ(a.regime, Regime::compute);
}

TEST(DoctorCudaRules, OverheadIsLaunchCostEagerAndNodeCostInAGraph) {
  Ceilings c = h200_like();
  EXPECT_DOUBLE_EQ(c.per_kernel_overhead_us("fused", false), 3.7);
  EXPECT_DOUBLE_EQ(c.per_kernel_overhead_us("fused", true), 0.5);
  // 16 MB at 4 TB/s: a 4 us floor, measured 6 us.
  KernelRecord k = rec("fused", 0, 16e6, 0.006);
  EXPECT_EQ(analyze_kernel(k, c).regime, Regime::overhead);  // within 2x of a 3.7 us launch
  k.graph_node = true;
  EXPECT_EQ(analyze_kernel(k, c).regime, Regime::memory);  // a graph node costs 0.5 us
  // A tiny kernel is overhead-bound either way: its floor is below the fixed cost.
  KernelRecord t = rec("fused", 100, 4096, 0.002);
  t.graph_node = true;
  EXPECT_EQ(analyze_kernel(t, c).regime, Regime::overhead);
}

TEST(DoctorCudaRules, IdleGapsAreOverheadAndSharesAddUp) {
  Ceilings c = h200_like();
  RunProfile p;
  p.backend = "cuda";
  p.wall_ms = 1.0;
  KernelRecord g = rec("library", 2.0 * 4096 * 4096 * 4096, 1e8, 0.4);
  g.precision = "bf16";
  p.kernels = {g, rec("fused", 0, 8e8, 0.2)};
  Report r = diagnose(p, c);
  EXPECT_NEAR(r.attribution.gap_ms, 0.4, 1e-9);
  EXPECT_NEAR(r.attribution.compute_ms, 0.4, 1e-9);
  EXPECT_NEAR(r.attribution.memory_ms, 0.2, 1e-9);
  EXPECT_NEAR(r.attribution.overhead_ms, 0.4, 1e-9);
  EXPECT_NEAR(r.attribution.compute_ms + r.attribution.memory_ms + r.attribution.overhead_ms,
              r.attribution.wall_ms, 1e-9);
  EXPECT_NE(render_table(r).find("idle gaps"), std::string::npos);
}

// Replayed as a CUDA graph, the static plan is in effect; launched eagerly, a graph is offered.
TEST(DoctorCudaRules, StaticPlanIsInEffectWhenTheRunIsAGraph) {
  Ceilings c = h200_like();
  RunProfile p;
  p.backend = "cuda";
  p.wall_ms = 0.03;
  for (int i = 0; i < 10; ++i) {
    KernelRecord k = rec("fused", 100, 4096, 0.003);
    k.graph_node = true;
    p.kernels.push_back(k);
  }
  const Remedy* s = nullptr;
  Report r = diagnose(p, c);
  for (const auto& rm : r.remedies)
    if (rm.name == "static_plan") s = &rm;
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->in_effect);
  EXPECT_EQ(s->gain_ms, 0);
  EXPECT_NE(s->detail.find("CUDA graph"), std::string::npos) << s->detail;
  for (auto& k : p.kernels) k.graph_node = false;
  Report e = diagnose(p, c);
  for (const auto& rm : e.remedies)
    if (rm.name == "static_plan") {
      EXPECT_FALSE(rm.in_effect);
      EXPECT_NE(rm.detail.find("a CUDA graph replaces 10 launches"), std::string::npos) << rm.detail;
    }
}

// On the device's own timeline (CUPTI) a kernel's time holds no launch: a CUDA graph keeps the
// kernel times and turns the idle gaps into at most one probed graph-node time per GPU activity.
TEST(DoctorCudaRules, StaticPlanOnTheDeviceTimelineKeepsKernelTimesAndPricesGraphNodes) {
  Ceilings c = h200_like();
  RunProfile p;
  p.backend = "cuda";
  p.timing_source = "CUPTI activity records of the eager runs";
  for (int i = 0; i < 10; ++i) p.kernels.push_back(rec("fused", 100, 4096, 0.003));
  p.kernels[0].kind = "library";
  p.kernels[0].gpu_activities = 3;  // a library call of three kernels: three graph nodes
  p.wall_ms = 0.06;                 // 0.03 ms of kernels, 0.03 ms of idle gaps
  auto static_plan = [&](const Report& r) {
    for (const auto& rm : r.remedies)
      if (rm.name == "static_plan") return rm;
    ADD_FAILURE() << "no static_plan remedy";
    return Remedy{};
  };
  Remedy s = static_plan(diagnose(p, c));
  EXPECT_FALSE(s.in_effect);
  // 12 nodes at 0.5 us keep 0.006 ms of the 0.03 ms of gaps: the kernels' own 0.03 ms stays.
  EXPECT_NEAR(s.gain_ms, 0.03 - 12 * 0.0005, 1e-9);
  EXPECT_NEAR(s.predicted_ms, 0.03 + 0.006, 1e-9);
  EXPECT_NE(s.detail.find("12 GPU activities"), std::string::npos) << s.detail;
  // Gaps already below a graph node each: nothing to gain (not the launch costs again).
  p.wall_ms = 0.033;
  EXPECT_NEAR(static_plan(diagnose(p, c)).gain_ms, 0, 1e-12);
  // Timed from the host (the event fallback) each kernel holds its launch, which a graph replaces.
  p.timing_source = "CUDA events (fallback: no CUPTI)";
  for (auto& k : p.kernels) k.time_ms = 0.01;
  p.wall_ms = 0.13;
  EXPECT_NEAR(static_plan(diagnose(p, c)).gain_ms, 10 * (0.0037 - 0.0005) + 0.03, 1e-9);
}

// At a 16-bit precision the GPU stores the whole model in 16 bits: a float32 library GEMM moves
// to the Tensor Cores (priced at its time in the 16-bit plan where that was timed), and a
// memory-bound generated kernel moves half its bytes.
TEST(DoctorCudaRules, SixteenBitPrecisionHalvesTheMemoryBoundKernelsAndPricesGemmsAtTheirTwin) {
  Ceilings c = h200_like();
  c.peak_gflops.erase("tf32");
  c.peak_gflops.erase("fp16");
  RunProfile p;
  p.backend = "cuda";
  p.timing_source = "CUPTI activity records of the CUDA-graph replays";
  KernelRecord gemm = rec("library", 2.0 * 512 * 4096 * 4096, 4096.0 * 4096 * 4, 0.8);
  gemm.name = "k0_matmul";
  gemm.ops = {"MatMul"};
  gemm.nodes = {"mm"};
  gemm.precision = "fp32";
  gemm.graph_node = true;
  KernelRecord add = rec("fused", 1e6, 400e6, 0.2);  // 400 MB at 4 TB/s: 0.1 ms, memory-bound
  add.name = "k1_add";
  add.nodes = {"add"};
  add.graph_node = true;
  p.kernels = {gemm, add};
  p.wall_ms = 1.0;
  DoctorOptions o;
  o.precisions = {"bf16"};
  KernelRecord twin = gemm;
  twin.precision = "bf16";
  twin.samples_ms = {0.1, 0.1, 0.1};
  twin.time_ms = 0.1;
  o.unit_kernels["bf16"] = {twin};
  Report r = diagnose(p, c, o);
  const Remedy* u = nullptr;
  for (const auto& rm : r.remedies)
    if (rm.name == "faster_units") u = &rm;
  ASSERT_NE(u, nullptr);
  // The GEMM: 0.8 -> 0.1 ms; the add: half of its 0.2 ms less its 0.5 us node.
  EXPECT_NEAR(u->gain_ms, 0.7 + 0.5 * (0.2 - 0.0005), 1e-9);
  EXPECT_EQ(u->action, "--precision bf16");
  EXPECT_NE(u->detail.find("1 memory-bound kernel stores 16 bits"), std::string::npos) << u->detail;
}

TEST(DoctorCudaRules, CeilingsJsonKeepsTheGpuFields) {
  Ceilings c = h200_like();
  Ceilings d = ceilings_from_json(ceilings_to_json(c));
  EXPECT_EQ(d.backend, "cuda");
  EXPECT_DOUBLE_EQ(d.launch_us, 3.7);
  EXPECT_DOUBLE_EQ(d.graph_node_us, 0.5);
  EXPECT_DOUBLE_EQ(d.peak_gflops.at("bf16"), 800000);
  EXPECT_NE(render_ceilings(d).find("Tensor Cores"), std::string::npos);
}

bool have_device(std::string* why) {
#ifdef BRRR_HAVE_CUDA
  return cuda::cuda_device_available(why);
#else
  *why = "built without the CUDA toolkit";
  return false;
#endif
}

TEST(DoctorCudaRules, NoDeviceIsAClearError) {
  std::string why;
  if (have_device(&why)) GTEST_SKIP() << "a CUDA device is present";
  try {
    probe_cuda(false);
    FAIL() << "probe_cuda without a device should throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

#ifdef BRRR_HAVE_CUDA

#define REQUIRE_DEVICE()                                      \
  do {                                                        \
    std::string why_;                                         \
    if (!have_device(&why_)) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)

const Ceilings& gpu_ceilings() {
  static Ceilings c = probe_cuda(false);
  return c;
}

Tensor filled(const Shape& s, float scale) {
  Tensor t = Tensor::empty(DType::f32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * float((i * 7919) % 997) / 997;
  return t;
}

Report doctor_on(const Graph& g, SessionOptions o = {}) {
  o.backend = "cuda";
  Session s(g, o);
  std::map<std::string, Tensor> in;
  for (int id : s.graph().inputs)
    in[s.graph().value(id).name] = filled(s.graph().value(id).shape, 1.0f);
  return diagnose(s.profile(in, 5), gpu_ceilings());
}

// Traced by CUPTI (the usual timeline), every kernel that launched GPU work has its grid.
bool traced_with_grids(const Report& r) {
  bool traced = false;
  for (const auto& k : r.profile.kernels)
    if (k.gpu_activities > 0) {
      traced = true;
      EXPECT_GT(k.grid_ctas, 0) << k.name;
    }
  return traced;
}

TEST(DoctorCuda, ProbeGivesSaneCeilings) {
  REQUIRE_DEVICE();
  const Ceilings& c = gpu_ceilings();
  EXPECT_EQ(c.backend, "cuda");
  EXPECT_GT(c.bandwidth_gbs, 0);
  // The L2 roof: its size from the device attribute, a copy within half of it.
  EXPECT_GE(c.cache_bytes, 1 << 20);
  EXPECT_GT(c.cache_bandwidth_gbs, 0);
  for (const char* p : {"fp32", "tf32", "bf16", "fp16"}) EXPECT_GT(c.peak_gflops.at(p), 0) << p;
  EXPECT_GT(c.peak_gflops.at("bf16"), c.peak_gflops.at("fp32"));
  EXPECT_GT(c.peak_gflops.at("bf16"), c.peak_gflops.at("tf32"));
  for (const char* fn : {"exp", "cos", "tanh", "erf"}) EXPECT_GT(c.special_gops.at(fn), 0) << fn;
  EXPECT_GT(c.launch_us, 0);
  EXPECT_GT(c.graph_node_us, 0);
  EXPECT_LT(c.graph_node_us, c.launch_us);
  EXPECT_GT(c.probe_seconds, 0);
}

TEST(DoctorCuda, GemmHeavyModelIsComputeBound) {
  REQUIRE_DEVICE();
  GraphBuilder b;
  int x = b.input("x", {4096, 4096});
  x = b.node("MatMul", {x, b.constant("W", filled({4096, 4096}, 0.01f))});
  b.output(x);
  SessionOptions o;
  o.precision = "bf16";
  Report r = doctor_on(b.g, o);
  EXPECT_EQ(r.verdict.regime, Regime::compute) << render_table(r);
  // A 4096 x 4096 product fills every SM: no small-grid note.
  if (traced_with_grids(r)) EXPECT_FALSE(r.grids.has_value()) << render_table(r);
}

TEST(DoctorCuda, PointwiseChainIsMemoryBound) {
  REQUIRE_DEVICE();
  GraphBuilder b;
  int x = b.input("x", {1 << 26});
  int y = b.node("Relu", {b.node("Mul", {b.node("Add", {x, b.scalar(0.5f)}), b.scalar(1.5f)})});
  b.output(y);
  Report r = doctor_on(b.g);
  EXPECT_EQ(r.verdict.regime, Regime::memory) << render_table(r);
}

TEST(DoctorCuda, SmallMlpAtBatchOneIsOverheadBound) {
  REQUIRE_DEVICE();
  GraphBuilder b;
  int x = b.input("x", {1, 256});
  for (int l = 0; l < 8; ++l) {
    int W = b.constant("W" + std::to_string(l), filled({256, 256}, 0.01f));
    x = b.node("Relu", {b.node("Add", {b.node("MatMul", {x, W}), b.scalar(0.1f)})});
  }
  b.output(x);
  SessionOptions o;
  o.graphs = 0;  // eager launches, as a framework without graphs runs it
  Report r = doctor_on(b.g, o);
  EXPECT_EQ(r.verdict.regime, Regime::overhead) << render_table(r);
  // One row of 256: its kernels launch a few CTAs on a GPU of 100+ SMs.
  if (traced_with_grids(r)) {
    ASSERT_TRUE(r.grids.has_value()) << render_table(r);
    EXPECT_GT(r.grids->kernels, 0);
  }
}

#else
TEST(DoctorCuda, NotBuilt) { GTEST_SKIP() << "no CUDA device: built without the CUDA toolkit"; }
#endif

}  // namespace
}  // namespace brrr::doctor
