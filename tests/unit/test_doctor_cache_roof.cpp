// The cache-aware roofline on fixed ceilings: a kernel whose compulsory bytes fit the cache below
// DRAM is judged against that level's measured bandwidth, a larger one against DRAM, and an
// efficiency above 100% always carries its reason, in the analysis and in every report.
#include <gtest/gtest.h>

#include <fstream>

#include "brrr/doctor.hpp"
#include "plan/target.hpp"
#include "brrr/error.hpp"

using namespace brrr;
using namespace brrr::doctor;

namespace {

// 100 GB/s DRAM, 1000 GB/s last-level cache of 32 MiB, 1 TFLOP/s fp32.
Ceilings cache_ceilings(const std::string& backend = "cpu") {
  Ceilings c;
  c.backend = backend;
  c.bandwidth_gbs = 100;
  c.memcpy_gbs = 90;
  c.cache_bandwidth_gbs = 1000;
  c.cache_bytes = 32.0 * 1048576;
  c.peak_gflops = {{"fp32", 1000}};
  c.special_gops = {{"exp", 20}};
  c.kernel_call_us = 0.1;
  c.fork_join_us = 0.4;
  c.launch_us = 2;
  c.graph_node_us = 1;
  c.threads = 4;
  return c;
}

KernelRecord kernel(const std::string& op, double flops, double bytes, double ms,
                    const std::string& kind = "fused") {
  KernelRecord k;
  k.name = op + "_k";
  k.kind = kind;
  k.ops = {op};
  k.nodes = {op + "_node"};
  k.cost.flops = flops;
  k.cost.bytes = bytes;
  k.time_ms = ms;
  return k;
}

}  // namespace

TEST(DoctorCacheRoof, CacheFittingKernelIsJudgedAgainstTheCacheRoof) {
  // 4 MB in 0.01 ms = 400 GB/s: 400% of DRAM, 40% of the 1000 GB/s cache.
  auto a = analyze_kernel(kernel("Add", 1e6, 4e6, 0.01), cache_ceilings());
  EXPECT_EQ(a.roof, "llc");
  EXPECT_DOUBLE_EQ(a.roof_gbs, 1000);
  EXPECT_NEAR(a.memory_floor_ms, 0.004, 1e-12);
  EXPECT_NEAR(a.efficiency, 0.4, 1e-9);
  EXPECT_EQ(a.regime, Regime::memory);
  EXPECT_TRUE(a.over_reason.empty()) << a.over_reason;
  // The same kernel on a GPU faces its L2.
  auto g = analyze_kernel(kernel("Add", 1e6, 4e6, 0.01), cache_ceilings("cuda"));
  EXPECT_EQ(g.roof, "l2");
  EXPECT_NEAR(g.memory_floor_ms, 0.004, 1e-12);
}

TEST(DoctorCacheRoof, LargeKernelIsJudgedAgainstDram) {
  // 400 MB, far beyond the 32 MiB cache: 4 ms at 100 GB/s.
  auto a = analyze_kernel(kernel("Add", 1e8, 4e8, 5.0), cache_ceilings());
  EXPECT_EQ(a.roof, "dram");
  EXPECT_DOUBLE_EQ(a.roof_gbs, 100);
  EXPECT_NEAR(a.memory_floor_ms, 4.0, 1e-9);
  EXPECT_NEAR(a.efficiency, 0.8, 1e-9);
  EXPECT_TRUE(a.over_reason.empty());
  // Just over the cache size is DRAM too.
  auto b = analyze_kernel(kernel("Add", 0, 32.0 * 1048576 + 1, 1.0), cache_ceilings());
  EXPECT_EQ(b.roof, "dram");
}

