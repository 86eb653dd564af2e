// Graph -> Graph passes, each in its own file under src/passes/.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "brrr/graph.hpp"

namespace brrr {

struct InferOptions {
  // Concrete shapes for graph inputs; required for inputs with symbolic or unknown dims.
  std::map<std::string, Shape> input_shapes;
  // Largest output (bytes, all outputs of a node) that constant folding computes at load time.
  size_t fold_budget_bytes = size_t(4) << 20;
};

// The graph passes at the front of the compile pipeline (src/passes/pipeline.cpp runs them in
// order, one file each).

// Sorts nodes topologically; fails on a value produced twice, on cycles and on inputs nobody
// produces (src/passes/topo_sort.cpp).
void topo_sort(Graph& g);

// Gives every graph input a shape: `input_shapes` where named (checked against the model's
// declared rank and fixed dims), else the declared one, which must have no symbolic dims
// (src/passes/bind_inputs.cpp).
void bind_inputs(Graph& g, const std::map<std::string, Shape>& input_shapes);

// On a sorted, bound graph: resolves every node's OpDef (fails naming the node and op when
// unsupported), infers the dtype and shape of every value, and folds each node whose inputs are
// all constant as soon as it is typed (src/passes/infer_shapes.cpp).
void infer_types(Graph& g, size_t fold_budget_bytes);

// Folds one typed node whose inputs are all constant and whose outputs total at most
// `fold_budget_bytes`: its outputs become constants. Returns whether it folded
// (src/passes/fold_constants.cpp).
bool fold_node(Graph& g, const Node& n, size_t fold_budget_bytes);

// topo_sort, bind_inputs and infer_types: a typed graph for unit tests of one stage (an op's
// inference, the planner, a code generator). Everything that runs a model, the reference
// executor's users included, prepares it with compile() (src/passes/pipeline.hpp).
void infer_shapes(Graph& g, const InferOptions& opts);

// Removes nodes whose outputs are all constant or unused by the graph outputs
// (src/passes/eliminate_dead_nodes.cpp).
void eliminate_dead_nodes(Graph& g);

// Rewrites channel Concats whose every consumer is a group-1 Conv with constant weights (directly
// or through a MaxPool/AveragePool) into partial convs over weight slices summed by Adds, when the
// partial sums move fewer bytes than the concat; returns true when it changed the graph. Runs on
// a shape-inferred graph (src/passes/distribute_concat.cpp).
bool distribute_concat(Graph& g);

// MatMuls reading the same activation with constant 2-D weights of its type (and their bias Adds,
// where every one has one) become one MatMul on the concatenated weights (and one Add), each
// former result a Slice of the merged one along the last axis. With only_into_gemm_views, a
// group's projections are merged only where every use of a result is a Reshape / Transpose /
// Squeeze / Unsqueeze / scalar-Mul chain into a MatMul (what CPU GEMMs read through strides);
// without it, only where every result is split into heads that Transposes read (the Slices then
// views in the transposes' generated kernels). A Split along the last axis whose outputs are
// read the same way becomes one Slice per output. With `pointwise_readers` (a target with lazy
// views) a group whose results only pointwise nodes read merges too, while each product is under
// 2^21 elements (Llama's gate and up at batch 1: the SiLU-gated product reads both halves through
// strides; at batch 8 the merged GEMM measured slower). Returns true when it changed the graph
// (src/passes/merge_parallel_gemms.cpp).
bool merge_parallel_gemms(Graph& g, bool only_into_gemm_views, bool pointwise_readers = false);

// A view node (Reshape, Squeeze, Unsqueeze, Transpose, one-index Gather, Slice, scalar Mul) read
// by several view chains that all end in MatMul operands is cloned once per reader, so each chain
// can become its GEMM's operand strides (ViT's q/k/v split of the packed in-projection); returns
// true when it changed the graph (src/passes/split_shared_views.cpp).
bool split_shared_views(Graph& g);

// A Transpose that keeps the last axis, read only by a MatMul with a 2-D constant weight (and its
// row-wise bias Add) whose result only view nodes read, moves after them (rows permuted before
// or after a row-wise product are the same); ViT's x [B,S,E] -> [S,B,E] before its in-projection
// then joins the attention's q/k/v views. Returns true when it changed the graph
// (src/passes/sink_row_transposes.cpp).
bool sink_row_transposes(Graph& g);

// A Conv whose strides equal its kernel (no padding, dilation or groups; ViT's patch embedding)
// becomes one transpose of the input into patches and a MatMul with the weight as [C*kh*kw, OC]
// (plus the bias); ViT's Reshape and Transpose of its output become one Reshape. Returns true
// when it changed the graph (src/passes/patchify_convs.cpp).
bool patchify_convs(Graph& g);

// Each inference BatchNormalization with constant scale, bias, mean and variance becomes Mul and
// Add with per-channel [C, 1, ...] constants (x * g + h), which fuse with their neighbours.
// Returns true when it changed the graph (src/passes/decompose_batchnorm.cpp).
bool decompose_batchnorm(Graph& g);

// Each Pad whose pads are all zero is dropped, its readers reading its input (an Identity where
// it writes a graph output). Returns true when it changed the graph (src/passes/identity_pads.cpp).
bool identity_pads(Graph& g);

// Each Identity that writes no graph output is dropped, its readers reading its input (a shared
// weight's Identities: one constant, packed once). Returns true when it changed the graph
// (src/passes/forward_identities.cpp).
bool forward_identities(Graph& g);

// Each Pow whose exponent is the constant 2 becomes Mul(x, x) (the same correctly rounded
// square, no powf call in generated code). Returns true when it changed the graph
// (src/passes/square_pows.cpp).
bool square_pows(Graph& g);

// Channel shuffles (Reshape to [N, g, C/g, H, W], Transpose [0, 2, 1, 3, 4], Reshape back)
// become channel Gathers, and Slices of channels of such a Gather Gathers of their indices.
// Returns true when it changed the graph (src/passes/channel_shuffles.cpp).
bool channel_shuffles(Graph& g);

// Hugging Face's rotary embedding, x * cos + Concat(-x[..., D/2:], x[..., :D/2]) * sin, as
// pointwise nodes over x viewed as [..., 2, D/2] (a Where swaps the halves), which a target with
// lazy views fuses into one kernel. Returns true when it changed the graph
// (src/passes/split_rotary_halves.cpp).
bool split_rotary_halves(Graph& g);

// Rewrites float32 Sum, Min and Max nodes with more than 8 inputs into chains of nodes with at most
// 8 inputs, folding in the same order; returns true when it changed the graph. Runs on a
// shape-inferred graph (src/passes/split_variadic.cpp).
bool split_variadic(Graph& g);

// What convert_precision did: float32 values now stored in 16 bits, values kept in float32 and
// (a few of) the reasons.
struct PrecisionReport {
  int converted = 0;
  int kept = 0;
  std::vector<std::string> kept_why;
};

// `--precision bf16|fp16` on a float32 model: stores weights and activations in `to` (bf16 or
// f16), keeping float32 where ONNX or an integer result needs it, with the model's float32
// inputs and outputs cast at the boundary; re-infers the graph's types
// (src/passes/convert_precision.cpp).
PrecisionReport convert_precision(Graph& g, DType to, size_t fold_budget_bytes);

// Prints the graph to stderr after a pass when BRRR_DEBUG >= 2 (the pipeline calls it after
// each pass).
void debug_dump(const Graph& g, const char* after_pass);
int debug_level();

}  // namespace brrr
