// oneDNN convolution (f32, or bf16 / f16 data; 1-D, 2-D and 3-D) and pooling (f32, 2-D), NCHW at
// the graph boundary. Conv weights are
// reordered once, at plan build, into the layout oneDNN picks; activations are stored in the
// layout the session chose for them (NCHW, NHWC or channel-blocked, library.hpp) and reordered in
// and out per call only where the chosen implementation wants another one.
#ifdef BRRR_HAVE_DNNL
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "backend/cpu/dnnl_util.hpp"
#include "core/env.hpp"
#include "plan/library_desc.hpp"

namespace brrr::cpu {

namespace {

// A user (NCHW) tensor plus, where the primitive wants another layout, an owned internal copy.
struct Port {
  int value = -1;
  dnnl::memory user, inner;
  dnnl::reorder to_inner, to_user;
  bool reordered() const { return inner.get(true) != nullptr; }
  dnnl::memory& mem() { return reordered() ? inner : user; }
};

// oneDNN's short name of a plain or blocked layout ("nchw", "nhwc", "nChw16c"), for notes.
std::string layout_name(const dnnl::memory::desc& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked || d.ndims != 4) return "another layout";
  const auto& b = d.format_desc.blocking;
  if (b.inner_nblks == 1 && b.inner_idxs[0] == 1) return fmt::format("nChw{}c", b.inner_blks[0]);
  if (b.inner_nblks != 0) return "a blocked layout";
  return b.strides[1] == 1 ? "nhwc" : "nchw";
}

// Binds port p over NCHW desc `user_md`, with `want` the desc the primitive chose.
void make_port(Port& p, int value, const dnnl::memory::desc& user_md,
               const dnnl::memory::desc& want, bool in, bool out) {
  p.value = value;
  p.user = dnnl::memory(user_md, engine(), DNNL_MEMORY_NONE);
  if (want == user_md) return;
  p.inner = dnnl::memory(want, engine());
  if (in) p.to_inner = dnnl::reorder(p.user, p.inner);
  if (out) p.to_user = dnnl::reorder(p.inner, p.user);
}

// What a kernel's ports convert each run: its note and bytes (an input reorder reads the user
// buffer and writes the inner one; an output reorder the other way, and a sum post-op also
// copies the addend in).
void describe_reorders(LibraryKernel& k, const Port& src, const Port& dst, bool sum) {
  std::vector<std::string> parts;
  auto bytes = [](const dnnl::memory& m) { return m.get_desc().get_size(); };
  if (src.reordered()) {
    parts.push_back(fmt::format("input {} -> {}", layout_name(src.user.get_desc()),
                                layout_name(src.inner.get_desc())));
    k.reorder_bytes += bytes(src.user) + bytes(src.inner);
  }
  if (dst.reordered()) {
    parts.push_back(fmt::format("output {} -> {}", layout_name(dst.inner.get_desc()),
                                layout_name(dst.user.get_desc())));
    k.reorder_bytes += (sum ? 2 : 1) * (bytes(dst.user) + bytes(dst.inner));
  }
  k.layout_note = fmt::format("{}", fmt::join(parts, ", "));
}

class DnnlConv : public LibraryKernel {
 public:
  dnnl::convolution_forward prim;
  Port src, dst;
  int sum = -1;  // value the sum post-op adds (copied into dst first)
  size_t dst_bytes = 0;
  dnnl::memory weights, bias;
  int bias_value = -1;
  dnnl::memory scratch;
  std::unordered_map<int, dnnl::memory> args;
  dnnl::stream strm{engine()};

  size_t work_bytes() const override { return work_size({&scratch, &src.inner, &dst.inner}); }
  void use_work(char* p) override { work_bind(p, {&scratch, &src.inner, &dst.inner}); }

