#include "core/cleanup.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace brrr {

namespace {

constexpr int kSlots = 256, kPathMax = 4096;

// A slot is free (0), being written (1) or live (2); the handler reads live slots only.
struct PathSlot {
  std::atomic<int> state{0};
  char path[kPathMax];
};
PathSlot g_paths[kSlots];
std::atomic<pid_t> g_groups[kSlots];

const int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[3];

void on_fatal_signal(int sig) {
  int saved = errno;
  for (auto& g : g_groups)
    if (pid_t p = g.load(); p > 0) ::kill(-p, SIGKILL);
  for (auto& s : g_paths)
    if (s.state.load() == 2) ::unlink(s.path);
  for (int i = 0; i < 3; ++i)
    if (kSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
  errno = saved;
  ::raise(sig);  // now with the previous disposition (by default: terminate)
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < 3; ++i) {
      struct sigaction sa {};
      sa.sa_handler = on_fatal_signal;
      sigemptyset(&sa.sa_mask);
      ::sigaction(kSignals[i], nullptr, &g_previous[i]);
      if (g_previous[i].sa_handler == SIG_IGN) continue;  // e.g. nohup: keep ignoring
      ::sigaction(kSignals[i], &sa, nullptr);
    }
  });
}

}  // namespace

TempFileGuard::TempFileGuard(const std::string& path) {
  install_once();
  if (path.size() >= kPathMax) return;
  for (int i = 0; i < kSlots; ++i) {
    int free = 0;
    if (!g_paths[i].state.compare_exchange_strong(free, 1)) continue;
    std::memcpy(g_paths[i].path, path.c_str(), path.size() + 1);
    g_paths[i].state.store(2);
    slot_ = i;
    return;
  }
}

TempFileGuard::~TempFileGuard() {
  if (slot_ >= 0) g_paths[slot_].state.store(0);
}

ChildGroupGuard::ChildGroupGuard(pid_t pgid) {
  install_once();
  for (int i = 0; i < kSlots; ++i) {
    pid_t free = 0;
    if (g_groups[i].compare_exchange_strong(free, pgid)) {
      slot_ = i;
      return;
    }
  }
}

ChildGroupGuard::~ChildGroupGuard() {
  if (slot_ >= 0) g_groups[slot_].store(0);
}

}  // namespace brrr
