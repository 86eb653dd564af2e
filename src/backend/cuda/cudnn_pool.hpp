// MaxPool and AveragePool on cuDNN's legacy pooling API (the Library kernel of a pool node):
// float32 NCHW / NCDHW as the graph holds it, the descriptors set once at plan build, then one
// cudnnPoolingForward per run on the executor's stream (no workspace, no allocation or host
// sync at run time: capturable into a CUDA graph). Header free of cudnn.h and CUDA includes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cudnn_conv.hpp"

namespace brrr::cuda {

// One pool in cuDNN's terms: 4-D (N,C,H,W) or 5-D (N,C,D,H,W) dims, one pad per spatial dim.
struct PoolGeometry {
  std::vector<int> x, y;                 // input and output dims
  std::vector<int> window, pad, stride;  // per spatial dim
  bool max = true;                       // else average
  bool include_pad = false;              // average: count_include_pad
};

// Maps a MaxPool / AveragePool (its descriptor; shapes from g) to cuDNN's geometry: ""
// when cuDNN computes exactly what the reference does, else why not (dtype, rank, a used Indices
// output, dilations, pads or a ceil_mode window cuDNN's symmetric padding cannot express, int32
// overflow). 1-D goes in as 2-D with a unit height. Pure (no cuDNN needed).
std::string pool_geometry(const plan::PoolDesc& d, const Graph& g, PoolGeometry* geo);

// The output dims cuDNN derives for `g` (cudnnGetPoolingNdForwardOutputDim: host-only, needs the
// loaded library but no device). Throws brrr::Error when cuDNN is missing or refuses.
std::vector<int> cudnn_pool_output_dims(const PoolGeometry& g);

class CudnnPool {
 public:
  // Descriptors and the output-shape check. Throws brrr::Error naming `what` on any failure.
  CudnnPool(const CudnnContext& ctx, const PoolGeometry& g, const std::string& what);
  ~CudnnPool();
  CudnnPool(const CudnnPool&) = delete;
  CudnnPool& operator=(const CudnnPool&) = delete;

  std::string describe() const;  // "max 3x3 stride 2x2 pad 0x0"
  // Enqueues y = pool(x) on the context's stream.
  void run(DevPtr x, DevPtr y) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brrr::cuda
