// plan_memory: place every intermediate buffer in one arena so that buffers whose lifetimes
// (first kernel writing, last kernel reading) overlap never share bytes.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

#include "plan/kernel_ir.hpp"

namespace brrr {

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

// Where each value of a plan lives in the arena.
struct ArenaPlan {
  std::vector<int64_t> offset;  // per value id: byte offset in the arena, -1 when not there
  // Per value id: the value whose buffer it is (a copy kernel's output: its input's buffer; a
  // conv's or GEMM's sum post-op reading a value for the last time: its output is written over
  // that value), -1 when none; such a value has no offset of its own.
  std::vector<int> share;
  // Per value id: the byte offset of its bytes inside the buffer of share[v] (a Concat's input
  // placed inside the Concat's output); 0 elsewhere.
  std::vector<int64_t> share_offset;
  // Per kernel: a Concat whose inputs were written in place inside its output (no work).
  std::vector<bool> concat_in_place;
  size_t arena_bytes = 0;
  size_t intermediate_bytes = 0;  // sum of the buffers without reuse
  size_t num_buffers = 0;
};

// The plan's arena: every kernel output that is not a graph output, sized by `nbytes` (the
// buffer of a value in its layout). Used by the CPU executor; the CUDA executor plans its own.
// `concat_chunks(i)`, when given, says whether Concat kernel i's output buffer is its inputs'
// buffers back to back (in their layouts); those Concats are planned in place.
ArenaPlan plan_memory(const Graph& g, const plan::Plan& p, const std::function<size_t(int)>& nbytes,
                      const std::function<bool(size_t)>& concat_chunks = {});

// Whether copy kernel i of p has no work in arena plan a: its output shares its input's buffer.
bool copy_aliases_input(const plan::Plan& p, size_t i, const ArenaPlan& a);

}  // namespace brrr
