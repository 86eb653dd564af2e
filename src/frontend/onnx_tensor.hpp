// TensorProto -> Tensor, shared by the model loader and the test-data reader.
#pragma once
#include <onnx/onnx_pb.h>

#include <filesystem>

#include "brrr/tensor.hpp"

namespace brrr {

// `model_dir` empty refuses external data. `what` names the tensor in error messages.
Tensor tensor_from_proto(const onnx::TensorProto& t, const std::filesystem::path& model_dir,
                         const std::string& what);

}  // namespace brrr
