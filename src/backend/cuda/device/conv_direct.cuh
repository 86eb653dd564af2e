// A direct convolution for 16-bit convs on few input channels (an RGB stem: ResNet-50's 7x7
// stride-2 conv on 3 channels), on Tensor Cores (mma.sync m16n8k16, float32 accumulators). It
// reads the NCHW graph input as it is and writes the output channels-last (NHWC) with its bias
// and activation applied, so the stem is one kernel where the plan ran three (the NCHW -> NHWC
// transpose of the input with its channels padded to 8, im2col, a cuBLASLt GEMM) or two with
// cuDNN. Embedded for NVRTC like prelude.cuh; the executor includes it in a model's module only
// when a conv can take it (cuda_executor_conv.cpp, BRRR_CONV_DIRECT).
//
// The GEMM it computes: rows are output pixels, columns output channels, and K runs over 8-wide
// groups of the filter's taps and channels, two groups per 16-wide K step. A group is one tap
// (i, j) with its 8 channels (zeros past the input's c), or, where the input has at most 4
// channels, the stride along the width is even and the dilation along it 1 (an RGB stem), two
// neighbouring taps (i, 2jj) and (i, 2jj + 1) with 4 channels each: ResNet-50's 7x7 stem then
// takes 14 K steps instead of 25. Each CTA of 4 warps takes tiles of 4 output rows x 16 output
// columns of one image (warp w: output row w of the tile, one m16 tile), all output channels 64
// at a time (eight n8 tiles per warp). Per tile the input region under it (rh x rw pixels) is
// copied into shared memory at cpp channels a pixel (zeros outside the image and past c), so
// each group of 16 pixels is one ldmatrix row each (16 contiguous bytes: one pixel, or two
// neighbours). The weights ([k][groups * 8], rows padded for bank-conflict-free ldmatrix) are
// copied in once per CTA by cp.async, before the programmatic-launch wait (they are
// constants). The grid strides over the tiles.
#pragma once
#include "backend/cuda/device/conv_direct_geo.h"
#include "backend/cuda/device/mma.cuh"

#define BRRR_CONV_DIRECT_LOADS 12  // input elements a thread has in flight per round of a tile's loads

