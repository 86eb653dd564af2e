// The precision pass: on a Target whose library computes float32 contractions in a narrower
// type (the CPU's oneDNN at --precision bf16), every float32 GEMM and conv library kernel reads
// its operands in that type. The decision is the plan's: the executor reads GemmDesc::math and
// ConvDesc::math, never the session's options. Accumulation, bias, post-ops and the stored
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

// A copy of descriptor D of kernel k with math set, or nullptr when k has no such descriptor
// that a library call runs on float32 data.
template <class D>
std::shared_ptr<const LibraryDesc> with_math(const Graph& g, const Kernel& k, DType math) {
  const D* d = desc_of<D>(k);
  if (!d || !d->why.empty()) return nullptr;
  if constexpr (std::is_same_v<D, GemmDesc>) {
    if (!all_f32(g, {d->a, d->b, d->c, d->out})) return nullptr;
  } else {
    if (!all_f32(g, {d->x, d->w, d->out})) return nullptr;
  }
  D copy = *d;
  copy.math = math;
  return std::make_shared<const LibraryDesc>(std::move(copy));
}

}  // namespace

int choose_precision(const Graph& g, Plan& plan, const Target& target) {
  if (target.library_math == DType::f32) return 0;
  int n = 0;
  for (Kernel& k : plan.kernels) {
    if (k.kind != KernelKind::Library) continue;
    std::shared_ptr<const LibraryDesc> d = with_math<GemmDesc>(g, k, target.library_math);
    if (!d) d = with_math<ConvDesc>(g, k, target.library_math);
    if (!d) continue;
    k.lib = std::move(d);
    ++n;
  }
  return n;
}

}  // namespace brrr::plan
