// Fused attention on the CPU (plan/attention.cpp, backend/cpu/library_attention.cpp): the CPU
// plan makes one attention kernel of each float32 block, and its results equal the reference
// executor's with additive, causal, bool and no masks, grouped-query heads, a merged Q/K/V
// input, sizes that are no multiple of the kernel's blocks, and one or two threads.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "attention_graph.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "dnnl_flag.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "plan/target.hpp"
#include "random_tensor.hpp"

namespace brrr {
namespace {

using namespace attention_test;

// Runs the block on `threads` threads twice and compares with the reference; returns the number
// of attention kernels in the plan.
int check(const Spec& spec, int threads, const char* fused = "1") {
  brrr_test::EnvVar on("BRRR_CPU_FUSED_ATTENTION", fused);
  Graph g = attention(spec);
  std::mt19937 rng(5);
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) {
    const Value& v = g.value(id);
    // An additive mask of 0 and -10000 (BERT's), with every row keeping some keys.
    in[v.name] = v.name == "mask" ? brrr_test::uniform_f32(v.shape, rng, 0.f, 1.f)
                                  : brrr_test::uniform_f32(v.shape, rng, -2.f, 2.f);
    if (v.name == "mask")
      for (int64_t i = 0; i < in[v.name].numel(); ++i) {
        float& m = in[v.name].data<float>()[i];
        m = (m < 0.3f && i % 7 != 0) ? -10000.f : 0.f;
      }
  }
  SessionOptions o;
  o.threads = threads;
  Session s(g, o);
  std::vector<Tensor> got;
  for (int r = 0; r < 2; ++r) got = s.run(in);
  brrr_test::expect_outputs_close(got, run_reference(s.graph(), in), 1e-4, 1e-4, s.plan_summary());
  // Kernels are named after their first op ("k3_attention").
  const std::string plan = s.plan_summary();
  int n = 0;
  for (size_t at = plan.find("_attention "); at != std::string::npos; at = plan.find("_attention ", at + 1))
    ++n;
  return n;
}

TEST(CpuAttention, BertShapedAdditiveMask) {
  Spec s;
  s.mask = Mask::Add;
  for (int threads : {1, 2}) EXPECT_GE(check(s, threads), 1);
}

TEST(CpuAttention, OddSizesEveryMask) {
  // 37 rows and keys, head dim 40: partial row blocks, padded key blocks and head dims.
  for (Mask m : {Mask::None, Mask::Add, Mask::Causal, Mask::CausalAdd, Mask::Bool}) {
    Spec s;
    s.heads = 3, s.seq = 37, s.dim = 40, s.batch = 2, s.mask = m, s.nan_guard = m == Mask::Bool;
    EXPECT_GE(check(s, 2), 1) << int(m);
  }
}

TEST(CpuAttention, GroupedQueryMergedAndSplitScale) {
  Spec s;
  s.heads = 4, s.kv_heads = 2, s.seq = 70, s.dim = 32, s.mask = Mask::Causal;
  EXPECT_GE(check(s, 2), 1);
  Spec m;
  m.heads = 4, m.seq = 50, m.dim = 64, m.merged = true, m.split_scale = true;
  EXPECT_GE(check(m, 2), 1);
}

TEST(CpuAttention, SwitchOff) {
  Spec s;
  s.heads = 2, s.seq = 20, s.dim = 16, s.mask = Mask::Add;
  EXPECT_EQ(check(s, 2, "0"), 0);
}

// By default (2) the CPU fuses a block only where its keys are many (Whisper's encoder: 1500):
// at BERT's 128 the unfused GEMMs are as fast, and the plan keeps them.
TEST(CpuAttention, DefaultFusesLongSequencesOnly) {
  Spec s;
  s.heads = 2, s.dim = 16, s.mask = Mask::None;
  s.seq = plan::kCpuAttentionMinKeys - 1;
  EXPECT_EQ(check(s, 2, "2"), 0);
  s.seq = plan::kCpuAttentionMinKeys;
  EXPECT_EQ(check(s, 2, "2"), 1);
}

}  // namespace
}  // namespace brrr
