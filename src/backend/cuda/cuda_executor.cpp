// CUDA execution of a static plan: the core. Every address is fixed at load time (graph inputs
// and outputs in their own device buffers, intermediates in one arena placed by the memory
// planner, weights uploaded once, cast and transposed for the GEMM as needed), so the step list
// can be captured into one CUDA graph and replayed. Each step kind lives in its own file
// (cuda_executor_impl.hpp lists them): GEMMs on cuBLASLt, Convs on cuDNN with their epilogue in
// one helper kernel, pools, Concat, row reductions, channel scales and Gather as op steps,
// generated kernels and copies, and host steps: kernels the plan marks as having no CUDA path
// (plan::Kernel::host, decided against Target::cuda()) run on the host with their reference
// kernels (a device->host->device round trip), reported in the summary and on stderr. This file
// maps each kernel to its step kind, plans memory, compiles the module, sets the steps up and
// dispatches.
#include "backend/cuda/cuda_executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <cstdio>
#include <cstring>

#include "backend/cuda/cuda_executor_impl.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "brrr/passes.hpp"
#include "core/env.hpp"
#include "passes/plan_memory.hpp"

namespace brrr::cuda {

using plan::KernelKind;

DevPtr CudaExecutor::Impl::upload(const Tensor& t, const std::string& what) {
  Tensor c = t.contiguous();
  owned.emplace_back(std::max<size_t>(c.nbytes(), 256), what);
  // Large weights (Llama-1B: 2.5 GB, most of it read in place from the mapped model file) go
  // through pinned buffers filled by several threads; the staging lives until the build's end.
  if (c.nbytes() >= (size_t(16) << 20)) {
    if (!staged) staged = std::make_unique<StagedUpload>();
    staged->copy(owned.back().ptr(), c.raw(), c.nbytes(), stream, what);
    return owned.back().ptr();
  }
  copy_h2d(owned.back().ptr(), c.raw(), c.nbytes(), stream, what);
  return owned.back().ptr();
}

DevPtr CudaExecutor::Impl::alloc(size_t bytes, const std::string& what) {
  owned.emplace_back(std::max<size_t>(bytes, 256), what);
  return owned.back().ptr();
}

DevPtr CudaExecutor::Impl::slot_of(int v, const char* what) const {
  if (v < 0) return 0;
  if (!slot[size_t(v)])  // the memory plan gave every operand a buffer
    internal_assert_failed("slot != 0", __FILE__, __LINE__,
                           fmt::format("{} without a device buffer", what));
  return slot[size_t(v)];
}

std::string CudaExecutor::Impl::cache_dir() const {
  return opts.cache_dir.empty() ? default_cuda_cache_dir() : opts.cache_dir + "/cuda";
}

// The cuDNN handle, opened at the first Conv or pool; false (dnn_why says why) when it cannot.
bool CudaExecutor::Impl::open_dnn() {
  if (!dnn && dnn_why.empty()) {
    try {
      dnn = CudnnContext::open(stream, &dnn_why);
    } catch (const Error& e) {
      dnn_why = e.what();
    }
    if (!dnn && dnn_why.empty()) dnn_why = "cuDNN could not be opened";
  }
  return dnn != nullptr;
}

Dim3 CudaExecutor::Impl::helper_grid(int64_t items, int64_t per_block) const {
  int64_t b = std::min<int64_t>((items + per_block - 1) / per_block, int64_t(dev.info().sm_count) * 32);
  return Dim3{unsigned(std::max<int64_t>(b, 1)), 1, 1};
}

void CudaExecutor::Impl::launch_own(const Function& f, Dim3 grid, Dim3 block, unsigned shared,
                                    void** args) {
  launch(f, grid, block, shared, stream, args, pdl);
}

void CudaExecutor::Impl::launch_helper(const Function& f, std::vector<DevPtr> ptrs, int64_t n) {
  std::vector<void*> a;
  for (DevPtr& p : ptrs) a.push_back(&p);
  a.push_back(&n);
  launch(f, helper_grid(n, 256), {256, 1, 1}, 0, stream, a.data());
}

// The device step of plan kernel k, by its kind and descriptor: "" when it has one, else why the
// library (cuDNN, cuBLASLt) refused it here, on this device.
std::string CudaExecutor::Impl::device_step(const plan::Kernel& k, Step* s) {
  switch (k.kind) {
    case KernelKind::Fused:
      s->type = Step::Kernel;
      s->body.emplace<LaunchStep>();
      return "";
    case KernelKind::Copy:
      s->type = Step::Copy;
      s->body.emplace<CopyStep>();
      return "";
    case KernelKind::Reference:  // a plan made for a target without a device
      return "the plan has no device kernel for it (planned for another target)";
    case KernelKind::Library: break;
  }
  std::string why;
  if (plan::desc_of<plan::GemmDesc>(k)) {
    s->type = Step::Library;
    why = gemm_plan(k, &s->body.emplace<GemmStep>());
  } else if (plan::desc_of<plan::ConvDesc>(k)) {
    s->type = Step::Conv;
    why = conv_plan(k, &s->body.emplace<ConvStep>());
  } else if (plan::desc_of<plan::GatherDesc>(k)) {
    s->type = Step::Op;
    why = gather_plan(k, &s->body.emplace<OpStep>());
  } else if (plan::desc_of<plan::AttentionDesc>(k)) {
    s->type = Step::Attention;
    why = attention_plan(k, &s->body.emplace<AttentionStep>());
  } else if (plan::desc_of<plan::SplitDesc>(k)) {
    s->type = Step::Op;
    why = split_plan(k, &s->body.emplace<OpStep>());
  } else if (k.lib) {  // pool, Concat, row reduce, channel scale
    s->type = Step::Op;
    why = op_plan(k, &s->body.emplace<OpStep>());
  } else {
    why = "a library kernel without a descriptor";
  }
  return why;
}

void CudaExecutor::Impl::build() {
  // BRRR_DEBUG=1: how long each stage of the build took, after the compile pipeline's passes.
  auto t_stage = std::chrono::steady_clock::now();
  auto stage = [&t_stage](const char* what) {
    auto now = std::chrono::steady_clock::now();
    if (debug_level() >= 1)
      fmt::print(stderr, "brrr: build {:<14} {:9.1f} ms\n", what,
                 std::chrono::duration<double, std::milli>(now - t_stage).count());
    t_stage = now;
  };
  const int nk = int(plan.kernels.size());
  steps.resize(size_t(nk));
  // Each kernel's step kind first: the plan says which kernels run on the host (Kernel::host);
  // a library kernel the library itself refuses here (cuDNN missing, no algorithm within the
  // workspace) joins them. Host kernels store every node output.
  for (int i = 0; i < nk; ++i) {
    plan::Kernel& k = plan.kernels[size_t(i)];
    Step& s = steps[size_t(i)];
    s.what = fmt::format("{} ({})", k.name, g.nodes[size_t(k.nodes[0])].op);
    std::string why = k.host;
    if (why.empty()) {
      why = device_step(k, &s);
      if (why.empty()) continue;
      why = "the library refused it here: " + why;
    }
    s.type = Step::Host;
    s.body = std::monostate{};
    std::string ops;
    for (int n : k.nodes) ops += (ops.empty() ? "" : " ") + g.nodes[size_t(n)].name + ":" + g.nodes[size_t(n)].op;
    host_notes.push_back(fmt::format("{} [{}] runs on the host (reference kernel, device<->host "
                                     "copies): {}", k.name, ops, why));
    k.kind = KernelKind::Reference;
    k.host = why;
    k.outputs.clear();
    for (int n : k.nodes)
      for (int o : g.nodes[size_t(n)].outputs)
        if (o >= 0) k.outputs.push_back(o);
  }
  for (const auto& note : host_notes) std::fprintf(stderr, "brrr cuda: %s\n", note.c_str());
  stage("cuda steps");
  std::string chain_src = find_gemm_chains();
  std::string small_m_src = find_small_m_gemms();
  choose_layouts();
  choose_conv_gemms();
  std::string direct_src = find_direct_convs();
  tune_convs();
  stage("cuda layouts");

  // Memory: graph inputs and outputs own buffers; intermediates share the arena.
  slot.assign(g.values.size(), 0);
  padded_out.assign(g.values.size(), -1);
  std::vector<bool> is_out(g.values.size(), false);
  for (int o : g.outputs) is_out[size_t(o)] = true;
  for (int id : g.inputs) slot[size_t(id)] = alloc(g.value(id).nbytes(), "input " + g.value(id).name);
  for (int o : g.outputs)
    if (g.value(o).producer >= 0 && !slot[size_t(o)])
      slot[size_t(o)] = alloc(g.value(o).nbytes(), "output " + g.value(o).name);
  std::vector<BufferRequest> reqs;
  std::vector<int> req_value;
  std::vector<int> last_use(g.values.size(), -1);
  for (int i = 0; i < nk; ++i)
    for (int v : plan.kernels[size_t(i)].inputs) last_use[size_t(v)] = i;
  // A copy kernel (Reshape, Flatten, Squeeze, ...) whose output is not a graph output is its
  // input's bytes read another way: it aliases the input's buffer and does no work (a memcpy
  // node each in the CUDA graph otherwise: 158 of them in GPT-2). The buffer it aliases lives
  // until the alias's last reader. No kernel writes a buffer it did not produce, so sharing is safe.
  std::vector<int> alias_of(g.values.size(), -1);
  aliased_copies = 0;
  for (int i = 0; i < nk; ++i) {
    const plan::Kernel& k = plan.kernels[size_t(i)];
    if (steps[size_t(i)].type != Step::Copy || k.inputs.size() != 1 || k.outputs.size() != 1) continue;
    const int in = k.inputs[0], out = k.outputs[0];
    if (is_out[size_t(out)] || slot[size_t(out)] || g.value(in).nbytes() != g.value(out).nbytes())
      continue;
    const int root = alias_of[size_t(in)] >= 0 ? alias_of[size_t(in)] : in;
    alias_of[size_t(out)] = root;
    last_use[size_t(root)] = std::max(last_use[size_t(root)], last_use[size_t(out)]);
    ++aliased_copies;
  }
  for (int i = 0; i < nk; ++i)
    for (int v : plan.kernels[size_t(i)].outputs) {
      if (is_out[size_t(v)] || slot[size_t(v)] || alias_of[size_t(v)] >= 0) continue;
      reqs.push_back({Arena::align(g.value(v).nbytes()), i, std::max(i, last_use[size_t(v)])});
      req_value.push_back(v);
    }
  MemoryPlan mp = plan_memory(reqs);
  mem.arena_bytes = mp.arena_bytes;
  mem.intermediate_bytes = mp.total_bytes;
  mem.num_buffers = reqs.size();
  arena = std::make_unique<Arena>(std::max<size_t>(mp.arena_bytes, Arena::kAlign), "plan arena");
  for (size_t r = 0; r < reqs.size(); ++r)
    slot[size_t(req_value[r])] = arena->at(mp.offsets[r], reqs[r].bytes, g.value(req_value[r]).name);
  // Constants read by generated, copy, Conv and host kernels (GEMM weights are uploaded per
  // GEMM; Conv weights are already NCHW float32, cuDNN's KCRS filter layout).
  for (int i = 0; i < nk; ++i) {
    Step::Type t = steps[size_t(i)].type;
    if (t == Step::Library || t == Step::Chain || t == Step::InChain) continue;
    for (int v : plan.kernels[size_t(i)].inputs)
      if (g.value(v).constant.defined() && !slot[size_t(v)] &&
          !(t == Step::Conv && steps[size_t(i)].conv().geo.nhwc && v == steps[size_t(i)].conv().vw))
        slot[size_t(v)] = upload(g.value(v).constant, "constant " + g.value(v).name);
  }
  for (size_t v = 0; v < alias_of.size(); ++v)
    if (alias_of[v] >= 0) slot[v] = slot[size_t(alias_of[v])];
  stage("cuda constants");

  // The model's NVRTC modules: the helpers, the attention kernels, the fused kernels a few at a
  // time and the GEMM chains, compiled side by side (each NVRTC run is its own process) and
  // cached one by one; compile_ms is the wall time of them all.
  DeviceInfo info = dev.info();
  const int64_t pdl_mode = env::integer("BRRR_CUDA_PDL");
  pdl = info.cc_major >= 9 && pdl_mode >= 1;
  CudaCodegenOptions co;
  co.sm_count = info.sm_count;
  src = generate_cuda(g, plan, co);
  if (!chain_src.empty()) src.add_part(chain_src);
  if (!small_m_src.empty()) src.add_part(small_m_src);
  if (!direct_src.empty()) src.add_part(direct_src);
  // BRRR_CUDA_PDL=2: each of brrr's kernels lets the next launch right after its own wait
  // (prelude.cuh's brrr_grid_wait).
  pdl_early = pdl && pdl_mode == 2;
  if (pdl_early) {
    const std::string early = "#define BRRR_PDL_EARLY 1\n";
    src.text = early + src.text;
    for (std::string& part : src.parts) part = early + part;
  }
  NvrtcCompiler nv(info.arch(), cache_dir(), opts.dump_dir);
  const auto t_compile = std::chrono::steady_clock::now();
  std::vector<std::future<CompiledKernel>> parts;
  for (size_t i = 0; i < src.parts.size(); ++i)
    parts.push_back(std::async(std::launch::async, [&nv, this, i] {
      return nv.compile(src.parts[i], fmt::format("brrr_model_{}", i));
    }));
  module = std::make_unique<ModuleSet>();
  from_cache = true;
  for (size_t i = 0; i < parts.size(); ++i) {  // (after a failure, ~future waits for the rest)
    CompiledKernel ck = parts[i].get();
    from_cache = from_cache && ck.from_cache;
    module->add(ck.cubin, fmt::format("model module {} of {}", i + 1, parts.size()));
  }
  compile_ms = from_cache ? 0
                          : std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - t_compile).count();
  size_t ws_bytes = 0;
  for (const Step& s : steps)
    if (s.type == Step::Conv) ws_bytes = std::max(ws_bytes, s.conv().dnn->workspace_bytes());
    else if (s.type == Step::Attention && s.attention().sdpa)
      ws_bytes = std::max(ws_bytes, s.attention().sdpa->workspace_bytes());
  if (ws_bytes) conv_ws = alloc(ws_bytes, "cuDNN workspace");
  size_t cols_bytes = 0;
  for (const Step& s : steps)
    if (s.type == Step::Conv && s.conv().candidate)
      cols_bytes = std::max(cols_bytes, conv_im2col_bytes(s.conv()));
  if (cols_bytes) im2col_ws = alloc(cols_bytes, "im2col scratch");
  size_t small_ws_bytes = 0, small_tiles = 0;
  for (const Step& s : steps)
    if (s.type == Step::Library && s.gemm().small.splits) {
      const GemmStep& gm = s.gemm();
      small_ws_bytes = std::max(small_ws_bytes, small_m_gemm_workspace_bytes(gm.small, gm.shape.m, gm.shape.n));
      small_tiles = std::max(small_tiles, small_m_gemm_counters(gm.small, gm.shape.m, gm.shape.n));
    }
  if (small_tiles) {
    small_ws = alloc(small_ws_bytes, "small-M GEMM split-K partials");
    small_counters = alloc(small_tiles * 4, "small-M GEMM tile counters");
    memset_u32(small_counters, 0, small_tiles, stream, "small-M GEMM tile counters");
  }
  stage("cuda modules");

