#include "passes/choose_device_layouts.hpp"

namespace brrr {

std::vector<char> choose_device_layouts(const Graph& g, const plan::Plan& p,
                                        const std::vector<DeviceLayoutRole>& roles) {
  using R = DeviceLayoutRole;
  std::vector<char> nhwc(g.values.size(), 0);
  auto fits = [&](int v) {
    const Value& val = g.value(v);
    return val.shape.size() == 4 && val.shape[2] * val.shape[3] > 1 &&
           (val.dtype == DType::bf16 || val.dtype == DType::f16);
  };
  for (size_t k = 0; k < p.kernels.size(); ++k)
    if ((roles[k].kind == R::Conv || roles[k].kind == R::Pool) && roles[k].out >= 0 &&
        fits(roles[k].out))
      nhwc[size_t(roles[k].out)] = 1;
  for (int o : g.outputs) nhwc[size_t(o)] = 0;
  for (bool changed = true; changed;) {
    changed = false;
    auto drop = [&](int v) {
      if (v >= 0 && nhwc[size_t(v)]) nhwc[size_t(v)] = 0, changed = true;
    };
    for (size_t k = 0; k < p.kernels.size(); ++k) {
      const R& r = roles[k];
      for (int v : p.kernels[k].inputs) {
        if (!nhwc[size_t(v)]) continue;
        const bool out_nhwc = r.out >= 0 && nhwc[size_t(r.out)];
        const bool takes = (r.kind == R::Conv && (v == r.x || v == r.sum) && out_nhwc) ||
                           (r.kind == R::Pool && v == r.x && out_nhwc) ||
                           (r.kind == R::ChannelMean && v == r.x);
        if (!takes) drop(v);
      }
      // A residual has the Conv output's layout; a pool's output its input's.
      if (r.kind == R::Conv && r.sum >= 0 && r.out >= 0 && nhwc[size_t(r.out)] != nhwc[size_t(r.sum)])
        drop(r.out), drop(r.sum);
      if (r.kind == R::Pool && r.out >= 0 && nhwc[size_t(r.out)] && !nhwc[size_t(r.x)]) drop(r.out);
    }
  }
  return nhwc;
}

}  // namespace brrr
