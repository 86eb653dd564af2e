// libFuzzer target: the data-file reader (test_data_set input_N.pb) on fuzzed bytes. Every input
// ends in a tensor or a brrr::Error; a crash, sanitizer report, timeout or huge allocation is a
// bug.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "brrr/error.hpp"
#include "brrr/onnx.hpp"

namespace {
std::string path;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("BRRR_MAX_TENSOR_BYTES", "67108864", 1);  // 64 MiB: asks beyond it must be clean errors
  path = (std::filesystem::temp_directory_path() /
          ("brrr_fuzz_tensor_pb_" + std::to_string(getpid()) + ".pb"))
             .string();
  std::atexit([] { std::remove(path.c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    std::string name;
    brrr::Tensor t = brrr::load_tensor_pb(path, &name);
    (void)t.contiguous();
  } catch (const brrr::Error&) {
  }
  return 0;
}
