// The inside of CudaExecutor, shared by its files: one per step kind (cuda_executor_gemm.cpp,
// _conv, _kernels, _ops, _host), the profile (cuda_executor_profile.cpp), and the core
// (cuda_executor.cpp) that plans memory, compiles the module, sets every step up and dispatches.
// Each step kind has its own small struct; a Step holds the one its type needs.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "backend/cuda/codegen_cuda.hpp"
#include "backend/cuda/cublaslt_gemm.hpp"
#include "backend/cuda/cuda_executor.hpp"
#include "backend/cuda/cuda_graph.hpp"
#include "backend/cuda/cuda_runtime.hpp"
#include "backend/cuda/conv_direct.hpp"
#include "backend/cuda/cudnn_attention.hpp"
#include "backend/cuda/cudnn_conv.hpp"
#include "backend/cuda/cudnn_pool.hpp"
#include "backend/cuda/device/attention.cuh"
#include "backend/cuda/device/gemm_rows.cuh"
#include "backend/cuda/device/gemm_small_m.cuh"
#include "backend/cuda/gemm_chain.hpp"
#include "backend/cuda/gemm_small_m.hpp"
#include "plan/library_desc.hpp"

namespace brrr::cuda {

// A generated kernel, or a GEMM chain's cluster kernel: one launch with fixed arguments.
struct LaunchStep {
  Function fn;
  Dim3 grid, block;
  std::vector<DevPtr> argv;
  std::vector<void*> argp;  // &argv[i], set once argv is complete
};

// A Copy kernel that could not be a view.
struct CopyStep {
  DevPtr src = 0, dst = 0;
  size_t bytes = 0;
};

// A MatMul / Gemm on cuBLASLt (or, with its neighbours, in a GEMM chain).
// A GEMM weight as it is uploaded: in `to` (float32, bfloat16 or float16), and with its last two
// axes swapped when `transpose` (B stored [N, K]); the tensor itself when nothing changes. By
// bands on several threads (cuda_executor_gemm.cpp).
Tensor host_cast(const Tensor& src, DType to, bool transpose);

struct GemmStep {
  GemmPrecision prec = GemmPrecision::kFp32;
  GemmEpilogue epi = GemmEpilogue::kNone;
  GemmShape shape;
  bool trans_b = false;  // B is stored [N, K] (a constant, transposed at upload)
  int vbias = -1;        // the bias value (Gemm's C or a fused Add's), -1 none
  DevPtr a = 0, b = 0, c = 0, bias = 0;
  size_t w_bytes = 0;  // B's bytes when it is a constant uploaded for this GEMM, else 0
  DType data = DType::f32;  // the graph's dtype of A and C
  DevPtr a_src = 0, b_src = 0, c_dst = 0;  // f32 tensors cast in / out per run (0: none)
  int64_t na = 0, nb = 0, nc = 0;
  // BRRR_GEMM_PAD_N (default 1): output rows that would not be 16-byte aligned (GPT-2's 50257 logits) are
  // computed n_pad wide into c (B and the bias padded with zeros), then copied n_real wide into
  // c_out, the graph's buffer (0: no padding).
  int64_t n_real = 0;
  DevPtr c_out = 0;
  Function unpad_fn;  // brrr_unpad_rows_16 / _32: the copy out of the padded rows
  // BRRR_GEMM_PAD_OUT (default 1): C is a model output no kernel reads, so the plan leaves it
  // padded and the real columns are copied out when the output is taken: into c_out (its slot)
  // before the copy to the host (CudaExecutor::run), into the caller's buffer (run_device).
  bool pitched_out = false;
  // BRRR_GEMM_PAD_N=3: such a GEMM writes the graph's buffer at its odd pitch in `phases` row
  // phases (16 bytes / element size: rows r = j mod phases, each phase one cuBLASLt call whose
  // C starts at the first 16-byte aligned column of its first row, pitch phases * n, B stored
  // [N, K]); brrr_gemm_edge_cols_* computes the few columns before that start (0: off).
  int64_t phases = 0;
  Function edge_fn;
  bool gelu_erf = false;
  // Activations cuBLASLt has no epilogue for (hardswish 2, hardsigmoid 3, clip 4; float32
  // output): brrr_conv_epilogue's activation in place after the GEMM.
  int post_act = 0;
  float post_alpha = 0, post_beta = 0;
  Function post_fn;
  // Helper kernels, resolved at setup: casts of A, B (to 16 bits) and C (back to float32),
  // and the in-place erf GELU.
  Function cvt_in, cvt_out, gelu_fn;
  LaunchStep chain;  // Step::Chain: the cluster kernel that runs the whole chain
  // The small-M split-K cluster kernel instead of cuBLASLt (gemm_small_m.hpp): its choice
  // (small.splits 0: cuBLASLt), dynamic shared memory, activation (brrr_gemm_sk_args::act; an erf
  // GELU runs in it, no helper), the kernel and its one argument.
  SmallMGemm small;
  unsigned small_smem = 0;
  int small_max_clusters = 0;  // of the kernel's clusters, how many the device holds at once
  int small_act = 0;
  Function small_fn;
  Dim3 small_grid;
  brrr_gemm_sk_args small_args{};
  brrr_gmc_args rows_args{};  // the multicast kernel's (small.cluster > 0)
  void* small_argp[1] = {nullptr};
};

// A Conv on cuDNN, then (when there is a bias, sum or activation) brrr_conv_epilogue in place.
// The epilogue's arguments live here, so argp stays valid for the step's lifetime.
struct ConvStep {
  std::unique_ptr<CudnnConv> dnn;
  ConvGeometry geo;
  ConvMath math = ConvMath::kFp32;
  int vx = -1, vw = -1, vy = -1, vbias = -1, vsum = -1;
  DevPtr x = 0, w = 0;
  // brrr_conv_epilogue(y, bias, sum, hw, c, act, alpha, beta, n)
  DevPtr y = 0, bias = 0, sum = 0;
  int64_t hw = 1, c = 1;
  int act = 0;
  float alpha = 0, beta = 0;
  int64_t n = 0;
  bool epilogue = false;
  DType dt = DType::f32;  // the Conv's data type (float32, bfloat16 or float16)
  Function fn;
  Dim3 grid, block;
  std::vector<void*> argp;
  // Channels-last (geo.nhwc: x, the residual and y NHWC, weights KRSC). An NCHW input is
  // transposed into xt first (brrr_nchw_to_nhwc_u2(x, xt, c, cp, hw, pixels)), its channels
  // zero-padded from in_c to in_cp (a multiple of 8 where cuDNN takes it: an RGB image's 3).
  bool transpose_in = false;
  DevPtr xt = 0;
  int64_t in_c = 0, in_cp = 0, in_hw = 0, in_pixels = 0;
  Function tfn;
  Dim3 tgrid;
  std::vector<void*> targp;
  // BRRR_CONV_GEMM >= 1: a 16-bit 1x1 conv (stride 1, no pads, one group) whose channel counts
  // are not all multiples of 8 runs as cuBLASLt GEMMs: on channels-last data one over its P
  // pixels, y[P, K] = x[P, C] @ w[C, K] (the weights transposed once at upload, `wg`), bias and
  // ReLU in cuBLASLt's epilogue where there is no residual; on NCHW data one per image,
  // y_n[K, HW] = w[K, C] @ x_n[C, HW]. A residual, another activation and NCHW's bias run in
  // brrr_conv_epilogue after it. cuDNN took 22 us for each of ShuffleNetV2's such convs at bf16
  // (58, 116, 232 channels). With 2 (the default) every other channels-last 16-bit conv of one
  // group on channels in multiples of 8 is a candidate: brrr_im2col_nhwc_u2 into the shared
  // scratch `cols` ([P, R*S*C]; none for a plain 1x1) and the GEMM on it, timed against cuDNN at
  // build (choose_conv_paths).
  bool gemm = false;       // runs as the GEMM
  bool candidate = false;  // set up both ways; the timing decides `gemm`
  GemmPrecision gprec = GemmPrecision::kBf16;
  GemmEpilogue gepi = GemmEpilogue::kNone;
  GemmShape gshape;
  DevPtr wg = 0;
  std::string what;  // the plan kernel, for cuBLASLt's errors
  DevPtr cols = 0;
  Function cfn;
  Dim3 cgrid;
  int cgeo[12] = {};  // brrr_im2col_nhwc_u2's h, w, oh, ow, kr, ks, sh, sw, ph, pw, dh, dw
  int64_t c8 = 0, ctotal = 0;  // ctotal 0: no im2col
  std::vector<void*> cargp;
  double cudnn_us = 0, gemm_us = 0;  // the timings behind the choice (0: not timed)
  bool path_cached = false;          // the choice (and its timings) came from the disk cache
  // BRRR_CONV_DIRECT >= 1: a 16-bit 2-D conv of one group on at most 8 channels of an NCHW input
  // (an RGB stem) and no residual may run on brrr_conv_direct_{bf16,f16} (device/conv_direct.cuh,
  // conv_direct.hpp): the NCHW input read as it is (no transpose), the weights packed once into
  // `wd`, bias and activation in its epilogue. 1 times it
  // against the other paths at build (choose_conv_paths), 2 always takes it (tests).
  bool direct = false;            // runs on the direct kernel
  bool direct_candidate = false;  // set up for it; the timing (or 2) decides `direct`
  ConvDirect dk;  // its geometry and shared memory
  DevPtr wd = 0;
  Function dfn;
  Dim3 dgrid;
  std::vector<void*> dargp;
  double direct_us = 0;  // its timing behind the choice (0: not timed)
};

// BRRR_L2_PREFETCH: before step `fork` runs, a side stream is forked there and brrr_l2_prefetch
// brings `bytes` at `ptr` (the weights of a later step, `step`) into L2; the side stream joins
// the main one after the last step (cuda_executor_prefetch.cpp).
struct L2Prefetch {
  size_t fork = 0, step = 0;
  DevPtr ptr = 0;
  int64_t bytes = 0;
};

// The other library kernels: a pool on cuDNN or brrr's pool kernel, a Concat (one 2-D copy per
// input), a mean or sum over trailing axes (brrr_row_mean), a channel scale (brrr_channel_scale)
// or a Gather (brrr_gather_u<unit>). Kernel arguments live here, so argp stays valid for the
// step's lifetime.
struct OpStep {
  enum Kind { Pool, PoolKernel, Concat, Split, RowMean, ChannelScale, Gather } kind = Pool;
  PoolGeometry geo;
  std::unique_ptr<CudnnPool> pool;
  // PoolKernel: brrr_pool_<type>(x, y, geometry, is_max, include_pad, n); the geometry has
  // brrr_pool_geo's layout (3-D, unit dims in front).
  struct PoolGeo {
    int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], out[3];
  } pg{};
  int is_max = 1, include_pad = 0;
  int64_t cl = 0;  // PoolKernel on channels-last data: its channel count (0: NCHW)
  bool nhwc = false;  // RowMean: a GlobalAveragePool over channels-last x (brrr_nhwc_mean)
  DType dt = DType::f32;
  int vx = -1, vs = -1, vy = -1;
  // Concat: the output is `outer` rows of out_row bytes, input q fills `part_bytes[q]` of each.
  std::vector<int> parts;
  std::vector<size_t> part_bytes;
  size_t outer = 1, out_row = 0;
  // Split: output q takes part_bytes[q] of each of the input's `outer` rows of out_row bytes
  // (parts: the output value ids, -1 for an omitted one; part_offset: where its share starts).
  std::vector<size_t> part_offset;
  struct Copy {
    DevPtr src = 0, dst = 0;
    size_t width = 0;
  };
  std::vector<Copy> copies;
  // brrr_row_mean(x, y, rows, cols, scale) / brrr_channel_scale(x, s, y, hw, n) /
  // brrr_gather_u<unit>(x, idx (in sc), y, nidx (rows), axis (cols), inner (hw), idx64, err, n)
  DevPtr x = 0, sc = 0, y = 0, err = 0;
  int64_t rows = 0, cols = 0, hw = 1, n = 0;
  int unit = 4, idx64 = 1;
  float scale = 1.f;
  Function fn;
  Dim3 grid, block;
  std::vector<void*> argp;
  std::string desc, who;  // who: "k3 (Concat fire2/concat)" for error messages
};

