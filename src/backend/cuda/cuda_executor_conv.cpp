// Conv steps: cuDNN's convolution (float32, bfloat16 or float16 data) with the bias, residual and
// ReLU in the same cuDNN call where cuDNN takes them (cudnnConvolutionBiasActivationForward),
// else brrr_conv_epilogue in place after it (hardswish, hardsigmoid, clip, no bias, refusals).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <optional>

#include "backend/cuda/cuda_executor_impl.hpp"
#include "backend/cuda/cuda_graph.hpp"
#include "backend/cuda/gpu_probe.hpp"
#include "core/env.hpp"
#include "passes/choose_device_layouts.hpp"

namespace brrr::cuda {

namespace {

// Per-conv workspace cap: the heuristic's first algorithm within it is taken.
constexpr size_t kMaxConvWorkspace = size_t(256) << 20;

// A 16-bit 1x1 conv (stride 1, no pads, one group) with a channel count that is no multiple of 8:
// cuDNN's Tensor Core kernels want multiples of 8, cuBLASLt's GEMM does not.
// NCHW (one GEMM per image, y_n[K, HW] = w[K, C] @ x_n[C, HW]) only where every image starts
// 16-byte aligned like the first, which cuBLASLt's algorithm was chosen on.
bool pointwise_unaligned(const ConvGeometry& g) {
  if (g.dt == DType::f32 || g.groups != 1 || g.w.size() != 4 || g.w[2] != 1 || g.w[3] != 1)
    return false;
  for (size_t i = 0; i < g.pad.size(); ++i)
    if (g.pad[i] != 0 || g.stride[i] != 1) return false;
  const int64_t hw = int64_t(g.x[2]) * g.x[3];
  if (!g.nhwc && g.x[0] > 1 && (g.x[1] * hw % 8 != 0 || g.y[1] * hw % 8 != 0)) return false;
  return g.x[1] % 8 != 0 || g.y[1] % 8 != 0;
}

bool pointwise(const ConvGeometry& g) {
  if (g.w.size() != 4 || g.w[2] != 1 || g.w[3] != 1) return false;
  for (size_t i = 0; i < g.pad.size(); ++i)
    if (g.pad[i] != 0 || g.stride[i] != 1) return false;
  return true;
}

// The im2col scratch above which a conv is not tried as a GEMM (ResNet-50's stem at batch 1:
// 9.8 MB; at batch 64, 630 MB).
constexpr size_t kMaxIm2col = size_t(64) << 20;

// Bytes of brrr_im2col_nhwc_u2's output for a conv: 0 for a plain 1x1.
size_t im2col_bytes(const ConvGeometry& g) {
  if (pointwise(g)) return 0;
  return size_t(g.y[0]) * g.y[2] * g.y[3] * g.w[2] * g.w[3] * g.x[1] * 2;
}

// A conv that BRRR_CONV_GEMM=2 times as a GEMM against cuDNN (ConvStep::candidate).
bool gemm_candidate(const ConvGeometry& g) {
  return g.nhwc && g.dt != DType::f32 && g.groups == 1 && g.w.size() == 4 && g.x[1] % 8 == 0 &&
         g.y[1] % 8 == 0 && im2col_bytes(g) <= kMaxIm2col;
}

}  // namespace

// cuDNN's conv for plan kernel k (descriptors, output check, the heuristic's algorithm); throws
// brrr::Error naming the kernel and its node on a refusal.
std::unique_ptr<CudnnConv> CudaExecutor::Impl::make_conv(const plan::Kernel& k,
                                                         const ConvGeometry& geo, ConvMath m) {
  const std::string who = fmt::format("{} (Conv {})", k.name, g.nodes[size_t(k.nodes[0])].name);
  return std::make_unique<CudnnConv>(*dnn, geo, m, kMaxConvWorkspace, who);
}

// Why a Conv kernel cannot run on cuDNN here ("" when it can); fills `cr` otherwise (the cuDNN
// descriptors and algorithm included, so cuDNN's own refusals fall back to the host too).
std::string CudaExecutor::Impl::conv_plan(const plan::Kernel& k, ConvStep* cr) {
  const plan::ConvDesc* d = plan::desc_of<plan::ConvDesc>(k);
  if (!d) return "Conv without a library descriptor";
  if (d->x < 0 || d->w < 0) return d->why;
  const int vx = d->x, vw = d->w, vc = d->y, vo = d->out, vb = d->epi.bias, vs = d->epi.sum;
  // One dtype throughout: float32, or 16-bit data with float32 accumulation.
  const DType dt = g.value(vx).dtype;
  if (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16)
    return fmt::format("Conv on {} (cuDNN's path takes float32, bfloat16 or float16)",
                       dtype_name(dt));
  for (int v : {vx, vw, vc, vo, vb, vs})
    if (v >= 0 && g.value(v).dtype != dt)
      return fmt::format("{} is {} where the Conv's input is {}", g.value(v).name,
                         dtype_name(g.value(v).dtype), dtype_name(dt));
  const Shape &xs = g.value(vx).shape, &ws = g.value(vw).shape, &ys = g.value(vc).shape;
  if (g.value(vo).shape != ys || (vs >= 0 && g.value(vs).shape != ys))
    return "Conv epilogue changes the shape";
  if (vb >= 0 && (ws.empty() || shape_numel(g.value(vb).shape) != ws[0]))
    return fmt::format("bias {} is not one value per output channel", shape_str(g.value(vb).shape));
  using Act = plan::Activation;
  const Act a = d->epi.act;
  if (a != Act::None && a != Act::Relu && a != Act::HardSwish && a != Act::HardSigmoid &&
      a != Act::Clip)
    return "activation " + d->epi.act_name + " after Conv";
  // brrr_conv_epilogue's activation codes
  const int act = a == Act::Relu ? 1 : a == Act::HardSwish ? 2 : a == Act::HardSigmoid ? 3
                  : a == Act::Clip ? 4 : 0;
  if (std::string why = conv_geometry(*d, xs, ws, ys, &cr->geo); !why.empty()) return why;
  cr->geo.dt = cr->dt = dt;
  cr->vx = vx, cr->vw = vw, cr->vy = vo, cr->vbias = vb, cr->vsum = vs;
  cr->act = act;
  cr->alpha = d->epi.alpha, cr->beta = d->epi.beta;
  cr->c = ys[1];
  cr->hw = shape_numel(ys) / (ys[0] * ys[1]);
  cr->n = shape_numel(ys);
  cr->epilogue = vb >= 0 || vs >= 0 || cr->act != 0;
  // fp32: true float32 (FMA). tf32: Tensor Cores on float32 data. bf16 / fp16 also map to
  // tf32: the graph's data stays float32, and cuDNN's down-conversion math
  // (TENSOR_OP_MATH_ALLOW_CONVERSION) goes through fp16, which can overflow float32 activations.
  cr->math = !d->tf32 && d->math == DType::f32 ? ConvMath::kFp32 : ConvMath::kTf32;
  // 16-bit data: Tensor Cores whatever the precision option (float32 accumulation).
  if (dt != DType::f32) cr->math = dt == DType::bf16 ? ConvMath::kBf16 : ConvMath::kFp16;
  if (!open_dnn()) return dnn_why;
  try {
    cr->dnn = make_conv(k, cr->geo, cr->math);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

size_t CudaExecutor::Impl::conv_im2col_bytes(const ConvStep& c) { return im2col_bytes(c.geo); }

void CudaExecutor::Impl::tune_convs() {
  if (env::integer("BRRR_CONV_TUNE") != 1) return;
  for (Step& s : steps)
    if (s.type == Step::Conv) s.conv().dnn->time_algorithms(kMaxConvWorkspace);
}

void CudaExecutor::Impl::choose_layouts() {
  nhwc.assign(g.values.size(), 0);
  if (!env::integer("BRRR_CUDA_NHWC")) return;
  std::vector<DeviceLayoutRole> roles(plan.kernels.size());
  bool any_conv = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    using R = DeviceLayoutRole;
    if (s.type == Step::Conv) {
      const ConvStep& c = s.conv();
      if (g.value(c.vx).shape.size() == 4 && g.value(c.vw).constant.defined() && c.dt != DType::f32)
        roles[i] = {R::Conv, c.vx, c.vsum, c.vy}, any_conv = true;
    } else if (s.type == Step::Op) {
      const OpStep& r = s.op();
      const Shape& xs = r.vx >= 0 ? g.value(r.vx).shape : Shape{};
      if (xs.size() != 4) continue;
      const auto* pd = plan::desc_of<plan::PoolDesc>(plan.kernels[i]);
      if ((r.kind == OpStep::Pool || r.kind == OpStep::PoolKernel) && pd && !pd->indices_used)
        roles[i] = {R::Pool, r.vx, -1, r.vy};
      if (r.kind == OpStep::RowMean && r.rows == xs[0] * xs[1] && r.cols == xs[2] * xs[3])
        roles[i] = {R::ChannelMean, r.vx, -1, r.vy};
    }
  }
  if (!any_conv) return;
  nhwc = choose_device_layouts(g, plan, roles);
  // cuDNN's NHWC descriptors and algorithms; a refusal puts every value back to NCHW.
  auto remake = [&](bool channels_last) {
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i].type != Step::Conv) continue;
      ConvStep& c = steps[i].conv();
      if (!nhwc[size_t(c.vy)] && !c.geo.nhwc) continue;
      c.geo.nhwc = channels_last;
      c.dnn = make_conv(plan.kernels[i], c.geo, c.math);
    }
  };
  try {
    remake(true);
  } catch (const Error& e) {
    nhwc_note = std::string("NHWC off: ") + e.what();
    remake(false);
    nhwc.assign(g.values.size(), 0);
    return;
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].type == Step::Conv) {
      ConvStep& c = steps[i].conv();
      if (!c.geo.nhwc) continue;
      ++nhwc_convs;
      c.transpose_in = !nhwc[size_t(c.vx)];
      c.in_c = c.in_cp = c.geo.x[1];
      if (c.transpose_in && c.geo.groups == 1 && c.in_c % 8 != 0 && env::integer("BRRR_CONV_PAD_C"))
        pad_conv_channels(c, plan.kernels[i]);
    } else if (steps[i].type == Step::Op && roles[i].kind == DeviceLayoutRole::Pool &&
               nhwc[size_t(roles[i].out)]) {
      OpStep& r = steps[i].op();
      if (r.kind == OpStep::Pool) {  // cuDNN's pool path is NCHW here: brrr's pool kernel
        const std::string no = pool_kernel_plan(*plan::desc_of<plan::PoolDesc>(plan.kernels[i]), &r);
        BRRR_ASSERT(no.empty(), "16-bit pool without a pool kernel: " + no);
        r.pool.reset();
        r.desc = "pool kernel";
      }
      r.cl = g.value(r.vx).shape[1];
      r.desc += ", NHWC";
    } else if (steps[i].type == Step::Op && roles[i].kind == DeviceLayoutRole::ChannelMean &&
               nhwc[size_t(roles[i].x)]) {
      steps[i].op().nhwc = true;
      steps[i].op().desc += ", over NHWC";
    }
  }
}

