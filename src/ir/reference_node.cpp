#include <fmt/format.h>

#include "brrr/op.hpp"
#include "brrr/reference.hpp"

namespace brrr {

std::vector<Tensor> run_node_reference(const Graph& g, const Node& n, std::vector<Tensor> inputs) {
  BRRR_ASSERT(n.def != nullptr, "node not resolved; run infer_shapes first");
  KernelCtx ctx{n, std::move(inputs), {}};
  for (int o : n.outputs) {
    const Value& v = g.value(o);
    BRRR_ASSERT(v.typed, "output not typed");
    ctx.outputs.push_back(Tensor::empty(v.dtype, v.shape));
  }
  try {
    n.def->reference(ctx);
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.find(n.label()) == std::string::npos) throw Error(fmt::format("{}: {}", n.label(), msg));
    throw;
  }
  return std::move(ctx.outputs);
}

}  // namespace brrr
