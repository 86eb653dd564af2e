// The doctor (DESIGN.md section 5): measured ceilings, per-kernel floors and regimes, whole-model
// attribution, class table, batch scaling, remedies with predicted gains, and the reports.
// Backend-neutral: it consumes a RunProfile and Ceilings, nothing else.
//
// Conventions: FLOPs are 2 per multiply-add and 1 per other scalar arithmetic op; special
// functions are counted per function and priced at their measured throughput; bytes are
// compulsory traffic (each input read once, each output written once); every ceiling is measured
// on this machine by `brrr probe` (datasheet figures are shown beside them, labelled estimates).
#pragma once
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "brrr/profile.hpp"

namespace brrr::doctor {

// ---- Ceilings (probe) ----------------------------------------------------------------------

// One cache level below DRAM as the probe measured it: what brrr's threads can hold in it
// together (a private level counts once per thread) and the copy bandwidth within it.
struct CacheLevel {
  std::string name;  // "l2", "llc" (CPU), "l2" (GPU)
  double bytes = 0, gbs = 0;
  bool operator==(const CacheLevel&) const = default;
};

struct Ceilings {
  std::string backend = "cpu";
  std::string host;
  std::string cpu_model;
  std::string isa;  // widest vector ISA the probe kernels used: "avx512", "avx2", "scalar"
  int threads = 1;
  double bandwidth_gbs = 0;  // OpenMP copy over all threads; read + write bytes, 1 GB = 1e9 B
  double memcpy_gbs = 0;     // one plain large memcpy on one thread, read + write bytes
  // The cache level below DRAM (CPU: last-level cache, GPU: L2): its size and the copy bandwidth
  // measured on buffers that fit in it (read + write bytes). 0: not measured (caches written
  // before these fields, or a probe that could not size the cache); kernels then face DRAM.
  double cache_bandwidth_gbs = 0;
  double cache_bytes = 0;
  // Every cache level the CPU probe measured, smallest first (the last is the one above). Empty:
  // caches written before this field, and the GPU, which has the one level above.
  std::vector<CacheLevel> cache_levels;
  std::map<std::string, double> peak_gflops;          // per precision: "fp32", "fp64", "bf16"
  // The library GEMM (CPU: oneDNN) at fp32 and at each --precision the backend accepts, GFLOP/s:
  // what `--precision` does to a GEMM. Empty: not measured (GPU, or caches before this field).
  std::map<std::string, double> library_gflops;
  std::map<std::string, double> special_gops;         // vectorized (SLEEF), G evaluations/s
  std::map<std::string, double> special_scalar_gops;  // scalar libm, for comparison
  double dispatch_us = 0;                             // reference executor, per op, on a tiny op
  double fork_join_us = 0;                            // one empty OpenMP parallel region
  double kernel_call_us = 0;  // calling a kernel through a function pointer on tiny data
  // GPU ceilings (backend "cuda"; cpu_model holds the device name, threads its SM count):
  // peak_gflops "fp32" is the CUDA-core FMA kernel, "tf32"/"bf16"/"fp16" Tensor Cores through
  // cuBLASLt; dispatch_us is our CUDA executor's host cost per kernel (eager, graphs off).
  double launch_us = 0;      // empty kernel launched eagerly, back to back, per kernel
  double graph_node_us = 0;  // per node of a replayed CUDA graph of empty kernels
  std::map<std::string, double> datasheet;  // estimates from /proc/cpuinfo, same units
  std::string datasheet_note;
  double probe_seconds = 0;
  // When and under what load the probe ran: a probe measured on a busy machine is too low, and
  // load_or_probe measures again instead of trusting it.
  std::string probed_at;             // UTC, ISO 8601 ("" in caches written before this field)
  double probe_other_busy_cpus = -1;  // CPUs other processes kept busy meanwhile (-1 unknown)
  // CPUs online when the probe ran and host threads it kept busy (the CPU probe: its threads;
  // the GPU probe: 1). 0: unknown (caches written before these fields).
  int probe_online_cpus = 0;
  int probe_host_threads = 0;
  // Other processes took CPUs the probe needed: more than the machine had to spare for its host
  // threads (the rule the measured runs follow), or, where that is unknown, any 0.5 CPUs. An
  // export on 1 of a GPU host's 16 CPUs does not disturb a probe that drives the GPU from one.
  bool probe_contended() const;

