#include "py_session.hpp"

#include <fmt/format.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>

#include "brrr/error.hpp"
#include "brrr/onnx.hpp"
#include "brrr/reference.hpp"
#include "brrr/reference_profile.hpp"
#include "passes/pipeline.hpp"

namespace brrr::py {

namespace {

// The checks `brrr run` makes on the same choices, named as Python arguments.
void check_options(const PySessionOptions& o) {
  BRRR_CHECK(o.backend == "cpu" || o.backend == "cuda" || o.backend == "reference",
             "unknown backend '{}' (use cpu, cuda or reference)", o.backend);
  BRRR_CHECK(o.precision == "fp32" || o.precision == "tf32" || o.precision == "bf16" ||
                 o.precision == "fp16",
             "unknown precision '{}' (use fp32, tf32, bf16 or fp16)", o.precision);
  if (o.backend == "cpu") {
    if (std::string why = plan::cpu_precision_refusal(o.precision); !why.empty())
      fail("precision='{}' on backend='cpu': {}", o.precision, why);
  } else if (o.backend != "cuda" && o.precision != "fp32") {
    fail("precision='{}': backend='{}' computes in float32 only", o.precision, o.backend);
  }
  if (o.backend != "cpu" && o.threads > 0)
    fail("threads= sets the CPU backend's threads; backend='{}' does not use it", o.backend);
  BRRR_CHECK(o.threads >= 0, "threads={} is negative (0: the default)", o.threads);
}

std::string input_names(const Graph& g) {
  std::vector<std::string> names;
  for (int id : g.inputs) names.push_back(g.value(id).name);
  return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "));
}

TensorInfo info(const Value& v) {
  return {v.name, std::string(dtype_name(v.dtype)), std::vector<int64_t>(v.shape)};
}

}  // namespace

PySession::PySession(const std::string& path, const PySessionOptions& o)
    : path_(path), backend_(o.backend) {
  check_options(o);
  Graph loaded = load_onnx(path);
  if (o.backend == "reference") {
    CompileOptions co;
    co.input_shapes = o.shapes;
    reference_ = compile(std::move(loaded), plan::Target::reference(), co).graph;
    return;
  }
  SessionOptions so;
  so.backend = o.backend;
  so.precision = o.precision;
  so.input_shapes = o.shapes;
  so.threads = o.threads;
  if (o.fusion) so.fusion = *o.fusion ? 1 : 0;
  if (o.graphs) so.graphs = *o.graphs ? 1 : 0;
  session_.emplace(std::move(loaded), so);
}

std::vector<std::pair<std::string, InArray>> PySession::arrays(nb::handle inputs) const {
  if (!nb::isinstance<nb::dict>(inputs))
    fail("inputs: expected a dict of input name -> array, got {}",
         nb::type_name(inputs.type()).c_str());
  const Graph& g = graph();
  std::vector<std::pair<std::string, InArray>> v;
  for (auto [key, value] : nb::borrow<nb::dict>(inputs)) {
    if (!nb::isinstance<nb::str>(key))
      fail("inputs: keys are input names (str), got {}", nb::type_name(key.type()).c_str());
    std::string name = nb::cast<std::string>(key);
    int id = g.find_value(name);
    if (id < 0 || std::find(g.inputs.begin(), g.inputs.end(), id) == g.inputs.end())
      fail("'{}' is not an input of the model (its inputs: {})", name, input_names(g));
    v.emplace_back(name, to_array(value, name));
  }
  return v;  // missing names, dtypes and shapes: the executor's own checks (Graph::bound_input)
}

std::map<std::string, Tensor> PySession::bind(nb::handle inputs,
                                              std::vector<InArray>& keep) const {
  std::map<std::string, Tensor> in;
  for (auto& [name, a] : arrays(inputs)) {
    if (a.device_type() != nb::device::cpu::value)
      fail("input '{}' is in device memory (DLPack device type {}); profile() takes host arrays",
           name, a.device_type());
    in.emplace(name, host_view(a, name));
    keep.push_back(std::move(a));
  }
  return in;
}

nb::dict PySession::run(nb::handle inputs, nb::handle outputs) {
  std::vector<std::pair<std::string, InArray>> given = arrays(inputs);
  bool on_device = !outputs.is_none();
  for (const auto& [name, a] : given) on_device |= a.device_type() != nb::device::cpu::value;
  if (on_device) return run_device(given, inputs, outputs);
  std::map<std::string, Tensor> in;
  for (const auto& [name, a] : given) in.emplace(name, host_view(a, name));
  std::vector<Tensor> outs;
  {
    nb::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> one_run(run_mutex_);
    outs = session_ ? session_->run(in) : run_reference(reference_, in);
  }
  const Graph& g = graph();
  nb::dict result;
  for (size_t k = 0; k < outs.size(); ++k)
    result[g.value(g.outputs[k]).name.c_str()] = to_numpy(outs[k]);
  return result;
}

nb::dict PySession::run_device(const std::vector<std::pair<std::string, InArray>>& in,
                               nb::handle inputs, nb::handle outputs) {
  const int cuda = nb::device::cuda::value;
  for (const auto& [name, a] : in) {
    if (a.device_type() != cuda)
      fail("input '{}' is {} (DLPack device type {}); with CUDA inputs or outputs=, every input "
           "must be a CUDA array", name, a.device_type() == 1 ? "a host array" : "not in CUDA memory",
           a.device_type());
    if (backend_ != "cuda")
      fail("input '{}' is in CUDA memory; backend='{}' takes host arrays (use backend='cuda', or "
           "copy it to the host)", name, backend_);
    if (a.device_id() != 0)
      fail("input '{}' is on cuda:{}; the session runs on cuda:0", name, a.device_id());
  }
  const Graph& g = graph();
  nb::object outs = nb::borrow(outputs);
  if (outs.is_none()) {
    BRRR_CHECK(!in.empty(), "outputs=None and no CUDA input to allocate the outputs like");
    nb::list infos;
    for (const TensorInfo& t : this->outputs()) infos.append(nb::cast(t));
    outs = nb::module_::import_("brrr").attr("_empty_device_outputs")(infos, inputs);
  }
  if (!nb::isinstance<nb::dict>(outs))
    fail("outputs: expected a dict of output name -> CUDA array, got {}",
         nb::type_name(outs.type()).c_str());
  nb::dict out_dict = nb::borrow<nb::dict>(outs);
  std::map<std::string, DeviceTensor> dev_in;
  for (const auto& [name, a] : in)
    dev_in[name] = {const_cast<void*>(a.data()), array_dtype(a, name), array_shape(a)};
  std::vector<DeviceTensor> dev_out;
  std::vector<nb::ndarray<nb::c_contig>> keep;
  nb::dict result;
  for (int id : g.outputs) {
    const std::string& name = g.value(id).name;
    if (!out_dict.contains(name.c_str())) fail("outputs: no buffer for model output '{}'", name);
    nb::object o = out_dict[name.c_str()];
    nb::ndarray<nb::c_contig> a;
    // No conversion: a contiguous copy of the caller's array would take the results, not it.
    if (!nb::try_cast(o, a, false) || a.device_type() != cuda || a.device_id() != 0)
      fail("outputs: '{}' must be a writable contiguous array in CUDA memory on cuda:0, got {}",
           name, nb::type_name(o.type()).c_str());
    InArray view(a);
    dev_out.push_back({a.data(), array_dtype(view, name, "output"), array_shape(view)});
    keep.push_back(std::move(a));
    result[name.c_str()] = o;
  }
  if (out_dict.size() != g.outputs.size())
    fail("outputs: {} buffer(s) for the model's {} output(s)", out_dict.size(), g.outputs.size());
  {
    nb::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> one_run(run_mutex_);
    session_->run_device(dev_in, dev_out);
  }
  return result;
}

RunProfile PySession::profile(nb::handle inputs, int reps) {
  BRRR_CHECK(reps >= 1, "reps={} must be at least 1", reps);
  std::vector<InArray> keep;
  std::map<std::string, Tensor> in = bind(inputs, keep);
  nb::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> one_run(run_mutex_);
  return session_ ? session_->profile(in, reps) : profile_reference(reference_, in, reps);
}

std::vector<TensorInfo> PySession::inputs() const {
  std::vector<TensorInfo> v;
  for (int id : graph().inputs) v.push_back(info(graph().value(id)));
  return v;
}

std::vector<TensorInfo> PySession::outputs() const {
  std::vector<TensorInfo> v;
  for (int id : graph().outputs) v.push_back(info(graph().value(id)));
  return v;
}

std::string PySession::plan_summary() const {
  return session_ ? session_->plan_summary()
                  : fmt::format("reference executor: {} node(s), one reference kernel each\n",
                                reference_.nodes.size());
}

}  // namespace brrr::py
