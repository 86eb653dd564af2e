// Compares a computed tensor with an expected one (test_data_set outputs). Shared by `brrr run
// --check` and the ONNX conformance runner, so both judge results the same way.
#pragma once
#include <string>

#include "brrr/tensor.hpp"

namespace brrr::cli {

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-6;
  // When true, atol is relative to the expected output's scale S = max|expected| (1 if all zero),
  // so outputs of tiny magnitude (mobilenet's ~1e-9) are judged by their own scale.
  bool scale_atol = true;
};

struct Comparison {
  bool pass = false;
  std::string problem;     // dtype or shape mismatch; empty when the values were compared
  double max_abs = 0;      // max |got - expected|
  double max_rel = 0;      // max |got - expected| / max(|expected|, tiny)
  double scale = 1;        // S used for atol (1 when scale_atol is off)
  int64_t mismatches = 0;  // elements outside the criterion
  int64_t worst = -1;      // flat index of the element furthest outside the criterion
  double worst_got = 0, worst_expected = 0;
};

// Floats: pass iff |got - exp| <= atol*S + rtol*|exp| for every element (NaN matches NaN, inf
// matches the same inf). Integers and bool: exact.
Comparison compare_tensors(const Tensor& got, const Tensor& expected, const Tolerance& tol);

// "|got-exp| <= 1e-06*S + 0.0001*|exp|, S = max|exp| = 3.2e-09" (or "exact" for integers).
std::string criterion_str(const Tensor& expected, const Tolerance& tol, const Comparison& c);

// "min=.. max=.. mean=.. first=[a, b, c, ...]" for printing a tensor briefly.
std::string tensor_summary(const Tensor& t, int first_n = 5);

}  // namespace brrr::cli
