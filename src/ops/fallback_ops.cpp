// Stand-in entries so the fusion compiler can be built and tested before the op families land.
// Each is added ONLY when no family registered the op (the family entries win after a merge);
// float32 only. Delete this file once elementwise/reduction/normalization/contraction/movement
// define these ops.
#include <cmath>
#include <numeric>

#include "brrr/scalar_ops.h"
#include "ops/op_util.hpp"

namespace brrr {
using namespace ops;

namespace {

void add_if_missing(OpTable& t, OpDef d) {
  if (!t.find(d.domain, d.name)) t.add(std::move(d));
}

void require_f32(const KernelCtx& k) {
  for (const Tensor& x : k.inputs)
    if (x.defined() && x.dtype() != DType::f32)
      fail("{}: the stand-in kernel handles float32 only", k.node.label());
}

template <typename F>
void binary(OpTable& t, const char* name, const char* expr, F fn, double flops = 1,
            std::map<std::string, double> special = {}) {
  OpDef d;
  d.name = name;
  d.infer = [](InferCtx& c) {
    require_same_dtype(c);
    infer_broadcast(c, c.in_dtype(0));
  };
  d.reference = [fn](KernelCtx& k) {
    require_f32(k);
    map_binary<float, float, float>(k.inputs[0], k.inputs[1], k.outputs[0], fn);
  };
  d.cost = cost_per_output(flops, special);
  d.pointwise = expr;
  add_if_missing(t, std::move(d));
}

template <typename F>
void unary(OpTable& t, const char* name, const char* expr, F fn, double flops,
           std::map<std::string, double> special = {}) {
  OpDef d;
  d.name = name;
  d.infer = [](InferCtx& c) { c.set_output(0, c.in_dtype(0), c.in_shape(0)); };
  d.reference = [fn](KernelCtx& k) {
    require_f32(k);
    map_unary<float, float>(k.inputs[0], k.outputs[0], fn);
  };
  d.cost = cost_per_output(flops, special);
  d.pointwise = expr;
  add_if_missing(t, std::move(d));
}

// Axes of a Reduce* node: attribute (old opsets) or constant input 1 (opset 13/18+).
std::vector<int64_t> reduce_axes(const Graph* g, const Node& n, const Tensor* axes_input, int rank) {
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (axes_input && axes_input->defined()) axes = axes_input->to_int64_vector();
  if (axes.empty())
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  for (auto& a : axes) {
    if (a < 0) a += rank;
    BRRR_CHECK(a >= 0 && a < rank, "{}: axis out of range for rank {}", n.label(), rank);
  }
  return axes;
}

enum class Red { sum, max, mean };

void reduce(OpTable& t, const char* name, Red kind) {
  OpDef d;
  d.name = name;
  d.cls = OpClass::normalization;
  d.infer = [](InferCtx& c) {
    Shape s = c.in_shape(0);
    auto axes = reduce_axes(&c.graph, c.node, c.in_const(1), int(s.size()));
    bool keep = c.node.attr_int("keepdims", 1) != 0;
    Shape o;
    for (int i = 0; i < int(s.size()); ++i) {
      bool r = std::find(axes.begin(), axes.end(), i) != axes.end();
      if (!r) o.push_back(s[i]);
      else if (keep) o.push_back(1);
    }
    c.set_output(0, c.in_dtype(0), o);
  };
  d.reference = [kind](KernelCtx& k) {
    BRRR_CHECK(k.inputs[0].dtype() == DType::f32, "{}: stand-in handles float32 only",
               k.node.label());
    Tensor x = k.inputs[0].contiguous();
    const Shape& s = x.shape();
    int r = int(s.size());
    auto axes = reduce_axes(nullptr, k.node, k.has_input(1) ? &k.inputs[1] : nullptr, r);
    std::vector<bool> red(r, false);
    for (auto a : axes) red[a] = true;
    // Output strides over the input's dims (0 on reduced dims).
    Shape ostr(r, 0);
    int64_t acc = 1;
    for (int i = r - 1; i >= 0; --i)
      if (!red[i]) {
        ostr[i] = acc;
        acc *= s[i];
      }
    int64_t on = k.outputs[0].numel(), n = x.numel();
    std::vector<double> out(size_t(on), kind == Red::max ? -INFINITY : 0.0);
    const float* p = x.data<float>();
    for_each_index<1>(s, {&ostr}, [&](int64_t i, const std::array<int64_t, 1>& off) {
      double v = p[i];
      double& o = out[size_t(off[0])];
      o = kind == Red::max ? std::max(o, v) : o + v;
    });
    float* o = k.outputs[0].data<float>();
    double cnt = on ? double(n) / double(on) : 1;
    for (int64_t i = 0; i < on; ++i) o[i] = float(kind == Red::mean ? out[i] / cnt : out[i]);
  };
  d.cost = [](const Graph& g, const Node& n) {
    Cost c;
    c.flops = double(numel_of(g, n.inputs[0]));
    return c;
  };
  add_if_missing(t, std::move(d));
}

// Softmax / LayerNormalization reference over the last axis only (what the stand-in needs).
int64_t last_axis_check(const KernelCtx& k, int64_t axis) {
  int r = k.inputs[0].rank();
  if (axis < 0) axis += r;
  BRRR_CHECK(axis == r - 1, "{}: the stand-in kernel handles the last axis only", k.node.label());
  return axis;
}

}  // namespace

void register_fallback_ops(OpTable& t) {
  binary(t, "Add", "({0} + {1})", [](float a, float b) { return a + b; });
  binary(t, "Sub", "({0} - {1})", [](float a, float b) { return a - b; });
  binary(t, "Mul", "({0} * {1})", [](float a, float b) { return a * b; });
  binary(t, "Div", "({0} / {1})", [](float a, float b) { return a / b; });
  binary(t, "Pow", "powf({0}, {1})", [](float a, float b) { return powf(a, b); }, 0, {{"pow", 1}});
  unary(t, "Exp", "expf({0})", [](float x) { return expf(x); }, 0, {{"exp", 1}});
  unary(t, "Cos", "cosf({0})", [](float x) { return cosf(x); }, 0, {{"cos", 1}});
  unary(t, "Erf", "erff({0})", [](float x) { return erff(x); }, 0, {{"erf", 1}});
  unary(t, "Tanh", "tanhf({0})", [](float x) { return tanhf(x); }, 0, {{"tanh", 1}});
  unary(t, "Sqrt", "sqrtf({0})", [](float x) { return sqrtf(x); }, 0, {{"sqrt", 1}});
  unary(t, "Neg", "(-{0})", [](float x) { return -x; }, 1);
  reduce(t, "ReduceSum", Red::sum);
  reduce(t, "ReduceMax", Red::max);
  reduce(t, "ReduceMean", Red::mean);

  {
    OpDef d;
    d.name = "Softmax";
    d.cls = OpClass::normalization;
    d.infer = [](InferCtx& c) { c.set_output(0, c.in_dtype(0), c.in_shape(0)); };
    d.reference = [](KernelCtx& k) {
      require_f32(k);
      last_axis_check(k, k.node.attr_int("axis", -1));
      Tensor x = k.inputs[0].contiguous();
      int64_t n = x.numel(), cols = x.rank() ? x.dim(-1) : 1;
      const float* p = x.data<float>();
      float* o = k.outputs[0].data<float>();
      for (int64_t r = 0; cols && r < n / cols; ++r) {
        const float* a = p + r * cols;
        float m = -INFINITY;
        for (int64_t j = 0; j < cols; ++j) m = std::max(m, a[j]);
        double s = 0;
        for (int64_t j = 0; j < cols; ++j) s += std::exp(double(a[j]) - m);
        for (int64_t j = 0; j < cols; ++j) o[r * cols + j] = float(std::exp(double(a[j]) - m) / s);
      }
    };
    d.cost = [](const Graph& g, const Node& n) {
      Cost c;
      double e = double(out_numel(g, n));
      c.flops = 4 * e;
      c.special["exp"] = e;
      return c;
    };
    add_if_missing(t, std::move(d));
  }
  {
    OpDef d;
    d.name = "LayerNormalization";
    d.since = 17;
    d.cls = OpClass::normalization;
    d.infer = [](InferCtx& c) {
      c.set_output(0, c.in_dtype(0), c.in_shape(0));
      Shape rs = c.in_shape(0);
      if (!rs.empty()) rs.back() = 1;
      for (int i = 1; i < int(c.node.outputs.size()); ++i)
        if (c.node.outputs[i] >= 0) c.set_output(i, DType::f32, rs);
    };
    d.reference = [](KernelCtx& k) {
      require_f32(k);
      last_axis_check(k, k.node.attr_int("axis", -1));
      float eps = k.node.attr_float("epsilon", 1e-5f);
      Tensor x = k.inputs[0].contiguous();
      int64_t n = x.numel(), cols = x.rank() ? x.dim(-1) : 1;
      Tensor g = k.inputs[1].expand({cols}).contiguous();
      Tensor b = k.has_input(2) ? k.inputs[2].expand({cols}).contiguous() : Tensor();
      const float* p = x.data<float>();
      float* o = k.outputs[0].data<float>();
      for (int64_t r = 0; cols && r < n / cols; ++r) {
        const float* a = p + r * cols;
        double m = 0, v = 0;
        for (int64_t j = 0; j < cols; ++j) m += a[j];
        m /= double(cols);
        for (int64_t j = 0; j < cols; ++j) v += (a[j] - m) * (a[j] - m);
        v /= double(cols);
        double inv = 1.0 / std::sqrt(v + eps);
        for (int64_t j = 0; j < cols; ++j)
          o[r * cols + j] = float((a[j] - m) * inv * g.data<float>()[j] +
                                  (b.defined() ? b.data<float>()[j] : 0.0f));
        if (k.outputs.size() > 1 && k.outputs[1].defined()) k.outputs[1].data<float>()[r] = float(m);
        if (k.outputs.size() > 2 && k.outputs[2].defined())
          k.outputs[2].data<float>()[r] = float(inv);
      }
    };
    d.cost = [](const Graph& g, const Node& n) {
      Cost c;
      double e = double(out_numel(g, n));
      c.flops = 8 * e;
      return c;
    };
    add_if_missing(t, std::move(d));
  }
  {
    OpDef d;
    d.name = "Transpose";
    d.cls = OpClass::movement;
    d.infer = [](InferCtx& c) {
      Shape s = c.in_shape(0);
      auto perm = c.node.attr_ints("perm");
      if (perm.empty())
        for (int i = int(s.size()) - 1; i >= 0; --i) perm.push_back(i);
      if (perm.size() != s.size()) c.fail("perm has {} entries for rank {}", perm.size(), s.size());
      Shape o;
      for (auto p : perm) o.push_back(s[size_t(c.axis(p, int64_t(s.size())))]);
      c.set_output(0, c.in_dtype(0), o);
    };
    d.reference = [](KernelCtx& k) {
      Shape s = k.inputs[0].shape();
      auto perm = k.node.attr_ints("perm");
      if (perm.empty())
        for (int i = int(s.size()) - 1; i >= 0; --i) perm.push_back(i);
      Tensor v = k.inputs[0].permute(perm).contiguous();
      std::memcpy(k.outputs[0].raw(), v.raw(), v.nbytes());
    };
    d.cost = [](const Graph&, const Node&) { return Cost{}; };
    add_if_missing(t, std::move(d));
  }
  {
    // MatMul with numpy batch broadcasting (2-D and higher; no 1-D promotion in the stand-in).
    OpDef d;
    d.name = "MatMul";
    d.cls = OpClass::contraction;
    d.infer = [](InferCtx& c) {
      Shape a = c.in_shape(0), b = c.in_shape(1);
      if (a.size() < 2 || b.size() < 2) c.fail("the stand-in MatMul needs rank >= 2");
      if (a.back() != b[b.size() - 2]) c.fail("inner dims differ");
      Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
      Shape o = broadcast_shapes(ba, bb);
      o.push_back(a[a.size() - 2]);
      o.push_back(b.back());
      c.set_output(0, c.in_dtype(0), o);
    };
    d.reference = [](KernelCtx& k) {
      require_f32(k);
      const Shape& os = k.outputs[0].shape();
      int r = int(os.size());
      int64_t M = os[r - 2], N = os[r - 1], K = k.inputs[0].dim(-1);
      Shape ea = os, eb = os;
      ea[r - 1] = K;
      eb[r - 2] = K;
      Tensor a = k.inputs[0].expand(ea).contiguous(), b = k.inputs[1].expand(eb).contiguous();
      int64_t batch = shape_numel(os) / std::max<int64_t>(M * N, 1);
      float* o = k.outputs[0].data<float>();
      for (int64_t q = 0; q < batch; ++q) {
        const float* pa = a.data<float>() + q * M * K;
        const float* pb = b.data<float>() + q * K * N;
        float* po = o + q * M * N;
        for (int64_t i = 0; i < M; ++i) {
          for (int64_t j = 0; j < N; ++j) po[i * N + j] = 0;
          for (int64_t x = 0; x < K; ++x) {
            float av = pa[i * K + x];
            for (int64_t j = 0; j < N; ++j) po[i * N + j] += av * pb[x * N + j];
          }
        }
      }
    };
    d.cost = [](const Graph& g, const Node& n) {
      Cost c;
      c.flops = 2.0 * double(out_numel(g, n)) * double(g.value(n.inputs[0]).shape.back());
      return c;
    };
    add_if_missing(t, std::move(d));
  }
}

}  // namespace brrr
