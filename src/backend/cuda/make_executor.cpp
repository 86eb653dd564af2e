// The CUDA backend's entry point behind the one executor interface (backend/executor.hpp).
#include "backend/cuda/cuda_executor.hpp"
#include "core/env.hpp"

namespace brrr::cuda {

std::unique_ptr<Executor> make_cuda_executor(const Graph& g, plan::Plan& plan,
                                             const SessionOptions& opts) {
  CudaExecOptions co;
  co.graphs = opts.graphs < 0 ? !env::flag("BRRR_DISABLE_GRAPHS") : opts.graphs != 0;
  co.cache_dir = opts.cache_dir;
  co.dump_dir = opts.dump_dir;
  return std::make_unique<CudaExecutor>(g, plan, co);
}

}  // namespace brrr::cuda
