// Packed constant weights shared within a session's build and carried by a plan file: a library
// kernel's weight reorder (a Winograd transform costs milliseconds per conv) replaced by the pack
// made earlier in the build, or by a copy of the pack a previous session saved. A pack is keyed
// by its value, the user and packed layouts, and a sample of the source bytes; a saved pack whose
// size differs from the layout's is never used.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "backend/cpu/library.hpp"
#include "core/kernel_cache.hpp"

#ifdef BRRR_HAVE_DNNL
#include <fmt/format.h>

#include "backend/cpu/dnnl_util.hpp"
#endif

namespace brrr::cpu {

struct PlanWeights::Impl {
  PlanBinaries* plan = nullptr;
#ifdef BRRR_HAVE_DNNL
  std::map<std::string, dnnl::memory> made;  // packs of this build, by pack_key
#endif
};

namespace {
thread_local PlanWeights::Impl* t_weights = nullptr;
}  // namespace

PlanWeights::PlanWeights(PlanBinaries* plan) : impl_(std::make_unique<Impl>()), prev_(t_weights) {
  impl_->plan = plan;
  t_weights = impl_.get();
}
PlanWeights::~PlanWeights() { t_weights = prev_; }

#ifdef BRRR_HAVE_DNNL
namespace {

// A pack is saved when its reorder took more than this per MiB made (reading a plan file back,
// copies included, costs about 1-2 ms per MiB on a loaded machine).
constexpr double kSavedPackMsPerMiB = 2.0;

std::string_view desc_bytes(const dnnl::memory::desc& d) {
  return {reinterpret_cast<const char*>(&d.data), sizeof d.data};
}

// Value, both layouts, the source size and three 1 KiB samples of it (start, middle, end): a pack
// keyed so is the same reorder of the same bytes, short of a collision in those samples.
std::string pack_key(int value, const void* data, const dnnl::memory::desc& user,
                     const dnnl::memory::desc& want) {
  size_t n = user.get_size();
  const char* p = static_cast<const char*>(data);
  std::string s = fmt::format("{}:{}:", value, n);
  s += desc_bytes(user);
  s += desc_bytes(want);
  size_t k = std::min<size_t>(n, 1024);
  s.append(p, k);
  s.append(p + (n - k) / 2, k);
  s.append(p + n - k, k);
  return content_hash(s);
}

// The plan file's copy of the pack, into `packed`; false when it has none of the right size.
bool copy_from_plan(PlanBinaries& plan, const std::string& key, dnnl::memory& packed) {
  std::lock_guard<std::mutex> lock(plan.mu);
  auto it = plan.weights.find(key);
  if (it == plan.weights.end() || it->second.size() != packed.get_desc().get_size()) return false;
  std::memcpy(packed.get_data_handle(), it->second.data(), it->second.size());
  ++plan.weights_used;
  return true;
}

}  // namespace

dnnl::memory reorder_weights(int value, const void* data, const dnnl::memory::desc& user,
                             const dnnl::memory::desc& want) {
  PlanWeights::Impl* w = t_weights;
  std::string key = w ? pack_key(value, data, user, want) : std::string();
  if (w)
    if (auto it = w->made.find(key); it != w->made.end()) return it->second;
  dnnl::memory packed(want, engine());
  double reorder_ms = 0;
  if (!w || !w->plan || !copy_from_plan(*w->plan, key, packed)) {
    auto t0 = std::chrono::steady_clock::now();
    ThreadLimit limit(user.get_size() < kThreadedReorderBytes);
    dnnl::memory wu(user, engine(), const_cast<void*>(data));
    dnnl::stream s(engine());
    dnnl::reorder(wu, packed).execute(s, wu, packed);
    s.wait();
    reorder_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  if (!w) return packed;
  w->made.emplace(key, packed);
  // Only packs that took longer to make than reading them back costs are worth a plan file's
  // bytes: a Winograd transform (2-6 ms for 0.6 MB), not a plain relayout (squeezenet1_1's 66
  // packs are 11 MB, and reading them cost more than the reorders they saved).
  if (w->plan && reorder_ms > kSavedPackMsPerMiB * double(want.get_size()) / double(1 << 20)) {
    std::lock_guard<std::mutex> lock(w->plan->mu);
    if (w->plan->record)
      w->plan->weights[key].assign(static_cast<const char*>(packed.get_data_handle()),
                                   want.get_size());
  }
  return packed;
}
#endif

}  // namespace brrr::cpu
