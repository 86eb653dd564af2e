// Raw measurement kernels of the CPU probe. probe_kernels.cpp is compiled with -O3 -march=native
// and includes no std containers, so no native-ISA inline template leaks into the rest of the
// build.
#pragma once
#include <cstddef>
#include <cstdint>

namespace brrr::doctor::kern {

// Widest vector ISA compiled in: "avx512", "avx2" or "scalar"; and its fp32 lane count.
const char* isa_name();
int lanes_f32();
bool have_sleef();

// FMA throughput loops on every OpenMP thread with independent accumulators; each returns the
// FLOPs it performed (2 per multiply-add), 0 when the precision is not supported.
double fma_f32(int64_t iters);
double fma_f64(int64_t iters);
double dot_bf16(int64_t iters);
// AMX bf16 tile products (TDPBF16PS); 0 where the CPU, the build or the OS has no AMX.
double amx_bf16(int64_t iters);

// Special functions in the order of kSpecialNames.
enum SpecialFn { kExp, kCos, kSin, kTanh, kErf, kSqrt, kLog, kNumSpecial };
extern const char* const kSpecialNames[kNumSpecial];
// Every thread applies fn to its own in-cache buffer of n floats, `passes` times. Returns the
// number of evaluations. Vectorized uses SLEEF; otherwise scalar libm.
double special_run(int fn, bool vectorized, int64_t n_per_thread, int64_t passes);
// y[i] = fn^k(x[i]) over all threads (k = 0 copies).
void special_chain(int fn, const float* x, float* y, int64_t n, int k);

// Copies `bytes` with every thread copying one contiguous chunk (memcpy per chunk).
void parallel_copy(void* dst, const void* src, size_t bytes);
// Every thread copies its chunk of `bytes` between a and b `passes` times (alternating
// direction), timed in-region like the FMA loops (last_span_s). Returns the bytes moved (read +
// write). With a + b in cache this is the cache's copy bandwidth.
double cache_copy(void* a, void* b, size_t bytes, int64_t passes);
// Writes the buffer with the same static split as parallel_copy (first-touch placement).
void parallel_fill(void* p, size_t bytes);
// A team of `threads` OpenMP threads each running fma_f32's loop for `iters`; returns the wall
// time of the slowest thread's loop (s). One thread's time over the team's, times the team size,
// is how many cores' worth of arithmetic the team got (cpu_capacity in probe_cpu.cpp).
double fma_team_s(int threads, int64_t iters);
// Runs `reps` empty OpenMP parallel regions.
void fork_join(int64_t reps);
int max_threads();
// Slowest thread's in-region time of the last FMA or special_run call (excludes fork/join).
double last_span_s();

using TinyKernel = void (*)(const float*, float*, int64_t);
TinyKernel tiny_kernel();

}  // namespace brrr::doctor::kern
