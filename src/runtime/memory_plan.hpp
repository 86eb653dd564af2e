// Static memory planning: place every intermediate buffer in one arena so that buffers whose
// lifetimes (first kernel writing, last kernel reading) overlap never share bytes.
#pragma once
#include <cstddef>
#include <vector>

namespace brrr::runtime {

struct BufferRequest {
  size_t bytes = 0;
  int first = 0;  // kernel index that writes it
  int last = 0;   // last kernel index that reads it (inclusive)
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // per request, 64-byte aligned
  size_t arena_bytes = 0;       // peak
  size_t total_bytes = 0;       // sum of all (aligned) requests: what no reuse would need
};

// Greedy: largest buffers first, each at the lowest offset free during its whole lifetime.
MemoryPlan plan_memory(const std::vector<BufferRequest>& reqs);

}  // namespace brrr::runtime
