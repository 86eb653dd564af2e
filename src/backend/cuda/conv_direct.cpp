#include "backend/cuda/conv_direct.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "brrr/error.hpp"

namespace brrr::cuda {

namespace {
// The most shared memory a conv may ask of the kernel (the weights dominate: 7x7 on 64 output
// channels is 51 KB, on 128 channels 102 KB).
constexpr int64_t kMaxSmem = int64_t(160) << 10;
}  // namespace

std::string conv_direct_plan(const ConvGeometry& g, int in_c, DType dt, bool residual, int act,
                             float alpha, float beta, ConvDirect* out) {
  if (dt != DType::bf16 && dt != DType::f16) return fmt::format("{} data", dtype_name(dt));
  if (g.groups != 1 || g.x.size() != 4 || g.w.size() != 4 || g.y.size() != 4)
    return "not a 2-D conv of one group";
  if (in_c < 1 || in_c > 8) return fmt::format("{} input channels (at most 8)", in_c);
  if (residual) return "a residual";
  if (g.y[1] % 8 != 0) return fmt::format("{} output channels (a multiple of 8)", g.y[1]);
  const int64_t kh = g.w[2], kw = g.w[3], sh = g.stride[0], sw = g.stride[1];
  const int64_t dh = g.dilation[0], dw = g.dilation[1];
  // Two neighbouring taps of 4 channels per 8-wide K group where their pixels sit side by side
  // in the region (dilation 1 along the width) and each pair starts 16-byte aligned (an even
  // stride along the width; the region's rows an even number of pixels).
  const bool pairs = in_c <= 4 && dw == 1 && sw % 2 == 0;
  const int64_t cpp = pairs ? 4 : 8, gpr = pairs ? (kw + 1) / 2 : kw, groups = kh * gpr;
  const int64_t ks = (groups + 1) / 2;
  const int64_t rh = (kConvDirectTh - 1) * sh + (kh - 1) * dh + 1;
  int64_t rw = (kConvDirectTw - 1) * sw + (kw - 1) * dw + 1;
  if (pairs) rw = (rw + (kw % 2) + 1) / 2 * 2;  // the last pair's second tap, an even count
  const int64_t krows = (g.y[1] + 15) / 16 * 16, wst = ks * 16 + 8;
  const int64_t bytes = krows * wst * 2 + rh * rw * cpp * 2 + 16 + 2 * ks * 4;
  if (bytes > kMaxSmem)
    return fmt::format("it needs {} KB of shared memory (at most {})", (bytes + 1023) / 1024,
                       kMaxSmem / 1024);
  const int64_t bands = (g.y[2] + kConvDirectTh - 1) / kConvDirectTh;
  const int64_t tiles_w = (g.y[3] + kConvDirectTw - 1) / kConvDirectTw;
  const int64_t tiles = int64_t(g.y[0]) * bands * tiles_w;
  if (tiles > INT32_MAX) return "over 2^31 tiles";
  out->geo = {g.x[0],   in_c,     g.x[2],      g.x[3],        g.y[1],     g.y[2],  g.y[3],
              int(kh),  int(kw),  int(sh),     int(sw),       g.pad[0],   g.pad[1], int(dh),
              int(dw),  int(cpp), int(gpr),    int(groups),   int(ks),    int(rh), int(rw),
              int(bands), int(tiles_w), int(tiles), act, alpha, beta};
  out->smem = unsigned(bytes);
  return "";
}

unsigned conv_direct_grid(const ConvDirect& c, int sm_count) {
  const int64_t per_sm = std::clamp<int64_t>((int64_t(220) << 10) / (int64_t(c.smem) + 1024), 1, 4);
  return unsigned(std::min<int64_t>(c.geo.tiles, per_sm * sm_count));
}

Tensor conv_direct_weights(const Tensor& kcrs, const ConvDirectGeo& d) {
  const Tensor w = kcrs.contiguous();
  const int64_t taps = int64_t(d.kh) * d.kw, row = int64_t(d.ks) * 16;
  BRRR_ASSERT(dtype_size(w.dtype()) == 2 && shape_numel(w.shape()) == int64_t(d.k) * d.c * taps,
              "direct conv weights do not match the geometry");
  Tensor pk = Tensor::zeros(w.dtype(), {d.k, row});
  const auto* src = static_cast<const uint16_t*>(w.raw());
  auto* dst = static_cast<uint16_t*>(pk.raw());
  for (int64_t k = 0; k < d.k; ++k)
    for (int64_t grp = 0; grp < d.groups; ++grp)
      for (int64_t slot = 0; slot < 8; ++slot) {
        // Group grp of filter row i: tap j with channel ch in this slot of its 8.
        const int64_t i = grp / d.gpr, jj = grp % d.gpr;
        const int64_t j = d.cpp == 4 ? 2 * jj + slot / 4 : jj, ch = slot % d.cpp;
        if (j < d.kw && ch < d.c) dst[k * row + grp * 8 + slot] = src[((k * d.c + ch) * d.kh + i) * d.kw + j];
      }
  return pk;
}

std::string conv_direct_symbol(DType dt) {
  return dt == DType::bf16 ? "brrr_conv_direct_bf16" : "brrr_conv_direct_f16";
}

std::string conv_direct_source() { return "#include \"backend/cuda/device/conv_direct.cuh\"\n"; }

}  // namespace brrr::cuda
