// Normalizations: Softmax, LogSoftmax, Hardmax (opset >= 13 single-axis semantics),
// LayerNormalization, BatchNormalization (inference), InstanceNormalization, GroupNormalization,
// LpNormalization, MeanVarianceNormalization. Reference kernels compute in double.
#include "ops/reduce_util.hpp"

namespace brrr {
using namespace ops;

namespace {

enum class SM { softmax, logsoftmax, hardmax };

void add_softmax(OpTable& t, const char* name, SM kind) {
  OpDef d;
  d.name = name;
  d.since = 13;
  d.cls = OpClass::normalization;
  d.infer = [](InferCtx& c) {
    require_float(c, 0);
    int64_t r = c.in_rank(0);
    int64_t a = c.axis(c.node.attr_int("axis", -1), r);
    // Before opset 13 these ops flattened dims [axis, rank) into one; that agrees with the
    // single-axis form only when axis is the last dim.
    if (c.graph.opset > 0 && c.graph.opset < 13 && r > 0 && a != r - 1)
      c.fail(
          "{} before opset 13 (model opset {}) flattens the dims from axis {} on; only "
          "axis = last dim is supported there",
          c.node.op, c.graph.opset, a);
    c.set_output(0, c.in_dtype(0), c.in_shape(0));
  };
  d.reference = [kind](KernelCtx& k) {
    const Tensor& xt = k.inputs[0];
    int64_t r = xt.rank();
    AxisLayout L =
        r == 0 ? AxisLayout{} : axis_layout(xt.shape(), norm_axis(k.node.attr_int("axis", -1), r));
    std::vector<double> x = load_f64(xt), y(x.size());
    for (int64_t o = 0; o < L.outer; ++o)
      for (int64_t i = 0; i < L.inner; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        int64_t arg = 0;
        bool nan = false;
        for (int64_t j = 0; j < L.n; ++j) {
          double v = x[size_t(L.at(o, j, i))];
          if (v > mx) mx = v, arg = j;
          nan = nan || std::isnan(v);
        }
        if (kind == SM::hardmax) {
          for (int64_t j = 0; j < L.n; ++j) y[size_t(L.at(o, j, i))] = j == arg ? 1.0 : 0.0;
          continue;
        }
        // exp(x - max) / sum, as ONNX Runtime and ONNX's reference compute it: a row holding NaN
        // or +inf, or only -inf, is NaN throughout.
        double sh = nan ? std::numeric_limits<double>::quiet_NaN() : mx;
        double sum = 0;
        for (int64_t j = 0; j < L.n; ++j) sum += std::exp(x[size_t(L.at(o, j, i))] - sh);
        double lse = std::log(sum);
        for (int64_t j = 0; j < L.n; ++j) {
          size_t at = size_t(L.at(o, j, i));
          y[at] = kind == SM::softmax ? std::exp(x[at] - sh) / sum : x[at] - sh - lse;
        }
      }
    store_f64(k.outputs[0], y);
  };
  d.cost = [kind](const Graph& g, const Node& n) {
    Cost c;
    double e = double(out_numel(g, n));
    if (kind == SM::hardmax) {
      c.flops = e;
      return c;
    }
    c.flops = 4 * e;  // max, subtract, sum, divide (or subtract for log-softmax)
    c.special["exp"] = e;
    if (kind == SM::logsoftmax) {
      const Shape& s = g.value(n.outputs[0]).shape;
      int64_t r = int64_t(s.size());
      int64_t a = r == 0 ? 0 : norm_axis(n.attr_int("axis", -1), r);
      c.special["log"] = r == 0 || s[size_t(a)] == 0 ? 0 : e / double(s[size_t(a)]);
    }
    return c;
  };
  if (kind == SM::softmax) {  // a row kernel over the last axis
    d.lowering = Lowering::Softmax;
    d.can_fuse = [](const Graph& g, const Node& n) -> std::string {
      return is_last_axis(n.attr_int("axis", -1), input0_rank(g, n)) ? "" : "Softmax over a non-last axis";
    };
  }
  t.add(std::move(d));
}

// Checks that a parameter input (scale, bias) broadcasts to `target` without growing it.
void require_broadcastable(InferCtx& c, int i, const Shape& target, const char* what) {
  if (!c.has_input(i)) return;
  Shape b;
  try {
    b = broadcast_shapes(target, c.in_shape(i));
  } catch (const Error&) {
    c.fail("{} (input {}) of shape {} does not broadcast to {}", what, i, shape_str(c.in_shape(i)),
           shape_str(target));
  }
  if (b != target)
    c.fail("{} (input {}) of shape {} does not broadcast to {}", what, i, shape_str(c.in_shape(i)),
           shape_str(target));
}

// Fails unless input i holds exactly n elements (per-channel parameters).
void require_numel(InferCtx& c, int i, int64_t n, const char* what) {
  if (shape_numel(c.in_shape(i)) != n)
    c.fail("{} (input {}) must hold {} values (one per channel), got shape {}", what, i, n,
           shape_str(c.in_shape(i)));
}

// Parameter tensor expanded to `shape` (numpy broadcasting from the right), as doubles.
std::vector<double> load_broadcast(const Tensor& p, const Shape& shape) {
  return load_f64(p.expand(shape));
}

void add_layernorm(OpTable& t) {
  OpDef d;
  d.name = "LayerNormalization";
  d.since = 17;
  d.cls = OpClass::normalization;
  d.infer = [](InferCtx& c) {
    require_float(c, 0);
    int64_t r = c.in_rank(0);
    if (r == 0) c.fail("LayerNormalization needs an input of rank >= 1");
    int64_t a = c.axis(c.node.attr_int("axis", -1), r);
    const Shape& xs = c.in_shape(0);
    if (!c.has_input(1)) c.fail("input 1 (Scale) is required");
    require_broadcastable(c, 1, xs, "Scale");
    require_broadcastable(c, 2, xs, "B");
    DType stash;
    try {
      stash = dtype_from_onnx(int(c.node.attr_int("stash_type", 1)));
    } catch (const Error& e) {
      c.fail_msg(e.what());
    }
    if (!is_floating(stash)) c.fail("stash_type must be a float type, got {}", dtype_name(stash));
    c.set_output(0, c.in_dtype(0), xs);
    Shape ms = xs;
    for (int64_t k = a; k < r; ++k) ms[size_t(k)] = 1;
    for (size_t o = 1; o < c.node.outputs.size() && o < 3; ++o) c.set_output(int(o), stash, ms);
    if (c.node.outputs.size() > 3) c.fail("LayerNormalization has at most 3 outputs");
  };
  d.reference = [](KernelCtx& k) {
    const Tensor& xt = k.inputs[0];
    const Shape& xs = xt.shape();
    int64_t r = xt.rank();
    int64_t a = norm_axis(k.node.attr_int("axis", -1), r);
    double eps = k.node.attr_float("epsilon", 1e-5f);
    int64_t rows = prod_dims(xs, 0, size_t(a)), cols = prod_dims(xs, size_t(a), xs.size());
    std::vector<double> x = load_f64(xt), y(x.size());
    std::vector<double> sc = load_broadcast(k.inputs[1], xs);
    std::vector<double> b =
        k.has_input(2) ? load_broadcast(k.inputs[2], xs) : std::vector<double>();
    std::vector<double> mean(static_cast<size_t>(rows)), inv(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) {
      const double* row = x.data() + i * cols;
      double s = 0;
      for (int64_t j = 0; j < cols; ++j) s += row[j];
      double m = s / double(cols), v = 0;
      for (int64_t j = 0; j < cols; ++j) v += (row[j] - m) * (row[j] - m);
      double is = 1.0 / std::sqrt(v / double(cols) + eps);
      mean[size_t(i)] = m;
      inv[size_t(i)] = is;
      for (int64_t j = 0; j < cols; ++j) {
        size_t at = size_t(i * cols + j);
        y[at] = (row[j] - m) * is * sc[at] + (b.empty() ? 0.0 : b[at]);
      }
    }
    store_f64(k.outputs[0], y);
    if (k.outputs.size() > 1) store_f64(k.outputs[1], mean);
    if (k.outputs.size() > 2) store_f64(k.outputs[2], inv);
  };
  // ~8 flops per element (two passes of sums, subtract, square, scale, shift) + 1 sqrt per row.
  d.cost = [](const Graph& g, const Node& n) {
    Cost c;
    const Shape& s = g.value(n.inputs[0]).shape;
    int64_t r = int64_t(s.size());
    int64_t a = r == 0 ? 0 : norm_axis(n.attr_int("axis", -1), r);
    c.flops = 8 * double(shape_numel(s));
    c.special["sqrt"] = double(prod_dims(s, 0, size_t(a)));
    return c;
  };
  d.lowering = Lowering::LayerNorm;  // a row kernel over the last axis, output 0 alone
  d.can_fuse = [](const Graph& g, const Node& n) -> std::string {
    if (!is_last_axis(n.attr_int("axis", -1), input0_rank(g, n)))
      return "LayerNormalization over more than the last axis";
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (n.outputs[i] >= 0) return "LayerNormalization's Mean/InvStdDev outputs are used";
    return "";
  };
  t.add(std::move(d));
}

// Fails unless X has rank >= min_rank (N, C, spatial...).
void require_nc(InferCtx& c, int64_t min_rank) {
  if (c.in_rank(0) < min_rank)
    c.fail("{} needs an input of rank >= {} (N, C, ...), got rank {}", c.node.op, min_rank,
           c.in_rank(0));
}

void add_batchnorm(OpTable& t) {
  OpDef d;
  d.name = "BatchNormalization";
  d.since = 15;
  d.cls = OpClass::normalization;
  d.infer = [](InferCtx& c) {
    require_float(c, 0);
    if (c.node.attr_int("training_mode", 0) != 0)
      c.fail(
          "training_mode=1 is not supported: brrr runs BatchNormalization in inference mode "
          "only (export the model in eval mode)");
    require_nc(c, 2);
    int64_t ch = c.in_shape(0)[1];
    const char* names[] = {"", "scale", "B", "input_mean", "input_var"};
    for (int i = 1; i <= 4; ++i) {
      require_float(c, i);
      require_numel(c, i, ch, names[i]);
    }
    c.set_output(0, c.in_dtype(0), c.in_shape(0));
    // Outputs 1.. are the running/saved statistics of training mode.
    for (size_t o = 1; o < c.node.outputs.size(); ++o) {
      if (!c.graph.value(c.node.outputs[o]).name.empty())
        c.fail("output {} ('{}') exists only in training mode, which brrr does not support", o,
               c.graph.value(c.node.outputs[o]).name);
      c.set_output(int(o), c.in_dtype(0), {0});
    }
  };
  d.reference = [](KernelCtx& k) {
    const Tensor& xt = k.inputs[0];
    AxisLayout L = axis_layout(xt.shape(), 1);
    double eps = k.node.attr_float("epsilon", 1e-5f);
    std::vector<double> x = load_f64(xt), y(x.size());
    std::vector<double> sc = load_f64(k.inputs[1]), b = load_f64(k.inputs[2]),
                        mu = load_f64(k.inputs[3]), var = load_f64(k.inputs[4]);
    for (int64_t ch = 0; ch < L.n; ++ch) {
      double g = sc[size_t(ch)] / std::sqrt(var[size_t(ch)] + eps);
      for (int64_t o = 0; o < L.outer; ++o)
        for (int64_t i = 0; i < L.inner; ++i) {
          size_t at = size_t(L.at(o, ch, i));
          y[at] = (x[at] - mu[size_t(ch)]) * g + b[size_t(ch)];
        }
    }
    store_f64(k.outputs[0], y);
  };
  // Folded into one multiply-add per element; 1 sqrt per channel.
  d.cost = [](const Graph& g, const Node& n) {
    Cost c;
    const Shape& s = g.value(n.inputs[0]).shape;
    c.flops = 2 * double(shape_numel(s));
    c.special["sqrt"] = s.size() > 1 ? double(s[1]) : 0;
    return c;
  };
  t.add(std::move(d));
}

// Normalizes each (n, group) slice of an N x C x spatial tensor: channels [g*cpg, (g+1)*cpg).
// Per-channel scale/bias when they hold C values, per-group when they hold G (opset 18).
void group_norm_kernel(KernelCtx& k, int64_t groups, double eps) {
  const Tensor& xt = k.inputs[0];
  const Shape& xs = xt.shape();
  int64_t N = xs[0], C = xs[1], sp = prod_dims(xs, 2, xs.size());
  int64_t cpg = C / groups, len = cpg * sp;
  std::vector<double> x = load_f64(xt), y(x.size());
  std::vector<double> sc = load_f64(k.inputs[1]), b = load_f64(k.inputs[2]);
  bool per_channel = int64_t(sc.size()) == C;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      size_t base = size_t((n * C + g * cpg) * sp);
      double s = 0, v = 0;
      for (int64_t j = 0; j < len; ++j) s += x[base + size_t(j)];
      double m = len ? s / double(len) : 0;
      for (int64_t j = 0; j < len; ++j) v += (x[base + size_t(j)] - m) * (x[base + size_t(j)] - m);
      double is = 1.0 / std::sqrt((len ? v / double(len) : 0) + eps);
      for (int64_t j = 0; j < len; ++j) {
        size_t p = per_channel ? size_t(g * cpg + j / sp) : size_t(g);
        size_t at = base + size_t(j);
        y[at] = (x[at] - m) * is * sc[p] + b[p];
      }
    }
  store_f64(k.outputs[0], y);
}

Cost cost_group_norm(const Graph& g, const Node& n, double groups_per_sample) {
  Cost c;
  const Shape& s = g.value(n.inputs[0]).shape;
  c.flops = 8 * double(shape_numel(s));
  c.special["sqrt"] = s.empty() ? 0 : double(s[0]) * groups_per_sample;
  return c;
}

void add_instancenorm(OpTable& t) {
  OpDef d;
  d.name = "InstanceNormalization";
  d.since = 6;
  d.cls = OpClass::normalization;
  d.infer = [](InferCtx& c) {
    require_float(c, 0);
    require_nc(c, 3);
    int64_t ch = c.in_shape(0)[1];
    require_numel(c, 1, ch, "scale");
    require_numel(c, 2, ch, "B");
    c.set_output(0, c.in_dtype(0), c.in_shape(0));
  };
  d.reference = [](KernelCtx& k) {
    group_norm_kernel(k, k.inputs[0].dim(1), k.node.attr_float("epsilon", 1e-5f));
  };
  d.cost = [](const Graph& g, const Node& n) {
    const Shape& s = g.value(n.inputs[0]).shape;
    return cost_group_norm(g, n, s.size() > 1 ? double(s[1]) : 0);
  };
  t.add(std::move(d));
}

void add_groupnorm(OpTable& t) {
  OpDef d;
  d.name = "GroupNormalization";
  d.since = 18;
  d.cls = OpClass::normalization;
  d.infer = [](InferCtx& c) {
    require_float(c, 0);
    require_nc(c, 2);
    if (!c.node.has_attr("num_groups")) c.fail("attribute num_groups is required");
    int64_t g = c.node.attr_int("num_groups", 1), ch = c.in_shape(0)[1];
    if (g <= 0 || ch % g != 0)
      c.fail("num_groups = {} must be positive and divide the channel count {}", g, ch);
    for (int i = 1; i <= 2; ++i) {
      int64_t n = shape_numel(c.in_shape(i));
      if (n != ch && n != g)
        c.fail(
            "{} (input {}) must hold C = {} values (or num_groups = {} before opset 21), got "
            "shape {}",
            i == 1 ? "scale" : "bias", i, ch, g, shape_str(c.in_shape(i)));
    }
    if (shape_numel(c.in_shape(1)) != shape_numel(c.in_shape(2)))
      c.fail("scale and bias must have the same number of values");
    c.set_output(0, c.in_dtype(0), c.in_shape(0));
  };
  d.reference = [](KernelCtx& k) {
    group_norm_kernel(k, k.node.attr_int("num_groups", 1), k.node.attr_float("epsilon", 1e-5f));
  };
  d.cost = [](const Graph& g, const Node& n) {
    return cost_group_norm(g, n, double(n.attr_int("num_groups", 1)));
  };
  t.add(std::move(d));
}

void add_lpnorm(OpTable& t) {
  OpDef d;
  d.name = "LpNormalization";
  d.since = 1;
  d.cls = OpClass::normalization;
  d.infer = [](InferCtx& c) {
    require_float(c, 0);
    c.axis(c.node.attr_int("axis", -1), c.in_rank(0));
    int64_t p = c.node.attr_int("p", 2);
    if (p != 1 && p != 2) c.fail("p = {} is not supported (only 1 and 2 are defined)", p);
    c.set_output(0, c.in_dtype(0), c.in_shape(0));
  };
  d.reference = [](KernelCtx& k) {
    const Tensor& xt = k.inputs[0];
    int64_t r = xt.rank();
    AxisLayout L =
        r == 0 ? AxisLayout{} : axis_layout(xt.shape(), norm_axis(k.node.attr_int("axis", -1), r));
    bool l1 = k.node.attr_int("p", 2) == 1;
    std::vector<double> x = load_f64(xt), y(x.size());
    for (int64_t o = 0; o < L.outer; ++o)
      for (int64_t i = 0; i < L.inner; ++i) {
        double s = 0;
        for (int64_t j = 0; j < L.n; ++j) {
          double v = x[size_t(L.at(o, j, i))];
          s += l1 ? std::abs(v) : v * v;
        }
        double norm = l1 ? s : std::sqrt(s);
        for (int64_t j = 0; j < L.n; ++j) {
          size_t at = size_t(L.at(o, j, i));
          y[at] = norm == 0 ? 0.0 : x[at] / norm;  // a zero vector stays zero (ONNX reference)
        }
      }
    store_f64(k.outputs[0], y);
  };
  d.cost = [](const Graph& g, const Node& n) {
    Cost c;
    const Shape& s = g.value(n.inputs[0]).shape;
    double e = double(shape_numel(s));
    c.flops = 3 * e;  // square (or abs), add, divide
    int64_t r = int64_t(s.size());
    if (n.attr_int("p", 2) == 2 && r > 0) {
      int64_t a = norm_axis(n.attr_int("axis", -1), r);
      c.special["sqrt"] = s[size_t(a)] ? e / double(s[size_t(a)]) : 0;
    }
    return c;
  };
  t.add(std::move(d));
}

// y = (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) over `axes` (default [0, 2, 3]); the epsilon
// outside the sqrt is the spec's function body.
void add_mvn(OpTable& t) {
  OpDef d;
  d.name = "MeanVarianceNormalization";
  d.since = 13;
  d.cls = OpClass::normalization;
  d.infer = [](InferCtx& c) {
    require_float(c, 0);
    try {
      axes_mask(c.node.attr_ints("axes", {0, 2, 3}), c.in_rank(0));
    } catch (const Error& e) {
      c.fail_msg(std::string(e.what()) +
                 (c.node.has_attr("axes") ? "" : " (default axes are [0, 2, 3])"));
    }
    c.set_output(0, c.in_dtype(0), c.in_shape(0));
  };
  d.reference = [](KernelCtx& k) {
    const Tensor& xt = k.inputs[0];
    Shape xs = xt.shape();
    std::vector<bool> m = axes_mask(k.node.attr_ints("axes", {0, 2, 3}), xt.rank());
    Shape ost = reduce_out_strides(xs, m);
    int64_t groups = shape_numel(reduced_shape(xs, m, true));
    int64_t cnt = groups ? shape_numel(xs) / groups : 0;
    std::vector<double> x = load_f64(xt), y(x.size());
    std::vector<double> s(size_t(groups), 0), ss(size_t(groups), 0);
    for_each_index<1>(xs, {&ost}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      s[size_t(o[0])] += x[size_t(i)];
    });
    for (double& v : s) v /= double(cnt);
    for_each_index<1>(xs, {&ost}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      double dv = x[size_t(i)] - s[size_t(o[0])];
      ss[size_t(o[0])] += dv * dv;
    });
    for (double& v : ss) v = std::sqrt(v / double(cnt)) + 1e-9;
    for_each_index<1>(xs, {&ost}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      y[size_t(i)] = (x[size_t(i)] - s[size_t(o[0])]) / ss[size_t(o[0])];
    });
    store_f64(k.outputs[0], y);
  };
  d.cost = [](const Graph& g, const Node& n) {
    Cost c;
    const Shape& s = g.value(n.inputs[0]).shape;
    c.flops = 8 * double(shape_numel(s));
    try {
      c.special["sqrt"] = double(shape_numel(
          reduced_shape(s, axes_mask(n.attr_ints("axes", {0, 2, 3}), int64_t(s.size())), true)));
    } catch (const Error&) {
    }
    return c;
  };
  t.add(std::move(d));
}

}  // namespace

void register_normalization_ops(OpTable& t) {
  add_softmax(t, "Softmax", SM::softmax);
  add_softmax(t, "LogSoftmax", SM::logsoftmax);
  add_softmax(t, "Hardmax", SM::hardmax);
  add_layernorm(t);
  add_batchnorm(t);
  add_instancenorm(t);
  add_groupnorm(t);
  add_lpnorm(t);
  add_mvn(t);
}

}  // namespace brrr