// Dynamic shared memory layout, in bytes from the start (the host computes the same sizes):
// the weights, krows x wst 16-bit values (krows = k rounded up to 16 with zero rows, wst =
// ks * 16 + 8: a row stride of an odd number of 16-byte pieces keeps the 8 rows of each
// ldmatrix on distinct banks); the region, rh * rw pixels of cpp 16-bit channels; a 16-byte zero
// row; the per-group byte offsets inside the region (2 * ks ints; -1 for the groups past the
// filter, bit 0 set where a pair's second tap is past the filter's width: its 4 channels are
// zeroed in the fragment, so that an infinity there cannot make a NaN of zero weights).
template <class T>
static __device__ __forceinline__ void brrr_conv_direct_t(const T* __restrict__ x, const uint4* __restrict__ wpk,
                                                          const T* __restrict__ bias, T* __restrict__ y,
                                                          const brrr_conv_direct_geo& g) {
  extern __shared__ __align__(16) unsigned char brrr_cd_smem[];
  const int wst = g.ks * 16 + 8;
  const int krows = (g.k + 15) & ~15;
  unsigned short* sw = reinterpret_cast<unsigned short*>(brrr_cd_smem);
  unsigned short* sx = sw + krows * wst;
  const int plane = g.rh * g.rw, pix_bytes = g.cpp * 2;
  unsigned short* zero = sx + plane * g.cpp;
  int* tap_off = reinterpret_cast<int*>(zero + 8);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nthr = blockDim.x;
  const uint4 z4 = make_uint4(0u, 0u, 0u, 0u);
  // The weights: row r of the packed [k][ks * 16] array into row r of the padded smem rows, as
  // 16-byte cp.async copies (zero-filled past the real rows and pieces), all in flight at once:
  // a plain load-then-store loop waited one memory round trip per piece, about 15 a thread for
  // ResNet-50's stem, and at batch 1 each CTA has a single tile to amortize them over.
  {
    const int pieces = wst / 8, src_pieces = 2 * g.ks;
    const unsigned sw_dst = brrr_smem_u32(sw);
    for (int i = tid; i < krows * pieces; i += nthr) {
      const int r = i / pieces, q = i - r * pieces;
      const bool real = r < g.k && q < src_pieces;
      brrr_cp16(sw_dst + 16u * (unsigned)i, real ? wpk + (size_t)r * src_pieces + q : wpk,
                real ? 16 : 0);
    }
    brrr_cp_commit();
  }
  // The region and the zero row start as zeros; channels c..cpp-1 stay zero (tiles write ch < c).
  for (int i = tid; i <= plane * g.cpp / 8; i += nthr) reinterpret_cast<uint4*>(sx)[i] = z4;
  for (int t = tid; t < 2 * g.ks; t += nthr) {
    const int i = t / g.gpr, jj = t - i * g.gpr;
    const int j = g.cpp == 4 ? 2 * jj : jj;  // the group's first tap
    tap_off[t] = t >= g.groups ? -1
                 : ((i * g.dh * g.rw + j * g.dw) * pix_bytes) | (g.cpp == 4 && j + 1 >= g.kw ? 1 : 0);
  }
  brrr_grid_wait();
  const unsigned sx_u = brrr_smem_u32(sx), sw_u = brrr_smem_u32(sw), zero_u = brrr_smem_u32(zero);
  const int q = lane >> 3, r8 = lane & 7;
  // A (ldmatrix x4: pixels 0-7 / 8-15 of the warp's 16, K halves 0-7 / 8-15 = the step's two
  // groups): this lane's row is pixel r8 + (q & 1) * 8 at group 2 * s + (q >> 1).
  const int apix = r8 + (q & 1) * 8, ahalf = q >> 1;
  const unsigned abase = sx_u + (unsigned)((warp * g.sh * g.rw + apix * g.sw) * pix_bytes);
  // B (ldmatrix x4 over two n8 tiles: channels 0-7 at K 0-7 / 8-15, channels 8-15 likewise): this
  // lane's row is channel (q >> 1) * 8 + r8 of the pair, K half q & 1.
  const unsigned bbase = sw_u + (unsigned)(((((q >> 1) * 8 + r8) * wst) + (q & 1) * 8) * 2);
  const unsigned short* xs = reinterpret_cast<const unsigned short*>(x);
  const size_t img_elems = (size_t)g.c * g.h * g.w;
  const int region = g.c * plane;
  for (int tile = blockIdx.x; tile < g.tiles; tile += gridDim.x) {
    const int tw = tile % g.tiles_w, rest = tile / g.tiles_w;
    const int band = rest % g.bands, img = rest / g.bands;
    const int oh0 = band * BRRR_CONV_DIRECT_TH, ow0 = tw * BRRR_CONV_DIRECT_TW;
    const int ih0 = oh0 * g.sh - g.ph, iw0 = ow0 * g.sw - g.pw;
    const unsigned short* xi = xs + (size_t)img * img_elems;
    __syncthreads();  // the last tile's ldmatrix reads of the region are done
    // The region, BRRR_CONV_DIRECT_LOADS elements a thread in flight: all loads first, then the
    // stores (ResNet-50's stem: 3 x 13 x 38 elements, one round trip to memory for 128 threads).
    for (int e0 = 0; e0 < region; e0 += BRRR_CONV_DIRECT_LOADS * nthr) {
      unsigned short v[BRRR_CONV_DIRECT_LOADS];
      int at[BRRR_CONV_DIRECT_LOADS];
#pragma unroll
      for (int u = 0; u < BRRR_CONV_DIRECT_LOADS; ++u) {
        const int e = e0 + u * nthr + tid;
        v[u] = 0;
        at[u] = -1;
        if (e < region) {
          const int ch = e / plane, p = e - ch * plane;
          const int rr = p / g.rw, cc = p - rr * g.rw;
          const int ih = ih0 + rr, iw = iw0 + cc;
          if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) v[u] = xi[((size_t)ch * g.h + ih) * g.w + iw];
          at[u] = p * g.cpp + ch;
        }
      }
#pragma unroll
      for (int u = 0; u < BRRR_CONV_DIRECT_LOADS; ++u)
        if (at[u] >= 0) sx[at[u]] = v[u];
    }
    // This thread's weight copies (in flight with the first tile's region loads; nothing to wait
    // for after it), which the barrier then publishes to the CTA.
    brrr_cp_wait<0>();
    __syncthreads();
    const int oh = oh0 + warp;
    for (int n0 = 0; n0 < g.k; n0 += 64) {
      const int nt = min(8, (g.k - n0) >> 3);  // n8 tiles in this chunk
      float acc[1][8][4];
      brrr_zero_acc(acc);
      const unsigned bchunk = bbase + (unsigned)(n0 * wst * 2);
#pragma unroll 2
      for (int s = 0; s < g.ks; ++s) {
        const int off_lo = tap_off[2 * s], off_hi = tap_off[2 * s + 1];
        const int off = ahalf ? off_hi : off_lo;
        unsigned a[4];
        brrr_ldsm4(a, off >= 0 ? abase + (unsigned)(off & ~1) : zero_u);
        // A pair whose second tap is past the filter: that tap's channels (K 4-7 of the group, the
        // registers of lanes with lane % 4 >= 2) read as zeros. a[0], a[1] hold the step's first
        // group, a[2], a[3] its second.
        if (lane & 2) {
          if (off_lo & 1) a[0] = a[1] = 0u;
          if (off_hi & 1) a[2] = a[3] = 0u;
        }
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          if (2 * jj < nt) {
            unsigned b[4];
            brrr_ldsm4(b, bchunk + (unsigned)((jj * 16 * wst + s * 16) * 2));
            brrr_mma16816<T>(acc[0][2 * jj], a, b[0], b[1]);
            if (2 * jj + 1 < nt) brrr_mma16816<T>(acc[0][2 * jj + 1], a, b[2], b[3]);
          }
        }
      }
      // The accumulator's rows are pixels lane / 4 and lane / 4 + 8, its columns channels
      // 2 * (lane % 4) and the next one of each n8 tile.
      if (oh < g.oh) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (j < nt) {
            const int ch = n0 + j * 8 + 2 * (lane & 3);
            const float b0 = bias ? brrr_ld(bias + ch) : 0.0f, b1 = bias ? brrr_ld(bias + ch + 1) : 0.0f;
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              const int ow = ow0 + (lane >> 2) + hf * 8;
              if (ow < g.ow) {
                float v[2] = {brrr_conv_act(acc[0][j][2 * hf] + b0, g.act, g.alpha, g.beta),
                              brrr_conv_act(acc[0][j][2 * hf + 1] + b1, g.act, g.alpha, g.beta)};
                T* dst = y + (((size_t)img * g.oh + oh) * g.ow + ow) * g.k + ch;
                *reinterpret_cast<unsigned*>(dst) = brrr_pack(v, dst);
              }
            }
          }
        }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(BRRR_CONV_DIRECT_THREADS, 1) brrr_conv_direct_bf16(const brrr_bf16* __restrict__ x, const uint4* __restrict__ wpk, const brrr_bf16* __restrict__ bias, brrr_bf16* __restrict__ y, brrr_conv_direct_geo g) { brrr_conv_direct_t<brrr_bf16>(x, wpk, bias, y, g); }
extern "C" __global__ void __launch_bounds__(BRRR_CONV_DIRECT_THREADS, 1) brrr_conv_direct_f16(const brrr_f16* __restrict__ x, const uint4* __restrict__ wpk, const brrr_f16* __restrict__ bias, brrr_f16* __restrict__ y, brrr_conv_direct_geo g) { brrr_conv_direct_t<brrr_f16>(x, wpk, bias, y, g); }
