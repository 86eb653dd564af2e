#include "passes/choose_layouts.hpp"

#include <algorithm>

#include "core/env.hpp"
#include "plan/library_desc.hpp"

namespace brrr {

cpu::Layouts choose_layouts(const Graph& g, const plan::Plan& p) {
  using plan::KernelKind;
  size_t nv = g.values.size();
  if (env::flag("BRRR_NO_NHWC")) return cpu::Layouts(nv, cpu::kNCHW);  // for comparison
  std::vector<char> produced_ok(nv, 0), read_bad(nv, 0), unpadded(nv, 0);
  std::vector<std::vector<int>> ties;
  bool bf16_convs = false;  // a conv that computes in bf16 (blocked_layouts_enabled)
  for (const plan::Kernel& k : p.kernels) {
    if (const plan::ConvDesc* d = plan::desc_of<plan::ConvDesc>(k))
      bf16_convs = bf16_convs || d->math == DType::bf16 || g.value(d->x).dtype == DType::bf16;
    std::vector<int> ins, outs, whole;
    if (k.kind == KernelKind::Library) cpu::relayout_capable_values(g, k, &ins, &outs, &ties, &whole);
    for (int v : outs) produced_ok[size_t(v)] = 1;
    for (int v : whole) unpadded[size_t(v)] = 1;
    // A read by anything else (or of another input slot of this kernel) needs NCHW.
    for (int v : k.inputs)
      if (std::find(ins.begin(), ins.end(), v) == ins.end()) read_bad[size_t(v)] = 1;
    if (k.kind == KernelKind::Fused)
      for (const plan::Expr& e : k.exprs)
        if (e.kind == plan::Expr::Load) read_bad[size_t(e.value)] = 1;
  }
  for (int o : g.outputs) read_bad[size_t(o)] = 1;
  cpu::Layouts layouts(nv, cpu::kNCHW);
  for (size_t v = 0; v < nv; ++v) {
    const Shape& s = g.values[v].shape;
    if (produced_ok[v] && !read_bad[v] && s.size() == 4 && s[2] * s[3] > 1) layouts[v] = cpu::kNHWC;
  }
  // Channel-blocked where enabled: any channel count, except for kernels that need whole blocks.
  if (cpu::blocked_layouts_enabled(bf16_convs))
    for (size_t v = 0; v < nv; ++v)
      if (layouts[v] == cpu::kNHWC &&
          (!unpadded[v] || g.values[v].shape[1] % cpu::channel_block() == 0))
        layouts[v] = cpu::kBlocked;
  // Values tied to one layout share it: the blocked ones step down to NHWC where a member cannot
  // be blocked, then NHWC ones to NCHW where a member cannot be NHWC (H*W == 1 values are the same
  // bytes in every layout).
  for (char from : {cpu::kBlocked, cpu::kNHWC})
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& t : ties) {
        bool all = true;
        for (int v : t) {
          const Shape& s = g.value(v).shape;
          all = all && (layouts[size_t(v)] >= from || s[2] * s[3] <= 1);
        }
        if (all) continue;
        for (int v : t)
          if (layouts[size_t(v)] == from) layouts[size_t(v)] = char(from - 1), changed = true;
      }
    }
  return layouts;
}

}  // namespace brrr
