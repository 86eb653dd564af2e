// Helpers private to the elementwise family (elementwise*.cpp): dtype sets for infer checks,
// wrapping integer arithmetic (no signed-overflow UB) and the family's registration pieces.
#pragma once
#include <limits>
#include <type_traits>

#include "brrr/scalar_ops.h"
#include "ops/op_util.hpp"

namespace brrr::ops {

// Sets of dtypes an op input accepts (bit flags).
enum : unsigned {
  kFloat = 1,        // f32 f16 bf16 f64
  kSignedInt = 2,    // i8 i32 i64
  kUnsignedInt = 4,  // u8
  kBool = 8,
  kInt = kSignedInt | kUnsignedInt,
  kNumeric = kFloat | kInt,
  kSigned = kFloat | kSignedInt,
  kAnyType = kNumeric | kBool,
};

bool dtype_in(DType t, unsigned set);
// Fails unless input i's dtype is in `set`, naming the op, the dtype and what is allowed.
void require_dtype(InferCtx& c, int i, unsigned set);

// Storage types whose arithmetic is floating point.
template <typename T>
constexpr bool is_float_v = std::is_floating_point_v<compute_t<T>>;

// The dtype-set bit of storage type T.
template <typename T>
constexpr unsigned type_bit() {
  if constexpr (std::is_same_v<T, bool>)
    return kBool;
  else if constexpr (is_float_v<T>)
    return kFloat;
  else if constexpr (std::is_unsigned_v<T>)
    return kUnsignedInt;
  else
    return kSignedInt;
}

// Integer arithmetic that wraps (two's complement) instead of overflowing into UB.
template <typename T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
    return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
  else
    return T(a + b);
}
template <typename T>
T wrap_sub(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
    return T(std::make_unsigned_t<T>(a) - std::make_unsigned_t<T>(b));
  else
    return T(a - b);
}
template <typename T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
    return T(std::make_unsigned_t<T>(a) * std::make_unsigned_t<T>(b));
  else
    return T(a * b);
}
template <typename T>
T wrap_neg(T a) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
    return T(std::make_unsigned_t<T>(0) - std::make_unsigned_t<T>(a));
  else
    return T(-a);
}

// Floating value to integer T: truncates toward zero; NaN gives 0, out of range saturates
// (ONNX leaves these undefined; this matches Tensor::cast).
template <typename T>
T saturate_to(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    if (v != v) return 0;
    if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    if (v <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    return T(v);
  }
}

// An elementwise OpDef with name, lowest opset and class set.
inline OpDef ew_def(const char* name, int since) {
  OpDef d;
  d.name = name;
  d.since = since;
  d.cls = OpClass::elementwise;
  return d;
}

void register_elementwise_unary(OpTable& t);
void register_elementwise_misc(OpTable& t);

}  // namespace brrr::ops
