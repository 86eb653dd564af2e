// Library kernels: contractions, convolutions and pools through oneDNN (bias, activation and
// residual epilogues as post-ops), plus a few hand-written copy/reduce kernels.
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cpu/thread_pool.hpp"
#include "brrr/session.hpp"
#include "core/machine_load.hpp"
#include "plan/kernel_ir.hpp"

namespace brrr::cpu {

class LibraryKernel {
 public:
  virtual ~LibraryKernel() = default;
  // Runs on the slot table (graph value id -> buffer address); allocates nothing itself.
  virtual void run(void* const* slots) = 0;
  // The session's pool, for the hand-written kernels' loops (none: they run on the caller).
  ThreadPool* pool = nullptr;
  // A oneDNN primitive made for more than one OpenMP thread.
  bool openmp = false;
  // The type its contraction reads its operands in: "bf16" where the plan asked for it and the
  // library has a kernel for it ("": float32). What the profile reports as its precision.
  std::string precision;
  // oneDNN's name for the implementation it chose ("brg:avx512_core_amx", "jit:...", "ref:..."),
  // empty for brrr's own kernels.
  std::string impl;
  // Activations it converts between layouts inside each run (oneDNN wanted another layout than
  // the buffer's): what, for the profile ("input nchw -> nChw16c, output ..."), and the bytes
  // those reorders read and write.
  std::string layout_note;
  size_t reorder_bytes = 0;

  // Bytes of memory the kernel uses only while it runs (oneDNN's scratchpad, the buffers its
  // reorders stage activations in), whole pages per part. Kernels run one at a time, so the
  // session gives all of them one block, allocated and paged in at build (use_work).
  virtual size_t work_bytes() const { return 0; }
  // Points that memory at `p`: work_bytes() bytes, page-aligned, the kernel's while it runs.
  virtual void use_work(char* p) { (void)p; }
  // One run at build, on whatever the buffers hold, so that the session's first run does not pay
  // a oneDNN primitive's first execution (its JIT code and the library's own code paged in and
  // cold, lazily made kernels): 20-50 us per primitive, 12x a small GEMM's steady time. Library
  // kernels compute without data-dependent addresses, so any values are safe.
  virtual void warm_up(void* const* slots) { run(slots); }

