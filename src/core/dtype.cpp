#include "brrr/dtype.hpp"

#include <algorithm>
#include <cmath>

#include "core/f16_convert.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define BRRR_F16C 1
#endif

namespace brrr {

f16::f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) {  // NaN
    bits = uint16_t(sign | 0x7e00u);
    return;
  }
  if (absx >= 0x477ff000u) {  // overflows to inf after rounding
    bits = uint16_t(sign | 0x7c00u);
    return;
  }
  if (absx < 0x38800000u) {  // subnormal or zero in half
    float a;
    std::memcpy(&a, &absx, 4);
    // 2^-24 is the half subnormal step; rint rounds to nearest even.
    bits = uint16_t(sign | uint32_t(std::nearbyint(a * 16777216.0f)));
    return;
  }
  uint32_t mant_odd = (absx >> 13) & 1u;
  absx += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  bits = uint16_t(sign | (absx >> 13));
}

f16::operator float() const {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  float out;
  if (exp == 0) {
    out = std::ldexp(float(mant), -24);
    uint32_t u;
    std::memcpy(&u, &out, 4);
    u |= sign;
    std::memcpy(&out, &u, 4);
    return out;
  }
  uint32_t u;
  if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  }
  std::memcpy(&out, &u, 4);
  return out;
}

namespace {

void f32_to_f16_scalar(const float* src, f16* dst, int64_t n, bool saturate) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = f16(saturate ? std::clamp(src[i], -65504.0f, 65504.0f) : src[i]);  // NaN passes
}

#ifdef BRRR_F16C
__attribute__((target("avx,f16c"))) void f32_to_f16_f16c(const float* src, f16* dst, int64_t n,
                                                          bool saturate) {
  const __m256 lo = _mm256_set1_ps(-65504.0f), hi = _mm256_set1_ps(65504.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(src + i);
    // max/min return their second operand when either is NaN: NaN passes through the clamp.
    if (saturate) v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  f32_to_f16_scalar(src + i, dst + i, n - i, saturate);
}
#endif

}  // namespace

void f32_to_f16(const float* src, f16* dst, int64_t n, bool saturate) {
#ifdef BRRR_F16C
  // Every CPU with AVX2 has F16C (it came a generation earlier); clang 14's builtin does not
  // know the name "f16c".
  static const bool f16c = __builtin_cpu_supports("avx2");
  if (f16c) return f32_to_f16_f16c(src, dst, n, saturate);
#endif
  f32_to_f16_scalar(src, dst, n, saturate);
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::f64: return 8;
    case DType::i64: return 8;
    case DType::i32: return 4;
    case DType::i8: return 1;
    case DType::u8: return 1;
    case DType::boolean: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f64: return "float64";
    case DType::i64: return "int64";
    case DType::i32: return "int32";
    case DType::i8: return "int8";
    case DType::u8: return "uint8";
    case DType::boolean: return "bool";
  }
  return "?";
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}
bool is_integral(DType t) { return !is_floating(t); }

DType dtype_from_onnx(int code) {
  switch (code) {
    case 1: return DType::f32;
    case 2: return DType::u8;
    case 3: return DType::i8;
    case 6: return DType::i32;
    case 7: return DType::i64;
    case 9: return DType::boolean;
    case 10: return DType::f16;
    case 11: return DType::f64;
    case 16: return DType::bf16;
    default: break;
  }
  static const char* names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",      "UINT16",
                                "INT16",     "INT32",  "INT64",     "STRING",    "BOOL",
                                "FLOAT16",   "DOUBLE", "UINT32",    "UINT64",    "COMPLEX64",
                                "COMPLEX128", "BFLOAT16"};
  if (code >= 0 && code < int(sizeof(names) / sizeof(names[0])))
    fail("unsupported tensor element type {} (ONNX code {})", names[code], code);
  fail("unsupported tensor element type (ONNX code {})", code);
}

int dtype_to_onnx(DType t) {
  switch (t) {
    case DType::f32: return 1;
    case DType::u8: return 2;
    case DType::i8: return 3;
    case DType::i32: return 6;
    case DType::i64: return 7;
    case DType::boolean: return 9;
    case DType::f16: return 10;
    case DType::f64: return 11;
    case DType::bf16: return 16;
  }
  return 0;
}

}  // namespace brrr
