// Timing the reference executor node by node: a RunProfile for the doctor (kind "reference").
#pragma once
#include <map>
#include <string>

#include "brrr/graph.hpp"
#include "brrr/profile.hpp"

namespace brrr {

// Runs the shape-inferred graph once to warm up (and validate the inputs), then `reps` times
// timing every node; each kernel's time is its median over reps, wall_ms the median run.
RunProfile profile_reference(const Graph& g, const std::map<std::string, Tensor>& inputs, int reps);

}  // namespace brrr
