// The CPU thread pool runs every index exactly once, for any size and thread count, whether its
// workers are awake, asleep, descheduled or stuck in a slow chunk, and with concurrent callers.
#include <gtest/gtest.h>
#include <omp.h>

#include "core/env.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "backend/cpu/library.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

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

// While the session says the machine is loaded, every chunk runs on the caller: no join can wait
// on a worker the OS has descheduled.
TEST(ThreadPool, SerialRunsEverythingOnTheCaller) {
  ThreadPool pool(4);
  pool.set_serial(true);
  const auto me = std::this_thread::get_id();
  std::atomic<int> elsewhere{0}, covered{0};
  pool.parallel_for(1000, [&](int64_t lo, int64_t hi) {
    if (std::this_thread::get_id() != me) ++elsewhere;
    covered += int(hi - lo);
  });
  EXPECT_EQ(elsewhere.load(), 0);
  EXPECT_EQ(covered.load(), 1000);
  pool.set_serial(false);
  EXPECT_EQ(pool.take_long_waits(), 0);  // nothing was waited for
}

// A join where the caller, done with its own chunks, waits much longer for a worker than it
// worked itself is counted: what a descheduled worker looks like (here: a worker's slow chunk).
TEST(ThreadPool, LongWaitForAWorkerIsCounted) {
  ThreadPool pool(2);
  const auto me = std::this_thread::get_id();
  std::atomic<int> on_worker{0};
  for (int attempt = 0; attempt < 20 && on_worker.load() == 0; ++attempt)
    pool.parallel_for(8, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != me) {
        ++on_worker;
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  ASSERT_GT(on_worker.load(), 0) << "the worker never took a chunk";
  EXPECT_GE(pool.take_long_waits(), 1);
  EXPECT_EQ(pool.take_long_waits(), 0);  // taking resets the count
}

TEST(ThreadPool, AffinityCountIsPositive) {
  EXPECT_GE(brrr::cpu::affinity_cpu_count(), 1);
}

// Sessions on 1..7 threads: generated kernels (a flat map past the parallel threshold with a
// partial last block, and row softmaxes) and the library kernels (conv, pool, concat, mean) all
// match the reference, and the generated ones give the same bytes whatever the thread count.
namespace brrr {
namespace {

Graph threads_model() {
  GraphBuilder b;
  std::mt19937 rng(7);
  auto rnd = [&](const Shape& s) { return brrr_test::uniform_f32(s, rng, -0.5f, 0.5f); };
  int x = b.input("x", {1, 32, 41, 41});
  int c = b.node("Conv", {x, b.constant("w0", rnd({48, 32, 1, 1})), b.constant("b0", rnd({48}))});
  int p = b.node(
      "MaxPool", {c},
      {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}});
  int d = b.node("Conv", {p, b.constant("w1", rnd({96, 48, 1, 1}))});
  int e = b.node("Conv", {x, b.constant("w2", rnd({16, 32, 3, 3}))},
                 {{"strides", std::vector<int64_t>{2, 2}}});
  int cat = b.node("Concat", {d, e}, {{"axis", int64_t(1)}});
  b.output(b.node("GlobalAveragePool", {cat}));
  int y = b.input("y", {300001});
  int v = b.node("Tanh", {b.node("Mul", {b.node("Add", {y, b.scalar(1.f)}), b.scalar(0.7f)})});
  b.output(v);
  int s = b.input("s", {300, 257});
  b.output(b.node("Softmax", {s}, {{"axis", int64_t(-1)}}));
  return b.g;
}

}  // namespace
}  // namespace brrr

TEST(SessionThreads, ResultsDoNotDependOnThreadCount) {
  using namespace brrr;
  Graph g = threads_model();
  std::mt19937 rng(11);
  std::map<std::string, Tensor> in;
  for (int id : g.inputs)
    in[g.value(id).name] = brrr_test::uniform_f32(g.value(id).shape, rng, -2.f, 2.f);
  std::vector<Tensor> want;
  // Each layout takes other paths through the hand-written kernels (blocked, NHWC, NCHW).
  for (const char* layout : {"blocked", "nhwc", "plain"}) {
    brrr_test::EnvVar env("BRRR_CONV_LAYOUT", layout);
    std::vector<Tensor> first;
    for (int threads : {1, 2, 3, 7}) {
      SCOPED_TRACE(fmt::format("{} threads, {} layout", threads, layout));
      SessionOptions o;
      o.threads = threads;
      Session s(g, o);
      EXPECT_EQ(s.threads(), threads);
      std::vector<Tensor> got = s.run(in);
      if (want.empty()) want = run_reference(s.graph(), in);
      brrr_test::expect_outputs_close(got, want, 1e-4, 1e-5, s.plan_summary());
      if (first.empty()) {
        for (const Tensor& t : got) first.push_back(t.clone());
        continue;
      }
      for (size_t k = 1; k < got.size(); ++k)  // the generated kernels' outputs
        EXPECT_EQ(std::memcmp(got[k].raw(), first[k].raw(), got[k].nbytes()), 0) << "output " << k;
    }
  }
}

