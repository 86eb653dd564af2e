// A strided n-d array over shared storage. Views (reshape of contiguous data, permute, expand,
// slice) share storage; contiguous() copies when needed.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brrr/dtype.hpp"

namespace brrr {

using Shape = std::vector<int64_t>;

// Product of dims; throws brrr::Error on negative dims or int64 overflow.
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3, 4]"
Shape contiguous_strides(const Shape& s);
// Numpy-style broadcast of two shapes; throws brrr::Error naming both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b);

// Largest tensor brrr will allocate (BRRR_MAX_TENSOR_BYTES, default 8 GiB): a model asking for more
// gets a clear error instead of an allocation that takes the machine down.
size_t max_tensor_bytes();
// "N bytes" for `elems` elements of `elem_size` bytes, or "more than 2^64-1 bytes" when the
// product overflows (size errors must not print a wrapped count).
std::string byte_count(int64_t elems, size_t elem_size);

class Tensor {
 public:
  Tensor() = default;
  // Uninitialized contiguous tensor. Checks the size against max_tensor_bytes().
  static Tensor empty(DType dtype, const Shape& shape);
  static Tensor zeros(DType dtype, const Shape& shape);
  // Non-owning contiguous view of memory someone else keeps alive (a session's arena).
  static Tensor from_blob(void* p, DType dtype, const Shape& shape);
  // A contiguous tensor over `data`, which `owner` keeps alive (a file mapping's region).
  static Tensor from_shared(std::shared_ptr<void> owner, void* data, DType dtype, const Shape& shape);
  // Bytes of a contiguous tensor of this shape; throws as empty() does over BRRR_MAX_TENSOR_BYTES.
  static size_t checked_nbytes(DType dtype, const Shape& shape);
  template <typename T>
  static Tensor from_vector(const Shape& shape, const std::vector<T>& v);
  template <typename T>
  static Tensor scalar(T v) { return from_vector<T>({}, std::vector<T>{v}); }

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  int64_t offset() const { return offset_; }         // in elements
  int rank() const { return int(shape_.size()); }
  int64_t dim(int i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;

  // Pointer to the first element (storage base + offset).
  void* raw() { return static_cast<char*>(storage_.get()) + offset_ * dtype_size(dtype_); }
  const void* raw() const {
    return static_cast<const char*>(storage_.get()) + offset_ * dtype_size(dtype_);
  }
  template <typename T>
  T* data() {
    BRRR_ASSERT(dtype_of<T>() == dtype_, "Tensor::data<T> with the wrong T");
    return static_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    BRRR_ASSERT(dtype_of<T>() == dtype_, "Tensor::data<T> with the wrong T");
    return static_cast<const T*>(raw());
  }

  Tensor contiguous() const;  // self if already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor cast(DType to) const;
  Tensor reshape(const Shape& s) const;  // view when contiguous, else copy
  Tensor permute(const std::vector<int64_t>& perm) const;
  Tensor expand(const Shape& s) const;  // broadcast view (stride 0)
  Tensor slice(int axis, int64_t start, int64_t stop, int64_t step) const;

  // Element at flat (row-major) index, as double / int64, respecting strides. Slow; for tests,
  // shape arithmetic and printing.
  double at_double(int64_t flat) const;
  int64_t at_int(int64_t flat) const;
  std::vector<int64_t> to_int64_vector() const;
  std::vector<double> to_double_vector() const;

  // Shares storage: true when both tensors view the same allocation.
  bool same_storage(const Tensor& o) const { return storage_ == o.storage_; }
  // Number of Tensors sharing this storage (a session reuses output buffers nobody else holds).
  long storage_use_count() const { return storage_.use_count(); }

 private:
  std::shared_ptr<void> storage_;
  DType dtype_ = DType::f32;
  Shape shape_, strides_;
  int64_t offset_ = 0;
};

template <typename T>
Tensor Tensor::from_vector(const Shape& shape, const std::vector<T>& v) {
  Tensor t = empty(dtype_of<T>(), shape);
  BRRR_CHECK(int64_t(v.size()) == t.numel(), "from_vector: {} values for shape {}", v.size(),
             shape_str(shape));
  T* p = t.data<T>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = v[i];
  return t;
}

// Calls f(flat_out_index, offsets...) for every element of `shape`, where offsets[k] is the
// element offset into tensor k (whose strides are given, already broadcast to `shape`).
template <size_t N, typename F>
void for_each_index(const Shape& shape, const std::array<const Shape*, N>& strides, F&& f) {
  int r = int(shape.size());
  int64_t n = shape_numel(shape);
  if (n == 0) return;
  std::vector<int64_t> idx(r, 0);
  std::array<int64_t, N> off{};
  for (int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += (*strides[k])[d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= (*strides[k])[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace brrr
