#include "ops/op_util.hpp"

namespace brrr {
using namespace ops;

void register_normalization_ops(OpTable& t) {}

}  // namespace brrr
