// Small helpers for passes that read and edit a graph.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "brrr/graph.hpp"

namespace brrr {

// `base`, or `base_K` for the first K that names no value of g yet.
std::string fresh_name(const Graph& g, const std::string& base);

// Sets every value's producer from g.nodes (after a pass reorders, adds or drops nodes).
void relink_producers(Graph& g);

// The nodes reading each value (by value id; a node reading a value twice is listed twice).
std::vector<std::vector<int>> value_readers(const Graph& g);

// A new typed constant value of g named after `base` (fresh_name) holding t; returns its id.
int add_constant(Graph& g, const std::string& base, Tensor t);
// The same for a 1-D int64 constant (a Reshape's shape, a Slice's bounds).
int int64_constant(Graph& g, const std::string& base, std::vector<int64_t> v);

// Whether value v is one of g's outputs.
bool is_graph_output(const Graph& g, int v);

// A node for a pass to add: `op` named `name` reading `inputs`, writing value `out` (or a new
// value named after it), with `attrs`; type it with type_node.
Node make_node(Graph& g, const char* op, const std::string& name, std::vector<int> inputs,
               int out = -1, std::map<std::string, AttrValue> attrs = {});

// Rebuilds g's node list: node k dropped where drop[k], else replaced by replace[k] where that
// is not empty (its nodes in order), else kept; then relinks the producers.
void splice_nodes(Graph& g, std::vector<std::vector<Node>>& replace, const std::vector<bool>& drop);

// Every node input that is a value v with same[v] >= 0 reads same[v] instead (one pass over the
// nodes; same[] maps a dropped node's output to the value it passes on, chains already resolved).
void read_through(Graph& g, const std::vector<int>& same);

// Resolves a node a pass made (its op's definition) and types its outputs by the op's shape
// inference; asserts (naming `pass`) that the op exists and types every output.
void type_node(Graph& g, Node& n, const char* pass);

// A constant int64 / int32 input's values, or nullopt when input i of n is absent or not
// constant.
std::optional<std::vector<int64_t>> const_ints(const Graph& g, const Node& n, size_t i);

// Slice node n as a view: per input axis the first element taken and the step ("" when it can
// be one, else why not), by ONNX's rules; the element counts are its output's shape.
std::string slice_view(const Graph& g, const Node& n, std::vector<int64_t>* start,
                       std::vector<int64_t>* step);

}  // namespace brrr
