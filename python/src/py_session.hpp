// brrr.Session: a brrr::Session (backend "cpu" or "cuda", the compiled static plan) or the
// reference executor on the prepared graph (backend "reference"), behind one Python class.
#pragma once
#include <nanobind/nanobind.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "brrr/session.hpp"

namespace brrr::py {

namespace nb = nanobind;

struct TensorInfo {
  std::string name;
  std::string dtype;  // numpy's name: "float32", "int64", "bool", ...
  std::vector<int64_t> shape;
};

struct PySessionOptions {
  std::string backend = "cpu";
  std::string precision = "fp32";
  std::map<std::string, Shape> shapes;
  int threads = 0;
  std::optional<bool> fusion, graphs;  // unset: the default (BRRR_DISABLE_* switches)
};

class PySession {
 public:
  PySession(const std::string& path, const PySessionOptions& o);

  // A dict name -> array in, a dict name -> numpy array out (graph output order). The GIL is
  // released while the plan runs; one run at a time per session (other threads wait).
  // Arrays in CUDA memory (or `outputs` given) take the device path: run_device.
  nb::dict run(nb::handle inputs, nb::handle outputs);
  // Per-kernel median times over `reps` runs after a warm-up (GIL released).
  RunProfile profile(nb::handle inputs, int reps);

  std::vector<TensorInfo> inputs() const;
  std::vector<TensorInfo> outputs() const;
  const std::string& backend() const { return backend_; }
  int threads() const { return session_ ? session_->threads() : 0; }
  std::string plan_summary() const;
  const std::string& path() const { return path_; }
  const Graph& graph() const { return session_ ? session_->graph() : reference_; }

 private:
  // Host views of the caller's arrays, checked against the model's inputs by name; `keep` holds
  // the arrays (and any contiguous copies nanobind made) until the run is over.
  std::vector<std::pair<std::string, InArray>> arrays(nb::handle inputs) const;
  std::map<std::string, Tensor> bind(nb::handle inputs, std::vector<InArray>& keep) const;
  // CUDA inputs in, the caller's CUDA output arrays (or ones brrr._empty_device_outputs makes
  // with the inputs' framework) written in place and returned: Session::run_device.
  nb::dict run_device(const std::vector<std::pair<std::string, InArray>>& in, nb::handle inputs,
                      nb::handle outputs);

  std::string path_, backend_;
  std::optional<Session> session_;
  Graph reference_;  // backend "reference": the graph after the pipeline's graph passes
  std::mutex run_mutex_;
};

}  // namespace brrr::py
