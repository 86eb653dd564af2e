// The backend sweep (after ggml's tests/test-backend-ops.cpp): for every OpTable entry, small
// graphs in every dtype the op's shape inference accepts (a few shapes each: broadcasting, odd and
// large sizes, zero-size dims where legal, NaN and infinities, fused chains and library epilogues)
// run through CPU sessions, fused (generated code and library kernels) and one kernel per op, and
// through CUDA sessions when a device is present; every output is compared with the reference
// executor under the op's tolerance. An op in the table without a sweep entry fails
// BackendOpsCoverage.EveryOpHasASweep, so no op lands untested; a case that no dtype accepts fails
// its op's test, so no case silently tests nothing.
//
// Only the public API is used (include/brrr: graph building, infer_shapes, Session, the reference
// executor), so the sweep outlives the restructuring of the executors it checks.
//
// All the (case, dtype) pieces of one op go into one graph, so each mode compiles once per op; a
// session that fails to build is retried piece by piece to name the piece that breaks it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "brrr/error.hpp"
#include "brrr/graph.hpp"
#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "passes/pipeline.hpp"

using namespace brrr;

namespace {

const std::vector<DType> kAllTypes = {DType::f32, DType::f16, DType::bf16,
                                      DType::f64, DType::i64, DType::i32,
                                      DType::i8,  DType::u8,  DType::boolean};
constexpr int kOpset = 21;

// What random data an input holds (per dtype: integers and bool get the integral analogue).
enum class Data {
  any,      // floats in [-3, 3]; integers in [-5, 5] (u8: [0, 10])
  pos,      // (0.1, 3]; integers [1, 5]
  unit,     // (-0.9, 0.9); integers [-1, 1]
  nonzero,  // |x| in [0.5, 3]; integers +-[1, 5] (u8: [1, 5])
  halves,   // multiples of 0.5 in [-4, 4] (ties for Round and arg-reductions); integers [-4, 4]
  special,  // floats: NaN, +-inf, +-0 and ordinary values; integers as `nonzero`
  small,    // [0, 3] for exponents and products; floats and integers
  wide,     // floats in [-80, 80] (overflow of exp and friends); integers as `any`
};

// Builds one piece (one case in one dtype) into a graph that may hold many pieces.
struct Piece {
  Graph& g;
  std::map<std::string, Tensor>& feeds;
  std::string prefix;
  DType t;  // the dtype under test
  std::mt19937_64 rng;
  int count = 0;

  std::string fresh(const char* what) { return prefix + what + std::to_string(count++); }

  std::vector<double> values(int64_t n, DType dt, Data d) {
    std::vector<double> v(static_cast<size_t>(n));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    bool flt = is_floating(dt);
    auto ui = [&](int lo, int hi) { return double(lo + int(u(rng) * (hi - lo + 1) * 0.999999)); };
    for (double& x : v) {
      if (dt == DType::boolean) {
        x = u(rng) < 0.5 ? 0 : 1;
        continue;
      }
      switch (d) {
        case Data::any:
          x = flt ? -3 + 6 * u(rng) : dt == DType::u8 ? ui(0, 10) : ui(-5, 5);
          break;
        case Data::pos:
          x = flt ? 0.1 + 2.9 * u(rng) : ui(1, 5);
          break;
        case Data::unit:
          x = flt ? -0.9 + 1.8 * u(rng) : dt == DType::u8 ? ui(0, 1) : ui(-1, 1);
          break;
        case Data::nonzero:
          x = flt ? 0.5 + 2.5 * u(rng) : ui(1, 5);
          if (dt != DType::u8 && u(rng) < 0.5) x = -x;
          break;
        case Data::halves:
          x = dt == DType::u8 ? ui(0, 8) : flt ? 0.5 * ui(-8, 8) : ui(-4, 4);
          break;
        case Data::special: {
          static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.5, -2.25, 0.75};
          x = flt ? sp[size_t(u(rng) * 8) % 8] : ui(1, 5);  // integers: divisors too, no zero
          if (dt != DType::u8 && !flt && u(rng) < 0.5) x = -x;
          break;
        }
        case Data::small:
          x = flt ? 3 * u(rng) : ui(0, 3);
          break;
        case Data::wide:
          x = flt ? -80 + 160 * u(rng) : dt == DType::u8 ? ui(0, 10) : ui(-5, 5);
          break;
      }
    }
    return v;
  }
  Tensor tensor(const Shape& s, DType dt, Data d) {
    return Tensor::from_vector<double>(s, values(shape_numel(s), dt, d)).cast(dt);
  }
  // A graph input fed with random data.
  int in(const Shape& s, Data d = Data::any) { return in_as(s, t, d); }
  int in_as(const Shape& s, DType dt, Data d = Data::any) {
    int id = g.add_value(fresh("x"));
    Value& v = g.value(id);
    v.dtype = dt, v.shape = s, v.typed = true;
    g.inputs.push_back(id);
    feeds[v.name] = tensor(s, dt, d);
    return id;
  }
  // A graph input fed with the given values (indices, conditions).
  int in_vals(const Shape& s, DType dt, const std::vector<double>& vals) {
    int id = g.add_value(fresh("x"));
    Value& v = g.value(id);
    v.dtype = dt, v.shape = s, v.typed = true;
    g.inputs.push_back(id);
    feeds[v.name] = Tensor::from_vector<double>(s, vals).cast(dt);
    return id;
  }
  int cst(const Tensor& x) {
    int id = g.add_value(fresh("c"));
    Value& v = g.value(id);
    v.dtype = x.dtype(), v.shape = x.shape(), v.constant = x, v.typed = true;
    return id;
  }
  // A constant of the dtype under test with random data (weights, scales).
  int weight(const Shape& s, Data d = Data::any) { return cst(tensor(s, t, d)); }
  int ints(const std::vector<int64_t>& v) {
    return cst(Tensor::from_vector<int64_t>({int64_t(v.size())}, v));
  }
  int int_scalar(int64_t v) { return cst(Tensor::scalar<int64_t>(v)); }
  // A scalar constant of dtype `dt` (the dtype under test by default).
  int scalar(double v) { return scalar_as(v, t); }
  int scalar_as(double v, DType dt) { return cst(Tensor::from_vector<double>({}, {v}).cast(dt)); }
  // Index data in [-bound, bound) (negative indices count from the end), or [0, bound).
  std::vector<double> idx(int64_t n, int64_t bound, bool negative = true) {
    std::vector<double> v(static_cast<size_t>(n));
    std::uniform_int_distribution<int64_t> u(negative ? -bound : 0, bound - 1);
    for (double& x : v) x = double(u(rng));
    return v;
  }
  int idx_const(const Shape& s, int64_t bound, bool negative = true) {
    return cst(
        Tensor::from_vector<double>(s, idx(shape_numel(s), bound, negative)).cast(DType::i64));
  }
  int idx_input(const Shape& s, int64_t bound, bool negative = true) {
    return in_vals(s, DType::i64, idx(shape_numel(s), bound, negative));
  }

  std::vector<int> op_n(const std::string& op, std::vector<int> ins, int nout,
                        std::map<std::string, AttrValue> attrs = {}) {
    Node n;
    n.op = op;
    n.name = fresh(op.c_str());
    n.inputs = std::move(ins);
    n.attrs = std::move(attrs);
    for (int i = 0; i < nout; ++i)
      n.outputs.push_back(g.add_value(n.name + "_y" + std::to_string(i)));
    g.nodes.push_back(std::move(n));
    return g.nodes.back().outputs;
  }
  int op(const std::string& op, std::vector<int> ins, std::map<std::string, AttrValue> attrs = {}) {
    return op_n(op, std::move(ins), 1, std::move(attrs))[0];
  }
  void out(int v) { g.outputs.push_back(v); }
  // Adds the op's node and makes its outputs graph outputs.
  void emit(const std::string& o, std::vector<int> ins, std::map<std::string, AttrValue> attrs = {},
            int nout = 1) {
    for (int v : op_n(o, std::move(ins), nout, std::move(attrs))) out(v);
  }
};

using Build = std::function<void(Piece&)>;
// Arithmetic a case adds around its op, which sets the least tolerance of its float outputs.
enum class Chain {
  none,
  // Pointwise ops the fuser joins: at least kTight, since generated code may contract a * b + c
  // into one fused multiply-add.
  pointwise,
  // Through convs or matmuls: kAccum relative to the output's largest magnitude, since sums of
  // many products cancel and the library's summation order (blocking, Winograd) is its own.
  contraction,
};

struct Case {
  std::string name;
  Build build;
  Chain chain = Chain::none;
};

struct Tol {
  double atol, rtol;
  bool of_max = false;  // rtol scales the output's largest |value|, not each element's
};
constexpr Tol kExact{0, 0};        // copies, comparisons, integer results
constexpr Tol kTight{1e-6, 1e-5};  // one rounding or so
constexpr Tol kMath{1e-6, 2e-5};   // special functions (libm vs the generated helpers)
constexpr Tol kAccum{1e-5, 1e-4};  // sums over a row or a window, in any order

struct OpSweep {
  std::string op;
  std::vector<Case> cases;
  Tol tol = kTight;  // for float32; other float types scale from it (tol_for)
};

