#pragma once
#include "brrr/graph.hpp"

namespace brrr {
// Fails when a default-domain node's input/output counts break its ONNX schema.
void check_node_arity(const Node& n, const Graph& g);
}  // namespace brrr
