// The doctor on real measured runs with known regimes, against ceilings measured on this machine
// (quick probe): a large GEMM is compute, a large elementwise chain is memory, a chain of tiny ops
// is overhead, and cos applied k times flips from memory to compute at the ridge point.
// Only classifications are checked, never timings.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "brrr/doctor.hpp"
#include "brrr/op.hpp"
#include "brrr/reference_profile.hpp"
#include "core/median.hpp"
#include "passes/pipeline.hpp"

using namespace brrr;
using namespace brrr::doctor;

namespace {

const Ceilings& ceilings() {
  static const Ceilings c = probe_cpu(false, true);
  return c;
}

template <typename F>
double median_ms(F&& f, int reps) {
  f();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return brrr::median(t);
}

// One measured kernel as a one-kernel run.
RunProfile single(const std::string& name, const std::string& kind, OpClass cls, Cost cost,
                  double ms) {
  KernelRecord k;
  k.name = name;
  k.kind = kind;
  k.ops = {name};
  k.cls = cls;
  k.cost = cost;
  k.time_ms = ms;
  RunProfile p;
  p.backend = "cpu";
  p.wall_ms = ms;
  p.kernels = {k};
  return p;
}

void expect_shares_sum_to_wall(const Report& r) {
  const Attribution& a = r.attribution;
  EXPECT_NEAR(a.compute_ms + a.memory_ms + a.overhead_ms, r.profile.wall_ms,
              0.05 * r.profile.wall_ms);
  EXPECT_NEAR(a.share(Regime::compute) + a.share(Regime::memory) + a.share(Regime::overhead), 1.0,
              1e-9);
}

// A chain of `ops` on a [rows, cols] float input: Relu, Add(prev, x), Relu, Add(prev, x), ...
Graph chain(int n_ops, int64_t rows, int64_t cols) {
  Graph g;
  int x = g.add_value("x");
  g.value(x).dtype = DType::f32;
  g.value(x).shape = {rows, cols};
  g.inputs.push_back(x);
  int prev = x;
  for (int i = 0; i < n_ops; ++i) {
    int y = g.add_value("v" + std::to_string(i));
    Node n;
    n.op = i % 2 ? "Add" : "Relu";
    n.name = n.op + std::to_string(i);
    n.inputs = i % 2 ? std::vector<int>{prev, x} : std::vector<int>{prev};
    n.outputs = {y};
    g.nodes.push_back(n);
    prev = y;
  }
  g.outputs.push_back(prev);
  return compile(std::move(g), plan::Target::reference(), {}).graph;
}

std::map<std::string, Tensor> input_for(int64_t rows, int64_t cols) {
  Tensor t = Tensor::empty(DType::f32, {rows, cols});
  float* p = t.data<float>();
  for (int64_t i = 0; i < rows * cols; ++i) p[i] = float(i % 17) - 8.0f;
  return {{"x", t}};
}

}  // namespace

TEST(DoctorMeasured, LargeGemmIsComputeBound) {
  const int n = 384;
  std::vector<float> A(size_t(n) * n, 0.5f), B(size_t(n) * n, 0.25f), C(size_t(n) * n);
  auto gemm = [&] {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; ++i) {
      float* c = &C[size_t(i) * n];
      for (int j = 0; j < n; ++j) c[j] = 0;
      for (int k = 0; k < n; ++k) {
        float a = A[size_t(i) * n + k];
        const float* b = &B[size_t(k) * n];
        for (int j = 0; j < n; ++j) c[j] += a * b[j];
      }
    }
  };
  double ms = median_ms(gemm, 3);
  ASSERT_FLOAT_EQ(C[0], 0.125f * n);
  Cost cost;
  cost.flops = 2.0 * n * n * n;
  cost.bytes = 3.0 * n * n * 4;
  Report r = diagnose(single("gemm", "library", OpClass::contraction, cost, ms), ceilings());
  EXPECT_EQ(r.kernels[0].regime, Regime::compute) << render_table(r);
  EXPECT_GT(r.kernels[0].efficiency, 0.0);
  EXPECT_EQ(r.verdict.regime, Regime::compute);
  expect_shares_sum_to_wall(r);
}

