// From CUPTI activity records to the plan's steps: which records a step launched and what each
// step took in each timed run. Free of CUPTI types (cupti_trace.hpp collects the records), so the
// mapping is unit-tested on synthetic records without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace brrr::cuda {

// One GPU activity: a kernel (its name as CUPTI reports it), or a copy or fill
// ("[memcpy]", "[memset]"). Timestamps in CUPTI's clock, ns.
struct GpuActivity {
  uint64_t start_ns = 0, end_ns = 0;
  std::string name;
  int64_t ctas = 0;  // a kernel's grid: thread blocks (CTAs) launched, gridX * gridY * gridZ
};

// Splits records by host timestamps taken while the stream was idle: bucket i holds the records
// that start after marks[i] and end by marks[i + 1] (marks ascending; n + 1 marks give n buckets),
// each sorted by start. Records outside every bucket (other work, a mark taken too early) are
// counted in *dropped.
std::vector<std::vector<GpuActivity>> bucket_by_marks(std::vector<GpuActivity> records,
                                                      const std::vector<uint64_t>& marks,
                                                      size_t* dropped = nullptr);

// What a step launches, by name, in launch order: from one eager run with a mark after each step.
using StepSignature = std::vector<std::vector<std::string>>;

struct StepTiming {
  double time_ms = 0;   // the sum of its records' durations (gaps between them are not its time)
  double start_ms = 0;  // its first record's start after the run's first record; a step with no
                        // record starts where the previous step ended
  double end_ms = 0;    // where its last record ended (start_ms when it has none)
  int records = 0;
};

// Splits one run's records (sorted by start, as bucket_by_marks leaves them) into steps by the
// signature: the run must hold exactly the signature's records, in its order (a graph replay of a
// one-stream capture runs its nodes in capture order). False, with *why, when it does not.
bool map_run(const std::vector<GpuActivity>& run, const StepSignature& signature,
             std::vector<StepTiming>* out, std::string* why);

// Scales the idle gaps between consecutive steps of one mapped run by `factor` (0..1), keeping
// each step's own span, so a traced run's timeline fits the untraced wall: CUPTI's records cost
// the GPU idle time between kernels (about 1.6 us per kernel on an H200, 0.33 ms of BERT-base's
// batch-1 replay), not kernel time.
void scale_gaps(std::vector<StepTiming>* run, double factor);

}  // namespace brrr::cuda
