// oneDNN matmul for MatMul and Gemm: float32 data (operands read in bf16 where the plan says), or
// bfloat16 / float16 data throughout (a 16-bit model's GEMMs; float32 accumulation, bias and
// post-ops, one rounding of the result). Primitives are built once at plan time; a run only points
// the memory objects at the slot addresses and executes.
#include "backend/cpu/library.hpp"
#include "plan/library_desc.hpp"
#include "plan/operand_view.hpp"

#ifdef BRRR_HAVE_DNNL
#include "backend/cpu/dnnl_util.hpp"
#endif
#include "core/env.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace brrr::cpu {

int64_t padded_weight_pitch(int64_t rows, int64_t pitch, size_t esize) {
  if (rows < 64 || (int64_t(esize) * pitch) % 1024 != 0 || env::flag("BRRR_NO_WEIGHT_PITCH_PAD"))
    return pitch;
  return pitch + int64_t(64 / esize);
}

#ifdef BRRR_HAVE_DNNL
namespace {


class DnnlMatMul : public LibraryKernel {
 public:
  struct Operand {
    int value = -1;
    dnnl::memory mem;
    size_t offset = 0;  // bytes into the slot (a view that starts past the buffer's start)
  };
  dnnl::matmul prim;
  std::vector<Operand> ops;  // src, weights, [bias], dst (weights absent when prepacked)
  std::unordered_map<int, dnnl::memory> args;
  // Operands read in bf16: the slot's float32 values converted into the primitive's own buffer.
  struct Cast {
    int value = -1;
    dnnl::memory user, inner;
    dnnl::reorder convert;
    size_t offset = 0;
  };
  std::vector<Cast> casts;
  dnnl::memory packed;   // constant weights in the layout the primitive chose, made once
  dnnl::memory scratch;  // user scratchpad: no allocation inside execute
  dnnl::stream strm{engine()};

  int sum = -1, dst = -1;  // the sum post-op's addend, copied into dst unless it shares dst
  size_t dst_bytes = 0;

  size_t work_bytes() const override {
    size_t n = work_part_bytes(scratch);
    for (const Cast& c : casts) n += work_part_bytes(c.inner);
    return n;
  }
  void use_work(char* p) override {
    work_bind(p, {&scratch});
    p += work_part_bytes(scratch);
    for (Cast& c : casts) {
      work_bind(p, {&c.inner});
      p += work_part_bytes(c.inner);
    }
  }

  void run(void* const* slots) override {
    if (sum >= 0 && slots[sum] != slots[dst]) std::memmove(slots[dst], slots[sum], dst_bytes);
    for (Operand& o : ops) o.mem.set_data_handle(static_cast<char*>(slots[o.value]) + o.offset);
    for (Cast& c : casts) {
      c.user.set_data_handle(static_cast<char*>(slots[c.value]) + c.offset);
      c.convert.execute(strm, c.user, c.inner);
    }
    prim.execute(strm, args);
    strm.wait();
  }
};

dims padded(const Shape& s, size_t rank) {
  dims d(rank - s.size(), 1);
  d.insert(d.end(), s.begin(), s.end());
  return d;
}

// Strides of logical dims `d` stored row-major, or, when `trans`, stored with the last two dims
// swapped (a transposed view of the stored matrix).
dims strides_of(const dims& d, bool trans) {
  dims st(d.size());
  int64_t acc = 1;
  for (int i = int(d.size()) - 1; i >= 0; --i) {
    st[size_t(i)] = acc;
    acc *= d[size_t(i)];
  }
  if (trans) {
    size_t r = d.size();
    st[r - 1] = d[r - 2];
    st[r - 2] = 1;
  }
  return st;
}

// A view's strides padded to rank r (its leading batch dims of 1: the whole view's extent).
dims padded_strides(const std::vector<int64_t>& st, const Shape& s, size_t r) {
  int64_t extent = s.empty() ? 1 : s[0] * st[0];
  dims out(r - st.size(), extent);
  out.insert(out.end(), st.begin(), st.end());
  return out;
}

// Strides with every dim of size 1 moved outermost (its stride: the whole extent). Such a dim may
// hold any stride, but oneDNN 2.6's brgemm matmul takes only strides that order all dims densely:
// the merged-heads result [1,H,S,D] written into [1,S,H*D], its batch dim of 1 left with stride
// H*D between the others', sent P.V to the slower gemm:jit.
dims unit_dims_outermost(const dims& d, dims st) {
  int64_t extent = 1;
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] != 1) extent = std::max(extent, d[i] * st[i]);
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] == 1) st[i] = extent;
  return st;
}

// The packs of the innermost SharedPacks scope on this thread (none: every kernel packs its own).
thread_local SharedPacks::Impl* t_packs = nullptr;

}  // namespace

