// Runs a program (no shell) in its own process group with a time limit enforced here: at the
// limit, or when brrr dies of SIGINT/SIGTERM/SIGHUP (core/cleanup.hpp), the whole group is killed;
// PR_SET_PDEATHSIG kills the program if brrr itself is SIGKILLed. Safe from several threads.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace brrr {

struct ProcessResult {
  int exit_code = -1;      // the exit status; -1 if killed by a signal or not started
  bool timed_out = false;  // killed at the time limit
  int exec_errno = 0;      // nonzero: the program could not be started (ENOENT: not found)
  std::string output;      // stdout and stderr together, at most max_output bytes
};

ProcessResult run_process(const std::vector<std::string>& argv, int timeout_s,
                          size_t max_output = 1 << 20);

// Runs `work` in a forked copy of this process under the same time limit and group rules, and
// returns what it returned as `output` (exit_code 0), or the message of what it threw
// (exit_code 1); exit_code -1 when the child died or exited any other way (a crash, a
// sanitizer's report, a library's exit). For libraries that must not share brrr's heap (NVRTC, cuda/nvrtc_compiler.cpp):
// the child makes no CUDA driver call and exits with _exit.
ProcessResult run_forked(const std::function<std::string()>& work, int timeout_s,
                         size_t max_output = size_t(1) << 30);

}  // namespace brrr
