// Replays every input the fuzzer ever crashed on (tests/fuzz/regressions): each must now load and
// run, or fail with a brrr::Error. Under the sanitizer build this also checks memory safety.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../fuzz/fuzz_pipeline.hpp"

TEST(FuzzRegressions, EverySavedCrashIsHandled) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(BRRR_TEST_DATA).parent_path() / "fuzz" / "regressions";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(e.path().filename().string());
    brrr_fuzz::run_one(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++n;
  }
  EXPECT_GT(n, 0) << "no regression inputs found in " << dir;
}
