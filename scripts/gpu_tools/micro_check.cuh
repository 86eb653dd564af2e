// What the standalone device micro-benchmarks (attn_micro.cu, gemm_rows_micro.cu,
// persist_micro.cu, persist_layer.cu, wgmma_micro.cu) share on the host: CK(call), the check of a
// CUDA runtime call (file, line, the call and its error, then exit 1); bf16 conversions of host
// values; time_exec and time_graph, their timing of a CUDA graph; and pack_a / pack_b, operands
// packed in mma.m16n8k16's fragment order (persist_micro.cu, persist_layer.cu).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// Round to nearest even (finite values).
inline unsigned short to_bf16(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}
inline float from_bf16(unsigned short h) {
  const unsigned u = unsigned(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// `reps` replays of an instantiated graph, after `warm` more, each timed by events: the times in
// us, sorted.
inline std::vector<float> time_exec(cudaStream_t st, cudaGraphExec_t ge, int reps, int warm) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int r = 0; r < warm + reps; ++r) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= warm) t.push_back(ms * 1000.f);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t;
}

// The median over 20 replays (after 3 more) of a graph of `copies` launches, per launch, in us.
inline float time_graph(cudaStream_t st, int copies, const std::function<void(int)>& launch) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < copies; ++i) launch(i);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  const std::vector<float> t = time_exec(st, ge, 20, 3);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return t[t.size() / 2] / copies;
}

// A [m, k] row-major (m a multiple of 16) -> packed A [k/16][m/16][32 lanes][8]: lane l = 4g + t
// holds the pairs (r, c) (r + 8, c) (r, c + 8) (r + 8, c + 8), r = 16 * (m tile) + g, c = 16 * k16 + 2t.
inline std::vector<unsigned short> pack_a(const std::vector<unsigned short>& a, int m, int k) {
  std::vector<unsigned short> o(a.size());
  for (int k16 = 0; k16 < k / 16; ++k16)
    for (int mt = 0; mt < m / 16; ++mt)
      for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4, r = mt * 16 + g, c = k16 * 16 + t * 2;
        unsigned short* d = &o[((size_t(k16) * (m / 16) + mt) * 32 + l) * 8];
        const int rows[4] = {r, r + 8, r, r + 8}, cols[4] = {c, c, c + 8, c + 8};
        for (int e = 0; e < 4; ++e) {
          d[2 * e] = a[size_t(rows[e]) * k + cols[e]];
          d[2 * e + 1] = a[size_t(rows[e]) * k + cols[e] + 1];
        }
      }
  return o;
}

// W [k, n] row-major -> packed B [n/64][k/16][4 pairs of n8 tiles][32 lanes][8]: n8 tile 2p + h's
// b0, b1 then b2, b3 for lane l = 4g + t (column 8 * (2p + h) + g, K rows 2t, 2t + 1, 2t + 8, 2t + 9).
inline std::vector<unsigned short> pack_b(const std::vector<unsigned short>& b, int k, int n) {
  std::vector<unsigned short> o(b.size());
  for (int nt = 0; nt < n / 64; ++nt)
    for (int k16 = 0; k16 < k / 16; ++k16)
      for (int p = 0; p < 4; ++p)
        for (int l = 0; l < 32; ++l) {
          const int g = l / 4, t = l % 4;
          unsigned short* d = &o[(((size_t(nt) * (k / 16) + k16) * 4 + p) * 32 + l) * 8];
          for (int h = 0; h < 2; ++h) {
            const int col = nt * 64 + (2 * p + h) * 8 + g, kr = k16 * 16 + t * 2;
            d[4 * h + 0] = b[size_t(kr) * n + col];
            d[4 * h + 1] = b[size_t(kr + 1) * n + col];
            d[4 * h + 2] = b[size_t(kr + 8) * n + col];
            d[4 * h + 3] = b[size_t(kr + 9) * n + col];
          }
        }
  return o;
}
