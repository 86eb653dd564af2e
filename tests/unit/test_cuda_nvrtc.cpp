// NVRTC compiler and disk cache (these run without a GPU: NVRTC needs none), then kernels run on
// the device and compared with the CPU.
#include <gtest/gtest.h>

#ifdef BRRR_HAVE_CUDA
#include <filesystem>
#include <fstream>
#include <random>

#include <sys/stat.h>
#include <unistd.h>

#include "backend/cuda/bench_kernels.hpp"
#include "bounded_run.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "brrr/error.hpp"
#include "brrr/scalar_ops.h"
#include "cuda_test_util.hpp"

using namespace brrr::cuda;
namespace fs = std::filesystem;

namespace {

const char* kGeluSrc = R"(
#include "brrr/scalar_ops.h"
extern "C" __global__ void gelu(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = brrr_gelu_erf(x[i]);
}
)";

fs::path fresh_cache_dir(const std::string& tag) {
  fs::path p = fs::temp_directory_path() /
               ("brrr_cuda_cache_test_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

}  // namespace

TEST(CudaNvrtc, CompilesWithEmbeddedHeaderAndCaches) {
  fs::path dir = fresh_cache_dir("hit");
  NvrtcCompiler c("sm_90", dir.string());
  CompiledKernel k1 = c.compile(kGeluSrc, "gelu");
  EXPECT_FALSE(k1.from_cache);
  ASSERT_GT(k1.cubin.size(), 16u);
  EXPECT_EQ(std::memcmp(k1.cubin.data(), "\x7f" "ELF", 4), 0) << "cubin should be an ELF";
  CompiledKernel k2 = c.compile(kGeluSrc, "gelu");
  EXPECT_TRUE(k2.from_cache);
  EXPECT_EQ(k1.cubin, k2.cubin);
  // Different options -> different key -> a fresh compile.
  CompileOptions fast;
  fast.fast_math = true;
  EXPECT_FALSE(c.compile(kGeluSrc, "gelu", fast).from_cache);
  fs::remove_all(dir);
}

TEST(CudaNvrtc, CorruptCacheEntryIsRecompiled) {
  fs::path dir = fresh_cache_dir("corrupt");
  NvrtcCompiler c("sm_90", dir.string());
  CompiledKernel k1 = c.compile(kGeluSrc, "gelu");
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".cubin") {
      fs::resize_file(e.path(), fs::file_size(e.path()) / 2);  // a torn write
      ++n;
    }
  }
  ASSERT_EQ(n, 1);
  CompiledKernel k2 = c.compile(kGeluSrc, "gelu");
  EXPECT_FALSE(k2.from_cache);
  EXPECT_EQ(k1.cubin, k2.cubin);
  EXPECT_TRUE(c.compile(kGeluSrc, "gelu").from_cache);  // repaired
  fs::remove_all(dir);
}

TEST(CudaNvrtc, CompileErrorCarriesTheLog) {
  NvrtcCompiler c("sm_90", "");
  try {
    c.compile("extern \"C\" __global__ void bad(float* x) { x[0] = undeclared_thing; }",
              "bad_kernel");
    FAIL() << "bad source compiled";
  } catch (const brrr::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("bad_kernel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("undeclared_thing"), std::string::npos) << msg;
  }
}

TEST(CudaNvrtc, CompileErrorIsOneLineNamingLogAndSource) {
  fs::path dir = fresh_cache_dir("oneline");
  NvrtcCompiler c("sm_90", dir.string());
  const std::string bad = "extern \"C\" __global__ void bad(float* x) { x[0] = undeclared_thing; }";
  std::string msg;
  try {
    c.compile(bad, "bad_kernel");
  } catch (const brrr::Error& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_NE(msg.find("undeclared_thing"), std::string::npos) << msg;
  size_t l = msg.find("log: "), s = msg.find("; source: ");
  ASSERT_NE(l, std::string::npos) << msg;
  ASSERT_NE(s, std::string::npos) << msg;
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    return std::string{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  };
  EXPECT_NE(slurp(msg.substr(l + 5, s - l - 5)).find("undeclared_thing"), std::string::npos);
  EXPECT_EQ(slurp(msg.substr(s + 10)), bad);
  fs::remove_all(dir);
}

// The session's dump_dir reaches the CUDA compiler (it used to read only BRRR_DUMP_DIR).
TEST(CudaNvrtc, DumpDirOptionIsHonoured) {
  fs::path dump = fresh_cache_dir("dump");
  NvrtcCompiler c("sm_90", "", dump.string());
  c.compile(kGeluSrc, "gelu");
  std::ifstream f(dump / "gelu.cu");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()),
            kGeluSrc);
  fs::remove_all(dump);
}

