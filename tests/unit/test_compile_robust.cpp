// The run-time C++ compile against hostile surroundings: tampered cache entries (a symlink to
// /dev/zero, FIFOs, an oversized file) are misses that never hang or grow without bound; killing
// brrr mid-compile leaves no compiler and no temp files; failures are one line naming a log, and
// failed sources stay in one bounded place.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "backend/cpu/compiler.hpp"
#include "bounded_run.hpp"
#include "env_var.hpp"
#include "hostile_util.hpp"

extern char** environ;

namespace brrr {
namespace {

namespace fs = std::filesystem;
using brrr_test::EnvVar;

fs::path fresh(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / fmt::format("brrr_robust_{}_{}", tag, getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string src_returning(int v) {
  return fmt::format("extern \"C\" int brrr_robust_value() {{ return {}; }}\n", v);
}

int value(const cpu::CompiledModule& m) {
  return reinterpret_cast<int (*)()>(m.symbol("brrr_robust_value"))();
}

std::string script(const fs::path& dir, const std::string& name, const std::string& body) {
  fs::path p = dir / name;
  std::ofstream(p) << "#!/bin/sh\n" << body;
  chmod(p.c_str(), 0755);
  return p.string();
}

// Each tampered entry is a miss, rebuilt and replaced by a valid regular file; within 60 s and
// 3 GiB of address space (before: 17 GB from /dev/zero, a FIFO hung forever).
TEST(CacheTamper, NonRegularOrHugeEntriesAreMisses) {
  cpu::CompileOptions o;
  o.cache_dir = fresh("tamper").string();
  std::string so = cpu::compile_cpp(src_returning(11), o)->path();
  struct Case {
    const char* what;
    std::function<void()> damage;
  };
  auto fifo = [](const std::string& p) {
    fs::remove(p);
    ASSERT_EQ(mkfifo(p.c_str(), 0644), 0);
  };
  std::vector<Case> cases = {
      {"so -> /dev/zero",
       [&] {
         fs::remove(so);
         fs::create_symlink("/dev/zero", so);
       }},
      {"hash -> /dev/zero",
       [&] {
         fs::remove(so + ".hash");
         fs::create_symlink("/dev/zero", so + ".hash");
       }},
      {"so is a FIFO", [&] { fifo(so); }},
      {"hash is a FIFO", [&] { fifo(so + ".hash"); }},
      {"so is 4 GiB (sparse)", [&] { fs::resize_file(so, uintmax_t(4) << 30); }},
  };
  for (const Case& c : cases) {
    c.damage();
    std::string r = brrr_test::run_bounded(
        [&] {
          auto m = cpu::compile_cpp(src_returning(11), o);
          if (m->from_cache()) return std::string("the tampered entry was a hit");
          if (value(*m) != 11) return std::string("wrong kernel");
          if (!cpu::compile_cpp(src_returning(11), o)->from_cache())
            return std::string("the rebuilt entry is not a hit");
          return std::string();
        },
        60, size_t(3) << 30);
    EXPECT_EQ(r, "") << c.what;
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(so))) << c.what;
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(so + ".hash"))) << c.what;
  }
}

