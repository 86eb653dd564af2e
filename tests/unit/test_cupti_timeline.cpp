// The GPU's one timeline (issue 19): CUPTI activity records mapped to the plan's steps. The
// mapping runs on synthetic records here; with a device, the doctor's class table on bert_tiny
// and squeezenet adds up to the wall of the same CUDA-graph replays, and CUPTI saw one kernel per
// generated kernel.
#include <gtest/gtest.h>

#ifdef BRRR_HAVE_CUDA
#include "backend/cuda/cupti_timeline.hpp"
#include "brrr/doctor.hpp"
#include "brrr/onnx.hpp"
#include "brrr/session.hpp"
#include "cuda_test_util.hpp"

namespace brrr::cuda {
namespace {

GpuActivity act(uint64_t start_us, uint64_t end_us, const std::string& name) {
  return {start_us * 1000, end_us * 1000, name};
}

TEST(CuptiTimeline, BucketsRecordsBetweenMarks) {
  // Marks at 0, 100, 200 us: two buckets; a record before the first mark and one straddling a
  // mark belong to no bucket.
  std::vector<GpuActivity> recs = {act(150, 160, "b2"), act(10, 20, "a"), act(110, 120, "b1"),
                                   act(90, 105, "straddles"), act(300, 310, "after")};
  size_t dropped = 0;
  auto b = bucket_by_marks(recs, {0, 100'000, 200'000}, &dropped);
  ASSERT_EQ(b.size(), 2u);
  ASSERT_EQ(b[0].size(), 1u);
  EXPECT_EQ(b[0][0].name, "a");
  ASSERT_EQ(b[1].size(), 2u);
  EXPECT_EQ(b[1][0].name, "b1");  // sorted by start
  EXPECT_EQ(b[1][1].name, "b2");
  EXPECT_EQ(dropped, 2u);
}

// A replay of: a generated kernel, a cuBLASLt call of two kernels (split-K and its reduction), a
// GEMM chain's later layer (no launch), a copy.
StepSignature signature() {
  return {{"fused_0_add"}, {"sm90_gemm", "splitk_reduce"}, {}, {"[memcpy]"}};
}

TEST(CuptiTimeline, MapsARunToStepsByOrder) {
  std::vector<GpuActivity> run = {act(1000, 1010, "fused_0_add"), act(1012, 1042, "sm90_gemm"),
                                  act(1043, 1048, "splitk_reduce"), act(1050, 1052, "[memcpy]")};
  std::vector<StepTiming> t;
  std::string why;
  ASSERT_TRUE(map_run(run, signature(), &t, &why)) << why;
  ASSERT_EQ(t.size(), 4u);
  EXPECT_NEAR(t[0].time_ms, 0.010, 1e-12);
  EXPECT_NEAR(t[0].start_ms, 0, 1e-12);
  // The library step: both its kernels' durations, not the gap between them.
  EXPECT_NEAR(t[1].time_ms, 0.035, 1e-12);
  EXPECT_NEAR(t[1].start_ms, 0.012, 1e-12);
  EXPECT_EQ(t[1].records, 2);
  // The step with no launch starts where the previous ended and takes nothing.
  EXPECT_EQ(t[2].records, 0);
  EXPECT_NEAR(t[2].time_ms, 0, 1e-12);
  EXPECT_NEAR(t[2].start_ms, 0.048, 1e-12);
  EXPECT_NEAR(t[3].start_ms, 0.050, 1e-12);
  // Kernels plus gaps make the span of the run: 52 us, of which 47 in steps.
  double busy = 0;
  for (const auto& s : t) busy += s.time_ms;
  EXPECT_NEAR(busy, 0.047, 1e-12);
}

// Dependent launches (BRRR_CUDA_PDL): the fused kernel after the GEMM starts 6 us before the
// GEMM ends and waits; its time is what it adds after the GEMM, so the steps and the gaps still
// add up to the span of the run.
TEST(CuptiTimeline, ADependentKernelCountsFromTheEndOfThePreviousOne) {
  StepSignature sig = {{"sm90_gemm"}, {"fused_1_layernorm"}, {"fused_2_add"}};
  std::vector<GpuActivity> run = {act(1000, 1020, "sm90_gemm"), act(1014, 1025, "fused_1_layernorm"),
                                  act(1026, 1030, "fused_2_add")};
  std::vector<StepTiming> t;
  std::string why;
  ASSERT_TRUE(map_run(run, sig, &t, &why)) << why;
  EXPECT_NEAR(t[0].time_ms, 0.020, 1e-12);
  EXPECT_NEAR(t[1].start_ms, 0.020, 1e-12);
  EXPECT_NEAR(t[1].time_ms, 0.005, 1e-12);
  EXPECT_NEAR(t[2].start_ms, 0.026, 1e-12);
  double busy = 0;
  for (const auto& s : t) busy += s.time_ms;
  EXPECT_NEAR(busy, 0.029, 1e-12);  // of a 30 us span: one 1 us gap
}

TEST(CuptiTimeline, ScalesGapsToTheUntracedWallKeepingEachStep) {
  std::vector<GpuActivity> run = {act(1000, 1010, "fused_0_add"), act(1012, 1042, "sm90_gemm"),
                                  act(1043, 1048, "splitk_reduce"), act(1050, 1052, "[memcpy]")};
  std::vector<StepTiming> t;
  std::string why;
  ASSERT_TRUE(map_run(run, signature(), &t, &why)) << why;
  EXPECT_NEAR(t[1].end_ms, 0.048, 1e-12);
  EXPECT_NEAR(t[2].end_ms, t[2].start_ms, 1e-12);  // no record: no span
  scale_gaps(&t, 0.5);
  // The 2 us gap before the GEMM and the 2 us before the copy halve; spans stay.
  EXPECT_NEAR(t[0].start_ms, 0, 1e-12);
  EXPECT_NEAR(t[1].start_ms, 0.011, 1e-12);
  EXPECT_NEAR(t[1].end_ms - t[1].start_ms, 0.036, 1e-12);
  EXPECT_NEAR(t[1].time_ms, 0.035, 1e-12);  // busy time is untouched
  EXPECT_NEAR(t[3].start_ms, 0.048, 1e-12);
  EXPECT_NEAR(t[3].end_ms, 0.050, 1e-12);
  // A factor outside [0, 1] is clamped: gaps never grow, starts never go back.
  std::vector<StepTiming> u = t;
  scale_gaps(&u, 7);
  EXPECT_NEAR(u[3].start_ms, t[3].start_ms, 1e-12);
  scale_gaps(&u, -1);
  EXPECT_NEAR(u[1].start_ms, u[0].end_ms, 1e-12);
}

TEST(CuptiTimeline, RefusesARunThatDoesNotMatchThePlan) {
  std::vector<StepTiming> t;
  std::string why;
  // One record missing.
  std::vector<GpuActivity> short_run = {act(0, 10, "fused_0_add"), act(12, 42, "sm90_gemm"),
                                        act(50, 52, "[memcpy]")};
  EXPECT_FALSE(map_run(short_run, signature(), &t, &why));
  EXPECT_NE(why.find("3 GPU activities"), std::string::npos) << why;
  // The right count, a different kernel (cuBLASLt picked another algorithm in the replay).
  std::vector<GpuActivity> other = {act(0, 10, "fused_0_add"), act(12, 42, "sm80_gemm"),
                                    act(43, 48, "splitk_reduce"), act(50, 52, "[memcpy]")};
  EXPECT_FALSE(map_run(other, signature(), &t, &why));
  EXPECT_NE(why.find("sm80_gemm"), std::string::npos) << why;
}

// ---- With a device ----------------------------------------------------------------------------

std::string example(const std::string& name) {
  return std::string(BRRR_TEST_DATA) + "/../../examples/" + name + "/model.onnx";
}

class CuptiExamples : public ::testing::TestWithParam<std::string> {};

TEST_P(CuptiExamples, ClassTableAddsUpToTheReplayWall) {
  BRRR_REQUIRE_CUDA_DEVICE();
  Graph loaded = load_onnx(example(GetParam()));
  SessionOptions o;
  o.backend = "cuda";
  for (int id : loaded.inputs) {
    Shape s = loaded.value(id).shape;
    for (auto& d : s) d = d < 0 ? 1 : d;
    o.input_shapes[loaded.value(id).name] = s;
  }
  Session session(loaded, o);
  std::map<std::string, Tensor> in;
  for (int id : session.graph().inputs) {
    const Value& v = session.graph().value(id);
    in.emplace(v.name, Tensor::zeros(v.dtype, v.shape));
  }
  RunProfile p = session.profile(in, 10);
  if (p.timing_source.rfind("CUPTI", 0) != 0)
    GTEST_SKIP() << "no CUPTI timeline: " << p.timing_source;
  ASSERT_TRUE(p.kernels_in_wall_runs);
  doctor::Ceilings c;
  c.backend = "cuda";
  c.bandwidth_gbs = 4000;
  c.peak_gflops = {{"fp32", 50000}};
  c.graph_node_us = 0.5;
  c.launch_us = 3;
  doctor::Report r = doctor::diagnose(p, c);
  const double wall = r.attribution.wall_ms;
  double total = 0, kernels = 0;
  for (const auto& row : r.classes) total += row.time_ms;
  for (const auto& k : r.kernels) kernels += k.rec.time_ms;
  EXPECT_NEAR(total, wall, 0.03 * wall) << doctor::render_table(r);
  EXPECT_LE(kernels, wall * 1.001) << doctor::render_table(r);  // the kernels ran inside the wall
  // CUPTI's count per run: one kernel per generated kernel or GEMM chain (a library call may
  // launch several, or none), and no activity left unmapped (map_run checks the total).
  // A copy kernel that aliases its input (a Reshape of a contiguous value) launches nothing.
  int activities = 0, launching = 0;
  for (const auto& k : p.kernels) {
    activities += k.gpu_activities;
    if (k.kind == "fused" || k.kind == "gemm_chain") EXPECT_EQ(k.gpu_activities, 1) << k.name;
    if (k.kind == "copy") EXPECT_LE(k.gpu_activities, 1) << k.name;
    else ++launching;
  }
  EXPECT_GE(activities, launching);
  EXPECT_NE(r.timing.find("CUPTI"), std::string::npos) << r.timing;
}

INSTANTIATE_TEST_SUITE_P(Gpu, CuptiExamples, ::testing::Values("bert_tiny", "squeezenet1_1"));

}  // namespace
}  // namespace brrr::cuda
#endif
