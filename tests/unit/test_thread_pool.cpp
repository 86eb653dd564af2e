// The CPU thread pool runs every index exactly once, for any size and thread count, whether its
// workers are awake, asleep, descheduled or stuck in a slow chunk, and with concurrent callers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "backend/cpu/thread_pool.hpp"

using brrr::cpu::ThreadPool;

namespace {

// Runs one parallel_for over [0, n) and checks that each index was covered exactly once by
// well-formed ranges.
void expect_each_once(ThreadPool& pool, int64_t n, int64_t slow_index = -1) {
  std::vector<std::atomic<int>> hits(size_t(std::max<int64_t>(n, 0)));
  std::atomic<int> bad_ranges{0};
  pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
    if (lo < 0 || hi > n || lo >= hi) bad_ranges++;
    for (int64_t i = lo; i < hi && i >= 0 && i < n; ++i) {
      if (i == slow_index) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      hits[size_t(i)]++;
    }
  });
  EXPECT_EQ(bad_ranges.load(), 0) << "n=" << n << " threads=" << pool.threads();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[size_t(i)].load(), 1) << "index " << i << " of n=" << n << " threads="
                                         << pool.threads();
}

}  // namespace

TEST(ThreadPool, EveryIndexOnceForManySizesAndThreadCounts) {
  for (int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 5, 7, 8, 9, 31, 32, 33, 63, 64, 65, 1000, 65537, 300000})
      for (int rep = 0; rep < 3; ++rep) expect_each_once(pool, n);
  }
}

TEST(ThreadPool, ChunksAreSplitAcrossMoreThanOneRange) {
  ThreadPool pool(2);
  std::atomic<int> calls{0};
  pool.parallel_for(1000, [&](int64_t, int64_t) { calls++; });
  EXPECT_GT(calls.load(), 2);  // more chunks than threads: a late worker's share is small
}

TEST(ThreadPool, SlowChunkDoesNotLoseOrRepeatWork) {
  // One chunk sleeps (a worker or the caller stuck, as when the OS deschedules it): the others
  // are claimed by whoever is free, and the join still waits for the slow one.
  for (int threads : {2, 3, 4})
    for (int64_t slow : {int64_t(0), int64_t(500), int64_t(999)}) {
      ThreadPool pool(threads);
      expect_each_once(pool, 1000, slow);
    }
}

TEST(ThreadPool, WorkersThatFellAsleepWakeForTheNextJob) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 20; ++rep) {
    // Longer than the pool's spin: the workers are asleep on the futex when the next job comes.
    std::this_thread::sleep_for(std::chrono::microseconds(rep % 2 ? 300 : 5));
    expect_each_once(pool, 257);
  }
}

TEST(ThreadPool, ManyJobsBackToBack) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 20000; ++rep)
    pool.parallel_for(rep % 13 + 1, [&](int64_t lo, int64_t hi) { sum += hi - lo; });
  int64_t want = 0;
  for (int rep = 0; rep < 20000; ++rep) want += rep % 13 + 1;
  EXPECT_EQ(sum.load(), want);
}

TEST(ThreadPool, ConcurrentCallersAndNestedCallsRunEverything) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<std::atomic<int>> hits(777);
        pool.parallel_for(777, [&](int64_t lo, int64_t hi) {
          // A nested call runs inline on this thread and must cover its range too.
          pool.parallel_for(hi - lo, [&](int64_t a, int64_t b) {
            for (int64_t i = lo + a; i < lo + b; ++i) hits[size_t(i)]++;
          });
        });
        for (auto& h : hits) failures += h.load() != 1;
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, CApiRunsThroughThePool) {
  ThreadPool pool(2);
  const brrr_par* par = pool.c_api();
  std::vector<int> hits(100, 0);
  par->run(par->pool, 100,
           [](void* a, int64_t lo, int64_t hi) {
             for (int64_t i = lo; i < hi; ++i) (*static_cast<std::vector<int>*>(a))[size_t(i)]++;
           },
           &hits);
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(ThreadPool, AffinityCountIsPositive) {
  EXPECT_GE(brrr::cpu::affinity_cpu_count(), 1);
}