// Which convs run as cuBLASLt GEMMs (ConvStep::gemm, ::candidate), once their layouts are known.
void CudaExecutor::Impl::choose_conv_gemms() {
  const int as_gemm = env::integer("BRRR_CONV_GEMM");
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].type != Step::Conv) continue;
    ConvStep& c = steps[i].conv();
    c.what = plan.kernels[i].name;
    c.gemm = as_gemm >= 1 && pointwise_unaligned(c.geo);
    c.candidate = !c.gemm && as_gemm >= 2 && gemm_candidate(c.geo);
  }
}

// BRRR_CONV_DIRECT >= 1: the convs the direct kernel takes become its candidates; the module
// then needs device/conv_direct.cuh.
std::string CudaExecutor::Impl::find_direct_convs() {
  if (env::integer("BRRR_CONV_DIRECT") < 1 || dev.info().cc_major < 8) return "";
  bool any = false;
  for (Step& s : steps) {
    if (s.type != Step::Conv) continue;
    ConvStep& c = s.conv();
    c.direct_candidate = c.geo.nhwc && c.transpose_in &&
                         conv_direct_plan(c.geo, int(c.in_c), c.dt, c.vsum >= 0, c.act, c.alpha,
                                          c.beta, &c.dk)
                             .empty();
    any = any || c.direct_candidate;
  }
  return any ? conv_direct_source() : "";
}

