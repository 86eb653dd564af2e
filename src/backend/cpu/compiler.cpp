#include "backend/cpu/compiler.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "brrr/error.hpp"

namespace brrr::cpu {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFlags = "-O3 -march=native -fopenmp-simd -fno-math-errno -shared -fPIC";

std::string hash_hex(const std::string& data) {
  // Two FNV-1a 64 streams with different seeds: 128 bits, plenty for a cache key.
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  for (unsigned char c : data) {
    h1 = (h1 ^ c) * 0x100000001b3ull;
    h2 = (h2 ^ c) * 0x100000001b3ull;
    h2 ^= h2 >> 29;
  }
  return fmt::format("{:016x}{:016x}", h1, h2);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return false;
  f << data;
  f.close();
  return bool(f);
}

// Runs a shell command; returns its exit status and combined output.
int run_command(const std::string& cmd, std::string* log) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) log->append(buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Single-quoted for /bin/sh; an embedded quote becomes '\'' so any path is safe.
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string compiler() {
  const char* e = std::getenv("BRRR_CXX");
  return e && *e ? e : "g++";
}

std::string compiler_identity(const std::string& cxx) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(cxx);
  if (it != cache.end()) return it->second;
  std::string out;
  int rc = run_command(quote(cxx) + " --version", &out);
  if (rc != 0) {
    if (out.size() > 2000) out = out.substr(0, 2000) + "\n[... log truncated]";
    fail(
        "C++ compiler '{}' (BRRR_CXX) is not usable (needed for generated kernels); "
        "'{} --version' exited {}:\n{}",
        cxx, cxx, rc, out);
  }
  return cache[cxx] = out;
}

std::string cpu_features() {
  static const std::string f = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(in, line)) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
      if (!model.empty() && !flags.empty()) break;
    }
    return model + "\n" + flags;
  }();
  return f;
}

bool dir_writable(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) return false;
  std::string probe = fmt::format("{}/.probe.{}", dir, getpid());
  int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
  if (fd < 0) return false;
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

std::string temp_cache_dir() {
  static std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/brrr-cache-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    BRRR_CHECK(mkdtemp(buf.data()) != nullptr, "cannot create a temporary kernel cache dir");
    return std::string(buf.data());
  }();
  return dir;
}

std::atomic<int> g_counter{0};

}  // namespace

std::string cache_key(const std::string& source, const std::string& compiler_id,
                      const std::string& flags, const std::string& cpu) {
  return hash_hex(source + '\0' + compiler_id + '\0' + flags + '\0' + cpu);
}

static std::string entry_hash(const std::string& key, const std::string& so_bytes) {
  // Binds the object to its key: another key's (valid) pair copied over this key's names fails.
  return hash_hex(key + '\0' + so_bytes);
}

std::string resolve_cache_dir(const CompileOptions& opts) {
  std::string dir = opts.cache_dir;
  if (dir.empty()) {
    const char* x = std::getenv("XDG_CACHE_HOME");
    const char* h = std::getenv("HOME");
    if (x && *x)
      dir = std::string(x) + "/brrr";
    else if (h && *h)
      dir = std::string(h) + "/.cache/brrr";
  }
  if (!dir.empty() && dir_writable(dir)) return dir;
  return temp_cache_dir();  // read-only or unusable: a private temp dir for this process
}

bool sleef_gnuabi_available() {
  static const bool ok = [] {
    void* h = dlopen("libsleefgnuabi.so.3", RTLD_LAZY | RTLD_LOCAL);
    if (!h) h = dlopen("libsleefgnuabi.so", RTLD_LAZY | RTLD_LOCAL);
    if (!h) return false;
    bool has = dlsym(h, "_ZGVdN8v_expf") != nullptr;
    dlclose(h);
    return has;
  }();
  return ok;
}

CompiledModule::~CompiledModule() {
  // Kernels may still be referenced by other sessions sharing the same dlopen handle; dlclose
  // is reference counted by the loader.
  if (handle_) dlclose(handle_);
}

void* CompiledModule::symbol(const std::string& name) const {
  void* s = dlsym(handle_, name.c_str());
  BRRR_CHECK(s != nullptr, "generated kernel {} missing from {}", name, path_);
  return s;
}

