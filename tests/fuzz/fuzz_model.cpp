// libFuzzer target over the pipeline in fuzz_pipeline.hpp. Every input must end in a result or
// a brrr::Error; a crash, sanitizer report, timeout or out-of-memory is a bug.
#include <cstdlib>

#include "fuzz_pipeline.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("BRRR_MAX_TENSOR_BYTES", "67108864", 1);  // 64 MiB: asks beyond it must be clean errors
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  brrr_fuzz::run_one(data, size);
  return 0;
}
