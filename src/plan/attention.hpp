// Scaled dot-product attention found in a graph, for one fused kernel (Target::
// attention_max_head_dim): MatMul(Q, K^T) -> scalar Mul/Div -> Where(bool mask) -> Add(mask) ->
// Softmax(last axis) -> [IsNaN -> Where 0] -> MatMul(., V), with the Reshapes, Transposes and
// scalar Muls of the head split before it and the Transposes and Reshapes of the head merge after
// it read and written through strides (plan/operand_view.hpp), so none of them is a kernel.
#pragma once
#include <functional>
#include <vector>

#include "brrr/graph.hpp"
#include "plan/library_desc.hpp"

namespace brrr::plan {

struct AttentionMatch {
  std::vector<int> nodes;  // every node the kernel covers, in graph order; the last writes `out`
  AttentionDesc desc;
};

// Every attention block of g whose intermediates are read only inside the block, with a head
// dim of at most max_head_dim and data of one float type (f32, bf16 or f16). `free` says whether
// a node may still join (not taken by another kernel). Blocks are disjoint.
std::vector<AttentionMatch> find_attention(const Graph& g, int64_t max_head_dim,
                                           const std::function<bool(int node)>& free);

}  // namespace brrr::plan
