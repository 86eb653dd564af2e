// choose_device_layouts: which values a CUDA plan keeps channels-last
// (src/passes/choose_device_layouts.cpp).
#pragma once
#include <vector>

#include "brrr/graph.hpp"
#include "plan/kernel_ir.hpp"

namespace brrr {

// Which rank-4 16-bit values a plan keeps channels-last (NHWC), where
// cuDNN's Tensor Core convolutions read and write them without the transposes it makes around
// NCHW data. The executor says what each kernel's device step can take (roles): a Conv whose
// input, residual and output may be NHWC (its input is transposed in when it is not), a pool
// kernel and a channel mean (GlobalAveragePool) that read NHWC. A value is NHWC when such a kernel
// produces it and every reader takes it (a pool's output follows its input; a residual follows
// the Conv's output); graph outputs stay NCHW. 1 per NHWC value.
struct DeviceLayoutRole {
  enum Kind { Other, Conv, Pool, ChannelMean } kind = Other;
  int x = -1, sum = -1, out = -1;  // the operands that may be NHWC (sum: a Conv's residual)
};
std::vector<char> choose_device_layouts(const Graph& g, const plan::Plan& p,
                                        const std::vector<DeviceLayoutRole>& roles);

}  // namespace brrr