TEST(DoctorCacheRoof, CeilingsWithoutACacheRoofJudgeEverythingAgainstDram) {
  Ceilings c = cache_ceilings();
  c.cache_bandwidth_gbs = 0;
  c.cache_bytes = 0;
  auto a = analyze_kernel(kernel("Add", 1e6, 4e6, 0.01), c);
  EXPECT_EQ(a.roof, "dram");
  EXPECT_NEAR(a.efficiency, 4.0, 1e-9);
  EXPECT_NE(a.over_reason.find("no cache roof"), std::string::npos) << a.over_reason;
  // A cache roof measured below DRAM's (a loaded probe) never raises the floor.
  c = cache_ceilings();
  c.cache_bandwidth_gbs = 50;
  EXPECT_NEAR(analyze_kernel(kernel("Add", 1e6, 4e6, 0.01), c).memory_floor_ms, 0.04, 1e-12);
}

TEST(DoctorCacheRoof, EveryEfficiencyAboveOneHasItsReason) {
  Ceilings c = cache_ceilings();
  // Faster than the cache roof: 4 MB in 0.002 ms = 2000 GB/s.
  auto cached = analyze_kernel(kernel("Mul", 1e6, 4e6, 0.002), c);
  EXPECT_GT(cached.efficiency, 1);
  EXPECT_NE(cached.over_reason.find("cache-resident data faster than the measured llc roof"),
            std::string::npos)
      << cached.over_reason;
  // Beyond the cache, faster than DRAM: 40 MB in 0.2 ms = 200 GB/s.
  auto dram = analyze_kernel(kernel("Mul", 1e6, 40e6, 0.2), c);
  EXPECT_EQ(dram.roof, "dram");
  EXPECT_GT(dram.efficiency, 1);
  EXPECT_NE(dram.over_reason.find("faster than the DRAM roof"), std::string::npos);
  // Faster than the fp32 peak: 2 GFLOP in 1 ms = 2 TFLOP/s; a Conv may do fewer FLOPs.
  auto conv = analyze_kernel(kernel("Conv", 2e9, 1e6, 1.0, "library"), c);
  EXPECT_EQ(conv.regime, Regime::compute);
  EXPECT_GT(conv.efficiency, 1);
  EXPECT_NE(conv.over_reason.find("faster than the probed fp32 peak"), std::string::npos);
  EXPECT_NE(conv.over_reason.find("Winograd"), std::string::npos);
  auto gemm = analyze_kernel(kernel("MatMul", 2e9, 1e6, 1.0, "library"), c);
  EXPECT_NE(gemm.over_reason.find("the ceiling is low"), std::string::npos);
  EXPECT_EQ(gemm.over_reason.find("Winograd"), std::string::npos);
  // A compute floor set by special functions names them, not the FMA peak: 1e8 exp at 20 G/s
  // is 5 ms, the kernel took 1 ms.
  auto ex = kernel("Exp", 1e6, 1e6, 1.0);
  ex.cost.special["exp"] = 1e8;
  auto e = analyze_kernel(ex, c);
  EXPECT_GT(e.efficiency, 1);
  EXPECT_NE(e.over_reason.find("faster than the probed throughput of exp"), std::string::npos)
      << e.over_reason;
  // A GEMM whose FLOPs alone fit its time but whose floor also prices an epilogue's special
  // functions at the probe's rate (GPT-2's tanh GELU in a bf16 GEMM's epilogue) beat the special
  // functions' rate, not the FMA peak: 0.6 GFLOP is 0.6 ms at 1 TFLOP/s, 1e7 exp are 0.5 ms at
  // 20 G/s, the kernel took 0.8 ms.
  auto epi = kernel("MatMul", 6e8, 1e6, 0.8, "library");
  epi.cost.special["exp"] = 1e7;
  auto ep = analyze_kernel(epi, c);
  EXPECT_GT(ep.efficiency, 1);
  EXPECT_NE(ep.over_reason.find("faster than the probed throughput of exp"), std::string::npos)
      << ep.over_reason;
  EXPECT_EQ(ep.over_reason.find("FMA loop"), std::string::npos) << ep.over_reason;
  // Ceilings probed on a busy machine say so beside the reason.
  Ceilings busy = c;
  busy.probe_other_busy_cpus = 1.5;
  EXPECT_NE(analyze_kernel(ex, busy).over_reason.find("other processes kept 1.5 CPUs busy"),
            std::string::npos);
  EXPECT_EQ(e.over_reason.find("busy"), std::string::npos);
  // A sweep over sizes and times: above 100% always has a reason, at or below never.
  int above = 0;
  for (double bytes : {1e3, 1e5, 4e6, 3e7, 4e7, 4e8})
    for (double flops : {0.0, 1e6, 1e9, 1e11})
      for (double ms : {1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0}) {
        auto a = analyze_kernel(kernel("Add", flops, bytes, ms), c);
        if (a.efficiency > 1) {
          ++above;
          EXPECT_FALSE(a.over_reason.empty()) << bytes << " B " << flops << " FLOP " << ms;
        } else {
          EXPECT_TRUE(a.over_reason.empty()) << a.over_reason;
        }
      }
  EXPECT_GT(above, 10);  // the sweep does reach above 100%
}

