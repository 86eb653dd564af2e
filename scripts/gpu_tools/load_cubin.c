// Loads each cubin named on the command line with cuModuleLoadData into one context, in a fresh
// process with nothing else loaded (no cuDNN, cuBLASLt or NVRTC): tells a driver fault caused by
// a module's contents from one caused by what the process did before. Build on the device:
//   gcc -O1 -g -o /tmp/load_cubin load_cubin.c -I/usr/local/cuda/include -lcuda
// With -DWITH_LIBS (and -lcublasLt -lnvrtc): LT=1 creates a cuBLASLt handle first, NVRTC=1
// compiles a small kernel with NVRTC first, as a brrr session does before its module load.
// Without it too: STREAM=1 creates a non-blocking stream first; ALLOC_MB=N allocates N MiB in
// 64 pieces and uploads pageable host data into them on that stream (a session's weights).
#include <cuda.h>
#ifdef WITH_LIBS
#include <cublasLt.h>
#include <nvrtc.h>
#endif
#include <stdio.h>
#include <stdlib.h>

static void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* s = "?";
    cuGetErrorString(r, &s);
    fprintf(stderr, "%s: %s\n", what, s);
    exit(1);
  }
}

int main(int argc, char** argv) {
  check(cuInit(0), "cuInit");
  CUdevice d;
  CUcontext c;
  check(cuDeviceGet(&d, 0), "cuDeviceGet");
  check(cuDevicePrimaryCtxRetain(&c, d), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(c), "cuCtxSetCurrent");
  CUstream st = 0;
  if (getenv("STREAM")) check(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  if (getenv("ALLOC_MB")) {
    size_t piece = (size_t)atoi(getenv("ALLOC_MB")) * 1024 * 1024 / 64;
    for (int i = 0; i < 64; ++i) {
      CUdeviceptr p;
      check(cuMemAlloc(&p, piece), "cuMemAlloc");
      float* h = malloc(piece);
      for (size_t j = 0; j < piece / sizeof(float); ++j) h[j] = (float)j;
      check(cuMemcpyHtoDAsync(p, h, piece, st), "cuMemcpyHtoDAsync");
      check(cuStreamSynchronize(st), "cuStreamSynchronize");
      free(h);
    }
    printf("allocated and uploaded %s MiB\n", getenv("ALLOC_MB"));
  }
#ifdef WITH_LIBS
  if (getenv("LT")) {
    cublasLtHandle_t h;
    if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "cublasLtCreate\n"); return 1; }
    printf("cuBLASLt handle created\n");
  }
  if (getenv("NVRTC")) {
    nvrtcProgram p;
    const char* src = "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= 2.f; }";
    nvrtcCreateProgram(&p, src, "k.cu", 0, NULL, NULL);
    const char* opt[] = {"--gpu-architecture=sm_90"};
    if (nvrtcCompileProgram(p, 1, opt) != NVRTC_SUCCESS) { fprintf(stderr, "nvrtc\n"); return 1; }
    nvrtcDestroyProgram(&p);
    printf("NVRTC compiled a kernel\n");
  }
#endif
  int reps = getenv("REPS") ? atoi(getenv("REPS")) : 1;
  for (int r = 0; r < reps; ++r)
    for (int i = 1; i < argc; ++i) {
      FILE* f = fopen(argv[i], "rb");
      if (!f) { perror(argv[i]); return 1; }
      fseek(f, 0, SEEK_END);
      long n = ftell(f);
      fseek(f, 0, SEEK_SET);
      char* buf = malloc((size_t)n);
      if (fread(buf, 1, (size_t)n, f) != (size_t)n) { perror(argv[i]); return 1; }
      fclose(f);
      CUmodule m;
      check(cuModuleLoadData(&m, buf), argv[i]);
      printf("loaded %s (%ld bytes)\n", argv[i], n);
      check(cuModuleUnload(m), "cuModuleUnload");
      free(buf);
    }
  return 0;
}
