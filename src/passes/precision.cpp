// The precision pass: on a Target whose library computes float32 contractions in a narrower
// type (the CPU's oneDNN at --precision bf16, cuBLASLt and cuDNN at tf32), every float32 GEMM
// and conv library kernel reads its operands in that type. The decision is the plan's: the
// executor reads GemmDesc::math / tf32 and ConvDesc's, never the session's options. Accumulation, bias, post-ops and the stored
// output stay float32, and so do generated kernels, so the error stays that of one rounding of
// each operand.
#include "plan/library_desc.hpp"
#include "plan/target.hpp"

namespace brrr::plan {

namespace {

bool all_f32(const Graph& g, std::initializer_list<int> values) {
  for (int v : values)
    if (v >= 0 && g.value(v).dtype != DType::f32) return false;
  return true;
}

// Output columns per group of the contraction (N of a GEMM, output channels per group of a conv).
int64_t columns(const Graph& g, const GemmDesc& d) { return d.N > 0 ? d.N : g.value(d.out).shape.back(); }
int64_t columns(const Graph& g, const ConvDesc& d) {
  const Shape& w = g.value(d.w).shape;
  return w.empty() || d.groups < 1 ? 0 : w[0] / d.groups;
}

// A copy of descriptor D of kernel k with the Target's math set, or nullptr when k has no such
// descriptor that a library call runs on float32 data, or too few columns for it to pay
// (Target::narrow_min_columns: on the CPU each call converts its activation operand, a read and a
// write of every element, while the halved weight bytes and doubled multiply rate save about one
// column's work per column; a depthwise conv lost 0.01-0.04 ms per call on mobilenet_v3_small).
template <class D>
std::shared_ptr<const LibraryDesc> with_math(const Graph& g, const Kernel& k, const Target& t) {
  const D* d = desc_of<D>(k);
  if (!d || !d->why.empty()) return nullptr;
  if constexpr (std::is_same_v<D, GemmDesc>) {
    if (!all_f32(g, {d->a, d->b, d->c, d->out})) return nullptr;
  } else {
    if (!all_f32(g, {d->x, d->w, d->out})) return nullptr;
  }
  if (columns(g, *d) < t.narrow_min_columns) return nullptr;
  D copy = *d;
  copy.math = t.library_math;
  copy.tf32 = t.library_tf32;
  return std::make_shared<const LibraryDesc>(std::move(copy));
}

}  // namespace

int choose_precision(const Graph& g, Plan& plan, const Target& target) {
  if (target.library_math == DType::f32 && !target.library_tf32) return 0;
  int n = 0;
  for (Kernel& k : plan.kernels) {
    if (k.kind != KernelKind::Library) continue;
    std::shared_ptr<const LibraryDesc> d = with_math<GemmDesc>(g, k, target);
    if (!d) d = with_math<ConvDesc>(g, k, target);
    if (!d) continue;
    k.lib = std::move(d);
    ++n;
  }
  return n;
}

}  // namespace brrr::plan
