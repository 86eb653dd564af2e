// How busy the rest of the machine was while brrr measured something: CPU time spent by other
// processes (and stolen by the hypervisor), in cores, over an interval. The doctor uses it to say
// when its measurements cannot be trusted (a loaded machine) instead of diagnosing noise.
#pragma once
#include <chrono>
#include <string>

namespace brrr {

// Now, in UTC, ISO 8601 to the second ("2026-12-01T15:22:07Z"): when a measurement was taken.
std::string utc_timestamp();

// Threads of other processes runnable at this instant: 0 when the kernel's count of runnable
// threads (/proc/loadavg) is this process's own, else those in state R in /proc/<pid>/task/*/stat
// of every pid but this one, kernel threads left out (at most 256). -1 when it cannot be read
// (not Linux). One sample is noisy; callers take several.
int other_runnable_threads();
// Whether a /proc/<pid>/task/<tid>/stat line ("tid (comm) R ppid ...", comm may hold spaces and
// parentheses) is a runnable thread that is not a kernel thread (kthreadd, pid 2, and its
// children: rcu_preempt and the kworkers run in bursts that hold no CPU for long).
bool runnable_user_task_line(const std::string& line);

class LoadMeter {
 public:
  LoadMeter();  // starts the interval
  // Average number of CPUs busy with work other than this process's since construction (user,
  // system, interrupts and steal time of the whole machine minus this process's own CPU time),
  // at least 0. -1 when /proc/stat cannot be read (not Linux).
  double other_busy_cpus() const;
  // CPUs the machine has online (what /proc/stat counts), at least 1.
  static int online_cpus();
  // Seconds since construction.
  double elapsed_s() const;

 private:
  struct Sample {
    double busy_s = -1;  // whole machine, seconds of CPU time
    double self_s = 0;   // this process, all threads
    std::chrono::steady_clock::time_point at;
  };
  static Sample sample();
  Sample start_;
};

}  // namespace brrr
