#include "backend/cuda/cuda_graph.hpp"

#include <utility>

#include "backend/cuda/driver_api.hpp"
#include "brrr/error.hpp"

namespace brrr::cuda {

CudaGraph CudaGraph::capture(const Stream& s, const std::function<void()>& record,
                             const std::string& what) {
  const DriverApi& d = driver();
  CudaGraph g;
  g.what_ = what;
  BRRR_CU(d.cuStreamBeginCapture(s.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
          "begin graph capture of " + what);
  std::string inner;
  try {
    record();
  } catch (const std::exception& e) {
    inner = e.what();
  }
  CUgraph graph = nullptr;
  CUresult end = d.cuStreamEndCapture(s.get(), &graph);  // always end: the stream stays usable
  if (!inner.empty() || end != CUDA_SUCCESS) {
    if (graph) d.cuGraphDestroy(graph);
    std::string why = inner;
    if (end != CUDA_SUCCESS) {
      const char* name = nullptr;
      d.cuGetErrorName(end, &name);
      if (!why.empty()) why += "; ";
      why += std::string("cuStreamEndCapture: ") + (name ? name : "?");
      if (end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        why += " (a call inside the capture was not capturable, e.g. a synchronize, an "
               "allocation or a copy to pageable host memory)";
    }
    fail("CUDA graph capture of {} failed: {}", what, why);
  }
  g.graph_ = graph;
  size_t n = 0;
  BRRR_CU(d.cuGraphGetNodes(graph, nullptr, &n), "count graph nodes of " + what);
  g.nodes_ = n;
  CUgraphExec exec = nullptr;
  BRRR_CU(d.cuGraphInstantiate(&exec, graph, 0), "instantiate graph of " + what);
  g.exec_ = exec;
  return g;
}

void CudaGraph::replay(const Stream& s) const {
  BRRR_CHECK(exec_ != nullptr, "replay of an empty CUDA graph");
  BRRR_CU(driver().cuGraphLaunch(exec_, s.get()), "replay graph of " + what_);
}

void CudaGraph::reset() noexcept {
  if (const DriverApi* d = try_driver()) {
    if (exec_) d->cuGraphExecDestroy(exec_);
    if (graph_) d->cuGraphDestroy(graph_);
  }
  exec_ = nullptr;
  graph_ = nullptr;
  nodes_ = 0;
}

CudaGraph::CudaGraph(CudaGraph&& o) noexcept
    : graph_(std::exchange(o.graph_, nullptr)),
      exec_(std::exchange(o.exec_, nullptr)),
      nodes_(std::exchange(o.nodes_, 0)),
      what_(std::move(o.what_)) {}

CudaGraph& CudaGraph::operator=(CudaGraph&& o) noexcept {
  if (this != &o) {
    reset();
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
    nodes_ = std::exchange(o.nodes_, 0);
    what_ = std::move(o.what_);
  }
  return *this;
}

CudaGraph::~CudaGraph() { reset(); }

}  // namespace brrr::cuda
