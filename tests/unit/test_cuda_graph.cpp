// CUDA graph capture and replay; a failing capture is a clear error and the stream survives.
#include <gtest/gtest.h>

#ifdef BRRR_HAVE_CUDA
#include "backend/cuda/cuda_graph.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "brrr/error.hpp"
#include "cuda_test_util.hpp"

using namespace brrr::cuda;

namespace {
const char* kAddSrc = R"(
extern "C" __global__ void add(float* x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}
)";
}

TEST(CudaGraph, CaptureAndReplay) {
  BRRR_REQUIRE_CUDA_DEVICE();
  Device& dev = brrr_cuda_test::test_device();
  Module m(NvrtcCompiler(dev.info().arch(), "").compile(kAddSrc, "add").cubin, "add");
  Function add = m.function("add");
  const int n = 5000;
  std::vector<float> h(n);
  for (int i = 0; i < n; ++i) h[i] = float(i % 97);
  Stream s;
  DeviceBuffer x(n * 4, "x");
  copy_h2d(x.ptr(), h.data(), n * 4, s, "x");
  DevPtr px = x.ptr();
  int nn = n;
  float vals[10];
  std::vector<void*> args[10];
  for (int k = 0; k < 10; ++k) {
    vals[k] = float(k + 1);  // different values: checks each node kept its own arguments
    args[k] = {&px, &vals[k], &nn};
  }
  CudaGraph g = CudaGraph::capture(
      s,
      [&] {
        for (int k = 0; k < 10; ++k) launch(add, {(n + 127) / 128}, {128}, 0, s, args[k].data());
      },
      "ten adds");
  EXPECT_EQ(g.num_nodes(), 10u);
  s.synchronize();
  std::vector<float> back(n);
  copy_d2h(back.data(), px, n * 4, s, "x");
  s.synchronize();
  EXPECT_EQ(back, h) << "capture must not execute the launches";
  for (int r = 0; r < 3; ++r) g.replay(s);
  copy_d2h(back.data(), px, n * 4, s, "x");
  s.synchronize();
  for (int i = 0; i < n; ++i) ASSERT_EQ(back[i], h[i] + 3 * 55.0f) << i;
}

TEST(CudaGraph, FailedCaptureIsClearAndStreamSurvives) {
  BRRR_REQUIRE_CUDA_DEVICE();
  brrr_cuda_test::test_device();
  Stream s;
  try {
    CudaGraph::capture(s, [&] { s.synchronize("sync inside capture"); }, "bad plan");
    FAIL() << "capture with a synchronize succeeded";
  } catch (const brrr::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA graph capture of bad plan failed"), std::string::npos) << msg;
  }
  try {
    CudaGraph::capture(s, [] { throw brrr::Error("node 7 has no kernel"); }, "plan2");
    FAIL();
  } catch (const brrr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 7 has no kernel"), std::string::npos);
  }
  // The stream is no longer capturing: ordinary work runs.
  DeviceBuffer b(4096, "b");
  std::vector<std::uint32_t> h(1024, 7), back(1024, 0);
  copy_h2d(b.ptr(), h.data(), 4096, s, "b");
  copy_d2h(back.data(), b.ptr(), 4096, s, "b");
  s.synchronize();
  EXPECT_EQ(h, back);
}

#else
TEST(CudaGraph, NotBuilt) { GTEST_SKIP() << "no CUDA device: built without the CUDA toolkit"; }
#endif
