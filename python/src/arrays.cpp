#include "arrays.hpp"

#include <vector>

#include "brrr/error.hpp"

namespace brrr::py {

namespace {

bool is(const nb::dlpack::dtype& d, nb::dlpack::dtype_code code, int bits) {
  return d.code == uint8_t(code) && d.bits == bits && d.lanes == 1;
}

}  // namespace

InArray to_array(nb::handle obj, const std::string& name) {
  InArray a;
  if (!nb::try_cast(obj, a))
    fail("input '{}': expected a numpy array or a DLPack tensor, got {}", name,
         nb::type_name(obj.type()).c_str());
  return a;
}

DType array_dtype(const InArray& a, const std::string& name, const char* what) {
  using C = nb::dlpack::dtype_code;
  const nb::dlpack::dtype d = a.dtype();
  if (is(d, C::Float, 32)) return DType::f32;
  if (is(d, C::Float, 16)) return DType::f16;
  if (is(d, C::Bfloat, 16)) return DType::bf16;
  if (is(d, C::Float, 64)) return DType::f64;
  if (is(d, C::Int, 64)) return DType::i64;
  if (is(d, C::Int, 32)) return DType::i32;
  if (is(d, C::Int, 8)) return DType::i8;
  if (is(d, C::UInt, 8)) return DType::u8;
  if (is(d, C::Bool, 8)) return DType::boolean;
  fail("{} '{}' has a dtype brrr does not take (DLPack code {}, {} bits, {} lanes)", what, name,
       int(d.code), int(d.bits), int(d.lanes));
}

Shape array_shape(const InArray& a) {
  Shape s(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) s[i] = int64_t(a.shape(i));
  return s;
}

Tensor host_view(const InArray& a, const std::string& name) {
  // const_cast: Tensor has no read-only view; executors only read their inputs.
  return Tensor::from_blob(const_cast<void*>(a.data()), array_dtype(a, name), array_shape(a));
}

nb::object to_numpy(const Tensor& t) {
  using C = nb::dlpack::dtype_code;
  nb::dlpack::dtype d{uint8_t(C::Float), 32, 1};
  switch (t.dtype()) {
    case DType::f32: break;
    case DType::f16: d = {uint8_t(C::Float), 16, 1}; break;
    case DType::bf16: d = {uint8_t(C::Bfloat), 16, 1}; break;
    case DType::f64: d = {uint8_t(C::Float), 64, 1}; break;
    case DType::i64: d = {uint8_t(C::Int), 64, 1}; break;
    case DType::i32: d = {uint8_t(C::Int), 32, 1}; break;
    case DType::i8: d = {uint8_t(C::Int), 8, 1}; break;
    case DType::u8: d = {uint8_t(C::UInt), 8, 1}; break;
    case DType::boolean: d = {uint8_t(C::Bool), 8, 1}; break;
  }
  // The capsule holds a Tensor sharing the storage: the array keeps the buffer alive, and the
  // session sees the buffer as taken, so its next run writes a fresh one.
  Tensor c = t.contiguous();
  auto* keep = new Tensor(c);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(c.shape().begin(), c.shape().end());
  return nb::cast(nb::ndarray<nb::numpy>(keep->raw(), shape.size(), shape.data(), owner, nullptr,
                                         d, nb::device::cpu::value));
}

std::string numpy_dtype_name(DType t) { return std::string(dtype_name(t)); }

}  // namespace brrr::py
