// CUDA execution of a static plan. Every address is fixed at load time (graph inputs and outputs
// in their own device buffers, intermediates in one arena placed by the memory planner, weights
// uploaded once, cast and transposed for the GEMM as needed), so the step list can be captured
// into one CUDA graph and replayed. GEMMs run on cuBLASLt, Convs on cuDNN (cudnn_conv.hpp) with
// their epilogue in one helper kernel, pools on cuDNN (cudnn_pool.hpp), Concat as 2-D copies,
// mean / sum over trailing axes and squeeze-excite channel scales as helper kernels. Kernels with
// no CUDA path run on the host with their reference kernels (a device->host->device round trip),
// reported in the summary and on stderr.
#include "backend/cuda/cuda_executor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "backend/cuda/codegen_cuda.hpp"
#include "backend/cuda/cublaslt_gemm.hpp"
#include "backend/cuda/cuda_graph.hpp"
#include "backend/cuda/cuda_runtime.hpp"
#include "backend/cuda/gemm_chain.hpp"
#include "backend/cuda/cudnn_conv.hpp"
#include "backend/cuda/cudnn_pool.hpp"
#include "brrr/reference.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "ops/window.hpp"
#include "brrr/op.hpp"
#include "runtime/kernel_record.hpp"
#include "passes/plan_memory.hpp"
#include "core/env.hpp"

namespace brrr::cuda {

using plan::KernelKind;

namespace {

size_t value_bytes(const Value& v) { return size_t(shape_numel(v.shape)) * dtype_size(v.dtype); }

// Per-conv workspace cap: the heuristic's first algorithm within it is taken.
constexpr size_t kMaxConvWorkspace = size_t(256) << 20;

// Host copy of a float32 tensor in the GEMM's element type (optionally transposed, [K,N] <- [N,K]).
Tensor host_cast(const Tensor& src, DType to, bool transpose) {
  Tensor c = src.contiguous();
  const Shape& s = c.shape();
  Shape os = s;
  if (transpose) std::swap(os[os.size() - 2], os[os.size() - 1]);
  Tensor out = Tensor::empty(to, os);
  int64_t n = c.numel(), cols = s.empty() ? 1 : s.back(), rows = s.size() < 2 ? 1 : s[s.size() - 2];
  auto read = [&](int64_t i) -> float {
    switch (c.dtype()) {
      case DType::f32: return c.data<float>()[i];
      case DType::bf16: return float(c.data<bf16>()[i]);
      case DType::f16: return float(c.data<f16>()[i]);
      default: fail("GEMM operand of type {} cannot be cast", dtype_name(c.dtype()));
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    int64_t j = i;
    if (transpose) {  // out[b, k, n] = in[b, n, k]
      int64_t b = i / (rows * cols), r = (i / cols) % rows, q = i % cols;
      j = b * rows * cols + q * rows + r;
    }
    float v = read(i);
    switch (to) {
      case DType::f32: out.data<float>()[j] = v; break;
      case DType::bf16: out.data<bf16>()[j] = bf16(v); break;
      case DType::f16: out.data<f16>()[j] = f16(v); break;
      default: BRRR_ASSERT(false, "bad cast target");
    }
  }
  return out;
}

}  // namespace

struct CudaExecutor::Impl {
  const Graph& g;
  plan::Plan& plan;
  CudaExecOptions opts;
  Device dev{0};
  Stream stream;
  LtGemm lt;
  std::unique_ptr<Module> module;
  CudaSource src;
  std::vector<DevPtr> slot;  // graph value id -> device address
  std::unique_ptr<Arena> arena;
  std::vector<DeviceBuffer> owned;  // inputs, outputs, weights, scratch
  MemoryStats mem;
  std::optional<CudaGraph> graph;
  std::string graph_status = "off";
  std::vector<std::string> host_notes;
  std::vector<Tensor> last_outputs;
  double compile_ms = 0;
  bool from_cache = false;
  std::unique_ptr<Module> spin_module;  // profile(): the gate kernel, compiled on first use
  Function spin;

  struct Gemm {
    GemmPrecision prec = GemmPrecision::kFp32;
    GemmEpilogue epi = GemmEpilogue::kNone;
    GemmShape shape;
    DevPtr a = 0, b = 0, c = 0, bias = 0;
    DType data = DType::f32;  // the graph's dtype of A and C
    DevPtr a_src = 0, b_src = 0, c_dst = 0;  // f32 tensors cast in / out per run (0: none)
    int64_t na = 0, nb = 0, nc = 0;
    bool gelu_erf = false;
    // Activations cuBLASLt has no epilogue for (hardswish 2, hardsigmoid 3, clip 4; float32
    // output): brrr_conv_epilogue's activation in place after the GEMM.
    int post_act = 0;
    float post_alpha = 0, post_beta = 0;
    Function post_fn;
    // Helper kernels, resolved at setup: casts of A, B (to 16 bits) and C (back to float32),
    // and the in-place erf GELU.
    Function cvt_in, cvt_out, gelu_fn;
  };
  // A Conv on cuDNN, then (when there is a bias, sum or activation) brrr_conv_epilogue in place.
  // The epilogue's arguments live here, so argp stays valid for the step's lifetime.
  struct ConvRun {
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
    Function fn;
    Dim3 grid, block;
    std::vector<void*> argp;
  };
  // The other library kernels: a pool on cuDNN, a Concat (one 2-D copy per input), a mean or sum
  // over trailing axes (brrr_row_mean) or a channel scale (brrr_channel_scale). Kernel
  // arguments live here, so argp stays valid for the step's lifetime.
  struct OpRun {
    enum Kind { Pool, PoolKernel, Concat, RowMean, ChannelScale, Gather } kind = Pool;
    PoolGeometry geo;
    std::unique_ptr<CudnnPool> pool;
    // PoolKernel: brrr_pool_<type>(x, y, geometry, is_max, include_pad, n); the geometry has
    // brrr_pool_geo's layout (3-D, unit dims in front).
    struct PoolGeo {
      int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], out[3];
    } pg{};
    int is_max = 1, include_pad = 0;
    DType dt = DType::f32;
    int vx = -1, vs = -1, vy = -1;
    // Concat: the output is `outer` rows of out_row bytes, input q fills `part_bytes[q]` of each.
    std::vector<int> parts;
    std::vector<size_t> part_bytes;
    size_t outer = 1, out_row = 0;
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
  struct Step {
    // Chain: a run of small-batch GEMMs as one cluster kernel (gemm_chain.hpp), at its first
    // kernel; the chain's later kernels are InChain (nothing to launch).
    enum Type { Kernel, Library, Copy, Host, Chain, InChain, Conv, Op } type = Kernel;
    Function fn;
    Dim3 grid, block;
    std::vector<DevPtr> argv;
    std::vector<void*> argp;
    Gemm gemm;
    std::shared_ptr<ConvRun> conv;
    std::shared_ptr<OpRun> op;
    DevPtr src = 0, dst = 0;
    size_t bytes = 0;
    std::string what;
  };
  std::unique_ptr<CudnnContext> dnn;  // opened at the first Conv
  std::string dnn_why;                // why it could not be opened
  DevPtr conv_ws = 0;                 // one workspace for every Conv (the largest need)
  std::vector<Step> steps;

