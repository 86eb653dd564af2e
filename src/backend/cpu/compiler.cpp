#include "backend/cpu/compiler.hpp"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "brrr/error.hpp"
#include "core/cleanup.hpp"
#include "core/env.hpp"
#include "core/failed_compile.hpp"
#include "core/file_io.hpp"
#include "core/kernel_cache.hpp"
#include "core/subprocess.hpp"

namespace brrr::cpu {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFlags = "-O3 -march=native -fopenmp-simd -fno-math-errno -shared -fPIC";

std::vector<std::string> split_flags(const std::string& flags) {
  std::vector<std::string> out;
  std::istringstream in(flags);
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

std::string not_found_text(const std::string& cxx, int err) {
  return fmt::format("C++ compiler '{}' (BRRR_CXX, else CXX, else g++) {}", cxx,
                     err == ENOENT ? "not found" : fmt::format("cannot run: {}", strerror(err)));
}

std::string compiler_identity(const std::string& cxx, int timeout_s) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(cxx);
  if (it != cache.end()) return it->second;
  ProcessResult r = run_process({cxx, "--version"}, std::min(timeout_s, 60));
  if (r.exec_errno) fail("{} (needed for generated kernels)", not_found_text(cxx, r.exec_errno));
  if (r.timed_out || r.exit_code != 0)
    fail("C++ compiler '{}' (BRRR_CXX) is not usable: '{} --version' {}: {}", cxx, cxx,
         r.timed_out ? "timed out" : fmt::format("exited {}", r.exit_code),
         first_error_line(r.output));
  return cache[cxx] = r.output;
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

}  // namespace

std::string cache_key(const std::string& source, const std::string& compiler_id,
                      const std::string& flags, const std::string& cpu) {
  return content_hash(source + '\0' + compiler_id + '\0' + flags + '\0' + cpu);
}

std::string resolve_cache_dir(const CompileOptions& opts) {
  return KernelCache::writable_dir(opts.cache_dir);
}

const std::string& sleef_gnuabi_path() {
  static const std::string path = [] {
    for (const char* name : {"libsleefgnuabi.so.3", "libsleefgnuabi.so"}) {
      void* h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
      if (!h) continue;
      std::string p;
      Dl_info info{};
      if (void* f = dlsym(h, "_ZGVdN8v_expf"); f && dladdr(f, &info) && info.dli_fname)
        p = info.dli_fname;
      dlclose(h);
      if (!p.empty() && p[0] == '/') return p;
    }
    return std::string();
  }();
  return path;
}

bool sleef_gnuabi_available() {
  return !sleef_gnuabi_path().empty();
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

static void record_in_plan(PlanBinaries& plan, const std::string& source_hash,
                           const std::string& bytes) {
  std::lock_guard<std::mutex> lock(plan.mu);
  if (plan.record) plan.modules[source_hash] = bytes;
}

namespace {
struct PrefaultTarget {
  uintptr_t base;
};
int prefault_object(dl_phdr_info* info, size_t, void* arg) {
  const auto* t = static_cast<const PrefaultTarget*>(arg);
  std::string_view name = info->dlpi_name ? info->dlpi_name : "";
  // The module, and the math libraries its kernels call (SLEEF's vector exp, libm's scalar tail).
  bool want = info->dlpi_addr == t->base ||
              name.find("libsleefgnuabi") != std::string_view::npos ||
              name.find("/libm.so") != std::string_view::npos;
  if (!want) return 0;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uintptr_t lo = (info->dlpi_addr + ph.p_vaddr) & ~(page - 1);
    uintptr_t hi = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
#ifdef MADV_POPULATE_READ
    (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_READ);
#endif
  }
  return 0;
}
}  // namespace

void CompiledModule::prefault() const {
  link_map* lm = nullptr;
  if (!handle_ || dlinfo(handle_, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return;
  PrefaultTarget t{uintptr_t(lm->l_addr)};
  dl_iterate_phdr(prefault_object, &t);
}

// The plan file's object for this source, written to a private temp file just long enough to
// dlopen it (the loader needs a path); null when the plan has none.
std::shared_ptr<CompiledModule> CompiledModule::load_from_plan(PlanBinaries& plan,
                                                               const std::string& source_hash) {
  std::string bytes;
  {
    std::lock_guard<std::mutex> lock(plan.mu);
    auto it = plan.modules.find(source_hash);
    if (it == plan.modules.end()) return nullptr;
    bytes = it->second;
  }
  KernelCache tmp_dir(KernelCache::private_temp_dir(), ".so");
  std::string tmp = tmp_dir.temp_path(source_hash, ".so"), why;
  TempFileGuard guard(tmp);
  if (!try_write_file(tmp, bytes, &why)) fail("--load-plan: cannot write a kernel module: {}", why);
  auto mod = std::shared_ptr<CompiledModule>(new CompiledModule());
  mod->handle_ = dlopen(tmp.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!mod->handle_) fail("--load-plan: cannot load its generated kernels: {}", dlerror());
  ::unlink(tmp.c_str());
  mod->path_ = "plan file";
  mod->from_cache_ = true;
  mod->from_plan_ = true;
  std::lock_guard<std::mutex> lock(plan.mu);
  ++plan.modules_used;
  if (plan.record) plan.modules[source_hash] = std::move(bytes);
  return mod;
}

std::shared_ptr<CompiledModule> compile_cpp(const std::string& source, const CompileOptions& opts) {
  // Every switch first: a bad value fails before any work.
  int timeout = opts.timeout_s > 0 ? opts.timeout_s : env::seconds("BRRR_COMPILE_TIMEOUT");
  std::string cxx = env::cxx();
  std::string dump = opts.dump_dir.empty() ? env::text("BRRR_DUMP_DIR") : opts.dump_dir;
  std::string flags = kFlags;
  // GCC vectorizes for 256-bit registers by default even where AVX-512 is there; 512-bit
  // vectors (and SLEEF's 16-wide exp) measured faster on softmax rows (-march=native: a CPU
  // without AVX-512 ignores it).
  if (!env::flag("BRRR_NO_PREFER_512")) flags += " -mprefer-vector-width=512";
  // Unloadable SLEEF: -lsleefgnuabi, so that the link error names the library.
  std::string libs;
  if (opts.vector_math)
    libs = " " + (sleef_gnuabi_available() ? sleef_gnuabi_path() : std::string("-lsleefgnuabi"));
  std::string source_hash = opts.plan ? content_hash(source) : std::string();
  if (opts.plan && dump.empty())
    if (auto mod = CompiledModule::load_from_plan(*opts.plan, source_hash)) return mod;
  std::string identity;
  try {
    identity = compiler_identity(cxx, timeout);
  } catch (const Error& e) {
    // No key without a compiler: keep the source (named by its own hash) for the report.
    KeptFailure k = keep_failed_compile(dump, KernelCache::writable_dir(opts.cache_dir),
                                        "brrr_" + content_hash(source) + ".cpp", "", source, "");
    fail("{}; source: {}", e.what(), k.source);
  }
  std::string key = cache_key(source, identity, flags + libs, cpu_features());
  if (!dump.empty()) {
    std::error_code ec;
    fs::create_directories(dump, ec);
    std::string why;
    if (!try_write_file(fmt::format("{}/brrr_{}.cpp", dump, key), source, &why))
      fail("BRRR_DUMP_DIR: {}", why);
  }
  KernelCache cache(resolve_cache_dir(opts), ".so");
  auto mod = std::shared_ptr<CompiledModule>(new CompiledModule());
  mod->path_ = cache.object_path(key);
  if (std::optional<std::string> cached = cache.lookup(key)) {
    mod->handle_ = dlopen(mod->path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!mod->handle_) fail("cannot load generated kernels {}: {}", mod->path_, dlerror());
    mod->from_cache_ = true;
    if (opts.plan) record_in_plan(*opts.plan, source_hash, *cached);
    return mod;
  }
  std::string src = cache.temp_path(key, ".cpp"), why;
  if (!try_write_file(src, source, &why)) {
    // The folder took the probe but not the source (disk full, quota): build in a private one.
    cache = KernelCache(KernelCache::private_temp_dir(), ".so");
    mod->path_ = cache.object_path(key);
    src = cache.temp_path(key, ".cpp");
    if (!try_write_file(src, source, &why)) fail("cannot write generated source: {}", why);
  }
  std::string tmp = cache.temp_path(key, ".so");
  TempFileGuard src_guard(src), tmp_guard(tmp);
  std::vector<std::string> argv = {cxx};
  for (const auto& f : split_flags(flags)) argv.push_back(f);
  for (const auto& f : std::vector<std::string>{"-o", tmp, src}) argv.push_back(f);
  for (const auto& f : split_flags(libs)) argv.push_back(f);
  auto t0 = std::chrono::steady_clock::now();
  ProcessResult r = run_process(argv, timeout);
  mod->compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (r.exec_errno || r.timed_out || r.exit_code != 0) {
    ::unlink(tmp.c_str());
    KeptFailure k =
        keep_failed_compile(dump, cache.dir(), "brrr_" + key + ".cpp", src, source, r.output);
    if (r.exec_errno) fail("{}; source: {}", not_found_text(cxx, r.exec_errno), k.source);
    if (r.timed_out)
      fail(
          "compiling generated kernels timed out after {} s (BRRR_COMPILE_TIMEOUT; compiler '{}'); "
          "log: {}; source: {}",
          timeout, cxx, k.log, k.source);
    fail("compiling generated kernels failed ({}, compiler '{}'): {}; log: {}; source: {}",
         r.exit_code < 0 ? std::string("killed by a signal") : fmt::format("exit {}", r.exit_code),
         cxx, first_error_line(r.output), k.log, k.source);
  }
  ::unlink(src.c_str());
  std::string built;
  if (!read_regular_file(tmp, KernelCache::kMaxEntryBytes, &built) || built.empty()) {
    ::unlink(tmp.c_str());
    fail("the compiler '{}' produced no usable output at {}", cxx, tmp);
  }
  // Load this process's own build before publishing it, so a concurrent writer of the same key
  // can never swap the file under us.
  mod->handle_ = dlopen(tmp.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!mod->handle_) {
    std::string err = dlerror();
    ::unlink(tmp.c_str());
    fail("cannot load generated kernels {}: {}", tmp, err);
  }
  if (opts.plan) record_in_plan(*opts.plan, source_hash, built);
  // A failure here only loses the cache entry; the kernels are already loaded.
  if (!cache.publish_file(key, tmp, built)) mod->path_ = tmp;
  return mod;
}

}  // namespace brrr::cpu
