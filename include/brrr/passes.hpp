// Graph -> Graph passes, each in its own file under src/passes/.
#pragma once
#include <map>
#include <string>

#include "brrr/graph.hpp"

namespace brrr {

struct InferOptions {
  // Concrete shapes for graph inputs; required for inputs with symbolic or unknown dims.
  std::map<std::string, Shape> input_shapes;
  // Largest output (bytes, all outputs of a node) that constant folding computes at load time.
  size_t fold_budget_bytes = size_t(4) << 20;
};

// Sorts nodes topologically (fails on cycles and on inputs nobody produces), resolves every node's
// OpDef (fails naming the node and op when unsupported), binds input shapes, infers dtypes and
// shapes of every value, and folds nodes whose inputs are all constant (shape subgraphs).
void infer_shapes(Graph& g, const InferOptions& opts);

// Removes nodes whose outputs are all constant or unused by the graph outputs.
void eliminate_dead_nodes(Graph& g);

// Rewrites channel Concats whose every consumer is a group-1 Conv with constant weights (directly
// or through a MaxPool/AveragePool) into partial convs over weight slices summed by Adds, when the
// partial sums move fewer bytes than the concat; returns true when it changed the graph. Runs on
// a shape-inferred graph (src/passes/distribute_concat.cpp).
bool distribute_concat(Graph& g);

// Rewrites float32 Sum, Min and Max nodes with more than 8 inputs into chains of nodes with at most
// 8 inputs, folding in the same order; returns true when it changed the graph. Runs on a
// shape-inferred graph (src/passes/split_variadic.cpp).
bool split_variadic(Graph& g);

// Prints the graph to stderr after a pass when BRRR_DEBUG >= 2.
void debug_dump(const Graph& g, const char* after_pass);
int debug_level();

}  // namespace brrr
