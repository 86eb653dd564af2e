// brrr bench --backend cuda: the issue-5 workloads on the GPU (bench_cuda.cpp), and the device
// name bench MODEL.onnx reports.
#pragma once
#include <string>
#include <vector>

namespace brrr::cli {

struct CudaBenchArgs {
  std::vector<std::string> items;  // workload names; empty: all
  std::string json;
  std::string precision = "fp32";
  bool no_graphs = false;
  bool list = false;
  int reps = 20;
};

void bench_cuda(const CudaBenchArgs& args);

// "NVIDIA H200 (sm_90, 132 SMs)" for device 0 (bench MODEL.onnx's device line); in a build
// without CUDA, or with no device, why not.
std::string cuda_device_name();

}  // namespace brrr::cli
