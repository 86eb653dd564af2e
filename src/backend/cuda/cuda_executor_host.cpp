// Host steps: a kernel with no device path (no generated kernel, no library call that fits)
// runs its nodes' reference kernels on host copies of the device buffers. Slow, synchronous and
// never captured in a CUDA graph; the executor reports each one in its summary and on stderr.
#include <map>

#include "backend/cuda/cuda_executor_impl.hpp"
#include "brrr/reference.hpp"

namespace brrr::cuda {

// The slow path: reference kernels on host copies of the device buffers.
void CudaExecutor::Impl::exec_host(size_t i) {
  const plan::Kernel& k = plan.kernels[i];
  std::map<int, Tensor> host;
  stream.synchronize("before host kernel " + k.name);
  for (int n : k.nodes) {
    const Node& node = g.nodes[size_t(n)];
    KernelCtx ctx{node, {}, {}};
    for (int v : node.inputs) {
      if (v < 0) { ctx.inputs.push_back(Tensor()); continue; }
      auto it = host.find(v);
      if (it == host.end()) {
        Tensor t = Tensor::empty(g.value(v).dtype, g.value(v).shape);
        if (g.value(v).constant.defined()) t = g.value(v).constant.contiguous();
        else copy_d2h(t.raw(), slot[size_t(v)], t.nbytes(), stream, g.value(v).name);
        it = host.emplace(v, t).first;
      }
      ctx.inputs.push_back(it->second);
    }
    stream.synchronize("device->host copy for " + k.name);
    for (int v : node.outputs) {
      if (v < 0) { ctx.outputs.push_back(Tensor()); continue; }
      host[v] = Tensor::empty(g.value(v).dtype, g.value(v).shape);
      ctx.outputs.push_back(host[v]);
    }
    call_reference(node, ctx);
    for (int v : node.outputs)
      if (v >= 0 && slot[size_t(v)]) copy_h2d(slot[size_t(v)], host[v].raw(), host[v].nbytes(), stream, g.value(v).name);
  }
  stream.synchronize("host->device copy for " + k.name);
}

}  // namespace brrr::cuda
