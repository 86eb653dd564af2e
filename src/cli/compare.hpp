// Compares a computed tensor with an expected one (test_data_set outputs). Shared by `brrr run
// --check` and the ONNX conformance runner, so both judge results the same way.
#pragma once
#include <string>

#include "brrr/graph.hpp"
#include "brrr/tensor.hpp"

namespace brrr::cli {

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-6;
  // When true, atol is relative to the expected output's scale S = max|expected| (1 if all zero),
  // so outputs of tiny magnitude (mobilenet's ~1e-9) are judged by their own scale.
  bool scale_atol = true;
  // Largest relative L2 error ||got-exp|| / ||exp|| that passes; negative: not checked.
  double l2 = -1;
  // True: floating outputs of different dtypes (a bfloat16 result against a float32 reference)
  // are compared as values; false: a dtype mismatch is a problem (the conformance runner).
  bool convert_floats = false;
};

// The precisions a plan computes at, coarsest last: fp32 < tf32 < fp16 < bf16 (by mantissa bits
// where values are stored or multiplied).
std::string coarser_precision(const std::string& a, const std::string& b);

// The precision an output was computed at, for its default tolerance: `--precision` made coarser
// by any 16-bit floats the prepared graph holds (a bfloat16 model computes in bfloat16 whatever
// the GEMM setting) and by the dtypes of the two tensors compared.
std::string output_precision(const std::string& option, const Graph& g, const Tensor& got,
                             const Tensor& expected);

// `brrr run --check`'s default tolerance at a precision (fp32, tf32, fp16 or bf16): loose enough
// that a correct deep model (12 residual blocks against a float32 reference) passes, tight enough
// that one wrong weight fails; tests/cli/test_cli_check.cpp shows both at each precision.
Tolerance default_tolerance(const std::string& precision);

struct Comparison {
  bool pass = false;
  std::string problem;     // dtype or shape mismatch; empty when the values were compared
  double max_abs = 0;      // max |got - expected| over finite pairs
  double max_rel = 0;      // max |got - expected| / |expected| where |expected| >= 1e-3 max|exp|
  double rel_l2 = 0;       // ||got - expected|| / ||expected|| over finite pairs (norm 1 if zero)
  double scale = 1;        // S used for atol (1 when scale_atol is off); max|exp| when it is on
  int64_t mismatches = 0;  // elements outside the criterion (non-finite mismatches included)
  int64_t nonfinite_mismatches = 0;  // NaN or inf in one tensor where the other differs
  int64_t got_nan = 0, got_inf = 0, expected_nan = 0, expected_inf = 0;
  // The worst element: furthest outside the criterion when some fail, else the largest error.
  int64_t worst = -1;
  double worst_got = 0, worst_expected = 0;
  bool l2_pass = true;  // rel_l2 <= tol.l2 (true when not checked)
};

// Floats: pass iff |got - exp| <= atol*S + rtol*|exp| for every element and the relative L2 error
// is within tol.l2; NaN matches only NaN and inf only the same inf. Integers and bool: exact.
Comparison compare_tensors(const Tensor& got, const Tensor& expected, const Tolerance& tol);

// "|got-exp| <= 1e-06*S + 0.0001*|exp|, S = max|exp| = 3.2e-09" (or "exact" for integers), with
// ", rel L2 <= 0.01" when the L2 bound is checked.
std::string criterion_str(const Tensor& expected, const Tolerance& tol, const Comparison& c);

// "[0, 3, 17]": a flat row-major index as a multi-index of `shape`.
std::string index_str(const Shape& shape, int64_t flat);

// "min=.. max=.. mean=.. first=[a, b, c, ...]" for printing a tensor briefly.
std::string tensor_summary(const Tensor& t, int first_n = 5);

}  // namespace brrr::cli
