// A build without the CUDA toolkit (CMakeLists.txt adds this file only then): the CUDA backend's
// entry point says so in one line.
#include "backend/executor.hpp"
#include "brrr/error.hpp"

namespace brrr::cuda {

std::unique_ptr<Executor> make_cuda_executor(const Graph&, plan::Plan&, const SessionOptions&) {
  fail("backend 'cuda' is not available: brrr was built without the CUDA toolkit");
}

}  // namespace brrr::cuda