struct SharedPacks::Impl {
  struct Entry {
    const Graph* g;
    int value;                     // the constant's graph value
    dnnl::memory::desc user, want;  // how it is stored (strides: transposed?) and packed
    dnnl::memory mem;
  };
  std::vector<Entry> entries;
  int packed = 0, reused = 0;
};

namespace {

// Constant weight value v of g (its bytes at `data`, read as `user`) in the layout `want`: the
// pack a kernel made earlier in the same SharedPacks scope, else a new reorder.
dnnl::memory pack_weights(const Graph& g, int v, const void* data, const dnnl::memory::desc& user,
                          const dnnl::memory::desc& want) {
  if (t_packs)
    for (const SharedPacks::Impl::Entry& e : t_packs->entries)
      if (e.g == &g && e.value == v && e.user == user && e.want == want) {
        ++t_packs->reused;
        return e.mem;
      }
  dnnl::memory packed = reorder_weights(v, data, user, want);
  if (t_packs) {
    t_packs->entries.push_back({&g, v, user, want, packed});
    ++t_packs->packed;
  }
  return packed;
}

// The plain layout `md` (a prepacked weight oneDNN chose as rows, no inner blocks) with the row
// pitch padded_weight_pitch gives, or `md` itself.
dnnl::memory::desc pitch_padded(const dnnl::memory::desc& md, size_t esize) {
  const dnnl_memory_desc_t& c = md.data;
  if (c.format_kind != dnnl_blocked || c.ndims != 2 || c.format_desc.blocking.inner_nblks != 0)
    return md;
  const dnnl_dims_t& st = c.format_desc.blocking.strides;
  const int outer = st[0] >= st[1] ? 0 : 1, inner = 1 - outer;
  if (st[inner] != 1 || st[outer] != c.dims[inner]) return md;
  const int64_t pitch = padded_weight_pitch(c.dims[outer], st[outer], esize);
  if (pitch == st[outer]) return md;
  dims strides(2);
  strides[inner] = 1;
  strides[outer] = pitch;
  return dnnl::memory::desc(dims(c.dims, c.dims + 2), md.data_type(), strides);
}

}  // namespace

SharedPacks::SharedPacks() : impl_(std::make_unique<Impl>()), prev_(t_packs) { t_packs = impl_.get(); }
SharedPacks::~SharedPacks() { t_packs = prev_; }
int SharedPacks::packed() const { return impl_->packed; }
int SharedPacks::reused() const { return impl_->reused; }

LibraryThreads::LibraryThreads(int threads) : prev_(omp_get_max_threads()) {
  if (threads != prev_) omp_set_num_threads(threads);
}
LibraryThreads::~LibraryThreads() {
  if (omp_get_max_threads() != prev_) omp_set_num_threads(prev_);
}

namespace {

// oneDNN's reference implementations are orders of magnitude slower than its jit ones.
bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  return std::strncmp(pd.impl_info_str(), "ref", 3) == 0;
}

