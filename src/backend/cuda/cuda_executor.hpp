// The CUDA side of a Session: a plan's fused kernels compiled into one NVRTC module, its library
// kernels on cuBLASLt, its intermediates in one device arena, the whole plan captured once as a
// CUDA graph and replayed per run. Header free of CUDA includes.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/executor.hpp"
#include "brrr/profile.hpp"
#include "brrr/session.hpp"  // MemoryStats only
#include "plan/kernel_ir.hpp"

namespace brrr::cuda {

struct CudaExecOptions {
  bool graphs = true;
  std::string cache_dir;  // "" : default NVRTC cache
  std::string dump_dir;   // "" : $BRRR_DUMP_DIR
};

// The CUDA half of the one executor interface (make_cuda_executor in make_executor.cpp builds it).
class CudaExecutor final : public Executor {
 public:
  // May rewrite plan kernels it runs on the host (their outputs then list every node output).
  CudaExecutor(const Graph& g, plan::Plan& plan, const CudaExecOptions& opts);
  ~CudaExecutor() override;
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  // Copies inputs to the device, runs the plan, copies outputs back (synchronous).
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) override;
  // Device to device copies into the arena and out of it (cuda_executor_device.cpp).
  void run_device(const std::map<std::string, DeviceTensor>& inputs,
                  const std::vector<DeviceTensor>& outputs) override;
  // Per-kernel times and the wall from the same whole-plan runs (graph replays when graphs are
  // on) through CUPTI; without it, CUDA-event medians of eager launches (timing_source says
  // which). All on device-resident inputs.
  RunProfile profile(const std::map<std::string, Tensor>& inputs, int reps) override;
  std::vector<double> time_queued_runs(const std::map<std::string, Tensor>& inputs, int runs,
                                       int rounds) override;
  std::vector<double> time_runs(const std::map<std::string, Tensor>& inputs, int reps,
                                const std::function<void()>& between) override;
  // On the device's timeline (CUPTI) each kernel's time is its own, not shared with the host or
  // other kernels: the profile's kernels are those times. Without CUPTI: none (event-timed eager
  // launches hold launch costs that would price a remedy wrongly).
  std::vector<KernelRecord> time_library_kernels_alone(const std::map<std::string, Tensor>& inputs,
                                                       int reps) override;
  std::string summary() const override;
  MemoryStats memory() const override;
  bool graph_active() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brrr::cuda