// A 16-bit GEMM on a GPU runs its FLOPs on Tensor Cores, so its epilogue's special functions
// overlap them: the compute floor is the longer of the two, not their sum (GPT-2's tanh GELU
// GEMMs read 111-123% against the sum). A CPU GEMM's specials share its FMA units: the sum.
TEST(DoctorCacheRoof, EpilogueSpecialsOverlapTensorCoresOnlyOnTheGpu) {
  Ceilings gpu = cache_ceilings("cuda");
  gpu.peak_gflops["bf16"] = 4000;
  // 2.4 GFLOP at 4 TFLOP/s = 0.6 ms; 1e7 exp at 20 G/s = 0.5 ms; measured 0.8 ms.
  auto k = kernel("MatMul", 2.4e9, 1e6, 0.8, "library");
  k.precision = "bf16";
  k.cost.special["exp"] = 1e7;
  const KernelAnalysis g = analyze_kernel(k, gpu);
  EXPECT_NEAR(g.compute_floor_ms, 0.6, 1e-9);
  EXPECT_NEAR(g.efficiency, 0.75, 1e-9);
  EXPECT_TRUE(g.over_reason.empty()) << g.over_reason;
  // Specials longer than the MMAs set the floor alone: 4e7 exp = 2 ms.
  k.cost.special["exp"] = 4e7;
  EXPECT_NEAR(analyze_kernel(k, gpu).compute_floor_ms, 2.0, 1e-9);
  // float32 on CUDA cores: FMAs and specials share the units, as on the CPU.
  auto f = kernel("MatMul", 6e8, 1e6, 0.8, "library");  // 0.6 ms at the fp32 peak
  f.cost.special["exp"] = 1e7;
  EXPECT_NEAR(analyze_kernel(f, gpu).compute_floor_ms, 1.1, 1e-9);
  // The CPU at bf16: the sum.
  Ceilings cpu = cache_ceilings("cpu");
  cpu.peak_gflops["bf16"] = 4000;
  k.cost.special["exp"] = 1e7;
  EXPECT_NEAR(analyze_kernel(k, cpu).compute_floor_ms, 1.1, 1e-9);
}

TEST(DoctorCacheRoof, CacheCeilingsRoundTripAndOldCachesStillLoad) {
  Ceilings c = cache_ceilings();
  Ceilings d = ceilings_from_json(ceilings_to_json(c));
  EXPECT_DOUBLE_EQ(d.cache_bandwidth_gbs, 1000);
  EXPECT_DOUBLE_EQ(d.cache_bytes, 32.0 * 1048576);
  nlohmann::json old = ceilings_to_json(c);
  old.erase("cache_bandwidth_gbs");
  old.erase("cache_bytes");
  Ceilings o = ceilings_from_json(old);
  EXPECT_EQ(o.cache_bandwidth_gbs, 0);
  EXPECT_EQ(o.cache_bytes, 0);
  nlohmann::json bad = ceilings_to_json(c);
  bad["cache_bandwidth_gbs"] = -5;
  EXPECT_THROW(ceilings_from_json(bad), Error);
  bad = ceilings_to_json(c);
  bad["cache_bytes"] = "big";
  EXPECT_THROW(ceilings_from_json(bad), Error);
}

