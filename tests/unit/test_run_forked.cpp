// run_forked (core/subprocess.hpp): work done in a forked child comes back whole, a throw comes
// back as its message, a crash or a hang in the child is reported, never shared with brrr.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>

#include "core/subprocess.hpp"

using namespace brrr;

TEST(RunForked, ReturnsTheChildsBytesWhole) {
  std::string big(3 << 20, '\0');  // larger than a pipe's buffer, with every byte value
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i * 131 % 251);
  ProcessResult r = run_forked([&] { return big; }, 60);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.output, big);
}

TEST(RunForked, AThrowIsItsMessage) {
  ProcessResult r = run_forked([]() -> std::string { throw std::runtime_error("no luck"); }, 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "no luck");
}

TEST(RunForked, ACrashIsNotOurs) {
  ProcessResult r = run_forked(
      []() -> std::string {
        ::raise(SIGSEGV);
        return "unreachable";
      },
      60);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_FALSE(r.timed_out);
}

TEST(RunForked, AHangIsKilledAtTheLimit) {
  ProcessResult r = run_forked(
      []() -> std::string {
        for (;;) ::pause();
      },
      1);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, -1);
}
