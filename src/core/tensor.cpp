#include "brrr/tensor.hpp"
#include "core/env.hpp"
#include "core/f16_convert.hpp"
#include "core/pages.hpp"
#include "core/parallel.hpp"

#include <array>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <limits>

namespace brrr {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    BRRR_CHECK(d >= 0, "negative dimension {} in shape {}", d, shape_str(s));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      fail("shape {} has more elements than fit in 64 bits", shape_str(s));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Shape contiguous_strides(const Shape& s) {
  // Zero dims are skipped so strides stay meaningful; an empty tensor with huge other dims can
  // exceed int64 here, so multiply unsigned (wraps, never UB): such strides are never used.
  Shape st(s.size());
  uint64_t acc = 1;
  for (int i = int(s.size()) - 1; i >= 0; --i) {
    st[i] = int64_t(acc);
    acc *= uint64_t(std::max<int64_t>(s[i], 1));
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else fail("shapes {} and {} cannot be broadcast together", shape_str(a), shape_str(b));
  }
  return out;
}

std::string byte_count(int64_t elems, size_t elem_size) {
  uint64_t n = uint64_t(elems);
  if (elem_size && n > UINT64_MAX / elem_size)
    return fmt::format("more than {} bytes", UINT64_MAX);
  return fmt::format("{} bytes", n * elem_size);
}

size_t max_tensor_bytes() {
  static size_t limit = [] {
    return env::size("BRRR_MAX_TENSOR_BYTES");
  }();
  return limit;
}

Tensor Tensor::from_blob(void* p, DType dtype, const Shape& shape) {
  Tensor t;
  t.storage_ = std::shared_ptr<void>(p, [](void*) {});
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::from_shared(std::shared_ptr<void> owner, void* data, DType dtype,
                           const Shape& shape) {
  Tensor t;
  t.storage_ = std::shared_ptr<void>(std::move(owner), data);  // aliasing: owner stays alive
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

size_t Tensor::checked_nbytes(DType dtype, const Shape& shape) {
  int64_t n = shape_numel(shape);
  size_t es = dtype_size(dtype);
  if (uint64_t(n) > max_tensor_bytes() / es)
    fail("tensor of shape {} ({}) needs {}, over the limit of {} bytes (BRRR_MAX_TENSOR_BYTES)",
         shape_str(shape), dtype_name(dtype), byte_count(n, es), max_tensor_bytes());
  return size_t(n) * es;
}

Tensor Tensor::empty(DType dtype, const Shape& shape) {
  size_t bytes = std::max<size_t>(checked_nbytes(dtype, shape), 1);
  // Tensors of 32 MiB and more start on a 2 MiB boundary and ask for transparent huge pages:
  // the first write of a 4 KiB page is a fault, and Llama-1B's merged gate/up weights (1.1 GB
  // written once at build) spent most of their copy in faults.
  constexpr size_t kHuge = size_t(2) << 20;
  const bool huge = bytes >= (size_t(32) << 20);
  size_t rounded = huge ? (bytes + kHuge - 1) / kHuge * kHuge : (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(huge ? kHuge : 64, rounded);
  if (!p) fail("out of memory allocating {} bytes for a tensor of shape {}", bytes, shape_str(shape));
#ifdef MADV_HUGEPAGE
  if (huge) ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: ignored where THP is off
#endif
  Tensor t;
  t.storage_ = std::shared_ptr<void>(p, std::free);
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::zeros(DType dtype, const Shape& shape) {
  Tensor t = empty(dtype, shape);
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

int64_t Tensor::numel() const { return shape_numel(shape_); }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // nothing to address: any strides are fine
  int64_t acc = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != acc) return false;
    acc *= shape_[i];
  }
  return true;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(dtype_, shape_);
  size_t es = dtype_size(dtype_);
  if (is_contiguous()) {
    std::memcpy(out.raw(), raw(), nbytes());
    return out;
  }
  const char* src = static_cast<const char*>(raw());
  char* dst = static_cast<char*>(out.raw());
  for_each_index<1>(shape_, {&strides_}, [&](int64_t i, const std::array<int64_t, 1>& off) {
    std::memcpy(dst + i * es, src + off[0] * es, es);
  });
  return out;
}

Tensor Tensor::cast(DType to) const {
  Tensor src = contiguous();
  Tensor out = empty(to, shape_);
  int64_t n = numel();
  dispatch_dtype(dtype_, [&]<typename S>() {
    const S* s = src.data<S>();
    dispatch_dtype(to, [&]<typename D>() {
      D* d = out.data<D>();
      // Large casts (a whole model's weights to 16 bits: 1.2 billion for Llama-1B) by bands on
      // several threads, each mapping its part of a source read in place from the model file.
      const size_t bytes = size_t(n) * (sizeof(S) + sizeof(D));
      for_bands(n, bytes, size_t(8) << 20, [&](int64_t i0, int64_t i1) {
        if (size_t(i1 - i0) * sizeof(S) >= (size_t(1) << 20))
          prefault_for_reading(s + i0, size_t(i1 - i0) * sizeof(S));
        if constexpr (std::is_same_v<S, float> && std::is_same_v<D, f16>) {
          f32_to_f16(s + i0, d + i0, i1 - i0, /*saturate=*/false);
          return;
        }
        for (int64_t i = i0; i < i1; ++i) {
          if constexpr (std::is_same_v<D, bool>) {
            d[i] = compute_t<S>(s[i]) != compute_t<S>(0);
          } else if constexpr (std::is_same_v<D, f16> || std::is_same_v<D, bf16>) {
            d[i] = D(float(compute_t<S>(s[i])));
          } else if constexpr (std::is_floating_point_v<compute_t<S>> && std::is_integral_v<D>) {
            // Float to int: truncate toward zero; out-of-range and NaN saturate rather than UB.
            double v = double(compute_t<S>(s[i]));
            if (v != v) d[i] = 0;
            else if (v >= double(std::numeric_limits<D>::max())) d[i] = std::numeric_limits<D>::max();
            else if (v <= double(std::numeric_limits<D>::min())) d[i] = std::numeric_limits<D>::min();
            else d[i] = D(v);
          } else {
            d[i] = D(compute_t<S>(s[i]));
          }
        }
      });
    });
  });
  return out;
}

Tensor Tensor::reshape(const Shape& s) const {
  BRRR_CHECK(shape_numel(s) == numel(), "cannot reshape {} to {}", shape_str(shape_), shape_str(s));
  Tensor t = contiguous();
  t.shape_ = s;
  t.strides_ = contiguous_strides(s);
  return t;
}

Tensor Tensor::permute(const std::vector<int64_t>& perm) const {
  BRRR_CHECK(int(perm.size()) == rank(), "permutation of length {} for rank {}", perm.size(), rank());
  Tensor t = *this;
  std::vector<bool> seen(rank(), false);
  for (int i = 0; i < rank(); ++i) {
    int64_t p = perm[i];
    BRRR_CHECK(p >= 0 && p < rank() && !seen[p], "invalid permutation for rank {}", rank());
    seen[p] = true;
    t.shape_[i] = shape_[p];
    t.strides_[i] = strides_[p];
  }
  return t;
}

Tensor Tensor::expand(const Shape& s) const {
  BRRR_CHECK(s.size() >= shape_.size(), "cannot expand {} to {}", shape_str(shape_), shape_str(s));
  Tensor t = *this;
  size_t lead = s.size() - shape_.size();
  t.shape_ = s;
  t.strides_.assign(s.size(), 0);
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] == s[lead + i]) t.strides_[lead + i] = strides_[i];
    else BRRR_CHECK(shape_[i] == 1, "cannot expand {} to {}", shape_str(shape_), shape_str(s));
  }
  return t;
}