  // Fixed cost of one kernel of this kind ("reference": executor dispatch; compiled kinds: a
  // function-pointer call plus one parallel region).
  // On "cuda": the graph per-node cost for graph-replayed kernels, else the eager launch cost.
  double per_kernel_overhead_us(const std::string& kind, bool graph_node = false) const;
  // Evaluations per second of special function `fn` (vectorized); falls back to the slowest
  // measured function when `fn` was not probed.
  double special_per_s(const std::string& fn) const;
  double peak_flops_per_s(const std::string& precision = "fp32") const;
  // The cache roof's name in reports: "l2" on a GPU, "llc" on a CPU.
  std::string cache_roof_name() const { return backend == "cuda" ? "l2" : "llc"; }
  // The cache roofs a kernel can be judged against, smallest level first: cache_levels, else
  // the one level of cache_bytes / cache_bandwidth_gbs, else none.
  std::vector<CacheLevel> cache_roofs() const;
};

// What makes these ceilings suspect, one line each (empty: nothing known): a 16-bit peak below
// the fp32 one, a probe run on a busy machine, an fp32 peak far below the datasheet estimate.
std::vector<std::string> ceilings_warnings(const Ceilings& c);

nlohmann::json ceilings_to_json(const Ceilings& c);
Ceilings ceilings_from_json(const nlohmann::json& j);
// $XDG_CACHE_HOME/brrr/ceilings-<host>-<backend>.json, else ~/.cache/brrr/...
std::string ceilings_cache_path(const std::string& backend);
// Measures the CPU ceilings (< ~20 s); progress lines on stderr when `progress`. `quick` shortens
// every timing about 5x (tests), at some cost in accuracy.
Ceilings probe_cpu(bool progress, bool quick = false);
// How many cores' worth of arithmetic `threads` CPU threads get together right now: one thread's
// FMA loop time over the team's, times the team size (best of a few ~1 ms rounds). Near
// `threads` on dedicated cores; near 1 where the host runs them on one core's SMT siblings or
// time-slices them. 1 for threads <= 1.
double cpu_capacity(int threads);
// Measures the GPU ceilings of device 0 (< ~20 s). Throws brrr::Error "no CUDA device: <reason>"
// without a device (or in a build without the CUDA toolkit).
Ceilings probe_cuda(bool progress);
// Cached ceilings for this machine, measured (and cached) when absent or when `refresh`. A cache
// that cannot be written is a warning line, and its reason goes to *cache_error when given.
Ceilings load_or_probe(const std::string& backend, bool refresh, bool progress,
                       bool* from_cache = nullptr, std::string* cache_error = nullptr);
// This machine's cached ceilings for `backend` as load_or_probe reads them, without measuring:
// nothing (and *why) when none are cached, the file is unreadable or an older probe wrote it.
std::optional<Ceilings> cached_ceilings(const std::string& backend, std::string* why = nullptr);
std::string render_ceilings(const Ceilings& c);

// The probe's special-function kernel, exposed so tests can build known-regime runs with the
// same code: y[i] = fn applied k times to x[i], vectorized with SLEEF, over all threads.
// fn: exp, cos, sin, tanh, erf, sqrt, log. k = 0 is a plain copy.
void special_chain_f32(const std::string& fn, const float* x, float* y, int64_t n, int k);
// Names of the special functions the probe measures.
const std::vector<std::string>& probed_special_functions();

// ---- Analysis ------------------------------------------------------------------------------

enum class Regime { compute, memory, overhead };
std::string regime_name(Regime r);

struct KernelAnalysis {
  KernelRecord rec;
  double memory_floor_ms = 0;  // bytes / bandwidth of `roof`
  // Which bandwidth the memory floor uses: "dram", or the cache level its compulsory bytes fit
  // in ("llc" on a CPU, "l2" on a GPU) when the probe measured that level.
  std::string roof = "dram";
  double roof_gbs = 0;          // that roof's bandwidth, GB/s (bytes / memory floor when mixed)
  // The kernel's weight bytes judged against DRAM although its bytes fit `roof`: the model's
  // weights outgrow that level, so each run reads them from DRAM (0: none; `roof` is then
  // "dram" where they are most of its bytes).
  double streamed_weight_bytes = 0;
  double compute_floor_ms = 0;  // flops / peak + sum special / throughput
  double overhead_ms = 0;       // per-kernel fixed cost ceiling for this kernel's kind
  double floor_ms = 0;          // max(memory, compute)
  double efficiency = 0;        // floor / measured time
  Regime regime = Regime::memory;
  // Why efficiency is above 100% (empty when it is not): a number beyond its roof always says why.
  std::string over_reason;
  // The kernel's spread over the timed runs (nearest-rank p10 / p90; 0 without per-run samples).
  double p10_ms = 0, p90_ms = 0;
  // Set when the reported run's time is an outlier of the kernel's runs (over 3x their median
  // and 0.02 ms more): its regime and efficiency are that run's, not the kernel's.
  std::string outlier_note;
  // A GPU kernel under half of its roof whose grid has fewer CTAs than the GPU has SMs: how many
  // SMs sat idle (empty otherwise). Such a kernel waits on latency, which neither roof prices.
  std::string grid_note;
};
// `weight_bytes`: all the weights the profiled run reads (model_weight_bytes), which decides
// whether this kernel's weights can stay in the cache level its bytes fit from run to run.
KernelAnalysis analyze_kernel(const KernelRecord& k, const Ceilings& c, double weight_bytes = 0);
// The distinct weights (constant reads) the kernels of a run read, in bytes.
double model_weight_bytes(const RunProfile& p);

// wall = compute + memory + overhead; overhead = overhead-regime kernels + gaps.
struct Attribution {
  double wall_ms = 0, kernel_ms = 0, gap_ms = 0;
  double compute_ms = 0, memory_ms = 0, overhead_ms = 0;
  // Of overhead_ms: what overhead-regime kernels taking over 4x their fixed per-kernel cost took
  // beyond it (tiny work done slowly: a kernel's own latency, which fewer launches or graphs do not remove;
  // ShuffleNet-v2's 16-bit 1x1 convs on an H100: 23 us against a 0.8 us graph node).
  double slow_ms = 0;
  double share(Regime r) const;
};
Attribution attribute(const RunProfile& p, const std::vector<KernelAnalysis>& ks);

struct ClassRow {
  std::string cls;
  int kernels = 0;
  double flops = 0, special = 0, bytes = 0, time_ms = 0;
  double flops_share = 0, time_share = 0;
};
// One row per class; with a wall time, a last row "between kernels / dispatch" holds the wall not
// spent in kernels (negative when kernel times were taken apart from the wall and exceed it), so
// the rows add up to the wall and time_share is a share of it. Without one, shares of kernel time.
std::vector<ClassRow> class_table(const std::vector<KernelAnalysis>& ks, double wall_ms = 0);
extern const char* const kBetweenKernels;  // that row's class name

// The profile as the doctor reports it: when every kernel was timed inside the wall's runs, each
// kernel's time is its time in the median run (the run whose wall is reported), so the kernels and
// the host time between them add up to the wall. `how` says which timing was used.
RunProfile one_timeline(const RunProfile& p, std::string* how = nullptr);

struct BatchPoint {
  int64_t batch = 0;
  double ms = 0;
};
// How time grows with batch, named only when a model fits the points.
enum class Growth {
  unclassified,  // neither fit is good: the points are noise (a loaded machine) or irregular
  flat,          // time barely grows: a fixed cost per run dominates (overhead-bound)
  sublinear,     // a fixed cost that a bigger batch amortizes, then per-item work
  linear,        // time proportional to batch (throughput-bound)
  superlinear,   // time per item grows with batch (working set outgrowing a cache, say)
};
std::string growth_name(Growth g);

struct BatchScaling {
  std::vector<BatchPoint> points;
  double fixed_ms = 0;     // a in time = a + c * batch (least squares)
  double per_item_ms = 0;  // c
  double growth = 0;       // time(last) / time(first)
  double batch_ratio = 0;  // batch(last) / batch(first)
  double fixed_share = 0;  // a / time(first)
  // Fit quality: R^2 and the worst point's relative residual of the linear fit, and the same for
  // the power law time = k * batch^exponent (least squares on logs).
  double r2 = 0, max_residual = 0;
  double exponent = 0, power_r2 = 0, power_max_residual = 0;
  Growth growth_class = Growth::unclassified;
  bool overhead_bound = false;  // flat or sublinear with a fixed cost over half of the first point
  // Other processes' busy CPUs while the sweep ran (-1: not measured), of online_cpus.
  double other_busy_cpus = -1;
  int online_cpus = 0;
  std::string verdict;
};
// `other_busy_cpus` (-1: unknown) of `online_cpus`: the load while the points were timed; a
// loaded sweep is said to be one, and one that fits no model blames the load it measured.
BatchScaling fit_batch_scaling(const std::vector<BatchPoint>& pts, double other_busy_cpus = -1,
                               int online_cpus = 0);

struct Remedy {
  std::string name;                   // "fusion", "static_plan", "faster_units"
  std::string detail;                 // one line: what it removes and why that is worth the time
  double gain_ms = 0;                 // predicted saving on wall time
  double predicted_ms = 0;            // predicted wall time with this remedy alone
  std::optional<double> measured_ms;  // from --compare, when that profile applied it
  bool in_effect = false;             // the profiled run already has it (gain 0, detail says so)
  // How to apply it on this backend: a flag ("--precision bf16"), a switch, or why it cannot be
  // applied ("brrr cannot do this yet: <fusion-boundary reason>", "not on the cpu backend: ...").
  std::string action;
  bool applicable = false;              // `action` is something the user can do now
  std::vector<std::string> kernels;     // the kernels it concerns, largest gain first
  std::vector<std::string> nodes;       // their ONNX nodes
  std::vector<std::string> boundaries;  // fusion: why those kernels were not fused, one per pair
};

struct Verdict {
  Regime regime = Regime::memory;
  std::string advice;
};

// Whether the measurements can be trusted: a wide spread between runs, other processes busy on
// the CPUs brrr needed, or suspect ceilings make the diagnosis noise, and the verdict says so.
struct Reliability {
  bool reliable = true;
  std::vector<std::string> reasons;  // why not, one line each
  int samples = 0;                   // timed runs behind the wall time
  double wall_p10_ms = 0, wall_p90_ms = 0;
  double other_busy_cpus = -1;  // -1: not measured
  int online_cpus = 0;
  int threads = 0;  // CPU threads the run used (1 for a GPU run's host thread)
  double cpu_capacity = -1;  // RunProfile::cpu_capacity
};
Reliability assess_reliability(const RunProfile& p, const Ceilings& c);

// Runs the model at a given batch and returns its wall time (ms); for the batch-scaling test.
using BatchRunner = std::function<double(int64_t batch)>;

struct DoctorOptions {
  std::string model;
  const RunProfile* compare = nullptr;  // the same model with remedies applied
  std::vector<std::string> applied;     // remedies the compare profile applies; empty = all
  BatchRunner batch_runner;             // optional
  int64_t base_batch = 1;
  int batch_steps = 4;  // b, 2b, 4b, 8b
  int top = 10;
  // What the backend offers, as its own validation says (the CLI asks it; the doctor never
  // guesses): the --precision values it accepts besides fp32, or why it accepts none ...
  std::vector<std::string> precisions;
  std::string precision_refusal;
  // ... and whether the profiled plan was fused (1), one kernel per op (0), or unknown (-1:
  // fused unless the profile is the reference executor's).
  int fused = -1;
  // The kernels the fused plan would run, as the compiler plans them (records without times:
  // kind, ONNX nodes, cost), for a profile of the plan one kernel per op: the fusion remedy then
  // prices that plan kernel by kernel instead of counting intermediates (src/doctor/remedies.cpp).
  // A library kernel with samples_ms was timed alone in the fused plan's layouts (CPU) and is
  // priced at that time.
  std::vector<KernelRecord> fused_kernels;
  // Per --precision value: the profiled plan's kernels built at that precision, library kernels
  // timed alone (CPU, Session::time_library_kernels_alone): the faster-units remedy prices each
  // library kernel it moves at its time there (the library's own algorithm and casts) instead of
  // scaling it by the probed rates.
  std::map<std::string, std::vector<KernelRecord>> unit_kernels;
  // The profiled plan's library kernels, each repeated alone back to back with its operands
  // cache-hot (CPU, Session::time_library_kernels_hot), for the cache check; empty: none.
  std::vector<KernelRecord> hot_kernels;
};
// A kernel of DoctorOptions::fused_kernels that the fusion remedy prices at its time alone: a
// library conv or pool with samples (its layout and algorithm change in the fused plan; a GEMM's
// do not, and its measured call is the better price), or a fused attention call (one algorithm
// for what took several calls and kernels).
bool priced_alone(const KernelRecord& planned);

// --compare's check of one remedy: the plan without it and with it, profiled in interleaved
// rounds (the machine's load then falls on both alike); the prediction is the doctor's own, made
// from the run without it before the run with it is looked at.
struct RemedyCheck {
  std::string remedy;  // "fusion", "static_plan", "faster_units"
  std::string how;     // what changed between the two runs, e.g. "one kernel per op -> fused"
  double before_ms = 0, predicted_ms = 0, measured_ms = 0;
  // The same, steady: each kernel's median over the runs plus the median time between kernels,
  // so that a run preempted somewhere (a loaded machine takes milliseconds from one kernel of
  // most runs) weighs on neither side; = the walls without per-run kernel samples.
  double before_steady_ms = 0, predicted_steady_ms = 0, measured_steady_ms = 0;
  std::string action;  // the remedy's action as predicted
  // Library kernels (oneDNN, cuBLASLt, cuDNN), steady, without and with the remedy: the
  // predictions keep them, so where they changed (another layout or algorithm in the other plan)
  // the miss is theirs.
  double library_before_ms = 0, library_after_ms = 0;
  // fusion: the fused plan's library kernels as timed alone for the prediction (-1: not timed).
  double library_alone_ms = -1;
  // Where the time moved, measured: kernels of both plans grouped by the ONNX nodes they share,
  // the groups whose steady time changed most first (at most 3), one line each, e.g.
  // "k31_div, k32_erf, ... (7 kernels, 0.108 ms) -> k8_matmul_mul (0.041 ms)". A miss is read here.
  std::vector<std::string> changes;
  // Why either profile cannot be trusted ("" when both can): a miss then proves nothing.
  std::string unreliable;
  double error() const { return measured_ms > 0 ? predicted_ms / measured_ms - 1 : 0; }
  double steady_error() const {
    return measured_steady_ms > 0 ? predicted_steady_ms / measured_steady_ms - 1 : 0;
  }
};
// A profile's steady time (RemedyCheck): per-kernel medians plus the median gap.
double steady_ms(const RunProfile& p);
// `before` and `after` are profiles of the same model without and with `remedy`; `opts` as for
// diagnosing `before` (its `fused` says whether `before` was fused).
RemedyCheck check_remedy(const std::string& remedy, const std::string& how,
                         const RunProfile& before, const RunProfile& after, const Ceilings& c,
                         const DoctorOptions& opts);

// The cache check: the library contraction kernels (GEMMs, convs) in the runs against each
// repeated alone with its operands cache-hot. A model whose weights outgrow the caches (BERT-base
// fp32 on the CPU: 340 MB) runs its GEMMs slower than they run hot, waiting on weights streamed
// from memory, which the roofline and the class table count as compute.
struct CacheCheck {
  int kernels = 0;
  double in_runs_ms = 0, hot_ms = 0;
  double bytes = 0;       // their compulsory bytes (weights, inputs, outputs) per run
  // The largest cache level the probe measured faster than memory (1.2x its copy bandwidth; a
  // VM's "480 MB" last-level cache measured slower than its DRAM is no cache to it): its name and
  // size, "" / 0 when none was measured.
  std::string cache_name;
  double cache_bytes = 0;
  bool slower = false;    // in the runs slower than hot by more than 5% and 2% of the wall
  // ... and their bytes outgrow that cache: the gap is weights and activations streamed from
  // memory (else the text says memory traffic does not explain it)
  bool streams = false;
  std::vector<std::string> worst;  // up to 3 kernels with the largest gap, "name (a -> b ms)"
  double gap_ms() const { return in_runs_ms - hot_ms; }
};
// `p`: the profile as reported; `hot`: DoctorOptions::hot_kernels. Empty without a match.
std::optional<CacheCheck> cache_check(const RunProfile& p, const std::vector<KernelRecord>& hot,
                                      const Ceilings& c);
// A cache level's name as the reports print it: "L2", "LLC", else the name.
std::string cache_level_label(const std::string& name);
// Its lines in the text and HTML reports (one wording): "cache check: ...".
std::string cache_text(const CacheCheck& c, double wall_ms);

// The GPU kernels whose grids left SMs idle (KernelAnalysis::grid_note), together: BERT-base's
// GEMMs of 128 rows at batch 1 run 12-96 CTAs on 132 SMs at 5-20% of the DRAM roof.
struct SmallGrids {
  int kernels = 0;
  double time_ms = 0;
  int sms = 0;
  std::vector<std::string> worst;  // up to 3 by time, "name (N CTAs, t ms)"
};
std::optional<SmallGrids> small_grids(const std::vector<KernelAnalysis>& ks, const Ceilings& c);
// Its line in the text and HTML reports (one wording): "small grids: ...".
std::string small_grids_text(const SmallGrids& g, double wall_ms);
// The wall line's clause for Attribution::slow_ms in the text and HTML reports (one wording):
// ", slow tiny kernels beyond their fixed cost X ms", or "" when there is none.
std::string slow_kernels_clause(const Attribution& a);

// Where the GPU sat idle in the reported run, by boundary: after each kernel's work began and
// before the next one's, the time not in its own GPU activities; and the run's launch and
// completion (the wall is timed from before the launch, the starts from the first kernel's: the
// time before the first kernel and after the last, together).
// Only from real per-run timestamps (CUPTI's), for kernels that ran one after another. The
// boundaries add up to the class table's "between kernels" row. An idle time after a kernel that
// launches several GPU activities (a library call) may lie between its own activities.
struct IdleGaps {
  double total_ms = 0;
  int boundaries = 0;              // with any idle time
  // Up to 3 by time: "k54_globalaveragepool -> k56_gemm 0.0210 ms", "launch and completion
  // (before k0_conv, after k56_gemm (2 GPU activities)) 0.0180 ms".
  std::vector<std::string> worst;
};
std::optional<IdleGaps> idle_gaps(const RunProfile& p);
// Its line in the text and HTML reports (one wording): "idle between kernels: ...".
std::string idle_gaps_text(const IdleGaps& g, double wall_ms);

struct Report {
  std::string model;
  Ceilings ceilings;
  RunProfile profile;  // as reported: one_timeline of the measured profile
  std::string timing;  // where the kernel times come from (one_timeline's `how`)
  std::vector<KernelAnalysis> kernels;
  Attribution attribution;
  std::vector<ClassRow> classes;
  std::optional<BatchScaling> batch;
  std::string batch_error;  // why the batch sweep could not run
  std::vector<Remedy> remedies;
  Verdict verdict;
  Reliability reliability;
  std::optional<CacheCheck> cache;
  std::optional<SmallGrids> grids;
  std::optional<IdleGaps> gaps;
  // --compare
  std::optional<RunProfile> after_profile;
  std::vector<KernelAnalysis> after_kernels;
  std::optional<Attribution> after;
  std::vector<ClassRow> after_classes;
  std::vector<RemedyCheck> checks;  // --compare: each remedy it applied, predicted vs measured
  int top = 10;
};

std::vector<Remedy> predict_remedies(const RunProfile& p, const std::vector<KernelAnalysis>& ks,
                                     const Attribution& a, const Ceilings& c,
                                     const DoctorOptions& opts = {});
// Generated from the remedy table only, so it cannot contradict it: the regime, then each remedy
// by gain with its action (to do / cannot yet / not on this backend / in effect).
Verdict make_verdict(const Attribution& a, const std::vector<Remedy>& rs,
                     const std::optional<BatchScaling>& b);
Report diagnose(const RunProfile& p, const Ceilings& c, const DoctorOptions& opts = {});

// ---- Outputs -------------------------------------------------------------------------------

std::string render_table(const Report& r);
nlohmann::json report_json(const Report& r);
// Chrome trace-event JSON (Perfetto): one lane per thread/stream, complete "X" events.
nlohmann::json trace_json(const Report& r);
// One self-contained HTML page (no scripts, every model string escaped): SVG roofline with the
// top kernels numbered, per-kernel table, class table, batch sweep and compare when run, verdict.
std::string render_html(const Report& r);

nlohmann::json profile_to_json(const RunProfile& p);
RunProfile profile_from_json(const nlohmann::json& j);

}  // namespace brrr::doctor