// Fused attention (plan::AttentionDesc): brrr_attention_<type>(args) or, on Tensor Cores,
// brrr_attention_flash<D>_<type> or brrr_attention_mma<D>_<type>(args), one block per
// (query tile, head, batch); the buffers' value ids until setup puts their addresses into args.
struct AttentionStep {
  int vq = -1, vk = -1, vv = -1, vmask = -1, vkeep = -1, vout = -1;
  int64_t q_offset = 0, k_offset = 0, v_offset = 0;  // elements into vq, vk and vv
  DType dt = DType::f32;
  bool mma = false;  // the Tensor Core kernel (16-bit data, head dim 64 or 128)
  int flash_warps = 0;  // > 0: the flash kernel (contiguous aligned rows) with this many warps
  // cuDNN's SDPA (shared by the steps of one geometry) when it takes this one, else null and
  // why not (cuda_executor_attention.cpp).
  std::shared_ptr<CudnnSdpa> sdpa;
  std::string sdpa_why;
  std::string sdpa_key;  // its geometry (the key of sdpa_graphs and attention_timings)
  brrr_attn_args args{};
  Function fn;
  Dim3 grid, block;
  std::vector<void*> argp;
};

struct Step {
  // Chain: a run of small-batch GEMMs as one cluster kernel (gemm_chain.hpp), at its first
  // kernel; the chain's later kernels are InChain (nothing to launch).
  enum Type { Kernel, Library, Copy, Host, Chain, InChain, Conv, Op, Attention } type = Kernel;
  // Kernel: LaunchStep; Copy: CopyStep; Library, Chain, InChain: GemmStep; Conv: ConvStep;
  // Op: OpStep; Attention: AttentionStep; Host: nothing (the plan kernel's nodes run by reference).
  std::variant<std::monostate, LaunchStep, CopyStep, GemmStep, ConvStep, OpStep, AttentionStep> body;
  std::string what;
  LaunchStep& launch() { return std::get<LaunchStep>(body); }
  CopyStep& copy() { return std::get<CopyStep>(body); }
  GemmStep& gemm() { return std::get<GemmStep>(body); }
  const GemmStep& gemm() const { return std::get<GemmStep>(body); }
  ConvStep& conv() { return std::get<ConvStep>(body); }
  const ConvStep& conv() const { return std::get<ConvStep>(body); }
  OpStep& op() { return std::get<OpStep>(body); }
  const OpStep& op() const { return std::get<OpStep>(body); }
  AttentionStep& attention() { return std::get<AttentionStep>(body); }
  const AttentionStep& attention() const { return std::get<AttentionStep>(body); }
};