  for (int i = 0; i < nk; ++i) {
    Step& s = steps[size_t(i)];
    const plan::Kernel& k = plan.kernels[size_t(i)];
    switch (s.type) {
      case Step::Kernel: setup_kernel(size_t(i), s.launch()); break;
      case Step::Copy: setup_copy(k, s.copy()); break;
      case Step::Library:
      case Step::Chain:
      case Step::InChain: setup_gemm(k, s.gemm()); break;
      case Step::Conv: setup_conv(s.conv()); break;
      case Step::Op: setup_op(s.op()); break;
      case Step::Attention: setup_attention(s.attention()); break;
      case Step::Host: break;
    }
  }
  setup_chains();
  stream.synchronize("uploading weights");
  staged.reset();
  choose_conv_paths();
  plan_l2_prefetch();
  stage("cuda setup");

  bool graphs = opts.graphs;
  if (!graphs) graph_status = "off (disabled by option or BRRR_DISABLE_GRAPHS)";
  else if (!host_notes.empty()) graph_status = "off (some kernels run on the host)";
  if (graphs && host_notes.empty()) {
    try {
      exec_all(false);  // warm-up: cuBLASLt picks its algorithms outside the capture
      stream.synchronize("warm-up run");
      graph.emplace(CudaGraph::capture(stream, [&] { exec_all(false); }, "the plan"));
      graph_status = fmt::format("on ({} nodes)", graph->num_nodes());
    } catch (const Error& e) {
      graph.reset();
      graph_status = std::string("off: ") + e.what();
      std::fprintf(stderr, "brrr cuda: CUDA graph disabled: %s\n", e.what());
    }
  }
  stage("cuda graph");
}