// The direct kernel's weights (conv_direct_weights) and launch.
void CudaExecutor::Impl::setup_conv_direct(ConvStep& c) {
  c.wd = upload(conv_direct_weights(g.value(c.vw).constant, c.dk.geo),
                "Conv weights (direct kernel layout) " + g.value(c.vw).name);
  c.dfn = module->function(conv_direct_symbol(c.dt));
  if (c.dk.smem > 48 * 1024) c.dfn.set_max_dynamic_shared(c.dk.smem);
  c.dgrid = {conv_direct_grid(c.dk, dev.info().sm_count), 1, 1};
  c.dargp = {&c.x, &c.wd, &c.bias, &c.y, &c.dk.geo};
}

// A channels-last conv whose NCHW input it transposes itself, on in_c channels that are no
// multiple of 8 (ResNet-50's RGB stem: cuDNN's NHWC kernels for 3 channels ran at 185 GB/s, 0.66
// ms at batch 64): the transpose writes the channels padded with zeros to the next multiple of 8
// and the weights get zero channels to match, the same sums. Kept unpadded if cuDNN refuses.
void CudaExecutor::Impl::pad_conv_channels(ConvStep& c, const plan::Kernel& k) {
  ConvGeometry padded = c.geo;
  padded.x[1] = padded.w[1] = int((c.in_c + 7) / 8 * 8);
  try {
    c.dnn = make_conv(k, padded, c.math);
  } catch (const Error&) {
    return;
  }
  c.geo = padded;
  c.in_cp = padded.x[1];
}

