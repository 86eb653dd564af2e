// A library GEMM operand read through a strided view of an earlier buffer: the Reshapes,
// Squeezes, Unsqueezes, Transposes, scalar Muls, Gathers of one constant index and unit-step
// Slices (merge_parallel_gemms's parts of a merged Q/K/V product) between that buffer and the GEMM become the operand's memory descriptor (dims, element strides, an offset)
// and a scale on the product, so no copy kernel runs (BERT's and GPT-2's head split: Reshape
// [B,S,H,D], Transpose [0,2,1,3], Mul by 1/sqrt(sqrt(D)); ViT's q, k and v picked out of the
// packed in-projection by Gather 0, 1, 2).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "brrr/graph.hpp"

namespace brrr::plan {

// One factor of a view's dim: `size` indices `stride` elements apart.
struct Factor {
  int64_t size = 1, stride = 0;
  bool operator==(const Factor&) const = default;
};

struct OperandView {
  int source = -1;               // the buffer read (row-major, as every planned buffer is)
  std::vector<int> nodes;        // the view's nodes, source side first (empty: no view)
  Shape dims;                    // the operand's shape, as the GEMM reads it
  std::vector<int64_t> strides;  // in elements, one per dim (0 for a factored dim)
  int64_t offset = 0;            // in elements: where the view's first element lies
  double scale = 1;              // product of the scalar Muls on the way
  // Only where the caller allows factored dims: per dim, its factors (outermost first) when no
  // single stride describes it, else none; empty when no dim is factored. A Reshape that merges
  // dims memory does not keep adjacent makes one: ViT's [S, B*H, D] over its [S, B, 3E] in-
  // projection is B*H = (B: stride 3E) x (H: stride D).
  std::vector<std::vector<Factor>> factors;
};

// The longest view ending at value v whose nodes all satisfy `take` (which says whether a node
// may be folded: its output read by the next node alone, say). A view must leave one of the last
// two dims with unit stride (what oneDNN's fast matmul reads) and its source must be computed at
// run time (constants are folded before planning). An empty `nodes` when none applies. Views are
// of float32 data, and with `float16` also of bfloat16 and float16 (CUDA's fused attention).
// With `factored`, a dim may be a product of factors (OperandView::factors), for a caller that
// reads them (the fused attention's batch and heads); Gathers and Slices of such a dim stop the
// view.
OperandView operand_view(const Graph& g, int v, const std::function<bool(int node)>& take,
                         bool float16 = false, bool factored = false);

// The other direction, for a GEMM's result: the longest run of Reshapes and Transposes from value
// v that `take` lets go (source: the last one's output, written row-major; dims: v's shape;
// strides: where each element of v lands in it). Same unit-stride rule and `factored` as
// operand_view's; empty `nodes`: none.
OperandView output_view(const Graph& g, int v, const std::function<bool(int node)>& take,
                        bool float16 = false, bool factored = false);

// The factors of a view reshaped to `to`, or nullopt when neither strides nor (with `factored`)
// factors describe it. `from` holds each dim's factors, outermost first; a dim of `to` is made of
// the pieces of a common refinement of both shapes, and is factored when they are not adjacent
// in memory (public for its tests).
std::optional<std::vector<std::vector<Factor>>> reshape_factors(
    const std::vector<std::vector<Factor>>& from, const Shape& to, bool factored);

// Row-major strides of a shape, in elements.
std::vector<int64_t> row_major_strides(const Shape& s);

// A view whose elements lie in row-major order (dims of 1 may have any stride): empty strides,
// or these. Such a view is its buffer under another shape.
bool is_row_major(const Shape& dims, const std::vector<int64_t>& strides);

}  // namespace brrr::plan
