// One executor interface for every backend. An executor is built from the compile pipeline's
// graph and plan (it may rewrite plan kernels it runs on the host: their outputs then list every
// node output) and only executes: run, profile, time. Session owns one and forwards to it.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "brrr/profile.hpp"
#include "brrr/session.hpp"
#include "plan/kernel_ir.hpp"

namespace brrr {

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs the plan; outputs in graph output order (Session::run).
  virtual std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) = 0;
  // Runs the plan on caller-owned device memory (Session::run_device); only a GPU executor can.
  virtual void run_device(const std::map<std::string, DeviceTensor>& /*inputs*/,
                          const std::vector<DeviceTensor>& /*outputs*/) {
    fail("run_device: this session runs on the host; device buffers need backend cuda");
  }
  // Per-kernel median times after a warm-up (Session::profile).
  virtual RunProfile profile(const std::map<std::string, Tensor>& inputs, int reps) = 0;
  // Whole-plan run times, `between` called before each, outside the timed region.
  virtual std::vector<double> time_runs(const std::map<std::string, Tensor>& inputs, int reps,
                                        const std::function<void()>& between) = 0;
  // Per-run times of `runs` whole-plan runs enqueued back to back between two events, one wait at
  // the end, once per round (Session::time_queued_runs); empty where every run waits for itself
  // anyway (the CPU).
  virtual std::vector<double> time_queued_runs(const std::map<std::string, Tensor>& /*inputs*/,
                                               int /*runs*/, int /*rounds*/) {
    return {};
  }
  // The plan's kernels with each library kernel timed alone (Session::time_library_kernels_alone);
  // empty where the backend cannot.
  virtual std::vector<KernelRecord> time_library_kernels_alone(
      const std::map<std::string, Tensor>& /*inputs*/, int /*reps*/) {
    return {};
  }
  // The plan's kernels, each timed alone in plan order where the backend can (the CPU), else its
  // library kernels only (Session::time_kernels_alone).
  virtual std::vector<KernelRecord> time_kernels_alone(const std::map<std::string, Tensor>& inputs,
                                                       int reps) {
    return time_library_kernels_alone(inputs, reps);
  }
  // The plan's kernels with each library kernel repeated alone, back to back, its operands
  // cache-hot (Session::time_library_kernels_hot); empty where the backend cannot.
  virtual std::vector<KernelRecord> time_library_kernels_hot(
      const std::map<std::string, Tensor>& /*inputs*/, int /*reps*/) {
    return {};
  }
  // What plan_summary prints after the plan and its memory line: the backend's own lines.
  virtual std::string summary() const = 0;
  virtual MemoryStats memory() const = 0;
  // CPU only (0 elsewhere): threads, distinct generated functions, translation units.
  virtual int threads() const { return 0; }
  virtual int num_generated_functions() const { return 0; }
  virtual int num_translation_units() const { return 0; }
};

namespace cpu {
// src/backend/cpu/executor.cpp. `g` and `plan` must outlive the executor.
std::unique_ptr<Executor> make_cpu_executor(const Graph& g, plan::Plan& plan,
                                            const SessionOptions& opts);
}  // namespace cpu

namespace cuda {
// src/backend/cuda/make_executor.cpp; in a build without CUDA, src/backend/no_cuda.cpp, which
// fails with a one-line error. `g` and `plan` must outlive the executor.
std::unique_ptr<Executor> make_cuda_executor(const Graph& g, plan::Plan& plan,
                                             const SessionOptions& opts);
}  // namespace cuda

}  // namespace brrr
