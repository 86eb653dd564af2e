// Shared helpers for the CUDA backend tests: skip with a clear line when there is no device.
#pragma once
#ifdef BRRR_HAVE_CUDA
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_runtime.hpp"
#include "backend/cuda/cudnn_conv.hpp"
#include "brrr/tensor.hpp"

#define BRRR_REQUIRE_CUDA_DEVICE()                                     \
  do {                                                                 \
    std::string brrr_why_;                                             \
    if (!::brrr::cuda::cuda_device_available(&brrr_why_))              \
      GTEST_SKIP() << "no CUDA device: " << brrr_why_;                 \
  } while (0)

// Also skips when libcudnn cannot be loaded; `what` says what would have run on the host.
#define BRRR_REQUIRE_CUDNN(what)                                                      \
  do {                                                                                \
    BRRR_REQUIRE_CUDA_DEVICE();                                                       \
    std::string brrr_dnn_why_;                                                        \
    if (!::brrr::cuda::cudnn_available(&brrr_dnn_why_))                               \
      GTEST_SKIP() << "cuDNN could not be loaded, " what " would run on the host: "   \
                   << brrr_dnn_why_;                                                  \
  } while (0)

namespace brrr_cuda_test {
using namespace brrr::cuda;

// One device (primary context) for the whole test binary.
inline Device& test_device() {
  static Device dev(0);
  dev.make_current();
  return dev;
}

// ||out - ref|| / ||ref||, NaN-safe (a NaN anywhere gives infinity).
inline double rel_l2(const std::vector<float>& out, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

// Per output: the same shape, and a relative L2 error within `tol` of the reference.
inline void expect_rel_l2(const std::vector<brrr::Tensor>& got, const std::vector<brrr::Tensor>& want,
                          double tol, const std::string& context) {
  EXPECT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size() && k < want.size(); ++k) {
    EXPECT_EQ(got[k].shape(), want[k].shape());
    if (got[k].shape() != want[k].shape()) continue;
    std::vector<float> out(size_t(got[k].numel()));
    std::vector<double> ref(out.size());
    for (int64_t i = 0; i < got[k].numel(); ++i)
      out[size_t(i)] = float(got[k].at_double(i)), ref[size_t(i)] = want[k].at_double(i);
    EXPECT_LE(rel_l2(out, ref), tol) << "output " << k << "\n" << context;
  }
}

inline std::uint16_t f32_to_bf16_exact(float f) {  // caller passes bf16-representable values
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float bf16_to_f32(std::uint16_t h) {
  std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// IEEE half for normal numbers and zero (the tests use small multiples of 1/64).
inline std::uint16_t f32_to_f16_exact(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  std::uint16_t sign = (u >> 16) & 0x8000;
  if ((u & 0x7fffffff) == 0) return sign;
  int exp = int((u >> 23) & 0xff) - 127 + 15;
  return static_cast<std::uint16_t>(sign | (exp << 10) | ((u >> 13) & 0x3ff));
}
inline float f16_to_f32(std::uint16_t h) {
  std::uint32_t sign = std::uint32_t(h & 0x8000) << 16;
  int exp = (h >> 10) & 0x1f;
  std::uint32_t man = h & 0x3ff;
  if (exp == 0 && man == 0) {
    float f;
    std::memcpy(&f, &sign, 4);
    return f;
  }
  if (exp == 0) return (sign ? -1.f : 1.f) * std::ldexp(float(man), -24);  // subnormal
  if (exp == 31) return man ? NAN : (sign ? -INFINITY : INFINITY);
  std::uint32_t u = sign | (std::uint32_t(exp - 15 + 127) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace brrr_cuda_test
#endif