 protected:
  template <class F>
  void parallel_for(int64_t n, F&& f) {
    if (pool)
      pool->parallel_for(n, std::forward<F>(f));
    else if (n > 0)
      f(int64_t(0), n);
  }
};

// Rank-4 activations between library kernels may be stored in another layout than the graph's
// NCHW, so that a chain of convs and pools needs no reorders: NHWC (what oneDNN's brgconv kernels
// use), or channel-blocked nChw<B>c ([N][ceil(C/B)][H][W][B], ONNX Runtime's NCHWc), on which
// oneDNN has its direct, 1x1 and (AVX-512) Winograd convolutions: B = channel_block(), 16 with
// AVX-512, 8 with AVX2 (oneDNN 2.6's jit:avx2 convs take nChw8c and nothing else fast: from NHWC
// each ResNet-50 conv reordered its input and output, 122 reorders, 15.9 of ~140 ms a run, on a
// 2-core AVX2 EPYC). layouts[v] is the Layout of value v; empty means all NCHW. Values with
// H*W == 1 are the same bytes in all three. A blocked value whose C is not a multiple of B is
// padded with zero channels (oneDNN's own convention).
enum Layout : char { kNCHW = 0, kNHWC = 1, kBlocked = 2 };  // in order of preference
constexpr int64_t kMaxChannelBlock = 16;
// The channels of a block of the blocked layout on this CPU: 16 or 8.
int64_t channel_block();
using Layouts = std::vector<char>;
inline char layout_of(const Layouts& l, int v) {
  return v >= 0 && size_t(v) < l.size() ? l[size_t(v)] : char(kNCHW);
}
inline bool is_nhwc(const Layouts& l, int v) { return layout_of(l, v) == kNHWC; }
inline bool is_blocked(const Layouts& l, int v) { return layout_of(l, v) == kBlocked; }
// Bytes of value v's buffer in its layout (blocked channels padded to whole blocks).
size_t value_bytes(const Graph& g, int v, const Layouts& l);

// Whether to use channel-blocked layouts: with oneDNN on a CPU with AVX-512 or AVX2, unless
// BRRR_CONV_LAYOUT is "nhwc" or "plain" (for comparison); BRRR_CONV_LAYOUT=blocked forces them.
// Not for a plan whose convs compute in bf16 on a CPU with AMX: oneDNN's AMX convs (brgconv)
// take NHWC only, and on blocked data it falls back to avx512_core_bf16's jit kernel (ResNet-50
// at --precision bf16 on two Sapphire Rapids cores: 46.8 ms blocked, 8.5 ms NHWC, 27.6 fp32).
bool blocked_layouts_enabled(bool bf16_convs = false);

// Whether 3x3 stride-1 convs on blocked data may use oneDNN's Winograd kernel (fewer multiplies;
// results differ from direct convolution by rounding only: on squeezenet1_1, max abs error 3.0e-7
// against PyTorch with it, 3.6e-7 without, outputs up to 0.95). On unless
// BRRR_DISABLE_WINOGRAD is set to something other than "0".
bool winograd_enabled();

// The row pitch, in elements, of a prepacked plain weight of `rows` rows of `pitch` elements of
// `esize` bytes: padded by 64 bytes when the pitch is a multiple of 1 KiB and there are 64 rows
// or more (BRRR_NO_WEIGHT_PITCH_PAD=1: never), else `pitch`. Rows 4 KiB apart fall into the same
// cache sets: with a 4 KiB pitch every row does, with 1, 2 or 3 KiB every 4th (2nd) row. On an
// AVX2 EPYC, 2 threads, oneDNN 2.6's gemm:jit ran [197,768]x[768,3072] at 55 GFLOP/s and at 71
// with the pitch padded. On a 2-core Zen 3 (peak about 190 GFLOP/s) padded against not, 3 runs of
// 6 interleaved rounds: [197,768]x[768,3072] 2.4-2.6x, [128,3072]x[3072,768] 1.10-1.18x,
// [197,768]x[768,2304] 1.14-1.19x, [128,768]x[768,768] 1.02-1.03x, [128,768]x[768,2304]
// 0.98-1.02x; whole models (min of 12 runs, 3 interleaved rounds): GPT-2 212-219 -> 193-198 ms,
// ViT-B/16 215-226 -> 203-205 ms.
int64_t padded_weight_pitch(int64_t rows, int64_t pitch, size_t esize);

// A ready-to-run primitive for a Library kernel, or nullptr when the library cannot do this case
// (the session then runs the kernel's nodes with their reference kernels).
std::unique_ptr<LibraryKernel> make_library_kernel(const Graph& g, const plan::Kernel& k,
                                                   const Layouts& layouts = {});

// The values of kernel k that may be stored NHWC or channel-blocked (inputs it reads and outputs
// it writes), given that make_library_kernel succeeded for it; `ties` gets groups of values that
// must share one layout (a Concat's inputs and output, a Conv's residual and output), `unpadded`
// values that may be blocked only with whole blocks of channels.
void relayout_capable_values(const Graph& g, const plan::Kernel& k, std::vector<int>* ins,
                             std::vector<int>* outs, std::vector<std::vector<int>>* ties,
                             std::vector<int>* unpadded);

// The calling thread's OpenMP thread count (oneDNN's, read when a primitive is made and when it
// runs) set to `threads` for one scope, so library kernels use the session's thread count.
class LibraryThreads {
 public:
  explicit LibraryThreads(int threads);
  ~LibraryThreads();
  LibraryThreads(const LibraryThreads&) = delete;
  LibraryThreads& operator=(const LibraryThreads&) = delete;

