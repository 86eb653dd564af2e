// The doctor under a CPU hog on every CPU (issue 19: "with a CPU hog on every core, the doctor
// says its measurements are unreliable"): the load meter sees the hogs, and a real profiled run
// of an example model, diagnosed, is reported unreliable with the load as the reason. Hogs are
// separate processes (a process's own threads are not "other" load) and are killed at the end.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "brrr/doctor.hpp"
#include "brrr/onnx.hpp"
#include "brrr/session.hpp"
#include "core/machine_load.hpp"

using namespace brrr;

namespace {

struct Hogs {
  std::vector<pid_t> pids;
  explicit Hogs(int n) {
    for (int i = 0; i < n; ++i) {
      pid_t p = fork();
      if (p == 0) {
        volatile unsigned long x = 0;
        for (;;) x = x + 1;  // spins until killed
      }
      if (p > 0) pids.push_back(p);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let them get going
  }
  ~Hogs() {
    for (pid_t p : pids) kill(p, SIGKILL);
    for (pid_t p : pids) waitpid(p, nullptr, 0);
  }
};

std::string example(const char* name) {
  return std::string(BRRR_TEST_DATA) + "/../../examples/" + name + "/model.onnx";
}

}  // namespace

TEST(DoctorLoad, MeterSeesHogsOnEveryCpu) {
  const int n = LoadMeter::online_cpus();
  Hogs hogs(n);
  ASSERT_EQ(int(hogs.pids.size()), n);
  LoadMeter m;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  double busy = m.other_busy_cpus();
  ASSERT_GE(busy, 0) << "/proc/stat unreadable";
  EXPECT_GE(busy, 0.5 * n) << n << " hogs";
}

TEST(DoctorLoad, ProfileUnderHogsIsReportedUnreliable) {
  const int n = LoadMeter::online_cpus();
  SessionOptions o;
  o.backend = "cpu";
  Session s(load_onnx(example("mlp_tiny")), o);
  std::map<std::string, Tensor> in;
  for (int id : s.graph().inputs) {
    const Value& v = s.graph().value(id);
    ASSERT_EQ(v.dtype, DType::f32) << v.name;
    Tensor t = Tensor::empty(v.dtype, v.shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.25f * float(i % 7) - 0.5f;
    in.emplace(v.name, std::move(t));
  }
  s.run(in);  // compiled and warm before the hogs start
  Hogs hogs(n);
  RunProfile p = s.profile(in, 20);
  ASSERT_GE(p.other_busy_cpus, 0);
  doctor::Ceilings c;
  c.bandwidth_gbs = 10;
  c.peak_gflops = {{"fp32", 100}};
  c.threads = n;
  doctor::Report r = doctor::diagnose(p, c);
  EXPECT_FALSE(r.reliability.reliable) << "other busy " << p.other_busy_cpus << " of " << n;
  EXPECT_EQ(r.verdict.advice.rfind("unreliable measurements:", 0), 0u) << r.verdict.advice;
}
