// Ops that grow a tensor by repeating or padding it: Expand, Tile, Pad.
#include <cstring>

#include "ops/movement_util.hpp"

namespace brrr::ops {

namespace {

std::vector<int64_t> const_ints_1d(const InferCtx& c, int i, const char* what) {
  require_int_input(c, i, what);
  if (c.in_rank(i) != 1) c.fail("input {} ({}) must be 1-D", i, what);
  return int_values(c.require_const(i, what));
}

void infer_expand(InferCtx& c) {
  std::vector<int64_t> shape = const_ints_1d(c, 1, "shape");
  for (int64_t d : shape)
    if (d < 0) c.fail("shape {} has a negative dim", shape_str(shape));
  Shape out;
  try {
    out = broadcast_shapes(c.in_shape(0), shape);
  } catch (const Error& e) {
    c.fail_msg(e.what());
  }
  c.set_output(0, c.in_dtype(0), out);
}

void infer_tile(InferCtx& c) {
  std::vector<int64_t> reps = const_ints_1d(c, 1, "repeats");
  const Shape& in = c.in_shape(0);
  if (reps.size() != in.size())
    c.fail("repeats {} has {} entries but the input has rank {}", shape_str(reps), reps.size(),
           in.size());
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (reps[i] < 0) c.fail("repeats {} has a negative entry", shape_str(reps));
    out[i] = mul_dims(c, in[i], reps[i]);
  }
  c.set_output(0, c.in_dtype(0), out);
}

// Tile as one strided copy: view [d0, d1, ..] as [1, d0, 1, d1, ..], broadcast the unit dims to
// the repeat counts, and copy; the result laid out row-major is [r0*d0, r1*d1, ..].
void tile_kernel(KernelCtx& k) {
  const Tensor& x = k.inputs[0];
  const Shape& out = k.outputs[0].shape();
  Shape unit, big;
  for (int i = 0; i < x.rank(); ++i) {
    int64_t d = x.dim(i);
    unit.insert(unit.end(), {1, d});
    big.insert(big.end(), {d == 0 ? 0 : out[size_t(i)] / d, d});
  }
  if (k.outputs[0].numel() == 0) return;
  copy_view(x.reshape(unit).expand(big), k.outputs[0]);
}

// Pad parameters in a form independent of the opset: per-axis begin/end amounts and the mode.
struct PadPlan {
  std::vector<int64_t> begin, end;
  std::string mode;
};

template <typename GetInts>
PadPlan pad_plan(const Node& n, const Shape& in, GetInts get, std::string* err) {
  PadPlan p;
  size_t r = in.size();
  p.mode = n.attr_string("mode", "constant");
  std::vector<int64_t> pads = n.has_attr("pads") ? n.attr_ints("pads") : get(1, "pads");
  std::vector<int64_t> axes;
  if (!n.has_attr("pads")) axes = get(3, "axes");
  bool all_axes = axes.empty();
  if (all_axes)
    for (size_t i = 0; i < r; ++i) axes.push_back(int64_t(i));
  if (pads.size() != 2 * axes.size()) {
    *err = fmt::format("pads has {} entries; expected 2 x {} axes", pads.size(), axes.size());
    return p;
  }
  p.begin.assign(r, 0);
  p.end.assign(r, 0);
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < -int64_t(r) || a >= int64_t(r) || seen[size_t(a < 0 ? a + int64_t(r) : a)]) {
      *err = fmt::format("pad axis {} is out of range or repeated for rank {}", a, r);
      return p;
    }
    if (a < 0) a += int64_t(r);
    seen[size_t(a)] = true;
    p.begin[size_t(a)] = pads[i];
    p.end[size_t(a)] = pads[i + axes.size()];
  }
  return p;
}

void infer_pad(InferCtx& c) {
  auto get = [&](int i, const char* what) -> std::vector<int64_t> {
    if (!c.has_input(i)) {
      if (i == 1) c.fail("missing the pads input");
      return {};
    }
    require_int_input(c, i, what);
    return int_values(c.require_const(i, what));
  };
  std::string err;
  const Shape& in = c.in_shape(0);
  PadPlan p = pad_plan(c.node, in, get, &err);
  if (!err.empty()) c.fail_msg(err);
  if (p.mode != "constant" && p.mode != "reflect" && p.mode != "edge" && p.mode != "wrap")
    c.fail("unknown pad mode '{}'", p.mode);
  if (c.has_input(2) && c.in_dtype(2) != c.in_dtype(0))
    c.fail("constant_value is {} but data is {}", dtype_name(c.in_dtype(2)),
           dtype_name(c.in_dtype(0)));
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    out[i] = add_dims(c, add_dims(c, in[i], p.begin[i]), p.end[i]);
    if (out[i] < 0) c.fail("pads {} / {} make dim {} negative", p.begin[i], p.end[i], i);
    if (p.mode != "constant" && in[i] == 0 && out[i] > 0)
      c.fail("cannot {}-pad axis {} of size 0", p.mode, i);
  }
  c.set_output(0, c.in_dtype(0), out);
}

