// Measurement kernels for `brrr probe` (compiled -O3 -march=native, see CMakeLists.txt). Each loop
// is written so the compiler can neither drop nor merge the work it is meant to time.
#include "doctor/probe_kernels.hpp"

#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>

#if defined(BRRR_HAVE_SLEEF)
#include <sleef.h>
#endif

namespace brrr::doctor::kern {

namespace {
volatile double g_sink;  // results land here so the loops stay live
double g_span = 0;       // longest in-region time of any thread in the last kernel

// Per-thread timer: the region's span is the slowest thread's loop, without fork/join latency.
struct SpanTimer {
  double t0 = omp_get_wtime();
  ~SpanTimer() {
    double t = omp_get_wtime() - t0;
#pragma omp critical(brrr_probe_span)
    g_span = t > g_span ? t : g_span;
  }
};

// The peak loops' timer: the thread's own CPU time, not the wall. An arithmetic loop's rate is the
// core's while the thread runs; a busy machine's time slices taken from it are not the core's
// speed (a wall-clock peak probed under load came out at 187 GFLOP/s where the same loop in CPU
// time gives 490-530 on two threads, so the doctor showed oneDNN GEMMs at 100-140% of "peak").
// Memory loops keep the wall (SpanTimer): bandwidth is shared, and a thread running alone while
// its sibling waits would see more of it than the machine gives both.
struct CpuSpanTimer {
  static double now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  double t0 = now();
  ~CpuSpanTimer() {
    double t = now() - t0;
#pragma omp critical(brrr_probe_span)
    g_span = t > g_span ? t : g_span;
  }
};

// Keeps the compiler from assuming it knows `v` (defeats hoisting of const functions).
template <typename T>
inline void opaque(T& v) {
  asm volatile("" : "+v"(v));
}
}  // namespace

const char* const kSpecialNames[kNumSpecial] = {"exp", "cos", "sin", "tanh", "erf", "sqrt", "log"};

#if defined(__AVX512F__)
const char* isa_name() {
  return "avx512";
}
int lanes_f32() {
  return 16;
}
#elif defined(__AVX2__) && defined(__FMA__)
const char* isa_name() {
  return "avx2";
}
int lanes_f32() {
  return 8;
}
#else
const char* isa_name() {
  return "scalar";
}
int lanes_f32() {
  return 1;
}
#endif

bool have_sleef() {
#if defined(BRRR_HAVE_SLEEF) && (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)))
  return true;
#else
  return false;
#endif
}

int max_threads() {
  return omp_get_max_threads();
}
double last_span_s() {
  return g_span;
}

// ---- FMA peaks: 16 independent accumulators hide the FMA latency on two ports.

// One thread's fp32 FMA loop (the FLOPs it performed): fma_f32's and fma_team_s's.
static double fma_f32_thread(int64_t iters) {
  float seed = 1.0f + 1e-3f * float(omp_get_thread_num());
#if defined(__AVX512F__)
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_set1_ps(seed + 1e-4f * float(j));
  __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-4f);
  opaque(a);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  __m512 s = acc[0];
  for (int j = 1; j < 16; ++j) s = _mm512_add_ps(s, acc[j]);
  g_sink = _mm512_reduce_add_ps(s);
  return double(iters) * 16 * 16 * 2;
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_ps(seed + 1e-4f * float(j));
  __m256 a = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(1e-4f);
  opaque(a);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  float out[8];
  __m256 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, acc[j]);
  _mm256_storeu_ps(out, s);
  g_sink = out[0];
  return double(iters) * 12 * 8 * 2;
#else
  float acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = seed + 1e-4f * float(j);
  float a = 0.9999f, b = 1e-4f;
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < 8; ++j) acc[j] = std::fma(acc[j], a, b);
  g_sink = acc[0] + acc[7];
  return double(iters) * 8 * 2;
#endif
}

