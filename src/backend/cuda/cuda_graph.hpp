// Capture a sequence of launches on a stream into a CUDA graph, then replay it with one launch:
// the remedy for overhead-bound plans (DESIGN.md section 4). Header free of CUDA includes.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

#include "backend/cuda/cuda_runtime.hpp"

struct CUgraph_st;
struct CUgraphExec_st;

namespace brrr::cuda {

class CudaGraph {
 public:
  // Calls `record()` with `s` in capture mode (thread-local: other threads are unaffected) and
  // instantiates the result. Failures (a synchronizing call or allocation inside the capture, a
  // launch error, record() throwing) end the capture, leave the stream usable and throw
  // brrr::Error "CUDA graph capture of <what> failed: <reason>".
  static CudaGraph capture(const Stream& s, const std::function<void()>& record,
                           const std::string& what);
  CudaGraph(CudaGraph&& o) noexcept;
  CudaGraph& operator=(CudaGraph&& o) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph();

  void replay(const Stream& s) const;  // enqueues the whole graph
  std::size_t num_nodes() const { return nodes_; }

 private:
  CudaGraph() = default;
  void reset() noexcept;
  CUgraph_st* graph_ = nullptr;
  CUgraphExec_st* exec_ = nullptr;
  std::size_t nodes_ = 0;
  std::string what_;
};

}  // namespace brrr::cuda
