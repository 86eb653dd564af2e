// What an executor measured: one record per kernel it ran. The doctor (src/doctor) consumes this;
// every executor (reference, CPU plan, CUDA plan) produces it. Backend-neutral.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "brrr/op.hpp"

namespace brrr {

// A tensor a kernel reads or writes, so the doctor can find intermediates a fused plan would keep
// in registers (the fusion remedy). Weights and graph inputs are listed too.
struct TensorUse {
  std::string name;
  double bytes = 0;
  // A weight: an initializer or folded value, the same in every run (the doctor's roofline keeps
  // weights in a cache between runs only where all of the model's weights fit it).
  bool constant = false;
};

struct KernelRecord {
  std::string name;                  // kernel name, e.g. "fused_3_softmax" or a node name
  std::string kind;                  // "fused", "library", "copy", "reference" or "gemm_chain"
  std::vector<std::string> ops;      // op types it covers, e.g. {"Sub","Exp","ReduceSum","Div"}
  std::vector<std::string> nodes;    // node names it covers (fused_from)
  OpClass cls = OpClass::elementwise;  // class of the dominant op (contraction wins, then norm)
  Cost cost;                         // flops, special functions, compulsory bytes
  double time_ms = 0;                // median measured time of this kernel
  // This kernel's time in each timed run, in run order (empty: not kept). When the profile says
  // kernels_in_wall_runs, these are the same runs as RunProfile::wall_samples_ms.
  std::vector<double> samples_ms;
  double start_ms = 0;               // start offset within one run, for traces
  // The start offset in each timed run, like samples_ms (empty: starts are not kept per run).
  std::vector<double> start_samples_ms;
  // GPU activities (kernels, copies, fills) one run of it launched, as CUPTI recorded them (0: not
  // traced); a library call may launch several.
  int gpu_activities = 0;
  // Their kernel names as CUPTI gives them, in launch order, when it launched more than one
  // (a cuBLASLt call that also runs a reduction kernel, say).
  std::vector<std::string> gpu_activity_names;
  // The grid of its longest GPU kernel in one run: thread blocks (CTAs) launched, from CUPTI
  // (0: not traced). Fewer CTAs than the GPU has SMs leave SMs idle for the whole kernel.
  int64_t grid_ctas = 0;
  int lane = 0;                      // thread or stream, for traces
  std::string precision;             // library kernels: "fp32", "tf32", "bf16", "fp16" ("" = fp32)
  bool graph_node = false;           // replayed as a CUDA graph node (fixed cost: per node)
  std::vector<TensorUse> reads;      // optional: lets the doctor predict what fusion saves
  std::vector<TensorUse> writes;
  // Why this kernel's outputs did not fuse into their consumers, one line per boundary:
  // "-> consumer via 'value': not fused: ..." (from the plan; empty for unplanned runs).
  std::vector<std::string> boundaries;
  // A library kernel that converts activations between layouts inside each run (oneDNN wants
  // another layout than the value is stored in): what it converts, e.g. "input nchw -> nChw16c";
  // empty when none. Those bytes are in cost.bytes.
  std::string layout_note;
};

struct RunProfile {
  std::string backend;               // "cpu", "cuda", "reference"
  double wall_ms = 0;                // median wall time of one whole run
  std::vector<double> wall_samples_ms;  // every timed run's wall time, in run order
  // The kernels' samples_ms were timed inside the runs of wall_samples_ms (the CPU plan times
  // each kernel within the timed run), so one run's kernels add up to at most its wall.
  bool kernels_in_wall_runs = false;
  // How the executor timed the kernels, for the report ("" = its usual clock): e.g. CUPTI activity
  // records of the graph replays, or the event-timed fallback with the reason CUPTI was not used.
  std::string timing_source;
  int threads = 0;                   // CPU threads the run used (0: not a CPU run)
  // The machine while the runs were measured: CPUs kept busy by other processes on average
  // (-1: not measured) out of the CPUs online (Session::profile measures both).
  double other_busy_cpus = -1;
  int online_cpus = 0;
  // CPU runs on several threads: how many cores' worth of arithmetic those threads got together
  // right after the runs (doctor::cpu_capacity; -1: not measured).
  double cpu_capacity = -1;
  std::vector<KernelRecord> kernels; // in execution order
};

}  // namespace brrr