// The conv as a cuBLASLt GEMM (ConvStep::gemm, ::candidate). Channels-last: A is its input's
// pixels, or for a conv that is not a plain 1x1 brrr_im2col_nhwc_u2's rows in the shared scratch;
// B the KRSC weights [K, R*S*C] transposed to [R*S*C, K]; bias and ReLU in cuBLASLt's epilogue.
// NCHW (an unaligned 1x1 only): one GEMM per image, y_n[K, HW] = w[K, C] @ x_n[C, HW]. A residual,
// another activation (and on NCHW the bias) in brrr's epilogue kernel after it. If cuBLASLt
// refuses the shape, the conv stays on cuDNN.
void CudaExecutor::Impl::setup_conv_gemm(ConvStep& c, const Tensor& krsc) {
  const std::vector<int>&x = c.geo.x, &y = c.geo.y;
  const int64_t taps = int64_t(c.geo.w[2]) * c.geo.w[3];
  c.gprec = c.dt == DType::bf16 ? GemmPrecision::kBf16 : GemmPrecision::kFp16;
  if (!c.geo.nhwc) {  // per image y_n[K, HW] = w[K, C] @ x_n[C, HW]; bias and activation after
    c.gshape = {y[1], int64_t(y[2]) * y[3], x[1]};
    c.gepi = GemmEpilogue::kNone;
    c.wg = c.w;
    try {
      if (!lt.tuning()) lt.enable_tuning(dev.info(), cache_dir());
      lt.prepare(c.gprec, c.gepi, c.gshape, c.wg, c.x, c.y, 0, stream, c.what);
    } catch (const Error&) {
      c.gemm = false;
    }
    return;
  }
  c.gshape = {int64_t(y[0]) * y[2] * y[3], y[1], taps * x[1]};
  const bool in_epilogue = c.bias && !c.sum && (c.act == 0 || c.act == 1);
  c.gepi = !in_epilogue ? GemmEpilogue::kNone
           : c.act == 1 ? GemmEpilogue::kReluBias
                        : GemmEpilogue::kBias;
  if (im2col_bytes(c.geo)) {
    c.cols = im2col_ws;
    c.c8 = x[1] / 8;
    c.ctotal = c.gshape.m * taps * c.c8;
    const int geo[12] = {x[2],        x[3],        y[2],          y[3],
                         c.geo.w[2],  c.geo.w[3],  c.geo.stride[0], c.geo.stride[1],
                         c.geo.pad[0], c.geo.pad[1], c.geo.dilation[0], c.geo.dilation[1]};
    std::copy(geo, geo + 12, c.cgeo);
    c.cfn = module->function("brrr_im2col_nhwc_u2");
    c.cgrid = helper_grid(c.ctotal, 256);
    c.cargp = {c.transpose_in ? &c.xt : &c.x, &c.cols};
    for (int& v : c.cgeo) c.cargp.push_back(&v);
    c.cargp.push_back(&c.c8);
    c.cargp.push_back(&c.ctotal);
  }
  Tensor b = krsc.reshape({krsc.shape()[0], shape_numel(krsc.shape()) / krsc.shape()[0]})
                 .permute({1, 0})
                 .contiguous();
  c.wg = upload(b, "Conv weights ([R*S*C, K], a GEMM's B) " + g.value(c.vw).name);
  try {
    if (!lt.tuning()) lt.enable_tuning(dev.info(), cache_dir());
    lt.prepare(c.gprec, c.gepi, c.gshape, c.ctotal ? c.cols : c.transpose_in ? c.xt : c.x, c.wg,
               c.y, in_epilogue ? c.bias : 0, stream, c.what);
  } catch (const Error&) {
    c.gemm = c.candidate = false;
    c.ctotal = 0;
  }
}

