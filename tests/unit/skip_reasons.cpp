// After gtest's own summary, one line per distinct skip reason ("[  SKIPPED ] 75 tests like
// CudaConv.Plain: no CUDA device: ..."), so a run says why it skipped without scrolling back.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>

namespace {

class SkipReasons : public ::testing::EmptyTestEventListener {
  std::map<std::string, std::pair<int, std::string>> by_reason_;  // reason -> (count, first test)

  void OnTestEnd(const ::testing::TestInfo& t) override {
    const ::testing::TestResult* r = t.result();
    if (!r || !r->Skipped()) return;
    std::string why;
    for (int i = 0; i < r->total_part_count() && why.empty(); ++i)
      if (r->GetTestPartResult(i).skipped()) why = r->GetTestPartResult(i).message();
    for (char& c : why)
      if (c == '\n') c = ' ';
    if (why.empty()) why = "(no reason given: GTEST_SKIP() << \"why\")";
    auto& e = by_reason_[why];
    if (e.first++ == 0) e.second = std::string(t.test_suite_name()) + "." + t.name();
  }

  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    for (const auto& [why, e] : by_reason_)
      if (e.first == 1)
        std::printf("[  SKIPPED ] %s: %s\n", e.second.c_str(), why.c_str());
      else
        std::printf("[  SKIPPED ] %d tests like %s: %s\n", e.first, e.second.c_str(), why.c_str());
    std::fflush(stdout);
  }
};

// Registered before main (gtest_main) runs the tests; gtest owns and deletes the listener.
const bool kRegistered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new SkipReasons);
  return true;
}();

}  // namespace
