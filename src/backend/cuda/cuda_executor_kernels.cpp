// Generated-kernel and copy steps: the plan's Fused kernels, launched from the one NVRTC module
// with the grid and arguments the CUDA emitter chose, and Copy kernels as device copies.
#include <fmt/format.h>

#include "backend/cuda/cuda_executor_impl.hpp"

namespace brrr::cuda {

void CudaExecutor::Impl::setup_kernel(size_t i, LaunchStep& s) {
  const CudaLaunch& L = src.launches[i];
  s.fn = module->function(L.symbol);
  s.grid = L.grid;
  s.block = L.block;
  for (int v : L.args) s.argv.push_back(slot_of(v, "kernel argument"));
  for (DevPtr& p : s.argv) s.argp.push_back(&p);
}

void CudaExecutor::Impl::setup_copy(const plan::Kernel& k, CopyStep& s) {
  s.src = slot[size_t(k.inputs.at(0))];
  s.dst = slot[size_t(k.outputs.at(0))];
  const Value& v = g.value(k.outputs.at(0));
  s.bytes = v.nbytes();
}

void CudaExecutor::Impl::exec_copy(const CopyStep& s, const std::string& what) {
  if (s.bytes && s.src != s.dst) copy_d2d(s.dst, s.src, s.bytes, stream, what);
}

std::string CudaExecutor::Impl::kernel_summary(size_t i) const {
  const LaunchStep& s = std::get<LaunchStep>(steps[i].body);
  return fmt::format("  {:<24} {} grid {} block {}x{}\n", plan.kernels[i].name,
                     src.launches[i].shape, s.grid.x, s.block.x, s.block.y);
}

}  // namespace brrr::cuda
