// See thread_pool.hpp. The claim word packs (job id, chunk count, next chunk) so that one CAS
// both claims a chunk and proves the job it belongs to is still the current one.
#include "backend/cpu/thread_pool.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "brrr/error.hpp"
#include "core/env.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BRRR_PAUSE() _mm_pause()
#else
#define BRRR_PAUSE() ((void)0)
#endif

namespace brrr::cpu {

namespace {

// How long an idle thread polls before it sleeps. Short: oneDNN's libgomp threads spin for
// milliseconds after each of its kernels, and a second spinning pool on the same cores slows both
// (2 quiet cores, brrr bench: mobilenet_v3_small 0.49-0.58 ms with 2 us against
// 0.76-0.79 ms with 50 us); a sleeping thread that is woken is also favoured by the scheduler.
constexpr auto kSpin = std::chrono::microseconds(2);
constexpr int kChunksPerThread = 4;
constexpr uint64_t kMaxChunks = 0xffff;

uint32_t job_of(uint64_t w) { return uint32_t(w >> 32); }
uint32_t count_of(uint64_t w) { return uint32_t(w >> 16) & 0xffff; }
uint32_t next_of(uint64_t w) { return uint32_t(w) & 0xffff; }

// Polls `ready` for about kSpin; true as soon as it holds.
template <class Ready>
bool spin_until(Ready ready) {
  auto end = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    if (ready()) return true;
    BRRR_PAUSE();
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= end) return ready();
  }
}

void c_run(void* pool, int64_t n, brrr_chunk_fn fn, void* arg) {
  static_cast<ThreadPool*>(pool)->parallel_for(n, fn, arg);
}

thread_local bool t_in_job = false;  // inside a chunk (nested calls run inline)

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

ThreadPool::ThreadPool(int threads) {
  BRRR_ASSERT(threads >= 1, "a thread pool needs at least the calling thread");
  api_ = {&c_run, this};
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  epoch_.fetch_add(1);
  epoch_.notify_all();
  for (std::thread& t : workers_) t.join();
}

bool ThreadPool::run_chunks(uint32_t job) {
  bool any = false;
  uint64_t w = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (job_of(w) != job || next_of(w) >= count_of(w)) return any;
    if (!claim_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel)) continue;
    // Claimed: the job cannot finish before this chunk does, so its fields stay put.
    const uint32_t c = next_of(w), chunks = count_of(w);
    const int64_t q = n_ / chunks, r = n_ % chunks;  // the first r chunks get one more
    const int64_t lo = int64_t(c) * q + std::min<int64_t>(c, r), hi = lo + q + (c < r);
    t_in_job = true;
    fn_(arg_, lo, hi);
    t_in_job = false;
    any = true;
    if (done_.fetch_add(1) + 1 == chunks && caller_sleeping_.load()) done_.notify_one();
    w = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallel_for(int64_t n, brrr_chunk_fn fn, void* arg) {
  if (n <= 0) return;
  bool expected = false;
  if (workers_.empty() || n == 1 || t_in_job || serial_.load(std::memory_order_relaxed) ||
      !busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    fn(arg, 0, n);
    return;
  }
  const uint64_t chunks =
      std::min<uint64_t>({uint64_t(n), uint64_t(threads()) * kChunksPerThread, kMaxChunks});
  n_ = n, fn_ = fn, arg_ = arg;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t job = epoch_.load(std::memory_order_relaxed) + 1;
  claim_.store(uint64_t(job) << 32 | chunks << 16, std::memory_order_release);
  epoch_.store(job);
  if (sleepers_.load() > 0) epoch_.notify_all();
  using clk = std::chrono::steady_clock;
  const auto t0 = clk::now();
  run_chunks(job);
  // Every chunk is claimed; wait for the ones workers are still running.
  if (!spin_until([&] { return done_.load(std::memory_order_acquire) == chunks; })) {
    const auto t1 = clk::now();
    caller_sleeping_.store(true);
    for (uint32_t d; (d = done_.load()) != chunks;) done_.wait(d);
    caller_sleeping_.store(false);
    const auto waited = clk::now() - t1;
    if (waited > std::chrono::microseconds(200) && waited > t1 - t0)
      long_waits_.fetch_add(1, std::memory_order_relaxed);
  }
  busy_.store(false, std::memory_order_release);
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return epoch_.load(std::memory_order_acquire) != seen; })) {
      sleepers_.fetch_add(1);
      for (uint32_t e; (e = epoch_.load()) == seen;) epoch_.wait(e);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = epoch_.load(std::memory_order_acquire);
    run_chunks(seen);
  }
}

}  // namespace brrr::cpu
