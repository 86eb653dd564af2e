// Helpers shared by the movement op files (movement*.cpp): byte-level copies that work for every
// dtype, reading integer shape/axes tensors, overflow-checked shape arithmetic.
#pragma once
#include <optional>

#include "ops/op_util.hpp"

namespace brrr::ops {

// Copies the elements of `src` (any strides, including 0 and negative) in row-major order into
// the contiguous tensor `out`, which must have the same dtype and element count.
void copy_view(const Tensor& src, Tensor& out);

// Integer contents of a shape / axes / index tensor (any integer dtype, contiguous or not).
std::vector<int64_t> int_values(const Tensor& t);

// Ints given as attribute `attr` (older opsets) or as constant input `input` (newer opsets);
// nullopt when the node has neither.
std::optional<std::vector<int64_t>> ints_attr_or_input(const InferCtx& c, const char* attr,
                                                       int input, const char* what);
std::optional<std::vector<int64_t>> ints_attr_or_input(const KernelCtx& k, const char* attr,
                                                       int input);

// Normalizes a list of axes against rank r; fails on out-of-range or repeated axes.
std::vector<int64_t> normalize_axes(const InferCtx& c, const std::vector<int64_t>& axes, int64_t r);

// a * b for non-negative dims; fails naming the node on int64 overflow.
int64_t mul_dims(const InferCtx& c, int64_t a, int64_t b);
// a + b for dims; fails naming the node on int64 overflow.
int64_t add_dims(const InferCtx& c, int64_t a, int64_t b);

// Gather index i normalized against axis `axis` of size d of data shaped `data` (negative counts
// from the end); fails naming `label` (the node) when out of range. The reference kernel's check,
// shared with the CPU library's Gather.
int64_t checked_gather_index(const std::string& label, int64_t i, int64_t d, int64_t axis,
                             const Shape& data);

// Fails unless input i has an integer dtype (indices, shapes).
void require_int_input(const InferCtx& c, int i, const char* what);

// A movement-class OpDef: 0 flops, default compulsory bytes, foldable.
OpDef movement_op(const char* name, std::function<void(InferCtx&)> infer,
                  std::function<void(KernelCtx&)> ref);

// Fills `out` (contiguous) with copies of the single element of `value`.
void fill_with(Tensor& out, const Tensor& value);

// Sub-families, each in its own file; called from register_movement_ops.
void register_shape_ops(OpTable& t);      // movement_shape.cpp
void register_reshape_ops(OpTable& t);    // movement_reshape.cpp
void register_slice_ops(OpTable& t);      // movement_slice.cpp
void register_expand_ops(OpTable& t);     // movement_expand.cpp
void register_gather_ops(OpTable& t);     // movement_gather.cpp
void register_scatter_ops(OpTable& t);    // movement_scatter.cpp
void register_generator_ops(OpTable& t);  // movement_generate.cpp

}  // namespace brrr::ops
