// cuDNN 9, loaded at run time with dlopen (like the driver, driver_api.hpp): brrr builds against
// cudnn.h but never links libcudnn, so it starts where cuDNN is missing and Conv then runs on the
// host with the reason. Internal to src/backend/cuda: includes <cudnn.h>. Only compiled with
// BRRR_HAVE_CUDNN (CMake found cudnn.h).
#pragma once
#ifdef BRRR_HAVE_CUDNN
// The legacy convolution API (descriptors + cudnnConvolutionForward) is marked deprecated in
// cuDNN 9 but present and enough here; the warning is silenced for cuDNN code only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cudnn.h>

#include <string>

namespace brrr::cuda {

// Every cuDNN entry point brrr uses.
#define BRRR_DNN_FUNCS(X)                                                                     \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)   \
  X(cudnnCreateTensorDescriptor) X(cudnnSetTensorNdDescriptor) X(cudnnDestroyTensorDescriptor) \
  X(cudnnCreateFilterDescriptor) X(cudnnSetFilterNdDescriptor) X(cudnnDestroyFilterDescriptor) \
  X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolutionNdDescriptor)                       \
  X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType)                              \
  X(cudnnDestroyConvolutionDescriptor) X(cudnnGetConvolutionNdForwardOutputDim)                \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount) X(cudnnGetConvolutionForwardAlgorithm_v7)     \
  X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnConvolutionForward)                      \
  X(cudnnCreatePoolingDescriptor) X(cudnnSetPoolingNdDescriptor)                              \
  X(cudnnGetPoolingNdForwardOutputDim) X(cudnnPoolingForward)                                 \
  X(cudnnDestroyPoolingDescriptor)

struct CudnnApi {
#define BRRR_DNN_DECLARE(name) decltype(&::name) name = nullptr;
  BRRR_DNN_FUNCS(BRRR_DNN_DECLARE)
#undef BRRR_DNN_DECLARE
  // Optional (null when the library lacks it): timing the algorithms at build (BRRR_CONV_TUNE=1).
  decltype(&::cudnnFindConvolutionForwardAlgorithm) cudnnFindConvolutionForwardAlgorithm = nullptr;
  // Optional: conv + bias + residual + ReLU in one call (CudnnConv::fuse_epilogue).
  decltype(&::cudnnConvolutionBiasActivationForward) cudnnConvolutionBiasActivationForward = nullptr;
  decltype(&::cudnnCreateActivationDescriptor) cudnnCreateActivationDescriptor = nullptr;
  decltype(&::cudnnSetActivationDescriptor) cudnnSetActivationDescriptor = nullptr;
  decltype(&::cudnnDestroyActivationDescriptor) cudnnDestroyActivationDescriptor = nullptr;
  std::string path;  // what dlopen loaded
  void* handle = nullptr;  // its dlopen handle (the cuDNN frontend resolves symbols from it)
  size_t version = 0;
};

// The loaded table, or nullptr with *reason set (library missing, symbol missing, not cuDNN 9).
// BRRR_CUDNN_LIB (a full path) is tried first, then libcudnn.so.9 on the loader's search path.
// Loaded once per process; thread-safe.
const CudnnApi* try_cudnn(std::string* reason = nullptr);

// Throws brrr::Error "cuDNN call <call> failed: <text> [<where>]" unless st is success.
void check_dnn(cudnnStatus_t st, const char* call, const std::string& where);

}  // namespace brrr::cuda

#define BRRR_DNN(api, call, args, where) \
  ::brrr::cuda::check_dnn((api).call args, #call, (where))

#pragma GCC diagnostic pop
#endif
