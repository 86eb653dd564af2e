// Shared by the hostile-model tests: fixtures, a per-process scratch folder and kernel cache, the
// compiled Session against the reference executor, and the `brrr` CLI as a child process.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "brrr/error.hpp"
#include "brrr/onnx.hpp"
#include "passes/pipeline.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"

namespace brrr::hostile {

namespace fs = std::filesystem;

inline std::string fixture(const std::string& name) {
  return std::string(BRRR_TEST_DATA) + "/hostile/" + name;
}

// One scratch folder per test process (removed at exit), so repeated Sessions share kernels.
inline fs::path scratch() {
  static const fs::path d = [] {
    fs::path p = fs::temp_directory_path() / ("brrr_hostile_" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
  }();
  return d;
}
struct ScratchCleanup {
  ~ScratchCleanup() {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("brrr_hostile_" + std::to_string(getpid())), ec);
  }
};
inline ScratchCleanup scratch_cleanup;

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline SessionOptions session_options(const std::string& dump_dir = "") {
  SessionOptions so;
  so.cache_dir = (scratch() / "cache").string();
  so.dump_dir = dump_dir;
  return so;
}

// The reference executor's outputs for a model file.
inline std::vector<Tensor> reference(const std::string& path,
                                     const std::map<std::string, Tensor>& inputs) {
  CompileOptions co;
  for (const auto& [k, v] : inputs) co.input_shapes[k] = v.shape();
  return run_reference(compile(load_onnx(path), plan::Target::reference(), co).graph, inputs);
}

// Inputs from a folder of input_N.pb files, keyed by the tensors' own names.
inline std::map<std::string, Tensor> load_inputs(const std::string& dir) {
  std::map<std::string, Tensor> m;
  for (int i = 0;; ++i) {
    fs::path p = fs::path(dir) / ("input_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    std::string name;
    Tensor t = load_tensor_pb(p.string(), &name);
    m[name] = t;
  }
  return m;
}

// Same dtype and shape; floats agree in NaN-ness, sign and value (within `ulps`).
inline void expect_same(const Tensor& got, const Tensor& want, const std::string& what,
                        int ulps = 0) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  Tensor a = got.contiguous(), b = want.contiguous();
  if (a.dtype() == DType::f32) {
    const float* p = a.data<float>();
    const float* q = b.data<float>();
    for (int64_t i = 0; i < a.numel(); ++i) {
      float x = p[i], y = q[i];
      std::string at = what + fmt::format(" [{}]: got {} want {}", i, x, y);
      EXPECT_EQ(std::isnan(x), std::isnan(y)) << at;
      if (std::isnan(x) || std::isnan(y)) continue;
      EXPECT_EQ(std::signbit(x), std::signbit(y)) << at;
      int32_t ix, iy;
      std::memcpy(&ix, &x, 4);
      std::memcpy(&iy, &y, 4);
      EXPECT_LE(std::abs(int64_t(ix) - int64_t(iy)), ulps) << at;
    }
  } else {
    ASSERT_EQ(a.nbytes(), b.nbytes());
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << what;
  }
}

// Runs the model through the compiled Session and the reference executor; compares every output.
inline void session_matches_reference(const std::string& path,
                                      const std::map<std::string, Tensor>& inputs,
                                      const SessionOptions& so, int ulps = 0) {
  Session s(path, so);
  std::vector<Tensor> got = s.run(inputs);
  std::vector<Tensor> want = reference(path, inputs);
  ASSERT_EQ(got.size(), want.size());
  const Graph& g = s.graph();
  for (size_t i = 0; i < got.size(); ++i)
    expect_same(
        got[i], want[i],
        "output " + std::to_string(i) + " '" + g.value(g.outputs[i]).name.substr(0, 40) + "'",
        ulps);
}

struct CliResult {
  int code = -1;
  std::string out, err;
};

// `env` is a prefix of VAR=value words; the kernel cache is this process's scratch cache.
inline CliResult run_cli(const std::string& args, const std::string& env = "") {
  static int n = 0;
  fs::path o = scratch() / ("cli_out_" + std::to_string(n)),
           e = scratch() / ("cli_err_" + std::to_string(n));
  ++n;
  std::string cmd = "env XDG_CACHE_HOME='" + (scratch() / "xdg").string() + "' " + env + " '" +
                    BRRR_CLI + "' " + args + " >'" + o.string() + "' 2>'" + e.string() + "'";
  int st = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(o);
  r.err = slurp(e);
  return r;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a brrr::Error";
  return "";
}

}  // namespace brrr::hostile
