// Element types. f16 and bf16 are storage types that convert to and from float.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

#include "brrr/error.hpp"

namespace brrr {

enum class DType : uint8_t { f32, f16, bf16, f64, i64, i32, i8, u8, boolean };

struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f);
  operator float() const;
};

struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = uint16_t((u >> 16) | 0x40);  // quiet NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
      bits = uint16_t(u >> 16);
    }
  }
  operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
bool is_floating(DType t);
bool is_integral(DType t);  // integers and bool
// ONNX TensorProto.DataType codes; throws brrr::Error for codes brrr does not support.
DType dtype_from_onnx(int code);
int dtype_to_onnx(DType t);

template <typename T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<f16>() { return DType::f16; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int8_t>() { return DType::i8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

// Calls f.template operator()<T>() with T the C++ type of `t`.
template <typename F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f.template operator()<float>();
    case DType::f16: return f.template operator()<f16>();
    case DType::bf16: return f.template operator()<bf16>();
    case DType::f64: return f.template operator()<double>();
    case DType::i64: return f.template operator()<int64_t>();
    case DType::i32: return f.template operator()<int32_t>();
    case DType::i8: return f.template operator()<int8_t>();
    case DType::u8: return f.template operator()<uint8_t>();
    case DType::boolean: return f.template operator()<bool>();
  }
  BRRR_ASSERT(false, "bad dtype");
  return f.template operator()<float>();
}

// Arithmetic type used to compute with T: float for the 16-bit floats, T otherwise.
template <typename T> struct compute_type { using type = T; };
template <> struct compute_type<f16> { using type = float; };
template <> struct compute_type<bf16> { using type = float; };
template <typename T> using compute_t = typename compute_type<T>::type;

}  // namespace brrr