  void run(void* const* slots) override {
    src.user.set_data_handle(slots[src.value]);
    dst.user.set_data_handle(slots[dst.value]);
    if (bias_value >= 0) bias.set_data_handle(slots[bias_value]);
    if (src.reordered()) src.to_inner.execute(strm, src.user, src.inner);
    if (sum >= 0) {
      if (slots[sum] != slots[dst.value]) std::memmove(slots[dst.value], slots[sum], dst_bytes);
      if (dst.reordered()) dst.to_inner.execute(strm, dst.user, dst.inner);
    }
    args[DNNL_ARG_SRC] = src.mem();
    args[DNNL_ARG_DST] = dst.mem();
    prim.execute(strm, args);
    if (dst.reordered()) dst.to_user.execute(strm, dst.inner, dst.user);
    strm.wait();
  }
};

tag blocked_tag() { return channel_block() == 16 ? tag::nChw16c : tag::nChw8c; }

tag user_tag(const Layouts& l, int v) {
  char t = layout_of(l, v);
  return t == kNHWC ? tag::nhwc : t == kBlocked ? blocked_tag() : tag::nchw;
}

// The plain tags of a conv with `nsp` spatial dims (1-3): activations, weights, grouped weights.
// Only 2-D activations are ever NHWC or blocked (choose_layouts relayouts rank-4 values only).
tag plain_tag(size_t nsp) { return nsp == 1 ? tag::ncw : nsp == 3 ? tag::ncdhw : tag::nchw; }
tag weight_tag(size_t nsp, bool grouped) {
  if (grouped) return nsp == 1 ? tag::goiw : nsp == 3 ? tag::goidhw : tag::goihw;
  return nsp == 1 ? tag::oiw : nsp == 3 ? tag::oidhw : tag::oihw;
}

// oneDNN's reference implementations are orders of magnitude slower than its jit ones.
bool is_reference_impl(const char* info) {
  return std::strncmp(info, "ref", 3) == 0;
}

}  // namespace

