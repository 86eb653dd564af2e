// CUPTI's activity API, loaded at run time with dlopen (like the driver, driver_api.hpp): brrr
// builds against the toolkit's CUPTI headers but never links libcupti, so it runs where CUPTI is
// missing and the profile then falls back to event timing, saying why. Header free of CUPTI types.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cupti_timeline.hpp"

namespace brrr::cuda {

// Records every kernel, memcpy and memset the GPU runs between start() and stop(). One trace at a
// time per process (CUPTI's buffers are global).
class CuptiTrace {
 public:
  // nullptr with *why when CUPTI cannot be loaded or enabled, or a trace is already running.
  // The library: BRRR_CUPTI_LIB when set, else libcupti.so.<CUDA major> on the loader's path, in
  // the folder of the CUDA runtime brrr loaded, or in the toolkit's usual folders.
  static std::unique_ptr<CuptiTrace> start(std::string* why);
  ~CuptiTrace();
  CuptiTrace(const CuptiTrace&) = delete;
  CuptiTrace& operator=(const CuptiTrace&) = delete;

  uint64_t now() const;  // CUPTI's clock (ns), the one its records use
  // Stops recording and returns the records, in no particular order. False with *why when CUPTI
  // dropped records (a buffer it could not get) or failed to flush.
  bool stop(std::vector<GpuActivity>* out, std::string* why);
  const std::string& library() const { return path_; }

 private:
  CuptiTrace() = default;
  bool on_ = false;
  std::string path_;
};

}  // namespace brrr::cuda
