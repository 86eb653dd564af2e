// brrr.doctor: what `brrr doctor` does after its option checks, on a session the caller made:
// profile, the machine's ceilings (cached, else probed), diagnose. The report leaves as the JSON
// writer's text (report_json, the `--json` file's keys) and, when asked, the HTML page.
#include "py_doctor.hpp"

#include <nanobind/stl/string.h>

#include "brrr/doctor.hpp"
#include "core/file_io.hpp"

namespace brrr::py {

std::string doctor_json(PySession& s, nb::handle inputs, int reps, int top, bool refresh,
                        const std::string& html) {
  BRRR_CHECK(top >= 1, "top={} must be at least 1", top);
  if (!html.empty()) check_output_path(html, "html=");  // before minutes of profiling
  // The reference executor runs on the CPU: it is judged against the CPU ceilings.
  const std::string ceilings_backend = s.backend() == "cuda" ? "cuda" : "cpu";
  RunProfile prof = s.profile(inputs, reps);
  nb::gil_scoped_release unlocked;
  doctor::Ceilings c = doctor::load_or_probe(ceilings_backend, refresh, true);
  doctor::DoctorOptions opts;
  opts.model = s.path();
  opts.top = top;
  doctor::Report r = doctor::diagnose(prof, c, opts);
  if (!html.empty()) write_file(html, doctor::render_html(r));
  return doctor::report_json(r).dump();
}

std::string profile_json(PySession& s, nb::handle inputs, int reps) {
  return doctor::profile_to_json(s.profile(inputs, reps)).dump();
}

}  // namespace brrr::py
