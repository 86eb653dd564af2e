// The CPU reference executor: simple and correct for every op; the oracle for every fast path.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "brrr/graph.hpp"

namespace brrr {

struct KernelCtx;
// Calls n's reference kernel on ctx and guarantees its results land in the output buffers the
// caller allocated (kernels may replace ctx.outputs[i] with a new tensor; this copies it back).
// Every executor that hands a kernel pre-placed buffers (arena slots, host staging) must use it.
void call_reference(const Node& n, KernelCtx& ctx);

// Runs one node with its reference kernel; outputs are allocated from the inferred shapes.
std::vector<Tensor> run_node_reference(const Graph& g, const Node& n, std::vector<Tensor> inputs);

// Runs a shape-inferred graph on named inputs; returns outputs in g.outputs order.
std::vector<Tensor> run_reference(const Graph& g, const std::map<std::string, Tensor>& inputs);

}  // namespace brrr
