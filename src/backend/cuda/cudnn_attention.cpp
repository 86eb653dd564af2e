#include "backend/cuda/cudnn_attention.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "brrr/error.hpp"

namespace brrr::cuda {

std::string sdpa_geometry_key(const SdpaGeometry& g) {
  return fmt::format("{} {} {} {} {} {} {} q{} k{} v{} o{} b{} {} {} {}", g.batch, g.heads,
                     g.kv_heads, g.seq_q, g.seq_k, g.head_dim, dtype_name(g.dt),
                     fmt::join(g.q, ","), fmt::join(g.k, ","), fmt::join(g.v, ","),
                     fmt::join(g.out, ","), fmt::join(g.bias, ","), g.has_bias, g.causal, g.scale);
}

}  // namespace brrr::cuda

#if defined(BRRR_HAVE_CUDNN) && defined(BRRR_HAVE_CUDNN_FRONTEND)
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <unordered_map>

#include "backend/cuda/cudnn_api.hpp"
#include "backend/cuda/cudnn_conv.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "core/env.hpp"
#include "core/kernel_cache.hpp"
#include "core/subprocess.hpp"

// The frontend calls cuDNN through the library brrr loaded (cudnn_api.cpp), never a link-time
// libcudnn: with dynamic loading it resolves every backend symbol from this handle.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cudnn_frontend.h>
#pragma GCC diagnostic pop

namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

namespace brrr::cuda {

namespace fe = cudnn_frontend;

namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kBias, kOut };

// Points the frontend at brrr's libcudnn once; "" or why it cannot be used.
std::string bind_frontend() {
  static std::once_flag once;
  static std::string why;
  std::call_once(once, [] {
    const CudnnApi* api = try_cudnn(&why);
    if (!api) return;
    fe::cudnn_dlhandle = api->handle;
    // The frontend loads the CUDA runtime for a few queries; brrr already links libcudart.so.13,
    // so name it (without this it also tries .so.12 and warns when both exist).
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", "libcudart.so.13", 0);
  });
  return why;
}

std::vector<int64_t> vec(const std::array<int64_t, 4>& a) { return {a[0], a[1], a[2], a[3]}; }

}  // namespace

struct CudnnSdpa::Impl {
  fe::graph::Graph graph;
  cudnnHandle_t handle = nullptr;
  int64_t ws = 0;
  bool bias = false;
  DType dt = DType::bf16;
  bool child_built = false;  // the plan came from a child (BRRR_CUDNN_RUNTIME_COMPILED=2)
  std::string child_why;     // why the child's plan was not used, when it was tried
};