// The matmul of GEMM d with A and B read in `math` (f32, or bf16: weights converted once into
// the packed layout, activations converted per run; float32 accumulation, bias and output), or
// nullptr when oneDNN has no such matmul. Data stored in 16 bits (`store`, bias and residual
// alike) is read and written as it is, with `math` the same type.
std::unique_ptr<DnnlMatMul> make_matmul(const Graph& g, const plan::GemmDesc* d, dt math,
                                        dt store = dt::f32) {
  const int va = d->a, vb = d->b, vout = d->out, vbias = d->epi.bias;
  const bool ta = d->trans_a, tb = d->trans_b;
  // An operand read through a view (d->a_dims) has that shape; else its value's.
  const Shape& as = d->a_dims.empty() ? g.value(va).shape : d->a_dims;
  const Shape& bs = d->b_dims.empty() ? g.value(vb).shape : d->b_dims;
  const Shape& os = d->out_dims.empty() ? g.value(vout).shape : d->out_dims;
  if (as.size() < 2 || bs.size() < 2 || os.size() < 2) return nullptr;
  // A weight shared by every batch (B 2-D, or its batch dims all 1) takes A's batch dims into M:
  // one GEMM reads B once, where a batch of GEMMs, each as small as M = 1 when A is [S, 1, K],
  // would read it once per batch (ViT's in-projection: 197 GEMVs over a 7 MB weight).
  const bool shared_b = !ta && as.size() > 2 &&
                        shape_numel(bs) == bs[bs.size() - 1] * bs[bs.size() - 2] &&
                        plan::is_row_major(as, d->a_strides) &&
                        plan::is_row_major(bs, d->b_strides) &&
                        plan::is_row_major(os, d->out_strides);
  const size_t r = shared_b ? 2 : os.size();
  // Stored dims (rank r, batch dims padded with 1s: oneDNN broadcasts those) and their strides;
  // a transposed operand is the stored matrix read with its last two dims and strides swapped.
  dims ad, bd, od;
  if (shared_b) {
    ad = {shape_numel(as) / as.back(), as.back()};
    bd = {bs[bs.size() - 2], bs.back()};
    od = {shape_numel(os) / os.back(), os.back()};
  } else {
    ad = padded(as, r), bd = padded(bs, r), od = dims(os.begin(), os.end());
  }
  if (ta) std::swap(ad[r - 1], ad[r - 2]);
  if (tb) std::swap(bd[r - 1], bd[r - 2]);
  dims ast = strides_of(ad, ta), bst = strides_of(bd, tb);
  if (!shared_b) {  // a view's own strides; padded batch dims of 1 take any stride
    if (!d->a_strides.empty()) ast = padded_strides(d->a_strides, as, r);
    if (!d->b_strides.empty()) bst = padded_strides(d->b_strides, bs, r);
  }
  ast = unit_dims_outermost(ad, ast), bst = unit_dims_outermost(bd, bst);
  const bool narrow = math != store;
  const size_t esize = store == dt::f32 ? sizeof(float) : 2;
  try {
    dnnl::memory::desc amd(ad, store, ast), bmd(bd, store, bst);
    // A narrow operand is the primitive's own row-major copy, converted (and a transposed one
    // made plain) by a reorder at the start of each run.
    dnnl::memory::desc anarrow(ad, math, strides_of(ad, false)), bnarrow(bd, math, strides_of(bd, false));
    // Constant weights let the primitive pick its own layout (the reorder is done once, below):
    // with the stored layout, brgemm repacks B into its scratchpad on every run.
    const Tensor& wconst = g.value(vb).constant;
    bool prepack = wconst.defined() && !env::flag("BRRR_NO_PREPACK");
    dnnl::memory::desc bany = prepack ? dnnl::memory::desc(bd, math, tag::any) : narrow ? bnarrow : bmd;
    dims ost = strides_of(od, false);
    if (!shared_b && !d->out_strides.empty()) ost = padded_strides(d->out_strides, os, r);
    ost = unit_dims_outermost(od, ost);
    dnnl::memory::desc omd(od, store, ost);
    // Post-ops in the epilogue's order: the bias (the primitive's own), a residual sum (added
    // onto dst, which holds it when the run starts), then the activation.
    dnnl::post_ops po;
    if (d->scale != 1.f) {  // the operands' scalar Muls: on the product, before the sum
      if (vbias >= 0) return nullptr;
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, d->scale, 0.f);
    }
    if (d->epi.sum >= 0) po.append_sum(1.f);
    if (!append_activation(po, d->epi)) return nullptr;
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto kern = std::make_unique<DnnlMatMul>();
    dnnl::matmul::primitive_desc pd;
    double mm_bytes = double(esize) * double(shape_numel(as) + shape_numel(bs) + shape_numel(os));
    ThreadLimit limit(one_thread(2.0 * double(shape_numel(os)) * double(ad[r - 1]), mm_bytes));
    const dnnl::memory::desc& asrc = narrow ? anarrow : amd;
    dnnl::memory::desc biasmd;
    if (vbias >= 0) {
      dims bias_d(r, 1);
      bias_d[r - 1] = os.back();
      biasmd = dnnl::memory::desc(bias_d, store, strides_of(bias_d, false));
    }
    auto matmul_pd = [&](const dnnl::memory::desc& weights) {
      return vbias >= 0 ? dnnl::matmul::primitive_desc(
                              dnnl::matmul::desc(asrc, weights, biasmd, omd), attr, engine())
                        : dnnl::matmul::primitive_desc(dnnl::matmul::desc(asrc, weights, omd),
                                                       attr, engine());
    };
    pd = matmul_pd(bany);
    if (prepack) {
      const dnnl::memory::desc padded = pitch_padded(pd.weights_desc(), math == dt::f32 ? 4 : 2);
      if (padded != pd.weights_desc()) {
        try {
          pd = matmul_pd(padded);
        } catch (const dnnl::error&) {  // no kernel takes that pitch: the chosen layout stays
        }
      }
    }
    if (narrow && is_reference_impl(pd)) return nullptr;  // no fast narrow kernel: float32
    // 16-bit data without a fast kernel: still oneDNN's reference matmul (float32 accumulation),
    // which beats brrr's per-node reference kernel.
    kern->prim = dnnl::matmul(pd);
    kern->openmp = omp_get_max_threads() > 1;
    kern->impl = pd.impl_info_str();
    if (math == dt::bf16) kern->precision = "bf16";
    if (math == dt::f16) kern->precision = "fp16";
    auto add = [&](int arg, int value, const dnnl::memory::desc& md, int64_t offset = 0) {
      DnnlMatMul::Operand o{value, dnnl::memory(md, engine(), DNNL_MEMORY_NONE),
                            size_t(offset) * esize};
      kern->args[arg] = o.mem;
      kern->ops.push_back(o);
    };
    auto add_narrow = [&](int arg, int value, const dnnl::memory::desc& user,
                          const dnnl::memory::desc& inner, int64_t offset) {
      DnnlMatMul::Cast c{value, dnnl::memory(user, engine(), DNNL_MEMORY_NONE),
                         dnnl::memory(inner, engine()), {}, size_t(offset) * sizeof(float)};
      c.convert = dnnl::reorder(c.user, c.inner);
      kern->args[arg] = c.inner;
      kern->casts.push_back(std::move(c));
    };
    if (narrow) add_narrow(DNNL_ARG_SRC, va, amd, anarrow, d->a_offset);
    else add(DNNL_ARG_SRC, va, amd, d->a_offset);
    if (prepack) {
      Tensor wc = wconst.contiguous();
      kern->packed = pack_weights(g, vb, wc.raw(), bmd, pd.weights_desc());
      kern->args[DNNL_ARG_WEIGHTS] = kern->packed;
    } else if (narrow) {
      add_narrow(DNNL_ARG_WEIGHTS, vb, bmd, bnarrow, d->b_offset);
    } else {
      add(DNNL_ARG_WEIGHTS, vb, bmd, d->b_offset);
    }
    if (vbias >= 0) add(DNNL_ARG_BIAS, vbias, biasmd);
    add(DNNL_ARG_DST, vout, omd);
    kern->sum = d->epi.sum;
    kern->dst = vout;
    kern->dst_bytes = size_t(shape_numel(os)) * esize;
    kern->scratch = dnnl::memory(pd.scratchpad_desc(), engine());
    kern->args[DNNL_ARG_SCRATCHPAD] = kern->scratch;
    return kern;
  } catch (const dnnl::error&) {
    return nullptr;  // a case oneDNN does not implement: reference fallback
  }
}

}  // namespace