void CudaExecutor::Impl::setup_conv(ConvStep& c) {
  c.x = slot_of(c.vx, "Conv operand");
  c.y = slot_of(c.vy, "Conv operand"), c.bias = slot_of(c.vbias, "Conv operand");
  c.sum = slot_of(c.vsum, "Conv operand");
  if (c.transpose_in) {
    const Shape& xs = g.value(c.vx).shape;
    c.in_hw = xs[2] * xs[3], c.in_pixels = xs[0] * c.in_hw;
    c.xt = alloc(size_t(c.in_pixels * c.in_cp) * dtype_size(c.dt),
                 "Conv input (NHWC) " + g.value(c.vx).name);
    c.tfn = module->function("brrr_nchw_to_nhwc_u2");
    c.tgrid = helper_grid(c.in_pixels, 256);
    c.targp = {&c.x, &c.xt, &c.in_c, &c.in_cp, &c.in_hw, &c.in_pixels};
  }
  // The residual is read after cuDNN wrote y: it must not share y's bytes (the memory planner
  // keeps a kernel's inputs and outputs apart; a graph input or output has its own buffer).
  BRRR_ASSERT(c.sum == 0 || c.sum != c.y, "Conv residual aliases the Conv output");
  if (!c.geo.nhwc) {
    c.w = slot_of(c.vw, "Conv operand");
    if (c.gemm) setup_conv_gemm(c, Tensor());
  } else {  // KCRS -> KRSC, once (channels zero-padded to in_cp when padded)
    Tensor krsc = g.value(c.vw).constant.permute({0, 2, 3, 1}).contiguous();
    if (c.transpose_in && c.in_cp != c.in_c) {
      Shape ps = krsc.shape();
      const size_t rows = size_t(shape_numel(ps) / ps[3]), es = dtype_size(krsc.dtype());
      ps[3] = c.in_cp;
      Tensor pad = Tensor::zeros(krsc.dtype(), ps);
      for (size_t r = 0; r < rows; ++r)
        std::memcpy(static_cast<char*>(pad.raw()) + r * size_t(c.in_cp) * es,
                    static_cast<const char*>(krsc.raw()) + r * size_t(c.in_c) * es,
                    size_t(c.in_c) * es);
      krsc = pad;
    }
    if (c.gemm || c.candidate) setup_conv_gemm(c, krsc);
    if (!c.gemm) c.w = upload(krsc, "Conv weights (KRSC) " + g.value(c.vw).name);
    if (c.direct_candidate) setup_conv_direct(c);
  }
  if (!c.epilogue) return;
  // Bias, residual and ReLU in cuDNN's own call where it takes them (one pass over y fewer).
  if (!c.gemm && env::integer("BRRR_CONV_FUSE") && c.bias && (c.act == 0 || c.act == 1) &&
      c.dnn->fuse_epilogue(c.act == 1, c.transpose_in ? c.xt : c.x, c.w, c.y, conv_ws, c.bias,
                           c.sum) &&
      !c.candidate)
    return;
  c.fn = module->function(c.dt == DType::bf16  ? "brrr_conv_epilogue_bf16"
                          : c.dt == DType::f16 ? "brrr_conv_epilogue_f16"
                                               : "brrr_conv_epilogue");
  if (c.geo.nhwc) c.hw = 1;  // channels-last: the channel of element i is i % c
  c.grid = helper_grid(c.n, 256);
  c.block = {256, 1, 1};
  c.argp = {&c.y, &c.bias, &c.sum, &c.hw, &c.c, &c.act, &c.alpha, &c.beta, &c.n};
}

