// Compiles a generated C++ translation unit with the system compiler into a shared object and
// loads it with dlopen. Results live in a KernelCache (core/kernel_cache.hpp) keyed by hash of
// (source, compiler identity, flags, CPU features). The compiler runs without a shell in its own
// process group (core/subprocess.hpp). Errors are one line naming the kept source and log.
// Callable from several threads at once.
#pragma once
#include <memory>
#include <string>

#include "brrr/session.hpp"

namespace brrr::cpu {

struct CompileOptions {
  std::string cache_dir;     // empty: $XDG_CACHE_HOME/brrr, else ~/.cache/brrr
  std::string dump_dir;      // empty: $BRRR_DUMP_DIR; receives every source (and failed logs)
  int timeout_s = 0;         // 0: $BRRR_COMPILE_TIMEOUT, else 300
  bool vector_math = false;  // link SLEEF's GNU-ABI vector math library
  // A plan file's modules (by content_hash(source)): one found there is loaded without running
  // the compiler at all (not even its --version); with `record`, every module is added to it.
  // Unused while BRRR_DUMP_DIR is set, so the dump still gets every source.
  PlanBinaries* plan = nullptr;
};

class CompiledModule {
 public:
  ~CompiledModule();
  // The address of an extern "C" symbol; fails when absent.
  void* symbol(const std::string& name) const;
  const std::string& path() const { return path_; }
  bool from_cache() const { return from_cache_; }
  bool from_plan() const { return from_plan_; }  // taken from a plan file (CompileOptions::plan)
  double compile_ms() const { return compile_ms_; }
  // Maps the module's pages, and those of the vector math library it calls, into the page tables
  // now (MADV_POPULATE_READ), so that its kernels' first calls take no page faults (mlp_tiny's
  // softmax: 20 us on its first call, 0.5 us after). Best effort: a kernel without it does nothing.
  void prefault() const;

 private:
  friend std::shared_ptr<CompiledModule> compile_cpp(const std::string&, const CompileOptions&);
  static std::shared_ptr<CompiledModule> load_from_plan(PlanBinaries& plan,
                                                        const std::string& source_hash);
  void* handle_ = nullptr;
  std::string path_;
  bool from_cache_ = false;
  bool from_plan_ = false;
  double compile_ms_ = 0;
};

std::shared_ptr<CompiledModule> compile_cpp(const std::string& source, const CompileOptions& opts);

// True when SLEEF's GNU-ABI vector library can be loaded (its _ZGV* symbols resolve).
bool sleef_gnuabi_available();
// The file the loader found for it ("" when it cannot be loaded): generated kernels link this
// path, since libsleef3 without libsleef-dev has no libsleefgnuabi.so for -lsleefgnuabi.
const std::string& sleef_gnuabi_path();
// The cache key: every input that changes the object (source, compiler --version text, flags and
// libraries, CPU model and flags). The entry's .hash file holds hash(key, object bytes).
std::string cache_key(const std::string& source, const std::string& compiler_id,
                      const std::string& flags, const std::string& cpu);
// The cache folder the options resolve to (after falling back to a temp dir if read-only).
std::string resolve_cache_dir(const CompileOptions& opts);

}  // namespace brrr::cpu