double fma_f32(int64_t iters) {
  double total = 0;
  g_span = 0;
#pragma omp parallel reduction(+ : total)
  {
    CpuSpanTimer span;
    total = fma_f32_thread(iters);
  }
  return total;
}

double fma_f64(int64_t iters) {
  double total = 0;
  g_span = 0;
#pragma omp parallel reduction(+ : total)
  {
    CpuSpanTimer span;
    double seed = 1.0 + 1e-3 * omp_get_thread_num();
#if defined(__AVX512F__)
    __m512d acc[16];
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_set1_pd(seed + 1e-4 * j);
    __m512d a = _mm512_set1_pd(0.9999), b = _mm512_set1_pd(1e-4);
    opaque(a);
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_pd(acc[j], a, b);
    }
    __m512d s = acc[0];
    for (int j = 1; j < 16; ++j) s = _mm512_add_pd(s, acc[j]);
    g_sink = _mm512_reduce_add_pd(s);
    total = double(iters) * 16 * 8 * 2;
#elif defined(__AVX2__) && defined(__FMA__)
    __m256d acc[12];
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_pd(seed + 1e-4 * j);
    __m256d a = _mm256_set1_pd(0.9999), b = _mm256_set1_pd(1e-4);
    opaque(a);
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
      for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_pd(acc[j], a, b);
    }
    double out[4];
    __m256d s = acc[0];
    for (int j = 1; j < 12; ++j) s = _mm256_add_pd(s, acc[j]);
    _mm256_storeu_pd(out, s);
    g_sink = out[0];
    total = double(iters) * 12 * 4 * 2;
#else
    double acc[8];
    for (int j = 0; j < 8; ++j) acc[j] = seed + 1e-4 * j;
    for (int64_t i = 0; i < iters; ++i)
      for (int j = 0; j < 8; ++j) acc[j] = std::fma(acc[j], 0.9999, 1e-4);
    g_sink = acc[0] + acc[7];
    total = double(iters) * 8 * 2;
#endif
  }
  return total;
}

// bf16 dot products (vdpbf16ps): two bf16 multiply-adds into each fp32 lane per instruction.
double dot_bf16(int64_t iters) {
#if defined(__AVX512BF16__) && defined(__AVX512F__)
  double total = 0;
  g_span = 0;
#pragma omp parallel reduction(+ : total)
  {
    CpuSpanTimer span;
    __m512 acc[16];
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_set1_ps(1.0f + 1e-3f * float(j));
    __m512 fa = _mm512_set1_ps(1.0f), fb = _mm512_set1_ps(1e-3f);
    opaque(fa);
    __m512bh a = _mm512_cvtne2ps_pbh(fa, fa), b = _mm512_cvtne2ps_pbh(fb, fb);
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
    }
    __m512 s = acc[0];
    for (int j = 1; j < 16; ++j) s = _mm512_add_ps(s, acc[j]);
    g_sink = _mm512_reduce_add_ps(s);
    total = double(iters) * 16 * 16 * 2 * 2;
  }
  return total;
#else
  (void)iters;
  return 0;
#endif
}

// AMX bf16 tile products (TDPBF16PS, the unit oneDNN's bf16 GEMMs and convs use on a CPU with
// AMX): four independent 16 x 16 float32 accumulator tiles, each instruction 16 x 16 x 32
// multiply-adds. 0 where the CPU or the build has no AMX, or the kernel refuses the tile state.
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
namespace {

// The kernel hands out AMX's tile state only on request (Linux 5.16+; arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA), once per process (oneDNN asks the same).
bool amx_permitted() {
  static const bool ok = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                                 18 /* XFEATURE_XTILEDATA */) == 0;
  return ok;
}

struct TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

}  // namespace