TEST(DoctorMeasured, LargeElementwiseChainIsMemoryBound) {
  Graph g = chain(4, 1024, 2048);  // 8 MB per tensor
  RunProfile p = profile_reference(g, input_for(1024, 2048), 2);
  ASSERT_EQ(p.kernels.size(), 4u);
  Report r = diagnose(p, ceilings());
  for (const auto& k : r.kernels) EXPECT_EQ(k.regime, Regime::memory) << k.rec.name;
  EXPECT_EQ(r.verdict.regime, Regime::memory) << render_table(r);
  expect_shares_sum_to_wall(r);
  // The three intermediates (8 MB each, single reader) are what fusion would remove.
  for (const auto& rm : r.remedies)
    if (rm.name == "fusion") EXPECT_NE(rm.detail.find("50.3 MB"), std::string::npos) << rm.detail;
}

TEST(DoctorMeasured, ChainOfTinyOpsIsOverheadBound) {
  Graph g = chain(40, 2, 4);
  RunProfile p = profile_reference(g, input_for(2, 4), 5);
  Report r = diagnose(p, ceilings());
  for (const auto& k : r.kernels) EXPECT_EQ(k.regime, Regime::overhead) << k.rec.name;
  EXPECT_EQ(r.verdict.regime, Regime::overhead);
  EXPECT_GT(r.attribution.share(Regime::overhead), 0.99);
  EXPECT_NE(r.verdict.advice.find("cannot help"), std::string::npos);
  expect_shares_sum_to_wall(r);
}

TEST(DoctorMeasured, CosSweepFlipsFromMemoryToComputeAtTheRidge) {
  const Ceilings& c = ceilings();
  // 8 MB in, 8 MB out, or more: twice the last-level cache, so the sweep crosses the DRAM ridge.
  const int64_t n = std::max<int64_t>(int64_t(2) << 20, int64_t(c.cache_bytes / 4));
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(i % 1000) * 0.003f - 1.5f;
  // Ridge: k cos evaluations per 8 bytes cost as much as moving them at the kernel's roof.
  Cost copy;
  copy.bytes = 8.0 * double(n);
  const double roof_gbs =
      analyze_kernel(single("cos_x0", "fused", OpClass::elementwise, copy, 1.0).kernels[0], c)
          .roof_gbs;
  double k_ridge = c.special_per_s("cos") * 8.0 / (roof_gbs * 1e9);
  std::vector<Regime> seen;
  for (int k : {0, 1, 2, 4, 8, 16}) {
    double ms = median_ms([&] { special_chain_f32("cos", x.data(), y.data(), n, k); }, 2);
    if (k == 1) EXPECT_NEAR(y[7], std::cos(x[7]), 1e-5);
    Cost cost;
    cost.bytes = 8.0 * double(n);
    if (k > 0) cost.special["cos"] = double(k) * double(n);
    Report r =
        diagnose(single("cos_x" + std::to_string(k), "fused", OpClass::elementwise, cost, ms), c);
    expect_shares_sum_to_wall(r);
    Regime g = r.kernels[0].regime;
    seen.push_back(g);
    if (std::abs(k - k_ridge) > 0.1 * k_ridge)
      EXPECT_EQ(g, k > k_ridge ? Regime::compute : Regime::memory)
          << "k = " << k << ", ridge at k = " << k_ridge << "\n"
          << render_table(r);
  }
  EXPECT_EQ(seen.front(), Regime::memory);
  if (k_ridge < 14) EXPECT_EQ(seen.back(), Regime::compute);
  // One flip, memory to compute.
  int flips = 0;
  for (size_t i = 1; i < seen.size(); ++i) flips += seen[i] != seen[i - 1];
  EXPECT_LE(flips, 1);
}
