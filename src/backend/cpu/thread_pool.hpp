// brrr's CPU thread pool: a fork-join parallel_for that degrades gracefully when the cores are
// shared. Work is split into more chunks than threads and claimed with an atomic counter, the
// caller included, so a worker the OS has descheduled never holds up the join: the caller runs
// the chunks nobody claimed. Idle workers spin briefly (2 us), then sleep on a futex
// (std::atomic::wait).
#pragma once
#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

// The C ABI the generated kernels call through (they include no brrr header and link no OpenMP):
// run(pool, n, fn, arg) calls fn(arg, lo, hi) over disjoint ranges that cover [0, n).
extern "C" {
typedef void (*brrr_chunk_fn)(void* arg, int64_t lo, int64_t hi);
struct brrr_par {
  void (*run)(void* pool, int64_t n, brrr_chunk_fn fn, void* arg);
  void* pool;
};
}

namespace brrr::cpu {

// CPUs this process may run on (its affinity mask), at least 1.
int affinity_cpu_count();
// The thread count a CPU session uses: `requested` when > 0, else $BRRR_THREADS when set (an
// integer in [1, 1024], else an error), else affinity_cpu_count().
int resolve_thread_count(int requested);

class ThreadPool {
 public:
  // `threads` counts the caller: threads - 1 workers are started (none for 1).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return int(workers_.size()) + 1; }
  // Calls fn(arg, lo, hi) over disjoint ranges covering [0, n), each range exactly once; returns
  // when all have run. A call made while another is in flight (another thread, or from inside a
  // chunk) runs all of [0, n) on its own thread.
  void parallel_for(int64_t n, brrr_chunk_fn fn, void* arg);
  template <class F>
  void parallel_for(int64_t n, F&& f) {
    parallel_for(
        n,
        [](void* a, int64_t lo, int64_t hi) {
          (*static_cast<std::remove_reference_t<F>*>(a))(lo, hi);
        },
        const_cast<void*>(static_cast<const void*>(&f)));
  }
  // The table handed to generated code.
  const brrr_par* c_api() const { return &api_; }

  // Serial: every parallel_for runs on the caller alone (the session does this while the machine
  // is loaded: a worker the OS deschedules after claiming a chunk holds the join for a whole
  // time slice, milliseconds against a kernel of microseconds).
  void set_serial(bool on) { serial_.store(on, std::memory_order_relaxed); }
  // Joins since the last call where the caller, its own chunks done, waited for the workers longer
  // than it had worked (and over 0.2 ms): the sign of a descheduled worker. Resets the count.
  int64_t take_long_waits() { return long_waits_.exchange(0, std::memory_order_relaxed); }

 private:
  void worker_loop();
  bool run_chunks(uint32_t job);  // claims and runs chunks of `job`; false when none was left

  std::vector<std::thread> workers_;
  std::atomic<bool> busy_{false};  // one job at a time: a second caller runs inline
  // (job id << 32) | next unclaimed chunk: a claim is a CAS that also checks the job, so a
  // worker that wakes up late can never claim a chunk of a later job.
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> epoch_{0};  // the current job id; workers sleep on it
  std::atomic<uint32_t> done_{0};   // chunks finished of the current job; the caller sleeps on it
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> serial_{false};
  std::atomic<int64_t> long_waits_{0};
  // The job, written by the caller before it publishes claim_ and read after a successful claim.
  int64_t n_ = 0;
  uint32_t chunks_ = 0;
  brrr_chunk_fn fn_ = nullptr;
  void* arg_ = nullptr;
  brrr_par api_{};
};

}  // namespace brrr::cpu
