// Shared by the session tests (CPU and CUDA): a run's outputs against the reference executor's.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "brrr/tensor.hpp"

namespace brrr_test {

// Same count and shapes, and every element within atol + rtol * |want| (a NaN fails); a failure
// names the output, the first bad element and `context` (the plan summary).
inline void expect_outputs_close(const std::vector<brrr::Tensor>& got,
                                 const std::vector<brrr::Tensor>& want, double rtol, double atol,
                                 const std::string& context) {
  EXPECT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size() && k < want.size(); ++k) {
    EXPECT_EQ(got[k].shape(), want[k].shape());
    if (got[k].shape() != want[k].shape()) continue;
    int64_t bad = -1;
    for (int64_t i = 0; i < want[k].numel() && bad < 0; ++i) {
      double a = got[k].at_double(i), b = want[k].at_double(i);
      if (!(std::abs(a - b) <= atol + rtol * std::abs(b))) bad = i;
    }
    int64_t at = std::max<int64_t>(bad, 0);
    EXPECT_EQ(bad, -1) << "output " << k << " at " << bad << ": got " << got[k].at_double(at)
                       << " want " << want[k].at_double(at) << "\n"
                       << context;
  }
}

// Two runs of one session give the same bytes (recycled buffers, graph replay).
inline void expect_same_bytes(const std::vector<brrr::Tensor>& a,
                              const std::vector<brrr::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size() && k < b.size(); ++k)
    EXPECT_EQ(std::memcmp(a[k].raw(), b[k].raw(), a[k].nbytes()), 0) << "run 2 differs";
}

}  // namespace brrr_test