// A GEMM chain: plan kernels first..last as one cluster kernel.
struct ChainRun {
  int first = 0, last = 0;
  std::string symbol;
  GemmChainSpec spec;
};

struct CudaExecutor::Impl {
  const Graph& g;
  plan::Plan& plan;
  CudaExecOptions opts;
  Device dev{0};
  Stream stream;
  LtGemm lt;
  std::unique_ptr<ModuleSet> module;  // the model's parts (CudaSource::parts)
  CudaSource src;
  std::vector<DevPtr> slot;  // graph value id -> device address
  std::unique_ptr<Arena> arena;
  std::vector<DeviceBuffer> owned;  // inputs, outputs, weights, scratch
  MemoryStats mem;
  int aliased_copies = 0;  // copy kernels that share their input's buffer (build())
  // Graph value id -> the GEMM step whose padded rows hold it after the plan ran
  // (GemmStep::pitched_out), else -1.
  std::vector<int> padded_out;
  std::optional<CudaGraph> graph;
  std::string graph_status = "off";
  std::vector<std::string> host_notes;
  std::vector<Tensor> last_outputs;
  double compile_ms = 0;
  bool from_cache = false;
  // brrr's own kernels launch with programmatic dependent launch (BRRR_CUDA_PDL, sm_90+).
  bool pdl = false;
  bool pdl_early = false;  // BRRR_CUDA_PDL=2: each starts the next right after its own wait
  std::unique_ptr<Module> spin_module;  // profile(): the gate kernel, compiled on first use
  Function spin;
  std::unique_ptr<CudnnContext> dnn;  // opened at the first Conv or pool
  std::string dnn_why;                // why it could not be opened
  // cuDNN SDPA graphs by geometry (a transformer's layers share one). Declared after dnn and
  // before steps: destroyed after the steps that share them, before the handle they use.
  std::map<std::string, std::shared_ptr<CudnnSdpa>> sdpa_graphs;
  std::map<std::string, std::string> sdpa_whys;  // why cuDNN refused a geometry
  // Microseconds of cuDNN's SDPA and of the flash kernel per geometry, timed once at setup.
  std::map<std::string, std::pair<double, double>> attention_timings;
  DevPtr conv_ws = 0;                 // one workspace for every Conv (the largest need)
  DevPtr im2col_ws = 0;               // one im2col scratch for every Conv that may use it
  // The multicast small-M GEMMs' split-K partials and tile counters (one set: they run one
  // after another and leave the counters at zero).
  DevPtr small_ws = 0, small_counters = 0;
  std::vector<Step> steps;
  std::vector<ChainRun> chains;
  // Weights brought into L2 ahead of their steps on a side stream (cuda_executor_prefetch.cpp).
  int prefetch_mode = 0;  // BRRR_L2_PREFETCH
  std::vector<L2Prefetch> prefetches;
  std::unique_ptr<Stream> side;
  std::unique_ptr<Event> fork_event, join_event;
  Function prefetch_fn;
  // Raised by a Gather kernel on an index out of range. Each run copies it back with its outputs
  // (same sync); check_gather_indices() then reports it with the Gathers' names and clears it.
  DevPtr gather_err = 0;
  int gather_flag = 0;
  std::vector<std::string> gathers;

