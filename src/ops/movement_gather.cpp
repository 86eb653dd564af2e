// Indexed reads: Gather, GatherElements, GatherND. Every index is range-checked before it is used;
// a bad index is a brrr::Error naming the node, never an out-of-bounds read.
#include <cstring>

#include "ops/movement_util.hpp"

namespace brrr::ops {

int64_t checked_gather_index(const std::string& label, int64_t i, int64_t d, int64_t axis,
                             const Shape& data) {
  if (i < -d || i >= d)
    fail("{}: index {} is out of range for axis {} of size {} (data shape {})", label, i, axis, d,
         shape_str(data));
  return i < 0 ? i + d : i;
}

namespace {

int64_t checked_index(const Node& n, int64_t i, int64_t d, int64_t axis, const Shape& data) {
  return checked_gather_index(n.label(), i, d, axis, data);
}

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// --- Gather -------------------------------------------------------------------------------------

void infer_gather(InferCtx& c) {
  const Shape& data = c.in_shape(0);
  if (data.empty()) c.fail("data must have rank >= 1");
  int64_t ax = c.axis(c.node.attr_int("axis", 0), int64_t(data.size()));
  require_int_input(c, 1, "indices");
  if (const Tensor* idx = c.in_const(1))  // fail at load time when the indices are known
    for (int64_t i : int_values(*idx)) checked_index(c.node, i, data[size_t(ax)], ax, data);
  Shape out(data.begin(), data.begin() + ax);
  const Shape& is = c.in_shape(1);
  out.insert(out.end(), is.begin(), is.end());
  out.insert(out.end(), data.begin() + ax + 1, data.end());
  c.set_output(0, c.in_dtype(0), out);
}

void gather_kernel(KernelCtx& k) {
  Tensor x = k.inputs[0].contiguous();
  const Shape& s = x.shape();
  int64_t r = x.rank(), a = k.node.attr_int("axis", 0);
  size_t ax = size_t(a < 0 ? a + r : a);
  std::vector<int64_t> idx = int_values(k.inputs[1]);
  int64_t d = s[ax];
  for (int64_t& i : idx) i = checked_index(k.node, i, d, int64_t(ax), s);
  int64_t outer = prod(s, 0, ax);
  size_t inner = size_t(prod(s, ax + 1, s.size())) * dtype_size(x.dtype());
  if (inner == 0) return;
  const char* p = static_cast<const char*>(x.raw());
  char* o = static_cast<char*>(k.outputs[0].raw());
  int64_t ni = int64_t(idx.size());
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t j = 0; j < ni; ++j)
      std::memcpy(o + (b * ni + j) * inner, p + (b * d + idx[size_t(j)]) * inner, inner);
}

// --- GatherElements -----------------------------------------------------------------------------

void infer_gather_elements(InferCtx& c) {
  const Shape& data = c.in_shape(0);
  const Shape& is = c.in_shape(1);
  int64_t r = int64_t(data.size());
  if (r == 0) c.fail("data must have rank >= 1");
  int64_t ax = c.axis(c.node.attr_int("axis", 0), r);
  require_int_input(c, 1, "indices");
  if (int64_t(is.size()) != r) c.fail("indices must have the same rank as data");
  for (int64_t d = 0; d < r; ++d)
    if (d != ax && is[size_t(d)] > data[size_t(d)])
      c.fail("indices dim {} ({}) is larger than data's ({})", d, is[size_t(d)], data[size_t(d)]);
  c.set_output(0, c.in_dtype(0), is);
}

void gather_elements_kernel(KernelCtx& k) {
  Tensor x = k.inputs[0].contiguous();
  int64_t r = x.rank(), a = k.node.attr_int("axis", 0);
  size_t ax = size_t(a < 0 ? a + r : a);
  std::vector<int64_t> idx = int_values(k.inputs[1]);
  Shape base = x.strides();
  base[ax] = 0;  // the walk gives the offset of every coordinate but the indexed one
  int64_t d = x.dim(int(ax)), st = x.strides()[ax];
  size_t es = dtype_size(x.dtype());
  const char* p = static_cast<const char*>(x.raw());
  char* o = static_cast<char*>(k.outputs[0].raw());
  for_each_index<1>(k.inputs[1].shape(), {&base},
                    [&](int64_t i, const std::array<int64_t, 1>& off) {
                      int64_t j = checked_index(k.node, idx[size_t(i)], d, int64_t(ax), x.shape());
                      std::memcpy(o + i * int64_t(es), p + (off[0] + j * st) * int64_t(es), es);
                    });
}

// --- GatherND -----------------------------------------------------------------------------------

void infer_gather_nd(InferCtx& c) {
  const Shape& data = c.in_shape(0);
  const Shape& is = c.in_shape(1);
  int64_t r = int64_t(data.size()), q = int64_t(is.size());
  int64_t b = c.node.attr_int("batch_dims", 0);
  if (c.in_dtype(1) != DType::i64) c.fail("indices must be int64");
  if (r < 1 || q < 1) c.fail("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) c.fail("batch_dims {} must be in [0, {})", b, std::min(r, q));
  for (int64_t i = 0; i < b; ++i)
    if (data[size_t(i)] != is[size_t(i)])
      c.fail("batch dim {} differs between data ({}) and indices ({})", i, data[size_t(i)],
             is[size_t(i)]);
  int64_t m = is.back();
  if (m > r - b)
    c.fail("index tuples of length {} are longer than data's rank {} - batch_dims {}", m, r, b);
  Shape out(is.begin(), is.end() - 1);
  out.insert(out.end(), data.begin() + b + m, data.end());
  c.set_output(0, c.in_dtype(0), out);
}

void gather_nd_kernel(KernelCtx& k) {
  Tensor x = k.inputs[0].contiguous();
  const Shape& s = x.shape();
  const Shape& is = k.inputs[1].shape();
  size_t b = size_t(k.node.attr_int("batch_dims", 0)), m = size_t(is.back());
  std::vector<int64_t> idx = int_values(k.inputs[1]);
  int64_t batches = prod(s, 0, b), batch_elems = prod(s, b, s.size());
  int64_t tuples = prod(is, b, is.size() - 1);
  int64_t inner = prod(s, b + m, s.size());
  size_t es = dtype_size(x.dtype()), chunk = size_t(inner) * es;
  const char* p = static_cast<const char*>(x.raw());
  char* o = static_cast<char*>(k.outputs[0].raw());
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t t = 0; t < tuples; ++t) {
      const int64_t* tup = idx.data() + (bi * tuples + t) * int64_t(m);
      int64_t off = bi * batch_elems;
      for (size_t j = 0; j < m; ++j)
        off += checked_index(k.node, tup[j], s[b + j], int64_t(b + j), s) * x.strides()[b + j];
      if (chunk) std::memcpy(o + (bi * tuples + t) * int64_t(chunk), p + off * int64_t(es), chunk);
    }
}

}  // namespace

void register_gather_ops(OpTable& t) {
  OpDef gather = movement_op("Gather", infer_gather, gather_kernel);
  gather.view = ViewKind::Pick;         // one constant index: an offset into its input
  gather.library = LibraryKind::Gather;  // a device target's copy kernel
  t.add(std::move(gather));
  t.add(movement_op("GatherElements", infer_gather_elements, gather_elements_kernel));
  t.add(movement_op("GatherND", infer_gather_nd, gather_nd_kernel));
}

}  // namespace brrr::ops
