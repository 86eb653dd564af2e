// choose_layouts: the CPU plan's storage layout of every value (src/passes/choose_layouts.cpp).
#pragma once
#include "backend/cpu/library.hpp"
#include "plan/kernel_ir.hpp"

namespace brrr {

// Rank-4 values that only library kernels produce and read are kept channel-blocked (AVX-512) or
// NHWC, oneDNN's fast layouts, so chains of convs and pools skip their per-call reorders. Runs
// on a plan whose Library kernels the library has accepted (relayout_capable_values assumes it).
// All NCHW under BRRR_NO_NHWC.
cpu::Layouts choose_layouts(const Graph& g, const plan::Plan& p);

}  // namespace brrr