TEST(DoctorCacheRoof, ReportsShowTheRoofAndTheReasonNextToTheNumber) {
  RunProfile p;
  p.backend = "cpu";
  p.kernels = {kernel("Mul", 1e6, 4e6, 0.002), kernel("Add", 1e8, 4e8, 5.0)};
  p.wall_ms = 5.1;
  Report r = diagnose(p, cache_ceilings(), {.model = "m.onnx"});
  ASSERT_EQ(r.kernels.size(), 2u);
  const std::string reason = r.kernels[0].over_reason;
  ASSERT_FALSE(reason.empty());

  std::string text = render_table(r);
  EXPECT_NE(text.find("eff > 100%: " + reason), std::string::npos) << text;
  EXPECT_NE(text.find(" llc "), std::string::npos);
  EXPECT_NE(text.find(" dram "), std::string::npos);

  nlohmann::json j = report_json(r);
  bool saw_llc = false, saw_dram = false;
  for (const auto& k : j["kernels"]) {
    ASSERT_TRUE(k.contains("roof") && k.contains("over_roof_reason") && k.contains("roof_gbs"));
    if (k["roof"] == "llc") {
      saw_llc = true;
      EXPECT_EQ(k["over_roof_reason"], reason);
    }
    if (k["roof"] == "dram") {
      saw_dram = true;
      EXPECT_EQ(k["over_roof_reason"], "");
    }
  }
  EXPECT_TRUE(saw_llc && saw_dram);

  std::string html = render_html(r);
  EXPECT_NE(html.find("<span class=\"why\">" + reason + "</span>"), std::string::npos);
  EXPECT_NE(html.find("(1000.0 llc)"), std::string::npos);
  EXPECT_NE(html.find("class=\"cache-ceiling\""), std::string::npos);
  EXPECT_NE(html.find("1000.0 GB/s llc (measured; kernels within 32 MiB)"), std::string::npos);
}

TEST(DoctorCacheRoof, CpuProbeMeasuresTheLastLevelCache) {
  // Where the kernel lists a cache, the probe sizes it and measures a copy within it; its
  // figures pass the same validation a cached file does.
  std::ifstream level("/sys/devices/system/cpu/cpu0/cache/index0/size");
  if (!level) GTEST_SKIP() << "no cache listing under /sys/devices/system/cpu/cpu0/cache";
  Ceilings c = probe_cpu(false, true);
  EXPECT_GE(c.cache_bytes, 64.0 * 1024);
  EXPECT_GT(c.cache_bandwidth_gbs, 0);
  // Every level is measured, smallest first; the last one is the LLC above.
  ASSERT_FALSE(c.cache_levels.empty());
  for (size_t i = 0; i < c.cache_levels.size(); ++i) {
    EXPECT_GT(c.cache_levels[i].gbs, 0) << c.cache_levels[i].name;
    if (i > 0) EXPECT_GT(c.cache_levels[i].bytes, c.cache_levels[i - 1].bytes);
  }
  EXPECT_EQ(c.cache_levels.back().name, "llc");
  EXPECT_DOUBLE_EQ(c.cache_levels.back().bytes, c.cache_bytes);
  Ceilings d = ceilings_from_json(ceilings_to_json(c));
  EXPECT_DOUBLE_EQ(d.cache_bytes, c.cache_bytes);
  EXPECT_NE(render_ceilings(c).find("LLC bandwidth"), std::string::npos);
  // The library GEMM is measured at fp32 and at each --precision this host's CPU backend takes,
  // and at nothing it refuses (issue 19: `--precision bf16` is priced at what oneDNN does).
#if defined(BRRR_HAVE_DNNL)
  EXPECT_GT(c.library_gflops.count("fp32") ? c.library_gflops.at("fp32") : 0.0, 0);
#else
  EXPECT_TRUE(c.library_gflops.empty());  // no oneDNN: the MatMul is generated code
#endif
  const bool bf16 = brrr::plan::cpu_precision_refusal("bf16").empty();
  EXPECT_EQ(c.library_gflops.count("bf16"), bf16 ? 1u : 0u);
  EXPECT_EQ(d.library_gflops, c.library_gflops);
  EXPECT_EQ(render_ceilings(c).find("library GEMM fp32") != std::string::npos,
            c.library_gflops.count("fp32") == 1);
}

