// Runs a check in a forked child with a time limit and (outside sanitizer builds) an address-space
// limit, so a regression to a hang or unbounded allocation fails the test instead of the machine.
#pragma once
#include "sanitized.hpp"
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <functional>
#include <string>

namespace brrr_test {

// `check` returns "" on success or what went wrong; the result is the same, or how it died.
inline std::string run_bounded(const std::function<std::string()>& check, int seconds,
                               size_t max_bytes) {
  int fd[2];
  if (pipe(fd) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
#if !BRRR_TEST_SANITIZED
    rlimit lim{max_bytes, max_bytes};
    setrlimit(RLIMIT_AS, &lim);
#endif
    alarm(unsigned(seconds));
    std::string r;
    try {
      r = check();
    } catch (const std::bad_alloc&) {
      r = "out of memory (the address-space limit)";
    } catch (const std::exception& e) {
      r = std::string("exception: ") + e.what();
    }
    (void)!write(fd[1], r.data(), r.size());
    _exit(r.empty() ? 0 : 1);
  }
  close(fd[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) msg.append(buf, size_t(n));
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st))
    return WTERMSIG(st) == SIGALRM ? "took longer than " + std::to_string(seconds) + " s"
                                   : std::string("killed by ") + strsignal(WTERMSIG(st));
  return WEXITSTATUS(st) == 0 ? "" : (msg.empty() ? "failed" : msg);
}

}  // namespace brrr_test