double amx_bf16(int64_t iters) {
  if (!amx_permitted()) return 0;
  double total = 0;
  g_span = 0;
#pragma omp parallel reduction(+ : total)
  {
    CpuSpanTimer span;
    TileConfig cfg;
    for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;  // 16 rows of 64 bytes
    _tile_loadconfig(&cfg);
    alignas(64) uint16_t ab[16 * 32];
    for (int i = 0; i < 16 * 32; ++i) ab[i] = uint16_t(0x3a83 + (i & 7));  // about 1e-3
    alignas(64) float out[16 * 16];
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ab, 64);
    _tile_loadd(5, ab, 64);
    _tile_loadd(6, ab, 64);
    _tile_loadd(7, ab, 64);
    for (int64_t i = 0; i < iters; ++i) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    float sum = out[0];
    _tile_stored(3, out, 64);
    sum += out[255];
    _tile_release();
    g_sink = sum;
    total = double(iters) * 4 * 16 * 16 * 32 * 2;
  }
  return total;
}
#else
double amx_bf16(int64_t) { return 0; }
#endif

// ---- Special functions

namespace {

float scalar_fn(int fn, float x) {
  switch (fn) {
    case kExp:
      return expf(x);
    case kCos:
      return cosf(x);
    case kSin:
      return sinf(x);
    case kTanh:
      return tanhf(x);
    case kErf:
      return erff(x);
    case kSqrt:
      return sqrtf(x);
    default:
      return logf(x);
  }
}

#if defined(BRRR_HAVE_SLEEF) && defined(__AVX512F__)
using vec = __m512;
constexpr int W = 16;
inline vec vload(const float* p) {
  return _mm512_loadu_ps(p);
}
inline void vstore(float* p, vec v) {
  _mm512_storeu_ps(p, v);
}
using vfn = decltype(&Sleef_expf16_u10avx512f);  // SLEEF declares a const-qualified return
// u10: 1.0-ULP variants (u05 for sqrt), the accuracy the generated code asks for.
const vfn kVec[kNumSpecial] = {Sleef_expf16_u10avx512f, Sleef_cosf16_u10avx512f,
                               Sleef_sinf16_u10avx512f, Sleef_tanhf16_u10avx512f,
                               Sleef_erff16_u10avx512f, Sleef_sqrtf16_u05avx512f,
                               Sleef_logf16_u10avx512f};
#define BRRR_PROBE_VEC 1
#elif defined(BRRR_HAVE_SLEEF) && defined(__AVX2__) && defined(__FMA__)
using vec = __m256;
constexpr int W = 8;
inline vec vload(const float* p) {
  return _mm256_loadu_ps(p);
}
inline void vstore(float* p, vec v) {
  _mm256_storeu_ps(p, v);
}
using vfn = decltype(&Sleef_expf8_u10avx2);
const vfn kVec[kNumSpecial] = {Sleef_expf8_u10avx2,  Sleef_cosf8_u10avx2, Sleef_sinf8_u10avx2,
                               Sleef_tanhf8_u10avx2, Sleef_erff8_u10avx2, Sleef_sqrtf8_u05avx2,
                               Sleef_logf8_u10avx2};
#define BRRR_PROBE_VEC 1
#endif

// Inputs in each function's ordinary range (no overflow, no special-case fast paths).
void fill_inputs(int fn, float* x, int64_t n) {
  float lo = -2.0f, hi = 2.0f;
  if (fn == kCos || fn == kSin) lo = -3.0f, hi = 3.0f;
  if (fn == kSqrt || fn == kLog) lo = 0.1f, hi = 4.0f;
  for (int64_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * float((i * 7919) % 1000) / 1000.0f;
}

}  // namespace

double special_run(int fn, bool vectorized, int64_t n, int64_t passes) {
  n = (n + 15) / 16 * 16;
  double evals = 0;
  g_span = 0;
#pragma omp parallel reduction(+ : evals)
  {
    float* x = static_cast<float*>(std::aligned_alloc(64, size_t(n) * 4));
    float* y = static_cast<float*>(std::aligned_alloc(64, size_t(n) * 4));
    fill_inputs(fn, x, n);
    SpanTimer span;
#if defined(BRRR_PROBE_VEC)
    if (vectorized) {
      vfn f = kVec[fn];
      for (int64_t p = 0; p < passes; ++p)
        for (int64_t i = 0; i < n; i += W) {
          vec v = vload(x + i);
          opaque(v);
          vstore(y + i, f(v));
        }
    } else
#endif
    {
      (void)vectorized;
      for (int64_t p = 0; p < passes; ++p)
        for (int64_t i = 0; i < n; ++i) {
          float v = x[i];
          opaque(v);
          y[i] = scalar_fn(fn, v);
        }
    }
    g_sink = y[0] + y[n - 1];
    std::free(x);
    std::free(y);
    evals = double(n) * double(passes);
  }
  return evals;
}

void special_chain(int fn, const float* x, float* y, int64_t n, int k) {
  if (k == 0) {
    parallel_copy(y, x, size_t(n) * 4);
    return;
  }
#if defined(BRRR_PROBE_VEC)
  vfn f = kVec[fn];
  int64_t nv = n / W * W;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nv; i += W) {
    vec v = vload(x + i);
    for (int r = 0; r < k; ++r) v = f(v);
    vstore(y + i, v);
  }
#else
  int64_t nv = 0;
#endif
  for (int64_t i = nv; i < n; ++i) {
    float v = x[i];
    for (int r = 0; r < k; ++r) v = scalar_fn(fn, v);
    y[i] = v;
  }
}

