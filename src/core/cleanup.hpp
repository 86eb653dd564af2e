// What brrr must undo when SIGINT, SIGTERM or SIGHUP ends it: live compiler process groups are
// killed and registered temporary files removed (the handler does only async-signal-safe work),
// then the signal's previous disposition runs.
#pragma once
#include <sys/types.h>

#include <string>

namespace brrr {

// Removes `path` at a fatal signal while alive; removes nothing itself. Paths longer than 4095
// bytes, or more than 256 at once, are not tracked (cleanup is best effort beyond that).
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& path);
  ~TempFileGuard();
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  int slot_ = -1;
};

// Kills process group `pgid` (SIGKILL) at a fatal signal while alive.
class ChildGroupGuard {
 public:
  explicit ChildGroupGuard(pid_t pgid);
  ~ChildGroupGuard();
  ChildGroupGuard(const ChildGroupGuard&) = delete;
  ChildGroupGuard& operator=(const ChildGroupGuard&) = delete;

 private:
  int slot_ = -1;
};

}  // namespace brrr
