#include "backend/cuda/cupti_timeline.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace brrr::cuda {

std::vector<std::vector<GpuActivity>> bucket_by_marks(std::vector<GpuActivity> records,
                                                      const std::vector<uint64_t>& marks,
                                                      size_t* dropped) {
  const size_t n = marks.empty() ? 0 : marks.size() - 1;
  std::vector<std::vector<GpuActivity>> out(n);
  size_t lost = 0;
  std::stable_sort(records.begin(), records.end(),
                   [](const GpuActivity& a, const GpuActivity& b) { return a.start_ns < b.start_ns; });
  for (auto& r : records) {
    // The first mark after the record's start closes its bucket.
    auto it = std::upper_bound(marks.begin(), marks.end(), r.start_ns);
    const size_t closing = size_t(it - marks.begin());
    if (closing == 0 || closing > n || r.end_ns > marks[closing] || r.end_ns < r.start_ns) {
      ++lost;
      continue;
    }
    out[closing - 1].push_back(std::move(r));
  }
  if (dropped) *dropped = lost;
  return out;
}

bool map_run(const std::vector<GpuActivity>& run, const StepSignature& signature,
             std::vector<StepTiming>* out, std::string* why) {
  size_t expected = 0;
  for (const auto& s : signature) expected += s.size();
  if (run.size() != expected) {
    if (why)
      *why = fmt::format("the run has {} GPU activities, its steps launched {} when run alone",
                         run.size(), expected);
    return false;
  }
  out->assign(signature.size(), StepTiming{});
  const uint64_t origin = run.empty() ? 0 : run.front().start_ns;
  size_t at = 0;
  double end_ms = 0;  // where the previous step ended, for a step with no record
  for (size_t i = 0; i < signature.size(); ++i) {
    StepTiming& t = (*out)[i];
    t.start_ms = end_ms;
    for (size_t k = 0; k < signature[i].size(); ++k, ++at) {
      const GpuActivity& r = run[at];
      if (r.name != signature[i][k]) {
        if (why)
          *why = fmt::format("activity {} of the run is '{}', step {} launched '{}' when run alone",
                             at, r.name, i, signature[i][k]);
        return false;
      }
      // A kernel launched dependent (BRRR_CUDA_PDL) can start before the one before it ends and
      // waits on the device: on one stream its time is what it adds past that end.
      const double e = double(r.end_ns - origin) * 1e-6;
      const double s = std::min(e, std::max(double(r.start_ns - origin) * 1e-6, at ? end_ms : 0.0));
      if (k == 0) t.start_ms = s;
      t.time_ms += e - s;
      end_ms = std::max(end_ms, e);
      ++t.records;
    }
    t.end_ms = t.records ? end_ms : t.start_ms;
  }
  return true;
}

void scale_gaps(std::vector<StepTiming>* run, double factor) {
  factor = std::clamp(factor, 0.0, 1.0);
  double prev_end = 0, new_prev_end = 0;
  for (size_t i = 0; i < run->size(); ++i) {
    StepTiming& t = (*run)[i];
    const double span = t.end_ms - t.start_ms;
    const double gap = i == 0 ? t.start_ms : std::max(0.0, t.start_ms - prev_end);
    prev_end = std::max(prev_end, t.end_ms);
    t.start_ms = new_prev_end + gap * factor;
    t.end_ms = t.start_ms + span;
    new_prev_end = std::max(new_prev_end, t.end_ms);
  }
}

}  // namespace brrr::cuda
