// A oneDNN kernel that runs on several OpenMP threads, paired with the same kernel made for one
// thread. oneDNN partitions its work statically, so when another process takes a core, its join
// waits for a descheduled thread (squeezenet 3 -> 400 ms with a CPU hog per core). Each run of
// the threaded kernel is timed; when it is much slower than its best, or slower than the
// one-thread kernel's last run, the next runs use the one-thread kernel, for a stretch that
// doubles while the machine stays loaded, then the threaded one is tried again.
#include <algorithm>
#include <chrono>
#include <limits>

#include "backend/cpu/library.hpp"

namespace brrr::cpu {

namespace {

constexpr double kSlowerThanBest = 2.0;  // a threaded run this much slower than its best: loaded
constexpr int kFirstStretch = 4, kMaxStretch = 256;

class LoadAdaptiveKernel : public LibraryKernel {
 public:
  LoadAdaptiveKernel(std::unique_ptr<LibraryKernel> threaded, std::unique_ptr<LibraryKernel> one)
      : threaded_(std::move(threaded)), one_(std::move(one)) {}

  void run(void* const* slots) override {
    using clk = std::chrono::steady_clock;
    // Run 1 is threaded, run 2 times the one-thread kernel once, so there is a time to compare.
    if (best_ == kNone || (one_timed_ && single_left_ == 0)) return run_threaded(slots);
    if (single_left_ > 0) --single_left_;
    LibraryThreads one(1);
    auto t0 = clk::now();
    one_->run(slots);
    one_ms_ = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
    one_timed_ = true;
  }

 private:
  static constexpr double kNone = std::numeric_limits<double>::infinity();

  void run_threaded(void* const* slots) {
    using clk = std::chrono::steady_clock;
    auto t0 = clk::now();
    threaded_->run(slots);
    double ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
    best_ = std::min(best_, ms);
    if (ms > kSlowerThanBest * best_ || (one_timed_ && ms > one_ms_)) {
      single_left_ = stretch_;
      stretch_ = std::min(stretch_ * 2, kMaxStretch);
    } else {
      stretch_ = kFirstStretch;
    }
  }

  std::unique_ptr<LibraryKernel> threaded_, one_;
  double best_ = kNone;   // fastest threaded run seen
  double one_ms_ = 0;     // the one-thread kernel's last run
  bool one_timed_ = false;
  int single_left_ = 0;   // runs left on the one-thread kernel
  int stretch_ = kFirstStretch;
};

}  // namespace

std::unique_ptr<LibraryKernel> make_load_adaptive(std::unique_ptr<LibraryKernel> threaded,
                                                  std::unique_ptr<LibraryKernel> one) {
  return std::make_unique<LoadAdaptiveKernel>(std::move(threaded), std::move(one));
}

}  // namespace brrr::cpu