// ---- Bandwidth and overhead

void parallel_copy(void* dst, const void* src, size_t bytes) {
#pragma omp parallel
  {
    size_t nt = size_t(omp_get_num_threads()), t = size_t(omp_get_thread_num());
    size_t chunk = (bytes / nt + 63) & ~size_t(63);
    size_t b = t * chunk < bytes ? t * chunk : bytes;
    size_t e = b + chunk < bytes ? b + chunk : bytes;
    if (e > b) std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, e - b);
  }
}

double cache_copy(void* a, void* b, size_t bytes, int64_t passes) {
  g_span = 0;
#pragma omp parallel
  {
    size_t nt = size_t(omp_get_num_threads()), t = size_t(omp_get_thread_num());
    size_t chunk = (bytes / nt + 63) & ~size_t(63);
    size_t lo = t * chunk < bytes ? t * chunk : bytes;
    size_t hi = lo + chunk < bytes ? lo + chunk : bytes;
    char* pa = static_cast<char*>(a) + lo;
    char* pb = static_cast<char*>(b) + lo;
    SpanTimer span;
    // Back and forth, with a compiler barrier: no pass is a copy the optimizer may drop.
    for (int64_t p = 0; p < passes && hi > lo; ++p) {
      if (p & 1)
        std::memcpy(pa, pb, hi - lo);
      else
        std::memcpy(pb, pa, hi - lo);
      asm volatile("" ::: "memory");
    }
  }
  return 2.0 * double(bytes) * double(passes);
}

void parallel_fill(void* p, size_t bytes) {
#pragma omp parallel
  {
    size_t nt = size_t(omp_get_num_threads()), t = size_t(omp_get_thread_num());
    size_t chunk = (bytes / nt + 63) & ~size_t(63);
    size_t b = t * chunk < bytes ? t * chunk : bytes;
    size_t e = b + chunk < bytes ? b + chunk : bytes;
    if (e > b) std::memset(static_cast<char*>(p) + b, 1, e - b);
  }
}

double fma_team_s(int threads, int64_t iters) {
  g_span = 0;
#pragma omp parallel num_threads(threads)
  {
    SpanTimer span;  // the wall: a core shared with another thread (SMT, time slices) shows here
    fma_f32_thread(iters);  // its result lands in g_sink
  }
  return g_span;
}

void fork_join(int64_t reps) {
  for (int64_t r = 0; r < reps; ++r) {
#pragma omp parallel
    { asm volatile(""); }
  }
}

namespace {
__attribute__((noinline)) void tiny(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f + 1.0f;
}
}  // namespace

TinyKernel tiny_kernel() {
  return &tiny;
}

}  // namespace brrr::doctor::kern