TEST(SessionThreads, ThreadCountFromEnvironmentAndAffinity) {
  using namespace brrr;
  GraphBuilder b;
  b.output(b.node("Relu", {b.input("x", {4})}));
  if (!brrr::env::raw("BRRR_THREADS"))
    EXPECT_EQ(Session(b.g).threads(), brrr::cpu::affinity_cpu_count());
  {
    brrr_test::EnvVar e("BRRR_THREADS", "3");
    EXPECT_EQ(Session(b.g).threads(), 3);
  }
  // The profile the doctor reports from carries the count the runs used.
  SessionOptions o;
  o.threads = 5;
  Session s(b.g, o);
  EXPECT_EQ(s.profile({{"x", Tensor::zeros(DType::f32, {4})}}, 1).threads, 5);
  for (const char* bad : {"garbage", "0", "-2", "2x", "100000"}) {
    brrr_test::EnvVar e("BRRR_THREADS", bad);
    EXPECT_THROW(Session s(b.g), Error) << bad;
  }
}

// A threaded library kernel that slows down (another process took a core) hands the session's
// runs to the one-thread twins, for a stretch that doubles while the slowdown lasts, and gets them
// back after. The fakes advance a fake clock (10 ms quiet, 150 ms slowed; twin 40 ms) instead of
// sleeping, so the machine's own load cannot blur the contrasts.
namespace {
double g_fake_ms = 0;
double fake_now_ms() { return g_fake_ms; }
}  // namespace

TEST(LoadAdaptive, FallsBackToOneThreadWhileThreadedIsSlowAndReturns) {
  struct Fake : brrr::cpu::LibraryKernel {
    int* calls;
    const int* ms;
    Fake(int* c, const int* m) : calls(c), ms(m) {}
    void run(void* const*) override {
      ++*calls;
      g_fake_ms += *ms;
    }
  };
  int threaded_calls = 0, one_calls = 0, threaded_ms = 10, other_calls = 0;
  const int one_ms = 40, other_ms = 0;
  auto load = std::make_shared<brrr::cpu::LoadState>();
  auto k = brrr::cpu::make_load_adaptive(std::make_unique<Fake>(&threaded_calls, &threaded_ms),
                                         std::make_unique<Fake>(&one_calls, &one_ms), load,
                                         &fake_now_ms);
  // A second adaptive kernel of the same session: it follows the first one's finding.
  int other_threaded = 0;
  auto k2 = brrr::cpu::make_load_adaptive(std::make_unique<Fake>(&other_threaded, &other_ms),
                                          std::make_unique<Fake>(&other_calls, &other_ms), load,
                                          &fake_now_ms);
  auto runs = [&](int n) {  // session runs
    for (int i = 0; i < n; ++i) {
      k->run(nullptr);
      k2->run(nullptr);
      ++load->run;
    }
  };
  const int s = brrr::cpu::LoadState::kFirstStretch;
  runs(2);  // threaded once, then the twin once (its time is the comparison)
  EXPECT_EQ(threaded_calls, 1);
  EXPECT_EQ(one_calls, 1);
  runs(4);
  EXPECT_EQ(threaded_calls, 5);  // quiet: the threaded kernel keeps every run
  threaded_ms = 150;
  runs(1);  // slow: the next s runs go to the twins, the other kernel's too
  int t = threaded_calls, o = one_calls, t2 = other_threaded;
  runs(s);
  EXPECT_EQ(threaded_calls, t);
  EXPECT_EQ(one_calls, o + s);
  EXPECT_EQ(other_threaded, t2);
  runs(1);  // the threaded kernel is tried again, still slow: 2s more on the twin
  EXPECT_EQ(threaded_calls, t + 1);
  runs(2 * s);
  EXPECT_EQ(threaded_calls, t + 1);
  EXPECT_EQ(one_calls, o + 3 * s);
  threaded_ms = 10;
  runs(5);  // quiet again: one try on the threaded kernel, and it keeps the runs
  EXPECT_EQ(threaded_calls, t + 6);
  EXPECT_EQ(one_calls, o + 3 * s);
}