// With several levels measured, a kernel faces the smallest one its bytes fit: a private L2
// before the LLC, the LLC before DRAM; an LLC measured slower than DRAM (a VM that reports its
// host's whole L3) never raises a floor.
TEST(DoctorCacheRoof, KernelFacesTheSmallestLevelItFits) {
  Ceilings c = cache_ceilings();
  c.cache_levels = {{"l2", 4.0 * 1048576, 2000}, {"llc", 32.0 * 1048576, 1000}};
  auto small = analyze_kernel(kernel("Add", 1e3, 1e6, 0.01), c);
  EXPECT_EQ(small.roof, "l2");
  EXPECT_DOUBLE_EQ(small.roof_gbs, 2000);
  EXPECT_NEAR(small.memory_floor_ms, 0.0005, 1e-12);
  auto mid = analyze_kernel(kernel("Add", 1e3, 16e6, 0.1), c);
  EXPECT_EQ(mid.roof, "llc");
  EXPECT_DOUBLE_EQ(mid.roof_gbs, 1000);
  auto big = analyze_kernel(kernel("Add", 1e3, 64e6, 1.0), c);
  EXPECT_EQ(big.roof, "dram");
  c.cache_levels[1].gbs = 50;
  EXPECT_DOUBLE_EQ(analyze_kernel(kernel("Add", 1e3, 16e6, 0.1), c).roof_gbs, 100);
  // The levels survive the cache file, and bad ones are refused.
  Ceilings back = ceilings_from_json(ceilings_to_json(c));
  EXPECT_EQ(back.cache_levels, c.cache_levels);
  nlohmann::json j = ceilings_to_json(c);
  j["cache_levels"][0]["gbs"] = -1;
  EXPECT_THROW(ceilings_from_json(j), Error);
  // A cache written before the levels: the one cache roof.
  j.erase("cache_levels");
  back = ceilings_from_json(j);
  ASSERT_EQ(back.cache_roofs().size(), 1u);
  EXPECT_EQ(back.cache_roofs()[0].name, "llc");
  EXPECT_EQ(analyze_kernel(kernel("Add", 1e3, 1e6, 0.01), back).roof, "llc");
  // The HTML roofline draws each level faster than DRAM, and not one slower.
  RunProfile p;
  p.backend = "cpu";
  p.wall_ms = 0.01;
  p.kernels = {kernel("Add", 1e3, 1e6, 0.01)};
  c.cache_levels[1].gbs = 1000;
  std::string html = render_html(diagnose(p, c));
  EXPECT_NE(html.find("2000.0 GB/s l2 (measured; kernels within 4 MiB)"), std::string::npos);
  EXPECT_NE(html.find("1000.0 GB/s llc (measured; kernels within 32 MiB)"), std::string::npos);
  c.cache_levels[1].gbs = 50;
  html = render_html(diagnose(p, c));
  EXPECT_EQ(html.find("GB/s llc (measured"), std::string::npos);
}