  Impl(const Graph& g_, plan::Plan& p, const CudaExecOptions& o) : g(g_), plan(p), opts(o) {}

  DevPtr upload(const Tensor& t, const std::string& what) {
    Tensor c = t.contiguous();
    owned.emplace_back(std::max<size_t>(c.nbytes(), 256), what);
    copy_h2d(owned.back().ptr(), c.raw(), c.nbytes(), stream, what);
    return owned.back().ptr();
  }
  DevPtr alloc(size_t bytes, const std::string& what) {
    owned.emplace_back(std::max<size_t>(bytes, 256), what);
    return owned.back().ptr();
  }

  // Why a Library kernel cannot run on cuBLASLt here ("" when it can); fills `gm` otherwise.
  std::string gemm_plan(const plan::Kernel& k, Gemm* gm, bool* trans_b, int* vbias) {
    const Node& n = g.nodes[size_t(k.nodes[0])];
    if (n.op != "MatMul" && n.op != "Gemm") return n.op + " has no CUDA library path";
    int va = n.inputs[0], vb = n.inputs[1], vo = k.outputs.at(0);
    DType dt = g.value(va).dtype;
    if (g.value(vb).dtype != dt || g.value(vo).dtype != dt ||
        (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16))
      return "GEMM operand types are not all float32, bfloat16 or float16";
    const Shape &as = g.value(va).shape, &bs = g.value(vb).shape;
    *vbias = k.bias;
    *trans_b = false;
    if (n.op == "Gemm") {
      if (n.attr_int("transA", 0)) return "Gemm transA=1";
      *trans_b = n.attr_int("transB", 0) != 0;
      if (*trans_b && !g.value(vb).constant.defined()) return "Gemm transB=1 on a non-constant B";
      if (n.attr_float("alpha", 1.0f) != 1.0f) return "Gemm alpha != 1";
      if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
        const Value& cv = g.value(n.inputs[2]);
        int64_t N = *trans_b ? bs[0] : bs[1];
        if (n.attr_float("beta", 1.0f) != 1.0f || shape_numel(cv.shape) != N ||
            !cv.constant.defined())
          return "Gemm C is not a constant bias row";
        *vbias = n.inputs[2];
      }
    }
    if (as.size() < 2 || bs.size() < 2) return "MatMul on vectors";
    int64_t K = as.back();
    if (bs.size() == 2) {
      gm->shape = {shape_numel(as) / K, *trans_b ? bs[0] : bs[1], K, 1};
    } else if (as.size() == bs.size() && std::equal(as.begin(), as.end() - 2, bs.begin())) {
      gm->shape = {as[as.size() - 2], bs.back(), K, shape_numel(as) / (as[as.size() - 2] * K)};
    } else {
      return "batched MatMul with broadcast batch dims";
    }
    gm->data = dt;
    if (dt == DType::bf16) gm->prec = GemmPrecision::kBf16;
    else if (dt == DType::f16) gm->prec = GemmPrecision::kFp16;
    else if (opts.precision == "tf32") gm->prec = GemmPrecision::kTf32;
    else if (opts.precision == "bf16") gm->prec = GemmPrecision::kBf16;
    else if (opts.precision == "fp16") gm->prec = GemmPrecision::kFp16;
    else gm->prec = GemmPrecision::kFp32;
    bool has_bias = *vbias >= 0;
    if (k.activation == "relu") gm->epi = GemmEpilogue::kReluBias;
    else if (k.activation == "gelu_tanh") gm->epi = GemmEpilogue::kGeluBias;
    else if (k.activation == "gelu_erf" || k.activation.empty())
      gm->epi = has_bias ? GemmEpilogue::kBias : GemmEpilogue::kNone;
    else if ((k.activation == "hardswish" || k.activation == "hardsigmoid" || k.activation == "clip") &&
             dt == DType::f32) {
      gm->epi = has_bias ? GemmEpilogue::kBias : GemmEpilogue::kNone;
      gm->post_act = k.activation == "hardswish" ? 2 : k.activation == "hardsigmoid" ? 3 : 4;
      gm->post_alpha = k.act_alpha;
      gm->post_beta = k.act_beta;
    } else {
      return "activation " + k.activation;
    }
    gm->gelu_erf = k.activation == "gelu_erf";
    return "";
  }

  struct ChainRun {
    int first = 0, last = 0;
    std::string symbol;
    GemmChainSpec spec;
  };
  std::vector<ChainRun> chains;

  // Runs of two or more float32 GEMMs at batch <= 8 where each reads the previous one's output
  // and multiplies by constant weights become one cluster kernel; returns their source.
  std::string find_gemm_chains(const std::vector<Gemm>& gemms) {
    if (env::flag("BRRR_DISABLE_GEMM_CHAIN")) return "";
    if (dev.info().cc_major < 9) return "";  // thread-block clusters start with Hopper
    const int nk = int(plan.kernels.size());
    auto layer_ok = [&](int i) {
      const Gemm& gm = gemms[size_t(i)];
      const Node& n = g.nodes[size_t(plan.kernels[size_t(i)].nodes[0])];
      return steps[size_t(i)].type == Step::Library && gm.data == DType::f32 &&
             gm.prec == GemmPrecision::kFp32 && gm.shape.batch == 1 && !gm.gelu_erf && !gm.post_act &&
             g.value(n.inputs[1]).constant.defined() && !g.value(n.inputs[0]).constant.defined();
    };
    auto input_of = [&](int i) { return g.nodes[size_t(plan.kernels[size_t(i)].nodes[0])].inputs[0]; };
    std::string text;
    for (int i = 0; i < nk;) {
      int j = i;
      while (layer_ok(i) && j + 1 < nk && layer_ok(j + 1) && input_of(j + 1) == plan.kernels[size_t(j)].outputs.at(0) &&
             gemms[size_t(j + 1)].shape.m == gemms[size_t(i)].shape.m)
        ++j;
      if (j > i) {
        GemmChainSpec spec;
        spec.m = gemms[size_t(i)].shape.m;
        for (int q = i; q <= j; ++q) {
          const Gemm& gm = gemms[size_t(q)];
          ChainLayer l;
          l.k = gm.shape.k;
          l.n = gm.shape.n;
          l.bias = gm.epi != GemmEpilogue::kNone;
          l.act = gm.epi == GemmEpilogue::kReluBias ? "relu" : gm.epi == GemmEpilogue::kGeluBias ? "gelu_tanh" : "";
          // An intermediate only the next layer reads stays in the cluster's shared memory.
          int y = plan.kernels[size_t(q)].outputs.at(0);
          l.store = q == j || std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end();
          for (int r = 0; r < nk && !l.store; ++r)
            if (r != q + 1)
              for (int v : plan.kernels[size_t(r)].inputs) l.store = l.store || v == y;
          spec.layers.push_back(l);
        }
        spec = gemm_chain_choose(spec);
        if (gemm_chain_unsupported(spec).empty()) {
          ChainRun c{i, j, fmt::format("brrr_chain{}", chains.size()), spec};
          text += gemm_chain_source(c.symbol, spec);
          steps[size_t(i)].type = Step::Chain;
          for (int q = i + 1; q <= j; ++q) steps[size_t(q)].type = Step::InChain;
          chains.push_back(c);
        }
      }
      i = j + 1;
    }
    return text;
  }