// Tolerance of one output: the op's f32 tolerance, widened to the storage precision of 16-bit
// floats (their results round to 2^-11 / 2^-8 relative), and a little on CUDA (fast intrinsics)
// and for a fused 16-bit chain (one kernel keeps float32 between the ops the reference rounds to
// 16 bits one by one, so a cancelling op * y + x differs by more than one rounding).
Tol tol_for(const OpSweep& s, const Case& c, DType t, bool cuda, bool fused) {
  Tol r = s.tol;
  if (c.chain == Chain::pointwise)
    r = {std::max(r.atol, kTight.atol), std::max(r.rtol, kTight.rtol)};
  if (c.chain == Chain::contraction)
    r = {std::max(r.atol, kAccum.atol), std::max(r.rtol, kAccum.rtol), true};
  if (t == DType::f16) r = {std::max(r.atol, 1e-3), std::max(r.rtol, 2e-3), r.of_max};
  if (t == DType::bf16) r = {std::max(r.atol, 1e-2), std::max(r.rtol, 1.6e-2), r.of_max};
  if ((cuda && is_floating(t)) || (fused && c.chain != Chain::none && dtype_size(t) == 2))
    r = {r.atol * 10 + 1e-6, r.rtol * 10 + 1e-5, r.of_max};
  return r;
}

using Attrs = std::map<std::string, AttrValue>;

// ---- case generators for families of ops ----

// What an elementwise op takes and gives, for the fused chain around it.
enum class Kind { numeric, to_bool, boolean };

std::vector<Case> unary_cases(const std::string& op, Data d = Data::any, Attrs a = {},
                              Kind kind = Kind::numeric) {
  // Inside a chain the fuser joins into one kernel: op(x) * y + x, or its logic analogue.
  Build chain = [=](Piece& p) {
    int x = p.in({5, 31}, d);
    if (kind == Kind::numeric) {
      p.out(p.op("Add", {p.op("Mul", {p.op(op, {x}, a), p.in({31}, d)}), x}));
    } else if (kind == Kind::to_bool) {
      p.out(p.op("Xor", {p.op(op, {p.op("Neg", {x})}, a), p.in_as({31}, DType::boolean)}));
    } else {
      p.out(p.op("Or", {p.op(op, {p.op("And", {x, p.in({31})})}, a), x}));
    }
  };
  return {
      {"vec7", [=](Piece& p) { p.emit(op, {p.in({7}, d)}, a); }},
      // NaN, infinities and signed zeros, and magnitudes where naive formulas overflow: the
      // generated helpers and the reference must agree there too.
      {"special_values",
       [=](Piece& p) {
         p.emit(op, {p.in({8, 8}, Data::special)}, a);
       }},
      {"wide_range", [=](Piece& p) { p.emit(op, {p.in({64}, Data::wide)}, a); }},
      {"3x5x17",
       [=](Piece& p) {
         p.emit(op, {p.in({3, 5, 17}, d)}, a);
       }},
      {"scalar", [=](Piece& p) { p.emit(op, {p.in({}, d)}, a); }},
      {"zero_dim",
       [=](Piece& p) {
         p.emit(op, {p.in({0, 4}, d)}, a);
       }},
      // Large and odd: vector loops with tails, work split over threads.
      {"large_67x129",
       [=](Piece& p) {
         p.emit(op, {p.in({67, 129}, d)}, a);
       }},
      {"fused_chain", chain, Chain::pointwise},
      // A transposed input: generated kernels load it through an index map.
      {"transposed",
       [=](Piece& p) {
         int x = p.op("Transpose", {p.in({5, 3, 2}, d)}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
         p.emit(op, {x}, a);
       }},
  };
}

std::vector<Case> binary_cases(const std::string& op, Data d0 = Data::any, Data d1 = Data::any,
                               Attrs a = {}, Kind kind = Kind::numeric) {
  Build chain = [=](Piece& p) {
    int x = p.in({6, 19}, d0), y = p.in({19}, d1);
    if (kind == Kind::boolean)
      p.out(p.op("Not", {p.op(op, {p.op("Not", {x}), y}, a)}));
    else
      p.out(p.op(kind == Kind::numeric ? "Neg" : "Not", {p.op(op, {p.op("Abs", {x}), y}, a)}));
  };
  auto two = [=](Shape s0, Shape s1) {
    return [=](Piece& p) { p.emit(op, {p.in(s0, d0), p.in(s1, d1)}, a); };
  };
  return {
      {"same_3x17", two({3, 17}, {3, 17})},
      {"special_values",
       [=](Piece& p) {
         p.emit(op, {p.in({8, 8}, Data::special), p.in({8}, Data::special)}, a);
       }},
      {"bcast_4x1x5_3x1", two({4, 1, 5}, {3, 1})},
      {"scalar_rhs", two({2, 3}, {})},
      {"odd_1x7_5x1", two({1, 7}, {5, 1})},
      {"row_6x33_33", two({6, 33}, {33})},
      {"zero_dim", two({0, 3}, {3})},
      {"large_33x257_257", two({33, 257}, {257})},
      {"large_col_bcast", two({129, 67}, {129, 1})},
      {"fused_chain", chain, Chain::pointwise},
      {"const_rhs",
       [=](Piece& p) {
         p.emit(op, {p.in({4, 9}, d0), p.cst(p.tensor({9}, p.t, d1))}, a);
       }},
  };
}

std::vector<Case> variadic_cases(const std::string& op) {
  return {
      {"one",
       [=](Piece& p) {
         p.emit(op, {p.in({3, 5})});
       }},
      {"two_bcast",
       [=](Piece& p) {
         p.emit(op, {p.in({4, 1, 5}), p.in({3, 1})});
       }},
      {"three_bcast",
       [=](Piece& p) {
         p.emit(op, {p.in({2, 3}), p.in({3}), p.in({2, 1})});
       }},
      {"zero_dim",
       [=](Piece& p) {
         p.emit(op, {p.in({0, 3}), p.in({3})});
       }},
  };
}

std::vector<Case> reduce_cases(const std::string& op, Data d) {
  auto red = [=](Shape s, std::vector<int64_t> axes, int64_t keep) {
    return [=](Piece& p) {
      std::vector<int> ins{p.in(s, d)};
      if (!axes.empty()) ins.push_back(p.ints(axes));
      p.emit(op, ins, {{"keepdims", keep}});
    };
  };
  return {
      {"all_3x5x7", red({3, 5, 7}, {}, 1)},
      {"special_values",
       [=](Piece& p) {
         p.emit(op, {p.in({4, 9}, Data::special), p.ints({1})}, {{"keepdims", int64_t(0)}});
       }},
      {"axis1_drop", red({3, 5, 7}, {1}, 0)},
      {"last_4x33", red({4, 33}, {-1}, 1)},
      {"axes02_2x3x4x5", red({2, 3, 4, 5}, {0, 2}, 0)},
      {"zero_outer", red({0, 5}, {1}, 1)},
      {"vec", red({19}, {0}, 0)},
      {"large_rows_37x1031", red({37, 1031}, {1}, 1)},
      {"large_cols_1031x37", red({1031, 37}, {0}, 0)},
      // A pointwise prologue the fuser can pull into the reduction, and an epilogue after it.
      {"fused_prologue",
       [=](Piece& p) {
         int x = p.op("Abs", {p.in({6, 40}, d)});
         int r = p.op(op, {x, p.ints({-1})}, {{"keepdims", int64_t(1)}});
         p.out(p.op("Add", {r, p.in({6, 1}, d)}));
       },
       Chain::pointwise},
      {"noop_empty_axes",
       [=](Piece& p) {
         p.emit(op, {p.in({3, 4}, d)}, {{"noop_with_empty_axes", int64_t(1)}});
       }},
  };
}

std::vector<Case> softmax_cases(const std::string& op) {
  auto sm = [=](Shape s, int64_t axis) {
    return [=](Piece& p) { p.emit(op, {p.in(s)}, {{"axis", axis}}); };
  };
  return {{"last_3x17", sm({3, 17}, -1)},
          {"special_values",
           [=](Piece& p) {
             p.emit(op, {p.in({4, 8}, Data::special)}, {{"axis", int64_t(-1)}});
           }},
          {"wide_range",
           [=](Piece& p) {
             p.emit(op, {p.in({4, 8}, Data::wide)}, {{"axis", int64_t(-1)}});
           }},
          {"middle_2x3x5", sm({2, 3, 5}, 1)},
          {"first_4x6", sm({4, 6}, 0)},
          {"vec", sm({9}, 0)},
          {"zero_rows", sm({0, 5}, -1)},
          {"large_7x1000", sm({7, 1000}, -1)},
          {"after_mul",
           [=](Piece& p) {
             int x = p.op("Mul", {p.in({4, 33}), p.in({33})});
             p.emit(op, {x}, {{"axis", int64_t(-1)}});
           },
           Chain::pointwise}};
}

std::vector<Case> pool_cases(const std::string& op, Attrs extra) {
  auto pool = [=](Shape s, Attrs a, int nout = 1) {
    for (auto& [k, v] : extra) a[k] = v;
    return [=](Piece& p) { p.emit(op, {p.in(s)}, a, nout); };
  };
  using V = std::vector<int64_t>;
  std::vector<Case> c = {
      {"special_values",
       [=](Piece& p) {
         Attrs a{{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}};
         for (auto& [k, v] : extra) a[k] = v;
         p.emit(op, {p.in({1, 2, 6, 6}, Data::special)}, a);
       }},
      {"k3_s2_p1",
       pool({1, 3, 9, 9},
            {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}})},
      {"k2_ceil",
       pool({2, 2, 7, 8},
            {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t(1)}})},
      {"k3_asym_pads", pool({1, 2, 6, 5}, {{"kernel_shape", V{3, 2}}, {"pads", V{0, 1, 2, 0}}})},
      {"1d_k3", pool({1, 2, 11}, {{"kernel_shape", V{3}}, {"strides", V{2}}})},
      {"large_16ch",
       pool({2, 16, 19, 19},
            {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}})},
  };
  // Between two convs: library kernels may keep the values NHWC or channel-blocked.
  c.push_back({"between_convs",
               [=](Piece& p) {
                 Attrs a{{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}};
                 for (auto& [k, v] : extra) a[k] = v;
                 int y = p.op("Conv", {p.in({1, 16, 10, 10}), p.weight({16, 16, 3, 3})},
                              {{"pads", V{1, 1, 1, 1}}});
                 int z = p.op(op, {y}, a);
                 p.out(p.op("Conv", {z, p.weight({16, 16, 1, 1}), p.weight({16})}));
               },
               Chain::contraction});
  if (op != "LpPool")
    c.push_back(
        {"dilated", pool({1, 2, 9, 9}, {{"kernel_shape", V{2, 2}}, {"dilations", V{2, 2}}})});
  if (op == "MaxPool")
    c.push_back(
        {"with_indices", pool({1, 2, 6, 6}, {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}}, 2)});
  if (op == "AveragePool")
    c.push_back({"count_include_pad", pool({1, 2, 5, 5}, {{"kernel_shape", V{3, 3}},
                                                          {"pads", V{1, 1, 1, 1}},
                                                          {"count_include_pad", int64_t(1)}})});
  return c;
}

