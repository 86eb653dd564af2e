// brrr._brrr: the nanobind module under the Python package (python/brrr/__init__.py adds the
// pure-Python parts: defaults for missing inputs, JSON parsing, brrr.compile).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <typeinfo>

#include "brrr/error.hpp"
#include "py_doctor.hpp"
#include "py_session.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace brrr::py {
namespace {

// The two error families of the C++ side: brrr::Error (the model, an input or an argument is
// wrong) becomes brrr.Error with the same one-line message. Any other C++ exception escaping brrr
// is a bug in brrr: brrr.InternalError, a subclass, says so. (Broken invariants abort the process
// with file and line, as in the CLI; no exception exists to map.)
// Never thrown: it gives InternalError an exception type whose translator matches nothing.
struct InternalErrorTag {
  const char* what() const { return ""; }
};

void register_errors(nb::module_& m) {
  // nb::exception registers the brrr::Error -> brrr.Error translator itself.
  nb::exception<Error> error(m, "Error");
  nb::exception<InternalErrorTag> internal(m, "InternalError", error);
  static PyObject* internal_type = internal.inc_ref().ptr();  // lives as long as the process
  // Translators run newest first: this one leaves brrr::Error to the translator above and
  // nanobind's own exceptions to nanobind.
  nb::register_exception_translator(
      [](const std::exception_ptr& p, void*) {
        try {
          std::rethrow_exception(p);
        } catch (const Error&) {
          throw;
        } catch (const nb::builtin_exception&) {
          throw;
        } catch (const nb::python_error&) {
          throw;
        } catch (const std::bad_alloc&) {
          throw;
        } catch (const std::bad_cast&) {
          throw;
        } catch (const std::exception& e) {
          std::string msg = std::string(e.what()) + " (this is a bug in brrr)";
          PyErr_SetString(internal_type, msg.c_str());
        }
      },
      nullptr);
}

void bind_tensor_info(nb::module_& m) {
  nb::class_<TensorInfo>(m, "TensorInfo", "A model input or output: name, numpy dtype name, shape.")
      .def_ro("name", &TensorInfo::name)
      .def_ro("dtype", &TensorInfo::dtype)
      .def_prop_ro("shape",
                   [](const TensorInfo& t) {
                     nb::list l;
                     for (int64_t d : t.shape) l.append(d);
                     return nb::tuple(l);
                   })
      .def("__repr__", [](const TensorInfo& t) {
        std::string s = "TensorInfo(name='" + t.name + "', dtype='" + t.dtype + "', shape=(";
        for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
        return s + (t.shape.size() == 1 ? ",))" : "))");  // Python's tuple repr
      });
}

void bind_session_class(nb::module_& m) {
  nb::class_<PySession>(m, "_Session")
      .def(
          "__init__",
          [](PySession* self, const std::string& path, const std::string& backend,
             const std::string& precision, const std::map<std::string, std::vector<int64_t>>& shapes,
             int threads, std::optional<bool> fusion, std::optional<bool> graphs) {
            PySessionOptions o;
            o.backend = backend;
            o.precision = precision;
            for (const auto& [name, s] : shapes) o.shapes[name] = Shape(s);
            o.threads = threads;
            o.fusion = fusion;
            o.graphs = graphs;
            nb::gil_scoped_release unlocked;  // compiling generated kernels takes seconds
            new (self) PySession(path, o);
          },
          "path"_a, "backend"_a = "cpu", "precision"_a = "fp32",
          "shapes"_a = std::map<std::string, std::vector<int64_t>>{}, "threads"_a = 0,
          "fusion"_a = nb::none(), "graphs"_a = nb::none())
      .def("run", &PySession::run, "inputs"_a, "outputs"_a = nb::none())
      .def("_profile_json", &profile_json, "inputs"_a, "reps"_a)
      .def_prop_ro("inputs", &PySession::inputs)
      .def_prop_ro("outputs", &PySession::outputs)
      .def_prop_ro("backend", &PySession::backend)
      .def_prop_ro("threads", &PySession::threads)
      .def_prop_ro("path", &PySession::path)
      .def("plan_summary", &PySession::plan_summary);
  m.def("_doctor_json", &doctor_json, "session"_a, "inputs"_a, "reps"_a, "top"_a, "refresh"_a,
        "html"_a);
}

}  // namespace
}  // namespace brrr::py

NB_MODULE(_brrr, m) {
  m.doc() = "brrr's C++ core (use the brrr package, not this module)";
  brrr::py::register_errors(m);
  brrr::py::bind_tensor_info(m);
  brrr::py::bind_session_class(m);
}
