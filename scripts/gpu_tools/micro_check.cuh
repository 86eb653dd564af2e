// CK(call): the standalone device micro-benchmarks' (attn_micro.cu, gemm_rows_micro.cu) check of
// a CUDA runtime call: file, line, the call and its error, then exit 1.
#pragma once
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
