// The doctor's report and a session's profile as the C++ JSON writers' text; the Python layer
// parses it (brrr/__init__.py), so there is one report format.
#pragma once
#include <string>

#include "py_session.hpp"

namespace brrr::py {

// Profiles `s` on `inputs` (`reps` runs), judges it against this machine's ceilings (probed
// once and cached, or again when `refresh`) and returns report_json's text; writes the HTML page
// to `html` when it is not empty (its folder is checked before the profiling).
std::string doctor_json(PySession& s, nb::handle inputs, int reps, int top, bool refresh,
                        const std::string& html);
// Session::profile as profile_to_json's text.
std::string profile_json(PySession& s, nb::handle inputs, int reps);

}  // namespace brrr::py
