// Reference numbers for brrr bench add_mul: hand-written (x+1)*2 / copy loops on 2^25 float32 with
// OpenMP threads. Build: gcc -O3 -march=native -fopenmp scripts/handloop_bandwidth.c -o /tmp/hb
// Run: OMP_NUM_THREADS=2 /tmp/hb 21   (median and best of 21; GB/s count read + write)
// Hand-written read+write loops on 2^25 floats, 2 OpenMP threads: memcpy, plain (x+1)*2,
// (x+1)*2 with streaming stores.
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
static int cmp(const void* a, const void* b) { double x = *(double*)a, y = *(double*)b; return x < y ? -1 : x > y; }
int main(int argc, char** argv) {
  const int64_t n = (int64_t)1 << 25; int reps = argc > 1 ? atoi(argv[1]) : 15;
  float* x = aligned_alloc(64, n * 4); float* y = aligned_alloc(64, n * 4);
  for (int64_t i = 0; i < n; ++i) x[i] = (float)(i & 1023), y[i] = 0;
  double t[8][200];
  for (int r = 0; r < reps; ++r) {
    for (int v = 0; v < 8; ++v) {
      double t0 = omp_get_wtime();
      if (v == 0) {
#pragma omp parallel
        { int nt = omp_get_num_threads(), id = omp_get_thread_num(); int64_t c = n / nt;
          memcpy(y + id * c, x + id * c, c * 4); }
      } else if (v == 1) {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) y[i] = (x[i] + 1.f) * 2.f;
      } else if (v == 2) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i += 16) {
          __m512 a = _mm512_load_ps(x + i);
          _mm512_stream_ps(y + i, _mm512_mul_ps(_mm512_add_ps(a, _mm512_set1_ps(1.f)), _mm512_set1_ps(2.f)));
        }
        _mm_sfence();
      } else if (v == 3) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i += 8) {
          __m256 a = _mm256_load_ps(x + i);
          _mm256_stream_ps(y + i, _mm256_mul_ps(_mm256_add_ps(a, _mm256_set1_ps(1.f)), _mm256_set1_ps(2.f)));
        }
        _mm_sfence();
      } else if (v >= 5) {
        const int64_t T = v == 5 ? 512 : v == 6 ? 2048 : 4096;
#pragma omp parallel
        { int nt = omp_get_num_threads(), id = omp_get_thread_num();
          int64_t lo = n * id / nt, hi = n * (id + 1) / nt;
          float tt[4096] __attribute__((aligned(64)));
          for (int64_t s0 = lo; s0 < hi; s0 += T) {
#pragma omp simd
            for (int64_t i = s0; i < s0 + T; ++i) tt[i - s0] = (x[i] + 1.f) * 2.f;
            for (int j = 0; j < T; j += 16) _mm512_stream_ps(y + s0 + j, _mm512_load_ps(tt + j));
          }
          _mm_sfence(); }
      } else {
        // tile of 512 then stream (brrr's generated shape), chunks of 16384
        const int64_t nb = n / 16384;
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < nb; ++b) {
          for (int64_t s0 = b * 16384; s0 < (b + 1) * 16384; s0 += 512) {
            float tt[512] __attribute__((aligned(64)));
#pragma omp simd
            for (int64_t i = s0; i < s0 + 512; ++i) tt[i - s0] = (x[i] + 1.f) * 2.f;
            for (int j = 0; j < 512; j += 16) _mm512_stream_ps(y + s0 + j, _mm512_load_ps(tt + j));
          }
          _mm_sfence();
        }
      }
      t[v][r] = (omp_get_wtime() - t0) * 1e3;
    }
  }
  const char* names[] = {"memcpy(2 threads)", "plain loop", "avx512 stream", "avx2 stream", "tile512+stream", "tile512 1fence", "tile2048 1fence", "tile4096 1fence"};
  for (int v = 0; v < 8; ++v) { qsort(t[v], reps, sizeof(double), cmp); double m = t[v][reps/2];
    printf("%-20s median %7.2f ms %6.1f GB/s   best %7.2f ms %6.1f GB/s\n", names[v], m, 2.0 * n * 4 / (m * 1e-3) / 1e9, t[v][0], 2.0 * n * 4 / (t[v][0] * 1e-3) / 1e9); }
  return y[12345] == 0;
}
