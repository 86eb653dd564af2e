// Kernel cache and compiler error paths; memory planner.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backend/cpu/compiler.hpp"
#include "brrr/session.hpp"
#include "runtime/graph_builder.hpp"
#include "passes/plan_memory.hpp"

namespace brrr {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const char* tag) {
  std::string d = fmt::format("{}/brrr_test_{}_{}", fs::temp_directory_path().string(), tag, getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

const char* kSrc = "extern \"C\" int brrr_answer() { return 42; }\n";

int answer(const cpu::CompiledModule& m) {
  return reinterpret_cast<int (*)()>(m.symbol("brrr_answer"))();
}

TEST(KernelCache, SecondCompileHitsCache) {
  cpu::CompileOptions o;
  o.cache_dir = fresh_dir("hit");
  auto a = cpu::compile_cpp(kSrc, o);
  EXPECT_FALSE(a->from_cache());
  auto b = cpu::compile_cpp(kSrc, o);
  EXPECT_TRUE(b->from_cache());
  EXPECT_EQ(answer(*b), 42);
}

TEST(KernelCache, CorruptEntryIsRebuilt) {
  cpu::CompileOptions o;
  o.cache_dir = fresh_dir("corrupt");
  std::string so;
  {
    auto a = cpu::compile_cpp(kSrc, o);
    so = a->path();
  }
  for (int variant = 0; variant < 2; ++variant) {
    // Replace (never truncate in place: the loader may still map the old file).
    std::ifstream in(so, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::string bad = variant == 0 ? bytes.substr(0, bytes.size() / 2) : std::string(100, 'x');
    std::ofstream(so + ".bad", std::ios::binary) << bad;
    fs::rename(so + ".bad", so);
    auto b = cpu::compile_cpp(kSrc, o);
    EXPECT_FALSE(b->from_cache());
    EXPECT_EQ(answer(*b), 42);
  }
}

TEST(KernelCache, UnwritableCacheDirFallsBackToTemp) {
  std::string base = fresh_dir("ro");
  std::string file = base + "/file";
  std::ofstream(file) << "x";
  cpu::CompileOptions o;
  o.cache_dir = file + "/sub";  // under a regular file: cannot be created
  auto a = cpu::compile_cpp(kSrc, o);
  EXPECT_EQ(answer(*a), 42);
  EXPECT_EQ(a->path().rfind(file, 0), std::string::npos);
  if (geteuid() != 0) {  // root ignores permission bits
    std::string ro = base + "/ro";
    fs::create_directories(ro);
    chmod(ro.c_str(), 0555);
    o.cache_dir = ro;
    auto b = cpu::compile_cpp(kSrc, o);
    EXPECT_EQ(answer(*b), 42);
    EXPECT_EQ(b->path().rfind(ro, 0), std::string::npos);
    chmod(ro.c_str(), 0755);
  }
}

TEST(KernelCache, CompilerErrorNamesLogAndSource) {
  cpu::CompileOptions o;
  o.cache_dir = fresh_dir("err");
  o.dump_dir = o.cache_dir + "/dump";
  try {
    cpu::compile_cpp("this is not C++;\n", o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("compiling generated kernels failed"), std::string::npos) << m;
    EXPECT_NE(m.find("error"), std::string::npos) << m;
    EXPECT_NE(m.find(o.dump_dir), std::string::npos) << m;
  }
}

TEST(KernelCache, DumpDirReceivesGeneratedSource) {
  GraphBuilder b;
  int x = b.input("x; system(\"rm -rf /\")", {4});  // model text never becomes an identifier
  b.output(b.node("Cos", {x}));
  SessionOptions so;
  so.fusion = 1;
  so.cache_dir = fresh_dir("dumpc");
  so.dump_dir = fresh_dir("dump");
  Session s(b.g, so);
  int files = 0;
  for (const auto& e : fs::directory_iterator(so.dump_dir)) {
    ++files;
    std::ifstream in(e.path());
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(text.find("system"), std::string::npos);
    EXPECT_NE(text.find("cosf"), std::string::npos);
  }
  EXPECT_EQ(files, 1);
}

TEST(MemoryPlan, DisjointLifetimesShareBytes) {
  // a: kernels 0-1, b: 1-2, c: 2-3. a and c never live together.
  auto p = plan_memory({{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}});
  EXPECT_EQ(p.total_bytes, 3 * 1024u);
  EXPECT_EQ(p.arena_bytes, 2 * 1024u);
  EXPECT_EQ(p.offsets[0], p.offsets[2]);
  EXPECT_NE(p.offsets[0], p.offsets[1]);
}

}  // namespace
}  // namespace brrr