// A kernel's bytes may fit a cache while the model's weights do not: each run then reads every
// weight from DRAM once, so a kernel's weights face DRAM and only its activations the cache
// (BERT-base bf16 on an H100: 170 MB of weights, a 50 MB L2, 4.7 MB FFN GEMMs).
TEST(DoctorCacheRoof, WeightsThatOutgrowTheCacheAreJudgedAgainstDram) {
  const Ceilings c = cache_ceilings();
  // 4 MB: 3 MB of weights, 1 MB of activations; 0.05 ms.
  auto gemm = kernel("MatMul", 1e6, 4e6, 0.05, "library");
  gemm.reads = {{"x", 0.5e6, false}, {"w", 3e6, true}};
  gemm.writes = {{"y", 0.5e6}};
  // Weights of 64 MiB, twice the 32 MiB cache: 3 MB at 100 GB/s + 1 MB at 1000 GB/s.
  const auto streams = analyze_kernel(gemm, c, 64.0 * 1048576);
  EXPECT_EQ(streams.roof, "dram");
  EXPECT_DOUBLE_EQ(streams.streamed_weight_bytes, 3e6);
  EXPECT_NEAR(streams.memory_floor_ms, 0.031, 1e-12);
  EXPECT_NEAR(streams.roof_gbs, 4e6 / 0.031e6, 1e-9);
  EXPECT_NEAR(streams.efficiency, 0.031 / 0.05, 1e-9);
  // All the weights fit: they stay resident between runs, and the whole kernel faces the cache.
  const auto resident = analyze_kernel(gemm, c, 16.0 * 1048576);
  EXPECT_EQ(resident.roof, "llc");
  EXPECT_DOUBLE_EQ(resident.streamed_weight_bytes, 0);
  EXPECT_NEAR(resident.memory_floor_ms, 0.004, 1e-12);
  // Activations that are most of the bytes keep the cache's name; the floor still prices the
  // weights at DRAM.
  auto ln = kernel("LayerNormalization", 1e6, 4e6, 0.05);
  ln.reads = {{"x", 2e6, false}, {"gamma", 1e6, true}};
  const auto norm = analyze_kernel(ln, c, 64.0 * 1048576);
  EXPECT_EQ(norm.roof, "llc");
  EXPECT_NEAR(norm.memory_floor_ms, 1e6 / 100 * 1e-6 + 3e6 / 1000 * 1e-6, 1e-12);
  // Beating the floor with streamed weights says why.
  gemm.time_ms = 0.01;
  const auto fast = analyze_kernel(gemm, c, 64.0 * 1048576);
  EXPECT_GT(fast.efficiency, 1);
  EXPECT_NE(fast.over_reason.find("2.9 MiB of weights from DRAM"), std::string::npos)
      << fast.over_reason;

  // diagnose() sums the distinct weights of the run (w read twice counts once) and so judges
  // both kernels; the JSON profile keeps which reads are weights.
  RunProfile p;
  p.backend = "cpu";
  p.wall_ms = 0.2;
  auto big = kernel("MatMul", 1e6, 4e6, 0.05, "library");
  big.name = "big";
  big.reads = {{"x", 0.5e6, false}, {"w2", 40.0 * 1048576, true}};
  gemm.time_ms = 0.05;
  p.kernels = {gemm, big, gemm};
  p.kernels[2].name = "again";
  EXPECT_NEAR(model_weight_bytes(p), 3e6 + 40.0 * 1048576, 1e-6);
  const Report r = diagnose(p, c, {});
  EXPECT_EQ(r.kernels[0].roof, "dram");
  EXPECT_DOUBLE_EQ(r.kernels[0].streamed_weight_bytes, 3e6);
  const RunProfile back = profile_from_json(profile_to_json(p));
  ASSERT_EQ(back.kernels[0].reads.size(), 2u);
  EXPECT_FALSE(back.kernels[0].reads[0].constant);
  EXPECT_TRUE(back.kernels[0].reads[1].constant);
  EXPECT_NEAR(model_weight_bytes(back), model_weight_bytes(p), 1e-6);
}