  Impl(const Graph& g_, plan::Plan& p, const CudaExecOptions& o) : g(g_), plan(p), opts(o) {}

  // Core (cuda_executor.cpp).
  void build();
  void exec(size_t i);
  void exec_all(bool use_graph);
  void bind(const std::map<std::string, Tensor>& inputs);
  // Inputs bound and untimed runs for at least 50 ms, or one run when the previous timing ended
  // less than 100 ms ago (the clocks are still up): where each whole-plan timing starts.
  void warm_up(const std::map<std::string, Tensor>& inputs, const char* what);
  // When the latest whole-plan timing (time_runs, time_queued_runs, profile) ended.
  std::chrono::steady_clock::time_point last_timed{};
  std::unique_ptr<StagedUpload> staged;  // upload()'s pinned buffers, while the build runs
  DevPtr upload(const Tensor& t, const std::string& what);
  DevPtr alloc(size_t bytes, const std::string& what);
  DevPtr slot_of(int v, const char* what) const;  // v's device buffer (0 for v < 0)
  bool open_dnn();
  // The disk cache of this session's compiled code, cuBLASLt choices and cuDNN plans: the
  // options' folder (+ "/cuda") or the user's default.
  std::string cache_dir() const;
  // Blocks for a grid-striding helper kernel over `items` work items, `per_block` per block.
  Dim3 helper_grid(int64_t items, int64_t per_block) const;
  // A grid-striding helper kernel f(ptrs..., n) of 256-thread blocks.
  void launch_helper(const Function& f, std::vector<DevPtr> ptrs, int64_t n);
  // One of brrr's own kernels (each starts with brrr_grid_wait()): a dependent launch when pdl.
  void launch_own(const Function& f, Dim3 grid, Dim3 block, unsigned shared, void** args);

