#include "backend/cuda/cudnn_attention.hpp"

#include <fmt/format.h>

#include "brrr/error.hpp"

#if defined(BRRR_HAVE_CUDNN) && defined(BRRR_HAVE_CUDNN_FRONTEND)
#include <cstdlib>
#include <exception>
#include <mutex>
#include <unordered_map>

#include "backend/cuda/cudnn_api.hpp"
#include "backend/cuda/cudnn_conv.hpp"
#include "core/env.hpp"

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
};

CudnnSdpa::CudnnSdpa(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnSdpa::~CudnnSdpa() = default;

std::unique_ptr<CudnnSdpa> CudnnSdpa::make(const CudnnContext& ctx, const SdpaGeometry& g,
                                           std::string* why) {
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
    fe::graph::Graph& gr = impl->graph;
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
    auto check = [&](fe::error_t e, const char* stage) {
      return e.is_good() ? std::string() : fmt::format("cuDNN SDPA {}: {}", stage, e.get_message());
    };
    std::string w;
    if (w = check(gr.validate(), "validate"); !w.empty()) return no(w);
    if (w = check(gr.build_operation_graph(impl->handle), "operation graph"); !w.empty()) return no(w);
    if (w = check(gr.create_execution_plans({fe::HeurMode_t::A}), "heuristics"); !w.empty())
      return no(w);
    // An engine that compiles at run time runs NVRTC in this process, and NVRTC in a process
    // that drives the GPU damages libcuda's small-object allocator: the crash shows at a later
    // module load (docs/CUDA.md, issue 14; brrr's own kernels compile in a forked child for that
    // reason). On the H200 `brrr doctor --compare` crashed there 3 times in 8 runs, in
    // cuLibraryLoadData right after cuDNN built its SDPA engine. Such engines are left out unless
    // BRRR_CUDNN_RUNTIME_COMPILED=1.
    if (env::integer("BRRR_CUDNN_RUNTIME_COMPILED") == 0)
      gr.deselect_behavior_notes({fe::BehaviorNote_t::RUNTIME_COMPILATION});
    if (w = check(gr.check_support(impl->handle), "support"); !w.empty()) return no(w);
    if (w = check(gr.build_plans(impl->handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "plan");
        !w.empty())
      return no(w);
    if (w = check(gr.get_workspace_size(impl->ws), "workspace"); !w.empty()) return no(w);
    return std::unique_ptr<CudnnSdpa>(new CudnnSdpa(std::move(impl)));
  } catch (const std::exception& e) {  // the frontend throws where it cannot load what it needs
    return no(fmt::format("cuDNN SDPA: {}", e.what()));
  }
}

bool CudnnSdpa::built() { return true; }
std::size_t CudnnSdpa::workspace_bytes() const { return std::size_t(impl_->ws); }

std::string CudnnSdpa::describe() const {
  return fmt::format("cuDNN SDPA {}{}, workspace {} B", dtype_name(impl_->dt),
                     impl_->bias ? " +bias" : "", impl_->ws);
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
                                           std::string* why) {
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
