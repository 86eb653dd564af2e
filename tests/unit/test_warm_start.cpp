// A session's build does what a first run would otherwise pay for: library kernels (and generated
// ones on floating-point values) run once on zeros, their run-time memory is one shared block,
// and a session built on a loaded machine starts serial. These tests check that the first run's
// results are still exact, that nothing traps on the zeros, and the adaptive kernel's serial start;
// scripts/warm_start.py measures the times.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <random>

#include "backend/cpu/library.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "core/machine_load.hpp"
#include "dnnl_flag.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

Tensor rnd(const Shape& s) {
  static std::mt19937 rng(99);
  return brrr_test::uniform_f32(s, rng, -1.f, 1.f);
}

// conv 3x3 (blocked, Winograd where oneDNN has it) -> MaxPool -> conv 1x1 + Relu -> global mean
// -> Flatten -> MatMul + bias -> Softmax: oneDNN convs, a pool, a GEMM, and generated kernels.
Graph conv_net() {
  GraphBuilder b;
  int x = b.input("x", {1, 16, 20, 20});
  int y = b.node("Conv", {x, b.constant("w1", rnd({32, 16, 3, 3})), b.constant("b1", rnd({32}))},
                 {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  y = b.node("MaxPool", {y}, {{"kernel_shape", std::vector<int64_t>{2, 2}},
                              {"strides", std::vector<int64_t>{2, 2}}});
  y = b.node("Relu", {b.node("Conv", {y, b.constant("w2", rnd({24, 32, 1, 1}))})});
  y = b.node("Flatten", {b.node("GlobalAveragePool", {y})});
  y = b.node("Add", {b.node("MatMul", {y, b.constant("w3", rnd({24, 10}))}), b.constant("b3", rnd({10}))});
  b.output(b.node("Softmax", {b.node("Tanh", {y})}));
  return b.g;
}

// The first run, right after the build-time runs on zeros, gives the reference's values; so does
// the same session's next run and a session built with BRRR_NO_WARMUP.
TEST(WarmStart, FirstRunAfterBuildTimeRunsMatchesTheReference) {
  Graph g = conv_net();
  std::map<std::string, Tensor> in{{"x", rnd({1, 16, 20, 20})}};
  Session s(g);
  std::vector<Tensor> want = run_reference(s.graph(), in);
  brrr_test::expect_outputs_close(s.run(in), want, 1e-4f, 1e-5f, s.plan_summary());
  brrr_test::expect_outputs_close(s.run(in), want, 1e-4f, 1e-5f, s.plan_summary());
  std::string summary = s.plan_summary();
  EXPECT_NE(summary.find("run once on zeros"), std::string::npos) << summary;
  if (brrr_test::kDnnl) EXPECT_NE(summary.find("library work space"), std::string::npos) << summary;
  brrr_test::EnvVar off("BRRR_NO_WARMUP", "1");
  Session cold(g);
  EXPECT_EQ(cold.plan_summary().find("run once on zeros"), std::string::npos) << cold.plan_summary();
  brrr_test::expect_outputs_close(cold.run(in), want, 1e-4f, 1e-5f, cold.plan_summary());
}

// A kernel too large for its first execution's extra cost to matter (a 3x3 conv over 64x56x56:
// about 0.23 GFLOP) is not run at build: that would cost the build a whole run of it. Its first
// run is exact all the same.
TEST(WarmStart, LargeKernelsAreLeftForTheFirstRun) {
  GraphBuilder b;
  int x = b.input("x", {1, 64, 56, 56});
  int y = b.node("Conv", {x, b.constant("w", rnd({64, 64, 3, 3}))},
                 {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.output(b.node("Tanh", {b.node("ReduceMean", {y}, {{"axes", std::vector<int64_t>{2, 3}}})}));
  Session s(b.g);
  std::string summary = s.plan_summary();
  if (brrr_test::kDnnl)
    EXPECT_NE(summary.find("(1 larger one(s) not)"), std::string::npos) << summary;
  std::map<std::string, Tensor> in{{"x", rnd({1, 64, 56, 56})}};
  brrr_test::expect_outputs_close(s.run(in), run_reference(s.graph(), in), 1e-4f, 1e-5f, summary);
}

// Only library kernels and generated kernels on floating-point values run at build: the
// reference kernel of this integer Div fails on a zero divisor, and a generated integer division
// would trap. The session builds and its first run is exact; the float kernel beside it is warmed.
TEST(WarmStart, IntegerKernelsAreNotRunOnZeros) {
  GraphBuilder b;
  int a = b.input("a", {8}, DType::i32), d = b.input("d", {8}, DType::i32);
  b.output(b.node("Add", {b.node("Div", {a, d}), a}));
  int x = b.input("x", {8});
  b.output(b.node("Exp", {b.node("Mul", {x, x})}));
  Session s(b.g);
  std::map<std::string, Tensor> in{
      {"a", Tensor::from_vector<int32_t>({8}, {7, -7, 9, 100, 0, 5, 6, 1})},
      {"d", Tensor::from_vector<int32_t>({8}, {2, 2, -4, 7, 3, 5, 1, 1})},
      {"x", rnd({8})}};
  brrr_test::expect_outputs_close(s.run(in), run_reference(s.graph(), in), 1e-6f, 1e-6f,
                                  s.plan_summary());
}

// A session that starts serial (the machine was loaded while it was built) runs, and warms, the
// one-thread twin first; the threaded kernel gets its turn when the serial stretch ends.
TEST(LoadAdaptive, SessionThatStartsSerialRunsTheTwinFirst) {
  struct Count : cpu::LibraryKernel {
    int* n;
    explicit Count(int* c) : n(c) {}
    void run(void* const*) override { ++*n; }
  };
  int threaded = 0, one = 0;
  auto load = std::make_shared<cpu::LoadState>();
  auto k = cpu::make_load_adaptive(std::make_unique<Count>(&threaded), std::make_unique<Count>(&one),
                                   load);
  load->loaded();  // what the build does on a loaded machine
  k->warm_up(nullptr);
  EXPECT_EQ(one, 1);
  EXPECT_EQ(threaded, 0);
  while (load->serial()) {
    k->run(nullptr);
    ++load->run;
  }
  EXPECT_EQ(threaded, 0);
  EXPECT_EQ(one, 1 + cpu::LoadState::kFirstStretch + 1);
  k->run(nullptr);  // the stretch is over: threaded
  EXPECT_EQ(threaded, 1);
  // On a calm start the threaded kernel is the one warmed.
  auto calm = std::make_shared<cpu::LoadState>();
  int t2 = 0, o2 = 0;
  auto k2 = cpu::make_load_adaptive(std::make_unique<Count>(&t2), std::make_unique<Count>(&o2), calm);
  k2->warm_up(nullptr);
  EXPECT_EQ(t2, 1);
  EXPECT_EQ(o2, 0);
}

TEST(MachineLoad, OtherRunnableThreadsIsReadOnLinux) {
#ifdef __linux__
  EXPECT_GE(other_runnable_threads(), 0);
#else
  GTEST_SKIP() << "not Linux: /proc/loadavg is not there";
#endif
}

// A task line counts when it is runnable and not a kernel thread.
TEST(MachineLoad, KernelThreadsAreNotLoad) {
  EXPECT_TRUE(runnable_user_task_line("31227 (grep) R 31164 31164 5976 0 -1 4194304"));
  EXPECT_TRUE(runnable_user_task_line("77 (a (weird) name) R 1 77 77 0 -1"));
  EXPECT_FALSE(runnable_user_task_line("31227 (grep) S 31164 31164 5976 0 -1"));
  EXPECT_FALSE(runnable_user_task_line("15 (rcu_preempt) R 2 0 0 0 -1 2129984"));  // a kernel thread
  EXPECT_FALSE(runnable_user_task_line("2 (kthreadd) R 0 0 0 0 -1"));
  EXPECT_FALSE(runnable_user_task_line("garbage"));
  EXPECT_FALSE(runnable_user_task_line(""));
}

// Other processes' runnable threads are counted, this process's own are not, however many of
// them spin (the loadavg count minus a later count of its own R threads took own threads that
// changed state between the two reads for another process's: half of the Whisper encoder's
// sessions on a quiet machine started serial, at twice the time a run).
TEST(MachineLoad, OwnThreadsAreNotOthersAndABusyChildIs) {
#ifdef __linux__
  auto median_of_samples = [] {
    std::vector<int> v;
    for (int i = 0; i < 15; ++i) {
      v.push_back(other_runnable_threads());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  {
    std::atomic<bool> stop{false};
    std::vector<std::jthread> spinners;
    // Each spins a moment, then sleeps a moment, as OpenMP's waiting threads do: runnable one
    // instant, asleep the next.
    for (int i = 0; i < 6; ++i)
      spinners.emplace_back([&] {
        while (!stop.load(std::memory_order_relaxed)) {
          const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(30);
          while (std::chrono::steady_clock::now() < until) {
          }
          std::this_thread::sleep_for(std::chrono::microseconds(30));
        }
      });
    // Other tests' processes may run beside this one (ctest -j), a few threads at most.
    EXPECT_LE(median_of_samples(), 3);
    stop = true;
  }
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // spins until killed
    for (volatile unsigned long i = 0;; i = i + 1) {
    }
  }
  int seen = 0;
  for (int i = 0; i < 50 && seen == 0; ++i) {
    seen = std::max(seen, other_runnable_threads());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_GE(seen, 1);
#else
  GTEST_SKIP() << "not Linux: /proc is not there";
#endif
}

// The gemm:jit set-up thread starts only for a plan that has a gemm:jit kernel.
TEST(WarmStart, GemmJitInitOnlyWhenAKernelUsesIt) {
  EXPECT_FALSE(cpu::start_gemm_jit_init({"brg:avx512_core", ""}).joinable());
  std::jthread t = cpu::start_gemm_jit_init({"gemm:jit"});
  EXPECT_EQ(t.joinable(), brrr_test::kDnnl);
}

}  // namespace
}  // namespace brrr