  // L2 prefetch of later steps' weights (cuda_executor_prefetch.cpp).
  void plan_l2_prefetch();
  void start_prefetches(size_t fork);  // those forked before step `fork`
  void join_prefetches();
  std::string prefetch_summary() const;

  // GEMMs and GEMM chains (cuda_executor_gemm.cpp).
  std::string gemm_plan(const plan::Kernel& k, GemmStep* gm);
  std::string find_gemm_chains();
  std::string find_small_m_gemms();
  void setup_gemm(const plan::Kernel& k, GemmStep& gm);
  void setup_chains();
  void exec_gemm(GemmStep& m, const std::string& what);
  // The real columns of a padded GEMM's rows into dst (dense [m, n_real]).
  void unpad(GemmStep& m, DevPtr dst, const Stream& s, bool dependent);
  std::string gemm_summary(size_t i) const;

  // Convs (cuda_executor_conv.cpp).
  std::string conv_plan(const plan::Kernel& k, ConvStep* cr);
  // Channels-last values (passes/choose_device_layouts.hpp) for 16-bit conv nets, and the
  // conv, pool and channel-mean steps switched to them (BRRR_CUDA_NHWC=0: all NCHW).
  void choose_layouts();
  void choose_conv_gemms();
  // BRRR_CONV_TUNE=1: each conv's algorithm timed once, in its final layout.
  void tune_convs();
  void pad_conv_channels(ConvStep& c, const plan::Kernel& k);
  void setup_conv_gemm(ConvStep& c, const Tensor& krsc);
  void choose_conv_paths();
  std::string find_direct_convs();  // marks the candidates; the module part they need, or ""
  void setup_conv_direct(ConvStep& c);
  static size_t conv_im2col_bytes(const ConvStep& c);
  std::unique_ptr<CudnnConv> make_conv(const plan::Kernel& k, const ConvGeometry& geo, ConvMath m);
  std::vector<char> nhwc;  // per value
  int nhwc_convs = 0;
  std::string nhwc_note;
  void setup_conv(ConvStep& c);
  void exec_conv(ConvStep& c);
  std::string conv_summary(size_t i) const;

