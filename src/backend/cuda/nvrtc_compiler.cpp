#include "backend/cuda/nvrtc_compiler.hpp"

#include <nvrtc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "brrr/error.hpp"

namespace brrr::cuda {
namespace fs = std::filesystem;

namespace {

// FNV-1a 64 with a seed; two seeds give the 128-bit cache key.
std::uint64_t fnv1a(const std::string& s, std::uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}
std::string hex128(const std::string& s) {
  return fmt::format("{:016x}{:016x}", fnv1a(s, 0xcbf29ce484222325ull),
                     fnv1a(s, 0x84222325cbf29ce4ull));
}

void check_nvrtc(nvrtcResult r, const char* call, const std::string& name) {
  if (r != NVRTC_SUCCESS)
    fail("NVRTC call {} failed for kernel {}: {}", call, name, nvrtcGetErrorString(r));
}

bool read_file(const fs::path& p, std::string& out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return static_cast<bool>(f) || f.eof();
}

// Write to a unique temp file in the same folder, then rename: readers never see a partial file
// and concurrent writers of the same key both end with a whole one.
void write_atomic(const fs::path& p, const std::string& data) {
  static std::atomic<int> counter{0};
  fs::path tmp = p;
  tmp += fmt::format(".tmp.{}.{}", ::getpid(), counter++);
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return;  // an unwritable cache is not an error: we still have the cubin
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return;
    }
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) fs::remove(tmp, ec);
}

}  // namespace

std::string default_cuda_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/brrr/cuda";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/brrr/cuda";
  return "";
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

NvrtcCompiler::NvrtcCompiler(std::string arch, std::string cache_dir)
    : arch_(std::move(arch)), cache_dir_(std::move(cache_dir)) {
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
  if (const char* dump = std::getenv("BRRR_DUMP_DIR"); dump && *dump) {
    std::error_code ec;
    fs::create_directories(dump, ec);
    std::ofstream(fs::path(dump) / (name + ".cu")) << source;
  }

  std::string key_text = "brrr-cuda-v1\n" + nvrtc_version() + "\n" + arch_ + "\n";
  for (const auto& f : fl) key_text += f + "\n";
  key_text += scalar_ops_header_text();
  key_text += "\n--source--\n" + source;
  const std::string key = hex128(key_text);

  const bool use_cache = !cache_dir_.empty() && !std::getenv("BRRR_DISABLE_CACHE");
  const fs::path bin = fs::path(cache_dir_) / (key + ".cubin");
  const fs::path sum = fs::path(cache_dir_) / (key + ".hash");
  if (use_cache) {
    std::string data, stored;
    // The hash beside the cubin catches truncated or corrupted files: mismatch -> recompile.
    if (read_file(bin, data) && read_file(sum, stored) && !data.empty() && stored == hex128(data)) {
      CompiledKernel k;
      k.cubin.assign(data.begin(), data.end());
      k.from_cache = true;
      return k;
    }
  }

  auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram prog = nullptr;
  const char* hdr_src[] = {scalar_ops_header_text()};
  const char* hdr_name[] = {"brrr/scalar_ops.h"};
  check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 1, hdr_src,
                                 hdr_name),
              "nvrtcCreateProgram", name);
  std::vector<const char*> argv;
  for (const auto& f : fl) argv.push_back(f.c_str());
  nvrtcResult cr = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (cr != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    fail("NVRTC failed to compile kernel {} for {}: {}\n{}", name, arch_, nvrtcGetErrorString(cr),
         log);
  }
  size_t n = 0;
  CompiledKernel k;
  nvrtcResult r = nvrtcGetCUBINSize(prog, &n);
  if (r == NVRTC_SUCCESS) {
    k.cubin.resize(n);
    r = nvrtcGetCUBIN(prog, k.cubin.data());
  }
  nvrtcDestroyProgram(&prog);
  check_nvrtc(r, "nvrtcGetCUBIN", name);
  k.log = std::move(log);
  k.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  if (use_cache) {
    std::error_code ec;
    fs::create_directories(cache_dir_, ec);
    const std::string data(k.cubin.begin(), k.cubin.end());
    write_atomic(bin, data);
    write_atomic(sum, hex128(data));  // written second: a reader that sees it sees the cubin
  }
  return k;
}

}  // namespace brrr::cuda