// Source index along one axis for output position i (already shifted by the begin pad), or -1
// for the constant fill.
int64_t pad_source(int64_t i, int64_t d, const std::string& mode) {
  if (i >= 0 && i < d) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return i < 0 ? 0 : d - 1;
  if (mode == "wrap") return ((i % d) + d) % d;
  if (d == 1) return 0;  // reflect
  int64_t period = 2 * (d - 1);
  int64_t m = ((i % period) + period) % period;
  return m < d ? m : period - m;
}

void pad_kernel(KernelCtx& k) {
  const Tensor& x = k.inputs[0];
  Tensor& out = k.outputs[0];
  auto get = [&](int i, const char*) -> std::vector<int64_t> {
    return k.has_input(i) ? int_values(k.inputs[i]) : std::vector<int64_t>{};
  };
  std::string err;
  PadPlan p = pad_plan(k.node, x.shape(), get, &err);
  BRRR_CHECK(err.empty(), "{}: {}", k.node.label(), err);
  // The fill value as one element of the data's dtype.
  Tensor fill = Tensor::zeros(x.dtype(), {});
  if (k.node.has_attr("value")) {
    fill = Tensor::scalar<float>(k.node.attr_float("value", 0)).cast(x.dtype());
  } else if (k.has_input(2) && k.inputs[2].numel() > 0) {
    fill = k.inputs[2].reshape({k.inputs[2].numel()}).slice(0, 0, 1, 1);
  }
  int r = out.rank();
  // Per axis, the source offset (in elements) of each output position, or -1 for the fill.
  std::vector<std::vector<int64_t>> src(static_cast<size_t>(r));
  for (int a = 0; a < r; ++a)
    for (int64_t i = 0; i < out.dim(a); ++i) {
      int64_t s = pad_source(i - p.begin[size_t(a)], x.dim(a), p.mode);
      src[size_t(a)].push_back(s < 0 ? -1 : s * x.strides()[size_t(a)]);
    }
  size_t es = dtype_size(x.dtype());
  const char* xp = static_cast<const char*>(x.raw());
  char* o = static_cast<char*>(out.raw());
  if (out.numel() == 0) return;
  // The last axis as runs: a run of fill, or of source elements that follow each other in memory
  // (one memcpy); the outer axes pick each output row's source row (Swin's window Pads ran an
  // index computation and a memcpy per element).
  struct Run {
    int64_t start, len, src;  // src: element offset of the first, -1 for the fill
  };
  const int64_t width = r ? out.dim(r - 1) : 1;
  const std::vector<int64_t> last = r ? src[size_t(r - 1)] : std::vector<int64_t>{0};
  const bool unit = r == 0 || x.strides()[size_t(r - 1)] == 1;  // else runs of one source element
  std::vector<Run> runs;
  for (int64_t i = 0; i < width; ++i) {
    const int64_t s = last[size_t(i)];
    if (!runs.empty()) {
      Run& b = runs.back();
      if ((s < 0 && b.src < 0) || (unit && s >= 0 && b.src >= 0 && s == b.src + b.len)) {
        b.len++;
        continue;
      }
    }
    runs.push_back({i, 1, s});
  }
  std::vector<int64_t> idx(size_t(std::max(r - 1, 0)), 0);
  const int64_t rows = out.numel() / width;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = 0;
    bool row_fill = false;
    for (int a = 0; a + 1 < r; ++a) {
      int64_t s = src[size_t(a)][size_t(idx[size_t(a)])];
      if (s < 0) row_fill = true;
      off += s;
    }
    char* orow = o + row * width * int64_t(es);
    for (const Run& run : runs) {
      char* d = orow + run.start * int64_t(es);
      if (row_fill || run.src < 0) {
        for (int64_t j = 0; j < run.len; ++j) std::memcpy(d + j * int64_t(es), fill.raw(), es);
      } else {
        std::memcpy(d, xp + (off + run.src) * int64_t(es), size_t(run.len) * es);
      }
    }
    for (int a = r - 2; a >= 0; --a) {
      if (++idx[size_t(a)] < out.dim(a)) break;
      idx[size_t(a)] = 0;
    }
  }
}

}  // namespace

void register_expand_ops(OpTable& t) {
  OpDef expand = movement_op("Expand", infer_expand, [](KernelCtx& k) {
    copy_view(k.inputs[0].expand(k.outputs[0].shape()), k.outputs[0]);
  });
  expand.view = ViewKind::Expand;  // to a constant shape: stride 0 on the broadcast axes
  t.add(std::move(expand));
  t.add(movement_op("Tile", infer_tile, tile_kernel));
  t.add(movement_op("Pad", infer_pad, pad_kernel));
}

}  // namespace brrr::ops
