// One file per subcommand; each registers itself on the app and runs when selected.
// Exit codes: 0 success, 1 a --check mismatch, 2 a user or model error (one line on stderr).
#pragma once
#include <CLI/CLI.hpp>

namespace brrr::cli {

// Thrown by a subcommand to end with a given exit code after it printed its own report
// (e.g. 1 for a --check mismatch).
struct ExitWith {
  int code;
};

void setup_run(CLI::App& app);     // run.cpp
void setup_bench(CLI::App& app);   // bench.cpp
void setup_probe(CLI::App& app);   // probe.cpp
void setup_doctor(CLI::App& app);  // doctor.cpp

}  // namespace brrr::cli