void CudaExecutor::Impl::exec_conv(ConvStep& c) {
  if (c.direct) {  // reads the NCHW input itself; bias and activation in its epilogue
    launch_own(c.dfn, c.dgrid, {kConvDirectThreads, 1, 1}, c.dk.smem, c.dargp.data());
    return;
  }
  if (c.transpose_in) launch(c.tfn, c.tgrid, {256, 1, 1}, 0, stream, c.targp.data());
  if (c.gemm && !c.geo.nhwc) {
    const DevPtr es = dtype_size(c.dt), xs = c.gshape.k * c.gshape.n * es,
                 ys = c.gshape.m * c.gshape.n * es;
    for (int n = 0; n < c.geo.x[0]; ++n)
      lt.run(c.gprec, c.gepi, c.gshape, c.wg, c.x + n * xs, c.y + n * ys, 0, stream, c.what);
  } else if (c.gemm) {
    if (c.ctotal) launch(c.cfn, c.cgrid, {256, 1, 1}, 0, stream, c.cargp.data());
    lt.run(c.gprec, c.gepi, c.gshape, c.ctotal ? c.cols : c.transpose_in ? c.xt : c.x, c.wg, c.y,
           c.gepi == GemmEpilogue::kNone ? 0 : c.bias, stream, c.what);
  }
  if (c.gemm) {
    if (c.epilogue && c.gepi == GemmEpilogue::kNone)
      launch(c.fn, c.grid, c.block, 0, stream, c.argp.data());
    return;
  }
  if (c.dnn->fused()) {
    c.dnn->run_fused(c.transpose_in ? c.xt : c.x, c.w, c.y, conv_ws, c.bias, c.sum);
    return;
  }
  c.dnn->run(c.transpose_in ? c.xt : c.x, c.w, c.y, conv_ws);
  if (c.epilogue) launch(c.fn, c.grid, c.block, 0, stream, c.argp.data());
}

