// CUDA runtime layer: detection, memory, copies, arena checks, the out-of-memory error path.
#include <gtest/gtest.h>

#ifdef BRRR_HAVE_CUDA
#include <cstdlib>
#include <filesystem>
#include <map>

#include "brrr/error.hpp"
#include "brrr/session.hpp"
#include "cuda_test_util.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

using namespace brrr::cuda;
using brrr_cuda_test::test_device;

TEST(CudaRuntime, DetectionNeverThrows) {
  std::string why;
  bool ok = false;
  EXPECT_NO_THROW(ok = cuda_device_available(&why));
  if (!ok) {
    EXPECT_FALSE(why.empty()) << "unavailable without a reason";
    // Without a device, constructing one is a clear brrr::Error, not a crash.
    EXPECT_THROW(Device d(0), brrr::Error);
  }
}

TEST(CudaRuntime, DeviceInfo) {
  BRRR_REQUIRE_CUDA_DEVICE();
  const DeviceInfo& info = test_device().info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.cc_major, 5);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.total_mem, 0u);
  EXPECT_EQ(info.arch(), "sm_" + std::to_string(info.cc_major * 10 + info.cc_minor));
}

// Device::synchronize is cuCtxSynchronize, whose newest ABI (CUDA 13) takes a context: the
// loader must hand back the no-argument one the header declares, or this fails on a garbage
// context (it did, as CUDA_ERROR_CONTEXT_IS_DESTROYED, in Session::run_device).
TEST(CudaRuntime, DeviceSynchronizeAfterWork) {
  BRRR_REQUIRE_CUDA_DEVICE();
  Device& dev = test_device();
  Stream s;
  DeviceBuffer a(4096, "a");
  memset_u32(a.ptr(), 1u, 1024, s, "fill a");
  EXPECT_NO_THROW(dev.synchronize());
  EXPECT_NO_THROW(dev.synchronize());
}

TEST(CudaRuntime, CopyRoundTrip) {
  BRRR_REQUIRE_CUDA_DEVICE();
  test_device();
  Stream s;
  const size_t n = 1 << 20;
  std::vector<float> h(n), back(n, -1.f);
  for (size_t i = 0; i < n; ++i) h[i] = std::sin(float(i)) * 3.f;
  DeviceBuffer a(n * 4, "a"), b(n * 4, "b");
  copy_h2d(a.ptr(), h.data(), n * 4, s, "a");
  memset_u32(b.ptr(), 0x7fc00000u, n, s, "poison b");  // NaN: unwritten output shows up
  copy_d2d(b.ptr(), a.ptr(), n * 4, s, "a->b");
  copy_d2h(back.data(), b.ptr(), n * 4, s, "b");
  s.synchronize();
  EXPECT_EQ(h, back);
}

// Weights go to the device through two pinned buffers refilled in turn: many chunks (more than
// two, so each buffer is reused while the other's copy may still run), a partial last chunk,
// and several copies through one stager, each landing exactly.
TEST(CudaRuntime, StagedUploadCopiesExactly) {
  BRRR_REQUIRE_CUDA_DEVICE();
  test_device();
  Stream s;
  const size_t n = (size_t(40) << 20) / 4 + 333;  // 40 MB and a tail: 11 chunks of 4 MB
  std::vector<float> h(n), back(n, -1.f), h2(n / 3), back2(n / 3, -1.f);
  for (size_t i = 0; i < n; ++i) h[i] = std::sin(float(i)) * 3.f + float(i % 977);
  for (size_t i = 0; i < h2.size(); ++i) h2[i] = float(i) * 0.5f;
  DeviceBuffer a(n * 4, "a"), b(h2.size() * 4, "b");
  memset_u32(a.ptr(), 0x7fc00000u, n, s, "poison a");
  {
    StagedUpload up(size_t(4) << 20);
    up.copy(a.ptr(), h.data(), n * 4, s, "a");
    up.copy(b.ptr(), h2.data(), h2.size() * 4, s, "b");
  }  // the stager waits for its copies before freeing its buffers
  copy_d2h(back.data(), a.ptr(), n * 4, s, "a");
  copy_d2h(back2.data(), b.ptr(), h2.size() * 4, s, "b");
  s.synchronize();
  EXPECT_EQ(h, back);
  EXPECT_EQ(h2, back2);
}

TEST(CudaRuntime, ArenaChecksBounds) {
  BRRR_REQUIRE_CUDA_DEVICE();
  test_device();
  Arena arena(1 << 20, "plan");
  EXPECT_EQ(arena.at(256, 1024, "x") - arena.at(0, 1, "y"), 256u);
  EXPECT_THROW(arena.at(1 << 20, 1, "past end"), brrr::Error);
  EXPECT_THROW(arena.at(0, (1 << 20) + 1, "too big"), brrr::Error);
  EXPECT_THROW(arena.at(100, 4, "misaligned"), brrr::Error);
  EXPECT_EQ(Arena::align(1), 256u);
}

