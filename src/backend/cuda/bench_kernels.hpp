// Hand-written CUDA kernels (NVRTC source) for the probe and tests until the kernel-IR emitter
// generates the real ones. Kept minimal on purpose.
#pragma once

namespace brrr::cuda {

// extern "C" kernels in one source:
//   brrr_empty()
//   brrr_fill_f32(float* x, unsigned long long n, unsigned seed, float scale)   uniform [-s, s)
//   brrr_fill_bf16(unsigned short* x, unsigned long long n, unsigned seed, float scale)
//   brrr_fill_f16(unsigned short* x, unsigned long long n, unsigned seed, float scale)
//   brrr_cos_f32x4(const float4* x, float4* y, unsigned long long n4)           y = cos(x)
//   brrr_cos_cos_f32x4(const float4* x, float4* y, unsigned long long n4)       y = cos(cos(x))
//   brrr_fma_peak(float* out, int iters)          8 independent FMA chains per thread
//   brrr_expf_tput / brrr_cosf_tput / brrr_tanhf_tput / brrr_erff_tput(float* out, int iters)
//       4 independent chains per thread of x = f(x) * a + b (one special function + one FMA)
const char* bench_kernels_source();

inline constexpr int kFmaChains = 8;
inline constexpr int kSpecialChains = 4;

}  // namespace brrr::cuda