void CudaExecutor::Impl::exec(size_t i) {
  Step& s = steps[i];
  switch (s.type) {
    case Step::Kernel: {
      LaunchStep& l = s.launch();
      launch_own(l.fn, l.grid, l.block, 0, l.argp.data());
      return;
    }
    case Step::Copy: exec_copy(s.copy(), s.what); return;
    case Step::Library: exec_gemm(s.gemm(), s.what); return;
    case Step::Conv: exec_conv(s.conv()); return;
    case Step::Op: exec_op(s.op()); return;
    case Step::Attention: exec_attention(s.attention()); return;
    case Step::Host: exec_host(i); return;
    case Step::Chain: {
      LaunchStep& l = s.gemm().chain;
      launch(l.fn, l.grid, l.block, 0, stream, l.argp.data());
      return;
    }
    case Step::InChain: return;
  }
}

void CudaExecutor::Impl::exec_all(bool use_graph) {
  if (use_graph && graph) {
    graph->replay(stream);
    return;
  }
  if (prefetches.empty()) {
    for (size_t i = 0; i < steps.size(); ++i) exec(i);
    return;
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    start_prefetches(i);
    exec(i);
  }
  join_prefetches();
}

void CudaExecutor::Impl::bind(const std::map<std::string, Tensor>& inputs) {
  for (int id : g.inputs) {
    const Value& v = g.value(id);
    const Tensor& t = g.bound_input(id, inputs);
    Tensor c = t.contiguous();
    copy_h2d(slot[size_t(id)], c.raw(), c.nbytes(), stream, "input " + v.name);
  }
}

