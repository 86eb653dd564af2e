// Sliding-window geometry shared by Conv, ConvTranspose and the pools: kernel, strides, dilations,
// pads (explicit or auto_pad) and the output's spatial shape, per the ONNX spec formulas.
#pragma once
#include <string>
#include <vector>

#include "ops/op_util.hpp"

namespace brrr::ops {

struct Window {
  int nsp = 0;  // number of spatial dims
  std::vector<int64_t> in, k, s, d, pb, pe, out;

  // The same geometry with leading unit dims so that it has exactly 3 spatial dims; lets one
  // kernel serve 1-D, 2-D and 3-D.
  Window as3d() const {
    Window w = *this;
    int add = 3 - nsp;
    auto pad = [&](std::vector<int64_t>& v, int64_t fill) {
      v.insert(v.begin(), size_t(add), fill);
    };
    pad(w.in, 1), pad(w.k, 1), pad(w.s, 1), pad(w.d, 1), pad(w.pb, 0), pad(w.pe, 0), pad(w.out, 1);
    w.nsp = 3;
    return w;
  }
};

inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

// Reads a per-spatial-dim int list attribute; fails unless it has `n` entries.
inline std::vector<int64_t> spatial_attr(const Node& node, const char* name, size_t n, int64_t dflt,
                                         int64_t min_value) {
  std::vector<int64_t> v = node.attr_ints(name, std::vector<int64_t>(n, dflt));
  if (v.size() != n)
    fail("attribute {} has {} values but the input has {} spatial dims", name, v.size(), n);
  for (int64_t x : v)
    if (x < min_value)
      fail("attribute {} = [{}] must be >= {}", name, fmt::join(v, ","), min_value);
  return v;
}

// Geometry of a forward window op (Conv, MaxPool, AveragePool, LpPool) over input spatial dims
// `in` with kernel `k`. ceil_mode is the pools' attribute (windows starting in the right padding
// are dropped). Throws brrr::Error without the node label (the caller adds it).
inline Window forward_window(const Node& node, const std::vector<int64_t>& in,
                             const std::vector<int64_t>& k, bool ceil_mode) {
  Window w;
  w.nsp = int(in.size());
  size_t n = in.size();
  w.in = in;
  w.k = k;
  w.s = spatial_attr(node, "strides", n, 1, 1);
  w.d = spatial_attr(node, "dilations", n, 1, 1);
  w.pb.assign(n, 0);
  w.pe.assign(n, 0);
  w.out.assign(n, 0);
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  for (size_t i = 0; i < n; ++i)
    if (k[i] < 1) fail("kernel dim {} is {}; it must be >= 1", i, k[i]);
  if (auto_pad == "NOTSET") {
    std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
    if (pads.size() != 2 * n)
      fail("attribute pads has {} values; {} spatial dims need {}", pads.size(), n, 2 * n);
    for (int64_t p : pads)
      if (p < 0) fail("attribute pads = [{}] has a negative value", fmt::join(pads, ","));
    for (size_t i = 0; i < n; ++i) w.pb[i] = pads[i], w.pe[i] = pads[n + i];
    for (size_t i = 0; i < n; ++i) {
      int64_t dk = (k[i] - 1) * w.d[i] + 1;
      int64_t span = in[i] + w.pb[i] + w.pe[i] - dk;
      if (span < 0)
        fail("spatial dim {}: input {} plus pads {}+{} is smaller than the dilated kernel {}", i,
             in[i], w.pb[i], w.pe[i], dk);
      if (ceil_mode) {
        w.out[i] = ceil_div(span, w.s[i]) + 1;
        // The last window must start inside the input or the left padding.
        if ((w.out[i] - 1) * w.s[i] >= in[i] + w.pb[i]) w.out[i]--;
      } else {
        w.out[i] = span / w.s[i] + 1;
      }
    }
  } else if (auto_pad == "VALID") {
    for (size_t i = 0; i < n; ++i) {
      int64_t dk = (k[i] - 1) * w.d[i] + 1;
      if (in[i] < dk)
        fail("spatial dim {}: input {} is smaller than the dilated kernel {}", i, in[i], dk);
      w.out[i] = (in[i] - dk) / w.s[i] + 1;
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t dk = (k[i] - 1) * w.d[i] + 1;
      w.out[i] = ceil_div(in[i], w.s[i]);
      int64_t total = std::max<int64_t>(0, (w.out[i] - 1) * w.s[i] + dk - in[i]);
      bool upper = auto_pad == "SAME_UPPER";  // SAME_UPPER puts the odd pad at the end
      w.pb[i] = upper ? total / 2 : total - total / 2;
      w.pe[i] = total - w.pb[i];
    }
  } else {
    fail("auto_pad '{}' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER", auto_pad);
  }
  return w;
}

// Range [lo, hi) of output positions o for which o*s + kk*d - p lands inside [0, in).
inline void valid_range(int64_t in, int64_t out, int64_t s, int64_t kk_d, int64_t p, int64_t& lo,
                        int64_t& hi) {
  lo = std::max<int64_t>(0, ceil_div(p - kk_d, s));
  hi = std::min<int64_t>(out, floor_div(in - 1 + p - kk_d, s) + 1);
  if (hi < lo) hi = lo;
}

// Runs f.template operator()<In, Out>(inputs) with the float inputs made contiguous in the type
// the kernel computes with: float for f32/f16/bf16, double for f64. Out is the storage type.
template <typename F>
void dispatch_float_kernel(KernelCtx& k, F&& f) {
  DType t = k.inputs[0].dtype();
  auto prep = [&](DType to) {
    std::vector<Tensor> xs;
    for (const Tensor& x : k.inputs)
      xs.push_back(!x.defined() ? Tensor() : x.dtype() == to ? x.contiguous() : x.cast(to));
    return xs;
  };
  switch (t) {
    case DType::f32:
      return f.template operator()<float, float>(prep(DType::f32));
    case DType::f64:
      return f.template operator()<double, double>(prep(DType::f64));
    case DType::f16:
      return f.template operator()<float, f16>(prep(DType::f32));
    case DType::bf16:
      return f.template operator()<float, bf16>(prep(DType::f32));
    default:
      fail("{} inputs are not supported by {}", dtype_name(t), k.node.op);
  }
}

inline bool is_float_dtype(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

}  // namespace brrr::ops
