// See thread_pool.hpp. A job is one OpenMP parallel region whose threads claim chunks from an
// atomic counter; the region's implicit barrier is the join.
#include "backend/cpu/thread_pool.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "brrr/error.hpp"
#include "core/env.hpp"

namespace brrr::cpu {

namespace {

constexpr int kChunksPerThread = 4;

void c_run(void* pool, int64_t n, brrr_chunk_fn fn, void* arg) {
  static_cast<ThreadPool*>(pool)->parallel_for(n, fn, arg);
}

}  // namespace

int affinity_cpu_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

int resolve_thread_count(int requested) {
  constexpr int kMax = 1024;
  BRRR_CHECK(requested <= kMax, "{} threads requested; at most {} are supported", requested, kMax);
  if (requested > 0) return requested;
  if (!env::raw("BRRR_THREADS")) return affinity_cpu_count();
  return int(env::integer("BRRR_THREADS"));
}

ThreadPool::ThreadPool(int threads) : threads_(threads) {
  BRRR_ASSERT(threads >= 1, "a thread pool needs at least the calling thread");
  api_ = {&c_run, this};
}

void ThreadPool::parallel_for(int64_t n, brrr_chunk_fn fn, void* arg) {
  if (n <= 0) return;
  bool expected = false;
  // Inside a chunk (or any OpenMP region) the region is active, or busy_ is held: inline.
  if (threads_ == 1 || n == 1 || omp_in_parallel() ||
      serial_.load(std::memory_order_relaxed) ||
      !busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    fn(arg, 0, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(n, int64_t(threads_) * kChunksPerThread);
  const int64_t q = n / chunks, r = n % chunks;  // the first r chunks get one more
  std::atomic<int64_t> next{0};
  using clk = std::chrono::steady_clock;
  const auto t0 = clk::now();
  auto t1 = t0;
#pragma omp parallel num_threads(threads_)
  {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      const int64_t lo = c * q + std::min(c, r), hi = lo + q + (c < r);
      fn(arg, lo, hi);
    }
    if (omp_get_thread_num() == 0) t1 = clk::now();
  }
  // The barrier held the caller, its own chunks done, longer than it had worked: a thread the
  // OS descheduled.
  const auto waited = clk::now() - t1;
  if (waited > std::chrono::microseconds(200) && waited > t1 - t0)
    long_waits_.fetch_add(1, std::memory_order_relaxed);
  busy_.store(false, std::memory_order_release);
}

}  // namespace brrr::cpu