CudaExecutor::CudaExecutor(const Graph& g, plan::Plan& plan, const CudaExecOptions& opts)
    : impl_(std::make_unique<Impl>(g, plan, opts)) {
  impl_->build();
}
CudaExecutor::~CudaExecutor() = default;

std::vector<Tensor> CudaExecutor::run(const std::map<std::string, Tensor>& inputs) {
  Impl& m = *impl_;
  m.dev.make_current();
  m.bind(inputs);
  m.exec_all(true);
  const Graph& g = m.g;
  if (m.last_outputs.size() != g.outputs.size()) m.last_outputs.assign(g.outputs.size(), Tensor());
  std::vector<Tensor> outs;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const Value& v = g.value(g.outputs[k]);
    Tensor& prev = m.last_outputs[k];
    if (!prev.defined() || prev.storage_use_count() > 1) prev = Tensor::empty(v.dtype, v.shape);
    outs.push_back(prev);
    if (prev.nbytes() == 0) continue;
    // Left in its padded rows by the plan: the real columns into its dense buffer first (a 2-D
    // copy straight to pageable host memory took GPT-2's b16 run() from 16-21 to 23-25 ms).
    if (const int p = m.padded_out[size_t(g.outputs[k])]; p >= 0)
      m.unpad(m.steps[size_t(p)].gemm(), m.slot[size_t(g.outputs[k])], m.stream, false);
    if (v.producer >= 0 || !v.constant.defined())
      copy_d2h(outs.back().raw(), m.slot[size_t(g.outputs[k])], prev.nbytes(), m.stream, "output " + v.name);
    else
      std::memcpy(outs.back().raw(), v.constant.contiguous().raw(), prev.nbytes());
  }
  m.fetch_gather_flag();
  m.stream.synchronize("copying outputs to the host");
  m.check_gather_indices();
  return outs;
}