  // The cuDNN handle, opened at the first Conv or pool; false (dnn_why says why) when it cannot.
  bool open_dnn() {
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

  static bool is_op(const std::string& op) {
    return op == "MaxPool" || op == "AveragePool" || op == "Concat" ||
           op == "GlobalAveragePool" || op == "ReduceMean" || op == "ReduceSum" || op == "Mul";
  }

  // Why brrr's pool kernel cannot run MaxPool / AveragePool node n ("" when it can); fills the
  // kernel's geometry in `r`.
  std::string pool_kernel_plan(const Node& n, OpRun* r) {
    if (n.op == "MaxPool" && n.outputs.size() > 1 && n.outputs[1] >= 0)
      return "MaxPool's Indices output is used (the pool kernel has none)";
    const Value &xv = g.value(n.inputs.at(0)), &yv = g.value(n.outputs.at(0));
    if (xv.dtype != yv.dtype || !(xv.dtype == DType::f32 || xv.dtype == DType::bf16 || xv.dtype == DType::f16))
      return fmt::format("the pool kernel takes float32, bfloat16 or float16, not {}", dtype_name(xv.dtype));
    const Shape &xs = xv.shape, &ys = yv.shape;
    if (xs.size() < 3 || xs.size() > 5 || ys.size() != xs.size())
      return fmt::format("the pool kernel takes 1-D to 3-D pools, not {} to {}", shape_str(xs), shape_str(ys));
    ops::Window w;
    try {
      w = ops::forward_window(n, {xs.begin() + 2, xs.end()}, n.attr_ints("kernel_shape", {}),
                              n.attr_int("ceil_mode", 0) != 0);
    } catch (const Error& e) {
      return n.op + " window: " + e.what();
    }
    for (size_t i = 0; i < w.out.size(); ++i)
      if (w.out[i] != ys[2 + i]) return n.op + " output shape disagrees with its window";
    const ops::Window w3 = w.as3d();
    auto& p = r->pg;
    for (int a = 0; a < 3; ++a) {
      p.in[a] = w3.in[size_t(a)], p.k[a] = w3.k[size_t(a)], p.s[a] = w3.s[size_t(a)];
      p.d[a] = w3.d[size_t(a)], p.pb[a] = w3.pb[size_t(a)], p.pe[a] = w3.pe[size_t(a)];
      p.out[a] = w3.out[size_t(a)];
    }
    r->kind = OpRun::PoolKernel;
    r->dt = xv.dtype;
    r->is_max = n.op == "MaxPool";
    r->include_pad = n.op == "AveragePool" && n.attr_int("count_include_pad", 0) != 0;
    r->n = shape_numel(ys);
    return "";
  }

  // Why a pool, Concat, trailing mean / sum or channel-scale Mul library kernel has no device
  // path here ("" when it has one); fills `r` otherwise (a pool's cuDNN descriptors included).
  std::string op_plan(const plan::Kernel& k, OpRun* r) {
    const Node& n = g.nodes[size_t(k.nodes[0])];
    if (k.nodes.size() != 1 || k.outputs.size() != 1 || n.outputs.empty() ||
        k.outputs[0] != n.outputs[0])
      return n.op + " library kernel with an epilogue or several outputs";
    const int vy = n.outputs[0];
    const Value& yv = g.value(vy);
    r->vy = vy;
    r->who = fmt::format("{} ({} {})", k.name, n.op, n.name);
    if (n.op == "MaxPool" || n.op == "AveragePool") {
      r->kind = OpRun::Pool;
      r->vx = n.inputs.at(0);
      std::string why = pool_geometry(n, g, &r->geo);
      if (why.empty() && open_dnn()) {
        try {
          r->pool = std::make_unique<CudnnPool>(*dnn, r->geo, r->who);
          r->desc = "cuDNN pool " + r->pool->describe();
          return "";
        } catch (const Error& e) {
          why = e.what();
        }
      } else if (why.empty()) {
        why = dnn_why;
      }
      // What cuDNN cannot do, brrr's pool kernel does.
      if (std::string no = pool_kernel_plan(n, r); !no.empty()) return why + "; " + no;
      r->desc = fmt::format("pool kernel, not cuDNN: {}", why);
      return "";
    }
    if (n.op == "Concat") {
      r->kind = OpRun::Concat;
      const int64_t rank = int64_t(yv.shape.size());
      int64_t axis = n.attr_int("axis", 0);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank)
        return fmt::format("Concat axis out of range for {}", shape_str(yv.shape));
      const size_t es = dtype_size(yv.dtype);
      for (int64_t i = 0; i < axis; ++i) r->outer *= size_t(yv.shape[size_t(i)]);
      if (shape_numel(yv.shape) == 0) return "Concat with an empty output";
      r->out_row = size_t(shape_numel(yv.shape)) / r->outer * es;
      size_t total = 0;
      for (int v : n.inputs) {
        if (v < 0) return "Concat with a missing input";
        const Value& iv = g.value(v);
        if (iv.dtype != yv.dtype || iv.shape.size() != yv.shape.size())
          return fmt::format("Concat input {} ({} {}) does not match the output ({} {})", iv.name,
                             dtype_name(iv.dtype), shape_str(iv.shape), dtype_name(yv.dtype),
                             shape_str(yv.shape));
        if (shape_numel(iv.shape) == 0) continue;
        r->parts.push_back(v);
        r->part_bytes.push_back(size_t(shape_numel(iv.shape)) / r->outer * es);
        total += r->part_bytes.back();
      }
      if (total != r->out_row) return "Concat inputs do not add up to the output";
      // cuMemcpy2D pitches are limited to the device's maximum pitch (2^31 - 1 bytes).
      if (r->outer > 1 && r->out_row > size_t(INT32_MAX))
        return "Concat rows of 2^31 bytes or more (beyond cuMemcpy2D's pitch)";
      r->desc = r->outer == 1 ? fmt::format("concat: {} device copies", r->parts.size())
                              : fmt::format("concat: {} 2-D copies ({} rows of {} B)",
                                            r->parts.size(), r->outer, r->out_row);
      return "";
    }
    if (n.op == "GlobalAveragePool" || n.op == "ReduceMean" || n.op == "ReduceSum") {
      r->kind = OpRun::RowMean;
      r->vx = n.inputs.at(0);
      const Value& xv = g.value(r->vx);
      if (xv.dtype != DType::f32 || yv.dtype != DType::f32)
        return fmt::format("{} on {} (the row-mean kernel is float32 only)", n.op,
                           dtype_name(xv.dtype));
      int64_t numel = shape_numel(xv.shape);
      r->rows = shape_numel(yv.shape);
      if (r->rows <= 0 || numel <= 0 || numel % r->rows)
        return fmt::format("{} from {} to {} is not a reduction over trailing axes", n.op,
                           shape_str(xv.shape), shape_str(yv.shape));
      if (n.op == "GlobalAveragePool" && xv.shape.size() < 3)
        return "GlobalAveragePool on an input without spatial dims";
      r->cols = numel / r->rows;
      r->scale = n.op == "ReduceSum" ? 1.f : 1.f / float(r->cols);
      r->desc = fmt::format("row {} kernel: {} rows of {}", n.op == "ReduceSum" ? "sum" : "mean",
                            r->rows, r->cols);
      return "";
    }
    if (n.op == "Mul" && n.inputs.size() == 2 && n.inputs[0] >= 0 && n.inputs[1] >= 0) {
      r->kind = OpRun::ChannelScale;
      int a = n.inputs[0], b = n.inputs[1];
      if (g.value(a).shape != yv.shape) std::swap(a, b);
      const Shape& xs = g.value(a).shape;
      if (xs != yv.shape || xs.size() != 4 || g.value(b).shape != Shape{xs[0], xs[1], 1, 1} ||
          g.value(a).dtype != DType::f32 || g.value(b).dtype != DType::f32 ||
          yv.dtype != DType::f32)
        return "Mul is not a float32 channel scale x[N,C,H,W] * s[N,C,1,1]";
      r->vx = a, r->vs = b;
      r->hw = xs[2] * xs[3];
      r->n = shape_numel(xs);
      if (r->n == 0) return "channel scale on an empty tensor";
      r->desc = fmt::format("channel scale kernel: {} rows of {}", xs[0] * xs[1], r->hw);
      return "";
    }
    return n.op + " has no CUDA library path";
  }