std::jthread start_gemm_jit_init(const std::vector<std::string>& impls) {
  if (std::none_of(impls.begin(), impls.end(),
                   [](const std::string& i) { return i.rfind("gemm:jit", 0) == 0; }))
    return {};
  return std::jthread([] {
    omp_set_num_threads(1);  // this thread's own count
    // 16x16x64: a 1x1x1 product takes a path that generates none of them.
    std::vector<float> a(16 * 64), b(64 * 16), c(16 * 16);
    (void)dnnl_sgemm('N', 'N', 16, 16, 64, 1.f, a.data(), 64, b.data(), 16, 0.f, c.data(), 16);
  });
}

std::unique_ptr<LibraryKernel> make_dnnl_kernel(const Graph& g, const plan::Kernel& k,
                                                const Layouts& layouts) {
  if (plan::desc_of<plan::ConvDesc>(k)) return make_dnnl_conv(g, k, layouts);
  if (plan::desc_of<plan::PoolDesc>(k)) return make_dnnl_pool(g, k, layouts);
  const plan::GemmDesc* d = plan::desc_of<plan::GemmDesc>(k);
  if (!d || !d->why.empty()) return nullptr;
  // Every operand float32, or every one (bias and residual too) the same 16-bit type.
  const DType t = g.value(d->a).dtype;
  for (int v : {d->a, d->b, d->c, d->out, d->epi.bias, d->epi.sum})
    if (v >= 0 && g.value(v).dtype != t) return nullptr;
  if (t == DType::bf16) return make_matmul(g, d, dt::bf16, dt::bf16);
  if (t == DType::f16) return make_matmul(g, d, dt::f16, dt::f16);
  if (t != DType::f32) return nullptr;
  // bf16 where the plan asks for it and oneDNN has a fast kernel for the case, else float32.
  if (d->math == DType::bf16)
    if (std::unique_ptr<DnnlMatMul> m = make_matmul(g, d, dt::bf16)) return m;
  return make_matmul(g, d, dt::f32);
}

#else

struct SharedPacks::Impl {};
SharedPacks::SharedPacks() : impl_(std::make_unique<Impl>()) {}
SharedPacks::~SharedPacks() = default;
int SharedPacks::packed() const { return 0; }
int SharedPacks::reused() const { return 0; }

LibraryThreads::LibraryThreads(int) {}
LibraryThreads::~LibraryThreads() {}

std::unique_ptr<LibraryKernel> make_dnnl_kernel(const Graph&, const plan::Kernel&, const Layouts&) {
  return nullptr;
}

std::jthread start_gemm_jit_init(const std::vector<std::string>&) { return {}; }

bool blocked_layouts_enabled(bool) { return false; }
int64_t channel_block() { return 8; }
bool winograd_enabled() { return false; }

#endif

}  // namespace brrr::cpu
