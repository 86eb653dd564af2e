// cuBLASLt algorithm tuning, the host half: the rule that picks a timed candidate, and the
// on-disk cache of choices beside the NVRTC cubins (core/kernel_cache.hpp's entries and publish
// protocol). The device half (candidates, timing) is in cublaslt_gemm.cpp. Free of CUDA headers,
// so the cache is tested without a device.
//
// Why a cache and a margin: timings of near-equal candidates differ run to run, so a plain
// "fastest" pick changed between sessions. A candidate replaces heuristic #0 only when it beats it
// by kTuneMargin, and the choice is stored, so a later session reuses it without timing.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/kernel_cache.hpp"

namespace brrr::cuda {

// A candidate must be this much faster than heuristic #0 (by median) to replace it.
constexpr double kTuneMargin = 0.05;

// A chosen algorithm: cuBLASLt's opaque cublasLtMatmulAlgo_t (8 uint64s) and what it is.
struct TunedAlgo {
  std::array<std::uint64_t, 8> data{};
  std::string config;  // readable: "id 66 tile 20 stages 35 splitK 1 ..."
  // Medians measured when it was chosen (microseconds per call): the choice's and heuristic #0's.
  double chosen_us = 0, heuristic_us = 0;
  int candidates = 0;  // how many were timed
};

// What an entry is valid for besides the GEMM: device, library and workspace.
struct GemmTuneContext {
  std::string gpu;         // device name
  int sm_count = 0;
  std::size_t cublaslt_version = 0;  // cublasLtGetVersion()
  std::size_t workspace_bytes = 0;   // the heuristics' and candidates' limit
};
std::string context_line(const GemmTuneContext& c);

// The median of `v` (the mean of the middle two for an even count); 0 for none.
double median_of(std::vector<double> v);

// Index of the candidate to use given each one's median time (index 0 is heuristic #0; a
// negative or non-finite time marks a candidate that failed): the fastest when it beats #0 by
// `margin`, else 0.
int pick_candidate(const std::vector<double>& median_us, double margin = kTuneMargin);

// One cache entry's text, and back. parse_tune_entry returns nullopt with *why set when the text
// is malformed or names another context or GEMM (a key collision, an edited file).
std::string format_tune_entry(const std::string& context, const std::string& gemm,
                              const TunedAlgo& a);
std::optional<TunedAlgo> parse_tune_entry(std::string_view text, const std::string& context,
                                          const std::string& gemm, std::string* why);

class GemmTuneCache {
 public:
  // dir "" (or BRRR_DISABLE_CACHE=1): every lookup misses and store writes nothing.
  GemmTuneCache(std::string dir, std::string context);

  // The stored choice for `gemm`; a corrupt or mismatched entry is a miss with a one-line warning
  // on stderr (and is replaced by the next store).
  std::optional<TunedAlgo> lookup(const std::string& gemm) const;
  bool store(const std::string& gemm, const TunedAlgo& a) const;
  // The entry's file (for tests and messages).
  std::string entry_path(const std::string& gemm) const { return cache_.object_path(key(gemm)); }
  const std::string& context() const { return context_; }

 private:
  std::string key(const std::string& gemm) const;
  KernelCache cache_;
  std::string context_;
};

}  // namespace brrr::cuda
