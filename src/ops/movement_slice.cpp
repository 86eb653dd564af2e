// Ops that cut or join along axes: Slice, Concat, Split.
#include <cstring>

#include "ops/movement_util.hpp"

namespace brrr::ops {

namespace {

// One sliced axis after ONNX's negative-index and clamping rules: `count` elements from `start`
// every `step`. step is normalized to +-1 when count <= 1 so later arithmetic cannot overflow.
struct SliceDim {
  int axis;
  int64_t start, step, count;
};

struct SliceArgs {
  std::vector<int64_t> starts, ends, axes, steps;
};

// Starts/ends/axes/steps from attributes (Slice-1) or inputs 1..4 (Slice-10+).
template <typename Ctx, typename Get>
SliceArgs slice_args(const Ctx& c, Get get_input) {
  SliceArgs a;
  if (c.node.has_attr("starts")) {
    a.starts = c.node.attr_ints("starts");
    a.ends = c.node.attr_ints("ends");
    a.axes = c.node.attr_ints("axes");
  } else {
    a.starts = *get_input(1, "starts");
    a.ends = *get_input(2, "ends");
    if (auto v = get_input(3, "axes")) a.axes = *v;
    if (auto v = get_input(4, "steps")) a.steps = *v;
  }
  return a;
}

// Returns the plan or an error message in *err.
std::vector<SliceDim> slice_plan(const Shape& in, const SliceArgs& a, std::string* err) {
  int64_t r = int64_t(in.size());
  size_t n = a.starts.size();
  std::vector<int64_t> axes = a.axes, steps = a.steps;
  if (axes.empty())
    for (size_t i = 0; i < n; ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(n, 1);
  if (a.ends.size() != n || axes.size() != n || steps.size() != n) {
    *err = fmt::format("starts, ends, axes and steps have different lengths ({}, {}, {}, {})", n,
                       a.ends.size(), axes.size(), steps.size());
    return {};
  }
  std::vector<SliceDim> plan;
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < n; ++i) {
    int64_t ax = axes[i];
    if (ax < -r || ax >= r) {
      *err = fmt::format("axis {} is out of range for rank {}", ax, r);
      return {};
    }
    if (ax < 0) ax += r;
    if (seen[size_t(ax)]) {
      *err = fmt::format("axis {} is sliced twice", axes[i]);
      return {};
    }
    seen[size_t(ax)] = true;
    int64_t d = in[size_t(ax)], step = steps[i], s = a.starts[i], e = a.ends[i];
    if (step == 0) {
      *err = "slice step is 0";
      return {};
    }
    if (s < 0) s += d;  // s >= INT64_MIN so adding d >= 0 cannot overflow
    if (e < 0) e += d;
    int64_t count;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      count = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
      s = std::max<int64_t>(std::min<int64_t>(s, d - 1), 0);
      e = std::max<int64_t>(std::min<int64_t>(e, d - 1), -1);
      uint64_t ustep = uint64_t(0) - uint64_t(step);  // |step| without overflow at INT64_MIN
      count = d > 0 && s > e ? int64_t(uint64_t(s - e - 1) / ustep + 1) : 0;
    }
    if (count <= 1) step = step > 0 ? 1 : -1;
    plan.push_back({int(ax), s, step, count});
  }
  return plan;
}

void infer_slice(InferCtx& c) {
  auto get = [&](int i, const char* what) -> std::optional<std::vector<int64_t>> {
    if (!c.has_input(i)) {
      if (i <= 2) c.fail("missing input {} ({})", i, what);
      return std::nullopt;
    }
    require_int_input(c, i, what);
    return int_values(c.require_const(i, what));
  };
  std::string err;
  std::vector<SliceDim> plan = slice_plan(c.in_shape(0), slice_args(c, get), &err);
  if (!err.empty()) c.fail_msg(err);
  Shape out = c.in_shape(0);
  for (const SliceDim& d : plan) out[size_t(d.axis)] = d.count;
  c.set_output(0, c.in_dtype(0), out);
}

void slice_kernel(KernelCtx& k) {
  auto get = [&](int i, const char*) -> std::optional<std::vector<int64_t>> {
    if (!k.has_input(i)) return std::nullopt;
    return int_values(k.inputs[i]);
  };
  std::string err;
  std::vector<SliceDim> plan = slice_plan(k.inputs[0].shape(), slice_args(k, get), &err);
  BRRR_CHECK(err.empty(), "{}: {}", k.node.label(), err);
  Tensor v = k.inputs[0];
  for (const SliceDim& d : plan) v = v.slice(d.axis, d.start, d.start + d.step * d.count, d.step);
  copy_view(v, k.outputs[0]);
}

void infer_concat(InferCtx& c) {
  if (!c.node.has_attr("axis")) c.fail("Concat needs the 'axis' attribute");
  if (c.num_inputs() == 0) c.fail("Concat needs at least one input");
  int64_t r = c.in_rank(0);
  if (r == 0) c.fail("cannot concatenate scalars");
  int64_t ax = c.axis(c.node.attr_int("axis", 0), r);
  Shape out = c.in_shape(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    const Shape& s = c.in_shape(i);
    if (c.in_dtype(i) != c.in_dtype(0)) c.fail("input {} has a different dtype", i);
    if (int64_t(s.size()) != r) c.fail("input {} has rank {}, input 0 has rank {}", i, s.size(), r);
    for (int64_t d = 0; d < r; ++d)
      if (d != ax && s[size_t(d)] != out[size_t(d)])
        c.fail("input {} differs from input 0 in dim {} (concat axis is {})", i, d, ax);
    out[size_t(ax)] = add_dims(c, out[size_t(ax)], s[size_t(ax)]);
  }
  c.set_output(0, c.in_dtype(0), out);
}

// Outer count (dims before axis) and inner bytes (dims after axis, times element size).
std::pair<int64_t, size_t> outer_inner(const Shape& s, int64_t ax, DType t) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < ax; ++d) outer *= s[size_t(d)];
  for (size_t d = size_t(ax) + 1; d < s.size(); ++d) inner *= s[d];
  return {outer, size_t(inner) * dtype_size(t)};
}

