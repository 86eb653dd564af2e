// A Llama decoder's glue on the CPU (Target::cpu(): generated_casts, generated_views,
// library_gather; generated_16bit and library_16bit_gemm for the bf16 form): the embedding Gather, RMSNorm's float32 Casts, rotary embedding's rotate_half
// (two Slices, a Neg and a Concat) and repeat_kv's Unsqueeze -> Expand -> Reshape run with no
// reference kernel, fused and one kernel per op, and equal the reference executor. Llama's exports
// ran 23 reference kernels per layer on these before.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "brrr/error.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "expect_outputs.hpp"
#include "llama_glue.hpp"
#include "plan/target.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

using namespace llama_glue_test;  // NOLINT: kSeq, llama_glue, ...

std::map<std::string, Tensor> ids(std::vector<int64_t> v) {
  return {{"ids", Tensor::from_vector<int64_t>({1, kSeq}, v)}};
}

TEST(CpuLlamaViews, NoReferenceKernelsAndTheReferenceResults) {
  const Graph g = llama_glue();
  const auto in = ids({3, 0, 10, -1, 7});  // a negative index counts from the end
  for (bool fusion : {true, false}) {
    SessionOptions so;
    so.fusion = fusion;
    Session s(g, so);
    EXPECT_EQ(s.num_kernels("reference"), 0) << s.plan_summary();
    std::vector<Tensor> got = s.run(in);
    std::vector<Tensor> want = run_reference(s.graph(), in);
    brrr_test::expect_outputs_close(got, want, 1e-5, 1e-5, s.plan_summary());
  }
}

// The bf16 exports' form of the same glue: 16-bit buffers in generated kernels, oneDNN's bf16
// matmuls, no reference kernel. One kernel keeps float32 where the reference rounds every node's
// result to bfloat16, so the bound is a few bfloat16 roundings of the largest score.
TEST(CpuLlamaViews, Bfloat16RunsWithoutReferenceKernels) {
  const Graph g = llama_glue(DType::bf16);
  const auto in = ids({3, 0, 10, -1, 7});
  for (bool fusion : {true, false}) {
    SessionOptions so;
    so.fusion = fusion;
    Session s(g, so);
    if (s.num_kernels("library") == 0) GTEST_SKIP() << "no oneDNN in this build";
    // Without avx512_bf16 or AMX oneDNN takes no bf16 matmul: those run as reference kernels.
    if (std::string why = plan::cpu_precision_refusal("bf16"); !why.empty()) GTEST_SKIP() << why;
    EXPECT_EQ(s.num_kernels("reference"), 0) << s.plan_summary();
    std::vector<Tensor> got = s.run(in);
    std::vector<Tensor> want = run_reference(s.graph(), in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) {
      EXPECT_EQ(got[o].dtype(), DType::bf16);
      double top = 0;
      for (int64_t i = 0; i < want[o].numel(); ++i) top = std::max(top, std::fabs(want[o].at_double(i)));
      brrr_test::expect_outputs_close({got[o]}, {want[o]}, 2e-2, 2e-2 * top, s.plan_summary());
    }
  }
}

// The Gather library kernel checks every index as the reference kernel does: one error naming
// the node, never a read out of bounds.
TEST(CpuLlamaViews, GatherIndexOutOfRangeIsAnError) {
  Session s(llama_glue(), SessionOptions{});
  for (int64_t bad : {int64_t(kVocab), int64_t(-kVocab - 1)}) {
    try {
      s.run(ids({1, 2, bad, 3, 4}));
      ADD_FAILURE() << "no error for index " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("index {} is out of range for axis 0 of size {}",
                                                       bad, kVocab)),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(s.run(ids({1, 2, 3, 4, 5})));  // the session runs on after the error
}

}  // namespace
}  // namespace brrr
