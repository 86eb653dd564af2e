// A prototype, not brrr's code: could a GEMM of brrr's own, prefetching the weights it will read
// next, remove the cold-weight penalty that scripts/cpu_gemm_efficiency.cpp measures for oneDNN
// (BERT-base's 48 fp32 GEMMs in sequence, each layer its own weights, +16..+20% over the same
// GEMMs cache-hot)? An AVX-512 12 x 32 register-blocked kernel over weights packed in 32-column
// panels, K in blocks of KC, the two threads splitting the panels; while a thread computes on one
// K-block of a panel, it prefetches (prefetcht1) the next one, spread over the M-blocks.
// On the 2-core VM, 2026-12-05: cache-hot 313-344 GFLOP/s (74-81% of the probed 426); the
// 12-layer sequence 76.2 ms with the prefetch (+15% cold), 92.2 ms without it (+29%), against
// 76-79 ms for oneDNN's: the prefetch halves this kernel's penalty but it ends no faster than
// oneDNN, so brrr keeps oneDNN (README, CPU results).
//   g++ -O3 -march=native -fopenmp scripts/cpu_prefetch_gemm.cpp -o /tmp/pf_gemm
//   /tmp/pf_gemm [--no-prefetch] [--kc N] [--layers N]
#include <immintrin.h>
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cmath>
static double now(){return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();}
constexpr int NR = 32;
static int KC = 256;
static int PF = 1;
template <int MR>
__attribute__((noinline)) void ukr(int kc, const float* A, long lda, const float* B, float* C, long ldc, bool acc, const float* pf, int npf) {
  __m512 c[MR][2];
  for (int i = 0; i < MR; ++i) {
    if (acc) { c[i][0] = _mm512_loadu_ps(C + i * ldc); c[i][1] = _mm512_loadu_ps(C + i * ldc + 16); }
    else c[i][0] = c[i][1] = _mm512_setzero_ps();
  }
  for (int k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(B + k * NR), b1 = _mm512_load_ps(B + k * NR + 16);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(A[i * lda + k]);
      c[i][0] = _mm512_fmadd_ps(a, b0, c[i][0]);
      c[i][1] = _mm512_fmadd_ps(a, b1, c[i][1]);
    }
    if (k < npf) _mm_prefetch((const char*)(pf + k * 16), _MM_HINT_T1);
  }
  for (int i = 0; i < MR; ++i) { _mm512_storeu_ps(C + i * ldc, c[i][0]); _mm512_storeu_ps(C + i * ldc + 16, c[i][1]); }
}
void pack(int K, int N, const float* B, float* P) {
  for (int p = 0; p < N / NR; ++p) for (int k = 0; k < K; ++k) memcpy(P + ((long)p * K + k) * NR, B + (long)k * N + p * NR, NR * 4);
}
void gemm(int M, int N, int K, const float* A, const float* P, float* C) {
  const int panels = N / NR;
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int p0 = panels * t / nt, p1 = panels * (t + 1) / nt;
    constexpr int MR = 12;
    const int nmb = (M + MR - 1) / MR;
    for (int p = p0; p < p1; ++p)
      for (int k0 = 0; k0 < K; k0 += KC) {
        const int kc = std::min(KC, K - k0);
        const float* Bs = P + ((long)p * K + k0) * NR;
        const float* nxt = Bs + (long)kc * NR;  // next sub-panel in memory order
        const bool last = (p == p1 - 1) && (k0 + KC >= K);
        const int lines = last ? 0 : KC * NR / 16;  // the next K-block (or panel), in lines
        const int per = (lines + nmb - 1) / nmb;
        for (int mb = 0; mb < nmb; ++mb) {
          const int m = mb * MR, mr = std::min(MR, M - m);
          const float* pf = nxt + (long)mb * per * 16;
          const int npf = PF ? std::max(0, std::min(per, lines - mb * per)) : 0;
          float* Ct = C + (long)m * N + p * NR;
          const float* At = A + (long)m * K + k0;
          if (mr == 12) ukr<12>(kc, At, K, Bs, Ct, N, k0 > 0, pf, npf);
          else if (mr == 8) ukr<8>(kc, At, K, Bs, Ct, N, k0 > 0, pf, npf);
          else if (mr == 4) ukr<4>(kc, At, K, Bs, Ct, N, k0 > 0, pf, npf);
          else for (int i = 0; i < mr; ++i) ukr<1>(kc, At + (long)i * K, K, Bs, Ct + (long)i * N, N, k0 > 0, pf, i == 0 ? npf : 0);
        }
      }
  }
}
int main(int argc, char** argv) {
  int layers = 12;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--no-prefetch")) PF = 0;
    else if (!strcmp(argv[i], "--kc") && i + 1 < argc) KC = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
    else { fprintf(stderr, "unknown argument %s\n", argv[i]); return 2; }
  }
  if (KC < 16 || layers < 1) { fprintf(stderr, "--kc >= 16, --layers >= 1\n"); return 2; }
  const long M = 128; const long shapes[4][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
  struct G { long K, N; float* A; float* P; float* C; };
  std::vector<G> gs;
  srand(1);
  for (int l = 0; l < layers; ++l) for (auto& s : shapes) {
    G g{s[0], s[1]};
    std::vector<float> B(g.K * g.N); for (auto& x : B) x = rand() / (float)RAND_MAX - 0.5f;
    g.P = (float*)aligned_alloc(64, g.K * g.N * 4); pack(g.K, g.N, B.data(), g.P);
    g.A = (float*)aligned_alloc(64, M * g.K * 4); for (long i = 0; i < M * g.K; ++i) g.A[i] = rand() / (float)RAND_MAX - 0.5f;
    g.C = (float*)aligned_alloc(64, M * g.N * 4);
    gs.push_back(g);
  }
  // correctness vs naive on layer 0 gemm 2
  { G& g = gs[2]; gemm(M, g.N, g.K, g.A, g.P, g.C); double maxe = 0;
    for (int i = 0; i < M; i += 17) for (int j = 0; j < g.N; j += 13) { double s = 0; for (int k = 0; k < g.K; ++k) s += (double)g.A[i * g.K + k] * g.P[((long)(j / NR) * g.K + k) * NR + j % NR]; maxe = std::max(maxe, std::abs(s - g.C[i * g.N + j])); }
    printf("max err %.2e\n", maxe); }
  double flops_layer = 0; for (auto& s : shapes) flops_layer += 2.0 * M * s[0] * s[1];
  std::vector<double> seq;
  for (int r = 0; r < 11; ++r) { double t = now(); for (auto& g : gs) gemm(M, g.N, g.K, g.A, g.P, g.C); seq.push_back(now() - t); }
  std::sort(seq.begin(), seq.end());
  double hot = 0;
  for (int i = 0; i < 4; ++i) { std::vector<double> v; for (int r = 0; r < 21; ++r) { double t = now(); gemm(M, gs[i].N, gs[i].K, gs[i].A, gs[i].P, gs[i].C); v.push_back(now() - t); } std::sort(v.begin(), v.end()); hot += v[10] * layers;
    printf("  %ldx%ldx%ld hot %.3f ms = %.1f GFLOP/s\n", M, gs[i].K, gs[i].N, v[10] * 1e3, 2.0 * M * gs[i].K * gs[i].N / v[10] / 1e9); }
  printf("KC %d PF %d layers %d: sequence %.2f ms (%.1f GFLOP/s) hot sum %.2f ms cold %+.1f%%\n", KC, PF, layers, seq[5] * 1e3, flops_layer * layers / seq[5] / 1e9, hot * 1e3, 100 * (seq[5] / hot - 1));
}
