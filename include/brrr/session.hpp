// A Session loads a model, compiles it once into a static plan (kernels plus one arena with every
// intermediate buffer placed ahead of time), then runs it many times.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "brrr/graph.hpp"
#include "brrr/profile.hpp"

namespace brrr {

// What a plan file (`--save-plan` / `--load-plan`, src/runtime/plan_file.hpp) carries between
// processes: generated modules by content_hash(source), and constant weights as a library kernel
// packed them, by pack key (value, its layout and the packed one, a sample of its bytes). A
// session given one takes what it finds there instead of compiling or reordering, and with
// `record` adds what it made itself (Session::plan_binaries() then holds the set to save).
struct PlanBinaries {
  std::map<std::string, std::string> modules;
  std::map<std::string, std::string> weights;
  bool record = false;
  int modules_used = 0, weights_used = 0;  // what this session took from here
  std::mutex mu;                           // modules compile in parallel
};

struct SessionOptions {
  std::string backend = "cpu";  // "cpu" or "cuda" (builds with BRRR_HAVE_CUDA and a device)
  // Compute precision of library GEMMs (and CPU convs) on float32 data. CUDA: "fp32", "tf32",
  // "bf16" or "fp16" (16-bit: weights cast once at load, activations cast per run, fp32
  // accumulate); GEMMs on bfloat16/float16 data always run in their own type. CPU: "fp32", or
  // "bf16" on a CPU with avx512_bf16 or AMX (oneDNN; outputs stay float32); otherwise the
  // Session throws brrr::Error with the reason (plan::cpu_precision_refusal).
  std::string precision = "fp32";
  // CUDA: capture the whole plan as one CUDA graph and replay it per run. -1: on unless
  // BRRR_DISABLE_GRAPHS is set to something other than "0"; 0: off; 1: on.
  int graphs = -1;
  // -1: on unless BRRR_DISABLE_FUSION is set; 0: one kernel per op; 1: fused.
  int fusion = -1;
  // CPU: distribute group-1 convs over the channel Concats they read (distribute_concat), so the
  // concats vanish into partial convs chained by sum post-ops. -1: on when fusion is on, unless
  // BRRR_DISABLE_CONCAT_SPLIT is set to something other than "0"; 0: off; 1: on.
  int concat_split = -1;
  // Concrete shapes for graph inputs with symbolic dims.
  std::map<std::string, Shape> input_shapes;
  std::string cache_dir;  // kernel cache; empty: $XDG_CACHE_HOME/brrr or ~/.cache/brrr
  std::string dump_dir;   // empty: $BRRR_DUMP_DIR
  // CPU: a large generated module is split into one translation unit per cpp_part_bytes of
  // source (0: 128 KiB), at most cpp_max_parts (0: one per hardware thread), compiled in parallel.
  size_t cpp_part_bytes = 0;
  int cpp_max_parts = 0;
  // CPU: threads running the plan, the caller included; 0: $BRRR_THREADS, else the CPUs of the
  // process's affinity mask.
  int threads = 0;
  // CPU: binaries from a plan file to use, and to record into (null: none).
  std::shared_ptr<PlanBinaries> plan_binaries;
};

// Contiguous row-major memory on the session's GPU that the caller owns (a CUDA torch tensor's
// data_ptr(), a cudaMalloc'ed buffer): what Session::run_device reads and writes.
struct DeviceTensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
};

struct MemoryStats {
  size_t arena_bytes = 0;         // peak: size of the one arena all intermediates share
  size_t intermediate_bytes = 0;  // sum of all intermediate buffers (no reuse)
  size_t num_buffers = 0;
};