std::string CudaExecutor::summary() const {
  const Impl& m = *impl_;
  std::string s = fmt::format("cuda: {} ({}), module {} ({}), CUDA graph {}, brrr kernels launched {}\n",
                              m.dev.info().name, m.dev.info().arch(),
                              m.from_cache ? "from cache" : "compiled",
                              m.from_cache ? "NVRTC cache" : fmt::format("{:.0f} ms", m.compile_ms),
                              m.graph_status, m.pdl_early ? "dependent (PDL), each starting the next after its wait"
                              : m.pdl     ? "dependent (PDL)"
                                          : "after the previous kernel");
  s += m.prefetch_summary();
  for (size_t i = 0; i < m.steps.size(); ++i) {
    switch (m.steps[i].type) {
      case Step::Kernel: s += m.kernel_summary(i); break;
      case Step::Library:
      case Step::Chain:
      case Step::InChain: s += m.gemm_summary(i); break;
      case Step::Conv: s += m.conv_summary(i); break;
      case Step::Op: s += m.op_summary(i); break;
      case Step::Attention: s += m.attention_summary(i); break;
      case Step::Copy:
      case Step::Host: break;
    }
  }
  if (m.aliased_copies)
    s += fmt::format("  {} copy kernel(s) alias their input's buffer (no work)\n", m.aliased_copies);
  for (const auto& note : m.host_notes) s += "  host fallback: " + note + "\n";
  return s;
}

MemoryStats CudaExecutor::memory() const { return impl_->mem; }
bool CudaExecutor::graph_active() const { return impl_->graph.has_value(); }

}  // namespace brrr::cuda
