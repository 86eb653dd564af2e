// The direct conv kernel's geometry (device/conv_direct.cuh's by-value argument), one definition
// for the kernel and the host (backend/cuda/conv_direct.hpp): plain ints and floats, no CUDA.
// Embedded for NVRTC like prelude.cuh.
#pragma once

#define BRRR_CONV_DIRECT_TH 4         // output rows per tile: one warp each
#define BRRR_CONV_DIRECT_TW 16        // output columns per tile: one m16 tile
#define BRRR_CONV_DIRECT_THREADS 128  // 4 warps

struct brrr_conv_direct_geo {
  int n, c, h, w;                      // the input, NCHW (c <= 8)
  int k, oh, ow;                       // the output, NHWC: k channels, a multiple of 8
  int kh, kw, sh, sw, ph, pw, dh, dw;  // the window: kernel, strides, pads before, dilations
  int cpp;                             // channels per region pixel: 8 (one tap per 8-wide K
                                       // group), or 4 (two neighbouring taps of <= 4 channels)
  int gpr, groups;                     // 8-wide K groups per filter row, and in all (kh * gpr)
  int ks;                              // 16-wide K steps, ceil(groups / 2)
  int rh, rw;                          // the input region under one tile, in pixels
  int bands, tiles_w, tiles;           // tiles: n * bands (of 4 output rows) * tiles_w (of 16)
  int act;                             // brrr_conv_epilogue's codes: 0 none, 1 relu, 2 hardswish,
  float alpha, beta;                   // 3 hardsigmoid(alpha, beta), 4 clip(alpha, beta)
};
