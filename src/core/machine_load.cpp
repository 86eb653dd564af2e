#include "core/machine_load.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
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

int other_runnable_threads() {
  std::ifstream f("/proc/loadavg");
  double a1, a5, a15;
  int running = 0;
  char slash = 0;
  if (!(f >> a1 >> a5 >> a15 >> running >> slash) || slash != '/') return -1;
  // This process's threads in state R ("pid (comm) R ..."; comm may hold spaces or parentheses).
  int own = 0;
  // increment(ec), not ++: a thread that exits while it is listed must not throw here.
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::ifstream t(it->path() / "stat");
    std::string line;
    if (!std::getline(t, line)) continue;
    size_t close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'R') ++own;
  }
  return std::max(0, running - own);
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