std::shared_ptr<CompiledModule> compile_cpp(const std::string& source, const CompileOptions& opts) {
  std::string cxx = compiler();
  std::string flags = kFlags;
  std::string libs = opts.vector_math ? " -lsleefgnuabi" : "";
  std::string dump = opts.dump_dir;
  if (dump.empty())
    if (const char* d = std::getenv("BRRR_DUMP_DIR")) dump = d;
  std::string identity;
  try {
    identity = compiler_identity(cxx);
  } catch (const Error& e) {
    // No key without a compiler: keep the source (named by its own hash) for the report.
    std::string dir = dump.empty() ? temp_cache_dir() : dump;
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::string where = fmt::format("{}/brrr_{}.cpp", dir, hash_hex(source));
    if (!write_file(where, source)) where = "(not written: cannot write into " + dir + ")";
    fail("{}\nsource: {}", e.what(), where);
  }
  std::string key = cache_key(source, identity, flags + libs, cpu_features());
  if (!dump.empty()) {
    std::error_code ec;
    fs::create_directories(dump, ec);
    if (!write_file(fmt::format("{}/brrr_{}.cpp", dump, key), source))
      fail("BRRR_DUMP_DIR: cannot write into '{}'", dump);
  }
  std::string dir = resolve_cache_dir(opts);
  std::string so = fmt::format("{}/{}.so", dir, key), hf = so + ".hash";
  auto mod = std::shared_ptr<CompiledModule>(new CompiledModule());
  mod->path_ = so;
  std::string stored = read_file(hf);
  std::string bytes = read_file(so);
  bool hit = !stored.empty() && !bytes.empty() && stored == entry_hash(key, bytes);
  if (hit) {
    mod->handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!mod->handle_) fail("cannot load generated kernels {}: {}", so, dlerror());
    mod->from_cache_ = true;
    return mod;
  }
  std::string tag = fmt::format("{}.{}.{}", key, getpid(), g_counter++);
  std::string src = fmt::format("{}/{}.cpp", dir, tag);
  if (!write_file(src, source)) {
    // The folder took the probe but not the source (disk full, quota): build in a private one.
    std::remove(src.c_str());
    dir = temp_cache_dir();
    so = fmt::format("{}/{}.so", dir, key);
    hf = so + ".hash";
    mod->path_ = so;
    src = fmt::format("{}/{}.cpp", dir, tag);
    BRRR_CHECK(write_file(src, source), "cannot write generated source to {}", src);
  }
  std::string tmp = fmt::format("{}/{}.so", dir, tag);
  int timeout = opts.timeout_s;
  if (timeout <= 0) {
    const char* t = std::getenv("BRRR_COMPILE_TIMEOUT");
    timeout = t && *t ? std::atoi(t) : 300;
    if (timeout <= 0) timeout = 300;
  }
  std::string cmd = fmt::format("timeout -k 5 {} {} {} -o {} {}{}", timeout, quote(cxx), flags,
                                quote(tmp), quote(src), libs);
  auto t0 = std::chrono::steady_clock::now();
  std::string log;
  int rc = run_command(cmd, &log);
  mod->compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) {
    std::remove(tmp.c_str());
    // Keep the source for the report: the dumped copy if any, else the one in the cache folder.
    std::string where = src;
    if (!dump.empty()) {
      where = fmt::format("{}/brrr_{}.cpp", dump, key);
      std::remove(src.c_str());
    }
    if (log.size() > 6000) log = log.substr(0, 6000) + "\n[... log truncated]";
    if (rc == 124 || rc == 137)
      fail(
          "compiling generated kernels timed out after {} s (BRRR_COMPILE_TIMEOUT; compiler '{}'); "
          "source: {}",
          timeout, cxx, where);
    fail("compiling generated kernels failed (exit {}, compiler '{}'); source: {}\n{}", rc, cxx,
         where, log);
  }
  std::remove(src.c_str());
  std::string built = read_file(tmp);
  if (built.empty()) {
    std::remove(tmp.c_str());
    fail("the compiler '{}' produced no output at {}", cxx, tmp);
  }
  // Load this process's own build before publishing it, so a concurrent writer of the same key
  // can never swap the file under us.
  mod->handle_ = dlopen(tmp.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!mod->handle_) {
    std::string why = dlerror();
    std::remove(tmp.c_str());
    fail("cannot load generated kernels {}: {}", tmp, why);
  }
  // Publish: object first, its hash second, each by rename, so a reader never trusts a partial
  // pair. A failure here only loses the cache entry; the kernels are already loaded.
  std::string tmph = tmp + ".hash";
  bool moved =
      write_file(tmph, entry_hash(key, built)) && std::rename(tmp.c_str(), so.c_str()) == 0;
  if (!moved) {
    std::remove(tmp.c_str());
    mod->path_ = tmp;
  }
  if (!moved || std::rename(tmph.c_str(), hf.c_str()) != 0) std::remove(tmph.c_str());
  return mod;
}

}  // namespace brrr::cpu
