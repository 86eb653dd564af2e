// Contractions: MatMul, Gemm, Conv, ConvTranspose, Einsum. Reference kernels use loop orders with
// contiguous inner loops and accumulate floats in double (ints in wrapping 64-bit), so that they
// are accurate oracles and fast enough to run a small CNN through the reference executor.
#include "ops/window.hpp"

namespace brrr {
using namespace ops;

void register_einsum_op(OpTable& t);  // einsum.cpp

namespace {

// acc[i, :] = sum_k A[i, k] * B[k, :] for row-major A [M, K] and B [K, N]; then epi(i, acc_row).
// The i-k-j order keeps the inner loop contiguous in B and in the accumulator.
template <typename In, typename Acc, typename Epi>
void matmul_rows(const In* A, const In* B, int64_t M, int64_t N, int64_t K, std::vector<Acc>& acc,
                 Epi&& epi) {
  acc.resize(size_t(N));
  for (int64_t i = 0; i < M; ++i) {
    std::fill(acc.begin(), acc.end(), Acc(0));
    Acc* a_ = acc.data();
    for (int64_t kk = 0; kk < K; ++kk) {
      Acc av = Acc(A[i * K + kk]);
      const In* b = B + kk * N;
      for (int64_t j = 0; j < N; ++j) a_[j] += av * Acc(b[j]);
    }
    epi(i, a_);
  }
}

// ---- MatMul ----

struct MatMulDims {
  Shape batch;  // broadcast batch dims
  int64_t M, N, K;
  bool a_vec, b_vec;  // 1-D operands (their unit dim is dropped from the output)
};

MatMulDims matmul_dims(const Shape& a, const Shape& b,
                       const std::function<void(std::string)>& err) {
  if (a.empty() || b.empty())
    err(fmt::format("MatMul operands must have rank >= 1: {} x {}", shape_str(a), shape_str(b)));
  MatMulDims d;
  d.a_vec = a.size() == 1;
  d.b_vec = b.size() == 1;
  Shape pa = d.a_vec ? Shape{1, a[0]} : a;
  Shape pb = d.b_vec ? Shape{b[0], 1} : b;
  d.M = pa[pa.size() - 2];
  d.K = pa.back();
  d.N = pb.back();
  if (pb[pb.size() - 2] != d.K)
    err(fmt::format("MatMul inner dims differ: {} x {}", shape_str(a), shape_str(b)));
  Shape ba(pa.begin(), pa.end() - 2), bb(pb.begin(), pb.end() - 2);
  try {
    d.batch = broadcast_shapes(ba, bb);
  } catch (const Error&) {
    err(fmt::format("MatMul batch dims {} and {} cannot be broadcast ({} x {})", shape_str(ba),
                    shape_str(bb), shape_str(a), shape_str(b)));
  }
  return d;
}

Shape matmul_out_shape(const MatMulDims& d) {
  Shape s = d.batch;
  if (!d.a_vec) s.push_back(d.M);
  if (!d.b_vec) s.push_back(d.N);
  return s;
}

template <typename In, typename Acc, typename Out>
void matmul_kernel(const Tensor& a, const Tensor& b, Tensor& out, const MatMulDims& d) {
  Shape sa = d.batch, sb = d.batch;
  sa.insert(sa.end(), {d.M, d.K});
  sb.insert(sb.end(), {d.K, d.N});
  // Contiguous 2-D blocks, broadcast (stride 0) over the batch dims.
  Tensor ea = a.contiguous().reshape(d.a_vec ? Shape{1, d.K} : a.shape()).expand(sa);
  Tensor eb = b.contiguous().reshape(d.b_vec ? Shape{d.K, 1} : b.shape()).expand(sb);
  size_t nb = d.batch.size();
  Shape ta(ea.strides().begin(), ea.strides().begin() + nb);
  Shape tb(eb.strides().begin(), eb.strides().begin() + nb);
  const In* pa = static_cast<const In*>(ea.raw());
  const In* pb = static_cast<const In*>(eb.raw());
  Out* po = out.data<Out>();
  std::vector<Acc> acc;
  for_each_index<2>(d.batch, {&ta, &tb}, [&](int64_t bi, const std::array<int64_t, 2>& off) {
    Out* o = po + bi * d.M * d.N;
    matmul_rows<In, Acc>(pa + off[0], pb + off[1], d.M, d.N, d.K, acc, [&](int64_t i, Acc* row) {
      for (int64_t j = 0; j < d.N; ++j) o[i * d.N + j] = Out(row[j]);
    });
  });
}

void add_matmul(OpTable& t) {
  OpDef d;
  d.name = "MatMul";
  d.library = LibraryKind::Gemm;
  d.cls = OpClass::contraction;
  d.infer = [](InferCtx& c) {
    require_same_dtype(c);
    DType dt = c.in_dtype(0);
    if (!is_float_dtype(dt) && dt != DType::i32 && dt != DType::i64)
      c.fail("MatMul does not support {} inputs", dtype_name(dt));
    auto err = [&](std::string m) { c.fail_msg(m); };
    c.set_output(0, dt, matmul_out_shape(matmul_dims(c.in_shape(0), c.in_shape(1), err)));
  };
  d.reference = [](KernelCtx& k) {
    auto err = [](std::string m) { throw Error(m); };
    MatMulDims md = matmul_dims(k.inputs[0].shape(), k.inputs[1].shape(), err);
    DType dt = k.inputs[0].dtype();
    if (dt == DType::i32) {
      matmul_kernel<int32_t, uint64_t, int32_t>(k.inputs[0], k.inputs[1], k.outputs[0], md);
    } else if (dt == DType::i64) {
      matmul_kernel<int64_t, uint64_t, int64_t>(k.inputs[0], k.inputs[1], k.outputs[0], md);
    } else {
      dispatch_float_kernel(k, [&]<typename In, typename Out>(std::vector<Tensor> xs) {
        matmul_kernel<In, double, Out>(xs[0], xs[1], k.outputs[0], md);
      });
    }
  };
  d.cost = [](const Graph& g, const Node& n) {
    auto err = [](std::string m) { throw Error(m); };
    MatMulDims md = matmul_dims(g.value(n.inputs[0]).shape, g.value(n.inputs[1]).shape, err);
    Cost c;
    c.flops = 2.0 * double(shape_numel(md.batch)) * double(md.M) * double(md.N) * double(md.K);
    return c;
  };
  t.add(std::move(d));
}

// ---- Gemm ----

struct GemmDims {
  int64_t M, N, K;
};

GemmDims gemm_dims(const Node& n, const Shape& a, const Shape& b,
                   const std::function<void(std::string)>& err) {
  if (a.size() != 2 || b.size() != 2)
    err(fmt::format("Gemm needs 2-D A and B, got {} and {}", shape_str(a), shape_str(b)));
  bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  GemmDims d;
  d.M = ta ? a[1] : a[0];
  d.K = ta ? a[0] : a[1];
  int64_t kb = tb ? b[1] : b[0];
  d.N = tb ? b[0] : b[1];
  if (kb != d.K)
    err(fmt::format("Gemm inner dims differ: A{} (transA={}) x B{} (transB={})", shape_str(a),
                    int(ta), shape_str(b), int(tb)));
  return d;
}

void add_gemm(OpTable& t) {
  OpDef d;
  d.name = "Gemm";
  d.library = LibraryKind::Gemm;
  d.cls = OpClass::contraction;
  d.infer = [](InferCtx& c) {
    require_same_dtype(c);
    if (!is_float_dtype(c.in_dtype(0)))
      c.fail("Gemm does not support {} inputs", dtype_name(c.in_dtype(0)));
    auto err = [&](std::string m) { c.fail_msg(m); };
    GemmDims g = gemm_dims(c.node, c.in_shape(0), c.in_shape(1), err);
    Shape y{g.M, g.N};
    if (c.has_input(2)) {
      const Shape& cs = c.in_shape(2);
      bool ok = cs.size() <= 2;
      for (size_t i = 0; ok && i < cs.size(); ++i) ok = cs[i] == 1 || cs[i] == y[2 - cs.size() + i];
      if (!ok) c.fail("Gemm C {} does not broadcast to the output {}", shape_str(cs), shape_str(y));
    }
    c.set_output(0, c.in_dtype(0), y);
  };
  d.reference = [](KernelCtx& k) {
    auto err = [](std::string m) { throw Error(m); };
    GemmDims g = gemm_dims(k.node, k.inputs[0].shape(), k.inputs[1].shape(), err);
    double alpha = k.node.attr_float("alpha", 1.0f), beta = k.node.attr_float("beta", 1.0f);
    bool ta = k.node.attr_int("transA", 0) != 0, tb = k.node.attr_int("transB", 0) != 0;
    dispatch_float_kernel(k, [&]<typename In, typename Out>(std::vector<Tensor> xs) {
      Tensor a = ta ? xs[0].permute({1, 0}).contiguous() : xs[0];
      Tensor b = tb ? xs[1].permute({1, 0}).contiguous() : xs[1];
      Tensor cb;
      const In* pc = nullptr;
      if (xs.size() > 2 && xs[2].defined()) {
        cb = xs[2].expand({g.M, g.N}).contiguous();
        pc = cb.data<In>();
      }
      Out* o = k.outputs[0].data<Out>();
      std::vector<double> acc;
      matmul_rows<In, double>(a.data<In>(), b.data<In>(), g.M, g.N, g.K, acc,
                              [&](int64_t i, double* row) {
                                for (int64_t j = 0; j < g.N; ++j) {
                                  double v = alpha * row[j];
                                  if (pc) v += beta * double(pc[i * g.N + j]);
                                  o[i * g.N + j] = Out(v);
                                }
                              });
    });
  };
  d.cost = [](const Graph& gr, const Node& n) {
    auto err = [](std::string m) { throw Error(m); };
    GemmDims g = gemm_dims(n, gr.value(n.inputs[0]).shape, gr.value(n.inputs[1]).shape, err);
    double mn = double(g.M) * double(g.N);
    bool has_c = n.inputs.size() > 2 && n.inputs[2] >= 0;
    Cost c;
    c.flops = 2.0 * mn * double(g.K);
    if (n.attr_float("alpha", 1.0f) != 1.0f) c.flops += mn;
    if (has_c) c.flops += mn * (n.attr_float("beta", 1.0f) != 1.0f ? 2 : 1);
    return c;
  };
  t.add(std::move(d));
}

// ---- Conv ----

struct ConvDims {
  int64_t N, C, M, G;
  Window w;
};

// Checks X [N, C, d...], W [M, C/group, k...], optional B [M]; throws brrr::Error without label.
ConvDims conv_dims(const Node& n, const Shape& x, const Shape& wt, const Shape* bias) {
  if (x.size() < 3)
    fail("Conv input X {} must be [N, C, spatial...] with at least one spatial dim", shape_str(x));
  if (wt.size() != x.size())
    fail("Conv weight W {} must have the same rank as X {}", shape_str(wt), shape_str(x));
  ConvDims d;
  d.N = x[0], d.C = x[1], d.M = wt[0];
  d.G = n.attr_int("group", 1);
  if (d.G < 1) fail("Conv group = {} must be >= 1", d.G);
  if (d.C % d.G != 0 || d.M % d.G != 0)
    fail("Conv group {} must divide the input channels C = {} (X {}) and output channels M = {}",
         d.G, d.C, shape_str(x), d.M);
  if (wt[1] * d.G != d.C)
    fail("Conv channel mismatch: X {} has C = {} but W {} expects C/group = {} with group = {}",
         shape_str(x), d.C, shape_str(wt), wt[1], d.G);
  std::vector<int64_t> in(x.begin() + 2, x.end()), k(wt.begin() + 2, wt.end());
  std::vector<int64_t> ks = n.attr_ints("kernel_shape", k);
  if (ks != k)
    fail("Conv kernel_shape [{}] does not match W {}", fmt::join(ks, ","), shape_str(wt));
  if (bias && (bias->size() != 1 || (*bias)[0] != d.M))
    fail("Conv bias B {} must be [M] = [{}]", shape_str(*bias), d.M);
  d.w = forward_window(n, in, k, false);
  return d;
}

// acc += sum over NB input channels (planes xc[b], kernels wk[b]) of their window products.
// Blocking NB channels amortizes the accumulator's load and store over NB multiply-adds.
template <int NB, typename In>
void conv_accumulate(const In* const* xc, const In* const* wk, double* acc, const Window& w,
                     bool pointwise) {
  int64_t IH = w.in[1], IW = w.in[2], OH = w.out[1], OW = w.out[2];
  int64_t KH = w.k[1], KW = w.k[2];
  if (pointwise) {  // 1x1, stride 1, no pads: one contiguous pass over the plane
    int64_t plane = w.out[0] * OH * OW;
    double wv[NB];
    for (int b = 0; b < NB; ++b) wv[b] = double(wk[b][0]);
    for (int64_t i = 0; i < plane; ++i) {
      double s = acc[i];
      for (int b = 0; b < NB; ++b) s += wv[b] * double(xc[b][i]);
      acc[i] = s;
    }
    return;
  }
  for (int64_t kd = 0; kd < w.k[0]; ++kd) {
    int64_t d0, d1;
    valid_range(w.in[0], w.out[0], w.s[0], kd * w.d[0], w.pb[0], d0, d1);
    for (int64_t kh = 0; kh < KH; ++kh) {
      int64_t h0, h1;
      valid_range(IH, OH, w.s[1], kh * w.d[1], w.pb[1], h0, h1);
      for (int64_t kw = 0; kw < KW; ++kw) {
        int64_t w0, w1;
        valid_range(IW, OW, w.s[2], kw * w.d[2], w.pb[2], w0, w1);
        double wv[NB];
        for (int b = 0; b < NB; ++b) wv[b] = double(wk[b][(kd * KH + kh) * KW + kw]);
        // Input column of output column ow is ow*s + shift (in range for ow in [w0, w1)).
        int64_t shift = kw * w.d[2] - w.pb[2], sw = w.s[2];
        for (int64_t od = d0; od < d1; ++od) {
          int64_t id = od * w.s[0] + kd * w.d[0] - w.pb[0];
          for (int64_t oh = h0; oh < h1; ++oh) {
            int64_t ih = oh * w.s[1] + kh * w.d[1] - w.pb[1];
            const In* row[NB];
            for (int b = 0; b < NB; ++b) row[b] = xc[b] + (id * IH + ih) * IW;
            double* a = acc + (od * OH + oh) * OW;
            if (sw == 1) {
              for (int64_t ow = w0; ow < w1; ++ow) {
                double s = a[ow];
                for (int b = 0; b < NB; ++b) s += wv[b] * double(row[b][ow + shift]);
                a[ow] = s;
              }
            } else {
              for (int64_t ow = w0; ow < w1; ++ow) {
                double s = a[ow];
                for (int b = 0; b < NB; ++b) s += wv[b] * double(row[b][ow * sw + shift]);
                a[ow] = s;
              }
            }
          }
        }
      }
    }
  }
}

template <typename In, typename Out>
void conv_kernel(const In* X, const In* W, const In* B, Out* Y, const ConvDims& cd) {
  Window w = cd.w.as3d();
  int64_t cpg = cd.C / cd.G, mpg = cd.M / cd.G;
  int64_t plane_in = w.in[0] * w.in[1] * w.in[2], plane_out = w.out[0] * w.out[1] * w.out[2];
  int64_t ksz = w.k[0] * w.k[1] * w.k[2];
  bool pointwise = ksz == 1 && w.s == std::vector<int64_t>{1, 1, 1} &&
                   w.pb == std::vector<int64_t>{0, 0, 0} && w.pe == w.pb;
  std::vector<double> acc(static_cast<size_t>(plane_out));
  for (int64_t n = 0; n < cd.N; ++n) {
    for (int64_t m = 0; m < cd.M; ++m) {
      int64_t g = m / mpg;
      std::fill(acc.begin(), acc.end(), B ? double(B[m]) : 0.0);
      for (int64_t ic0 = 0; ic0 < cpg; ic0 += 4) {
        const In* xc[4];
        const In* wk[4];
        int nb = int(std::min<int64_t>(4, cpg - ic0));
        for (int b = 0; b < nb; ++b) {
          xc[b] = X + (n * cd.C + g * cpg + ic0 + b) * plane_in;
          wk[b] = W + (m * cpg + ic0 + b) * ksz;
        }
        switch (nb) {
          case 4:
            conv_accumulate<4>(xc, wk, acc.data(), w, pointwise);
            break;
          case 3:
            conv_accumulate<3>(xc, wk, acc.data(), w, pointwise);
            break;
          case 2:
            conv_accumulate<2>(xc, wk, acc.data(), w, pointwise);
            break;
          default:
            conv_accumulate<1>(xc, wk, acc.data(), w, pointwise);
            break;
        }
      }
      Out* y = Y + (n * cd.M + m) * plane_out;
      for (int64_t i = 0; i < plane_out; ++i) y[i] = Out(acc[i]);
    }
  }
}

// Conv's and ConvTranspose's shape inference and reference, alike but for their dims (`dims`:
// conv_dims or conv_transpose_dims) and float kernel (`kernel`: a generic lambda over In, Out).
template <class Kernel>
void set_conv_like(OpDef& d, ConvDims (*dims)(const Node&, const Shape&, const Shape&, const Shape*),
                   Kernel kernel) {
  d.infer = [dims, name = d.name](InferCtx& c) {
    require_same_dtype(c);
    if (!is_float_dtype(c.in_dtype(0)))
      c.fail("{} does not support {} inputs", name, dtype_name(c.in_dtype(0)));
    ConvDims cd;
    try {
      cd = dims(c.node, c.in_shape(0), c.in_shape(1), c.has_input(2) ? &c.in_shape(2) : nullptr);
    } catch (const Error& e) {
      c.fail_msg(e.what());
    }
    Shape y{cd.N, cd.M};
    y.insert(y.end(), cd.w.out.begin(), cd.w.out.end());
    c.set_output(0, c.in_dtype(0), y);
  };
  d.reference = [dims, kernel](KernelCtx& k) {
    const Shape* bs = k.has_input(2) ? &k.inputs[2].shape() : nullptr;
    ConvDims cd = dims(k.node, k.inputs[0].shape(), k.inputs[1].shape(), bs);
    dispatch_float_kernel(k, [&]<typename In, typename Out>(std::vector<Tensor> xs) {
      const In* b = xs.size() > 2 && xs[2].defined() ? xs[2].data<In>() : nullptr;
      kernel.template operator()<In, Out>(xs[0].data<In>(), xs[1].data<In>(), b,
                                          k.outputs[0].data<Out>(), cd);
    });
  };
}

void add_conv(OpTable& t) {
  OpDef d;
  d.name = "Conv";
  d.library = LibraryKind::Conv;
  d.cls = OpClass::contraction;
  set_conv_like(d, conv_dims, []<typename In, typename Out>(const In* x, const In* w, const In* b,
                                                           Out* y, const ConvDims& cd) {
    conv_kernel<In, Out>(x, w, b, y, cd);
  });
  d.cost = [](const Graph& g, const Node& n) {
    const Shape& w = g.value(n.inputs[1]).shape;
    const Shape& y = g.value(n.outputs[0]).shape;
    double ksz = double(shape_numel(Shape(w.begin() + 1, w.end())));  // (C/group) * kernel
    Cost c;
    c.flops = 2.0 * double(shape_numel(y)) * ksz;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) c.flops += double(shape_numel(y));
    return c;
  };
  t.add(std::move(d));
}

// ---- ConvTranspose ----

// X [N, C, d...], W [C, M/group, k...]; output [N, M, out...] per the ONNX spec (output_shape,
// output_padding, auto_pad). The scatter kernel bounds-checks every output position.
ConvDims conv_transpose_dims(const Node& n, const Shape& x, const Shape& wt, const Shape* bias) {
  if (x.size() < 3) fail("ConvTranspose input X {} must be [N, C, spatial...]", shape_str(x));
  if (wt.size() != x.size())
    fail("ConvTranspose weight W {} must have the same rank as X {}", shape_str(wt), shape_str(x));
  ConvDims d;
  d.N = x[0], d.C = x[1];
  d.G = n.attr_int("group", 1);
  if (d.G < 1) fail("ConvTranspose group = {} must be >= 1", d.G);
  if (wt[0] != d.C)
    fail("ConvTranspose channel mismatch: X {} has C = {} but W {} has {} input channels",
         shape_str(x), d.C, shape_str(wt), wt[0]);
  if (d.C % d.G != 0) fail("ConvTranspose group {} must divide C = {}", d.G, d.C);
  d.M = wt[1] * d.G;
  size_t ns = x.size() - 2;
  std::vector<int64_t> in(x.begin() + 2, x.end()), k(wt.begin() + 2, wt.end());
  if (n.attr_ints("kernel_shape", k) != k)
    fail("ConvTranspose kernel_shape [{}] does not match W {}",
         fmt::join(n.attr_ints("kernel_shape"), ","), shape_str(wt));
  if (bias && (bias->size() != 1 || (*bias)[0] != d.M))
    fail("ConvTranspose bias B {} must be [M] = [{}]", shape_str(*bias), d.M);
  Window& w = d.w;
  w.nsp = int(ns), w.in = in, w.k = k;
  w.s = spatial_attr(n, "strides", ns, 1, 1);
  w.d = spatial_attr(n, "dilations", ns, 1, 1);
  std::vector<int64_t> opad = spatial_attr(n, "output_padding", ns, 0, 0);
  std::vector<int64_t> oshape = n.attr_ints("output_shape");
  if (oshape.size() == ns + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
  if (!oshape.empty() && oshape.size() != ns)
    fail("ConvTranspose output_shape [{}] must have {} spatial dims", fmt::join(oshape, ","), ns);
  std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER")
    fail("auto_pad '{}' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER", auto_pad);
  bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  w.pb.assign(ns, 0), w.pe.assign(ns, 0), w.out.assign(ns, 0);
  for (size_t i = 0; i < ns; ++i) {
    int64_t full = w.s[i] * (in[i] - 1) + opad[i] + (k[i] - 1) * w.d[i] + 1;
    if (!oshape.empty() || same) {
      // Pads follow from the requested output size; SAME_UPPER puts the odd pad at the end.
      w.out[i] = !oshape.empty() ? oshape[i] : in[i] * w.s[i];
      // A larger output than the natural one is zero-extended at the end (as onnxruntime does
      // and the ONNX output_shape node test expects), hence no negative pads.
      int64_t total = std::max<int64_t>(0, full - w.out[i]);
      w.pb[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pe[i] = total - w.pb[i];
    } else if (auto_pad == "NOTSET") {
      std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * ns, 0));
      if (pads.size() != 2 * ns)
        fail("attribute pads has {} values; {} spatial dims need {}", pads.size(), ns, 2 * ns);
      w.pb[i] = pads[i], w.pe[i] = pads[ns + i];
      w.out[i] = full - w.pb[i] - w.pe[i];
    } else {
      w.out[i] = full;
    }
    if (w.out[i] < 1) fail("ConvTranspose spatial dim {} of the output would be {}", i, w.out[i]);
  }
  return d;
}

template <typename In, typename Out>
void conv_transpose_kernel(const In* X, const In* W, const In* B, Out* Y, const ConvDims& cd) {
  Window w = cd.w.as3d();
  int64_t cpg = cd.C / cd.G, mpg = cd.M / cd.G;
  int64_t ID = w.in[0], IH = w.in[1], IW = w.in[2];
  int64_t OD = w.out[0], OH = w.out[1], OW = w.out[2];
  int64_t KD = w.k[0], KH = w.k[1], KW = w.k[2];
  int64_t plane_in = ID * IH * IW, plane_out = OD * OH * OW, ksz = KD * KH * KW;
  std::vector<double> acc(static_cast<size_t>(plane_out));
  // Scatter: input position i with kernel tap kk lands on output o = i*s + kk*d - pb. The valid
  // input range for a tap is the forward conv's valid_range with the roles of in/out swapped.
  auto in_range = [](int64_t out, int64_t in, int64_t s, int64_t kk_d, int64_t p, int64_t& lo,
                     int64_t& hi) {
    lo = std::max<int64_t>(0, ceil_div(p - kk_d, s));
    hi = std::min<int64_t>(in, floor_div(out - 1 + p - kk_d, s) + 1);
    if (hi < lo) hi = lo;
  };
  for (int64_t n = 0; n < cd.N; ++n) {
    for (int64_t m = 0; m < cd.M; ++m) {
      int64_t g = m / mpg, mg = m % mpg;
      std::fill(acc.begin(), acc.end(), B ? double(B[m]) : 0.0);
      for (int64_t ic = 0; ic < cpg; ++ic) {
        int64_t c = g * cpg + ic;
        const In* xc = X + (n * cd.C + c) * plane_in;
        const In* wk = W + (c * mpg + mg) * ksz;
        for (int64_t kd = 0; kd < KD; ++kd) {
          int64_t d0, d1;
          in_range(OD, ID, w.s[0], kd * w.d[0], w.pb[0], d0, d1);
          for (int64_t kh = 0; kh < KH; ++kh) {
            int64_t h0, h1;
            in_range(OH, IH, w.s[1], kh * w.d[1], w.pb[1], h0, h1);
            for (int64_t kw = 0; kw < KW; ++kw) {
              int64_t w0, w1;
              in_range(OW, IW, w.s[2], kw * w.d[2], w.pb[2], w0, w1);
              double wv = double(wk[(kd * KH + kh) * KW + kw]);
              for (int64_t id = d0; id < d1; ++id) {
                int64_t od = id * w.s[0] + kd * w.d[0] - w.pb[0];
                for (int64_t ih = h0; ih < h1; ++ih) {
                  int64_t oh = ih * w.s[1] + kh * w.d[1] - w.pb[1];
                  const In* row = xc + (id * IH + ih) * IW;
                  double* a = acc.data() + (od * OH + oh) * OW;
                  int64_t shift = kw * w.d[2] - w.pb[2];
                  for (int64_t iw = w0; iw < w1; ++iw)
                    a[iw * w.s[2] + shift] += wv * double(row[iw]);
                }
              }
            }
          }
        }
      }
      Out* y = Y + (n * cd.M + m) * plane_out;
      for (int64_t i = 0; i < plane_out; ++i) y[i] = Out(acc[i]);
    }
  }
}

void add_conv_transpose(OpTable& t) {
  OpDef d;
  d.name = "ConvTranspose";
  d.cls = OpClass::contraction;
  set_conv_like(d, conv_transpose_dims, []<typename In, typename Out>(
                                            const In* x, const In* w, const In* b, Out* y,
                                            const ConvDims& cd) {
    conv_transpose_kernel<In, Out>(x, w, b, y, cd);
  });
  d.cost = [](const Graph& g, const Node& n) {
    const Shape& x = g.value(n.inputs[0]).shape;
    const Shape& w = g.value(n.inputs[1]).shape;
    const Shape& y = g.value(n.outputs[0]).shape;
    // Every input element meets (M/group) * kernel weights.
    double per_in = double(shape_numel(Shape(w.begin() + 1, w.end())));
    Cost c;
    c.flops = 2.0 * double(shape_numel(x)) * per_in;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) c.flops += double(shape_numel(y));
    return c;
  };
  t.add(std::move(d));
}

}  // namespace

void register_contraction_ops(OpTable& t) {
  add_matmul(t);
  add_gemm(t);
  add_conv(t);
  add_conv_transpose(t);
  register_einsum_op(t);
}

}  // namespace brrr