// A FIFO or a symlink to /dev/zero in place of a cubin is a miss and is replaced (the shared
// KernelCache opens regular files only).
TEST(CudaNvrtc, NonRegularCacheEntriesAreMisses) {
  fs::path dir = fresh_cache_dir("tamper");
  NvrtcCompiler c("sm_90", dir.string());
  CompiledKernel k1 = c.compile(kGeluSrc, "gelu");
  fs::path cubin;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".cubin") cubin = e.path();
  ASSERT_FALSE(cubin.empty());
  for (int round = 0; round < 2; ++round) {
    fs::remove(cubin);
    if (round == 0)
      fs::create_symlink("/dev/zero", cubin);
    else
      ASSERT_EQ(mkfifo(cubin.c_str(), 0644), 0);
    std::string r = brrr_test::run_bounded(
        [&] {
          CompiledKernel k = c.compile(kGeluSrc, "gelu");
          return k.from_cache || k.cubin != k1.cubin ? std::string("wrong result") : "";
        },
        60, size_t(3) << 30);
    EXPECT_EQ(r, "") << round;
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(cubin))) << round;
  }
  fs::remove_all(dir);
}

TEST(CudaNvrtc, BenchKernelsCompile) {
  NvrtcCompiler c("sm_90", "");
  EXPECT_NO_THROW(c.compile(bench_kernels_source(), "bench"));
}

TEST(CudaNvrtc, BadArchIsAnError) { EXPECT_THROW(NvrtcCompiler("compute_x", ""), brrr::Error); }

TEST(CudaNvrtc, GeluKernelMatchesCpu) {
  BRRR_REQUIRE_CUDA_DEVICE();
  Device& dev = brrr_cuda_test::test_device();
  NvrtcCompiler c(dev.info().arch(), "");
  Module m(c.compile(kGeluSrc, "gelu").cubin, "gelu");
  Function f = m.function("gelu");
  EXPECT_THROW(m.function("no_such_kernel"), brrr::Error);

  const int n = 100003;  // not a multiple of the block
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-6.f, 6.f);
  std::vector<float> x(n), y(n, 0.f);
  for (float& v : x) v = dist(rng);
  Stream s;
  DeviceBuffer dx(n * 4, "x"), dy(n * 4, "y");
  copy_h2d(dx.ptr(), x.data(), n * 4, s, "x");
  memset_u32(dy.ptr(), 0x7fc00000u, n, s, "poison y");
  DevPtr px = dx.ptr(), py = dy.ptr();
  int nn = n;
  void* args[] = {&px, &py, &nn};
  launch(f, {unsigned((n + 255) / 256)}, {256}, 0, s, args);
  copy_d2h(y.data(), py, n * 4, s, "y");
  s.synchronize();
  std::vector<double> ref(n);
  for (int i = 0; i < n; ++i) ref[i] = brrr_gelu_erf(x[i]);  // the same header on the CPU
  EXPECT_LT(brrr_cuda_test::rel_l2(y, ref), 1e-6);
}

TEST(CudaNvrtc, FusedCosCosMatchesTwoKernels) {
  BRRR_REQUIRE_CUDA_DEVICE();
  Device& dev = brrr_cuda_test::test_device();
  NvrtcCompiler c(dev.info().arch(), "");
  Module m(c.compile(bench_kernels_source(), "bench").cubin, "bench");
  Function cos1 = m.function("brrr_cos_f32x4"), cos2 = m.function("brrr_cos_cos_f32x4"),
           fillf = m.function("brrr_fill_f32");
  const unsigned long long n = 1 << 22, n4 = n / 4;
  Stream s;
  DeviceBuffer x(n * 4, "x"), t(n * 4, "t"), y1(n * 4, "y1"), y2(n * 4, "y2");
  DevPtr px = x.ptr(), pt = t.ptr(), p1 = y1.ptr(), p2 = y2.ptr();
  unsigned seed = 3;
  float scale = 10.f;
  unsigned long long nn = n;
  void* fa[] = {&px, &nn, &seed, &scale};
  launch(fillf, {256}, {256}, 0, s, fa);
  void* a1[] = {&px, &pt, const_cast<unsigned long long*>(&n4)};
  void* a2[] = {&pt, &p1, const_cast<unsigned long long*>(&n4)};
  void* a3[] = {&px, &p2, const_cast<unsigned long long*>(&n4)};
  launch(cos1, {512}, {256}, 0, s, a1);
  launch(cos1, {512}, {256}, 0, s, a2);
  launch(cos2, {512}, {256}, 0, s, a3);
  std::vector<float> hx(n), h1(n), h2(n);
  copy_d2h(hx.data(), px, n * 4, s, "x");
  copy_d2h(h1.data(), p1, n * 4, s, "y1");
  copy_d2h(h2.data(), p2, n * 4, s, "y2");
  s.synchronize();
  EXPECT_EQ(h1, h2) << "fused and unfused must compute the same function";
  std::vector<double> ref(n);
  float lo = 0, hi = 0;
  for (size_t i = 0; i < n; ++i) {
    ref[i] = std::cos(std::cos(double(hx[i])));
    lo = std::min(lo, hx[i]);
    hi = std::max(hi, hx[i]);
  }
  EXPECT_LT(lo, -9.f);  // the fill kernel wrote random data over the whole range
  EXPECT_GT(hi, 9.f);
  EXPECT_LT(brrr_cuda_test::rel_l2(h2, ref), 1e-6);
}

#else
TEST(CudaNvrtc, NotBuilt) { GTEST_SKIP() << "no CUDA device: built without the CUDA toolkit"; }
#endif
