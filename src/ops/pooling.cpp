// Pools: MaxPool (with optional Indices), AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool.
// They are window reductions, so they count as OpClass::normalization in the doctor's class table
// (memory-bound reductions, like the norms), not as contractions.
#include <limits>

#include "ops/window.hpp"

namespace brrr {
using namespace ops;

namespace {

enum class PoolKind { max, avg, lp };

struct PoolDims {
  int64_t N, C;
  Window w;
};

// X [N, C, spatial...]; kernel from kernel_shape, or the whole input for the global pools.
PoolDims pool_dims(const Node& n, const Shape& x, bool global) {
  if (x.size() < 3) fail("{} input X {} must be [N, C, spatial...]", n.op, shape_str(x));
  PoolDims d;
  d.N = x[0], d.C = x[1];
  std::vector<int64_t> in(x.begin() + 2, x.end());
  if (global) {
    Window& w = d.w;
    w.nsp = int(in.size());
    w.in = w.k = in;
    w.s.assign(in.size(), 1), w.d.assign(in.size(), 1);
    w.pb.assign(in.size(), 0), w.pe.assign(in.size(), 0), w.out.assign(in.size(), 1);
    return d;
  }
  if (!n.has_attr("kernel_shape")) fail("{} needs the kernel_shape attribute", n.op);
  std::vector<int64_t> k = n.attr_ints("kernel_shape");
  if (k.size() != in.size())
    fail("kernel_shape [{}] has {} dims but X {} has {} spatial dims", fmt::join(k, ","), k.size(),
         shape_str(x), in.size());
  d.w = forward_window(n, in, k, n.attr_int("ceil_mode", 0) != 0);
  // A window wholly in the padding would have no elements (ONNX Runtime refuses these too).
  for (size_t i = 0; i < k.size(); ++i)
    if (d.w.pb[i] >= k[i] || d.w.pe[i] >= k[i])
      fail("{} pads [{}] must be smaller than the kernel [{}]: a window would lie wholly in the "
           "padding",
           n.op, fmt::format("{},{}", fmt::join(d.w.pb, ","), fmt::join(d.w.pe, ",")),
           fmt::join(k, ","));
  return d;
}

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>)
    return T(float(v));
  else
    return T(v);
}

// One output per window over each (n, c) plane; geometry padded to 3 spatial dims.
template <typename T>
void pool_kernel(const T* X, T* Y, int64_t* I, int64_t planes, const Window& w3, PoolKind kind,
                 bool count_include_pad, double p, bool col_major) {
  const Window& w = w3;
  int64_t ID = w.in[0], IH = w.in[1], IW = w.in[2];
  int64_t plane_in = ID * IH * IW;
  // Taps [lo, hi) of a window starting at `start` that fall inside the input, and [0, hp) inside
  // input plus the explicit pads (what count_include_pad counts).
  auto taps = [&](int ax, int64_t o, int64_t& start, int64_t& lo, int64_t& hi, int64_t& hp) {
    start = o * w.s[ax] - w.pb[ax];
    lo = std::max<int64_t>(0, ceil_div(-start, w.d[ax]));
    hi = std::min<int64_t>(w.k[ax], floor_div(w.in[ax] - 1 - start, w.d[ax]) + 1);
    hp = std::min<int64_t>(w.k[ax], floor_div(w.in[ax] + w.pe[ax] - 1 - start, w.d[ax]) + 1);
    if (hi < lo) hi = lo;
  };
  using C = compute_t<T>;
  int64_t yi = 0;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* x = X + pl * plane_in;
    for (int64_t od = 0; od < w.out[0]; ++od) {
      int64_t sd, d0, d1, dp;
      taps(0, od, sd, d0, d1, dp);
      for (int64_t oh = 0; oh < w.out[1]; ++oh) {
        int64_t sh, h0, h1, hp;
        taps(1, oh, sh, h0, h1, hp);
        for (int64_t ow = 0; ow < w.out[2]; ++ow, ++yi) {
          int64_t sw, w0, w1, wp;
          taps(2, ow, sw, w0, w1, wp);
          C best = std::numeric_limits<C>::lowest();
          if constexpr (std::is_floating_point_v<C>) best = -std::numeric_limits<C>::infinity();
          int64_t best_at = -1;
          double sum = 0;
          for (int64_t kd = d0; kd < d1; ++kd) {
            int64_t id = sd + kd * w.d[0];
            for (int64_t kh = h0; kh < h1; ++kh) {
              int64_t ih = sh + kh * w.d[1];
              const T* row = x + (id * IH + ih) * IW;
              for (int64_t kw = w0; kw < w1; ++kw) {
                int64_t iw = sw + kw * w.d[2];
                C v = C(row[iw]);
                if (kind == PoolKind::max) {
                  // NaN wins (and stays): a max propagates NaN, as GlobalMaxPool and ReduceMax do.
                  bool take = best_at < 0 || v > best;
                  if constexpr (std::is_floating_point_v<C>) take = take || (v != v && best == best);
                  if (take) {
                    best = v;
                    best_at = col_major ? id + ih * ID + iw * ID * IH : (id * IH + ih) * IW + iw;
                  }
                } else if (kind == PoolKind::avg) {
                  sum += double(v);
                } else {
                  sum += std::pow(std::abs(double(v)), p);
                }
              }
            }
          }
          if (kind == PoolKind::max) {
            Y[yi] = T(best);
            if (I) I[yi] = best_at < 0 ? -1 : pl * plane_in + best_at;
          } else if (kind == PoolKind::avg) {
            int64_t cnt = count_include_pad ? dp * hp * wp : (d1 - d0) * (h1 - h0) * (w1 - w0);
            Y[yi] = from_double<T>(sum / double(cnt));
          } else {
            Y[yi] = from_double<T>(std::pow(sum, 1.0 / p));
          }
        }
      }
    }
  }
}

