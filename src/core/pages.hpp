// Host memory pages: mapping a large read-only range in one call.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace brrr {

// Maps the pages of [p, p + n) for reading in one call where Linux can (5.14+), instead of one
// 4 KiB fault at a time as a copy reads them: a weight used in place from the mapped ONNX file
// (Llama-1B: 2.5 GB) is read that way by the GEMM merge and the device upload. A no-op elsewhere,
// and a hint only: a failure leaves the faults to the copy.
inline void prefault_for_reading(const void* p, size_t n) {
#ifdef MADV_POPULATE_READ
  if (n == 0) return;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(4095);
  (void)::madvise(reinterpret_cast<void*>(lo), reinterpret_cast<uintptr_t>(p) + n - lo,
                  MADV_POPULATE_READ);
#else
  (void)p, (void)n;
#endif
}

}  // namespace brrr
