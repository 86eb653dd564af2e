// Running the built brrr binary (BRRR_CLI) as a user types it: exit code, stdout and stderr.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace brrr::cli_test {

namespace fs = std::filesystem;

struct CliResult {
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// This process's scratch folder (removed at exit by the ScratchCleanup in each test file).
inline fs::path scratch() {
  fs::path d = fs::temp_directory_path() / ("brrr_cli_tests_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

struct ScratchCleanup {
  ~ScratchCleanup() {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("brrr_cli_tests_" + std::to_string(getpid())), ec);
  }
};

// `env` is a prefix of NAME=VALUE words (OMP_NUM_THREADS=1).
inline CliResult run_cli(const std::string& args, const std::string& env = "") {
  static int n = 0;
  fs::path o = scratch() / ("out_" + std::to_string(n)), e = scratch() / ("err_" + std::to_string(n));
  ++n;
  std::string cmd = "env " + env + " '" + BRRR_CLI + "' " + args + " >'" + o.string() + "' 2>'" +
                    e.string() + "'";
  int st = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(o);
  r.err = slurp(e);
  return r;
}

inline const std::string& cli_data() {
  static const std::string d = std::string(BRRR_TEST_DATA) + "/cli";
  return d;
}

inline bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Exit 2 and exactly one line on stderr, starting "brrr: error:" and containing `msg`.
inline void expect_usage_error(const CliResult& r, const std::string& msg) {
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("brrr: error: ", 0), 0u) << r.err;
  EXPECT_TRUE(has(r.err, msg)) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace brrr::cli_test