// A run of a loaded stretch is serial all through: brrr's pool runs every chunk on the caller and
// oneDNN sees one OpenMP thread (its kernels made for one thread open no two-thread regions);
// after the run both are the session's again. A calm run changes neither, and
// BRRR_NO_LOAD_ADAPTIVE's runs are never serial.
TEST(LoadAdaptive, SerialRunUsesOneOpenMPThreadAndOnlyTheCaller) {
  using brrr::cpu::LoadRun;
  brrr::cpu::ThreadPool pool(2);
  brrr::cpu::LibraryThreads session_threads(2);
  auto on_caller_only = [&] {
    const auto me = std::this_thread::get_id();
    std::atomic<int> elsewhere{0};
    for (int rep = 0; rep < 20; ++rep)
      pool.parallel_for(64, [&](int64_t, int64_t) {
        if (std::this_thread::get_id() != me) ++elsewhere;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      });
    return elsewhere.load() == 0;
  };
  brrr::cpu::LoadState load;
  {
    LoadRun r(load, pool, true);
    EXPECT_EQ(omp_get_max_threads(), 2);  // calm
  }
  EXPECT_EQ(load.run, 1);
  load.loaded();
  ASSERT_TRUE(load.serial());
  {
    LoadRun r(load, pool, false);  // not adaptive: the session's threads even now
    EXPECT_EQ(omp_get_max_threads(), 2);
  }
  {
    LoadRun r(load, pool, true);
#ifdef BRRR_HAVE_DNNL  // without oneDNN, LibraryThreads leaves OpenMP alone
    EXPECT_EQ(omp_get_max_threads(), 1);
#endif
    EXPECT_TRUE(on_caller_only());
  }
  EXPECT_EQ(omp_get_max_threads(), 2);
  while (load.serial()) {
    LoadRun r(load, pool, true);
  }
  {
    LoadRun r(load, pool, true);
    EXPECT_EQ(omp_get_max_threads(), 2);
  }
  EXPECT_EQ(load.run, load.one_until + 1);
}

// A threaded run marked loaded keeps the threads when it still beat the fastest serial run; the
// first mark, with no serial time yet, costs one serial run (which measures it), not a stretch.
TEST(LoadAdaptive, ThreadedRunThatBeatsSerialKeepsItsThreads) {
  using brrr::cpu::LoadRun;
  brrr::cpu::ThreadPool pool(2);
  brrr::cpu::LoadState load;
  auto run_for = [&](int ms, bool mark) {
    LoadRun r(load, pool, true);
    if (mark) load.loaded();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
  run_for(1, true);  // loaded, no serial time yet: the next run alone is serial
  EXPECT_TRUE(load.serial());
  EXPECT_EQ(load.one_until, load.run + 1);
  run_for(100, false);  // that serial run: 100 ms
  EXPECT_FALSE(load.serial());
  EXPECT_GE(load.serial_ms, 100.0);
  run_for(1, true);  // marked loaded, but 1 ms beats 100: threads kept
  EXPECT_FALSE(load.serial());
  run_for(250, true);  // slower than serial: the stretch is spent serial
  EXPECT_TRUE(load.serial());
  EXPECT_EQ(load.one_until - load.run, brrr::cpu::LoadState::kFirstStretch);
}

// Inside a whole run, a slow kernel is judged when the run ends: load when another process's
// thread is runnable then (the next stretch serial), else a hiccup of the machine (the threads
// kept). A VM's hiccups had GoogLeNet's `brrr run --reps 50` serial for most runs on a quiet
// machine (median 16.5 ms; 9.5 threaded).
TEST(LoadAdaptive, ASlowRunIsLoadOnlyWhenAnotherThreadIsRunnable) {
  using brrr::cpu::LoadRun;
  struct Fake : brrr::cpu::LibraryKernel {
    double* ms;
    double* now;
    explicit Fake(double* m, double* n) : ms(m), now(n) {}
    void run(void* const*) override { *now += *ms; }
  };
  brrr::cpu::ThreadPool pool(2);
  auto load = std::make_shared<brrr::cpu::LoadState>();
  int others = 0;
  load->others = [&] { return others; };
  static double now = 0;
  double threaded_ms = 1, one_ms = 1.8;
  auto k = brrr::cpu::make_load_adaptive(std::make_unique<Fake>(&threaded_ms, &now),
                                         std::make_unique<Fake>(&one_ms, &now), load,
                                         [] { return now; });
  auto run = [&] {
    LoadRun r(*load, pool, true);
    k->run(nullptr);
  };
  run();  // threaded, timed: its best
  run();  // the twin, timed once
  run();  // threaded again
  ASSERT_FALSE(load->serial());
  threaded_ms = 5;  // a hiccup: slower than twice its best and than the twin
  run();
  EXPECT_FALSE(load->serial()) << "nobody else wanted a CPU: the threads are kept";
  EXPECT_FALSE(load->suspect);
  others = 1;  // now another process's thread is runnable
  run();
  EXPECT_TRUE(load->serial());
}
