#include <fmt/format.h>

#include <cstring>

#include "brrr/op.hpp"
#include "brrr/reference.hpp"

namespace brrr {

void call_reference(const Node& n, KernelCtx& ctx) {
  std::vector<Tensor> placed = ctx.outputs;
  try {
    n.def->reference(ctx);
  } catch (const Error& e) {
    // Errors found while computing (integer division by zero, a dtype a kernel lacks) name the
    // node, its op and its inputs, as shape inference's do.
    std::string msg = e.what();
    if (msg.find(n.label()) != std::string::npos) throw;
    std::string ins;
    for (size_t i = 0; i < ctx.inputs.size(); ++i) {
      const Tensor& t = ctx.inputs[i];
      ins += i ? ", " : "";
      ins +=
          t.defined() ? fmt::format("{}{}", dtype_name(t.dtype()), shape_str(t.shape())) : "<none>";
    }
    throw Error(fmt::format("{}: {} (inputs: {})", n.label(), msg, ins));
  }
  for (size_t i = 0; i < placed.size() && i < ctx.outputs.size(); ++i) {
    Tensor& got = ctx.outputs[i];
    Tensor& want = placed[i];
    if (!want.defined() || (got.same_storage(want) && got.offset() == want.offset() &&
                            got.strides() == want.strides()))
      continue;
    BRRR_ASSERT(got.defined() && got.dtype() == want.dtype() && got.shape() == want.shape(),
                "reference kernel produced an output of the wrong dtype or shape");
    Tensor src = got.contiguous();
    if (want.nbytes()) std::memcpy(want.raw(), src.raw(), want.nbytes());
    got = want;
  }
}

std::vector<Tensor> run_node_reference(const Graph& g, const Node& n, std::vector<Tensor> inputs) {
  BRRR_ASSERT(n.def != nullptr, "node not resolved; run infer_shapes first");
  KernelCtx ctx{n, std::move(inputs), {}};
  for (int o : n.outputs) {
    const Value& v = g.value(o);
    // Omitted optional outputs the op does not produce stay untyped (infer_shapes allows them
    // only unnamed and after the ones it produces): the kernel gets no tensor for them.
    if (!v.typed && v.name.empty()) break;
    BRRR_ASSERT(v.typed, "output not typed");
    ctx.outputs.push_back(Tensor::empty(v.dtype, v.shape));
  }
  try {
    call_reference(n, ctx);
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.find(n.label()) == std::string::npos) throw Error(fmt::format("{}: {}", n.label(), msg));
    throw;
  }
  return std::move(ctx.outputs);
}

}  // namespace brrr
