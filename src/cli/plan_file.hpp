// `--save-plan FILE` / `--load-plan FILE` (run, bench): what a warm start reuses from an earlier
// session, trtexec's --saveEngine / --loadEngine for a brrr plan. The file holds the generated
// kernel modules and the library kernels' packed constant weights (SessionOptions::plan_binaries),
// bound by a key to the model, brrr's version, the options that shape the plan and the machine.
// The plan itself is rebuilt from the model on load (its passes take ~1 ms on the examples); what
// the file saves is the compiler and the weight reorders. CPU only.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "brrr/session.hpp"

namespace brrr::cli {

// Field name -> value, in a fixed order; a load compares every field.
using PlanKey = std::vector<std::pair<std::string, std::string>>;

// The key of a session of the model file at `model_path` with `opts` (input_shapes and threads
// resolved): brrr version and commit, the model's content hash, backend, precision, fusion,
// threads, input shapes and the CPU (model name and flags). BRRR_* switches are not in it: what
// the file holds is found by content (a module by its source's hash, a weight pack by its value,
// both layouts and its bytes), so a switch that changes the plan makes misses, never wrong code.
PlanKey plan_key(const std::string& model_path, const SessionOptions& opts);

// The largest plan file read (bytes).
constexpr size_t kMaxPlanFileBytes = size_t(4) << 30;

// Writes the key and binaries (temp file + rename). Throws brrr::Error naming the path.
void save_plan_file(const std::string& path, const PlanKey& key, const PlanBinaries& b);

// Reads a plan file and checks it: a regular file of at most kMaxPlanFileBytes, brrr's magic and
// format version, a checksum over everything, every length within the file, and every key field
// equal to `expected`'s. Throws brrr::Error with one line saying which check failed (the field,
// the saved and the current value for a mismatch). The binaries come back ready for a session.
std::shared_ptr<PlanBinaries> load_plan_file(const std::string& path, const PlanKey& expected);

}  // namespace brrr::cli
