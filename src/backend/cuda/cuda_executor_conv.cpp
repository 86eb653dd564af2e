// Conv steps: cuDNN's convolution (float32, bfloat16 or float16 data) with the bias, residual and
// ReLU in the same cuDNN call where cuDNN takes them (cudnnConvolutionBiasActivationForward),
// else brrr_conv_epilogue in place after it (hardswish, hardsigmoid, clip, no bias, refusals).
#include <fmt/format.h>

#include <cstring>

#include "backend/cuda/cuda_executor_impl.hpp"
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

// Which convs run as cuBLASLt GEMMs (ConvStep::gemm), once their layouts are known.
void CudaExecutor::Impl::choose_conv_gemms() {
  const bool as_gemm = env::integer("BRRR_CONV_GEMM") == 1;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].type != Step::Conv) continue;
    ConvStep& c = steps[i].conv();
    c.what = plan.kernels[i].name;
    c.gemm = as_gemm && pointwise_unaligned(c.geo);
  }
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

// The 1x1 conv as cuBLASLt GEMMs (ConvStep::gemm). Channels-last: one over every pixel, A its
// input, B the KRSC weights [K, C] transposed to [C, K], bias and ReLU in cuBLASLt's epilogue.
// NCHW: one per image, y_n[K, HW] = w[K, C] @ x_n[C, HW]. A residual or another activation (and on
// NCHW the bias) in brrr's epilogue kernel after it. If cuBLASLt refuses the shape, cuDNN runs it.
void CudaExecutor::Impl::setup_conv_gemm(ConvStep& c, const Tensor& krsc) {
  const std::vector<int>&x = c.geo.x, &y = c.geo.y;
  c.gprec = c.dt == DType::bf16 ? GemmPrecision::kBf16 : GemmPrecision::kFp16;
  const bool in_epilogue = c.geo.nhwc && c.bias && !c.sum && (c.act == 0 || c.act == 1);
  c.gepi = !in_epilogue ? GemmEpilogue::kNone
           : c.act == 1 ? GemmEpilogue::kReluBias
                        : GemmEpilogue::kBias;
  if (c.geo.nhwc) {
    c.gshape = {int64_t(x[0]) * x[2] * x[3], y[1], x[1]};
    Tensor b = krsc.reshape({krsc.shape()[0], krsc.shape()[3]}).permute({1, 0}).contiguous();
    c.wg = upload(b, "Conv weights ([C, K], a GEMM's B) " + g.value(c.vw).name);
  } else {
    c.gshape = {y[1], int64_t(y[2]) * y[3], x[1]};
    c.wg = c.w;
  }
  try {
    if (!lt.tuning()) lt.enable_tuning(dev.info(), cache_dir());
    lt.prepare(c.gprec, c.gepi, c.gshape, c.geo.nhwc ? c.transpose_in ? c.xt : c.x : c.wg,
               c.geo.nhwc ? c.wg : c.x, c.y, in_epilogue ? c.bias : 0, stream, c.what);
  } catch (const Error&) {
    c.gemm = false, c.gepi = GemmEpilogue::kNone;
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
    if (c.gemm) setup_conv_gemm(c, krsc);
    if (!c.gemm) c.w = upload(krsc, "Conv weights (KRSC) " + g.value(c.vw).name);
  }
  if (!c.epilogue) return;
  // Bias, residual and ReLU in cuDNN's own call where it takes them (one pass over y fewer).
  if (!c.gemm && env::integer("BRRR_CONV_FUSE") && c.bias && (c.act == 0 || c.act == 1) &&
      c.dnn->fuse_epilogue(c.act == 1, c.transpose_in ? c.xt : c.x, c.w, c.y, conv_ws, c.bias,
                           c.sum))
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
  if (c.transpose_in) launch(c.tfn, c.tgrid, {256, 1, 1}, 0, stream, c.targp.data());
  if (c.gemm) {
    if (c.geo.nhwc) {
      lt.run(c.gprec, c.gepi, c.gshape, c.transpose_in ? c.xt : c.x, c.wg, c.y,
             c.gepi == GemmEpilogue::kNone ? 0 : c.bias, stream, c.what);
    } else {
      const DevPtr es = dtype_size(c.dt), xs = c.gshape.k * c.gshape.n * es,
                   ys = c.gshape.m * c.gshape.n * es;
      for (int n = 0; n < c.geo.x[0]; ++n)
        lt.run(c.gprec, c.gepi, c.gshape, c.wg, c.x + n * xs, c.y + n * ys, 0, stream, c.what);
    }
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

std::string CudaExecutor::Impl::conv_summary(size_t i) const {
  const ConvStep& c = steps[i].conv();
  const std::string in = c.transpose_in ? c.in_cp != c.in_c
                                              ? fmt::format(
                                                    ", input transposed to NHWC first, its "
                                                    "{} channels zero-padded to {}",
                                                    c.in_c, c.in_cp)
                                              : std::string(", input transposed to NHWC first")
                                        : std::string();
  const char* after = " + bias/sum/activation kernel";
  if (c.gemm)
    return fmt::format(
        "  {:<24} 1x1 conv as a cuBLASLt GEMM (channels not all multiples of 8; {} x {} x {}, "
        "{}{}, {}){}{}\n",
        plan.kernels[i].name, c.gshape.m, c.gshape.n, c.gshape.k, to_string(c.gprec),
        c.gepi == GemmEpilogue::kNone ? std::string() : std::string(", ") + to_string(c.gepi),
        c.geo.nhwc ? "NHWC" : "NCHW, one per image", in,
        c.epilogue && c.gepi == GemmEpilogue::kNone ? after : "");
  return fmt::format("  {:<24} cuDNN conv {}{}{}\n", plan.kernels[i].name, c.dnn->describe(), in,
                     c.epilogue && !c.dnn->fused() ? after : "");
}

}  // namespace brrr::cuda