  // Generated kernels and copies (cuda_executor_kernels.cpp).
  void setup_kernel(size_t i, LaunchStep& s);
  void setup_copy(const plan::Kernel& k, CopyStep& s);
  void exec_copy(const CopyStep& s, const std::string& what);
  std::string kernel_summary(size_t i) const;

  // Pools, Concat, row reductions, channel scales, Gather (cuda_executor_ops.cpp).
  std::string pool_kernel_plan(const plan::PoolDesc& d, OpStep* r);
  std::string op_plan(const plan::Kernel& k, OpStep* r);
  std::string gather_plan(const plan::Kernel& k, OpStep* r);
  std::string split_plan(const plan::Kernel& k, OpStep* r);
  // A plan kernel's device step ("" when it has one), or why its library refused it here.
  std::string device_step(const plan::Kernel& k, Step* s);
  void setup_op(OpStep& r);
  void exec_op(OpStep& r);
  void fetch_gather_flag();
  void check_gather_indices();
  std::string op_summary(size_t i) const;

  // Fused attention (cuda_executor_attention.cpp).
  std::string attention_plan(const plan::Kernel& k, AttentionStep* a);
  void set_attention_grid(AttentionStep* a, unsigned batch);
  void plan_cudnn_attention(const plan::AttentionDesc& d, AttentionStep* a);
  void choose_attention(AttentionStep& a);
  void setup_attention(AttentionStep& a);
  void exec_attention(AttentionStep& a);
  std::string attention_summary(size_t i) const;

  // Kernels with no device path: reference kernels on host copies (cuda_executor_host.cpp).
  void exec_host(size_t i);

  // Profiling (cuda_executor_profile.cpp): CUPTI records of the timed runs, else CUDA events.
  bool profile_cupti(int reps, RunProfile* prof, std::string* why);
  void profile_events(int reps, RunProfile* prof);
  // Per-step times (ms) as KernelRecords, a GEMM chain's layers merged into its one launch;
  // samples, start samples (per step and run), GPU activities per step and the grid (CTAs) of
  // each step's longest kernel when the runs were traced (else empty).
  void add_step_records(RunProfile* prof, const std::vector<double>& time,
                        const std::vector<double>& start,
                        const std::vector<std::vector<double>>& samples,
                        const std::vector<std::vector<double>>& start_samples,
                        const std::vector<std::vector<std::string>>& activities,
                        const std::vector<int64_t>& grids);
};

}  // namespace brrr::cuda
