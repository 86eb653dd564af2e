// A oneDNN kernel that runs on several OpenMP threads, paired with the same kernel made for one
// thread. oneDNN partitions its work statically, so when another process takes a core, its join
// waits for a descheduled thread (squeezenet 3 -> 400 ms with a CPU hog per core). Each run of
// the threaded kernel is timed; when it is much slower than its best, or slower than the
// one-thread kernel's last run, the session's next runs use the one-thread kernels (all of them:
// load is the machine's), for a stretch that doubles while the load lasts, then the threaded ones
// are tried again. LoadRun, around each whole run, makes a loaded stretch's runs serial, and
// within it a slow kernel counts as load only when another process's thread is runnable at the
// run's end.
#include <algorithm>
#include <chrono>
#include <limits>

#include "backend/cpu/library.hpp"

namespace brrr::cpu {

namespace {

constexpr double kSlowerThanBest = 2.0;  // a threaded run this much slower than its best: loaded
// ...and by this much (ms): a descheduled thread costs a time slice (milliseconds), while a
// kernel of tens of microseconds jitters by 2x on a quiet machine.
constexpr double kSlowerByMs = 0.05;

double steady_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class LoadAdaptiveKernel : public LibraryKernel {
 public:
  LoadAdaptiveKernel(std::unique_ptr<LibraryKernel> threaded, std::unique_ptr<LibraryKernel> one,
                     std::shared_ptr<LoadState> load, MsClock clock)
      : threaded_(std::move(threaded)),
        one_(std::move(one)),
        load_(std::move(load)),
        now_ms_(clock ? clock : &steady_ms) {
    precision = threaded_->precision;
    impl = threaded_->impl;
    layout_note = threaded_->layout_note;
    reorder_bytes = threaded_->reorder_bytes;
  }

  // Only one of the two runs at a time: they share one block.
  size_t work_bytes() const override {
    return std::max(threaded_->work_bytes(), one_->work_bytes());
  }
  void use_work(char* p) override {
    threaded_->use_work(p);
    one_->use_work(p);
  }

  // The kernel the first run will use (the twin when the session starts serial), untimed: the
  // load state is the runs'.
  void warm_up(void* const* slots) override {
    if (!load_->serial()) return threaded_->warm_up(slots);
    LibraryThreads one(1);
    one_->warm_up(slots);
  }

  void run(void* const* slots) override {
    // A serial run takes the twin (also before any threaded run: a session that starts serial).
    // Otherwise the first threaded run is timed, then the twin once, so there is a time to
    // compare, then threaded runs.
    if (!load_->run_serial() && (best_ == kNone || one_timed_)) return run_threaded(slots);
    LibraryThreads one(1);
    const double t0 = now_ms_();
    one_->run(slots);
    one_ms_ = now_ms_() - t0;
    one_timed_ = true;
  }

 private:
  static constexpr double kNone = std::numeric_limits<double>::infinity();

  void run_threaded(void* const* slots) {
    const double t0 = now_ms_();
    threaded_->run(slots);
    const double ms = now_ms_() - t0;
    best_ = std::min(best_, ms);
    // Loaded: every adaptive kernel of the session takes its twin for the next stretch. Inside a
    // whole run (LoadRun) that is decided when the run ends.
    if (ms > kSlowerThanBest * best_ + kSlowerByMs || (one_timed_ && ms > one_ms_ + kSlowerByMs)) {
      if (load_->in_run >= 0)
        load_->suspect = true;
      else
        load_->loaded();
    } else {
      load_->calm();
    }
  }

  std::unique_ptr<LibraryKernel> threaded_, one_;
  std::shared_ptr<LoadState> load_;
  MsClock now_ms_;
  double best_ = kNone;  // fastest threaded run seen
  double one_ms_ = 0;    // the twin's last run
  bool one_timed_ = false;
};

}  // namespace

LoadRun::LoadRun(LoadState& load, ThreadPool& pool, bool adaptive)
    : load_(load), pool_(pool), adaptive_(adaptive) {
  serial_ = adaptive_ && load_.serial();
  pool_.set_serial(serial_);
  if (serial_) one_thread_ = std::make_unique<LibraryThreads>(1);
  one_until_ = load_.one_until, stretch_ = load_.stretch;
  load_.in_run = serial_ ? 1 : 0;
  t0_ = steady_ms();
}

LoadRun::~LoadRun() {
  one_thread_.reset();
  load_.in_run = -1;
  const double ms = steady_ms() - t0_;
  if (adaptive_ && serial_)
    load_.serial_ms = load_.serial_ms > 0 ? std::min(load_.serial_ms, ms) : ms;
  if (adaptive_ && !serial_) {
    if (!load_.serial()) {
      // A slow kernel or a pool join that waited on a descheduled worker: load, if another
      // process's thread wants a CPU now; else a hiccup of the machine, which serial runs do not
      // escape.
      const bool slow = pool_.take_long_waits() > 0 || load_.suspect;
      if (slow && load_.others_runnable() > 0)
        load_.loaded();
      else
        load_.calm();
    }
    load_.suspect = false;
    // Marked loaded, yet faster than serial: the second thread still pays; keep it. With no
    // serial time yet, one serial run measures it before a whole stretch is spent serial.
    if (load_.serial() && load_.serial_ms <= 0) {
      load_.one_until = load_.run + 2;
      load_.stretch = stretch_;
    } else if (load_.serial() && ms < load_.serial_ms) {
      load_.one_until = one_until_;
      load_.stretch = stretch_;
    }
  }
  ++load_.run;
}

std::unique_ptr<LibraryKernel> make_load_adaptive(std::unique_ptr<LibraryKernel> threaded,
                                                  std::unique_ptr<LibraryKernel> one,
                                                  std::shared_ptr<LoadState> load, MsClock clock) {
  return std::make_unique<LoadAdaptiveKernel>(std::move(threaded), std::move(one), std::move(load),
                                              clock);
}

}  // namespace brrr::cpu
