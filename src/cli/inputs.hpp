// Random inputs for a model when the user gives no data: shared by run, bench and doctor.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "brrr/graph.hpp"

namespace brrr::cli {

// One random tensor: floats uniform in [-1, 1] (never all zeros: timing on zeros lies), integers
// 0 or 1 (valid as indices and token ids in any model), bools random.
Tensor random_tensor(DType t, const Shape& s, uint64_t seed);
// A random tensor for every graph input, seeded deterministically from `seed`.
std::map<std::string, Tensor> random_inputs(const Graph& g, uint64_t seed);

}  // namespace brrr::cli
