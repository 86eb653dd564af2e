// Session::run_device on the CUDA executor: the caller's device buffers are copied device to
// device into the arena slots the plan (and its captured CUDA graph) reads, and the outputs out
// of their slots into the caller's buffers. Binding the caller's pointers in place would mean
// updating the graph on every new address; two device copies cost microseconds and keep it fixed.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_executor_impl.hpp"

namespace brrr::cuda {

namespace {

// The checks Graph::bound_input makes on host tensors, with the same messages.
void check_buffer(const Value& v, const DeviceTensor& b, const char* what) {
  if (b.dtype != v.dtype)
    fail("{} '{}' is {} but the model expects {}", what, v.name, dtype_name(b.dtype),
         dtype_name(v.dtype));
  if (b.shape != v.shape)
    fail("{} '{}' has shape {} but the model was prepared for {}", what, v.name,
         shape_str(b.shape), shape_str(v.shape));
  if (!b.data && v.nbytes() > 0) fail("{} '{}' has a null device pointer", what, v.name);
  // Kernels read and write them by elements (a misaligned access would end the CUDA context).
  if (reinterpret_cast<uintptr_t>(b.data) % dtype_size(b.dtype) != 0)
    fail("{} '{}' device pointer {} is not aligned to its {}-byte elements", what, v.name, b.data,
         dtype_size(b.dtype));
}

}  // namespace

void CudaExecutor::run_device(const std::map<std::string, DeviceTensor>& inputs,
                              const std::vector<DeviceTensor>& outputs) {
  Impl& m = *impl_;
  const Graph& g = m.g;
  for (const auto& [name, b] : inputs) {
    int id = g.find_value(name);
    if (id < 0 || std::find(g.inputs.begin(), g.inputs.end(), id) == g.inputs.end())
      fail("'{}' is not an input of the model", name);
  }
  BRRR_CHECK(outputs.size() == g.outputs.size(), "{} output buffer(s) for the model's {} output(s)",
             outputs.size(), g.outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k)
    check_buffer(g.value(g.outputs[k]), outputs[k], "output");
  m.dev.make_current();
  // The producers of the inputs may have used any stream; the session's stream is non-blocking.
  m.dev.synchronize();
  for (int id : g.inputs) {
    const Value& v = g.value(id);
    auto it = inputs.find(v.name);
    if (it == inputs.end()) {
      // An initializer that is also an input keeps its value when not given (as in run()).
      const Tensor& t = g.bound_input(id, {});
      Tensor c = t.contiguous();
      copy_h2d(m.slot[size_t(id)], c.raw(), c.nbytes(), m.stream, "input " + v.name);
      continue;
    }
    check_buffer(v, it->second, "input");
    if (v.nbytes())
      copy_d2d(m.slot[size_t(id)], DevPtr(it->second.data), v.nbytes(), m.stream,
               "input " + v.name);
  }
  m.exec_all(true);
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const Value& v = g.value(g.outputs[k]);
    if (v.nbytes() == 0) continue;
    DevPtr dst = DevPtr(outputs[k].data);
    if (const int p = m.padded_out[size_t(g.outputs[k])]; p >= 0)  // its rows padded
      m.unpad(m.steps[size_t(p)].gemm(), dst, m.stream, false);
    else if (v.producer >= 0 || !v.constant.defined())
      copy_d2d(dst, m.slot[size_t(g.outputs[k])], v.nbytes(), m.stream, "output " + v.name);
    else  // an output the compiler folded to a constant lives on the host
      copy_h2d(dst, v.constant.contiguous().raw(), v.nbytes(), m.stream, "output " + v.name);
  }
  m.fetch_gather_flag();
  m.stream.synchronize("copying outputs to the caller's device buffers");
  m.check_gather_indices();
}

}  // namespace brrr::cuda