int64_t onnx_code(DType t) {
  return int64_t(dtype_to_onnx(t));
}

// ---- the table: one entry per op ----

std::vector<OpSweep> build_sweep_table() {
  using V = std::vector<int64_t>;
  std::vector<OpSweep> t;
  auto add = [&](std::string op, std::vector<Case> cases, Tol tol = kTight) {
    t.push_back({std::move(op), std::move(cases), tol});
  };

  // Unary math and activations.
  add("Sqrt", unary_cases("Sqrt", Data::pos), kMath);
  add("Reciprocal", unary_cases("Reciprocal", Data::nonzero));
  add("Exp", unary_cases("Exp"), kMath);
  add("Log", unary_cases("Log", Data::pos), kMath);
  add("Tanh", unary_cases("Tanh"), kMath);
  add("Erf", unary_cases("Erf"), kMath);
  add("Cos", unary_cases("Cos"), kMath);
  add("Sin", unary_cases("Sin"), kMath);
  add("Tan", unary_cases("Tan", Data::unit), kMath);
  add("Acos", unary_cases("Acos", Data::unit), kMath);
  add("Asin", unary_cases("Asin", Data::unit), kMath);
  add("Atan", unary_cases("Atan"), kMath);
  add("Sinh", unary_cases("Sinh"), kMath);
  add("Cosh", unary_cases("Cosh"), kMath);
  add("Floor", unary_cases("Floor", Data::halves), kExact);
  add("Ceil", unary_cases("Ceil", Data::halves), kExact);
  add("Round", unary_cases("Round", Data::halves), kExact);
  add("Not", unary_cases("Not", Data::any, {}, Kind::boolean), kExact);
  add("Neg", unary_cases("Neg"), kExact);
  add("Abs", unary_cases("Abs"), kExact);
  add("Sign", unary_cases("Sign", Data::special), kExact);
  add("Relu", unary_cases("Relu", Data::special), kExact);
  add("Sigmoid", unary_cases("Sigmoid"), kMath);
  add("LeakyRelu", unary_cases("LeakyRelu", Data::any, {{"alpha", 0.1f}}));
  add("Elu", unary_cases("Elu", Data::any, {{"alpha", 0.7f}}), kMath);
  add("Celu", unary_cases("Celu", Data::any, {{"alpha", 1.3f}}), kMath);
  add("Selu", unary_cases("Selu"), kMath);
  add("ThresholdedRelu", unary_cases("ThresholdedRelu", Data::halves, {{"alpha", 0.5f}}));
  add("HardSigmoid", unary_cases("HardSigmoid", Data::any, {{"alpha", 0.3f}, {"beta", 0.4f}}));
  add("HardSwish", unary_cases("HardSwish"));
  add("Softplus", unary_cases("Softplus"), kMath);
  add("Softsign", unary_cases("Softsign"));
  add("Mish", unary_cases("Mish"), kMath);
  {
    std::vector<Case> c = unary_cases("Gelu");
    for (Case& k : unary_cases("Gelu", Data::any, {{"approximate", std::string("tanh")}}))
      c.push_back({"tanh_" + k.name, k.build, k.chain});
    add("Gelu", c, kMath);
  }
  add("IsNaN", unary_cases("IsNaN", Data::special, {}, Kind::to_bool), kExact);
  {
    std::vector<Case> c = unary_cases("IsInf", Data::special, {}, Kind::to_bool);
    c.push_back(
        {"positive_only", [](Piece& p) {
           p.emit("IsInf", {p.in({4, 8}, Data::special)}, {{"detect_negative", int64_t(0)}});
         }});
    c.push_back(
        {"negative_only", [](Piece& p) {
           p.emit("IsInf", {p.in({4, 8}, Data::special)}, {{"detect_positive", int64_t(0)}});
         }});
    add("IsInf", c, kExact);
  }
  add("Identity", unary_cases("Identity", Data::special), kExact);
  {
    std::vector<Case> c = unary_cases("Dropout");
    c.push_back({"with_mask", [](Piece& p) { p.emit("Dropout", {p.in({3, 7})}, {}, 2); }});
    c.push_back({"ratio_inference", [](Piece& p) {
                   p.emit("Dropout", {p.in({3, 7}), p.scalar_as(0.3, DType::f32)});
                 }});
    add("Dropout", c, kExact);
  }

  // Casts: to every dtype, from values that every target can hold (and negatives for the signed).
  {
    std::vector<Case> c, like;
    for (DType to : kAllTypes) {
      std::string n(dtype_name(to));
      c.push_back({"to_" + n, [to](Piece& p) {
                     p.emit("Cast", {p.in({3, 11}, Data::small)}, {{"to", onnx_code(to)}});
                   }});
      like.push_back({"like_" + n, [to](Piece& p) {
                        p.emit("CastLike", {p.in({3, 11}, Data::small), p.in_as({1}, to)});
                      }});
      if (to != DType::u8 && to != DType::boolean)
        c.push_back({"negative_to_" + n, [to](Piece& p) {
                       p.emit("Cast", {p.in({13}, Data::halves)}, {{"to", onnx_code(to)}});
                     }});
    }
    c.push_back({"zero_dim", [](Piece& p) {
                   p.emit("Cast", {p.in({0, 3})}, {{"to", onnx_code(DType::f32)}});
                 }});
    add("Cast", c);
    add("CastLike", like);
  }
  add("Clip",
      {
          {"min_max",
           [](Piece& p) {
             p.emit("Clip", {p.in({3, 17}), p.scalar(-1), p.scalar(2)});
           }},
          {"min_only",
           [](Piece& p) {
             p.emit("Clip", {p.in({5, 4}), p.scalar(0.5)});
           }},
          {"max_only",
           [](Piece& p) {
             p.emit("Clip", {p.in({5, 4}), -1, p.scalar(1)});
           }},
          {"none", [](Piece& p) { p.emit("Clip", {p.in({6})}); }},
          {"runtime_bounds",
           [](Piece& p) {
             p.emit("Clip", {p.in({2, 9}), p.in({}, Data::unit), p.in({}, Data::pos)});
           }},
          {"zero_dim",
           [](Piece& p) {
             p.emit("Clip", {p.in({0, 2}), p.scalar(0)});
           }},
      },
      kExact);
  add("PRelu", {
                   {"channel_slope",
                    [](Piece& p) {
                      p.emit("PRelu", {p.in({2, 3, 4, 5}), p.weight({3, 1, 1})});
                    }},
                   {"last_dim_slope",
                    [](Piece& p) {
                      p.emit("PRelu", {p.in({4, 7}), p.in({7})});
                    }},
                   {"scalar_slope",
                    [](Piece& p) {
                      p.emit("PRelu", {p.in({3, 5}), p.weight({1})});
                    }},
                   {"zero_dim",
                    [](Piece& p) {
                      p.emit("PRelu", {p.in({0, 5}), p.weight({5})});
                    }},
               });

  // Binary arithmetic, comparisons and logic.
  add("Add", binary_cases("Add"));
  add("Sub", binary_cases("Sub"));
  add("Mul", binary_cases("Mul"));
  add("Div", binary_cases("Div", Data::any, Data::nonzero));
  {
    std::vector<Case> c = binary_cases("Pow", Data::pos, Data::small);
    c.push_back({"int64_exponent", [](Piece& p) {
                   p.emit("Pow", {p.in({3, 5}, Data::unit), p.in_as({5}, DType::i64, Data::small)});
                 }});
    c.push_back(
        {"float_exponent", [](Piece& p) {
           p.emit("Pow", {p.in({3, 5}, Data::small), p.in_as({1}, DType::f32, Data::small)});
         }});
    add("Pow", c, kMath);
  }
  {
    std::vector<Case> c = binary_cases("Mod", Data::any, Data::nonzero);
    for (Case& k : binary_cases("Mod", Data::any, Data::nonzero, {{"fmod", int64_t(1)}}))
      c.push_back({"fmod_" + k.name, k.build, k.chain});
    add("Mod", c, kTight);
  }
  for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
    add(op, binary_cases(op, Data::halves, Data::halves, {}, Kind::to_bool), kExact);
  for (const char* op : {"And", "Or", "Xor"})
    add(op, binary_cases(op, Data::any, Data::any, {}, Kind::boolean), kExact);
  add("Where",
      {
          {"same",
           [](Piece& p) {
             p.emit("Where", {p.in_as({3, 7}, DType::boolean), p.in({3, 7}), p.in({3, 7})});
           }},
          {"bcast",
           [](Piece& p) {
             p.emit("Where", {p.in_as({4, 1}, DType::boolean), p.in({3}), p.in({4, 3})});
           }},
          {"scalar_branch",
           [](Piece& p) {
             p.emit("Where", {p.in_as({2, 5}, DType::boolean), p.in({2, 5}), p.scalar(0)});
           }},
          {"zero_dim",
           [](Piece& p) {
             p.emit("Where", {p.in_as({0, 3}, DType::boolean), p.in({3}), p.in({0, 3})});
           }},
      },
      kExact);
  add("Sum", variadic_cases("Sum"));
  add("Mean", variadic_cases("Mean"));
  {
    std::vector<Case> c = variadic_cases("Max");
    c.push_back({"nan", [](Piece& p) {
                   p.emit("Max", {p.in({4, 6}, Data::special), p.in({6}, Data::special)});
                 }});
    add("Max", c, kExact);
    c = variadic_cases("Min");
    c.push_back({"nan", [](Piece& p) {
                   p.emit("Min", {p.in({4, 6}, Data::special), p.in({6}, Data::special)});
                 }});
    add("Min", c, kExact);
  }

  // Normalizations.
  add("Softmax", softmax_cases("Softmax"), kMath);
  add("LogSoftmax", softmax_cases("LogSoftmax"), kAccum);
  add("Hardmax", softmax_cases("Hardmax"), kExact);
  add("LayerNormalization",
      {
          {"last_3x17",
           [](Piece& p) {
             p.emit("LayerNormalization", {p.in({3, 17}), p.weight({17}), p.weight({17})});
           }},
          {"axis1_2x3x4",
           [](Piece& p) {
             p.emit("LayerNormalization", {p.in({2, 3, 4}), p.weight({3, 4}), p.weight({3, 4})},
                    {{"axis", int64_t(1)}});
           }},
          {"no_bias",
           [](Piece& p) {
             p.emit("LayerNormalization", {p.in({5, 8}), p.in({8})});
           }},
          {"mean_invstd",
           [](Piece& p) {
             p.emit("LayerNormalization", {p.in({4, 6}), p.weight({6}), p.weight({6})},
                    {{"epsilon", 1e-3f}}, 3);
           }},
          {"zero_rows",
           [](Piece& p) {
             p.emit("LayerNormalization", {p.in({0, 6}), p.weight({6}), p.weight({6})});
           }},
          {"after_residual_add",
           [](Piece& p) {
             int x = p.op("Add", {p.in({6, 40}), p.in({6, 40})});
             p.emit("LayerNormalization", {x, p.weight({40}), p.weight({40})});
           },
           Chain::pointwise},
          {"large_9x768",
           [](Piece& p) {
             p.emit("LayerNormalization", {p.in({9, 768}), p.weight({768}), p.weight({768})});
           }},
      },
      kAccum);
  add("BatchNormalization",
      {
          {"nchw_const",
           [](Piece& p) {
             p.emit("BatchNormalization", {p.in({2, 3, 4, 5}), p.weight({3}), p.weight({3}),
                                           p.weight({3}), p.weight({3}, Data::pos)});
           }},
          {"nc_runtime",
           [](Piece& p) {
             p.emit("BatchNormalization",
                    {p.in({4, 6}), p.in({6}), p.in({6}), p.in({6}), p.in({6}, Data::pos)},
                    {{"epsilon", 1e-3f}});
           }},
          {"zero_batch",
           [](Piece& p) {
             p.emit("BatchNormalization", {p.in({0, 3, 2}), p.weight({3}), p.weight({3}),
                                           p.weight({3}), p.weight({3}, Data::pos)});
           }},
      },
      kAccum);
  add("InstanceNormalization",
      {
          {"nchw",
           [](Piece& p) {
             p.emit("InstanceNormalization", {p.in({2, 3, 4, 5}), p.weight({3}), p.weight({3})});
           }},
          {"ncl",
           [](Piece& p) {
             p.emit("InstanceNormalization", {p.in({2, 4, 7}), p.in({4}), p.in({4})},
                    {{"epsilon", 1e-3f}});
           }},
      },
      kAccum);
  add("GroupNormalization",
      {
          {"g2_nchw",
           [](Piece& p) {
             p.emit("GroupNormalization", {p.in({2, 4, 3, 3}), p.weight({4}), p.weight({4})},
                    {{"num_groups", int64_t(2)}});
           }},
          {"g3_ncl",
           [](Piece& p) {
             p.emit("GroupNormalization", {p.in({1, 6, 5}), p.in({6}), p.in({6})},
                    {{"num_groups", int64_t(3)}});
           }},
      },
      kAccum);
  add("LpNormalization",
      {
          {"p2_last",
           [](Piece& p) {
             p.emit("LpNormalization", {p.in({3, 17})});
           }},
          {"p1_axis0",
           [](Piece& p) {
             p.emit("LpNormalization", {p.in({4, 5})}, {{"axis", int64_t(0)}, {"p", int64_t(1)}});
           }},
          {"zero_rows",
           [](Piece& p) {
             p.emit("LpNormalization", {p.in({0, 5})});
           }},
      },
      kAccum);
  add("MeanVarianceNormalization",
      {
          {"default_axes",
           [](Piece& p) {
             p.emit("MeanVarianceNormalization", {p.in({2, 3, 4, 5})});
           }},
          {"axis1",
           [](Piece& p) {
             p.emit("MeanVarianceNormalization", {p.in({3, 9})}, {{"axes", V{1}}});
           }},
      },
      kAccum);

  // Reductions.
  add("ReduceSum", reduce_cases("ReduceSum", Data::any), kAccum);
  add("ReduceMean", reduce_cases("ReduceMean", Data::any), kAccum);
  add("ReduceMax", reduce_cases("ReduceMax", Data::any), kExact);
  add("ReduceMin", reduce_cases("ReduceMin", Data::any), kExact);
  add("ReduceProd", reduce_cases("ReduceProd", Data::unit), kAccum);
  add("ReduceSumSquare", reduce_cases("ReduceSumSquare", Data::any), kAccum);
  add("ReduceL1", reduce_cases("ReduceL1", Data::any), kAccum);
  add("ReduceL2", reduce_cases("ReduceL2", Data::any), kAccum);
  add("ReduceLogSum", reduce_cases("ReduceLogSum", Data::pos), kAccum);
  add("ReduceLogSumExp", reduce_cases("ReduceLogSumExp", Data::any), kAccum);
  for (const char* op : {"ArgMax", "ArgMin"})
    add(op,
        {
            {"axis1_drop",
             [op](Piece& p) {
               p.emit(op, {p.in({3, 17})}, {{"axis", int64_t(1)}, {"keepdims", int64_t(0)}});
             }},
            {"axis0_keep",
             [op](Piece& p) {
               p.emit(op, {p.in({4, 5, 6})});
             }},
            {"ties_first",
             [op](Piece& p) {
               p.emit(op, {p.in({5, 9}, Data::halves)}, {{"axis", int64_t(-1)}});
             }},
            {"ties_last",
             [op](Piece& p) {
               p.emit(op, {p.in({5, 9}, Data::halves)},
                      {{"axis", int64_t(-1)}, {"select_last_index", int64_t(1)}});
             }},
            {"zero_outer",
             [op](Piece& p) {
               p.emit(op, {p.in({0, 4})}, {{"axis", int64_t(1)}});
             }},
        },
        kExact);
  add("CumSum",
      {
          {"axis1",
           [](Piece& p) {
             p.emit("CumSum", {p.in({3, 17}), p.int_scalar(1)});
           }},
          {"axis0_exclusive",
           [](Piece& p) {
             p.emit("CumSum", {p.in({5, 4}), p.int_scalar(0)}, {{"exclusive", int64_t(1)}});
           }},
          {"reverse",
           [](Piece& p) {
             p.emit("CumSum", {p.in({2, 3, 6}), p.int_scalar(-1)}, {{"reverse", int64_t(1)}});
           }},
          {"zero_dim",
           [](Piece& p) {
             p.emit("CumSum", {p.in({0, 3}), p.int_scalar(1)});
           }},
      },
      kAccum);
  add("TopK",
      {
          {"k5_last",
           [](Piece& p) {
             p.emit("TopK", {p.in({3, 17}), p.ints({5})}, {}, 2);
           }},
          {"k3_axis0_smallest",
           [](Piece& p) {
             p.emit("TopK", {p.in({6, 4}), p.ints({3})},
                    {{"axis", int64_t(0)}, {"largest", int64_t(0)}}, 2);
           }},
          {"k_all",
           [](Piece& p) {
             p.emit("TopK", {p.in({9}), p.ints({9})}, {}, 2);
           }},
          {"k0",
           [](Piece& p) {
             p.emit("TopK", {p.in({2, 5}), p.ints({0})}, {}, 2);
           }},
      },
      kExact);

  // Pooling.
  add("MaxPool", pool_cases("MaxPool", {}), kExact);
  add("AveragePool", pool_cases("AveragePool", {}), kAccum);
  add("LpPool", pool_cases("LpPool", {{"p", int64_t(2)}}), kAccum);
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    add(op,
        {
            {"nchw",
             [op](Piece& p) {
               p.emit(op, {p.in({2, 3, 5, 7})});
             }},
            {"ncl",
             [op](Piece& p) {
               p.emit(op, {p.in({1, 4, 6})});
             }},
            {"1x1",
             [op](Piece& p) {
               p.emit(op, {p.in({2, 3, 1, 1})});
             }},
            {"after_conv",
             [op](Piece& p) {
               p.emit(op, {p.op("Conv", {p.in({1, 16, 7, 7}), p.weight({32, 16, 3, 3})})});
             },
             Chain::contraction},
        },
        std::string(op) == "GlobalMaxPool" ? kExact : kAccum);

  // Contractions.
  add("MatMul",
      {
          {"3x5_5x7",
           [](Piece& p) {
             p.emit("MatMul", {p.in({3, 5}), p.in({5, 7})});
           }},
          {"odd_17x33_33x9",
           [](Piece& p) {
             p.emit("MatMul", {p.in({17, 33}), p.in({33, 9})});
           }},
          {"const_b",
           [](Piece& p) {
             p.emit("MatMul", {p.in({4, 6}), p.weight({6, 5})});
           }},
          {"batch_bcast",
           [](Piece& p) {
             p.emit("MatMul", {p.in({2, 3, 5}), p.in({5, 4})});
           }},
          {"batch_both",
           [](Piece& p) {
             p.emit("MatMul", {p.in({2, 1, 3, 4}), p.in({3, 4, 6})});
           }},
          {"vec_mat",
           [](Piece& p) {
             p.emit("MatMul", {p.in({5}), p.in({5, 3})});
           }},
          {"mat_vec",
           [](Piece& p) {
             p.emit("MatMul", {p.in({4, 5}), p.in({5})});
           }},
          {"zero_m",
           [](Piece& p) {
             p.emit("MatMul", {p.in({0, 5}), p.in({5, 3})});
           }},
          {"zero_k",
           [](Piece& p) {
             p.emit("MatMul", {p.in({3, 0}), p.in({0, 4})});
           }},
          {"large_65x129_129x67",
           [](Piece& p) {
             p.emit("MatMul", {p.in({65, 129}), p.weight({129, 67})});
           }},
          {"transposed_a",
           [](Piece& p) {
             p.emit("MatMul", {p.op("Transpose", {p.in({6, 4})}), p.weight({6, 5})});
           },
           Chain::contraction},
          {"bias_relu_epilogue",
           [](Piece& p) {
             int y = p.op("MatMul", {p.in({9, 16}), p.weight({16, 24})});
             p.out(p.op("Relu", {p.op("Add", {y, p.weight({24})})}));
           },
           Chain::contraction},
      },
      kAccum);
  add("Gemm",
      {
          {"bias_row",
           [](Piece& p) {
             p.emit("Gemm", {p.in({3, 5}), p.weight({5, 4}), p.weight({4})});
           }},
          {"transA",
           [](Piece& p) {
             p.emit("Gemm", {p.in({5, 3}), p.in({5, 4}), p.in({3, 4})}, {{"transA", int64_t(1)}});
           }},
          {"transB_alpha_beta",
           [](Piece& p) {
             p.emit("Gemm", {p.in({3, 6}), p.weight({7, 6}), p.weight({3, 1})},
                    {{"transB", int64_t(1)}, {"alpha", 0.5f}, {"beta", 2.0f}});
           }},
          {"no_c",
           [](Piece& p) {
             p.emit("Gemm", {p.in({2, 9}), p.weight({9, 3})});
           }},
          {"scalar_c",
           [](Piece& p) {
             p.emit("Gemm", {p.in({4, 4}), p.in({4, 2}), p.scalar(1.5)});
           }},
          {"zero_m",
           [](Piece& p) {
             p.emit("Gemm", {p.in({0, 4}), p.weight({4, 3}), p.weight({3})});
           }},
          {"large_transB",
           [](Piece& p) {
             p.emit("Gemm", {p.in({33, 130}), p.weight({70, 130}), p.weight({70})},
                    {{"transB", int64_t(1)}});
           }},
          {"relu_epilogue",
           [](Piece& p) {
             p.out(
                 p.op("Relu", {p.op("Gemm", {p.in({8, 12}), p.weight({12, 10}), p.weight({10})})}));
           },
           Chain::contraction},
      },
      kAccum);
  add("Conv",
      {
          {"3x3_pad1_bias",
           [](Piece& p) {
             p.emit("Conv", {p.in({1, 3, 8, 8}), p.weight({4, 3, 3, 3}), p.weight({4})},
                    {{"pads", V{1, 1, 1, 1}}});
           }},
          {"stride2_odd",
           [](Piece& p) {
             p.emit("Conv", {p.in({2, 2, 9, 7}), p.weight({3, 2, 3, 3})}, {{"strides", V{2, 2}}});
           }},
          {"depthwise",
           [](Piece& p) {
             p.emit("Conv", {p.in({1, 3, 6, 6}), p.weight({3, 1, 3, 3}), p.weight({3})},
                    {{"group", int64_t(3)}, {"pads", V{1, 1, 1, 1}}});
           }},
          {"dilated",
           [](Piece& p) {
             p.emit("Conv", {p.in({1, 2, 9, 9}), p.weight({2, 2, 3, 3})}, {{"dilations", V{2, 2}}});
           }},
          {"1x1",
           [](Piece& p) {
             p.emit("Conv", {p.in({1, 5, 4, 3}), p.weight({6, 5, 1, 1})});
           }},
          {"1d",
           [](Piece& p) {
             p.emit("Conv", {p.in({2, 2, 10}), p.weight({3, 2, 3}), p.weight({3})});
           }},
          {"same_upper",
           [](Piece& p) {
             p.emit("Conv", {p.in({1, 2, 7, 7}), p.weight({2, 2, 4, 4})},
                    {{"auto_pad", std::string("SAME_UPPER")}, {"strides", V{2, 2}}});
           }},
          {"runtime_weights",
           [](Piece& p) {
             p.emit("Conv", {p.in({1, 2, 5, 5}), p.in({3, 2, 3, 3})});
           }},
          {"large_16to32_17x17",
           [](Piece& p) {
             p.emit("Conv", {p.in({2, 16, 17, 17}), p.weight({32, 16, 3, 3}), p.weight({32})},
                    {{"pads", V{1, 1, 1, 1}}});
           }},
          {"relu_epilogue",
           [](Piece& p) {
             int y = p.op("Conv", {p.in({1, 8, 9, 9}), p.weight({16, 8, 3, 3}), p.weight({16})});
             p.out(p.op("Relu", {y}));
           },
           Chain::contraction},
          {"residual_add",
           [](Piece& p) {
             int y = p.op("Conv", {p.in({1, 8, 6, 6}), p.weight({8, 8, 3, 3}), p.weight({8})},
                          {{"pads", V{1, 1, 1, 1}}});
             p.out(p.op("Relu", {p.op("Add", {y, p.in({1, 8, 6, 6})})}));
           },
           Chain::contraction},
      },
      kAccum);
  add("ConvTranspose",
      {
          {"stride2_pad1_outpad1",
           [](Piece& p) {
             p.emit("ConvTranspose", {p.in({1, 2, 4, 4}), p.weight({2, 3, 3, 3}), p.weight({3})},
                    {{"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}, {"output_padding", V{1, 1}}});
           }},
          {"group2",
           [](Piece& p) {
             p.emit("ConvTranspose", {p.in({1, 4, 3, 3}), p.weight({4, 1, 2, 2})},
                    {{"group", int64_t(2)}});
           }},
          {"1d",
           [](Piece& p) {
             p.emit("ConvTranspose", {p.in({2, 3, 5}), p.weight({3, 2, 3})}, {{"strides", V{3}}});
           }},
      },
      kAccum);
  {
    auto ein = [](std::string eq, std::vector<Shape> shapes) {
      return [=](Piece& p) {
        std::vector<int> ins;
        for (const Shape& s : shapes) ins.push_back(p.in(s));
        p.emit("Einsum", ins, {{"equation", eq}});
      };
    };
    add("Einsum",
        {
            {"matmul", ein("ij,jk->ik", {{3, 5}, {5, 4}})},
            {"batched", ein("bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}})},
            {"attention_scores", ein("bhqd,bhkd->bhqk", {{1, 2, 3, 4}, {1, 2, 5, 4}})},
            {"diagonal", ein("ii->i", {{4, 4}})},
            {"transpose", ein("ij->ji", {{3, 5}})},
            {"dot", ein("i,i->", {{7}, {7}})},
            {"outer", ein("i,j->ij", {{3}, {4}})},
        },
        kAccum);
  }

  // Movement.
  add("Reshape",
      {
          {"infer_dim",
           [](Piece& p) {
             p.emit("Reshape", {p.in({2, 3, 4}), p.ints({4, -1})});
           }},
          {"copy_dim",
           [](Piece& p) {
             p.emit("Reshape", {p.in({2, 3, 4}), p.ints({0, 12})});
           }},
          {"to_scalar",
           [](Piece& p) {
             p.emit("Reshape", {p.in({1, 1}), p.ints({})});
           }},
          {"zero_dim",
           [](Piece& p) {
             p.emit("Reshape", {p.in({0, 3}), p.ints({3, 0})}, {{"allowzero", int64_t(1)}});
           }},
          {"transposed_in",
           [](Piece& p) {
             int x = p.op("Transpose", {p.in({3, 4})});
             p.emit("Reshape", {x, p.ints({2, 6})});
           }},
      },
      kExact);
  add("Flatten",
      {
          {"axis1",
           [](Piece& p) {
             p.emit("Flatten", {p.in({2, 3, 4})});
           }},
          {"axis0",
           [](Piece& p) {
             p.emit("Flatten", {p.in({2, 3})}, {{"axis", int64_t(0)}});
           }},
          {"axis_neg",
           [](Piece& p) {
             p.emit("Flatten", {p.in({2, 3, 4})}, {{"axis", int64_t(-1)}});
           }},
          {"zero_dim",
           [](Piece& p) {
             p.emit("Flatten", {p.in({2, 0, 3})}, {{"axis", int64_t(2)}});
           }},
      },
      kExact);
  add("Squeeze",
      {
          {"axes",
           [](Piece& p) {
             p.emit("Squeeze", {p.in({1, 3, 1, 5}), p.ints({0, 2})});
           }},
          {"all_ones",
           [](Piece& p) {
             p.emit("Squeeze", {p.in({1, 4, 1})});
           }},
          {"negative_axis",
           [](Piece& p) {
             p.emit("Squeeze", {p.in({3, 1}), p.ints({-1})});
           }},
      },
      kExact);
  add("Unsqueeze",
      {
          {"axes",
           [](Piece& p) {
             p.emit("Unsqueeze", {p.in({3, 5}), p.ints({0, 3})});
           }},
          {"scalar",
           [](Piece& p) {
             p.emit("Unsqueeze", {p.in({}), p.ints({0})});
           }},
          {"zero_dim",
           [](Piece& p) {
             p.emit("Unsqueeze", {p.in({0, 2}), p.ints({-1})});
           }},
      },
      kExact);
  add("Transpose",
      {
          {"perm201",
           [](Piece& p) {
             p.emit("Transpose", {p.in({2, 3, 4})}, {{"perm", V{2, 0, 1}}});
           }},
          {"reverse_default",
           [](Piece& p) {
             p.emit("Transpose", {p.in({3, 5})});
           }},
          {"nchw_nhwc",
           [](Piece& p) {
             p.emit("Transpose", {p.in({2, 3, 5, 7})}, {{"perm", V{0, 2, 3, 1}}});
           }},
          {"zero_dim",
           [](Piece& p) {
             p.emit("Transpose", {p.in({0, 3})});
           }},
          {"large_65x129",
           [](Piece& p) {
             p.emit("Transpose", {p.in({65, 129})});
           }},
      },
      kExact);
  add("DepthToSpace",
      {
          {"dcr",
           [](Piece& p) {
             p.emit("DepthToSpace", {p.in({1, 8, 2, 3})}, {{"blocksize", int64_t(2)}});
           }},
          {"crd",
           [](Piece& p) {
             p.emit("DepthToSpace", {p.in({2, 8, 3, 2})},
                    {{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}});
           }},
      },
      kExact);
  add("SpaceToDepth",
      {{"b2",
        [](Piece& p) {
          p.emit("SpaceToDepth", {p.in({1, 2, 4, 6})}, {{"blocksize", int64_t(2)}});
        }},
       {"b3",
        [](Piece& p) {
          p.emit("SpaceToDepth", {p.in({2, 1, 3, 6})}, {{"blocksize", int64_t(3)}});
        }}},
      kExact);
  add("Expand",
      {
          {"col_to_3d",
           [](Piece& p) {
             p.emit("Expand", {p.in({3, 1}), p.ints({2, 3, 4})});
           }},
          {"scalar",
           [](Piece& p) {
             p.emit("Expand", {p.in({}), p.ints({5})});
           }},
          {"smaller_shape",
           [](Piece& p) {
             p.emit("Expand", {p.in({2, 1, 6}), p.ints({3, 1})});
           }},
          {"to_zero",
           [](Piece& p) {
             p.emit("Expand", {p.in({1, 5}), p.ints({0, 5})});
           }},
          // Feeding a pointwise op: the fuser may load it through a broadcast index map.
          {"into_add",
           [](Piece& p) {
             int v = p.op("Expand", {p.in({3, 1}), p.ints({3, 4})});
             p.out(p.op("Add", {v, p.in({3, 4})}));
           },
           Chain::pointwise},
      },
      kExact);
  add("Tile",
      {
          {"rows",
           [](Piece& p) {
             p.emit("Tile", {p.in({2, 3}), p.ints({2, 1})});
           }},
          {"3d",
           [](Piece& p) {
             p.emit("Tile", {p.in({2, 1, 3}), p.ints({1, 3, 2})});
           }},
          {"zero_repeat",
           [](Piece& p) {
             p.emit("Tile", {p.in({2, 3}), p.ints({0, 2})});
           }},
          {"into_add",
           [](Piece& p) {
             int v = p.op("Tile", {p.in({2, 3}), p.ints({2, 1})});
             p.out(p.op("Add", {v, p.in({4, 3})}));
           },
           Chain::pointwise},
      },
      kExact);
  add("Pad",
      {
          {"constant",
           [](Piece& p) {
             p.emit("Pad", {p.in({3, 4}), p.ints({1, 2, 0, 1}), p.scalar(1)});
           }},
          {"zero_default",
           [](Piece& p) {
             p.emit("Pad", {p.in({2, 3, 4}), p.ints({0, 1, 1, 0, 0, 2})});
           }},
          {"reflect",
           [](Piece& p) {
             p.emit("Pad", {p.in({3, 5}), p.ints({1, 2, 2, 1})},
                    {{"mode", std::string("reflect")}});
           }},
          {"edge",
           [](Piece& p) {
             p.emit("Pad", {p.in({3, 5}), p.ints({2, 0, 0, 3})}, {{"mode", std::string("edge")}});
           }},
          {"crop",
           [](Piece& p) {
             p.emit("Pad", {p.in({4, 5}), p.ints({-1, 0, 0, -2})});
           }},
          {"axes",
           [](Piece& p) {
             p.emit("Pad", {p.in({2, 3}), p.ints({1, 1}), p.scalar(0), p.ints({1})});
           }},
          {"into_add",
           [](Piece& p) {
             int v = p.op("Pad", {p.in({3, 4}), p.ints({1, 0, 0, 1}), p.scalar(0)});
             p.out(p.op("Add", {v, p.in({4, 5})}));
           },
           Chain::pointwise},
      },
      kExact);
  add("Gather",
      {
          {"axis0_const_idx",
           [](Piece& p) {
             p.emit("Gather", {p.in({5, 4}), p.idx_const({3}, 5)});
           }},
          {"axis1_2d_idx",
           [](Piece& p) {
             p.emit("Gather", {p.in({3, 6}), p.idx_const({2, 2}, 6)}, {{"axis", int64_t(1)}});
           }},
          {"scalar_idx",
           [](Piece& p) {
             p.emit("Gather", {p.in({4, 3}), p.cst(Tensor::scalar<int64_t>(-2))});
           }},
          {"runtime_idx",
           [](Piece& p) {
             p.emit("Gather", {p.in({7, 5}), p.idx_input({4}, 7)});
           }},
          {"embedding",
           [](Piece& p) {
             p.emit("Gather", {p.weight({10, 8}), p.idx_input({2, 3}, 10, false)});
           }},
          {"zero_idx",
           [](Piece& p) {
             p.emit("Gather", {p.in({4, 3}), p.idx_const({0}, 4)});
           }},
          {"into_add",
           [](Piece& p) {
             int v = p.op("Gather", {p.in({5, 4}), p.idx_const({3}, 5)});
             p.out(p.op("Add", {v, p.in({3, 4})}));
           },
           Chain::pointwise},
      },
      kExact);
  add("GatherElements",
      {
          {"axis1",
           [](Piece& p) {
             p.emit("GatherElements", {p.in({3, 4}), p.idx_const({3, 2}, 4)},
                    {{"axis", int64_t(1)}});
           }},
          {"axis0",
           [](Piece& p) {
             p.emit("GatherElements", {p.in({3, 4}), p.idx_input({2, 4}, 3)});
           }},
      },
      kExact);
  add("GatherND",
      {
          {"pairs",
           [](Piece& p) {
             p.emit("GatherND", {p.in({3, 4, 2}), p.idx_const({2, 2}, 3, false)});
           }},
          {"batch_dims1",
           [](Piece& p) {
             p.emit("GatherND", {p.in({2, 3, 4}), p.idx_const({2, 1}, 3, false)},
                    {{"batch_dims", int64_t(1)}});
           }},
      },
      kExact);
  {
    // Distinct indices per row for "none" (duplicates would make the result order-dependent).
    auto scat = [](std::string reduction) {
      return [=](Piece& p) {
        int idx = reduction == "none"
                      ? p.cst(Tensor::from_vector<int64_t>({3, 2}, {0, 3, 2, 1, -1, 0}))
                      : p.idx_const({3, 2}, 4);
        Attrs a{{"axis", int64_t(1)}};
        if (reduction != "none") a["reduction"] = reduction;
        p.emit("ScatterElements", {p.in({3, 4}), idx, p.in({3, 2})}, a);
      };
    };
    add("ScatterElements",
        {{"none", scat("none")},
         {"add", scat("add")},
         {"mul", scat("mul")},
         {"max", scat("max")},
         {"min", scat("min")}},
        kTight);
    auto nd = [](std::string reduction) {
      return [=](Piece& p) {
        int idx = reduction == "none" ? p.cst(Tensor::from_vector<int64_t>({2, 1}, {3, 1}))
                                      : p.idx_const({3, 1}, 4, false);
        Attrs a;
        if (reduction != "none") a["reduction"] = reduction;
        p.emit("ScatterND", {p.in({4, 3}), idx, p.in({reduction == "none" ? 2 : 3, 3})}, a);
      };
    };
    add("ScatterND", {{"none", nd("none")}, {"add", nd("add")}, {"mul", nd("mul")}}, kTight);
  }
  add("ConstantOfShape",
      {
          {"2x3",
           [](Piece& p) {
             p.emit("ConstantOfShape", {p.ints({2, 3})},
                    {{"value", p.tensor({1}, p.t, Data::pos)}});
           }},
          {"zero_dim",
           [](Piece& p) {
             p.emit("ConstantOfShape", {p.ints({0, 3})},
                    {{"value", p.tensor({1}, p.t, Data::pos)}});
           }},
      },
      kExact);
  add("Range",
      {
          {"up",
           [](Piece& p) {
             p.emit("Range", {p.scalar(0), p.scalar(10), p.scalar(3)});
           }},
          {"down",
           [](Piece& p) {
             p.emit("Range", {p.scalar(5), p.scalar(-1), p.scalar(-2)});
           }},
          {"empty",
           [](Piece& p) {
             p.emit("Range", {p.scalar(3), p.scalar(3), p.scalar(1)});
           }},
      },
      kTight);
  add("EyeLike",
      {
          {"k1",
           [](Piece& p) {
             p.emit("EyeLike", {p.in({3, 5})}, {{"k", int64_t(1)}});
           }},
          {"square_kneg",
           [](Piece& p) {
             p.emit("EyeLike", {p.in({4, 4})}, {{"k", int64_t(-1)}});
           }},
      },
      kExact);
  add("Trilu",
      {
          {"upper",
           [](Piece& p) {
             p.emit("Trilu", {p.in({4, 5})});
           }},
          {"upper_k1",
           [](Piece& p) {
             p.emit("Trilu", {p.in({4, 5}), p.int_scalar(1)});
           }},
          {"lower_kneg",
           [](Piece& p) {
             p.emit("Trilu", {p.in({2, 3, 3}), p.int_scalar(-1)}, {{"upper", int64_t(0)}});
           }},
      },
      kExact);
  add("OneHot",
      {
          {"last_axis",
           [](Piece& p) {
             p.emit("OneHot",
                    {p.idx_input({4}, 5), p.int_scalar(5), p.cst(p.tensor({2}, p.t, Data::any))});
           }},
          {"axis0",
           [](Piece& p) {
             p.emit("OneHot",
                    {p.idx_input({2, 3}, 4), p.int_scalar(4), p.cst(p.tensor({2}, p.t, Data::any))},
                    {{"axis", int64_t(0)}});
           }},
      },
      kExact);
  add("Shape",
      {
          {"full",
           [](Piece& p) {
             p.emit("Shape", {p.in({2, 3, 4})});
           }},
          {"start_end",
           [](Piece& p) {
             p.emit("Shape", {p.in({2, 3, 4})}, {{"start", int64_t(1)}, {"end", int64_t(-1)}});
           }},
          {"scalar", [](Piece& p) { p.emit("Shape", {p.in({})}); }},
      },
      kExact);
  add("Size",
      {{"3d",
        [](Piece& p) {
          p.emit("Size", {p.in({2, 3, 4})});
        }},
       {"zero",
        [](Piece& p) {
          p.emit("Size", {p.in({0, 3})});
        }}},
      kExact);
  add("Constant",
      {
          {"tensor",
           [](Piece& p) {
             p.emit("Constant", {}, {{"value", p.tensor({2, 3}, p.t, Data::any)}});
           }},
          {"scalar",
           [](Piece& p) {
             p.emit("Constant", {}, {{"value", p.tensor({}, p.t, Data::any)}});
           }},
          // Constant feeding an op that runs: the constant is an input of a real kernel.
          {"into_add",
           [](Piece& p) {
             int c = p.op("Constant", {}, {{"value", p.tensor({3}, p.t, Data::any)}});
             p.out(p.op("Add", {p.in({2, 3}), c}));
           },
           Chain::pointwise},
      },
      kExact);
  add("Slice",
      {
          {"2d_step2",
           [](Piece& p) {
             p.emit("Slice",
                    {p.in({5, 6}), p.ints({1, 0}), p.ints({4, 6}), p.ints({0, 1}), p.ints({2, 1})});
           }},
          {"reverse",
           [](Piece& p) {
             p.emit("Slice",
                    {p.in({3, 7}), p.ints({-1}), p.ints({-100}), p.ints({1}), p.ints({-1})});
           }},
          {"clamped_end",
           [](Piece& p) {
             p.emit("Slice", {p.in({7}), p.ints({2}), p.ints({1000})});
           }},
          {"empty",
           [](Piece& p) {
             p.emit("Slice", {p.in({4, 3}), p.ints({3}), p.ints({3})});
           }},
          {"step3_3d",
           [](Piece& p) {
             p.emit("Slice", {p.in({2, 9, 4}), p.ints({1}), p.ints({9}), p.ints({1}), p.ints({3})});
           }},
          // Feeding a pointwise op: the fuser may load it through a strided index map.
          {"into_add",
           [](Piece& p) {
             int v =
                 p.op("Slice", {p.in({5, 6}), p.ints({1}), p.ints({5}), p.ints({1}), p.ints({2})});
             p.out(p.op("Add", {v, p.in({5, 2})}));
           },
           Chain::pointwise},
      },
      kExact);
  add("Concat",
      {
          // Concats feeding convs: distribute_concat may turn them into partial convs.
          {"into_conv",
           [](Piece& p) {
             int x =
                 p.op("Concat", {p.in({1, 8, 6, 6}), p.in({1, 8, 6, 6})}, {{"axis", int64_t(1)}});
             p.out(p.op("Conv", {x, p.weight({16, 16, 1, 1}), p.weight({16})}));
           },
           Chain::contraction},
          {"of_fused",
           [](Piece& p) {
             p.emit("Concat", {p.op("Relu", {p.in({3, 5})}), p.op("Neg", {p.in({3, 2})})},
                    {{"axis", int64_t(1)}});
           },
           Chain::pointwise},
          {"large_channels",
           [](Piece& p) {
             p.emit("Concat", {p.in({1, 16, 9, 9}), p.in({1, 8, 9, 9})}, {{"axis", int64_t(1)}});
           }},
          {"axis1_three",
           [](Piece& p) {
             p.emit("Concat", {p.in({2, 3}), p.in({2, 1}), p.in({2, 4})}, {{"axis", int64_t(1)}});
           }},
          {"axis0",
           [](Piece& p) {
             p.emit("Concat", {p.in({1, 3}), p.in({2, 3})}, {{"axis", int64_t(0)}});
           }},
          {"zero_input",
           [](Piece& p) {
             p.emit("Concat", {p.in({0, 3}), p.in({2, 3})}, {{"axis", int64_t(0)}});
           }},
          {"last_3d_const",
           [](Piece& p) {
             p.emit("Concat", {p.in({2, 3, 2}), p.weight({2, 3, 5})}, {{"axis", int64_t(-1)}});
           }},
          {"one",
           [](Piece& p) {
             p.emit("Concat", {p.in({4})}, {{"axis", int64_t(0)}});
           }},
      },
      kExact);
  add("Split",
      {
          {"sizes",
           [](Piece& p) {
             p.emit("Split", {p.in({6, 4}), p.ints({2, 4})}, {}, 2);
           }},
          {"num_outputs_axis1",
           [](Piece& p) {
             p.emit("Split", {p.in({2, 6})}, {{"axis", int64_t(1)}, {"num_outputs", int64_t(3)}},
                    3);
           }},
          {"uneven",
           [](Piece& p) {
             p.emit("Split", {p.in({7})}, {{"num_outputs", int64_t(3)}}, 3);
           }},
          {"zero_part",
           [](Piece& p) {
             p.emit("Split", {p.in({3, 2}), p.ints({0, 3})}, {}, 2);
           }},
      },
      kExact);
  return t;
}

const std::vector<OpSweep>& sweep_table() {
  static const std::vector<OpSweep> t = build_sweep_table();
  return t;
}

const OpSweep& sweep_for(const std::string& op) {
  for (const OpSweep& s : sweep_table())
    if (s.op == op) return s;
  BRRR_ASSERT(false, "no sweep entry");
  return sweep_table()[0];
}

// Known bugs the sweep found, one line each: "Op|case/dtype|mode" (e.g. "Add|bcast_4x1x5_3x1/
// float16|cuda-fused"; mode "*": every mode) -> the bug. Those pieces leave the op's graph for that
// mode; the other pieces still run, then the test skips naming the bugs. None on the CPU today.
const std::map<std::string, std::string>& known_bugs() {
  static const std::map<std::string, std::string> m = {};
  return m;
}

std::string known_bug(const std::string& op, const std::string& piece, const std::string& mode) {
  for (const std::string& m : {mode, std::string("*")}) {
    auto it = known_bugs().find(op + "|" + piece + "|" + m);
    if (it != known_bugs().end()) return it->second;
  }
  return "";
}

// ---- running and comparing ----

struct PieceSpec {
  const Case* c;
  DType t;
  std::string label;  // "case/dtype"
};

struct Built {
  Graph g;
  std::map<std::string, Tensor> feeds;
  std::vector<std::string> out_label;  // per graph output: its piece
  std::vector<const Case*> out_case;
};

void build_piece(Built& b, const PieceSpec& s, size_t index) {
  size_t first = b.g.outputs.size();
  std::string prefix = s.c->name + "_" + std::string(dtype_name(s.t)) + "_";
  Piece p{b.g, b.feeds, prefix, s.t, std::mt19937_64(1234 + index)};
  s.c->build(p);
  for (size_t i = first; i < b.g.outputs.size(); ++i) {
    b.out_label.push_back(s.label);
    b.out_case.push_back(s.c);
  }
}

Built build_graph(const std::vector<PieceSpec>& pieces) {
  Built b;
  b.g.name = "sweep";
  b.g.opset = kOpset;
  for (size_t i = 0; i < pieces.size(); ++i) build_piece(b, pieces[i], i);
  return b;
}

// Whether shape inference accepts the piece ("" when it does, else its error).
std::string accepted(const PieceSpec& s) {
  Built b = build_graph({s});
  try {
    infer_shapes(b.g, InferOptions{});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// "" when got matches want within tol; else what differs (the first few elements).
std::string compare(const Tensor& got, const Tensor& want, Tol tol) {
  if (got.dtype() != want.dtype())
    return fmt::format("dtype {} (expected {})", dtype_name(got.dtype()), dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return fmt::format("shape {} (expected {})", shape_str(got.shape()), shape_str(want.shape()));
  std::vector<double> g = got.to_double_vector(), w = want.to_double_vector();
  bool flt = is_floating(want.dtype());
  double scale = 0;  // largest finite |want|, for Tol::of_max
  for (double x : w)
    if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
  std::string bad;
  int nbad = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    bool ok;
    if (!flt)
      ok = g[i] == w[i];
    else if (std::isnan(w[i]) || std::isnan(g[i]))
      ok = std::isnan(w[i]) && std::isnan(g[i]);
    else if (std::isinf(w[i]) || std::isinf(g[i]))
      ok = g[i] == w[i];
    else
      ok = std::fabs(g[i] - w[i]) <= tol.atol + tol.rtol * (tol.of_max ? scale : std::fabs(w[i]));
    if (ok) continue;
    if (nbad++ < 4) bad += fmt::format(" [{}] got {:.9g} expected {:.9g};", i, g[i], w[i]);
  }
  if (!nbad) return "";
  return fmt::format("{} of {} elements differ (atol {:g}, rtol {:g}{}):{}", nbad, w.size(),
                     tol.atol, tol.rtol,
                     tol.of_max ? fmt::format(" of max |value| {:g}", scale) : "", bad);
}

struct Mode {
  std::string name;
  SessionOptions opts;
  bool cuda;
};

std::vector<Mode> modes() {
  std::vector<Mode> m;
  SessionOptions fused, unfused;
  fused.fusion = 1;
  unfused.fusion = 0;
  m.push_back({"cpu-fused", fused, false});
  m.push_back({"cpu-unfused", unfused, false});
  fused.backend = unfused.backend = "cuda";
  m.push_back({"cuda-fused", fused, true});
  m.push_back({"cuda-unfused", unfused, true});
  return m;
}

// Whether CUDA sessions can run here; `why` says why not. A build without the toolkit or a
// machine without a driver or device skips the CUDA modes; any other failure of a one-Relu CUDA
// session is a failure of the backend (`broken`), not a reason to skip.
bool cuda_usable(std::string* why, bool* broken) {
  static std::string reason;
  static bool failed = false;
  static const bool ok = [] {
    Graph g;
    g.opset = kOpset;
    int x = g.add_value("x");
    g.value(x).dtype = DType::f32, g.value(x).shape = {4}, g.value(x).typed = true;
    g.inputs.push_back(x);
    Node n;
    n.op = "Relu", n.name = "relu", n.inputs = {x}, n.outputs = {g.add_value("y")};
    g.nodes.push_back(n);
    g.outputs.push_back(n.outputs[0]);
    SessionOptions o;
    o.backend = "cuda";
    try {
      Session s(g, o);
      s.run({{"x", Tensor::zeros(DType::f32, {4})}});
      return true;
    } catch (const Error& e) {
      reason = std::string(e.what()).substr(0, 200);
      failed = reason.find("unavailable") == std::string::npos &&
               reason.find("not available") == std::string::npos;
      return false;
    }
  }();
  *why = reason;
  *broken = failed;
  return ok;
}

// Runs `b` in one mode and compares every output with `want`; returns the number of outputs
// compared. On a session that fails to build or run, retries each piece alone to name it.
int check_mode(const OpSweep& sweep, const Mode& mode, const std::vector<PieceSpec>& pieces) {
  Built b = build_graph(pieces);
  Built ref = b;
  std::vector<Tensor> want;
  try {
    ref.g = compile(std::move(ref.g), plan::Target::reference(), {}).graph;
    want = run_reference(ref.g, ref.feeds);
  } catch (const Error& e) {
    if (pieces.size() > 1) {
      int n = 0;
      for (const PieceSpec& s : pieces) n += check_mode(sweep, mode, {s});
      return n;
    }
    ADD_FAILURE() << sweep.op << " " << pieces[0].label
                  << ": the reference executor fails on a graph "
                  << "shape inference accepted: " << e.what();
    return 0;
  }
  std::vector<Tensor> got;
  try {
    Session s(b.g, mode.opts);
    got = s.run(b.feeds);
  } catch (const Error& e) {
    if (pieces.size() > 1) {
      int n = 0;
      for (const PieceSpec& s : pieces) n += check_mode(sweep, mode, {s});
      return n;
    }
    ADD_FAILURE() << sweep.op << " " << pieces[0].label << " [" << mode.name
                  << "]: the session fails where the reference runs: " << e.what();
    return 0;
  }
  EXPECT_EQ(got.size(), want.size()) << sweep.op << " [" << mode.name << "]";
  int n = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    DType t = want[i].dtype();
    std::string diff = compare(got[i], want[i], tol_for(sweep, *b.out_case[i], t, mode.cuda, mode.opts.fusion != 0));
    EXPECT_EQ(diff, "") << sweep.op << " " << b.out_label[i] << " output '"
                        << b.g.value(b.g.outputs[i]).name << "' [" << mode.name << "]";
    ++n;
  }
  return n;
}

class BackendOps : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendOps, MatchesReference) {
  const OpSweep& sweep = sweep_for(GetParam());
  // Every (case, dtype) that shape inference accepts is a piece; the dtypes it takes are the ones
  // the op supports.
  std::vector<PieceSpec> pieces;
  std::set<std::string> took;
  for (const Case& c : sweep.cases) {
    std::string f32_error;
    bool any = false;
    for (DType t : kAllTypes) {
      PieceSpec s{&c, t, c.name + "/" + std::string(dtype_name(t))};
      std::string err = accepted(s);
      if (t == DType::f32) f32_error = err;
      if (!err.empty()) continue;
      any = true;
      took.insert(std::string(dtype_name(t)));
      pieces.push_back(s);
    }
    // A case no dtype passes tests nothing: the case is wrong (or the op lost a feature).
    EXPECT_TRUE(any) << sweep.op << " case " << c.name
                     << ": shape inference refuses it in every dtype; float32: " << f32_error;
  }
  ASSERT_FALSE(pieces.empty()) << sweep.op << ": no piece to run";
  std::string types;
  for (const std::string& t : took) types += " " + t;
  std::cout << "[ sweep    ] " << sweep.op << ": " << pieces.size() << " pieces, dtypes" << types
            << "\n";

  std::string why_no_cuda;
  bool cuda_broken = false;
  bool cuda = cuda_usable(&why_no_cuda, &cuda_broken);
  EXPECT_FALSE(cuda_broken) << "a CUDA device is there, but a one-Relu CUDA session fails: "
                            << why_no_cuda;
  std::vector<std::string> skipped;
  for (const Mode& mode : modes()) {
    if (mode.cuda && !cuda) continue;
    std::vector<PieceSpec> run;
    for (const PieceSpec& s : pieces) {
      std::string bug = known_bug(sweep.op, s.label, mode.name);
      if (bug.empty())
        run.push_back(s);
      else
        skipped.push_back(s.label + " [" + mode.name + "]: " + bug);
    }
    if (!run.empty()) check_mode(sweep, mode, run);
  }
  if (!cuda)
    std::cout << "[ sweep    ] " << sweep.op << ": CUDA modes skipped: no usable CUDA device ("
              << why_no_cuda << ")\n";
  if (!skipped.empty()) {
    std::string s;
    for (const std::string& k : skipped) s += "\n  " + k;
    GTEST_SKIP() << "the other pieces passed; skipped for known bugs:" << s;
  }
}

std::vector<std::string> swept_ops() {
  std::vector<std::string> v;
  for (const OpSweep& s : sweep_table()) v.push_back(s.op);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Sweep, BackendOps, ::testing::ValuesIn(swept_ops()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// Adding an op to the table without a sweep entry fails here; so does a sweep entry for an op the
// table no longer has. The list of covered ops is printed.
TEST(BackendOpsCoverage, EveryOpHasASweep) {
  std::vector<std::string> ops = swept_ops();
  std::set<std::string> swept(ops.begin(), ops.end());
  EXPECT_EQ(swept.size(), sweep_table().size()) << "an op has two sweep entries";
  std::set<std::string> in_table;
  std::string missing;
  for (const OpDef* d : OpTable::get().all()) {
    std::string name = d->domain.empty() ? d->name : d->domain + "." + d->name;
    in_table.insert(name);
    if (!swept.count(name)) missing += " " + name;
  }
  EXPECT_EQ(missing, "") << "ops in the OpTable with no case in tests/unit/backend_ops_test.cpp";
  std::string stale, covered;
  for (const std::string& s : swept) {
    if (!in_table.count(s)) stale += " " + s;
    covered += " " + s;
  }
  EXPECT_EQ(stale, "") << "sweep entries for ops the OpTable does not have";
  std::cout << "[ sweep    ] " << swept.size() << " ops covered:" << covered << "\n";
}

}  // namespace
