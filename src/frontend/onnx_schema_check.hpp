#pragma once
#include "brrr/graph.hpp"

namespace brrr {
// Fails when a default-domain node's input/output counts break its ONNX schema.
void check_node_arity(const Node& n, const Graph& g);
// Fails when a default-domain node's attribute has another type than its ONNX schema declares
// (a STRING alpha must never reach a kernel or generated code).
void check_node_attributes(const Node& n, const Graph& g);
}  // namespace brrr
