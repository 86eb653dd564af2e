// ONNX import: model files into the Graph IR, and TensorProto files (model-zoo test data).
#pragma once
#include <string>

#include "brrr/graph.hpp"

namespace brrr {

// Loads an ONNX model (opsets 13..21, IR 7..10). External data is resolved only inside the
// model's own folder. Throws brrr::Error with a one-line reason for anything malformed.
Graph load_onnx(const std::string& path);
// Same, from bytes in memory (fuzzing, tests); external data is refused.
Graph load_onnx_bytes(const std::string& bytes, const std::string& what = "<memory>");

// A serialized onnx.TensorProto (test_data_set_N/input_K.pb); `name` receives its name field.
Tensor load_tensor_pb(const std::string& path, std::string* name = nullptr);
void save_tensor_pb(const std::string& path, const Tensor& t, const std::string& name);

}  // namespace brrr