// BRRR_CONV_GEMM=2: each candidate conv timed both ways on its own buffers (a graph of 5 calls
// between two events, the median of 5, after 2 warm-ups), the GEMM kept where it is 10% faster;
// 3: every candidate runs as the GEMM, untimed (tests, measurements). BRRR_CONV_DIRECT=1 adds the
// direct kernel to the paths timed (kept where it is 10% faster than the best of the others), 2
// takes it untimed.
namespace {

// What a conv's path choice depends on: its geometry, type, layout, epilogue, input padding and
// which paths were candidates.
std::string conv_path_key(const ConvStep& c) {
  auto dims = [](const std::vector<int>& v) { return fmt::format("{}", fmt::join(v, ",")); };
  return fmt::format("conv-path x {} w {} y {} pad {} stride {} dilation {} groups {} {} {} "
                     "bias {} sum {} act {} in {}/{}{}{}",
                     dims(c.geo.x), dims(c.geo.w), dims(c.geo.y), dims(c.geo.pad),
                     dims(c.geo.stride), dims(c.geo.dilation), c.geo.groups, dtype_name(c.dt),
                     c.geo.nhwc ? "nhwc" : "nchw", c.bias != 0, c.sum != 0, c.act, c.in_c,
                     c.in_cp, c.candidate ? "" : " no-gemm", c.direct_candidate ? " direct" : "");
}

// The paths, as the cache stores them (TunedAlgo::data[0] and ::config).
enum ConvPath : uint64_t { kCudnnPath = 0, kGemmPath = 1, kDirectPath = 2 };
const char* path_name(uint64_t p) { return p == kGemmPath ? "gemm" : p == kDirectPath ? "direct" : "cudnn"; }

}  // namespace

// Each candidate conv is timed every way it can run once per device, library and brrr version;
// the choice is kept in the kernel cache (GemmTuneCache's entries: data[0] the path, data[1] and
// data[2] the GEMM's and the direct kernel's nanoseconds, the timings as chosen / cuDNN's), so
// later sessions take the same path untimed: timed in every session, a conv near the margin went
// either way.
void CudaExecutor::Impl::choose_conv_paths() {
  const bool always = env::integer("BRRR_CONV_GEMM") == 3;
  const bool direct_always = env::integer("BRRR_CONV_DIRECT") == 2;
  std::unique_ptr<GemmTuneCache> cache;
  for (Step& s : steps) {
    if (s.type != Step::Conv) continue;
    ConvStep& c = s.conv();
    if (!c.candidate && !c.direct_candidate) continue;
    if (direct_always && c.direct_candidate) {
      c.direct = true, c.gemm = false;
      continue;
    }
    if (always && c.candidate) {
      c.gemm = true;
      continue;
    }
    if (!cache) {
      cache = std::make_unique<GemmTuneCache>(
          cache_dir(), fmt::format("{} cudnn {}", lt.tune_context(dev.info()), cudnn_version()));
    }
    const std::string key = conv_path_key(c);
    if (std::optional<TunedAlgo> hit = cache->lookup(key);
        hit && hit->data[0] <= kDirectPath && hit->config == path_name(hit->data[0]) &&
        (hit->data[0] != kGemmPath || c.candidate) && (hit->data[0] != kDirectPath || c.direct_candidate)) {
      c.gemm = hit->data[0] == kGemmPath;
      c.direct = hit->data[0] == kDirectPath;
      c.cudnn_us = hit->heuristic_us;
      c.gemm_us = double(hit->data[1]) / 1000;
      c.direct_us = double(hit->data[2]) / 1000;
      if (!hit->data[1] && !hit->data[2]) c.gemm_us = hit->chosen_us;  // an entry from before the direct kernel
      c.path_cached = true;
      continue;
    }
    // On the device's clock: five calls captured as a CUDA graph, as the plan replays them
    // (timed eagerly, the host's launch costs decided: every ResNet-50 conv "won" as a GEMM, and
    // the model ran 345 -> 385 us on an H100).
    auto time_us = [&](ConvPath path) {
      c.gemm = path == kGemmPath;
      c.direct = path == kDirectPath;
      CudaGraph g = CudaGraph::capture(
          stream, [&] { for (int r = 0; r < 5; ++r) exec_conv(c); }, "a conv timed at build");
      return time_events_ms(stream, [&] { g.replay(stream); }, 2, 5) * 200;
    };
    c.cudnn_us = time_us(kCudnnPath);
    ConvPath best = kCudnnPath;
    double best_us = c.cudnn_us;
    if (c.candidate) {
      c.gemm_us = time_us(kGemmPath);
      if (c.gemm_us < 0.9 * best_us) best = kGemmPath, best_us = c.gemm_us;
    }
    if (c.direct_candidate) {
      c.direct_us = time_us(kDirectPath);
      if (c.direct_us < 0.9 * best_us) best = kDirectPath, best_us = c.direct_us;
    }
    c.gemm = best == kGemmPath;
    c.direct = best == kDirectPath;
    TunedAlgo choice;
    choice.data[0] = best;
    choice.data[1] = uint64_t(c.gemm_us * 1000 + 0.5);
    choice.data[2] = uint64_t(c.direct_us * 1000 + 0.5);
    choice.config = path_name(best);
    choice.chosen_us = best_us;
    choice.heuristic_us = c.cudnn_us;
    choice.candidates = 1 + c.candidate + c.direct_candidate;
    cache->store(key, choice);
  }
}