  // Why a Gather has no device path here ("" when it has one): any element type of 1, 2, 4 or 8
  // bytes, int64 or int32 indices, static shapes.
  std::string gather_plan(const plan::Kernel& k, OpRun* r) {
    const Node& n = g.nodes[size_t(k.nodes[0])];
    if (n.inputs.size() != 2 || n.inputs[0] < 0 || n.inputs[1] < 0) return "Gather without data or indices";
    const Value &xv = g.value(n.inputs[0]), &iv = g.value(n.inputs[1]), &yv = g.value(n.outputs.at(0));
    if (iv.dtype != DType::i64 && iv.dtype != DType::i32)
      return fmt::format("Gather indices are {} (int64 or int32 on the GPU)", dtype_name(iv.dtype));
    const int64_t rank = int64_t(xv.shape.size());
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (rank == 0 || axis < 0 || axis >= rank) return "Gather axis out of range";
    size_t es = dtype_size(xv.dtype);
    int64_t outer = 1, inner = int64_t(es);
    for (int64_t d = 0; d < axis; ++d) outer *= xv.shape[size_t(d)];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= xv.shape[size_t(d)];
    r->kind = OpRun::Gather;
    r->vx = n.inputs[0], r->vs = n.inputs[1], r->vy = n.outputs[0];
    r->unit = inner % 16 == 0 ? 16 : inner % 4 == 0 ? 4 : 1;
    r->idx64 = iv.dtype == DType::i64;
    r->rows = shape_numel(iv.shape);
    r->cols = xv.shape[size_t(axis)];
    r->hw = inner / r->unit;
    r->n = outer * r->rows * r->hw;
    if (shape_numel(yv.shape) * int64_t(es) != r->n * r->unit) return "Gather output size does not match";
    r->who = fmt::format("{} (Gather {})", k.name, n.name);
    r->desc = fmt::format("gather kernel: {} slices of {} B", outer * r->rows, inner);
    return "";
  }