CudnnSdpa::CudnnSdpa(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnSdpa::~CudnnSdpa() = default;

namespace {

std::string check(fe::error_t e, const char* stage) {
  return e.is_good() ? std::string() : fmt::format("cuDNN SDPA {}: {}", stage, e.get_message());
}

// The SDPA of `g` in `gr`: Q, K, V (and the bias) in, O out, with brrr's uids.
void define_graph(fe::graph::Graph& gr, const SdpaGeometry& g) {
  gr.set_io_data_type(g.dt == DType::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, int64_t uid, std::vector<int64_t> dims,
                    const std::array<int64_t, 4>& strides) {
    return gr.tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(std::move(dims))
                         .set_stride(vec(strides)));
  };
  auto Q = tensor("Q", kQ, {g.batch, g.heads, g.seq_q, g.head_dim}, g.q);
  auto K = tensor("K", kK, {g.batch, g.kv_heads, g.seq_k, g.head_dim}, g.k);
  auto V = tensor("V", kV, {g.batch, g.kv_heads, g.seq_k, g.head_dim}, g.v);
  auto opts = fe::graph::SDPA_attributes()
                  .set_name("brrr_sdpa")
                  .set_generate_stats(false)
                  .set_attn_scale(g.scale);
  if (g.causal) opts.set_causal_mask(true);
  if (g.has_bias) {
    // Broadcast axes (stride 0) as dims of 1, as cuDNN expects them.
    const int64_t full[4] = {g.batch, g.heads, g.seq_q, g.seq_k};
    std::vector<int64_t> dims(4), strides(4);
    for (int i = 0; i < 4; ++i) {
      dims[size_t(i)] = g.bias[size_t(i)] == 0 ? 1 : full[i];
      strides[size_t(i)] = g.bias[size_t(i)] == 0 ? 1 : g.bias[size_t(i)];
    }
    opts.set_bias(gr.tensor(fe::graph::Tensor_attributes()
                                .set_name("bias")
                                .set_uid(kBias)
                                .set_dim(dims)
                                .set_stride(strides)));
  }
  auto [O, stats] = gr.sdpa(Q, K, V, opts);
  (void)stats;
  O->set_output(true)
      .set_uid(kOut)
      .set_dim({g.batch, g.heads, g.seq_q, g.head_dim})
      .set_stride(vec(g.out));
}

// The device's properties as cuDNN serializes them (cuDNN 9.8 and later), for plans built where
// no device may be touched.
// The frontend sets the handle and then a device id (0 unless told): cuDNN 9.19 refused the id
// after the handle (CUDNN_STATUS_BAD_PARAM, "fromSerialization || initialized"), so the handle
// alone first, then the handle's device id alone.
std::string device_properties(cudnnHandle_t h, int device, std::vector<uint8_t>* out) {
  std::string w;
  for (int attempt = 0; attempt < 2; ++attempt) {
    fe::DeviceProperties dp;
    if (attempt == 0)
      dp.set_handle(h).set_device_id(-1);
    else
      dp.set_device_id(device);
    const std::string why = check(dp.build(), "device properties");
    if (why.empty()) return check(dp.serialize(*out), "device properties");
    w += (w.empty() ? "" : "; ") + why;
  }
  return w;
}

// g's plan built in a forked child against the serialized device properties `props`, engines
// that compile at run time allowed (NVRTC then runs in the child: in a process that drives the
// GPU it damages libcuda's allocator, docs/CUDA.md), the child making no CUDA call (SM version
// and count given, cuDNN's deviceless build); the compiled plan comes back serialized.
std::string build_in_child(const SdpaGeometry& g, const std::vector<uint8_t>& props,
                           std::vector<uint8_t>* plan) {
  // One SDPA engine compiles in seconds; a child stuck on a device call it cannot make (the
  // build is meant to be deviceless) must not hold plan building for BRRR_COMPILE_TIMEOUT.
  const int kChildSeconds = std::min(env::seconds("BRRR_COMPILE_TIMEOUT"), 60);
  ProcessResult r = run_forked(
      [&]() -> std::string {
        auto dp = std::make_shared<fe::DeviceProperties>();
        std::string w = check(dp->deserialize(props), "device properties");
        fe::graph::Graph gr;
        if (w.empty()) {
          gr.set_device_properties(dp).set_sm_version(g.sm_version).set_sm_count(g.sm_count);
          define_graph(gr, g);
          w = check(gr.validate(), "validate");
        }
        if (w.empty()) w = check(gr.build_operation_graph(), "operation graph");
        if (w.empty()) w = check(gr.create_execution_plans({fe::HeurMode_t::A}), "heuristics");
        if (w.empty()) w = check(gr.check_support(), "support");
        if (w.empty())
          w = check(gr.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "plan");
        std::vector<uint8_t> data;
        if (w.empty()) w = check(gr.serialize(data), "serialize");
        if (!w.empty()) return "F" + w;
        return "K" + std::string(data.begin(), data.end());
      },
      kChildSeconds);
  if (r.timed_out)
    return fmt::format("cuDNN SDPA: the child's plan build took over {} s", kChildSeconds);
  if (r.exec_errno) return fmt::format("cuDNN SDPA: could not fork: errno {}", r.exec_errno);
  if (r.exit_code == 1) return "cuDNN SDPA in a child: " + r.output;
  if (r.exit_code != 0 || r.output.empty() || (r.output[0] != 'K' && r.output[0] != 'F'))
    return "cuDNN SDPA: the child building the plan died or returned nothing";
  if (r.output[0] == 'F') return r.output.substr(1);
  plan->assign(r.output.begin() + 1, r.output.end());
  return "";
}

// The disk cache of child-built plans: one entry per geometry, device and cuDNN version, so a
// warm load deserializes instead of forking a build.
std::string plan_cache_key(const SdpaGeometry& g, const std::vector<uint8_t>& props) {
  const CudnnApi* api = try_cudnn(nullptr);
  const std::string text =
      fmt::format("cudnn {} frontend {} sm {} x{}\n{}\n", api ? api->version : 0,
                  CUDNN_FRONTEND_VERSION, g.sm_version, g.sm_count, sdpa_geometry_key(g));
  return "sdpa-" + content_hash(text + std::string(props.begin(), props.end()));
}

}  // namespace

