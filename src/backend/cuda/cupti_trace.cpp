#include "backend/cuda/cupti_trace.hpp"

#include <cuda.h>
#include <cupti_activity.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "core/env.hpp"

namespace brrr::cuda {
namespace {

// Every CUPTI entry point brrr uses.
#define BRRR_CUPTI_FUNCS(X)                                                                  \
  X(cuptiGetResultString) X(cuptiGetTimestamp) X(cuptiActivityEnable) X(cuptiActivityDisable) \
  X(cuptiActivityRegisterCallbacks) X(cuptiActivityFlushAll) X(cuptiActivityGetNextRecord)    \
  X(cuptiActivityGetNumDroppedRecords)

struct CuptiApi {
#define BRRR_CUPTI_DECLARE(name) decltype(&::name) name = nullptr;
  BRRR_CUPTI_FUNCS(BRRR_CUPTI_DECLARE)
#undef BRRR_CUPTI_DECLARE
};

struct Loaded {
  CuptiApi api;
  bool ok = false;
  std::string path, reason;
};

// Where libcupti may be: the switch, the loader's path, beside the CUDA runtime brrr loaded
// (a toolkit's lib folder, or a pip wheel's), and the toolkit's two usual folders.
std::vector<std::string> candidates() {
  const std::string so = fmt::format("libcupti.so.{}", CUDA_VERSION / 1000);
  std::string set = env::text("BRRR_CUPTI_LIB");
  if (!set.empty()) return {set};
  std::vector<std::string> c = {so};
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaRuntimeGetVersion), &info) && info.dli_fname) {
    std::filesystem::path dir = std::filesystem::path(info.dli_fname).parent_path();
    c.push_back((dir / so).string());
    c.push_back((dir.parent_path() / "extras/CUPTI/lib64" / so).string());
  }
  for (const char* root : {"/usr/local/cuda/extras/CUPTI/lib64/",
                           "/usr/local/cuda/targets/x86_64-linux/lib/",
                           "/usr/local/cuda/targets/sbsa-linux/lib/"})
    c.push_back(root + so);
  return c;
}

Loaded load() {
  Loaded l;
  void* lib = nullptr;
  std::string tried;
  for (const std::string& p : candidates()) {
    lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      l.path = p;
      break;
    }
    const char* e = dlerror();
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : "; ", p, e ? e : "?");
  }
  if (!lib) {
    l.reason = "CUPTI not loaded: " + tried + "; set BRRR_CUPTI_LIB to the full path of libcupti";
    return l;
  }
#define BRRR_CUPTI_LOAD(fn)                                                  \
  {                                                                          \
    dlerror();                                                               \
    void* p = dlsym(lib, #fn);                                               \
    if (!p) {                                                                \
      l.reason = "CUPTI library " + l.path + " lacks " #fn;                  \
      return l;                                                              \
    }                                                                        \
    l.api.fn = reinterpret_cast<decltype(l.api.fn)>(p);                      \
  }
  BRRR_CUPTI_FUNCS(BRRR_CUPTI_LOAD)
#undef BRRR_CUPTI_LOAD
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();  // thread-safe static init
  return l;
}

std::string result_text(CUptiResult r) {
  const char* s = nullptr;
  if (loaded().ok) loaded().api.cuptiGetResultString(r, &s);
  return s ? s : fmt::format("CUPTI error {}", int(r));
}

// CUPTI hands its buffers to these callbacks, which carry no user pointer: the records go to one
// process-wide collector, guarded because CUPTI may complete buffers on its own thread.
std::mutex g_mu;
std::vector<GpuActivity> g_records;
size_t g_unreadable = 0;
std::atomic<bool> g_busy{false};
constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  const CuptiApi& api = loaded().api;
  std::lock_guard<std::mutex> lock(g_mu);
  CUpti_Activity* rec = nullptr;
  for (;;) {
    CUptiResult r = api.cuptiActivityGetNextRecord(buffer, valid, &rec);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (r != CUPTI_SUCCESS) {
      ++g_unreadable;
      break;
    }
    GpuActivity a;
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        a = {k->start, k->end, k->name ? k->name : "?",
             int64_t(k->gridX) * int64_t(k->gridY) * int64_t(k->gridZ)};
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        a = {m->start, m->end, "[memcpy]"};
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        a = {m->start, m->end, "[memset]"};
        break;
      }
      default: continue;
    }
    g_records.push_back(std::move(a));
  }
  std::free(buffer);
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

}  // namespace

std::unique_ptr<CuptiTrace> CuptiTrace::start(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok) {
    if (why) *why = l.reason;
    return nullptr;
  }
  if (g_busy.exchange(true)) {
    if (why) *why = "another CUPTI trace is running in this process";
    return nullptr;
  }
  std::unique_ptr<CuptiTrace> t(new CuptiTrace());
  t->path_ = l.path;
  static const CUptiResult registered =
      l.api.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  CUptiResult r = registered;
  for (CUpti_ActivityKind k : kKinds) {
    if (r != CUPTI_SUCCESS) break;
    r = l.api.cuptiActivityEnable(k);
  }
  if (r != CUPTI_SUCCESS) {
    for (CUpti_ActivityKind k : kKinds) l.api.cuptiActivityDisable(k);
    g_busy = false;
    if (why) *why = "CUPTI activity tracing could not start: " + result_text(r);
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_records.clear();
    g_unreadable = 0;
  }
  t->on_ = true;
  return t;
}

uint64_t CuptiTrace::now() const {
  uint64_t ts = 0;
  loaded().api.cuptiGetTimestamp(&ts);
  return ts;
}

bool CuptiTrace::stop(std::vector<GpuActivity>* out, std::string* why) {
  const CuptiApi& api = loaded().api;
  if (!on_) {
    if (why) *why = "the CUPTI trace was already stopped";
    return false;
  }
  // Flushed while still enabled (the caller synchronized: every record is complete), then off.
  CUptiResult r = api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind k : kKinds) api.cuptiActivityDisable(k);
  size_t dropped = 0;
  api.cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  on_ = false;
  g_busy = false;
  std::lock_guard<std::mutex> lock(g_mu);
  *out = std::move(g_records);
  g_records.clear();
  if (r != CUPTI_SUCCESS) {
    if (why) *why = "CUPTI could not flush its records: " + result_text(r);
    return false;
  }
  if (dropped || g_unreadable) {
    if (why)
      *why = fmt::format("CUPTI dropped {} record(s) and left {} buffer(s) unreadable", dropped,
                         g_unreadable);
    return false;
  }
  return true;
}

CuptiTrace::~CuptiTrace() {
  if (!on_) return;
  std::vector<GpuActivity> ignored;
  std::string why;
  stop(&ignored, &why);
}

}  // namespace brrr::cuda