bool alive(pid_t pid) {
  std::ifstream f(fmt::format("/proc/{}/stat", pid));
  std::string stat{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  size_t p = stat.rfind(')');
  return p != std::string::npos && p + 2 < stat.size() && stat[p + 2] != 'Z';
}

std::vector<pid_t> read_pids(const fs::path& f) {
  std::ifstream in(f);
  std::vector<pid_t> v;
  for (pid_t p; in >> p;) v.push_back(p);
  return v;
}

// Starts `brrr run` with a compiler that records its pids and sleeps, sends `sig` to brrr once
// the compiler runs, and returns the compiler's pids.
std::vector<pid_t> kill_during_compile(const fs::path& d, const std::string& cxx, int sig,
                                       size_t npids) {
  std::string data = std::string(BRRR_TEST_DATA) + "/cli";
  std::vector<std::string> env = {"XDG_CACHE_HOME=" + (d / "xdg").string(), "BRRR_CXX=" + cxx,
                                  "TMPDIR=" + (d / "tmp").string()};
  fs::create_directories(d / "tmp");
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("XDG_CACHE_HOME=", 0) && std::string(*e).rfind("BRRR_CXX=", 0) &&
        std::string(*e).rfind("TMPDIR=", 0))
      env.push_back(*e);
  std::vector<std::string> args = {BRRR_CLI, "run", data + "/add_relu.onnx", "--data",
                                   data + "/data_ok"};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  for (auto& e : env) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, (d / "stderr").c_str(), O_WRONLY | O_CREAT, 0644);
  pid_t cli = -1;
  EXPECT_EQ(posix_spawn(&cli, BRRR_CLI, &fa, nullptr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  while ((pids = read_pids(d / "pids")).size() < npids &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(pids.size(), npids) << "the compiler never started: " << hostile::slurp(d / "stderr");
  kill(cli, sig);
  int st = 0;
  waitpid(cli, &st, 0);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == sig) << "status " << st;
  // The kill is asynchronous: give the compiler a moment to go.
  t0 = std::chrono::steady_clock::now();
  auto any_alive = [&] {
    for (pid_t p : pids)
      if (alive(p)) return true;
    return false;
  };
  while (any_alive() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return pids;
}

TEST(CompilerSignals, KilledBrrrLeavesNoCompilerAndNoTempFiles) {
  for (int sig : {SIGTERM, SIGINT}) {
    fs::path d = fresh(fmt::format("sig{}", sig));
    // The shell and a child of its own, as g++ runs cc1plus.
    std::string cxx = script(d, "slow-g++",
                             "if [ \"$1\" = --version ]; then echo 'slow g++ 1'; exit 0; fi\n"
                             "sleep 120 &\necho $$ $! >> '" +
                                 (d / "pids").string() + "'\nwait\n");
    for (pid_t p : kill_during_compile(d, cxx, sig, 2))
      EXPECT_FALSE(alive(p)) << "signal " << sig << ": compiler process " << p << " survived";
    for (const auto& e : fs::recursive_directory_iterator(d / "xdg")) {
      std::string n = e.path().filename().string();
      EXPECT_EQ(n.find(".tmp"), std::string::npos) << "signal " << sig << ": left " << n;
      EXPECT_EQ(n.find(".cpp"), std::string::npos) << "signal " << sig << ": left " << n;
    }
  }
}

// SIGKILL cannot be caught: PR_SET_PDEATHSIG still takes the compiler down with brrr.
TEST(CompilerSignals, SigkilledBrrrTakesTheCompilerWithIt) {
  fs::path d = fresh("sigkill");
  std::string cxx = script(d, "slow-g++",
                           "if [ \"$1\" = --version ]; then echo 'slow g++ 1'; exit 0; fi\n"
                           "echo $$ >> '" +
                               (d / "pids").string() + "'\nexec sleep 120\n");
  for (pid_t p : kill_during_compile(d, cxx, SIGKILL, 1))
    EXPECT_FALSE(alive(p)) << "compiler process " << p << " survived";
}

TEST(CompilerFaults, FailureIsOneLineNamingItsLog) {
  fs::path d = fresh("oneline");
  std::string cxx = script(d, "bad-g++",
                           "if [ \"$1\" = --version ]; then echo 'bad g++ 1'; exit 0; fi\n"
                           "echo 'In file included from x.cpp:1:' >&2\n"
                           "echo 'x.cpp:3:1: error: brrr sentinel' >&2\n"
                           "echo 'note: one' >&2\necho 'note: two' >&2\nexit 1\n");
  EnvVar e("BRRR_CXX", cxx);
  cpu::CompileOptions o;
  o.cache_dir = (d / "cache").string();
  std::string m = hostile::error_of([&] { cpu::compile_cpp(src_returning(1), o); });
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_NE(m.find("error: brrr sentinel"), std::string::npos) << m;
  size_t l = m.find("log: "), s = m.find("; source: ");
  ASSERT_NE(l, std::string::npos) << m;
  ASSERT_NE(s, std::string::npos) << m;
  std::string log = m.substr(l + 5, s - l - 5), src = m.substr(s + 10);
  EXPECT_NE(hostile::slurp(log).find("note: two"), std::string::npos) << log;
  EXPECT_EQ(hostile::slurp(src), src_returning(1)) << src;
}

TEST(CompilerFaults, FailedSourcesAreBounded) {
  fs::path d = fresh("bounded");
  std::string cxx = script(d, "bad-g++",
                           "if [ \"$1\" = --version ]; then echo 'bad g++ 2'; exit 0; fi\n"
                           "echo 'error: no' >&2\nexit 1\n");
  EnvVar e("BRRR_CXX", cxx);
  cpu::CompileOptions o;
  o.cache_dir = (d / "cache").string();
  for (int i = 0; i < 7; ++i) hostile::error_of([&] { cpu::compile_cpp(src_returning(i), o); });
  int sources = 0;
  for (const auto& f : fs::recursive_directory_iterator(d / "cache"))
    sources += f.path().extension() == ".cpp";
  EXPECT_LE(sources, 4) << "failed sources pile up in the cache";
  EXPECT_GE(sources, 1) << "the latest failure's source is kept";
}

// compile_cpp from several threads at once (fusion may compile a model's parts in parallel):
// distinct and identical sources into one cache, every result right, no temp files left.
TEST(CompilerThreads, ParallelCompilesShareOneCache) {
  cpu::CompileOptions o;
  o.cache_dir = fresh("threads").string();
  std::vector<std::thread> ts;
  std::vector<int> got(8, -1);
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&, i] {
      try {
        got[size_t(i)] = value(*cpu::compile_cpp(src_returning(i % 2 ? 100 : 200 + i), o));
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[size_t(i)], i % 2 ? 100 : 200 + i) << i;
  for (const auto& e : fs::recursive_directory_iterator(o.cache_dir)) {
    std::string n = e.path().filename().string();
    EXPECT_EQ(n.find(".tmp"), std::string::npos) << n;
  }
}

// A read-only cache: every run shares one private temp folder instead of leaving a new one.
TEST(CacheFaults, UnusableCacheReusesOnePrivateTempDir) {
  fs::path d = fresh("rotmp");
  std::ofstream(d / "file") << "x";
  fs::create_directories(d / "tmp");
  std::string data = std::string(BRRR_TEST_DATA) + "/cli";
  for (int i = 0; i < 2; ++i) {
    std::string cmd = fmt::format(
        "XDG_CACHE_HOME='{0}/file/sub' TMPDIR='{0}/tmp' '{1}' run '{2}/add_relu.onnx' --data "
        "'{2}/data_ok' --check >/dev/null 2>&1",
        d.string(), BRRR_CLI, data);
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(d / "tmp")) dirs.push_back(e.path().filename());
  ASSERT_EQ(dirs.size(), 1u) << dirs.size() << " temp folders";
  EXPECT_EQ(dirs[0], fmt::format("brrr-cache-{}", geteuid()));
  struct stat st {};
  ASSERT_EQ(lstat((d / "tmp" / dirs[0]).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

}  // namespace
}  // namespace brrr