std::unique_ptr<CudnnSdpa> CudnnSdpa::make(const CudnnContext& ctx, const SdpaGeometry& g,
                                           const std::string& cache_dir, std::string* why) {
  auto no = [&](std::string w) -> std::unique_ptr<CudnnSdpa> {
    if (why) *why = std::move(w);
    return nullptr;
  };
  if (g.dt != DType::bf16 && g.dt != DType::f16)
    return no(fmt::format("cuDNN SDPA takes bf16 or fp16, not {}", dtype_name(g.dt)));
  if (g.causal && g.seq_q != g.seq_k)
    return no("cuDNN SDPA here: causal with seq_q != seq_k");
  if (std::string w = bind_frontend(); !w.empty()) return no(w);
  try {
    auto impl = std::make_unique<Impl>();
    impl->handle = static_cast<cudnnHandle_t>(ctx.handle());
    impl->bias = g.has_bias;
    impl->dt = g.dt;
    const int64_t rtc = env::integer("BRRR_CUDNN_RUNTIME_COMPILED");
    std::string w;
    // 2: the plan built in a child (runtime-compiled engines allowed there) and deserialized
    // here; where any step fails, the in-process build below without those engines.
    if (rtc == 2 && g.sm_version > 0 && g.sm_count > 0) {
      std::vector<uint8_t> props, plan;
      w = device_properties(impl->handle, g.device, &props);
      KernelCache cache(cache_dir, ".cudnnplan");
      const std::string key = w.empty() ? plan_cache_key(g, props) : "";
      bool cached = false;
      if (w.empty()) {
        if (auto hit = cache.lookup(key)) {
          plan.assign(hit->begin(), hit->end());
          cached = check(impl->graph.deserialize(impl->handle, plan), "deserialize").empty();
          if (!cached) impl->graph = fe::graph::Graph();  // a stale entry: build it again
        }
      }
      if (w.empty() && !cached) {
        w = build_in_child(g, props, &plan);
        if (w.empty()) w = check(impl->graph.deserialize(impl->handle, plan), "deserialize");
        if (w.empty())
          cache.publish(key, std::string_view(reinterpret_cast<const char*>(plan.data()), plan.size()));
      }
      if (w.empty()) w = check(impl->graph.get_workspace_size(impl->ws), "workspace");
      if (w.empty()) {
        impl->child_built = true;
        return std::unique_ptr<CudnnSdpa>(new CudnnSdpa(std::move(impl)));
      }
      impl->child_why = w;
      impl->graph = fe::graph::Graph();
    }
    // A refusal below also names why the child's plan was not used, when one was tried.
    const std::string child_note =
        impl->child_why.empty() ? "" : " (child build: " + impl->child_why + ")";
    auto refuse = [&](const std::string& why_here) { return no(why_here + child_note); };
    fe::graph::Graph& gr = impl->graph;
    define_graph(gr, g);
    if (w = check(gr.validate(), "validate"); !w.empty()) return refuse(w);
    if (w = check(gr.build_operation_graph(impl->handle), "operation graph"); !w.empty())
      return refuse(w);
    if (w = check(gr.create_execution_plans({fe::HeurMode_t::A}), "heuristics"); !w.empty())
      return refuse(w);
    // An engine that compiles at run time runs NVRTC in this process, and NVRTC in a process
    // that drives the GPU damages libcuda's small-object allocator: the crash shows at a later
    // module load (docs/CUDA.md, issue 14; brrr's own kernels compile in a forked child for that
    // reason). On the H200 `brrr doctor --compare` crashed there 3 times in 8 runs, in
    // cuLibraryLoadData right after cuDNN built its SDPA engine. Such engines are left out unless
    // BRRR_CUDNN_RUNTIME_COMPILED=1 (or built in a child, 2, above).
    if (rtc != 1) gr.deselect_behavior_notes({fe::BehaviorNote_t::RUNTIME_COMPILATION});
    if (w = check(gr.check_support(impl->handle), "support"); !w.empty()) return refuse(w);
    if (w = check(gr.build_plans(impl->handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "plan");
        !w.empty())
      return refuse(w);
    if (w = check(gr.get_workspace_size(impl->ws), "workspace"); !w.empty()) return refuse(w);
    return std::unique_ptr<CudnnSdpa>(new CudnnSdpa(std::move(impl)));
  } catch (const std::exception& e) {  // the frontend throws where it cannot load what it needs
    return no(fmt::format("cuDNN SDPA: {}", e.what()));
  }
}

bool CudnnSdpa::built() { return true; }
std::size_t CudnnSdpa::workspace_bytes() const { return std::size_t(impl_->ws); }

std::string CudnnSdpa::describe() const {
  return fmt::format("cuDNN SDPA {}{}, workspace {} B{}", dtype_name(impl_->dt),
                     impl_->bias ? " +bias" : "", impl_->ws,
                     impl_->child_built          ? ", plan built in a child"
                     : impl_->child_why.empty() ? ""
                                                 : " (child build: " + impl_->child_why + ")");
}

void CudnnSdpa::run(DevPtr q, DevPtr k, DevPtr v, DevPtr bias, DevPtr out, DevPtr ws) const {
  auto p = [](DevPtr x) { return reinterpret_cast<void*>(static_cast<uintptr_t>(x)); };
  std::unordered_map<int64_t, void*> pack = {{kQ, p(q)}, {kK, p(k)}, {kV, p(v)}, {kOut, p(out)}};
  if (impl_->bias) pack[kBias] = p(bias);
  fe::error_t e = impl_->graph.execute(impl_->handle, pack, p(ws));
  if (!e.is_good()) fail("cuDNN SDPA execute failed: {}", e.get_message());
}

}  // namespace brrr::cuda

#else  // no cuDNN or no frontend headers at build time

namespace brrr::cuda {

struct CudnnSdpa::Impl {};
CudnnSdpa::CudnnSdpa(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnSdpa::~CudnnSdpa() = default;
std::unique_ptr<CudnnSdpa> CudnnSdpa::make(const CudnnContext&, const SdpaGeometry&,
                                           const std::string&, std::string* why) {
  if (why) *why = "brrr was built without the cuDNN frontend headers";
  return nullptr;
}
bool CudnnSdpa::built() { return false; }
std::size_t CudnnSdpa::workspace_bytes() const { return 0; }
std::string CudnnSdpa::describe() const { return "none"; }
void CudnnSdpa::run(DevPtr, DevPtr, DevPtr, DevPtr, DevPtr, DevPtr) const {
  fail("brrr was built without the cuDNN frontend headers");
}

}  // namespace brrr::cuda

#endif
