// The CUDA driver API, loaded at run time with dlopen so that brrr starts (and its CUDA tests
// skip) on machines with the toolkit but no driver; linking libcuda.so.1 would stop the process
// from loading there. Internal to src/backend/cuda: includes <cuda.h>.
#pragma once
#include <cuda.h>

#include <string>

namespace brrr::cuda {

// Every driver entry point brrr uses. The names go through cuda.h's macros, so the members are
// the versioned symbols (cuMemAlloc -> cuMemAlloc_v2) and calls read like the plain API.
#define BRRR_CU_FUNCS(X)                                                                     \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)      \
  X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)                    \
  X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxGetState) X(cuCtxSetCurrent)              \
  X(cuCtxSynchronize) X(cuGetErrorName)                                                       \
  X(cuGetErrorString) X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo) X(cuMemcpyHtoDAsync)        \
  X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemcpy2DAsync) X(cuMemsetD8Async)            \
  X(cuMemsetD32Async) X(cuMemHostAlloc) X(cuMemFreeHost)                                     \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuEventCreate)               \
  X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)             \
  X(cuStreamWaitEvent)                                                                        \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute) X(cuFuncSetAttribute)         \
  X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate)      \
  X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuGraphGetNodes)                 \
  X(cuOccupancyMaxActiveClusters) X(cuTensorMapEncodeTiled)

struct DriverApi {
#define BRRR_CU_DECLARE(name) decltype(&::name) name = nullptr;
  BRRR_CU_FUNCS(BRRR_CU_DECLARE)
#undef BRRR_CU_DECLARE
};

// The loaded table, or nullptr with *reason set (no libcuda.so.1, too old, cuInit failed).
// Loaded once per process; thread-safe.
const DriverApi* try_driver(std::string* reason = nullptr);
// The table; throws brrr::Error naming the reason when the driver is missing.
const DriverApi& driver();

// Throws brrr::Error "CUDA driver call <call> failed: <NAME> (<text>) [<where>]".
void check_cu(CUresult r, const char* call, const std::string& where);

}  // namespace brrr::cuda

// Checks one driver call; `where` names the kernel, node or buffer involved.
#define BRRR_CU(call, where)                                           \
  do {                                                                 \
    CUresult brrr_cu_r_ = (call);                                      \
    if (brrr_cu_r_ != CUDA_SUCCESS) ::brrr::cuda::check_cu(brrr_cu_r_, #call, (where)); \
  } while (0)
