#include "ops/op_util.hpp"

namespace brrr {
using namespace ops;

void register_pooling_ops(OpTable& t) {}

}  // namespace brrr