void add_pool(OpTable& t, const char* name, PoolKind kind, bool global) {
  OpDef d;
  d.name = name;
  d.cls = OpClass::normalization;  // window reductions
  d.infer = [kind, global](InferCtx& c) {
    DType dt = c.in_dtype(0);
    bool ok = is_float_dtype(dt) || (kind == PoolKind::max && (dt == DType::i8 || dt == DType::u8));
    if (!ok) c.fail("{} does not support {} inputs", c.node.op, dtype_name(dt));
    PoolDims pd;
    try {
      pd = pool_dims(c.node, c.in_shape(0), global);
    } catch (const Error& e) {
      c.fail_msg(e.what());
    }
    Shape y{pd.N, pd.C};
    y.insert(y.end(), pd.w.out.begin(), pd.w.out.end());
    c.set_output(0, dt, y);
    if (kind == PoolKind::max && !global && c.node.outputs.size() > 1)
      c.set_output(1, DType::i64, y);
  };
  d.reference = [kind, global](KernelCtx& k) {
    PoolDims pd = pool_dims(k.node, k.inputs[0].shape(), global);
    bool cip = k.node.attr_int("count_include_pad", 0) != 0;
    double p = double(k.node.attr_int("p", 2));
    bool col_major = k.node.attr_int("storage_order", 0) != 0;
    Tensor x = k.inputs[0].contiguous();
    int64_t* idx = k.outputs.size() > 1 ? k.outputs[1].data<int64_t>() : nullptr;
    dispatch_dtype(x.dtype(), [&]<typename T>() {
      if constexpr (std::is_same_v<T, bool>) {
        fail("{} does not support bool inputs", k.node.op);
      } else {
        pool_kernel<T>(x.data<T>(), k.outputs[0].data<T>(), idx, pd.N * pd.C, pd.w.as3d(), kind,
                       cip, p, col_major);
      }
    });
  };
  d.cost = [kind](const Graph& g, const Node& n) {
    const Shape& y = g.value(n.outputs[0]).shape;
    const Shape& x = g.value(n.inputs[0]).shape;
    // One op per window element; the window is the whole plane for the global pools.
    std::vector<int64_t> k = n.attr_ints("kernel_shape", Shape(x.begin() + 2, x.end()));
    double elems = double(shape_numel(y)) * double(shape_numel(k));
    Cost c;
    c.flops = elems;
    if (kind == PoolKind::lp) c.special["pow"] = elems + double(shape_numel(y));
    return c;
  };
  // Max and average windows are library kernels; global averages the row-mean kernel.
  if (kind == PoolKind::max || kind == PoolKind::avg)
    d.library = global ? (kind == PoolKind::avg ? LibraryKind::GlobalMean : LibraryKind::None)
                       : LibraryKind::Pool;
  d.reduce = kind == PoolKind::max ? ReduceKind::Max : ReduceKind::Mean;  // its window's
  t.add(std::move(d));
}

}  // namespace

void register_pooling_ops(OpTable& t) {
  add_pool(t, "MaxPool", PoolKind::max, false);
  add_pool(t, "AveragePool", PoolKind::avg, false);
  add_pool(t, "LpPool", PoolKind::lp, false);
  add_pool(t, "GlobalMaxPool", PoolKind::max, true);
  add_pool(t, "GlobalAveragePool", PoolKind::avg, true);
}

}  // namespace brrr
