// The doctor's numbers add up on the four examples (issue 19, "numbers that add up"): the class
// table, whose last row is the wall outside kernels, totals the reported wall; every kernel time
// is that kernel's time in the run whose wall is reported, so the kernels alone never exceed it
// and the row between kernels is what that run measured between them, not a remainder of
// medians taken from different runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "brrr/doctor.hpp"
#include "brrr/onnx.hpp"
#include "brrr/session.hpp"

using namespace brrr;

namespace {

std::string example(const std::string& name) {
  return std::string(BRRR_TEST_DATA) + "/../../examples/" + name + "/model.onnx";
}

// Symbolic dims 1; floats small and varied, integers 0 (a valid index for every Gather).
std::map<std::string, Tensor> inputs_for(const Graph& g) {
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) {
    const Value& v = g.value(id);
    Tensor t = Tensor::zeros(v.dtype, v.shape);
    if (v.dtype == DType::f32)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.25f * float(i % 7) - 0.5f;
    in.emplace(v.name, std::move(t));
  }
  return in;
}

doctor::Ceilings ceilings() {
  doctor::Ceilings c;
  c.bandwidth_gbs = 20;
  c.peak_gflops = {{"fp32", 100}};
  c.kernel_call_us = 0.1;
  c.fork_join_us = 0.4;
  return c;
}

class DoctorExamples : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(DoctorExamples, ClassTableAddsUpToTheWall) {
  Graph loaded = load_onnx(example(GetParam()));
  SessionOptions o;
  o.backend = "cpu";
  o.threads = 1;
  for (int id : loaded.inputs) {
    Shape s = loaded.value(id).shape;
    for (auto& d : s) d = d < 0 ? 1 : d;
    o.input_shapes[loaded.value(id).name] = s;
  }
  Session session(loaded, o);
  RunProfile p = session.profile(inputs_for(session.graph()), 5);
  ASSERT_TRUE(p.kernels_in_wall_runs);
  doctor::Report r = doctor::diagnose(p, ceilings());
  const double wall = r.attribution.wall_ms;
  ASSERT_GT(wall, 0);
  // The reported wall is the profile's median wall, a measured run.
  EXPECT_EQ(wall, p.wall_ms);
  double total = 0, kernels = 0;
  for (const auto& row : r.classes) total += row.time_ms;
  for (const auto& k : r.kernels) kernels += k.rec.time_ms;
  EXPECT_NEAR(total, wall, 0.03 * wall) << doctor::render_table(r);
  EXPECT_LE(kernels, wall * (1 + 1e-12)) << doctor::render_table(r);
  // The run behind the wall, found independently: its kernels are the reported ones, and its
  // time between kernels is the class table's last row. Walls are timed to the clock's
  // resolution, so on a tiny model two runs can tie on the median wall; the reported kernels are
  // then those of one of the tied runs.
  std::vector<size_t> tied;
  for (size_t i = 0; i < p.wall_samples_ms.size(); ++i)
    if (p.wall_samples_ms[i] == p.wall_ms) tied.push_back(i);
  ASSERT_FALSE(tied.empty());
  auto kernels_of = [&](size_t run) {
    for (size_t k = 0; k < p.kernels.size(); ++k)
      if (r.kernels[k].rec.time_ms != p.kernels[k].samples_ms[run]) return false;
    return true;
  };
  size_t run = tied.front();
  for (size_t i : tied)
    if (kernels_of(i)) run = i;
  for (size_t k = 0; k < p.kernels.size(); ++k)
    EXPECT_EQ(r.kernels[k].rec.time_ms, p.kernels[k].samples_ms[run])
        << p.kernels[k].name << " (walls: " << ::testing::PrintToString(p.wall_samples_ms) << ")";
  double in_run = 0;
  for (size_t k = 0; k < p.kernels.size(); ++k) in_run += p.kernels[k].samples_ms[run];
  ASSERT_EQ(r.classes.back().cls, doctor::kBetweenKernels);
  EXPECT_NEAR(r.classes.back().time_ms, p.wall_samples_ms[run] - in_run, 1e-9);
  EXPECT_NEAR(r.attribution.compute_ms + r.attribution.memory_ms + r.attribution.overhead_ms, wall,
              1e-9);
}

INSTANTIATE_TEST_SUITE_P(Examples, DoctorExamples,
                         ::testing::Values("mlp_tiny", "bert_tiny", "squeezenet1_1",
                                           "mobilenet_v3_small"));