namespace {

// The conv of d with X and W read in `math` (f32, or bf16: weights converted once, X converted by
// its port's reorder per run; float32 accumulation, bias, residual and output), or nullptr. Data
// stored in 16 bits (`store`: X, W, bias, residual and output) is read and written as it is, with
// `math` the same type (float32 accumulation and post-ops, one rounding of the result).
std::unique_ptr<LibraryKernel> make_conv(const Graph& g, const plan::ConvDesc* d,
                                         const Layouts& layouts, dt math, dt store = dt::f32) {
  const int vx = d->x, vw = d->w, vout = d->out, vb = d->epi.bias;
  const Shape &xs = g.value(vx).shape, &ws = g.value(vw).shape, &os = g.value(vout).shape;
  // 1-D (Whisper's and wav2vec's audio front ends), 2-D and 3-D convs: oneDNN takes all three.
  const size_t rank = xs.size(), nsp = rank - 2;
  if (rank < 3 || rank > 5 || ws.size() != rank || os.size() != rank) return nullptr;
  const int64_t G = d->groups;
  if (G < 1 || xs[1] % G || ws[0] % G || ws[1] * G != xs[1]) return nullptr;
  const ops::Window& w = d->window;
  if (w.out.size() != nsp || w.s.size() != nsp || w.d.size() != nsp || w.pb.size() != nsp)
    return nullptr;
  for (size_t i = 0; i < nsp; ++i)
    if (w.out[i] != os[2 + i]) return nullptr;
  dims xd(xs.begin(), xs.end()), od(os.begin(), os.end()), wd(ws.begin(), ws.end());
  if (G > 1) wd[0] /= G, wd.insert(wd.begin(), G);
  dims strides(nsp), dil(nsp), pl(nsp), pr(nsp);
  for (size_t i = 0; i < nsp; ++i) {
    strides[i] = w.s[i], dil[i] = w.d[i] - 1, pl[i] = w.pb[i];
    // oneDNN wants the right pad that makes its output size formula land on ours.
    int64_t dk = (ws[2 + i] - 1) * w.d[i] + 1;
    pr[i] = (od[2 + i] - 1) * strides[i] + dk - xd[2 + i] - pl[i];
  }
  const Tensor& wconst = g.value(vw).constant;
  bool plain = env::text("BRRR_CONV_LAYOUT") == "plain";  // NCHW activations (for comparison)
  // A blocked output asks for a blocked kernel (oneDNN's own pick for `any` is brgconv, NHWC, which
  // is slower here); so does a blocked input into a plain output (a conv feeding a generated
  // kernel): one reorder of its output, where NHWC cost a reorder on each side (ShuffleNet-v2's
  // branch convs before each channel shuffle). An NHWC output takes oneDNN's pick; so does a
  // plain input and output, and the ports reorder.
  bool blocked = is_blocked(layouts, vout) ||
                 (is_blocked(layouts, vx) && !is_nhwc(layouts, vout));
  const tag flat = plain_tag(nsp);
  tag src_tag = plain ? flat : blocked && is_blocked(layouts, vx) ? blocked_tag() : tag::any;
  tag dst_tag = plain ? flat : blocked ? blocked_tag() : tag::any;
  if (nsp != 2) src_tag = dst_tag = tag::any;  // plain at the ports; oneDNN picks inside
  try {
    dnnl::memory::desc xmd(xd, store, nsp == 2 ? user_tag(layouts, vx) : flat),
        omd(od, store, nsp == 2 ? user_tag(layouts, vout) : flat);
    dnnl::memory::desc wuser(wd, store, weight_tag(nsp, G > 1));
    dnnl::memory::desc xany(xd, math, src_tag), oany(od, store, dst_tag);
    dnnl::memory::desc wany = wconst.defined() ? dnnl::memory::desc(wd, math, tag::any) : wuser;
    dnnl::memory::desc bmd({od[1]}, store, tag::x);
    dnnl::post_ops po;
    if (d->epi.sum >= 0) po.append_sum(1.f);
    if (!append_activation(po, d->epi)) return nullptr;
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto alg = dnnl::algorithm::convolution_direct;
    auto pk = dnnl::prop_kind::forward_inference;
    auto make_desc = [&](const dnnl::memory::desc& x, const dnnl::memory::desc& o) {
      return vb >= 0
                 ? dnnl::convolution_forward::desc(pk, alg, x, wany, bmd, o, strides, dil, pl, pr)
                 : dnnl::convolution_forward::desc(pk, alg, x, wany, o, strides, dil, pl, pr);
    };
    double flops = 2.0 * double(shape_numel(os)) * double(shape_numel(Shape(ws.begin() + 1, ws.end())));
    double bytes = 4.0 * double(shape_numel(xs) + shape_numel(ws) + shape_numel(os));
    ThreadLimit limit(one_thread(flops, bytes));
    dnnl::convolution_forward::primitive_desc pd(make_desc(xany, oany), attr, engine());
    if (nsp == 2 && src_tag == tag::nChw16c && G == 1 && ws[2] == 3 && ws[3] == 3 && strides == dims{1, 1} &&
        dil == dims{0, 0} && winograd_enabled()) {
      // 3x3 stride 1 on blocked data: oneDNN's Winograd kernel where it has one for this shape
      // (about 1.2-1.4x faster than direct on squeezenet's expand convs, 2 threads).
      alg = dnnl::algorithm::convolution_winograd;
      try {
        pd = dnnl::convolution_forward::primitive_desc(make_desc(xany, oany), attr, engine());
      } catch (const dnnl::error&) {
        alg = dnnl::algorithm::convolution_direct;
      }
    }
    if (blocked && src_tag == tag::any && is_reference_impl(pd.impl_info_str())) {
      // A plain input into a blocked output with no kernel that reads it plain (a depthwise conv
      // after a generated kernel): the input is reordered to blocked, not both sides to NHWC.
      dnnl::memory::desc xb(xd, math, blocked_tag());
      dnnl::convolution_forward::primitive_desc both(make_desc(xb, oany), attr, engine());
      if (!is_reference_impl(both.impl_info_str())) pd = both;
    }
    if (blocked && is_reference_impl(pd.impl_info_str())) {
      // No fast blocked kernel for this case (odd groups, say): let oneDNN pick, ports reorder.
      dnnl::memory::desc xa(xd, math, tag::any), oa(od, store, tag::any);
      pd = dnnl::convolution_forward::primitive_desc(make_desc(xa, oa), attr, engine());
    }
    // No fast narrow kernel: float32 (16-bit data keeps oneDNN's reference conv, which beats
    // brrr's per-node reference kernel).
    if (math != store && is_reference_impl(pd.impl_info_str())) return nullptr;
    auto kern = std::make_unique<DnnlConv>();
    kern->prim = dnnl::convolution_forward(pd);
    kern->openmp = omp_get_max_threads() > 1;
    kern->impl = pd.impl_info_str();
    if (math == dt::bf16) kern->precision = "bf16";
    if (math == dt::f16) kern->precision = "fp16";
    make_port(kern->src, vx, xmd, pd.src_desc(), true, false);
    make_port(kern->dst, vout, omd, pd.dst_desc(), d->epi.sum >= 0, true);
    describe_reorders(*kern, kern->src, kern->dst, d->epi.sum >= 0);
    kern->sum = d->epi.sum;
    kern->dst_bytes = value_bytes(g, vout, layouts);  // blocked: with padding channels
    if (wconst.defined()) {  // reorder once; the kernel owns the packed copy
      Tensor wc = wconst.contiguous();
      kern->weights = reorder_weights(vw, wc.raw(), wuser, pd.weights_desc());
    } else {
      return nullptr;  // computed weights: the reference kernel
    }
    kern->args[DNNL_ARG_WEIGHTS] = kern->weights;
    if (vb >= 0) {
      kern->bias = dnnl::memory(bmd, engine(), DNNL_MEMORY_NONE);
      kern->bias_value = vb;
      kern->args[DNNL_ARG_BIAS] = kern->bias;
    }
    kern->scratch = dnnl::memory(pd.scratchpad_desc(), engine());
    kern->args[DNNL_ARG_SCRATCHPAD] = kern->scratch;
    return kern;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

}  // namespace

std::unique_ptr<LibraryKernel> make_dnnl_conv(const Graph& g, const plan::Kernel& k,
                                              const Layouts& layouts) {
  const plan::ConvDesc* d = plan::desc_of<plan::ConvDesc>(k);
  if (!d || !d->why.empty()) return nullptr;
  // Every tensor the same 16-bit type: a 16-bit conv throughout.
  const DType t = g.value(d->x).dtype;
  bool same = true;
  for (int v : {d->x, d->w, d->out, d->epi.bias, d->epi.sum})
    same = same && (v < 0 || g.value(v).dtype == t);
  if (same && t == DType::bf16) return make_conv(g, d, layouts, dt::bf16, dt::bf16);
  if (same && t == DType::f16) return make_conv(g, d, layouts, dt::f16, dt::f16);
  if (!same || t != DType::f32) return nullptr;
  // bf16 where the plan asks for it and oneDNN has a fast kernel for the case, else float32.
  if (d->math == DType::bf16)
    if (std::unique_ptr<LibraryKernel> c = make_conv(g, d, layouts, dt::bf16)) return c;
  return make_conv(g, d, layouts, dt::f32);
}

namespace {
// dnnl_cpu_isa_<isa>'s bits are set in every ISA oneDNN dispatches to that extends it.
bool has_isa(unsigned isa) { return (unsigned(dnnl_get_effective_cpu_isa()) & isa) == isa; }
}  // namespace

bool blocked_layouts_enabled(bool bf16_convs) {
  std::string l = env::text("BRRR_CONV_LAYOUT");
  if (l == "nhwc" || l == "plain") return false;
  if (l == "blocked") return true;
  if (bf16_convs && has_isa(dnnl_cpu_isa_avx512_core_amx)) return false;
  return has_isa(dnnl_cpu_isa_avx512_core) || has_isa(dnnl_cpu_isa_avx2);
}

int64_t channel_block() {
  static const int64_t b = has_isa(dnnl_cpu_isa_avx512_core) ? 16 : 8;
  return b;
}

bool winograd_enabled() {
  return !env::flag("BRRR_DISABLE_WINOGRAD");
}

namespace {

// Wide vectors where the machine has them: the scan reads what the pool just read, from cache.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool any_nan(const float* x,
                                                                          int64_t n) {
  int acc = 0;
#pragma omp simd reduction(| : acc)
  for (int64_t i = 0; i < n; ++i) acc |= x[i] != x[i];
  return acc != 0;
}
// bf16: exponent all ones and a nonzero fraction.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool any_nan(const bf16* x,
                                                                          int64_t n) {
  const uint16_t* b = reinterpret_cast<const uint16_t*>(x);
  int acc = 0;
#pragma omp simd reduction(| : acc)
  for (int64_t i = 0; i < n; ++i) acc |= (b[i] & 0x7fff) > 0x7f80;
  return acc != 0;
}

// Element offset of (n, c, h, w) in a rank-4 buffer stored in layout `l`.
struct Addr {
  int64_t C, H, W;
  char l;
  int64_t operator()(int64_t n, int64_t c, int64_t h, int64_t w) const {
    if (l == kNHWC) return ((n * H + h) * W + w) * C + c;
    if (l == kBlocked) {
      const int64_t B = channel_block(), cb = (C + B - 1) / B;
      return (((n * cb + c / B) * H + h) * W + w) * B + c % B;
    }
    return ((n * C + c) * H + h) * W + w;
  }
};

class DnnlPool : public LibraryKernel {
 public:
  dnnl::pooling_forward prim;
  Port src, dst;
  dnnl::memory scratch;
  std::unordered_map<int, dnnl::memory> args;
  dnnl::stream strm{engine()};
  // Max pooling: oneDNN's drops NaN, but a max propagates it (the reference, ReduceMax). One scan
  // of the input finds NaNs; only then are the windows holding them set to NaN.
  bool maxp = false;
  bool bf = false;  // bf16 data, else float32
  int64_t N = 0, x_elems = 0, OH = 0, OW = 0, kh = 0, kw = 0, sh = 0, sw = 0, ph = 0, pw = 0;
  Addr xa{}, ya{};

