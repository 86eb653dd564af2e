// CUDA C++ source -> cubin (SASS for the present device) through NVRTC, cached in the KernelCache
// the CPU backend uses too: key = hash(source, embedded headers, NVRTC version, options, arch).
#pragma once
#include <string>
#include <vector>

namespace brrr::cuda {

struct CompileOptions {
  bool fast_math = false;           // --use_fast_math: off, so results match the CPU reference
  std::vector<std::string> extra;   // more NVRTC flags (e.g. "-lineinfo")
};

struct CompiledKernel {
  std::vector<char> cubin;
  std::string log;        // NVRTC's log (warnings), empty from the cache
  bool from_cache = false;
  double compile_ms = 0;  // NVRTC time, 0 from the cache
};

// $XDG_CACHE_HOME/brrr/cuda, else $HOME/.cache/brrr/cuda; "" when neither is set (no cache).
std::string default_cuda_cache_dir();
// "13.0" (nvrtcVersion)
std::string nvrtc_version();

class NvrtcCompiler {
 public:
  // arch like "sm_90" (DeviceInfo::arch()); NVRTC needs no device, so this works anywhere.
  // cache_dir "" (or BRRR_DISABLE_CACHE=1): no cache. dump_dir "": $BRRR_DUMP_DIR; when set, it
  // receives <name>.cu.
  explicit NvrtcCompiler(std::string arch, std::string cache_dir = default_cuda_cache_dir(),
                         std::string dump_dir = "");
  // Compile errors throw brrr::Error with the kernel name and NVRTC's log.
  CompiledKernel compile(const std::string& source, const std::string& name,
                         const CompileOptions& opts = {}) const;
  const std::string& arch() const { return arch_; }
  const std::string& cache_dir() const { return cache_dir_; }
  // The NVRTC flags compile() passes (arch, std, fast-math choice, extras).
  std::vector<std::string> flags(const CompileOptions& opts) const;

 private:
  std::string arch_;
  std::string cache_dir_;
  std::string dump_dir_;
};

}  // namespace brrr::cuda
