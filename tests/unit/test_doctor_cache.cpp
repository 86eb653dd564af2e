// The doctor's cache check on synthetic profiles: library contraction kernels slower in the runs
// than each repeated alone are said to wait on operands streamed from memory only when their
// bytes outgrow the largest cache the probe measured faster than memory (a VM's last-level cache
// measured slower than its DRAM does not count); operands that fit are not blamed on memory; no
// hot times, no check. Session::time_library_kernels_hot itself: tests/unit/test_cpu_conv.cpp.
#include <gtest/gtest.h>

#include "brrr/doctor.hpp"

using namespace brrr;
using namespace brrr::doctor;

namespace {

// This VM's probe, rounded: L2 4 MiB at 179 GB/s, a "480 MiB" last-level cache at 27.5 GB/s,
// below its 43.2 GB/s DRAM copy.
Ceilings vm_ceilings() {
  Ceilings c;
  c.bandwidth_gbs = 43.2;
  c.peak_gflops = {{"fp32", 425.9}};
  c.kernel_call_us = 0.3;
  c.fork_join_us = 0.6;
  c.threads = 2;
  c.probe_other_busy_cpus = 0.0;
  c.probed_at = "2026-12-05T05:00:00Z";
  c.cache_levels = {{"l2", 4.0 * 1024 * 1024, 179.0}, {"llc", 480.0 * 1024 * 1024, 27.5}};
  return c;
}

KernelRecord kernel(const std::string& name, const std::string& kind, OpClass cls, double ms,
                    double bytes) {
  KernelRecord k;
  k.name = name;
  k.kind = kind;
  k.ops = {cls == OpClass::contraction ? "MatMul" : "Softmax"};
  k.cls = cls;
  k.cost.flops = 1e8;
  k.cost.bytes = bytes;
  k.time_ms = ms;
  k.samples_ms = {ms, ms, ms};
  return k;
}

// Two GEMMs of `bytes` each at 2.0 and 1.0 ms in the runs and a softmax; wall 3.5 ms.
RunProfile profile(double bytes) {
  RunProfile p;
  p.backend = "cpu";
  p.threads = 2;
  p.online_cpus = 2;
  p.other_busy_cpus = 0.0;
  p.wall_ms = 3.5;
  p.wall_samples_ms = {3.5, 3.5, 3.5, 3.5, 3.5};
  p.kernels = {kernel("k0_matmul", "library", OpClass::contraction, 2.0, bytes),
               kernel("k1_softmax", "fused", OpClass::normalization, 0.5, 1e6),
               kernel("k2_matmul_add", "library", OpClass::contraction, 1.0, bytes)};
  return p;
}

// The same kernels repeated alone: the GEMMs at `a` and `b` ms (the softmax is not a library
// kernel: no samples).
std::vector<KernelRecord> hot(double a, double b) {
  std::vector<KernelRecord> h = profile(0).kernels;
  h[0].samples_ms = {a, a, a};
  h[1].samples_ms.clear();
  h[2].samples_ms = {b, b, b};
  return h;
}

DoctorOptions with_hot(std::vector<KernelRecord> h) {
  DoctorOptions o;
  o.hot_kernels = std::move(h);
  return o;
}

}  // namespace

TEST(DoctorCache, WeightsThatOutgrowTheCacheStreamFromMemory) {
  const Report r = diagnose(profile(150e6), vm_ceilings(), with_hot(hot(1.5, 0.9)));
  ASSERT_TRUE(r.cache.has_value());
  EXPECT_EQ(r.cache->kernels, 2);
  EXPECT_DOUBLE_EQ(r.cache->in_runs_ms, 3.0);
  EXPECT_DOUBLE_EQ(r.cache->hot_ms, 2.4);
  EXPECT_NEAR(r.cache->gap_ms(), 0.6, 1e-12);
  EXPECT_DOUBLE_EQ(r.cache->bytes, 300e6);
  EXPECT_EQ(r.cache->cache_name, "l2");  // not the last-level cache slower than DRAM
  EXPECT_DOUBLE_EQ(r.cache->cache_bytes, 4.0 * 1024 * 1024);
  EXPECT_TRUE(r.cache->slower);
  EXPECT_TRUE(r.cache->streams);
  ASSERT_EQ(r.cache->worst.size(), 2u);
  EXPECT_EQ(r.cache->worst[0], "k0_matmul (2.000 -> 1.500 ms)");  // the larger gap first
  const std::string t = render_table(r);
  EXPECT_NE(t.find("cache check: the 2 library contraction kernels take 3.000 ms in the runs"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("2.400 ms each repeated alone, cache-hot (+25%)"), std::string::npos) << t;
  EXPECT_NE(t.find("the 0.600 ms between (17% of the wall)"), std::string::npos) << t;
  EXPECT_NE(t.find("300.0 MB of weights and activations, which outgrow the 4.2 MB L2 and stream "
                   "from memory"),
            std::string::npos)
      << t;
  const nlohmann::json j = report_json(r)["cache_check"];
  EXPECT_TRUE(j["streams"].get<bool>());
  EXPECT_NEAR(j["gap_ms"].get<double>(), 0.6, 1e-12);
  EXPECT_EQ(j["kernels"].get<int>(), 2);
  EXPECT_NE(render_html(r).find("id=\"cache-check\""), std::string::npos);
}

TEST(DoctorCache, OperandsThatFitAreNotBlamedOnMemory) {
  const Report r = diagnose(profile(1e6), vm_ceilings(), with_hot(hot(1.5, 0.9)));
  ASSERT_TRUE(r.cache.has_value());
  EXPECT_TRUE(r.cache->slower);
  EXPECT_FALSE(r.cache->streams);
  const std::string t = render_table(r);
  EXPECT_NE(t.find("but their 2.0 MB fit in the 4.2 MB L2, so memory traffic does not explain it"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("stream from memory"), std::string::npos) << t;
}

TEST(DoctorCache, KernelsAsFastInTheRunsAreNotSlowed) {
  // 2% slower: under the 5% that counts.
  const Report r = diagnose(profile(150e6), vm_ceilings(), with_hot(hot(1.96, 0.98)));
  ASSERT_TRUE(r.cache.has_value());
  EXPECT_FALSE(r.cache->slower);
  EXPECT_FALSE(r.cache->streams);
  EXPECT_NE(render_table(r).find("(+2%): the runs do not slow them"), std::string::npos)
      << render_table(r);
}

TEST(DoctorCache, NoHotTimesNoCheck) {
  const Report r = diagnose(profile(150e6), vm_ceilings());
  EXPECT_FALSE(r.cache.has_value());
  EXPECT_EQ(render_table(r).find("cache check"), std::string::npos);
  EXPECT_FALSE(report_json(r).contains("cache_check"));
  // A probe with no cache measured faster than memory: every byte streams.
  Ceilings c = vm_ceilings();
  c.cache_levels.pop_back();
  c.cache_levels[0].gbs = 40;
  const Report q = diagnose(profile(1e6), c, with_hot(hot(1.5, 0.9)));
  ASSERT_TRUE(q.cache.has_value());
  EXPECT_TRUE(q.cache->streams);
  EXPECT_NE(render_table(q).find("outgrow any cache the probe measured"), std::string::npos)
      << render_table(q);
}