  size_t work_bytes() const override { return work_size({&scratch, &src.inner, &dst.inner}); }
  void use_work(char* p) override { work_bind(p, {&scratch, &src.inner, &dst.inner}); }

  void run(void* const* slots) override {
    src.user.set_data_handle(slots[src.value]);
    dst.user.set_data_handle(slots[dst.value]);
    if (src.reordered()) src.to_inner.execute(strm, src.user, src.inner);
    args[DNNL_ARG_SRC] = src.mem();
    args[DNNL_ARG_DST] = dst.mem();
    prim.execute(strm, args);
    if (dst.reordered()) dst.to_user.execute(strm, dst.inner, dst.user);
    strm.wait();
    if (!maxp) return;
    if (bf) {
      const bf16* x = static_cast<const bf16*>(slots[src.value]);
      if (any_nan(x, x_elems)) propagate_nan(x, static_cast<bf16*>(slots[dst.value]));
    } else {
      const float* x = static_cast<const float*>(slots[src.value]);
      if (any_nan(x, x_elems)) propagate_nan(x, static_cast<float*>(slots[dst.value]));
    }
  }

  template <class T>
  void propagate_nan(const T* x, T* y) const {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < xa.C; ++c)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            bool nan = false;
            for (int64_t i = 0; i < kh && !nan; ++i) {
              int64_t h = oh * sh - ph + i;
              if (h < 0 || h >= xa.H) continue;
              for (int64_t j = 0; j < kw && !nan; ++j) {
                int64_t w = ow * sw - pw + j;
                nan = w >= 0 && w < xa.W && std::isnan(float(x[xa(n, c, h, w)]));
              }
            }
            if (nan) y[ya(n, c, oh, ow)] = T(std::numeric_limits<float>::quiet_NaN());
          }
  }
};

}  // namespace

