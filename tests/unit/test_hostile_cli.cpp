// `brrr run` on models that ask for huge outputs (refused by the tensor budget before any
// allocation, exit 2), raw_data that disagrees with its dims, and cycles: one clear error line.
#include "hostile_util.hpp"
#include "sanitized.hpp"

namespace brrr::hostile {
namespace {

std::string loader_fixture(const std::string& name) {
  return std::string(BRRR_TEST_DATA) + "/loader/" + name;
}

// Exit 2, stderr is one "brrr: error:" line containing `msg`.
void expect_user_error(const CliResult& r, const std::string& msg) {
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("brrr: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(msg), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// A 2 GB address-space limit: asking the allocator for 2^40 elements would fail with something
// other than the budget message (or be killed), so the budget check must come first.
// ASan reserves terabytes of virtual memory, so a ulimit -v would stop it, not brrr.
#define BRRR_TEST_UNDER_ASAN BRRR_TEST_SANITIZED
const char* kUlimit = "sh -c 'ulimit -v 2000000 2>/dev/null; exec \"$0\" \"$@\"'";

TEST(HostileCli, HugeOutputsHitTheBudget) {
  for (const char* m :
       {"huge_constant_of_shape.onnx", "huge_expand.onnx", "huge_range.onnx", "huge_tile.onnx"}) {
    SCOPED_TRACE(m);
    for (const char* backend : {"cpu", "reference"}) {
      CliResult r = run_cli(std::string("run '") + fixture(m) + "' --backend " + backend,
#if BRRR_TEST_UNDER_ASAN
                            ""
#else
                            kUlimit
#endif
      );
      expect_user_error(r, "BRRR_MAX_TENSOR_BYTES");
    }
  }
}

TEST(HostileCli, BudgetFromEnvironment) {
  // 256 MiB under the default budget runs; under a 1 MB budget it is refused.
  CliResult small = run_cli("run '" + fixture("medium_constant_of_shape.onnx") + "'",
                            "BRRR_MAX_TENSOR_BYTES=1000000");
  expect_user_error(small, "over the limit of 1000000 bytes");
}

TEST(HostileCli, RawDataLengthMismatch) {
  expect_user_error(run_cli("run '" + loader_fixture("raw_data_short.onnx") + "'"),
                    "raw_data has 10 bytes");
}

TEST(HostileCli, Cycle) {
  expect_user_error(run_cli("run '" + loader_fixture("cycle.onnx") + "'"), "cycle");
}

}  // namespace
}  // namespace brrr::hostile
