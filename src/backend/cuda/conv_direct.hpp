// brrr's direct conv kernel (device/conv_direct.cuh) for 16-bit 2-D convs on few input channels
// (an RGB stem): which convs it takes, its geometry, shared memory and grid, and its weights in the
// layout it reads. Header free of CUDA includes; the executor's use is in cuda_executor_conv.cpp.
#pragma once
#include <string>

#include "backend/cuda/cudnn_conv.hpp"
#include "backend/cuda/device/conv_direct_geo.h"
#include "brrr/tensor.hpp"

namespace brrr::cuda {

// The kernel's geometry (its by-value argument; one definition with the kernel).
using ConvDirectGeo = brrr_conv_direct_geo;

struct ConvDirect {
  ConvDirectGeo geo{};
  unsigned smem = 0;  // dynamic shared memory per CTA, bytes
};

constexpr int kConvDirectThreads = BRRR_CONV_DIRECT_THREADS;  // one warp per output row of a tile
constexpr int kConvDirectTh = BRRR_CONV_DIRECT_TH, kConvDirectTw = BRRR_CONV_DIRECT_TW;

// Whether a conv with geometry `g` (2-D, NCHW dims; g.x[1] may be its padded channel count) on
// `in_c` real input channels, type `dt`, with a residual or not and activation `act` (alpha,
// beta) runs on the kernel: "" and `out` filled, else why not.
std::string conv_direct_plan(const ConvGeometry& g, int in_c, DType dt, bool residual, int act,
                             float alpha, float beta, ConvDirect* out);
// The grid: at most the CTAs `sm_count` SMs hold at once (by shared memory, at most 4 an SM);
// the CTAs stride over the tiles.
unsigned conv_direct_grid(const ConvDirect& c, int sm_count);
// KCRS weights ([k, c, kh, kw], 16-bit) as the kernel reads them: [k][2 * ks groups][8], group
// i * gpr + jj holding tap (i, jj) with its channels, or with cpp 4 taps (i, 2jj) and (i, 2jj + 1)
// with 4 channels each; zeros past the filter's taps and channels.
Tensor conv_direct_weights(const Tensor& kcrs, const ConvDirectGeo& d);
// The kernel's name for a 16-bit type, and the module part that defines both types' kernels.
std::string conv_direct_symbol(DType dt);
std::string conv_direct_source();

}  // namespace brrr::cuda