TEST(CudaRuntime, OutOfMemoryIsAnErrorAndSessionStaysUsable) {
  BRRR_REQUIRE_CUDA_DEVICE();
  test_device();
  try {
    DeviceBuffer huge(std::size_t(1) << 50, "huge activation");  // 1 PiB
    FAIL() << "1 PiB allocation succeeded";
  } catch (const brrr::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("huge activation"), std::string::npos) << msg;
  }
  // The context is still fine: allocate, copy, read back.
  Stream s;
  DeviceBuffer ok(4096, "after oom");
  std::vector<std::uint32_t> h(1024, 0xdeadbeef), back(1024, 0);
  copy_h2d(ok.ptr(), h.data(), 4096, s, "after oom");
  copy_d2h(back.data(), ok.ptr(), 4096, s, "after oom");
  s.synchronize();
  EXPECT_EQ(h, back);
}

// ---- the primary context's lifetime ----
// Tests that need a process where nothing else holds the primary context (test_device() keeps
// one for the whole binary) run as a child: this binary again, filtered to one CudaChild test.
namespace {

bool is_child(const char* test) {
  return ::testing::GTEST_FLAG(filter) == std::string("CudaChild.") + test;
}

int run_child(const char* test) {
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string cmd = "'" + self + "' --gtest_filter=CudaChild." + test;
  return std::system(cmd.c_str());
}

}  // namespace

// The last Device going away used to release the primary context, destroying it between two
// sessions (and with it cuDNN's and cuBLASLt's per-context state). It now lives as long as the
// process.
TEST(CudaRuntime, PrimaryContextOutlivesEveryDevice) {
  BRRR_REQUIRE_CUDA_DEVICE();
  EXPECT_EQ(run_child("PrimaryContextStaysActive"), 0);
}

TEST(CudaChild, PrimaryContextStaysActive) {
  BRRR_REQUIRE_CUDA_DEVICE();  // ctest runs it alone too: that is also a fresh process
  if (!is_child("PrimaryContextStaysActive"))
    GTEST_SKIP() << "runs only in its own process (CudaRuntime.PrimaryContextOutlivesEveryDevice)";
  { Device d(0); }
  EXPECT_TRUE(primary_context_active(0)) << "the primary context was destroyed with the Device";
  { Device d(0); }
  EXPECT_TRUE(primary_context_active(0));
}

// Sessions of every library kind (cuDNN conv, cuBLASLt GEMM, a fused NVRTC kernel) created and
// destroyed in turn, in a fresh process: each builds on the state the last one left.
TEST(CudaRuntime, SessionsComeAndGo) {
  BRRR_REQUIRE_CUDA_DEVICE();
  EXPECT_EQ(run_child("SessionsComeAndGo"), 0);
}

TEST(CudaChild, SessionsComeAndGo) {
  BRRR_REQUIRE_CUDA_DEVICE();  // ctest runs it alone too: that is also a fresh process
  if (!is_child("SessionsComeAndGo"))
    GTEST_SKIP() << "runs only in its own process (CudaRuntime.SessionsComeAndGo)";
  using namespace brrr;
  std::mt19937 rng(7);
  auto conv = [&] {
    GraphBuilder b;
    int x = b.input("x", {1, 4, 8, 8});
    b.output(b.node(
        "Relu",
        {b.node("Conv", {x, b.constant("w", brrr_test::uniform_f32({8, 4, 3, 3}, rng, -1.f, 1.f))},
                {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})}));
    return b.g;
  };
  auto gemm = [&] {
    GraphBuilder b;
    int x = b.input("x", {64, 96});
    b.output(
        b.node("MatMul", {x, b.constant("w", brrr_test::uniform_f32({96, 48}, rng, -1.f, 1.f))}));
    return b.g;
  };
  auto fused = [&] {
    GraphBuilder b;
    int x = b.input("x", {1000});
    b.output(b.node("Tanh", {b.node("Exp", {x})}));
    return b.g;
  };
  SessionOptions o;
  o.backend = "cuda";
  for (int round = 0; round < 6; ++round)
    for (const Graph& g : {conv(), gemm(), fused()}) {
      Session s(g, o);
      std::map<std::string, Tensor> in;
      for (int id : g.inputs)
        in[g.value(id).name] = brrr_test::uniform_f32(g.value(id).shape, rng, -1.f, 1.f);
      std::vector<Tensor> got = s.run(in);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_GT(got[0].numel(), 0);
    }
}

#else
TEST(CudaRuntime, NotBuilt) {
  GTEST_SKIP() << "no CUDA device: built without the CUDA toolkit";
}
#endif