std::unique_ptr<LibraryKernel> make_dnnl_pool(const Graph& g, const plan::Kernel& k,
                                              const Layouts& layouts) {
  const plan::PoolDesc* d = plan::desc_of<plan::PoolDesc>(k);
  if (!d || !d->why.empty() || d->x < 0 || k.outputs.empty()) return nullptr;
  const int vx = d->x, vout = k.outputs[0];
  const Shape &xs = g.value(vx).shape, &os = g.value(vout).shape;
  if (xs.size() != 4 || os.size() != 4) return nullptr;
  const ops::Window& w = d->window;
  const std::vector<int64_t>& ks = w.k;
  const bool maxp = d->max;
  if (w.out[0] != os[2] || w.out[1] != os[3] || w.d[0] != 1 || w.d[1] != 1) return nullptr;
  dims xd(xs.begin(), xs.end()), od(os.begin(), os.end());
  dims strides = {w.s[0], w.s[1]}, kern_d = {ks[0], ks[1]};
  dims pl = {w.pb[0], w.pb[1]}, pr(2);
  dims used = xd;  // the input rows and columns some window reads
  for (size_t i = 0; i < 2; ++i) {
    pr[i] = (od[2 + i] - 1) * strides[i] + ks[i] - xd[2 + i] - pl[i];
    // Floor mode leaves input rows (columns) that no window reaches, a negative right padding
    // oneDNN refuses (a 2x2, stride 2 pool of an odd size): it pools the rows windows read.
    if (pr[i] < 0) used[2 + i] += pr[i], pr[i] = 0;
    if (used[2 + i] <= 0) return nullptr;
    // ceil_mode's extra right padding changes an including-padding average's divisor.
    if (!maxp && pr[i] != w.pe[i] && d->include_pad) return nullptr;
  }
  auto alg = maxp              ? dnnl::algorithm::pooling_max
             : d->include_pad ? dnnl::algorithm::pooling_avg_include_padding
                              : dnnl::algorithm::pooling_avg_exclude_padding;
  // float32 or bf16 data (oneDNN pools bf16 where the CPU has avx512_core).
  const DType t = g.value(vx).dtype;
  if ((t != DType::f32 && t != DType::bf16) || g.value(vout).dtype != t) return nullptr;
  const dt et = t == DType::bf16 ? dt::bf16 : dt::f32;
  try {
    // The input's buffer, viewed as the rows and columns the windows read.
    dnnl::memory::desc xmd(xd, et, user_tag(layouts, vx)), omd(od, et, user_tag(layouts, vout));
    if (used != xd) xmd = xmd.submemory_desc(used, dims{0, 0, 0, 0});
    // oneDNN pools between two layouts (NCHW in, blocked out: a generated kernel feeds a pool
    // whose consumer is blocked) only with its reference kernel, 20-90 ms on squeezenet1_1's pools
    // planned one kernel per op; the input is reordered to the output's layout first instead.
    const dnnl::memory::desc pool_x =
        user_tag(layouts, vx) == user_tag(layouts, vout)
            ? xmd
            : dnnl::memory::desc(used, et, user_tag(layouts, vout));
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, alg, pool_x, omd,
                                     strides, kern_d, pl, pr);
    dnnl::pooling_forward::primitive_desc pd(desc, attr, engine());
    auto kern = std::make_unique<DnnlPool>();
    kern->bf = t == DType::bf16;
    kern->prim = dnnl::pooling_forward(pd);
    if (maxp) {
      kern->maxp = true;
      kern->N = xs[0];
      kern->x_elems = int64_t(value_bytes(g, vx, layouts) / dtype_size(t));
      kern->OH = os[2], kern->OW = os[3], kern->kh = ks[0], kern->kw = ks[1];
      kern->sh = strides[0], kern->sw = strides[1], kern->ph = pl[0], kern->pw = pl[1];
      kern->xa = Addr{xs[1], xs[2], xs[3], layout_of(layouts, vx)};
      kern->ya = Addr{os[1], os[2], os[3], layout_of(layouts, vout)};
    }
    kern->openmp = omp_get_max_threads() > 1;
    make_port(kern->src, vx, xmd, pd.src_desc(), true, false);
    make_port(kern->dst, vout, omd, pd.dst_desc(), false, true);
    describe_reorders(*kern, kern->src, kern->dst, false);
    kern->scratch = dnnl::memory(pd.scratchpad_desc(), engine());
    kern->args[DNNL_ARG_SCRATCHPAD] = kern->scratch;
    return kern;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

}  // namespace brrr::cpu
#endif
