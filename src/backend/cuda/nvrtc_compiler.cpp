#include "backend/cuda/nvrtc_compiler.hpp"

#include <dlfcn.h>
#include <nvrtc.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "backend/embedded_headers.hpp"
#include "brrr/error.hpp"
#include "core/env.hpp"
#include "core/failed_compile.hpp"
#include "core/file_io.hpp"
#include "core/kernel_cache.hpp"
#include "core/subprocess.hpp"

namespace brrr::cuda {
namespace fs = std::filesystem;

namespace {

void check_nvrtc(nvrtcResult r, const char* call, const std::string& name) {
  if (r != NVRTC_SUCCESS)
    fail("NVRTC call {} failed for kernel {}: {}", call, name, nvrtcGetErrorString(r));
}

// What one NVRTC compile gave: the cubin, NVRTC's log, and on failure NVRTC's error text.
struct NvrtcOutput {
  bool ok = false;
  std::string cubin, log, error;
};

// Compiles in this process.
NvrtcOutput run_nvrtc(const std::string& source, const std::string& name,
                      const std::vector<std::string>& flags) {
  NvrtcOutput o;
  nvrtcProgram prog = nullptr;
  std::vector<const char*> hdr_src, hdr_name;  // every embedded header, by its include name
  for (const EmbeddedHeader& h : embedded_headers()) {
    hdr_src.push_back(h.text);
    hdr_name.push_back(h.name);
  }
  check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), int(hdr_src.size()),
                                 hdr_src.data(), hdr_name.data()),
              "nvrtcCreateProgram", name);
  std::vector<const char*> argv;
  for (const auto& f : flags) argv.push_back(f.c_str());
  nvrtcResult cr = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  o.log.assign(log_size, '\0');
  if (log_size > 1) nvrtcGetProgramLog(prog, o.log.data());
  while (!o.log.empty() && (o.log.back() == '\0' || o.log.back() == '\n')) o.log.pop_back();
  if (cr != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    o.error = nvrtcGetErrorString(cr);
    return o;
  }
  size_t n = 0;
  nvrtcResult r = nvrtcGetCUBINSize(prog, &n);
  if (r == NVRTC_SUCCESS) {
    o.cubin.resize(n);
    r = nvrtcGetCUBIN(prog, o.cubin.data());
  }
  nvrtcDestroyProgram(&prog);
  check_nvrtc(r, "nvrtcGetCUBIN", name);
  o.ok = true;
  return o;
}

// NVRTC dlopens libnvrtc-builtins.so.<major>.<minor> from its own folder at its first compile.
// Loaded once here, every forked child inherits the mapping instead of loading ~the library
// again (which also fails in a child under an address-space limit, as the bounded tests use).
void preload_nvrtc_builtins() {
  static const bool once = [] {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) || !info.dli_fname) return false;
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return false;
    fs::path lib = fs::path(info.dli_fname).parent_path() /
                   fmt::format("libnvrtc-builtins.so.{}.{}", major, minor);
    return dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr;  // kept for the process
  }();
  (void)once;
}

// Compiles in a forked child (core/subprocess.hpp) and reads the result back through a pipe. NVRTC
// then never shares brrr's heap with the CUDA driver: on the H200 a session compiling in-process
// crashed later inside cuModuleLoadData with libcuda's allocator damaged (docs/CUDA.md, issue
// 14). The compile also obeys BRRR_COMPILE_TIMEOUT, and a crash in NVRTC is an error, not a
// dead brrr. Framing: 'K' or 'F', then the log's and the cubin's (or error's) byte counts.
NvrtcOutput run_nvrtc_forked(const std::string& source, const std::string& name,
                             const std::vector<std::string>& flags) {
  preload_nvrtc_builtins();
  ProcessResult r = run_forked(
      [&] {
        NvrtcOutput o = run_nvrtc(source, name, flags);
        const std::string& body = o.ok ? o.cubin : o.error;
        std::string msg(1, o.ok ? 'K' : 'F');
        for (uint64_t n : {uint64_t(o.log.size()), uint64_t(body.size())})
          msg.append(reinterpret_cast<const char*>(&n), sizeof n);
        return msg + o.log + body;
      },
      env::seconds("BRRR_COMPILE_TIMEOUT"));
  if (r.timed_out)
    fail("NVRTC did not finish compiling kernel {} within BRRR_COMPILE_TIMEOUT ({} s)", name,
         env::seconds("BRRR_COMPILE_TIMEOUT"));
  if (r.exec_errno) fail("NVRTC: could not fork to compile kernel {}: errno {}", name, r.exec_errno);
  if (r.exit_code == 1) fail("{}", r.output);  // the child's own one-line error
  const std::string& m = r.output;
  uint64_t nlog = 0, nbody = 0;
  constexpr size_t kHead = 1 + 2 * sizeof(uint64_t);
  if (r.exit_code == 0 && m.size() >= kHead) {
    std::memcpy(&nlog, m.data() + 1, sizeof nlog);
    std::memcpy(&nbody, m.data() + 1 + sizeof nlog, sizeof nbody);
  }
  if (r.exit_code != 0 || m.size() < kHead || (m[0] != 'K' && m[0] != 'F') ||
      nlog > m.size() - kHead || nbody != m.size() - kHead - nlog)
    fail("NVRTC's compile process for kernel {} {}", name,
         r.exit_code < 0 ? "died (a signal, or an exit without a result)" : "returned a malformed result");
  NvrtcOutput o;
  o.ok = m[0] == 'K';
  o.log = m.substr(kHead, nlog);
  (o.ok ? o.cubin : o.error) = m.substr(kHead + nlog);
  return o;
}

}  // namespace

