// cuBLASLt algorithm tuning: the pick rule and the on-disk cache of choices on the host (round
// trip, corrupt and hostile entries, key mismatches), and on a device: tuned GEMMs equal untuned
// ones, and a second session takes the first one's choice from the cache.
#include <gtest/gtest.h>

#ifdef BRRR_HAVE_CUDA
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "brrr/error.hpp"
#include "core/env.hpp"

#include "backend/cuda/cublaslt_gemm.hpp"
#include "backend/cuda/gemm_tune.hpp"
#include "core/kernel_cache.hpp"
#include "cuda_test_util.hpp"
#include "env_var.hpp"

using namespace brrr::cuda;
namespace bt = brrr_cuda_test;
namespace fs = std::filesystem;

namespace {

// A fresh folder per test, under one per process removed at exit.
fs::path fresh_dir(const std::string& name) {
  static const fs::path root = [] {
    fs::path p = fs::temp_directory_path() / ("brrr_gemmtune_" + std::to_string(getpid()));
    fs::remove_all(p);
    return p;
  }();
  static struct Cleanup {
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(root, ec);
    }
  } cleanup;
  fs::path d = root / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TunedAlgo sample_algo() {
  TunedAlgo a;
  for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = 0x0123456789abcdefull * (i + 1);
  a.config = "id 66 tile 20 stages 35 splitK 2 reduction 2 swizzle 0 custom 0 cluster 2";
  a.chosen_us = 3.25;
  a.heuristic_us = 7.5;
  a.candidates = 24;
  return a;
}

void expect_same(const TunedAlgo& x, const TunedAlgo& y) {
  EXPECT_EQ(x.data, y.data);
  EXPECT_EQ(x.config, y.config);
  EXPECT_DOUBLE_EQ(x.chosen_us, y.chosen_us);
  EXPECT_DOUBLE_EQ(x.heuristic_us, y.heuristic_us);
  EXPECT_EQ(x.candidates, y.candidates);
}

const char* kCtx = "gpu 'NVIDIA H200' sms 132 cublaslt 130100 workspace 33554432 brrr 0.1.0";
const char* kGemm = "bf16 epilogue bias m 128 n 768 k 3072 batch 1 layout rowmajor-contiguous";

TEST(GemmTunePick, FastestOnlyWhenItBeatsHeuristicZeroByTheMargin) {
  EXPECT_EQ(pick_candidate({10.0, 9.6, 9.8}), 0);   // 4% faster: keep #0
  EXPECT_EQ(pick_candidate({10.0, 9.4, 9.8}), 1);   // 6% faster
  EXPECT_EQ(pick_candidate({10.0, 9.4, 5.0}), 2);   // the fastest, not the first that beats #0
  EXPECT_EQ(pick_candidate({5.0, 9.0, 8.0}), 0);
  EXPECT_EQ(pick_candidate({10.0, -1.0, 4.0}), 2);  // a failed candidate is skipped
  EXPECT_EQ(pick_candidate({-1.0, 8.0, 6.0}), 2);   // #0 failed: the fastest that ran
  EXPECT_EQ(pick_candidate({10.0, NAN, INFINITY}), 0);
  EXPECT_EQ(pick_candidate({10.0}), 0);
  EXPECT_EQ(pick_candidate({}), 0);
  EXPECT_DOUBLE_EQ(median_of({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median_of({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(median_of({}), 0);
}

TEST(GemmTuneCache, EntryTextRoundTrips) {
  TunedAlgo a = sample_algo();
  std::string text = format_tune_entry(kCtx, kGemm, a);
  std::string why;
  auto b = parse_tune_entry(text, kCtx, kGemm, &why);
  ASSERT_TRUE(b) << why;
  expect_same(a, *b);
}

TEST(GemmTuneCache, StoreThenLookupInAnotherCacheObject) {
  fs::path d = fresh_dir("roundtrip");
  GemmTuneCache c1(d.string(), kCtx);
  EXPECT_FALSE(c1.lookup(kGemm));  // never tuned: a silent miss
  ASSERT_TRUE(c1.store(kGemm, sample_algo()));
  EXPECT_TRUE(fs::is_regular_file(c1.entry_path(kGemm)));
  GemmTuneCache c2(d.string(), kCtx);  // the next session
  auto got = c2.lookup(kGemm);
  ASSERT_TRUE(got);
  expect_same(sample_algo(), *got);
  EXPECT_FALSE(c2.lookup("fp16 epilogue none m 1 n 2 k 3 batch 1 layout rowmajor-contiguous"));
}

TEST(GemmTuneCache, OtherDeviceOrLibraryMisses) {
  fs::path d = fresh_dir("context");
  GemmTuneCache(d.string(), kCtx).store(kGemm, sample_algo());
  std::string other = std::string(kCtx);
  other.replace(other.find("130100"), 6, "130200");
  GemmTuneCache c(d.string(), other);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(c.lookup(kGemm));  // another key: nothing to warn about
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_NE(c.entry_path(kGemm), GemmTuneCache(d.string(), kCtx).entry_path(kGemm));
}

TEST(GemmTuneCache, KeyMismatchInsideAValidEntryIsRejected) {
  std::string text = format_tune_entry(kCtx, kGemm, sample_algo());
  std::string why;
  EXPECT_FALSE(parse_tune_entry(text, "gpu 'other'", kGemm, &why));
  EXPECT_NE(why.find("another device"), std::string::npos) << why;
  EXPECT_FALSE(parse_tune_entry(text, kCtx, "fp32 epilogue none m 1 n 1 k 1 batch 1", &why));
  EXPECT_NE(why.find("another GEMM"), std::string::npos) << why;

  // Another GEMM's entry published (with a valid hash) under this GEMM's name: a warned miss.
  fs::path d = fresh_dir("swapped");
  GemmTuneCache c(d.string(), kCtx);
  const std::string other = "fp16 epilogue none m 8 n 8 k 8 batch 1 layout rowmajor-contiguous";
  const std::string key = fs::path(c.entry_path(kGemm)).stem().string();
  ASSERT_TRUE(brrr::KernelCache(d.string(), ".gemmtune").publish(key, format_tune_entry(kCtx, other, sample_algo())));
  testing::internal::CaptureStderr();
  EXPECT_FALSE(c.lookup(kGemm));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("another GEMM"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  ASSERT_TRUE(c.store(kGemm, sample_algo()));  // re-tuned: the entry is replaced
  EXPECT_TRUE(c.lookup(kGemm));
}

TEST(GemmTuneCache, CorruptEntriesAreOneLineWarningsNotCrashes) {
  fs::path d = fresh_dir("corrupt");
  GemmTuneCache c(d.string(), kCtx);
  const std::string good = format_tune_entry(kCtx, kGemm, sample_algo());
  const std::string key = fs::path(c.entry_path(kGemm)).stem().string();
  brrr::KernelCache kc(d.string(), ".gemmtune");
  auto expect_warned_miss = [&](const std::string& what) {
    testing::internal::CaptureStderr();
    EXPECT_FALSE(c.lookup(kGemm)) << what;
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("ignoring GEMM tuning cache entry"), std::string::npos) << what << ": " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << what << ": " << err;
  };
  // Bytes changed after publishing: the hash no longer matches.
  ASSERT_TRUE(c.store(kGemm, sample_algo()));
  {
    std::string t = good;
    t[t.find("algo ") + 6] ^= 1;
    std::ofstream(c.entry_path(kGemm), std::ios::binary | std::ios::trunc) << t;
  }
  expect_warned_miss("edited bytes");
  std::ofstream(c.entry_path(kGemm), std::ios::binary | std::ios::trunc) << good.substr(0, 40);
  expect_warned_miss("truncated");
  // Malformed text with a valid hash (written by hand or by another version).
  const std::string cases[] = {
      "",
      "garbage\n",
      good.substr(0, good.rfind("timing")),
      good + "extra line\n",
      std::string(good).replace(good.find("algo ") + 5, 16, "0123456789abcdeZ"),
      std::string(good).replace(good.find("algo ") + 5, 17, ""),
      std::string(good).replace(good.find("timing ") + 7, 5, "-3.25"),
      std::string(good).replace(good.find("timing ") + 7, 5, "nan  "),
      std::string(good).replace(good.rfind(" 24"), 3, " 1e99"),
      std::string(4000, '\n'),
      std::string("brrr-gemm-tune 1\0context", 24),
  };
  for (const std::string& t : cases) {
    if (t.empty()) {
      // KernelCache refuses to publish nothing; an empty object file is the same damage.
      ASSERT_TRUE(c.store(kGemm, sample_algo()));
      std::ofstream(c.entry_path(kGemm), std::ios::trunc);
    } else {
      ASSERT_TRUE(kc.publish(key, t));
    }
    expect_warned_miss(t.substr(0, 60));
  }
  // Not a regular file: a folder or a symlink in the entry's place.
  fs::remove(c.entry_path(kGemm));
  fs::create_directory(c.entry_path(kGemm));
  expect_warned_miss("a folder");
  fs::remove(c.entry_path(kGemm));
  fs::create_symlink("/dev/zero", c.entry_path(kGemm));
  expect_warned_miss("a symlink to /dev/zero");
  fs::remove(c.entry_path(kGemm));
  ASSERT_TRUE(c.store(kGemm, sample_algo()));  // replaced by the next tuning
  EXPECT_TRUE(c.lookup(kGemm));
}

TEST(GemmTuneCache, DisabledCacheNeverReadsOrWrites) {
  fs::path d = fresh_dir("disabled");
  GemmTuneCache none("", kCtx);
  EXPECT_FALSE(none.store(kGemm, sample_algo()));
  EXPECT_FALSE(none.lookup(kGemm));
  brrr_test::EnvVar off("BRRR_DISABLE_CACHE", "1");
  GemmTuneCache c(d.string(), kCtx);
  EXPECT_FALSE(c.store(kGemm, sample_algo()));
  EXPECT_TRUE(fs::is_empty(d));
}

TEST(GemmTuneCache, BadSwitchValueIsAnError) {
  // LtGemm::enable_tuning reads the switch through the table; an LtGemm needs a device, so the
  // parse is checked here directly.
  EXPECT_EQ(brrr::env::integer("BRRR_GEMM_TUNE"), 0)
      << "tuning is off by default (BERT-base bf16 on an H200: no gain at batch 1, 1.5% at 32)";
  brrr_test::EnvVar bad("BRRR_GEMM_TUNE", "yes");
  EXPECT_THROW(brrr::env::integer("BRRR_GEMM_TUNE"), brrr::Error);
  brrr_test::EnvVar two("BRRR_GEMM_TUNE", "2");
  EXPECT_THROW(brrr::env::integer("BRRR_GEMM_TUNE"), brrr::Error);
}

// ---- On a device ----

struct Buffers {
  GemmShape sh;
  DeviceBuffer a, b, c, bias;
};

// bf16 operands: multiples of 1/64 in [-2, 2] (exact), so tuned and untuned differ only by the
// order of their sums.
std::unique_ptr<Buffers> make_buffers(GemmPrecision p, const GemmShape& sh, const Stream& s) {
  auto bufs = std::make_unique<Buffers>();
  bufs->sh = sh;
  const size_t eb = element_bytes(p);
  std::mt19937 rng(99 + int(sh.n) + int(sh.k));
  std::uniform_int_distribution<int> qi(-128, 128);
  auto upload = [&](size_t n, DeviceBuffer& d, const char* what) {
    d = DeviceBuffer(n * eb, what);
    std::vector<std::uint16_t> h16(n);
    std::vector<float> h32(n);
    for (size_t i = 0; i < n; ++i) {
      float v = qi(rng) / 64.0f;
      h32[i] = v;
      h16[i] = p == GemmPrecision::kFp16 ? bt::f32_to_f16_exact(v) : bt::f32_to_bf16_exact(v);
    }
    copy_h2d(d.ptr(), eb == 2 ? static_cast<const void*>(h16.data()) : h32.data(), n * eb, s, what);
    s.synchronize();
  };
  upload(size_t(sh.batch * sh.m * sh.k), bufs->a, "A");
  upload(size_t(sh.batch * sh.k * sh.n), bufs->b, "B");
  upload(size_t(sh.n), bufs->bias, "bias");
  bufs->c = DeviceBuffer(size_t(sh.batch * sh.m * sh.n) * eb, "C");
  return bufs;
}

std::vector<float> run_and_fetch(LtGemm& lt, GemmPrecision p, GemmEpilogue e, Buffers& bf,
                                 const Stream& s) {
  memset_u32(bf.c.ptr(), 0x7fc07fc0u, bf.c.size() / 4, s, "poison C");
  lt.run(p, e, bf.sh, bf.a.ptr(), bf.b.ptr(), bf.c.ptr(), bf.bias.ptr(), s, "tune test");
  const size_t n = size_t(bf.sh.batch * bf.sh.m * bf.sh.n);
  std::vector<float> out(n);
  if (element_bytes(p) == 4) {
    copy_d2h(out.data(), bf.c.ptr(), n * 4, s, "C");
    s.synchronize();
    return out;
  }
  std::vector<std::uint16_t> bits(n);
  copy_d2h(bits.data(), bf.c.ptr(), n * 2, s, "C");
  s.synchronize();
  for (size_t i = 0; i < n; ++i)
    out[i] = p == GemmPrecision::kFp16 ? bt::f16_to_f32(bits[i]) : bt::bf16_to_f32(bits[i]);
  return out;
}

struct DevCase {
  GemmPrecision p;
  GemmEpilogue e;
  GemmShape sh;
};
// BERT-base's GEMMs at batch 1, seq 128, and two others.
const DevCase kDevCases[] = {
    {GemmPrecision::kBf16, GemmEpilogue::kBias, {128, 768, 3072}},
    {GemmPrecision::kBf16, GemmEpilogue::kGeluBias, {128, 3072, 768}},
    {GemmPrecision::kBf16, GemmEpilogue::kBias, {128, 768, 768}},
    {GemmPrecision::kBf16, GemmEpilogue::kNone, {128, 128, 64, 12}},
    {GemmPrecision::kFp32, GemmEpilogue::kReluBias, {64, 256, 512}},
};

TEST(CudaGemmTune, TunedResultsEqualUntuned) {
  BRRR_REQUIRE_CUDA_DEVICE();
  brrr_test::EnvVar on("BRRR_GEMM_TUNE", "1");  // off by default
  Device& dev = bt::test_device();
  fs::path d = fresh_dir("device_equal");
  Stream s;
  LtGemm plain, tuned;
  tuned.enable_tuning(dev.info(), d.string());
  ASSERT_TRUE(tuned.tuning());
  for (const DevCase& c : kDevCases) {
    auto bf = make_buffers(c.p, c.sh, s);
    std::vector<float> want = run_and_fetch(plain, c.p, c.e, *bf, s);
    std::vector<float> got = run_and_fetch(tuned, c.p, c.e, *bf, s);
    std::vector<double> ref(want.begin(), want.end());
    const std::string name = gemm_tune_key(c.p, c.e, c.sh);
    EXPECT_LT(bt::rel_l2(got, ref), c.p == GemmPrecision::kFp32 ? 1e-5 : 1e-2) << name;
    EXPECT_EQ(tuned.source(c.p, c.e, c.sh), AlgoSource::kTuned) << name;
    EXPECT_EQ(plain.source(c.p, c.e, c.sh), AlgoSource::kHeuristic) << name;
    std::printf("  %s: %s\n", name.c_str(), tuned.describe(c.p, c.e, c.sh).c_str());
  }
  EXPECT_GT(tuned.tuning_ms(), 0.0);
}

TEST(CudaGemmTune, SecondSessionTakesTheFirstOnesChoiceFromTheCache) {
  BRRR_REQUIRE_CUDA_DEVICE();
  brrr_test::EnvVar on("BRRR_GEMM_TUNE", "1");  // off by default
  Device& dev = bt::test_device();
  fs::path d = fresh_dir("device_sessions");
  Stream s;
  std::vector<std::string> first;
  {
    LtGemm lt;
    lt.enable_tuning(dev.info(), d.string());
    for (const DevCase& c : kDevCases) {
      auto bf = make_buffers(c.p, c.sh, s);
      lt.prepare(c.p, c.e, c.sh, bf->a.ptr(), bf->b.ptr(), bf->c.ptr(), bf->bias.ptr(), s, "s1");
      EXPECT_EQ(lt.source(c.p, c.e, c.sh), AlgoSource::kTuned);
      first.push_back(lt.describe(c.p, c.e, c.sh));
    }
  }
  LtGemm lt;
  lt.enable_tuning(dev.info(), d.string());
  for (size_t i = 0; i < std::size(kDevCases); ++i) {
    const DevCase& c = kDevCases[i];
    auto bf = make_buffers(c.p, c.sh, s);
    std::vector<float> got = run_and_fetch(lt, c.p, c.e, *bf, s);
    EXPECT_EQ(lt.source(c.p, c.e, c.sh), AlgoSource::kCache);
    // The same algorithm (the config before " ("), now from the cache.
    const std::string got_d = lt.describe(c.p, c.e, c.sh);
    EXPECT_EQ(got_d.substr(0, got_d.find(" (")), first[i].substr(0, first[i].find(" (")));
    EXPECT_NE(got_d.find("(tuning cache:"), std::string::npos) << got_d;
    EXPECT_NE(first[i].find("(tuned:"), std::string::npos) << first[i];
    for (float v : got) ASSERT_TRUE(std::isfinite(v));
  }
  EXPECT_EQ(lt.tuning_ms(), 0.0) << "a cache hit times nothing";
}

TEST(CudaGemmTune, SwitchOffKeepsHeuristicZero) {
  BRRR_REQUIRE_CUDA_DEVICE();
  Device& dev = bt::test_device();
  fs::path d = fresh_dir("device_off");
  brrr_test::EnvVar off("BRRR_GEMM_TUNE", "0");
  Stream s;
  LtGemm lt, plain;
  lt.enable_tuning(dev.info(), d.string());
  EXPECT_FALSE(lt.tuning());
  const DevCase& c = kDevCases[0];
  auto bf = make_buffers(c.p, c.sh, s);
  run_and_fetch(lt, c.p, c.e, *bf, s);
  run_and_fetch(plain, c.p, c.e, *bf, s);
  EXPECT_EQ(lt.source(c.p, c.e, c.sh), AlgoSource::kTuningOff);
  EXPECT_NE(lt.describe(c.p, c.e, c.sh).find("BRRR_GEMM_TUNE=0"), std::string::npos);
  // The same algorithm as an LtGemm that never heard of tuning.
  std::string a = lt.describe(c.p, c.e, c.sh), b = plain.describe(c.p, c.e, c.sh);
  EXPECT_EQ(a.substr(0, a.find(" (")), b.substr(0, b.find(" (")));
  EXPECT_TRUE(fs::is_empty(d));
}

// An entry whose algorithm cuBLASLt rejects for this GEMM (an fp32 GEMM's, stored under a bf16
// GEMM's key with a valid hash): re-tuned with a warning, not run.
TEST(CudaGemmTune, CachedAlgorithmFailingTheCheckIsRetuned) {
  BRRR_REQUIRE_CUDA_DEVICE();
  brrr_test::EnvVar on("BRRR_GEMM_TUNE", "1");  // off by default
  Device& dev = bt::test_device();
  fs::path d = fresh_dir("device_check");
  Stream s;
  const DevCase f32{GemmPrecision::kFp32, GemmEpilogue::kNone, {128, 768, 768}};
  const DevCase b16{GemmPrecision::kBf16, GemmEpilogue::kNone, {128, 768, 768}};
  LtGemm first;
  first.enable_tuning(dev.info(), d.string());
  auto bf32 = make_buffers(f32.p, f32.sh, s);
  run_and_fetch(first, f32.p, f32.e, *bf32, s);
  // Find the fp32 entry and re-publish its algorithm under the bf16 key of the same context.
  std::string f32_text;
  for (const auto& ent : fs::directory_iterator(d))
    if (ent.path().extension() == ".gemmtune") f32_text = read_all(ent.path());
  ASSERT_FALSE(f32_text.empty());
  const size_t c0 = f32_text.find("context ") + 8;
  const std::string context = f32_text.substr(c0, f32_text.find('\n', c0) - c0);
  GemmTuneCache cache(d.string(), context);
  auto algo = cache.lookup(gemm_tune_key(f32.p, f32.e, f32.sh));
  ASSERT_TRUE(algo);
  ASSERT_TRUE(cache.store(gemm_tune_key(b16.p, b16.e, b16.sh), *algo));
  LtGemm second;
  second.enable_tuning(dev.info(), d.string());
  auto bb = make_buffers(b16.p, b16.sh, s);
  testing::internal::CaptureStderr();
  std::vector<float> got = run_and_fetch(second, b16.p, b16.e, *bb, s);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("fails cublasLtMatmulAlgoCheck"), std::string::npos) << err;
  EXPECT_EQ(second.source(b16.p, b16.e, b16.sh), AlgoSource::kTuned);
  LtGemm plain;
  std::vector<float> want = run_and_fetch(plain, b16.p, b16.e, *bb, s);
  EXPECT_LT(bt::rel_l2(got, std::vector<double>(want.begin(), want.end())), 1e-2);
}

}  // namespace

#else
TEST(CudaGemmTune, NotBuilt) { GTEST_SKIP() << "no CUDA device: built without the CUDA toolkit"; }
#endif
