#include "core/machine_load.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace brrr {

std::string utc_timestamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  char buf[32] = {0};
  if (gmtime_r(&t, &tm) && std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm)) return buf;
  return "";
}

namespace {

// The state letter of a /proc task's stat line ("pid (comm) R ppid ..."; comm may hold spaces
// and parentheses) and where it stands, or npos.
size_t state_at(const std::string& line) {
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() ? close + 2 : std::string::npos;
}

bool runnable_line(const std::string& line) {
  const size_t at = state_at(line);
  return at != std::string::npos && line[at] == 'R';
}

}  // namespace

bool runnable_user_task_line(const std::string& line) {
  if (!runnable_line(line)) return false;
  const long pid = std::atol(line.c_str()), ppid = std::atol(line.c_str() + state_at(line) + 1);
  return pid != 2 && ppid != 2;
}

namespace {

bool runnable_user_task(const std::filesystem::path& stat) {
  std::ifstream t(stat);
  std::string line;
  return std::getline(t, line) && runnable_user_task_line(line);
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

int other_runnable_threads() {
  // First the kernel's count of runnable threads (/proc/loadavg) less this process's own: none
  // left is the quiet machine's answer, with no scan of every process's tasks.
  std::ifstream f("/proc/loadavg");
  double a1, a5, a15;
  int running = 0;
  char slash = 0;
  if (!(f >> a1 >> a5 >> a15 >> running >> slash) || slash != '/') return -1;
  std::error_code ec;
  int own = 0;
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::ifstream t(it->path() / "stat");
    std::string line;
    if (std::getline(t, line)) own += runnable_line(line);
  }
  if (running - own <= 0) return 0;
  // Else every other process's threads in state R, read one by one, kernel threads left out:
  // that difference alone counted kernel threads runnable for a moment (rcu_preempt) and own
  // threads that changed state between its two reads; on a quiet 2-core machine the build of the
  // Whisper encoder saw 1-3 "other" runnable threads in most samples, so half its sessions
  // started serial (295 against 150 ms a run). At most kScanCap are counted (a busy many-core
  // machine's answer is "loaded" long before).
  constexpr int kScanCap = 256;
  const std::string self = std::to_string(getpid());
  std::filesystem::directory_iterator procs("/proc", ec), end;
  if (ec) return -1;
  int others = 0;
  for (; !ec && procs != end && others < kScanCap; procs.increment(ec)) {
    const std::string pid = procs->path().filename().string();
    if (!all_digits(pid) || pid == self) continue;
    std::error_code tec;  // a process that exits while it is listed is skipped
    for (std::filesystem::directory_iterator t(procs->path() / "task", tec), tend; !tec && t != tend;
         t.increment(tec))
      others += runnable_user_task(t->path() / "stat");
  }
  return others;
}

LoadMeter::LoadMeter() : start_(sample()) {}

LoadMeter::Sample LoadMeter::sample() {
  Sample s;
  s.at = std::chrono::steady_clock::now();
  std::ifstream f("/proc/stat");
  std::string line;
  if (f && std::getline(f, line) && line.rfind("cpu ", 0) == 0) {
    // cpu user nice system idle iowait irq softirq steal guest guest_nice (clock ticks); guest
    // time is already inside user. Busy = everything but idle and iowait.
    std::istringstream in(line.substr(4));
    long long v[8] = {0};
    for (long long& x : v) in >> x;
    const double tick = double(sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100);
    if (in || in.eof()) s.busy_s = double(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tick;
  }
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    s.self_s = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  return s;
}

double LoadMeter::other_busy_cpus() const {
  Sample end = sample();
  if (start_.busy_s < 0 || end.busy_s < 0) return -1;
  double wall = std::chrono::duration<double>(end.at - start_.at).count();
  // /proc/stat advances in clock ticks (10 ms): too short an interval says nothing.
  if (wall < 0.05) return -1;
  double other = (end.busy_s - start_.busy_s) - (end.self_s - start_.self_s);
  return std::clamp(other / wall, 0.0, double(online_cpus()));
}

double LoadMeter::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_.at).count();
}

int LoadMeter::online_cpus() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : 1;
}

}  // namespace brrr
