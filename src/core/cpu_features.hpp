// What the host CPU can do that a precision choice depends on (read once through cpuid), kept
// apart from the decision so that a test can hand the decision any CPU.
#pragma once

namespace brrr {

struct CpuFeatures {
  bool avx512_core = false;  // AVX-512 F/BW/VL/DQ with the OS saving zmm state
  bool avx512_bf16 = false;  // VCVTNE2PS2BF16 / VDPBF16PS (Cooper Lake, Zen 4, Sapphire Rapids)
  bool amx_bf16 = false;     // AMX tiles with bf16 TDPBF16PS (Sapphire Rapids and later)

  // This machine's CPU (x86-64 cpuid; all false elsewhere).
  static CpuFeatures host();
};

}  // namespace brrr