std::string default_cuda_cache_dir() {
  std::string d = env::user_cache_dir();
  return d.empty() ? "" : d + "/cuda";
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

NvrtcCompiler::NvrtcCompiler(std::string arch, std::string cache_dir, std::string dump_dir)
    : arch_(std::move(arch)), cache_dir_(std::move(cache_dir)), dump_dir_(std::move(dump_dir)) {
  BRRR_CHECK(arch_.rfind("sm_", 0) == 0, "NVRTC target '{}' is not of the form sm_XX", arch_);
}

std::vector<std::string> NvrtcCompiler::flags(const CompileOptions& opts) const {
  // ptxas optimizes at -O3 by default; NVRTC has no -O flag of its own.
  std::vector<std::string> f = {"--gpu-architecture=" + arch_, "--std=c++17"};
  if (opts.fast_math) f.push_back("--use_fast_math");
  for (const auto& e : opts.extra) f.push_back(e);
  return f;
}

CompiledKernel NvrtcCompiler::compile(const std::string& source, const std::string& name,
                                      const CompileOptions& opts) const {
  const std::vector<std::string> fl = flags(opts);
  std::string dump = dump_dir_.empty() ? env::text("BRRR_DUMP_DIR") : dump_dir_;
  if (!dump.empty()) {
    std::error_code ec;
    fs::create_directories(dump, ec);
    std::string why;
    if (!try_write_file((fs::path(dump) / (name + ".cu")).string(), source, &why))
      fail("BRRR_DUMP_DIR: {}", why);
  }

  std::string key_text = "brrr-cuda-v1\n" + nvrtc_version() + "\n" + arch_ + "\n";
  for (const auto& f : fl) key_text += f + "\n";
  for (const EmbeddedHeader& h : embedded_headers()) key_text += std::string(h.name) + "\n" + h.text;
  key_text += "\n--source--\n" + source;
  const std::string key = content_hash(key_text);

  // A read-only cache folder still serves hits; publishing into it fails quietly.
  KernelCache cache(cache_dir_, ".cubin");
  if (auto hit = cache.lookup(key)) {
    CompiledKernel k;
    k.cubin.assign(hit->begin(), hit->end());
    k.from_cache = true;
    return k;
  }

  auto t0 = std::chrono::steady_clock::now();
  // Always in a forked child: NVRTC run in this process, once the driver is in use, damaged
  // libcuda's per-thread allocator state on the H200 (driver 580) and a later cuModuleLoadData
  // read NULL from it; with every compile forked the CUDA suite runs clean (docs/CUDA.md).
  NvrtcOutput out = run_nvrtc_forked(source, name, fl);
  std::string log = std::move(out.log);
  if (!out.ok) {
    // One line: the first error, and where the source and NVRTC's whole log are kept.
    std::string folder = cache_dir_.empty() ? KernelCache::private_temp_dir()
                                            : KernelCache::writable_dir(cache_dir_);
    std::string file = dump.empty() ? name + "_" + key + ".cu" : name + ".cu";
    KeptFailure kept = keep_failed_compile(dump, folder, file, "", source, log);
    fail("NVRTC failed to compile kernel {} for {}: {}: {}; log: {}; source: {}", name, arch_,
         out.error, first_error_line(log), kept.log, kept.source);
  }
  CompiledKernel k;
  k.cubin.assign(out.cubin.begin(), out.cubin.end());
  k.log = std::move(log);
  k.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  cache.publish(key, std::string_view(k.cubin.data(), k.cubin.size()));
  return k;
}

}  // namespace brrr::cuda