Tensor Tensor::slice(int axis, int64_t start, int64_t stop, int64_t step) const {
  BRRR_ASSERT(axis >= 0 && axis < rank() && step != 0);
  Tensor t = *this;
  int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                       : (start > stop ? (start - stop - step - 1) / (-step) : 0);
  t.shape_[axis] = n;
  if (n > 0) t.offset_ += start * strides_[axis];
  t.strides_[axis] = strides_[axis] * step;
  return t;
}

static int64_t flat_to_offset(const Tensor& t, int64_t flat) {
  int64_t off = t.offset();
  for (int d = t.rank() - 1; d >= 0; --d) {
    int64_t n = t.shape()[d];
    off += (flat % n) * t.strides()[d];
    flat /= n;
  }
  return off;
}

double Tensor::at_double(int64_t flat) const {
  int64_t off = flat_to_offset(*this, flat) - offset_;
  return dispatch_dtype(dtype_, [&]<typename T>() -> double {
    return double(compute_t<T>(static_cast<const T*>(raw())[off]));
  });
}

int64_t Tensor::at_int(int64_t flat) const {
  int64_t off = flat_to_offset(*this, flat) - offset_;
  return dispatch_dtype(dtype_, [&]<typename T>() -> int64_t {
    auto v = compute_t<T>(static_cast<const T*>(raw())[off]);
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      if (!(v == v) || v > 9.2e18 || v < -9.2e18) fail("value {} does not fit an int64", double(v));
    }
    return int64_t(v);
  });
}

std::vector<int64_t> Tensor::to_int64_vector() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[i] = at_int(i);
  return v;
}

std::vector<double> Tensor::to_double_vector() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[i] = at_double(i);
  return v;
}

}  // namespace brrr
