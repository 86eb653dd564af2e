// For every driver entry point brrr loads (BRRR_CU_FUNCS), compares what cuGetProcAddress hands
// back for the base name at the header's CUDA_VERSION with the symbol cuda.h's prototype names
// after its macros (dlsym of cuMemAlloc_v2, cuGraphInstantiateWithFlags, ...). A DIFF is an entry
// point whose newest ABI is not the prototype brrr calls it with: cuCtxSynchronize was one (CUDA
// 13's takes a context), and calling it so read a garbage argument. Build and run on the device:
//   g++ -std=c++17 -O1 -Isrc -I/usr/local/cuda/include scripts/gpu_tools/proc_abi.cpp -ldl \
//     -o /tmp/proc_abi && /tmp/proc_abi
#include <dlfcn.h>

#include <cstdio>

#include "backend/cuda/driver_api.hpp"

#define EXPANDED_NAME(name) EXPANDED_NAME2(name)
#define EXPANDED_NAME2(name) #name

int main() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::printf("no libcuda.so.1: %s\n", dlerror()), 1;
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t,
                               CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(lib, "cuInit"));
  if (!get_proc || !init || init(0) != CUDA_SUCCESS) return std::printf("driver unusable\n"), 1;
  int diffs = 0;
  auto one = [&](const char* base, const char* linked) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult st{};
    CUresult r = get_proc(base, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    void* q = dlsym(lib, linked);
    bool same = r == CUDA_SUCCESS && p && p == q;
    diffs += !same;
    std::printf("%-4s %-28s getproc(%d)=%p  dlsym(%s)=%p\n", same ? "ok" : "DIFF", base,
                CUDA_VERSION, p, linked, q);
  };
#define ONE(name) one(#name, EXPANDED_NAME(name));
  BRRR_CU_FUNCS(ONE)
#undef ONE
  std::printf("%d entry point(s) differ\n", diffs);
  return 0;
}
