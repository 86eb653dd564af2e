// brrr bench --backend cuda: the issue-5 workloads on the GPU (bench_cuda.cpp).
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

}  // namespace brrr::cli
