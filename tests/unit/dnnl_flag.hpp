// Whether this build has oneDNN. Without it (a machine without libdnnl) conv, pooling and matmul
// run on reference kernels: tests still check the values, and that structure instead of oneDNN's.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "brrr/session.hpp"

namespace brrr_test {
#ifdef BRRR_HAVE_DNNL
constexpr bool kDnnl = true;
#else
constexpr bool kDnnl = false;
#endif

// The start of every skip line of a test that needs oneDNN's kernels.
constexpr const char* kNoDnnl = "built without oneDNN (see configure's 'brrr: oneDNN' line)";

// Without oneDNN every Conv, MaxPool, AveragePool, MatMul and Gemm is one reference kernel (its
// epilogue may join it) and nothing claims a fused post-op.
inline void expect_reference_contractions(const brrr::Session& s) {
  int n = 0;
  for (const brrr::Node& node : s.graph().nodes)
    n += node.op == "Conv" || node.op == "MaxPool" || node.op == "AveragePool" ||
         node.op == "MatMul" || node.op == "Gemm";
  EXPECT_GT(n, 0) << s.plan_summary();
  EXPECT_EQ(s.num_kernels("reference"), n) << s.plan_summary();
  EXPECT_EQ(s.plan_summary().find("+sum"), std::string::npos) << s.plan_summary();
}
}  // namespace brrr_test