void concat_kernel(KernelCtx& k) {
  Tensor& out = k.outputs[0];
  int64_t r = out.rank(), a = k.node.attr_int("axis", 0);
  int64_t ax = a < 0 ? a + r : a;
  auto [outer, inner] = outer_inner(out.shape(), ax, out.dtype());
  size_t row = size_t(out.dim(int(ax))) * inner, at = 0;
  char* o = static_cast<char*>(out.raw());
  for (const Tensor& in : k.inputs) {
    Tensor x = in.contiguous();
    size_t chunk = size_t(x.dim(int(ax))) * inner;
    const char* p = static_cast<const char*>(x.raw());
    if (chunk > 0)
      for (int64_t i = 0; i < outer; ++i) std::memcpy(o + i * row + at, p + i * chunk, chunk);
    at += chunk;
  }
}

void infer_split(InferCtx& c) {
  int64_t r = c.in_rank(0);
  int64_t ax = c.axis(c.node.attr_int("axis", 0), r);
  int64_t d = c.in_shape(0)[size_t(ax)];
  int64_t n = int64_t(c.node.outputs.size());
  std::vector<int64_t> sizes;
  if (auto split = ints_attr_or_input(c, "split", 1, "split")) {
    sizes = *split;
    if (int64_t(sizes.size()) != n) c.fail("split has {} sizes for {} outputs", sizes.size(), n);
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) c.fail("split size {} is negative", s);
      sum = add_dims(c, sum, s);
    }
    if (sum != d) c.fail("split sizes add up to {} but axis {} has size {}", sum, ax, d);
  } else if (c.node.has_attr("num_outputs")) {
    int64_t k = c.node.attr_int("num_outputs", 0);
    if (k != n || n <= 0) c.fail("num_outputs is {} but the node has {} outputs", k, n);
    int64_t chunk = (d + n - 1) / n;  // the last chunk is smaller when d is not divisible
    if (chunk * (n - 1) > d) c.fail("cannot split size {} into {} outputs", d, n);
    sizes.assign(size_t(n), chunk);
    sizes.back() = d - chunk * (n - 1);
  } else {
    if (n == 0 || d % n != 0)
      c.fail("axis {} of size {} cannot be split evenly into {} outputs", ax, d, n);
    sizes.assign(size_t(n), d / n);
  }
  for (int64_t i = 0; i < n; ++i) {
    Shape s = c.in_shape(0);
    s[size_t(ax)] = sizes[size_t(i)];
    c.set_output(int(i), c.in_dtype(0), s);
  }
}

void split_kernel(KernelCtx& k) {
  Tensor x = k.inputs[0].contiguous();
  int64_t r = x.rank(), a = k.node.attr_int("axis", 0);
  int64_t ax = a < 0 ? a + r : a;
  auto [outer, inner] = outer_inner(x.shape(), ax, x.dtype());
  size_t row = size_t(x.dim(int(ax))) * inner, at = 0;
  const char* p = static_cast<const char*>(x.raw());
  for (Tensor& out : k.outputs) {
    size_t chunk = size_t(out.dim(int(ax))) * inner;
    char* o = static_cast<char*>(out.raw());
    if (chunk > 0)
      for (int64_t i = 0; i < outer; ++i) std::memcpy(o + i * chunk, p + i * row + at, chunk);
    at += chunk;
  }
}

}  // namespace

void register_slice_ops(OpTable& t) {
  OpDef slice = movement_op("Slice", infer_slice, slice_kernel);
  slice.view = ViewKind::Slice;  // constant starts and steps: strides on device targets
  t.add(std::move(slice));
  OpDef concat = movement_op("Concat", infer_concat, concat_kernel);
  concat.library = LibraryKind::Concat;
  t.add(std::move(concat));
  OpDef split = movement_op("Split", infer_split, split_kernel);
  split.library = LibraryKind::Split;  // device copies, one per output
  t.add(std::move(split));
}

}  // namespace brrr::ops