std::string CudaExecutor::Impl::conv_summary(size_t i) const {
  const ConvStep& c = steps[i].conv();
  std::string timed;
  if (c.cudnn_us > 0) {
    timed = fmt::format(" ({}: {:.1f} us on cuDNN", c.path_cached ? "cached choice" : "timed", c.cudnn_us);
    if (c.candidate) timed += fmt::format(", {:.1f} us as a GEMM", c.gemm_us);
    if (c.direct_candidate) timed += fmt::format(", {:.1f} us on the direct kernel", c.direct_us);
    timed += ")";
  }
  if (c.direct) {
    const ConvDirectGeo& d = c.dk.geo;
    return fmt::format("  {:<24} conv on brrr's direct kernel ({}x{} stride {}x{}, {} taps {} ({} "
                       "real) in {} K steps, {} tiles of {}x{} pixels on {} CTAs, {} KB shared; "
                       "NCHW input read as it is, NHWC output{}){}\n",
                       plan.kernels[i].name, d.kh, d.kw, d.sh, d.sw, d.kh * d.kw,
                       d.cpp == 4 ? "in pairs of 4 channels" : "of 8 channels", d.c, d.ks, d.tiles,
                       kConvDirectTh, kConvDirectTw, c.dgrid.x, (c.dk.smem + 1023) / 1024,
                       c.bias ? ", bias and activation in its epilogue" : "", timed);
  }
  const std::string in = c.transpose_in ? c.in_cp != c.in_c
                                              ? fmt::format(", input transposed to NHWC first, its "
                                                            "{} channels zero-padded to {}",
                                                            c.in_c, c.in_cp)
                                              : std::string(", input transposed to NHWC first")
                                        : std::string();
  if (c.gemm)
    return fmt::format("  {:<24} conv as a cuBLASLt GEMM ({}{} x {} x {}, {}{}, {}){}{}{}\n",
                       plan.kernels[i].name,
                       c.ctotal ? "im2col first; "
                       : c.candidate ? "1x1; "
                                     : "1x1, channels not all multiples of 8; ",
                       c.gshape.m, c.gshape.n, c.gshape.k, to_string(c.gprec),
                       c.gepi == GemmEpilogue::kNone ? std::string()
                                                     : std::string(", ") + to_string(c.gepi),
                       c.geo.nhwc ? "NHWC" : "NCHW, one per image", in,
                       c.epilogue && c.gepi == GemmEpilogue::kNone
                           ? " + bias/sum/activation kernel" : "",
                       timed);
  return fmt::format("  {:<24} cuDNN conv {}{}{}{}\n", plan.kernels[i].name, c.dnn->describe(), in,
                     c.epilogue && !c.dnn->fused() ? " + bias/sum/activation kernel" : "", timed);
}

}  // namespace brrr::cuda
