// float32 -> float16 in bulk: a model's weights at --precision fp16 (Llama-1B: 1.2 billion).
#pragma once
#include <cstdint>

#include "brrr/dtype.hpp"

namespace brrr {

// dst[i] = f16(src[i]), or of src[i] clamped to +-65504 when `saturate` (NaN stays NaN), with
// the CPU's F16C conversion (8 at a time, round to nearest even) where it has one: the same
// bits as f16(float) for every number; a NaN is a quiet NaN either way.
void f32_to_f16(const float* src, f16* dst, int64_t n, bool saturate);

}  // namespace brrr