 private:
  int prev_ = 0;
};

// While one is in scope on this thread, the oneDNN GEMMs made on it share their packed constant
// weights: a kernel and its one-thread twin (below) pick the same packed layout, so the twin takes
// the first one's copy instead of packing its own (Llama-1B: 5 GB of weights held twice, plus
// the graph's copy, and twice the reorder time at plan build). Kernels hold what they use; the
// scope only remembers which packs exist, for the kernels of one graph.
class SharedPacks {
 public:
  SharedPacks();
  ~SharedPacks();
  SharedPacks(const SharedPacks&) = delete;
  SharedPacks& operator=(const SharedPacks&) = delete;
  int packed() const;  // weights reordered while in scope
  int reused() const;  // ...and packs a later kernel took instead of reordering again
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  Impl* prev_ = nullptr;
};

// While one is in scope on this thread (a session's build), the constant weights library kernels
// pack are shared: a kernel that wants a pack made earlier in the scope (its one-thread twin, the
// layout pass's remake) takes that one instead of reordering again, a Winograd transform being
// milliseconds per conv. With a `plan` (a plan file's binaries), a pack it holds is copied
// instead of reordered, and with plan->record every pack made is added to it (plan_weights.cpp).
class PlanWeights {
 public:
  explicit PlanWeights(PlanBinaries* plan);
  ~PlanWeights();
  PlanWeights(const PlanWeights&) = delete;
  PlanWeights& operator=(const PlanWeights&) = delete;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  Impl* prev_ = nullptr;
};

// What a session's adaptive kernels have seen of the machine's load. The session counts its runs;
// runs before `one_until` use the one-thread twins.
struct LoadState {
  static constexpr int kFirstStretch = 16;
  static constexpr int kMaxStretch = 1024;
  int64_t run = 0;
  int64_t one_until = 0;
  int stretch = kFirstStretch;
  // The fastest serial run's wall time (LoadRun; 0: none yet). The fastest, not the last: a
  // serial run slowed by the load must not make slow threaded runs look good.
  double serial_ms = 0;
  // This run is one of a loaded stretch: one-thread twins, and the pool runs serially.
  bool serial() const { return run < one_until; }
  // Inside a LoadRun the run's mode, fixed when it began (a kernel that marks the machine loaded
  // changes the next runs, not the rest of this one), else serial().
  int in_run = -1;  // -1: no LoadRun; 0 / 1: this run is threaded / serial
  bool run_serial() const { return in_run < 0 ? serial() : in_run == 1; }
  // Loaded: the next stretch of runs is serial, and the stretch doubles while the load lasts.
  void loaded() {
    one_until = run + 1 + stretch;
    stretch = std::min(stretch * 2, kMaxStretch);
  }
  void calm() { stretch = kFirstStretch; }
  // A kernel of the current run was slow (LoadAdaptiveKernel, inside a LoadRun): judged when the
  // run ends, against others_runnable().
  bool suspect = false;
  // Other processes' runnable threads now (other_runnable_threads(); tests set `others`). A slow
  // threaded run is load only when some other thread wants a CPU: a VM's hiccup slows a run
  // with nobody else runnable, and going serial for a stretch then only doubles its runs
  // (GoogLeNet on a quiet 2-core VM: a median of 16.5 ms over `brrr run --reps 50`, 9.5 ms for
  // its threaded runs, 17 ms for serial ones).
  std::function<int()> others;
  int others_runnable() const { return others ? others() : other_runnable_threads(); }
};

// One whole run of a session, in scope from before its first kernel to after its last. While the
// load state says serial, the pool runs on the caller and the OpenMP thread count is 1: the
// one-thread twins are not the only oneDNN kernels that open OpenMP regions (the ones made for
// one thread still size their reorders' and loops' regions when they run, from that count), and
// under load each two-thread region waits for a descheduled thread (mobilenet_v3_small, every run
// serial, under compile load: medians of 7-108 ms with those regions left in, 1.3-1.7 ms
// without; --threads 1: 1.2-1.6 ms). A threaded run whose pool joins waited on a descheduled worker marks the machine
// loaded when the scope ends. A threaded run marked loaded (by a kernel or the pool) that still
// beat the fastest serial run keeps the threads: with dozens of GEMMs per run, one of them losing a
// time slice on a moderately busy machine is the rule, and going serial then costs more (BERT-base
// at load 3 on 2 cores: 118-160 ms adaptive, 106 ms with the threads kept, 153 ms serial).
// `adaptive` false (BRRR_NO_LOAD_ADAPTIVE): only counts the run.
class LoadRun {
 public:
  LoadRun(LoadState& load, ThreadPool& pool, bool adaptive);
  ~LoadRun();
  LoadRun(const LoadRun&) = delete;
  LoadRun& operator=(const LoadRun&) = delete;

 private:
  LoadState& load_;
  ThreadPool& pool_;
  bool adaptive_;
  bool serial_ = false;  // this run is serial
  double t0_ = 0;        // when it began (ms)
  int64_t one_until_ = 0;  // the load state before the run, restored when the run beat serial
  int stretch_ = 0;
  std::unique_ptr<LibraryThreads> one_thread_;  // set while serial
};

// Milliseconds on some steady clock: what an adaptive kernel times its runs with (tests pass a
// fake one; nullptr: std::chrono::steady_clock).
using MsClock = double (*)();

// `threaded` (an `openmp` kernel) paired with the same kernel made under LibraryThreads(1): runs
// whichever the machine's load favours (library_adaptive.cpp).
std::unique_ptr<LibraryKernel> make_load_adaptive(std::unique_ptr<LibraryKernel> threaded,
                                                  std::unique_ptr<LibraryKernel> one,
                                                  std::shared_ptr<LoadState> load,
                                                  MsClock clock = nullptr);

// oneDNN's gemm:jit (the matmul it picks for strided operands its brgemm refuses: attention's
// head-split GEMMs) generates all of its sgemm kernels at its first call in the process. When one of
// `impls` (kernels' `impl`) is gemm:jit, returns a thread that makes that call now, on a 16x16x64
// product, so the build pays it, alongside its other work, instead of the first run (bert_tiny, one
// thread, at load 3: 36 ms of a 37 ms first run); else a thread that does nothing. Join it before
// the first run (a jthread: joined when destroyed, also when the build throws).
std::jthread start_gemm_jit_init(const std::vector<std::string>& impls);

// The providers make_library_kernel asks, in this order (nullptr: not this one).
std::unique_ptr<LibraryKernel> make_cpu_pool(const Graph& g, const plan::Kernel& k,
                                             const Layouts& layouts);
std::unique_ptr<LibraryKernel> make_cpu_kernel(const Graph& g, const plan::Kernel& k,
                                               const Layouts& layouts);
std::unique_ptr<LibraryKernel> make_dnnl_kernel(const Graph& g, const plan::Kernel& k,
                                                const Layouts& layouts);
// Fused attention (plan::AttentionDesc) on float32 data: library_attention.cpp.
std::unique_ptr<LibraryKernel> make_cpu_attention(const Graph& g, const plan::Kernel& k);

}  // namespace brrr::cpu
