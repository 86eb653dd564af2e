// Faults in the on-disk kernel cache (truncated, bit-flipped, emptied or swapped entries, two
// processes filling one cache, unwritable folders) and in the compiler (missing, failing, hanging).
// Every one ends in correct kernels or a clear brrr::Error.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include "env_var.hpp"
#include "backend/cpu/compiler.hpp"
#include "brrr/error.hpp"

namespace brrr {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / fmt::format("brrr_cachefault_{}_{}", tag, getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string src_returning(int v) {
  return fmt::format("extern \"C\" int brrr_value() {{ return {}; }}\n", v);
}

int value(const cpu::CompiledModule& m) {
  return reinterpret_cast<int (*)()>(m.symbol("brrr_value"))();
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Replaces a file by rename (a loaded library must never be rewritten in place).
void replace_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path + ".new", std::ios::binary) << bytes;
  fs::rename(path + ".new", path);
}

using brrr_test::EnvVar;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a brrr::Error";
  return "";
}

// Each damaged entry is detected (not from cache) and rebuilt with the right result.
TEST(CacheFaults, DamagedEntriesAreRebuilt) {
  cpu::CompileOptions o;
  o.cache_dir = fresh_dir("damage").string();
  std::string so;
  {
    auto m = cpu::compile_cpp(src_returning(7), o);
    so = m->path();
    EXPECT_EQ(value(*m), 7);
  }
  std::string good = slurp(so);
  ASSERT_GT(good.size(), 100u);
  struct Case {
    const char* what;
    std::string bytes;
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x10;
  std::vector<Case> cases = {
      {"truncated", good.substr(0, good.size() - 1)}, {"bit-flipped", flipped}, {"emptied", ""}};
  for (const Case& c : cases) {
    replace_file(so, c.bytes);
    auto m = cpu::compile_cpp(src_returning(7), o);
    EXPECT_FALSE(m->from_cache()) << c.what;
    EXPECT_EQ(value(*m), 7) << c.what;
    auto again = cpu::compile_cpp(src_returning(7), o);
    EXPECT_TRUE(again->from_cache()) << c.what << ": the rebuilt entry is valid";
  }
  // A damaged or missing hash file alone also forces a rebuild.
  replace_file(so + ".hash", "0123");
  EXPECT_FALSE(cpu::compile_cpp(src_returning(7), o)->from_cache());
  fs::remove(so + ".hash");
  EXPECT_FALSE(cpu::compile_cpp(src_returning(7), o)->from_cache());
}

// Model A's valid .so + .hash copied over model B's names must not load as B.
TEST(CacheFaults, SwappedEntryIsRejected) {
  cpu::CompileOptions o;
  o.cache_dir = fresh_dir("swap").string();
  std::string a_so, b_so;
  {
    auto a = cpu::compile_cpp(src_returning(1), o);
    auto b = cpu::compile_cpp(src_returning(2), o);
    a_so = a->path();
    b_so = b->path();
  }
  ASSERT_NE(a_so, b_so);
  replace_file(b_so, slurp(a_so));
  replace_file(b_so + ".hash", slurp(a_so + ".hash"));
  auto b = cpu::compile_cpp(src_returning(2), o);
  EXPECT_FALSE(b->from_cache()) << "a swapped entry passed the hash check";
  EXPECT_EQ(value(*b), 2);
  EXPECT_TRUE(cpu::compile_cpp(src_returning(1), o)->from_cache());
}

// Two `brrr run` processes fill one fresh cache at the same time: both correct.
TEST(CacheFaults, TwoProcessesShareOneFreshCache) {
  fs::path xdg = fresh_dir("concurrent");
  std::string data = std::string(BRRR_TEST_DATA) + "/cli";
  // One shell starts both in the background and waits; each records its exit status.
  std::string cmd;
  for (int i = 0; i < 2; ++i)
    cmd += fmt::format(
        "(XDG_CACHE_HOME='{0}' '{1}' run '{2}/add_relu.onnx' --data '{2}/data_ok' --check "
        ">'{0}/out{3}' 2>&1; echo $? >'{0}/rc{3}') & ",
        xdg.string(), BRRR_CLI, data, i);
  cmd += "wait";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (int i = 0; i < 2; ++i) {
    std::string out = slurp(xdg / fmt::format("out{}", i));
    EXPECT_EQ(slurp(xdg / fmt::format("rc{}", i)), "0\n") << out;
    EXPECT_NE(out.find("check: PASS"), std::string::npos) << out;
  }
  // No temporary files left behind, and the published entry is valid for a third run.
  int so = 0;
  for (const auto& e : fs::recursive_directory_iterator(xdg)) {
    std::string n = e.path().filename().string();
    EXPECT_EQ(n.find(".cpp"), std::string::npos) << n;
    if (n.size() > 3 && n.substr(n.size() - 3) == ".so") ++so;
  }
  EXPECT_GE(so, 1);
}

TEST(CacheFaults, UnwritableFoldersFallBackToTemp) {
  fs::path base = fresh_dir("unwritable");
  std::ofstream(base / "file") << "x";
  for (std::string dir : {(base / "file").string(),          // a file where the folder should be
                          (base / "file" / "sub").string(),  // under a file
                          std::string("/proc/brrr_cache")}) {
    cpu::CompileOptions o;
    o.cache_dir = dir;
    auto m = cpu::compile_cpp(src_returning(5), o);
    EXPECT_EQ(value(*m), 5) << dir;
    EXPECT_EQ(m->path().rfind(dir, 0), std::string::npos) << m->path();
    EXPECT_NE(cpu::resolve_cache_dir(o), dir);
  }
  if (geteuid() != 0) {  // root ignores permission bits
    fs::path ro = base / "ro";
    fs::create_directories(ro);
    chmod(ro.c_str(), 0555);
    cpu::CompileOptions o;
    o.cache_dir = ro.string();
    EXPECT_EQ(value(*cpu::compile_cpp(src_returning(6), o)), 6);
    EXPECT_NE(cpu::resolve_cache_dir(o), ro.string());
    chmod(ro.c_str(), 0755);
  }
}

TEST(CacheFaults, CacheDirWithQuotesAndSpaces) {
  fs::path d = fresh_dir("quote") / "it's a \"dir\" $(x)";
  cpu::CompileOptions o;
  o.cache_dir = d.string();
  auto m = cpu::compile_cpp(src_returning(9), o);
  EXPECT_EQ(value(*m), 9);
  EXPECT_EQ(m->path().rfind(d.string(), 0), 0u) << m->path();
}

TEST(CacheFaults, KeyCoversCompilerFlagsAndTarget) {
  std::string k = cpu::cache_key("src", "g++ 13", "-O3", "avx2");
  EXPECT_EQ(k, cpu::cache_key("src", "g++ 13", "-O3", "avx2"));
  EXPECT_NE(k, cpu::cache_key("src2", "g++ 13", "-O3", "avx2"));
  EXPECT_NE(k, cpu::cache_key("src", "clang 18", "-O3", "avx2"));
  EXPECT_NE(k, cpu::cache_key("src", "g++ 13", "-O2", "avx2"));
  EXPECT_NE(k, cpu::cache_key("src", "g++ 13", "-O3", "avx512f"));
  // Fields cannot slide into each other.
  EXPECT_NE(cpu::cache_key("ab", "c", "d", "e"), cpu::cache_key("a", "bc", "d", "e"));
  EXPECT_EQ(k.size(), 32u);
}

// Writes an executable shell script.
std::string script(const fs::path& dir, const std::string& name, const std::string& body) {
  fs::path p = dir / name;
  std::ofstream(p) << "#!/bin/sh\n" << body;
  chmod(p.c_str(), 0755);
  return p.string();
}

TEST(CacheFaults, ChangingTheCompilerMissesTheCache) {
  fs::path d = fresh_dir("cxx");
  cpu::CompileOptions o;
  o.cache_dir = (d / "cache").string();
  auto a = cpu::compile_cpp(src_returning(3), o);
  // Same real compiler behind a wrapper whose --version differs: a different key.
  std::string w = script(d, "wrapped-g++",
                         "if [ \"$1\" = --version ]; then echo 'wrapped g++ 99'; exit 0; fi\n"
                         "exec g++ \"$@\"\n");
  EnvVar cxx("BRRR_CXX", w);
  auto b = cpu::compile_cpp(src_returning(3), o);
  EXPECT_FALSE(b->from_cache());
  EXPECT_NE(a->path(), b->path());
  EXPECT_EQ(value(*b), 3);
  // The vector-math library changes the link line: another key.
  cpu::CompileOptions v = o;
  v.vector_math = true;
  if (cpu::sleef_gnuabi_available()) {
    auto c = cpu::compile_cpp(src_returning(3), v);
    EXPECT_NE(c->path(), b->path());
  }
}

// libsleef3 without libsleef-dev has libsleefgnuabi.so.3 but no libsleefgnuabi.so, so the linker
// cannot resolve -lsleefgnuabi: the vector-math link names the file the loader found instead.
TEST(CompilerFaults, VectorMathLinksWithoutTheDevSymlink) {
  if (!cpu::sleef_gnuabi_available())
    GTEST_SKIP() << "libsleefgnuabi cannot be loaded: generated kernels use scalar libm";
  EXPECT_TRUE(fs::path(cpu::sleef_gnuabi_path()).is_absolute()) << cpu::sleef_gnuabi_path();
  EXPECT_TRUE(fs::exists(cpu::sleef_gnuabi_path())) << cpu::sleef_gnuabi_path();
  fs::path d = fresh_dir("nodev");
  // A compiler whose linker has no libsleefgnuabi.so, like a machine without libsleef-dev.
  std::string w = script(d, "g++-without-sleef-dev",
                         "for a in \"$@\"; do [ \"$a\" = -lsleefgnuabi ] && "
                         "{ echo 'ld: cannot find -lsleefgnuabi' >&2; exit 1; }; done\n"
                         "exec g++ \"$@\"\n");
  EnvVar cxx("BRRR_CXX", w);
  cpu::CompileOptions o;
  o.cache_dir = (d / "cache").string();
  o.vector_math = true;
  auto m = cpu::compile_cpp(src_returning(5), o);
  EXPECT_EQ(value(*m), 5);
}

TEST(CompilerFaults, MissingCompiler) {
  fs::path d = fresh_dir("missing");
  cpu::CompileOptions o;
  o.cache_dir = (d / "cache").string();
  o.dump_dir = (d / "dump").string();
  std::string cxx = (d / "no-such-g++").string();
  EnvVar e("BRRR_CXX", cxx);
  std::string m = error_of([&] { cpu::compile_cpp(src_returning(1), o); });
  EXPECT_NE(m.find(cxx), std::string::npos) << m;
  EXPECT_NE(m.find("not found"), std::string::npos) << m;  // the shell's log line
  EXPECT_NE(m.find(o.dump_dir), std::string::npos) << m;
  // The named source exists and holds the generated code.
  size_t at = m.find("source: ");
  ASSERT_NE(at, std::string::npos) << m;
  std::string path = m.substr(at + 8, m.find('\n', at) - at - 8);
  EXPECT_EQ(slurp(path), src_returning(1)) << path;
}

TEST(CompilerFaults, FailingCompilerMessageIsReported) {
  fs::path d = fresh_dir("failing");
  std::string cxx = script(d, "bad-g++",
                           "if [ \"$1\" = --version ]; then echo 'bad g++ 1'; exit 0; fi\n"
                           "echo 'internal compiler error: brrr test sentinel' >&2\nexit 1\n");
  EnvVar e("BRRR_CXX", cxx);
  cpu::CompileOptions o;
  o.cache_dir = (d / "cache").string();
  std::string m = error_of([&] { cpu::compile_cpp(src_returning(1), o); });
  EXPECT_NE(m.find("brrr test sentinel"), std::string::npos) << m;
  EXPECT_NE(m.find("exit 1"), std::string::npos) << m;
  EXPECT_NE(m.find(cxx), std::string::npos) << m;
  EXPECT_NE(m.find("source: "), std::string::npos) << m;
}

TEST(CompilerFaults, HangingCompilerTimesOut) {
  fs::path d = fresh_dir("hang");
  // Not `exec sleep`: the timeout must stop the whole process group, or the pipe stays open.
  std::string cxx = script(d, "slow-g++",
                           "if [ \"$1\" = --version ]; then echo 'slow g++ 1'; exit 0; fi\n"
                           "sleep 60\nexit 0\n");
  EnvVar e("BRRR_CXX", cxx);
  EnvVar t("BRRR_COMPILE_TIMEOUT", "2");
  cpu::CompileOptions o;
  o.cache_dir = (d / "cache").string();
  auto t0 = std::chrono::steady_clock::now();
  std::string m = error_of([&] { cpu::compile_cpp(src_returning(1), o); });
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(m.find("timed out after 2 s"), std::string::npos) << m;
  EXPECT_NE(m.find(cxx), std::string::npos) << m;
  EXPECT_LT(s, 30.0) << "the timeout did not stop the compiler";  // a hang, not a speed check
}

}  // namespace
}  // namespace brrr
