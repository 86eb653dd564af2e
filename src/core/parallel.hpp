// Host loops over large tensors split into bands, one thread each.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace brrr {

// Calls band(begin, end) over [0, n) split into contiguous bands, one thread each: as many
// threads as the machine has (at most 16), each with at least min_bytes_per_thread of the
// `bytes` the loop touches, so that small loops stay on the calling thread. For the load-time
// loops over weights (casts, merges): their time is page faults and memory traffic, which
// scale with threads, and gigabytes of them (Llama-1B) take seconds on one thread.
template <typename F>
void for_bands(int64_t n, size_t bytes, size_t min_bytes_per_thread, F band) {
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads =
      std::min<int64_t>({n, hw, 16, int64_t(bytes / std::max<size_t>(min_bytes_per_thread, 1))});
  if (threads <= 1) {
    if (n > 0) band(int64_t(0), n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(size_t(threads - 1));
  for (int64_t t = 1; t < threads; ++t)
    pool.emplace_back(band, n * t / threads, n * (t + 1) / threads);
  band(int64_t(0), n / threads);
  for (std::thread& th : pool) th.join();
}

}  // namespace brrr