  // Why a Conv kernel cannot run on cuDNN here ("" when it can); fills `cr` otherwise (the cuDNN
  // descriptors and algorithm included, so cuDNN's own refusals fall back to the host too).
  std::string conv_plan(const plan::Kernel& k, ConvRun* cr) {
    const Node& n = g.nodes[size_t(k.nodes[0])];
    if (n.inputs.size() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0) return "Conv without X or W";
    int vx = n.inputs[0], vw = n.inputs[1], vc = n.outputs.at(0), vo = k.outputs.at(0);
    int vb = n.inputs.size() > 2 ? n.inputs[2] : -1;
    if (k.bias >= 0) {
      if (vb >= 0) return "Conv with its own bias and a fused one";
      vb = k.bias;
    }
    for (int v : {vx, vw, vc, vo, vb, k.sum})
      if (v >= 0 && g.value(v).dtype != DType::f32)
        return fmt::format("{} is {} (the cuDNN Conv path is float32 only)", g.value(v).name,
                           dtype_name(g.value(v).dtype));
    const Shape &xs = g.value(vx).shape, &ws = g.value(vw).shape, &ys = g.value(vc).shape;
    if (g.value(vo).shape != ys || (k.sum >= 0 && g.value(k.sum).shape != ys))
      return "Conv epilogue changes the shape";
    if (vb >= 0 && (ws.empty() || shape_numel(g.value(vb).shape) != ws[0]))
      return fmt::format("bias {} is not one value per output channel", shape_str(g.value(vb).shape));
    static const std::map<std::string, int> kActs = {
        {"", 0}, {"relu", 1}, {"hardswish", 2}, {"hardsigmoid", 3}, {"clip", 4}};
    auto act = kActs.find(k.activation);
    if (act == kActs.end()) return "activation " + k.activation + " after Conv";
    if (std::string why = conv_geometry(n, xs, ws, ys, &cr->geo); !why.empty()) return why;
    cr->vx = vx, cr->vw = vw, cr->vy = vo, cr->vbias = vb, cr->vsum = k.sum;
    cr->act = act->second;
    cr->alpha = k.act_alpha, cr->beta = k.act_beta;
    cr->c = ys[1];
    cr->hw = shape_numel(ys) / (ys[0] * ys[1]);
    cr->n = shape_numel(ys);
    cr->epilogue = vb >= 0 || k.sum >= 0 || cr->act != 0;
    // fp32: true float32 (FMA). tf32: Tensor Cores on float32 data. bf16 / fp16 also map to
    // tf32: the graph's data stays float32, and cuDNN's down-conversion math
    // (TENSOR_OP_MATH_ALLOW_CONVERSION) goes through fp16, which can overflow float32 activations.
    cr->math = opts.precision == "fp32" || opts.precision.empty() ? ConvMath::kFp32 : ConvMath::kTf32;
    if (!open_dnn()) return dnn_why;
    const std::string who = fmt::format("{} (Conv {})", k.name, n.name);
    try {
      cr->dnn = std::make_unique<CudnnConv>(*dnn, cr->geo, cr->math, kMaxConvWorkspace, who);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  void build() {
    const int nk = int(plan.kernels.size());
    steps.resize(size_t(nk));
    std::vector<Gemm> gemms(static_cast<size_t>(nk));
    std::vector<bool> trans(static_cast<size_t>(nk), false);
    std::vector<int> biasv(size_t(nk), -1);
    // Decide library support first: kernels run on the host store every node output.
    for (int i = 0; i < nk; ++i) {
      plan::Kernel& k = plan.kernels[size_t(i)];
      steps[size_t(i)].what = fmt::format("{} ({})", k.name, g.nodes[size_t(k.nodes[0])].op);
      std::string why;
      if (k.kind == KernelKind::Library) {
        bool tb = false;
        int vb = -1;
        why = gemm_plan(k, &gemms[size_t(i)], &tb, &vb);
        trans[size_t(i)] = tb;
        biasv[size_t(i)] = vb;
        if (why.empty()) {
          steps[size_t(i)].type = Step::Library;
          continue;
        }
        if (g.nodes[size_t(k.nodes[0])].op == "Conv") {
          auto cr = std::make_shared<ConvRun>();
          why = conv_plan(k, cr.get());
          if (why.empty()) {
            steps[size_t(i)].type = Step::Conv;
            steps[size_t(i)].conv = std::move(cr);
            continue;
          }
        } else if (is_op(g.nodes[size_t(k.nodes[0])].op)) {
          auto r = std::make_shared<OpRun>();
          why = op_plan(k, r.get());
          if (why.empty()) {
            steps[size_t(i)].type = Step::Op;
            steps[size_t(i)].op = std::move(r);
            continue;
          }
        }
      } else if (k.kind == KernelKind::Reference && k.nodes.size() == 1 &&
                 g.nodes[size_t(k.nodes[0])].op == "Gather") {
        auto r = std::make_shared<OpRun>();
        why = gather_plan(k, r.get());
        if (why.empty()) {
          steps[size_t(i)].type = Step::Op;
          steps[size_t(i)].op = std::move(r);
          continue;
        }
      } else if (k.kind == KernelKind::Reference) {
        why = "no generated or library kernel for this op";
      } else {
        steps[size_t(i)].type = k.kind == KernelKind::Fused ? Step::Kernel : Step::Copy;
        continue;
      }
      steps[size_t(i)].type = Step::Host;
      std::string ops;
      for (int n : k.nodes) ops += (ops.empty() ? "" : " ") + g.nodes[size_t(n)].name + ":" + g.nodes[size_t(n)].op;
      host_notes.push_back(fmt::format("{} [{}] runs on the host (reference kernel, device<->host "
                                       "copies): {}", k.name, ops, why));
      k.kind = KernelKind::Reference;
      k.outputs.clear();
      for (int n : k.nodes)
        for (int o : g.nodes[size_t(n)].outputs)
          if (o >= 0) k.outputs.push_back(o);
    }
    for (const auto& note : host_notes) std::fprintf(stderr, "brrr cuda: %s\n", note.c_str());
    std::string chain_src = find_gemm_chains(gemms);

    // Memory: graph inputs and outputs own buffers; intermediates share the arena.
    slot.assign(g.values.size(), 0);
    std::vector<bool> is_out(g.values.size(), false);
    for (int o : g.outputs) is_out[size_t(o)] = true;
    for (int id : g.inputs) slot[size_t(id)] = alloc(value_bytes(g.value(id)), "input " + g.value(id).name);
    for (int o : g.outputs)
      if (g.value(o).producer >= 0 && !slot[size_t(o)])
        slot[size_t(o)] = alloc(value_bytes(g.value(o)), "output " + g.value(o).name);
    std::vector<BufferRequest> reqs;
    std::vector<int> req_value;
    std::vector<int> last_use(g.values.size(), -1);
    for (int i = 0; i < nk; ++i)
      for (int v : plan.kernels[size_t(i)].inputs) last_use[size_t(v)] = i;
    for (int i = 0; i < nk; ++i)
      for (int v : plan.kernels[size_t(i)].outputs) {
        if (is_out[size_t(v)] || slot[size_t(v)]) continue;
        reqs.push_back({Arena::align(value_bytes(g.value(v))), i, std::max(i, last_use[size_t(v)])});
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
        if (g.value(v).constant.defined() && !slot[size_t(v)])
          slot[size_t(v)] = upload(g.value(v).constant, "constant " + g.value(v).name);
    }

    // One NVRTC module: every fused kernel plus the helpers.
    DeviceInfo info = dev.info();
    CudaCodegenOptions co;
    co.sm_count = info.sm_count;
    src = generate_cuda(g, plan, co);
    src.text += chain_src;
    NvrtcCompiler nv(info.arch(),
                     opts.cache_dir.empty() ? default_cuda_cache_dir() : opts.cache_dir + "/cuda",
                     opts.dump_dir);
    CompiledKernel ck = nv.compile(src.text, "brrr_model");
    compile_ms = ck.compile_ms;
    from_cache = ck.from_cache;
    module = std::make_unique<Module>(ck.cubin, "model module");
    size_t ws_bytes = 0;
    for (const Step& s : steps)
      if (s.type == Step::Conv) ws_bytes = std::max(ws_bytes, s.conv->dnn->workspace_bytes());
    if (ws_bytes) conv_ws = alloc(ws_bytes, "cuDNN workspace");

    for (int i = 0; i < nk; ++i) {
      Step& s = steps[size_t(i)];
      const plan::Kernel& k = plan.kernels[size_t(i)];
      if (s.type == Step::Kernel) {
        const CudaLaunch& L = src.launches[size_t(i)];
        s.fn = module->function(L.symbol);
        s.grid = L.grid;
        s.block = L.block;
        for (int v : L.args) {
          BRRR_ASSERT(slot[size_t(v)] != 0, "kernel argument without a device buffer");
          s.argv.push_back(slot[size_t(v)]);
        }
      } else if (s.type == Step::Copy) {
        s.src = slot[size_t(k.inputs.at(0))];
        s.dst = slot[size_t(k.outputs.at(0))];
        s.bytes = value_bytes(g.value(k.outputs.at(0)));
      } else if (s.type == Step::Library || s.type == Step::Chain || s.type == Step::InChain) {
        setup_gemm(k, gemms[size_t(i)], trans[size_t(i)], biasv[size_t(i)], &s);
      } else if (s.type == Step::Conv) {
        setup_conv(*s.conv);
      } else if (s.type == Step::Op) {
        setup_op(*s.op);
      }
    }
    for (const ChainRun& c : chains) {  // arguments: x, then packed W, bias, y per layer
      Step& s = steps[size_t(c.first)];
      s.fn = module->function(c.symbol);
      s.grid = {unsigned(c.spec.ctas), 1, 1};
      if (c.spec.ctas > 8) s.fn.allow_large_clusters();
      s.block = {unsigned(gemm_chain_threads(c.spec)), 1, 1};
      s.argv.push_back(steps[size_t(c.first)].gemm.a);
      for (int j = c.first; j <= c.last; ++j) {
        const plan::Kernel& k = plan.kernels[size_t(j)];
        const Node& n = g.nodes[size_t(k.nodes[0])];
        Tensor w = host_cast(g.value(n.inputs[1]).constant, DType::f32, trans[size_t(j)]);
        std::vector<float> packed = gemm_chain_pack(c.spec, size_t(j - c.first), w.data<float>());
        Tensor pt = Tensor::empty(DType::f32, {int64_t(packed.size())});
        std::copy(packed.begin(), packed.end(), pt.data<float>());
        const Gemm& gm = steps[size_t(j)].gemm;
        s.argv.insert(s.argv.end(), {upload(pt, k.name + " W (chain layout)"), gm.bias, gm.c});
      }
    }
    for (Step& s : steps)
      for (DevPtr& p : s.argv) s.argp.push_back(&p);
    stream.synchronize("uploading weights");

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
  }

  void setup_gemm(const plan::Kernel& k, Gemm gm, bool trans_b, int vbias, Step* s) {
    const Node& n = g.nodes[size_t(k.nodes[0])];
    int va = n.inputs[0], vb = n.inputs[1], vo = k.outputs.at(0);
    DType et = gm.prec == GemmPrecision::kBf16 ? DType::bf16
               : gm.prec == GemmPrecision::kFp16 ? DType::f16 : DType::f32;
    bool cast = et != gm.data;  // float32 graph, 16-bit GEMM
    gm.na = shape_numel(g.value(va).shape);
    gm.nb = shape_numel(g.value(vb).shape);
    gm.nc = shape_numel(g.value(vo).shape);
    const std::string who = n.name.empty() ? k.name : n.name;
    // A: activations (cast per run when needed); constants are cast once here.
    if (g.value(va).constant.defined()) gm.a = upload(host_cast(g.value(va).constant, et, false), who + " A");
    else if (cast) { gm.a_src = slot[size_t(va)]; gm.a = alloc(size_t(gm.na) * 2, who + " A cast"); }
    else gm.a = slot[size_t(va)];
    if (g.value(vb).constant.defined()) gm.b = upload(host_cast(g.value(vb).constant, et, trans_b), who + " W");
    else if (cast) { gm.b_src = slot[size_t(vb)]; gm.b = alloc(size_t(gm.nb) * 2, who + " B cast"); }
    else gm.b = slot[size_t(vb)];
    if (cast) { gm.c_dst = slot[size_t(vo)]; gm.c = alloc(size_t(gm.nc) * 2, who + " C cast"); }
    else gm.c = slot[size_t(vo)];
    if (gm.epi != GemmEpilogue::kNone) {
      if (vbias >= 0) gm.bias = upload(host_cast(g.value(vbias).constant, et, false), who + " bias");
      else gm.bias = upload(Tensor::zeros(et, {gm.shape.n}), who + " zero bias");
    }
    if (gm.post_act) gm.post_fn = module->function("brrr_conv_epilogue");
    const char* t16 = et == DType::bf16 ? "bf16" : "f16";
    if (cast) {
      gm.cvt_in = module->function(fmt::format("brrr_cvt_f32_{}", t16));
      gm.cvt_out = module->function(fmt::format("brrr_cvt_{}_f32", t16));
    }
    if (gm.gelu_erf) {
      // In place on the graph's C (after the cast back, when there is one).
      DType gt = gm.data;
      gm.gelu_fn = module->function(fmt::format(
          "brrr_gelu_erf_{}", gt == DType::bf16 ? "bf16" : gt == DType::f16 ? "f16" : "f32"));
    }
    s->gemm = gm;
  }

  void setup_conv(ConvRun& c) {
    auto at = [&](int v) -> DevPtr {
      if (v < 0) return 0;
      BRRR_ASSERT(slot[size_t(v)] != 0, "Conv operand without a device buffer");
      return slot[size_t(v)];
    };
    c.x = at(c.vx), c.w = at(c.vw), c.y = at(c.vy), c.bias = at(c.vbias), c.sum = at(c.vsum);
    // The residual is read after cuDNN wrote y: it must not share y's bytes (the memory planner
    // keeps a kernel's inputs and outputs apart; a graph input or output has its own buffer).
    BRRR_ASSERT(c.sum == 0 || c.sum != c.y, "Conv residual aliases the Conv output");
    if (!c.epilogue) return;
    c.fn = module->function("brrr_conv_epilogue");
    c.grid = helper_grid(c.n, 256);
    c.block = {256, 1, 1};
    c.argp = {&c.y, &c.bias, &c.sum, &c.hw, &c.c, &c.act, &c.alpha, &c.beta, &c.n};
  }

  void setup_op(OpRun& r) {
    auto at = [&](int v) -> DevPtr {
      if (v < 0) return 0;
      BRRR_ASSERT(slot[size_t(v)] != 0, "library kernel operand without a device buffer");
      return slot[size_t(v)];
    };
    r.x = at(r.vx), r.sc = at(r.vs), r.y = at(r.vy);
    switch (r.kind) {
      case OpRun::Pool: return;
      case OpRun::PoolKernel:
        r.fn = module->function(fmt::format(
            "brrr_pool_{}", r.dt == DType::bf16 ? "bf16" : r.dt == DType::f16 ? "f16" : "f32"));
        r.block = {256, 1, 1};
        r.grid = helper_grid(r.n, 256);
        r.argp = {&r.x, &r.y, &r.pg, &r.is_max, &r.include_pad, &r.n};
        return;
      case OpRun::Concat: {
        size_t off = 0;
        for (size_t q = 0; q < r.parts.size(); ++q) {
          r.copies.push_back({at(r.parts[q]), r.y + off, r.part_bytes[q]});
          off += r.part_bytes[q];
        }
        return;
      }
      case OpRun::RowMean:
        r.fn = module->function("brrr_row_mean");
        r.block = {256, 1, 1};
        r.grid = helper_grid(r.rows, 256 / 32);
        r.argp = {&r.x, &r.y, &r.rows, &r.cols, &r.scale};
        return;
      case OpRun::ChannelScale:
        r.fn = module->function("brrr_channel_scale");
        r.block = {256, 1, 1};
        r.grid = helper_grid(r.n, 256);
        r.argp = {&r.x, &r.sc, &r.y, &r.hw, &r.n};
        return;
      case OpRun::Gather:
        if (!gather_err) {
          gather_err = alloc(sizeof(int), "Gather index error flag");
          int zero = 0;
          copy_h2d(gather_err, &zero, sizeof zero, stream, "Gather index error flag");
        }
        r.err = gather_err;
        r.fn = module->function(fmt::format("brrr_gather_u{}", r.unit));
        r.block = {256, 1, 1};
        r.grid = helper_grid(r.n, 256);
        r.argp = {&r.x, &r.sc, &r.y, &r.rows, &r.cols, &r.hw, &r.idx64, &r.err, &r.n};
        gathers.push_back(r.who);
        return;
    }
  }

  // Raised by a Gather kernel on an index out of range. Each run copies it back with its outputs
  // (same sync); check_gather_indices() then reports it with the Gathers' names and clears it.
  DevPtr gather_err = 0;
  int gather_flag = 0;
  std::vector<std::string> gathers;
  void fetch_gather_flag() {
    if (gather_err) copy_d2h(&gather_flag, gather_err, sizeof gather_flag, stream, "Gather index error flag");
  }
  void check_gather_indices() {
    if (!gather_err || !gather_flag) return;
    gather_flag = 0;
    int zero = 0;
    copy_h2d(gather_err, &zero, sizeof zero, stream, "Gather index error flag");
    stream.synchronize("Gather index check");
    std::string names;
    for (const std::string& w : gathers) names += (names.empty() ? "" : ", ") + w;
    fail("Gather index out of range [-axis, axis) in {}", names);
  }

  void exec_op(OpRun& r) {
    const std::string& what = r.who;
    switch (r.kind) {
      case OpRun::Pool: r.pool->run(r.x, r.y); return;
      case OpRun::Concat:
        for (const OpRun::Copy& c : r.copies) {
          if (r.outer == 1) copy_d2d(c.dst, c.src, c.width, stream, what);
          else copy_2d_d2d(c.dst, r.out_row, c.src, c.width, c.width, r.outer, stream, what);
        }
        return;
      case OpRun::PoolKernel:
      case OpRun::RowMean:
      case OpRun::ChannelScale:
      case OpRun::Gather: launch(r.fn, r.grid, r.block, 0, stream, r.argp.data()); return;
    }
  }

  // Blocks for a grid-striding helper kernel over `items` work items, `per_block` per block.
  Dim3 helper_grid(int64_t items, int64_t per_block) const {
    int64_t b = std::min<int64_t>((items + per_block - 1) / per_block, int64_t(dev.info().sm_count) * 32);
    return Dim3{unsigned(std::max<int64_t>(b, 1)), 1, 1};
  }

  // A grid-striding helper kernel f(ptrs..., n) of 256-thread blocks.
  void launch_helper(const Function& f, std::vector<DevPtr> ptrs, int64_t n) {
    std::vector<void*> a;
    for (DevPtr& p : ptrs) a.push_back(&p);
    a.push_back(&n);
    launch(f, helper_grid(n, 256), {256, 1, 1}, 0, stream, a.data());
  }

  void exec(size_t i) {
    Step& s = steps[i];
    switch (s.type) {
      case Step::Kernel: launch(s.fn, s.grid, s.block, 0, stream, s.argp.data()); return;
      case Step::Copy:
        if (s.bytes && s.src != s.dst) copy_d2d(s.dst, s.src, s.bytes, stream, s.what);
        return;
      case Step::Library: {
        Gemm& m = s.gemm;
        if (m.a_src) launch_helper(m.cvt_in, {m.a_src, m.a}, m.na);
        if (m.b_src) launch_helper(m.cvt_in, {m.b_src, m.b}, m.nb);
        lt.run(m.prec, m.epi, m.shape, m.a, m.b, m.c, m.bias, stream, s.what);
        if (m.c_dst) launch_helper(m.cvt_out, {m.c, m.c_dst}, m.nc);
        if (m.gelu_erf) launch_helper(m.gelu_fn, {m.c_dst ? m.c_dst : m.c}, m.nc);
        if (m.post_act) {  // brrr_conv_epilogue(y, bias, sum, hw, c, act, alpha, beta, n)
          DevPtr y = m.c_dst ? m.c_dst : m.c, none = 0;
          int64_t one = 1, n = m.nc;
          void* a[] = {&y, &none, &none, &one, &one, &m.post_act, &m.post_alpha, &m.post_beta, &n};
          launch(m.post_fn, helper_grid(n, 256), {256, 1, 1}, 0, stream, a);
        }
        return;
      }
      case Step::Conv: {
        ConvRun& c = *s.conv;
        c.dnn->run(c.x, c.w, c.y, conv_ws);
        if (c.epilogue) launch(c.fn, c.grid, c.block, 0, stream, c.argp.data());
        return;
      }
      case Step::Op: exec_op(*s.op); return;
      case Step::Host: exec_host(i); return;
      case Step::Chain: launch(s.fn, s.grid, s.block, 0, stream, s.argp.data()); return;
      case Step::InChain: return;
    }
  }

  // The slow path: reference kernels on host copies of the device buffers.
  void exec_host(size_t i) {
    const plan::Kernel& k = plan.kernels[i];
    std::map<int, Tensor> host;
    stream.synchronize("before host kernel " + k.name);
    for (int n : k.nodes) {
      const Node& node = g.nodes[size_t(n)];
      KernelCtx ctx{node, {}, {}};
      for (int v : node.inputs) {
        if (v < 0) { ctx.inputs.push_back(Tensor()); continue; }
        auto it = host.find(v);
        if (it == host.end()) {
          Tensor t = Tensor::empty(g.value(v).dtype, g.value(v).shape);
          if (g.value(v).constant.defined()) t = g.value(v).constant.contiguous();
          else copy_d2h(t.raw(), slot[size_t(v)], t.nbytes(), stream, g.value(v).name);
          it = host.emplace(v, t).first;
        }
        ctx.inputs.push_back(it->second);
      }
      stream.synchronize("device->host copy for " + k.name);
      for (int v : node.outputs) {
        if (v < 0) { ctx.outputs.push_back(Tensor()); continue; }
        host[v] = Tensor::empty(g.value(v).dtype, g.value(v).shape);
        ctx.outputs.push_back(host[v]);
      }
      call_reference(node, ctx);
      for (int v : node.outputs)
        if (v >= 0 && slot[size_t(v)]) copy_h2d(slot[size_t(v)], host[v].raw(), host[v].nbytes(), stream, g.value(v).name);
    }
    stream.synchronize("host->device copy for " + k.name);
  }

  void exec_all(bool use_graph) {
    if (use_graph && graph) {
      graph->replay(stream);
      return;
    }
    for (size_t i = 0; i < steps.size(); ++i) exec(i);
  }

  void bind(const std::map<std::string, Tensor>& inputs) {
    for (int id : g.inputs) {
      const Value& v = g.value(id);
      const Tensor& t = g.bound_input(id, inputs);
      Tensor c = t.contiguous();
      copy_h2d(slot[size_t(id)], c.raw(), c.nbytes(), stream, "input " + v.name);
    }
  }
};

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

namespace {

// Holds the stream for `ns` nanoseconds, so the host can enqueue work behind it.
const char* kSpinSource = R"cuda(
extern "C" __global__ void brrr_spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
)cuda";

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

// Per-kernel times are GPU busy times, free of host launch gaps: a spin kernel holds the stream
// while the host enqueues a chunk of steps with an event after each, so the chunk then runs back
// to back and event differences measure kernels, not launch latency (a chunk is re-timed with a
// longer spin when the host was not done in time). The wall time is the run as the session does
// it (graph replay or eager launches); wall - busy = idle gaps, which the doctor counts as
// overhead. Start offsets: eager runs from the per-step events of the median run; graph replays
// spread the gap evenly over the nodes (no per-node timestamps without CUPTI).
RunProfile CudaExecutor::profile(const std::map<std::string, Tensor>& inputs, int reps) {
  using Clock = std::chrono::steady_clock;
  Impl& m = *impl_;
  m.dev.make_current();
  reps = std::max(reps, 1);
  m.bind(inputs);
  m.exec_all(true);  // warm-up
  m.stream.synchronize("profile warm-up");
  if (!m.spin_module) {
    NvrtcCompiler nv(m.dev.info().arch(), m.opts.cache_dir.empty()
                                              ? default_cuda_cache_dir()
                                              : m.opts.cache_dir + "/cuda",
                     m.opts.dump_dir);
    m.spin_module = std::make_unique<Module>(nv.compile(kSpinSource, "brrr_spin").cubin, "spin");
    m.spin = m.spin_module->function("brrr_spin");
  }
  using Step = Impl::Step;
  const size_t n = m.steps.size(), kChunk = 128;
  std::vector<std::unique_ptr<Event>> ev;
  for (size_t i = 0; i <= n; ++i) ev.push_back(std::make_unique<Event>());
  std::vector<std::vector<double>> times(n);
  for (size_t lo = 0; lo < n;) {
    size_t hi = lo + 1;  // a host step (synchronizes the stream) is timed alone, ungated
    const bool gated = m.steps[lo].type != Step::Host;
    if (gated)
      while (hi < n && hi - lo < kChunk && m.steps[hi].type != Step::Host) ++hi;
    double spin_us = 200 + 30.0 * double(hi - lo);
    const int attempts = 4 * reps;
    for (int got = 0, at = 0; got < reps && at < attempts; ++at) {
      if (gated) {
        unsigned long long ns = static_cast<unsigned long long>(spin_us * 1e3);
        void* args[] = {&ns};
        launch(m.spin, {1}, {1}, 0, m.stream, args);
      }
      ev[lo]->record(m.stream);
      auto t0 = Clock::now();
      for (size_t i = lo; i < hi; ++i) {
        m.exec(i);
        ev[i + 1]->record(m.stream);
      }
      double host_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      ev[hi]->synchronize();
      if (gated && host_us > 0.8 * spin_us && at + 1 < attempts) {
        spin_us *= 2;  // the GPU caught up with the host: gaps in the chunk; again, longer gate
        continue;
      }
      for (size_t i = lo; i < hi; ++i) times[i].push_back(Event::elapsed_ms(*ev[i], *ev[i + 1]));
      ++got;
    }
    lo = hi;
  }
  // Wall: the run as the session does it. Eager runs keep per-step end stamps.
  const bool graph = m.graph.has_value();
  std::vector<double> walls;
  std::vector<std::vector<double>> ends(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    ev[0]->record(m.stream);
    if (graph) {
      m.exec_all(true);
      ev[n]->record(m.stream);
    } else {
      for (size_t i = 0; i < n; ++i) {
        m.exec(i);
        ev[i + 1]->record(m.stream);
      }
    }
    ev[n]->synchronize();
    walls.push_back(Event::elapsed_ms(*ev[0], *ev[n]));
    if (!graph)
      for (size_t i = 0; i < n; ++i) ends[size_t(r)].push_back(Event::elapsed_ms(*ev[0], *ev[i + 1]));
  }
  RunProfile prof;
  prof.backend = "cuda";
  prof.wall_ms = median_of(walls);
  int med_run = 0;
  for (int r = 0; r < reps; ++r)
    if (walls[size_t(r)] == prof.wall_ms) med_run = r;
  double busy = 0;
  for (size_t i = 0; i < n; ++i) busy += median_of(times[i]);
  const double gap_per_node = n ? std::max(0.0, prof.wall_ms - busy) / double(n) : 0;
  double t = 0;
  for (size_t i = 0; i < n; ++i) {
    KernelRecord rec = runtime::kernel_record(m.g, m.plan.kernels[i]);
    rec.time_ms = median_of(times[i]);
    rec.graph_node = graph;
    if (m.steps[i].type == Step::Library) rec.precision = to_string(m.steps[i].gemm.prec);
    if (m.steps[i].type == Step::Conv) rec.precision = to_string(m.steps[i].conv->math);
    if (graph) {
      rec.start_ms = t + gap_per_node;
    } else {
      double end = ends[size_t(med_run)][i];
      rec.start_ms = std::max(t, end - rec.time_ms);
    }
    t = rec.start_ms + rec.time_ms;
    if (m.steps[i].type == Step::InChain && !prof.kernels.empty()) {
      // One launch ran the whole chain: its record covers every layer (ops, cost, tensors).
      KernelRecord& c = prof.kernels.back();
      c.name += "+" + rec.name;
      c.ops.insert(c.ops.end(), rec.ops.begin(), rec.ops.end());
      c.nodes.insert(c.nodes.end(), rec.nodes.begin(), rec.nodes.end());
      c.cost.flops += rec.cost.flops;
      c.cost.bytes += rec.cost.bytes;
      for (const auto& [fn, n] : rec.cost.special) c.cost.special[fn] += n;
      c.time_ms += rec.time_ms;
      c.reads.insert(c.reads.end(), rec.reads.begin(), rec.reads.end());
      c.writes.insert(c.writes.end(), rec.writes.begin(), rec.writes.end());
      continue;
    }
    if (m.steps[i].type == Step::Chain) rec.kind = "gemm_chain";
    prof.kernels.push_back(std::move(rec));
  }
  return prof;
}

std::vector<double> CudaExecutor::time_runs(const std::map<std::string, Tensor>& inputs, int reps,
                                            const std::function<void()>& between) {
  Impl& m = *impl_;
  m.dev.make_current();
  m.bind(inputs);
  m.exec_all(true);  // warm-up
  m.stream.synchronize("time_runs warm-up");
  Event e0, e1;
  std::vector<double> t;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    if (between) {
      between();
      m.dev.make_current();
    }
    e0.record(m.stream);
    m.exec_all(true);
    e1.record(m.stream);
    e1.synchronize();
    t.push_back(Event::elapsed_ms(e0, e1));
  }
  return t;
}

std::string CudaExecutor::summary() const {
  const Impl& m = *impl_;
  std::string s = fmt::format("cuda: {} ({}), module {} ({}), CUDA graph {}\n", m.dev.info().name,
                              m.dev.info().arch(), m.from_cache ? "from cache" : "compiled",
                              m.from_cache ? "NVRTC cache" : fmt::format("{:.0f} ms", m.compile_ms),
                              m.graph_status);
  for (size_t i = 0; i < m.steps.size(); ++i) {
    const auto& st = m.steps[i];
    if (st.type == Impl::Step::Kernel)
      s += fmt::format("  {:<24} {} grid {} block {}x{}\n", m.plan.kernels[i].name,
                       m.src.launches[i].shape, st.grid.x, st.block.x, st.block.y);
    else if (st.type == Impl::Step::Chain || st.type == Impl::Step::InChain) {
      int ctas = 0, threads = 0;
      for (const auto& c : m.chains)
        if (c.first <= int(i) && int(i) <= c.last) ctas = c.spec.ctas, threads = gemm_chain_threads(c.spec);
      s += fmt::format("  {:<24} GEMM chain{} (one cluster kernel: {} CTAs x {} threads) m{} n{} k{}{}\n",
                       m.plan.kernels[i].name, st.type == Impl::Step::Chain ? "" : " (cont.)",
                       ctas, threads, st.gemm.shape.m, st.gemm.shape.n, st.gemm.shape.k,
                       st.gemm.epi == GemmEpilogue::kReluBias ? " +bias+ReLU"
                       : st.gemm.epi == GemmEpilogue::kGeluBias ? " +bias+GELU"
                       : st.gemm.epi == GemmEpilogue::kBias ? " +bias" : "");
    }
    else if (st.type == Impl::Step::Library)
      s += fmt::format("  {:<24} cuBLASLt {} {} m{} n{} k{} batch {}{}\n", m.plan.kernels[i].name,
                       to_string(st.gemm.prec), to_string(st.gemm.epi), st.gemm.shape.m,
                       st.gemm.shape.n, st.gemm.shape.k, st.gemm.shape.batch,
                       st.gemm.gelu_erf ? " + erf GELU kernel" : st.gemm.post_act ? " + activation kernel" : "");
    else if (st.type == Impl::Step::Conv)
      s += fmt::format("  {:<24} cuDNN conv {}{}\n", m.plan.kernels[i].name,
                       st.conv->dnn->describe(),
                       st.conv->epilogue ? " + bias/sum/activation kernel" : "");
    else if (st.type == Impl::Step::Op)
      s += fmt::format("  {:<24} {}\n", m.plan.kernels[i].name, st.op->desc);
  }
  for (const auto& note : m.host_notes) s += "  host fallback: " + note + "\n";
  return s;
}

MemoryStats CudaExecutor::memory() const { return impl_->mem; }
bool CudaExecutor::graph_active() const { return impl_->graph.has_value(); }

}  // namespace brrr::cuda
