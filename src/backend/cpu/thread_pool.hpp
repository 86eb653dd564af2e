// brrr's CPU thread pool: a fork-join parallel_for on the OpenMP team that oneDNN's kernels run
// on. A second pool of its own threads would share the cores with libgomp's, which spin for
// milliseconds after each oneDNN kernel: its woken worker then rarely got a core before the
// caller had run every chunk itself (squeezenet's first MaxPool on 2 cores: 0.15 ms on one
// thread, 0.17 ms on two). Work is split into more chunks than threads and claimed with an atomic
// counter, the caller included, so a slow thread's share is small.
#pragma once
#include <atomic>
#include <cstdint>
#include <type_traits>

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
  // `threads` counts the caller.
  explicit ThreadPool(int threads);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }
  // Calls fn(arg, lo, hi) over disjoint ranges covering [0, n), each range exactly once; returns
  // when all have run. A call made while another is in flight (another thread, or from inside a
  // chunk or another OpenMP region) runs all of [0, n) on its own thread.
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
  // is loaded: a thread the OS deschedules holds the join for a whole time slice, milliseconds
  // against a kernel of microseconds).
  void set_serial(bool on) { serial_.store(on, std::memory_order_relaxed); }
  // Joins since the last call where the caller, its own chunks done, waited for the others longer
  // than it had worked (and over 0.2 ms): the sign of a descheduled thread. Resets the count.
  int64_t take_long_waits() { return long_waits_.exchange(0, std::memory_order_relaxed); }

 private:
  int threads_ = 1;
  std::atomic<bool> busy_{false};  // one job at a time: a second caller runs inline
  std::atomic<bool> serial_{false};
  std::atomic<int64_t> long_waits_{0};
  brrr_par api_{};
};

}  // namespace brrr::cpu