class Session {
 public:
  Session(Graph g, SessionOptions opts = {});
  explicit Session(const std::string& onnx_path, SessionOptions opts = {});
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Runs the plan; outputs in graph output order. Output buffers the caller no longer holds are
  // reused, so a steady loop allocates nothing. Not reentrant (one run at a time per Session).
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs);
  // CUDA: runs the plan on inputs in GPU memory and writes the outputs (graph output order, their
  // dtypes and shapes) into buffers the caller allocated on the same GPU. Tensor data moves device
  // to device only, into the plan's arena and out of it: nothing goes through the host (kernels
  // the plan runs on the host, listed in plan_summary, excepted). Starts after all work already
  // queued on the device, on any stream, and has finished when it returns. Other backends throw
  // brrr::Error.
  void run_device(const std::map<std::string, DeviceTensor>& inputs,
                  const std::vector<DeviceTensor>& outputs);
  // Runs every kernel `reps` times (after a warm-up) and reports per-kernel median times.
  RunProfile profile(const std::map<std::string, Tensor>& inputs, int reps = 10);
  // Times `reps` whole-plan runs after a warm-up, inputs bound once (CUDA: CUDA events on the
  // session's stream around each run, as it replays; CPU: wall clock), in ms. `between`, if set,
  // is called before each run, outside the timed region: a benchmark runs its baseline there, so
  // that both sides see the same clock and power state (an H200 under a long GEMM drops from
  // 1980 to ~1200-1600 MHz at its power cap within a second).
  std::vector<double> time_runs(const std::map<std::string, Tensor>& inputs, int reps,
                                const std::function<void()>& between = {});
  // The time per run when runs follow each other with no wait between them: `rounds` times, `runs`
  // runs enqueued back to back between two CUDA events and one wait at the end, each round's
  // elapsed time / runs (ms, one value per round). The host's launch of a run then overlaps the
  // run before it, so time_runs' latency minus this is what the caller waits for beyond the GPU's
  // work: the launch and the wait. Empty on the CPU, whose runs are synchronous.
  std::vector<double> time_queued_runs(const std::map<std::string, Tensor>& inputs, int runs,
                                       int rounds = 5);
  // CPU: the plan's kernels (records as profile() gives them) with every library kernel timed
  // alone: after one whole run, each of `reps` rounds runs the plan in order and times each
  // library kernel's call (samples_ms; time_ms their median), the other kernels run untimed so
  // that each library kernel reads what a run gives it, and are listed untimed (time_ms 0). What
  // the doctor prices a plan's library calls at without a profile of that plan (their algorithm
  // and layout are the library's choice). Other backends: empty.
  std::vector<KernelRecord> time_library_kernels_alone(const std::map<std::string, Tensor>& inputs,
                                                       int reps = 10);
  // Every kernel of the plan timed alone, in plan order, on the CPU (a plan the doctor prices
  // whole: its generated kernels too); other backends: the library kernels, as above.
  std::vector<KernelRecord> time_kernels_alone(const std::map<std::string, Tensor>& inputs,
                                               int reps = 10);
  // Each library kernel repeated alone `reps` times after one untimed call, so its weights and
  // inputs are as cache-hot as they can be (the doctor's cache check: a GEMM slower in the runs
  // than this waits on operands streamed from memory); on the CPU, else empty.
  std::vector<KernelRecord> time_library_kernels_hot(const std::map<std::string, Tensor>& inputs,
                                                     int reps = 5);
  // Kernels with their ops, fusion boundaries with reasons, and memory.
  std::string plan_summary() const;

  const Graph& graph() const;
  MemoryStats memory() const;
  // CPU: the threads the plan runs on (SessionOptions::threads resolved); 0 on other backends.
  int threads() const;
  int num_kernels() const;
  // Number of kernels of a kind ("fused", "library", "copy", "reference").
  int num_kernels(const std::string& kind) const;
  // Nodes per kernel, in execution order (node indices into graph()).
  std::vector<std::vector<int>> kernel_nodes() const;
  // CPU: distinct generated functions (fused kernels with the same body share one), and the
  // translation units they were compiled in.
  int num_generated_functions() const;
  int num_translation_units() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brrr
