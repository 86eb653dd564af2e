// Bool values in the CPU's generated kernels (codegen_cpp.cpp): a predicate's result between two
// ops of one kernel stays in registers (BERT's Softmax -> IsNaN -> Where, once 24 reference
// kernels), and a bool at a kernel's edge is a byte buffer, read as 0 or 1 and written as v != 0.
// Each plan equals the reference executor, fused and one kernel per op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "expect_outputs.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

struct Ran {
  int kernels = 0, reference = 0;
  std::string plan;
  std::vector<Tensor> got;
};

Ran run_checked(const Graph& g, const std::map<std::string, Tensor>& in, bool fusion) {
  SessionOptions so;
  so.fusion = fusion;
  Session s(g, so);
  std::vector<Tensor> got = s.run(in);
  std::vector<Tensor> want = run_reference(s.graph(), in);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), want[i].dtype()) << s.plan_summary();
    if (got[i].dtype() == DType::boolean) {
      Tensor a = got[i].cast(DType::f32), b = want[i].cast(DType::f32);
      EXPECT_EQ(a.numel(), b.numel());
      for (int64_t j = 0; j < std::min(a.numel(), b.numel()); ++j)
        EXPECT_EQ(a.at_double(j), b.at_double(j)) << "element " << j << "\n" << s.plan_summary();
    } else {
      brrr_test::expect_outputs_close({got[i]}, {want[i]}, 1e-6, 1e-6, s.plan_summary());
    }
  }
  return {s.num_kernels(), s.num_kernels("reference"), s.plan_summary(), got};
}

// BERT's TorchScript attention: softmax, then NaN (a row of -inf alone) replaced by 0.
TEST(CpuBool, SoftmaxIsNaNWhereIsOneKernel) {
  GraphBuilder b;
  int x = b.input("x", {2, 4});
  int p = b.node("Softmax", {x}, {{"axis", int64_t(-1)}});
  b.output(b.node("Where", {b.node("IsNaN", {p}), b.scalar(0.f), p}));
  const float inf = INFINITY;
  std::map<std::string, Tensor> in{
      {"x", Tensor::from_vector<float>({2, 4}, {1, 2, 3, 4, -inf, -inf, -inf, -inf})}};
  Ran fused = run_checked(b.g, in, true);
  EXPECT_EQ(fused.kernels, 1) << fused.plan;
  EXPECT_EQ(fused.reference, 0) << fused.plan;
  Tensor y = fused.got[0];
  for (int64_t j = 4; j < 8; ++j) EXPECT_EQ(y.at_double(j), 0.0);  // NaN row -> 0
  Ran unfused = run_checked(b.g, in, false);
  EXPECT_EQ(unfused.reference, 0) << unfused.plan;
}

// A bool output (written by a generated kernel) and a bool input (read by one): a comparison
// stored as bytes, And of two masks, and Where on a mask given by the caller.
TEST(CpuBool, BoolBuffersAtKernelEdges) {
  GraphBuilder b;
  int x = b.input("x", {3, 5}), y = b.input("y", {3, 5});
  int m = b.input("m", {3, 5}, DType::boolean);
  int gt = b.node("Greater", {x, y});
  b.output(gt);
  b.output(b.node("And", {gt, m}));
  b.output(b.node("Where", {m, x, b.node("Neg", {y})}));
  std::map<std::string, Tensor> in;
  std::vector<float> xv, yv;
  std::vector<bool> mv;
  for (int i = 0; i < 15; ++i) {
    xv.push_back(float(i % 4) - 1.5f);
    yv.push_back(float(i % 3) - 1.f);
    mv.push_back(i % 2 == 1);
  }
  in["x"] = Tensor::from_vector<float>({3, 5}, xv);
  in["y"] = Tensor::from_vector<float>({3, 5}, yv);
  in["m"] = Tensor::from_vector<bool>({3, 5}, mv);
  for (bool fusion : {true, false}) {
    Ran r = run_checked(b.g, in, fusion);
    EXPECT_EQ(r.reference, 0) << r.plan;
  }
}

}  // namespace
}  // namespace brrr
