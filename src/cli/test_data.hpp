// Model-zoo test data folders (test_data_set_N/input_K.pb, output_K.pb): listing the files and
// matching them to a model's inputs and outputs. Shared by `brrr run` and the conformance runner.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "brrr/graph.hpp"

namespace brrr::cli {

// Paths of DIR/<prefix>_0.pb, <prefix>_1.pb, ... in order; fails on a gap in the numbering.
std::vector<std::string> list_pb_files(const std::string& dir, const std::string& prefix);

// Loads input files and assigns each to a graph input: by the TensorProto's name when it names a
// graph input, else by position. Fails when an input gets no data or two files claim one input.
std::map<std::string, Tensor> load_inputs(const Graph& g, const std::vector<std::string>& files);

// Loads output files and orders them like g.outputs (by name when it matches, else by position).
// Entry i is undefined when no file gives output i.
std::vector<Tensor> load_expected_outputs(const Graph& g, const std::vector<std::string>& files);

}  // namespace brrr::cli
