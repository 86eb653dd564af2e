// Movement ops: the single entry point of the family plus the helpers its files share. The ops
// themselves live in movement_*.cpp, grouped by what they do.
#include <cstring>

#include "ops/movement_util.hpp"

namespace brrr {
namespace ops {

namespace {
template <typename U>
void copy_strided(const Tensor& src, Tensor& out) {
  const U* s = static_cast<const U*>(src.raw());
  U* d = static_cast<U*>(out.raw());
  for_each_index<1>(src.shape(), {&src.strides()},
                    [&](int64_t i, const std::array<int64_t, 1>& off) { d[i] = s[off[0]]; });
}
}  // namespace

void copy_view(const Tensor& src, Tensor& out) {
  BRRR_ASSERT(src.dtype() == out.dtype() && src.numel() == out.numel());
  if (src.numel() == 0) return;  // (Tensor::is_contiguous says false for some empty shapes)
  BRRR_ASSERT(out.is_contiguous());
  if (src.is_contiguous()) {
    std::memcpy(out.raw(), src.raw(), out.nbytes());
    return;
  }
  switch (dtype_size(src.dtype())) {
    case 1:
      return copy_strided<uint8_t>(src, out);
    case 2:
      return copy_strided<uint16_t>(src, out);
    case 4:
      return copy_strided<uint32_t>(src, out);
    case 8:
      return copy_strided<uint64_t>(src, out);
  }
  BRRR_ASSERT(false, "unexpected element size");
}

std::vector<int64_t> int_values(const Tensor& t) {
  if (t.dtype() == DType::i64 && t.is_contiguous()) {
    const int64_t* p = t.data<int64_t>();
    return std::vector<int64_t>(p, p + t.numel());
  }
  BRRR_CHECK(is_integral(t.dtype()) && t.dtype() != DType::boolean,
             "expected an integer tensor, got {}", dtype_name(t.dtype()));
  return t.to_int64_vector();
}

std::optional<std::vector<int64_t>> ints_attr_or_input(const InferCtx& c, const char* attr,
                                                       int input, const char* what) {
  if (c.node.has_attr(attr)) return c.node.attr_ints(attr);
  if (!c.has_input(input)) return std::nullopt;
  require_int_input(c, input, what);
  return int_values(c.require_const(input, what));
}

std::optional<std::vector<int64_t>> ints_attr_or_input(const KernelCtx& k, const char* attr,
                                                       int input) {
  if (k.node.has_attr(attr)) return k.node.attr_ints(attr);
  if (!k.has_input(input)) return std::nullopt;
  return int_values(k.inputs[input]);
}

std::vector<int64_t> normalize_axes(const InferCtx& c, const std::vector<int64_t>& axes,
                                    int64_t r) {
  std::vector<int64_t> out;
  std::vector<bool> seen(size_t(std::max<int64_t>(r, 1)), false);
  for (int64_t a : axes) {
    if (a < -r || a >= r) c.fail("axis {} is out of range for rank {}", a, r);
    int64_t n = a < 0 ? a + r : a;
    if (seen[size_t(n)]) c.fail("axis {} is given twice", a);
    seen[size_t(n)] = true;
    out.push_back(n);
  }
  return out;
}

int64_t mul_dims(const InferCtx& c, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) c.fail("dimension {} * {} overflows int64", a, b);
  return r;
}

int64_t add_dims(const InferCtx& c, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) c.fail("dimension {} + {} overflows int64", a, b);
  return r;
}

void require_int_input(const InferCtx& c, int i, const char* what) {
  DType t = c.in_dtype(i);
  if (t != DType::i64 && t != DType::i32)
    c.fail("input {} ({}) must be int64 or int32, got {}", i, what, dtype_name(t));
}

OpDef movement_op(const char* name, std::function<void(InferCtx&)> infer,
                  std::function<void(KernelCtx&)> ref) {
  OpDef d;
  d.name = name;
  d.cls = OpClass::movement;
  d.infer = std::move(infer);
  d.reference = std::move(ref);
  d.cost = [](const Graph&, const Node&) { return Cost{}; };  // bytes filled in by op_cost
  d.foldable = true;
  return d;
}

void fill_with(Tensor& out, const Tensor& value) {
  BRRR_ASSERT(value.numel() == 1 && value.dtype() == out.dtype());
  size_t es = dtype_size(out.dtype());
  char* d = static_cast<char*>(out.raw());
  int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * es, value.raw(), es);
}

}  // namespace ops

void register_movement_ops(OpTable& t) {
  ops::register_shape_ops(t);
  ops::register_reshape_ops(t);
  ops::register_slice_ops(t);
  ops::register_expand_ops(t);
  ops::register_gather_ops(t);
  ops::register_scatter_ops(t);
  ops::register_generator_ops(t);
}

}  // namespace brrr
