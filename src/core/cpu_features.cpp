#include "core/cpu_features.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace brrr {

CpuFeatures CpuFeatures::host() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return f;  // no OSXSAVE
  // XCR0: the OS saves SSE, AVX, opmask and both halves of the zmm registers (bits 1, 2, 5-7).
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const bool os_zmm = (lo & 0xe6u) == 0xe6u;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const unsigned ebx7 = b, edx7 = d;
  constexpr unsigned kF = 1u << 16, kDQ = 1u << 17, kBW = 1u << 30, kVL = 1u << 31;
  f.avx512_core = os_zmm && (ebx7 & (kF | kDQ | kBW | kVL)) == (kF | kDQ | kBW | kVL);
  // AMX-BF16 and AMX-TILE (leaf 7 EDX bits 22, 24); the OS grants tile state per process
  // (oneDNN asks for it), so only the CPU's bits are read here.
  f.amx_bf16 = f.avx512_core && (edx7 & (1u << 22)) && (edx7 & (1u << 24));
  if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = f.avx512_core && (a & (1u << 5));
#endif
  return f;
}

}  // namespace brrr
