#ifdef BRRR_HAVE_CUDNN
#include "backend/cuda/cudnn_api.hpp"

#include <dlfcn.h>

#include <cstdlib>

#include "brrr/error.hpp"
#include "core/env.hpp"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace brrr::cuda {
namespace {

struct Loaded {
  CudnnApi api;
  bool ok = false;
  std::string reason;
};

Loaded load() {
  Loaded l;
  std::string name = env::text("BRRR_CUDNN_LIB");
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    l.reason = "cuDNN not loaded (dlopen " + name + ": " + (e ? e : "?") +
               "; set BRRR_CUDNN_LIB to the full path of libcudnn.so.9 or add its folder to "
               "LD_LIBRARY_PATH)";
    return l;
  }
  l.api.path = name;
  l.api.handle = lib;
#define BRRR_DNN_LOAD(fn)                                                              \
  {                                                                                    \
    dlerror();                                                                         \
    void* p = dlsym(lib, #fn);                                                         \
    if (!p) {                                                                          \
      const char* e = dlerror();                                                       \
      l.reason = "cuDNN library " + name + " lacks " #fn " (" + (e ? e : "?") + ")"; \
      return l;                                                                        \
    }                                                                                  \
    l.api.fn = reinterpret_cast<decltype(l.api.fn)>(p);                                \
  }
  BRRR_DNN_FUNCS(BRRR_DNN_LOAD)
#undef BRRR_DNN_LOAD
#define BRRR_DNN_OPTIONAL(fn) l.api.fn = reinterpret_cast<decltype(l.api.fn)>(dlsym(lib, #fn));
  BRRR_DNN_OPTIONAL(cudnnFindConvolutionForwardAlgorithm)
  BRRR_DNN_OPTIONAL(cudnnConvolutionBiasActivationForward)
  BRRR_DNN_OPTIONAL(cudnnCreateActivationDescriptor)
  BRRR_DNN_OPTIONAL(cudnnSetActivationDescriptor)
  BRRR_DNN_OPTIONAL(cudnnDestroyActivationDescriptor)
#undef BRRR_DNN_OPTIONAL
  l.api.version = l.api.cudnnGetVersion();
  if (l.api.version / 10000 != CUDNN_MAJOR) {  // major * 10000 + minor * 100 + patch
    l.reason = "cuDNN library " + name + " is version " + std::to_string(l.api.version) +
               "; brrr was built against cuDNN " + std::to_string(CUDNN_MAJOR);
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const CudnnApi* try_cudnn(std::string* reason) {
  static const Loaded loaded = load();  // thread-safe static init
  if (!loaded.ok) {
    if (reason) *reason = loaded.reason;
    return nullptr;
  }
  return &loaded.api;
}

void check_dnn(cudnnStatus_t st, const char* call, const std::string& where) {
  if (st == CUDNN_STATUS_SUCCESS) return;
  const CudnnApi* api = try_cudnn();
  fail("cuDNN call {} failed: {} (status {}) [{}]", call,
       api ? api->cudnnGetErrorString(st) : "?", int(st), where.empty() ? "-" : where);
}

}  // namespace brrr::cuda
#endif
