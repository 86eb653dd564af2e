// Op steps: the other library kernels and Gather. Pools on cuDNN (brrr's pool kernel where
// cuDNN's symmetric padding cannot express the window, and for 16-bit data), Concat as device
// copies, trailing means / sums and squeeze-excite channel scales as helper kernels, Gather as a
// helper kernel that flags indices out of range.
#include <fmt/format.h>

#include "backend/cuda/cuda_executor_impl.hpp"

namespace brrr::cuda {

// Why brrr's pool kernel cannot run pool `d` ("" when it can); fills the kernel's geometry in
// `r`.
std::string CudaExecutor::Impl::pool_kernel_plan(const plan::PoolDesc& d, OpStep* r) {
  const std::string op = d.max ? "MaxPool" : "AveragePool";
  if (d.x < 0 || d.y < 0) return d.why;
  if (d.indices_used) return "MaxPool's Indices output is used (the pool kernel has none)";
  const Value &xv = g.value(d.x), &yv = g.value(d.y);
  if (xv.dtype != yv.dtype || !(xv.dtype == DType::f32 || xv.dtype == DType::bf16 || xv.dtype == DType::f16))
    return fmt::format("the pool kernel takes float32, bfloat16 or float16, not {}", dtype_name(xv.dtype));
  const Shape &xs = xv.shape, &ys = yv.shape;
  if (xs.size() < 3 || xs.size() > 5 || ys.size() != xs.size())
    return fmt::format("the pool kernel takes 1-D to 3-D pools, not {} to {}", shape_str(xs), shape_str(ys));
  if (!d.why.empty()) return d.why;
  const ops::Window& w = d.window;
  for (size_t i = 0; i < w.out.size(); ++i)
    if (w.out[i] != ys[2 + i]) return op + " output shape disagrees with its window";
  const ops::Window w3 = w.as3d();
  auto& p = r->pg;
  for (int a = 0; a < 3; ++a) {
    p.in[a] = w3.in[size_t(a)], p.k[a] = w3.k[size_t(a)], p.s[a] = w3.s[size_t(a)];
    p.d[a] = w3.d[size_t(a)], p.pb[a] = w3.pb[size_t(a)], p.pe[a] = w3.pe[size_t(a)];
    p.out[a] = w3.out[size_t(a)];
  }
  r->kind = OpStep::PoolKernel;
  r->dt = xv.dtype;
  r->is_max = d.max;
  r->include_pad = d.include_pad;
  r->n = shape_numel(ys);
  return "";
}

// Why a pool, Concat, trailing mean / sum or channel-scale Mul library kernel has no device
// path here ("" when it has one); fills `r` otherwise (a pool's cuDNN descriptors included).
std::string CudaExecutor::Impl::op_plan(const plan::Kernel& k, OpStep* r) {
  const Node& n = g.nodes[size_t(k.nodes[0])];
  if (k.nodes.size() != 1 || k.outputs.size() != 1 || n.outputs.empty() ||
      k.outputs[0] != n.outputs[0])
    return n.op + " library kernel with an epilogue or several outputs";
  const int vy = n.outputs[0];
  const Value& yv = g.value(vy);
  r->vy = vy;
  r->who = fmt::format("{} ({} {})", k.name, n.op, n.name);
  if (const auto* d = plan::desc_of<plan::PoolDesc>(k)) {
    r->kind = OpStep::Pool;
    r->vx = d->x;
    std::string why = pool_geometry(*d, g, &r->geo);
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
    if (std::string no = pool_kernel_plan(*d, r); !no.empty()) return why + "; " + no;
    r->desc = fmt::format("pool kernel, not cuDNN: {}", why);
    return "";
  }
  if (const auto* d = plan::desc_of<plan::ConcatDesc>(k)) {
    r->kind = OpStep::Concat;
    if (!d->why.empty()) return d->why;
    const size_t es = dtype_size(yv.dtype);
    for (int64_t i = 0; i < d->axis; ++i) r->outer *= size_t(yv.shape[size_t(i)]);
    if (shape_numel(yv.shape) == 0) return "Concat with an empty output";
    r->out_row = size_t(shape_numel(yv.shape)) / r->outer * es;
    size_t total = 0;
    for (int v : d->inputs) {
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
  if (const auto* d = plan::desc_of<plan::RowReduceDesc>(k)) {
    r->kind = OpStep::RowMean;
    r->vx = d->x;
    const Value& xv = g.value(r->vx);
    r->dt = xv.dtype;
    if (xv.dtype != yv.dtype ||
        (xv.dtype != DType::f32 && xv.dtype != DType::bf16 && xv.dtype != DType::f16))
      return fmt::format("{} on {} (the row-mean kernel takes float32, bfloat16 or float16)",
                         n.op, dtype_name(xv.dtype));
    if (!d->why.empty()) return d->why;
    r->rows = d->rows;
    r->cols = d->cols;
    r->scale = d->scale;
    r->desc = fmt::format("row {} kernel: {} rows of {}", n.op == "ReduceSum" ? "sum" : "mean",
                          r->rows, r->cols);
    return "";
  }
  if (const auto* d = plan::desc_of<plan::ChannelScaleDesc>(k)) {
    r->kind = OpStep::ChannelScale;
    if (!d->why.empty() || g.value(d->x).dtype != DType::f32 ||
        g.value(d->s).dtype != DType::f32 || yv.dtype != DType::f32)
      return "Mul is not a float32 channel scale x[N,C,H,W] * s[N,C,1,1]";
    r->vx = d->x, r->vs = d->s;
    r->hw = d->pixels;
    r->n = d->images * d->channels * d->pixels;
    if (r->n == 0) return "channel scale on an empty tensor";
    r->desc = fmt::format("channel scale kernel: {} rows of {}", d->images * d->channels, r->hw);
    return "";
  }
  return n.op + " has no CUDA library path";
}

// Why a Split has no device path here ("" when it has one): one 2-D copy per present output
// (any element type), its share of each of the input's rows.
std::string CudaExecutor::Impl::split_plan(const plan::Kernel& k, OpStep* r) {
  const plan::SplitDesc* d = plan::desc_of<plan::SplitDesc>(k);
  if (!d) return "Split without a library descriptor";
  if (!d->why.empty()) return d->why;
  const Value& xv = g.value(d->x);
  const size_t es = dtype_size(xv.dtype);
  r->kind = OpStep::Split;
  r->vx = d->x;
  r->who = fmt::format("{} (Split {})", k.name, g.nodes[size_t(k.nodes[0])].name);
  for (int64_t i = 0; i < d->axis; ++i) r->outer *= size_t(xv.shape[size_t(i)]);
  size_t inner = es;  // bytes per step along the axis
  for (size_t i = size_t(d->axis) + 1; i < xv.shape.size(); ++i) inner *= size_t(xv.shape[i]);
  r->out_row = size_t(xv.shape[size_t(d->axis)]) * inner;
  size_t at = 0;
  for (size_t q = 0; q < d->outputs.size(); ++q) {
    const size_t bytes = size_t(d->sizes[q]) * inner;
    const int v = d->outputs[q];
    if (v >= 0 && g.value(v).dtype != xv.dtype) return "Split output of another dtype";
    if (v >= 0 && bytes && r->outer) {
      r->parts.push_back(v);
      r->part_bytes.push_back(bytes);
      r->part_offset.push_back(at);
    }
    at += bytes;
  }
  if (at != r->out_row) return "Split outputs do not add up to the input";
  if (r->outer > 1 && r->out_row > size_t(INT32_MAX))
    return "Split rows of 2^31 bytes or more (beyond cuMemcpy2D's pitch)";
  r->desc = r->outer == 1 ? fmt::format("split: {} device copies", r->parts.size())
                          : fmt::format("split: {} 2-D copies ({} rows of {} B)", r->parts.size(),
                                        r->outer, r->out_row);
  return "";
}

// Why a Gather has no device path here ("" when it has one): any element type of 1, 2, 4 or 8
// bytes, int64 or int32 indices, static shapes.
std::string CudaExecutor::Impl::gather_plan(const plan::Kernel& k, OpStep* r) {
  const plan::GatherDesc* d = plan::desc_of<plan::GatherDesc>(k);
  if (!d) return "Gather without a library descriptor";
  if (!d->why.empty()) return d->why;
  const Value &xv = g.value(d->x), &iv = g.value(d->indices), &yv = g.value(d->y);
  if (iv.dtype != DType::i64 && iv.dtype != DType::i32)
    return fmt::format("Gather indices are {} (int64 or int32 on the GPU)", dtype_name(iv.dtype));
  const int64_t es = int64_t(dtype_size(xv.dtype)), inner = d->inner * es;
  r->kind = OpStep::Gather;
  r->vx = d->x, r->vs = d->indices, r->vy = d->y;
  r->unit = inner % 16 == 0 ? 16 : inner % 4 == 0 ? 4 : 1;
  r->idx64 = iv.dtype == DType::i64;
  r->rows = shape_numel(iv.shape);
  r->cols = d->axis_len;
  r->hw = inner / r->unit;
  r->n = d->outer * r->rows * r->hw;
  if (shape_numel(yv.shape) * es != r->n * r->unit) return "Gather output size does not match";
  r->who = fmt::format("{} (Gather {})", k.name, g.nodes[size_t(k.nodes[0])].name);
  r->desc = fmt::format("gather kernel: {} slices of {} B", d->outer * r->rows, inner);
  return "";
}

void CudaExecutor::Impl::setup_op(OpStep& r) {
  auto at = [&](int v) { return slot_of(v, "library kernel operand"); };
  r.x = at(r.vx), r.sc = at(r.vs), r.y = at(r.vy);
  switch (r.kind) {
    case OpStep::Pool: return;
    case OpStep::PoolKernel: {
      // Channels-last with 16 bytes of channels per thread when the counts and addresses allow.
      const int64_t v = r.dt == DType::f32 ? 4 : 8;
      const bool vec = r.cl > 0 && r.cl % v == 0 && r.n < (int64_t(1) << 31) && r.x % 16 == 0 &&
                       r.y % 16 == 0;
      r.fn = module->function(fmt::format("brrr_pool_{}{}", vec ? "cl_" : "",
          r.dt == DType::bf16 ? "bf16" : r.dt == DType::f16 ? "f16" : "f32"));
      r.block = {256, 1, 1};
      r.grid = helper_grid(vec ? r.n / v : r.n, 256);
      r.argp = {&r.x, &r.y, &r.pg, &r.is_max, &r.include_pad, &r.cl, &r.n};
      return;
    }
    case OpStep::Concat: {
      size_t off = 0;
      for (size_t q = 0; q < r.parts.size(); ++q) {
        r.copies.push_back({at(r.parts[q]), r.y + off, r.part_bytes[q]});
        off += r.part_bytes[q];
      }
      return;
    }
    case OpStep::Split:
      for (size_t q = 0; q < r.parts.size(); ++q)
        r.copies.push_back({r.x + r.part_offset[q], at(r.parts[q]), r.part_bytes[q]});
      return;
    case OpStep::RowMean:
      if (r.nhwc) {  // x is (N, H*W, C): a block of 256 threads per 32 (image, channel) pairs
        r.fn = module->function(r.dt == DType::bf16 ? "brrr_nhwc_mean_bf16" : "brrr_nhwc_mean_f16");
        r.hw = r.cols;
        r.cl = g.value(r.vx).shape[1];
        r.n = r.rows;
        r.block = {256, 1, 1};
        r.grid = helper_grid(r.n, 32);
        r.argp = {&r.x, &r.y, &r.hw, &r.cl, &r.scale, &r.n};
        return;
      }
      r.fn = module->function(r.dt == DType::bf16  ? "brrr_row_mean_bf16"
                              : r.dt == DType::f16 ? "brrr_row_mean_f16"
                                                   : "brrr_row_mean");
      r.block = {256, 1, 1};
      r.grid = helper_grid(r.rows, 256 / 32);
      r.argp = {&r.x, &r.y, &r.rows, &r.cols, &r.scale};
      return;
    case OpStep::ChannelScale:
      r.fn = module->function("brrr_channel_scale");
      r.block = {256, 1, 1};
      r.grid = helper_grid(r.n, 256);
      r.argp = {&r.x, &r.sc, &r.y, &r.hw, &r.n};
      return;
    case OpStep::Gather:
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

void CudaExecutor::Impl::fetch_gather_flag() {
  if (gather_err) copy_d2h(&gather_flag, gather_err, sizeof gather_flag, stream, "Gather index error flag");
}
void CudaExecutor::Impl::check_gather_indices() {
  if (!gather_err || !gather_flag) return;
  gather_flag = 0;
  int zero = 0;
  copy_h2d(gather_err, &zero, sizeof zero, stream, "Gather index error flag");
  stream.synchronize("Gather index check");
  std::string names;
  for (const std::string& w : gathers) names += (names.empty() ? "" : ", ") + w;
  fail("Gather index out of range [-axis, axis) in {}", names);
}

void CudaExecutor::Impl::exec_op(OpStep& r) {
  const std::string& what = r.who;
  switch (r.kind) {
    case OpStep::Pool: r.pool->run(r.x, r.y); return;
    case OpStep::Concat:
      for (const OpStep::Copy& c : r.copies) {
        if (r.outer == 1) copy_d2d(c.dst, c.src, c.width, stream, what);
        else copy_2d_d2d(c.dst, r.out_row, c.src, c.width, c.width, r.outer, stream, what);
      }
      return;
    case OpStep::Split:  // each output's rows are packed; the input's are out_row apart
      for (const OpStep::Copy& c : r.copies) {
        if (r.outer == 1) copy_d2d(c.dst, c.src, c.width, stream, what);
        else copy_2d_d2d(c.dst, c.width, c.src, r.out_row, c.width, r.outer, stream, what);
      }
      return;
    case OpStep::PoolKernel:
    case OpStep::RowMean:
    case OpStep::ChannelScale:
    case OpStep::Gather: launch(r.fn, r.grid, r.block, 0, stream, r.argp.data()); return;
  }
}

std::string CudaExecutor::Impl::op_summary(size_t i) const {
  return fmt::format("  {:<24} {}\n", plan.kernels[i].name, steps[i].op().desc);
}

}  // namespace brrr::cuda
