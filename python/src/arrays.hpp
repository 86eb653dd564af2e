// Arrays between Python and brrr: any DLPack or buffer-protocol array (numpy, torch, ...) in as a
// brrr::Tensor view, brrr::Tensor out as a numpy array that owns it. No copy either way for
// contiguous host arrays.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>

#include "brrr/tensor.hpp"

namespace brrr::py {

namespace nb = nanobind;

// Any contiguous array, read-only is fine; nanobind copies a non-contiguous one into a
// contiguous temporary (which the caller keeps alive with the ndarray).
using InArray = nb::ndarray<nb::ro, nb::c_contig>;

// `obj` as an array, or brrr::Error "input 'NAME': expected a numpy array or a DLPack tensor,
// got TYPE".
InArray to_array(nb::handle obj, const std::string& name);
// The brrr dtype of an array's DLPack dtype; brrr::Error naming the input (or `what`) otherwise.
DType array_dtype(const InArray& a, const std::string& name, const char* what = "input");
Shape array_shape(const InArray& a);
// A non-owning Tensor view of a host array (the array must outlive it).
Tensor host_view(const InArray& a, const std::string& name);
// A numpy array sharing t's storage; it keeps the storage alive.
nb::object to_numpy(const Tensor& t);
// The numpy dtype name of a brrr dtype ("float32", ..., "bool").
std::string numpy_dtype_name(DType t);

}  // namespace brrr::py
