#include "runtime/memory_plan.hpp"

#include <algorithm>
#include <numeric>

namespace brrr::runtime {

MemoryPlan plan_memory(const std::vector<BufferRequest>& reqs) {
  MemoryPlan p;
  p.offsets.assign(reqs.size(), 0);
  auto align = [](size_t b) { return (b + 63) / 64 * 64; };
  std::vector<size_t> order(reqs.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return reqs[a].bytes > reqs[b].bytes; });
  std::vector<size_t> placed;
  for (size_t r : order) {
    size_t need = align(reqs[r].bytes);
    p.total_bytes += need;
    // Occupied ranges of buffers alive at the same time, sorted by offset.
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t q : placed)
      if (reqs[q].first <= reqs[r].last && reqs[r].first <= reqs[q].last)
        busy.push_back({p.offsets[q], p.offsets[q] + align(reqs[q].bytes)});
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (const auto& [lo, hi] : busy) {
      if (off + need <= lo) break;
      off = std::max(off, hi);
    }
    p.offsets[r] = off;
    p.arena_bytes = std::max(p.arena_bytes, off + need);
    placed.push_back(r);
  }
  return p;
}

}  // namespace brrr::runtime
