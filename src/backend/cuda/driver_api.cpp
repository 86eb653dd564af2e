#include "backend/cuda/driver_api.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <string_view>

#include "brrr/error.hpp"

namespace brrr::cuda {
namespace {

struct Loaded {
  DriverApi api;
  bool ok = false;
  std::string reason;
};

Loaded load() {
  Loaded l;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    l.reason = std::string("no CUDA driver (dlopen libcuda.so.1: ") + (e ? e : "?") + ")";
    return l;
  }
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t,
                               CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    l.reason = "CUDA driver too old (no cuGetProcAddress_v2); need a CUDA 12.5+ driver";
    return l;
  }
  // Ask for each symbol by its base name at the header's CUDA_VERSION: the driver hands back
  // the ABI version matching the prototypes we compiled against. Except where cuda.h's plain
  // prototype is older than the newest ABI of that name: CUDA 13's cuCtxSynchronize is
  // cuCtxSynchronize_v2(CUcontext), while the header's cuCtxSynchronize(void) is the 2.0 ABI.
  // Asked for at 13000 the driver returned the one-argument function, which then read a garbage
  // context and failed with CUDA_ERROR_CONTEXT_IS_DESTROYED (Session::run_device on the H200).
  auto abi_version = [](const char* name) {
    return std::string_view(name) == "cuCtxSynchronize" ? 2000 : CUDA_VERSION;
  };
#define BRRR_CU_LOAD(name)                                                                  \
  {                                                                                         \
    void* p = nullptr;                                                                      \
    CUdriverProcAddressQueryResult st{};                                                    \
    if (get_proc(#name, &p, abi_version(#name), CU_GET_PROC_ADDRESS_DEFAULT, &st) !=        \
            CUDA_SUCCESS ||                                                                 \
        !p) {                                                                               \
      l.reason = std::string("CUDA driver lacks ") + #name + " (driver older than the toolkit?)"; \
      return l;                                                                             \
    }                                                                                       \
    l.api.name = reinterpret_cast<decltype(l.api.name)>(p);                                 \
  }
  BRRR_CU_FUNCS(BRRR_CU_LOAD)
#undef BRRR_CU_LOAD
  CUresult r = l.api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    l.api.cuGetErrorName(r, &name);
    l.reason = std::string("cuInit failed: ") + (name ? name : "?") +
               (r == CUDA_ERROR_NO_DEVICE ? " (no CUDA device)" : "");
    return l;
  }
  int n = 0;
  if (l.api.cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
    l.reason = "driver loaded but no CUDA device is visible";
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const DriverApi* try_driver(std::string* reason) {
  static const Loaded loaded = load();  // thread-safe static init
  if (!loaded.ok) {
    if (reason) *reason = loaded.reason;
    return nullptr;
  }
  return &loaded.api;
}

const DriverApi& driver() {
  std::string why;
  const DriverApi* d = try_driver(&why);
  if (!d) fail("CUDA backend unavailable: {}", why);
  return *d;
}

void check_cu(CUresult r, const char* call, const std::string& where) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (const DriverApi* d = try_driver()) {
    d->cuGetErrorName(r, &name);
    d->cuGetErrorString(r, &text);
  }
  fail("CUDA driver call {} failed: {} ({}) [{}]", call, name ? name : "?",
       text ? text : "unknown error", where.empty() ? "-" : where);
}

}  // namespace brrr::cuda
