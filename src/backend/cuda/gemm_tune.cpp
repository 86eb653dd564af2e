#include "backend/cuda/gemm_tune.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#ifndef BRRR_LIB_VERSION
#define BRRR_LIB_VERSION "unknown"
#endif

namespace brrr::cuda {

namespace {

constexpr const char* kHeader = "brrr-gemm-tune 1";
constexpr std::size_t kMaxEntryBytes = 4096;  // an entry is ~300 bytes

// Splits at '\n'; a trailing newline gives no empty last line.
std::vector<std::string_view> lines_of(std::string_view t) {
  std::vector<std::string_view> out;
  while (!t.empty()) {
    std::size_t e = t.find('\n');
    out.push_back(t.substr(0, e));
    t = e == t.npos ? std::string_view() : t.substr(e + 1);
  }
  return out;
}

// The rest of `line` after "`tag` ", or nullopt when it does not start so.
std::optional<std::string_view> field(std::string_view line, std::string_view tag) {
  if (line.size() <= tag.size() || line.substr(0, tag.size()) != tag || line[tag.size()] != ' ')
    return std::nullopt;
  return line.substr(tag.size() + 1);
}

bool parse_hex64(std::string_view s, std::uint64_t* v) {
  if (s.size() != 16) return false;
  std::uint64_t x = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    x = (x << 4) | std::uint64_t(d);
  }
  *v = x;
  return true;
}

// Space-separated tokens of `s` (no empty ones).
std::vector<std::string_view> tokens(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t p = 0;
  while (p < s.size()) {
    std::size_t q = s.find(' ', p);
    if (q == s.npos) q = s.size();
    if (q > p) out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

bool parse_number(std::string_view s, double* v) {
  if (s.empty() || s.size() > 32) return false;
  std::string t(s);
  char* end = nullptr;
  double x = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(x) || x < 0) return false;
  *v = x;
  return true;
}

}  // namespace

std::string context_line(const GemmTuneContext& c) {
  // "timing cold-l2": entries chosen by the earlier hot-L2 timing (which favoured tiles that
  // starve on weights read from DRAM) do not match and are timed again.
  return fmt::format("gpu '{}' sms {} cublaslt {} workspace {} timing cold-l2 brrr {}", c.gpu,
                     c.sm_count, c.cublaslt_version, c.workspace_bytes, BRRR_LIB_VERSION);
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int pick_candidate(const std::vector<double>& t, double margin) {
  auto ok = [](double x) { return std::isfinite(x) && x > 0; };
  int best = -1;
  for (int i = 0; i < int(t.size()); ++i)
    if (ok(t[size_t(i)]) && (best < 0 || t[size_t(i)] < t[size_t(best)])) best = i;
  if (best <= 0) return 0;                  // #0 is fastest, or nothing ran (the caller checks)
  if (!ok(t[0])) return best;               // #0 failed to run: the fastest that did
  return t[size_t(best)] < t[0] * (1.0 - margin) ? best : 0;
}

std::string format_tune_entry(const std::string& context, const std::string& gemm,
                              const TunedAlgo& a) {
  std::string algo;
  for (std::uint64_t w : a.data) algo += fmt::format(" {:016x}", w);
  return fmt::format("{}\ncontext {}\ngemm {}\nalgo{}\nconfig {}\ntiming {:.3f} {:.3f} {}\n",
                     kHeader, context, gemm, algo, a.config, a.chosen_us, a.heuristic_us,
                     a.candidates);
}

std::optional<TunedAlgo> parse_tune_entry(std::string_view text, const std::string& context,
                                          const std::string& gemm, std::string* why) {
  auto bad = [&](std::string w) -> std::optional<TunedAlgo> {
    if (why) *why = std::move(w);
    return std::nullopt;
  };
  std::vector<std::string_view> ls = lines_of(text);
  if (ls.size() != 6 || ls[0] != kHeader) return bad("not a brrr GEMM tuning entry");
  auto ctx = field(ls[1], "context");
  auto gm = field(ls[2], "gemm");
  if (!ctx || *ctx != context) return bad("it was tuned for another device or library");
  if (!gm || *gm != gemm) return bad("it is for another GEMM");
  TunedAlgo a;
  auto algo = field(ls[3], "algo");
  std::vector<std::string_view> words = algo ? tokens(*algo) : std::vector<std::string_view>{};
  if (words.size() != a.data.size()) return bad("its algorithm is not 8 hex words");
  for (std::size_t i = 0; i < words.size(); ++i)
    if (!parse_hex64(words[i], &a.data[i])) return bad("its algorithm is not 8 hex words");
  auto cfg = field(ls[4], "config");
  if (!cfg) return bad("it has no config line");
  a.config = std::string(*cfg);
  auto tm = field(ls[5], "timing");
  std::vector<std::string_view> nums = tm ? tokens(*tm) : std::vector<std::string_view>{};
  double count = 0;
  if (nums.size() != 3 || !parse_number(nums[0], &a.chosen_us) ||
      !parse_number(nums[1], &a.heuristic_us) || !parse_number(nums[2], &count) ||
      count != std::floor(count) || count > 1e6)
    return bad("its timing line is malformed");
  a.candidates = int(count);
  return a;
}

GemmTuneCache::GemmTuneCache(std::string dir, std::string context)
    : cache_(std::move(dir), ".gemmtune", kMaxEntryBytes), context_(std::move(context)) {}

std::string GemmTuneCache::key(const std::string& gemm) const {
  return "gemm-" + content_hash(context_ + "\n" + gemm);
}

std::optional<TunedAlgo> GemmTuneCache::lookup(const std::string& gemm) const {
  if (!cache_.enabled()) return std::nullopt;
  const std::string k = key(gemm);
  std::optional<std::string> text = cache_.lookup(k);
  std::string why;
  if (text) {
    if (auto a = parse_tune_entry(*text, context_, gemm, &why)) return a;
  } else {
    // KernelCache misses silently; an entry that is there but fails its hash is worth a line.
    struct stat st {};
    if (::lstat(entry_path(gemm).c_str(), &st) != 0) return std::nullopt;  // never tuned
    why = "it is damaged (its hash does not match, or it is not a regular file)";
  }
  std::fprintf(stderr, "brrr cuda: ignoring GEMM tuning cache entry %s: %s; tuning again\n",
               entry_path(gemm).c_str(), why.c_str());
  return std::nullopt;
}

bool GemmTuneCache::store(const std::string& gemm, const TunedAlgo& a) const {
  return cache_.publish(key(gemm), format_tune_entry(context_, gemm, a));
}

}  // namespace brrr::cuda
