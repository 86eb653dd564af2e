// The backend-neutral part of a profile record: a plan kernel's name, kind, ops, class and cost
// (compulsory bytes of the kernel as it runs). Shared by the CPU and CUDA sessions.
#pragma once
#include "brrr/profile.hpp"
#include "plan/kernel_ir.hpp"

namespace brrr::runtime {

KernelRecord kernel_record(const Graph& g, const plan::Kernel& k);

}  // namespace brrr::runtime
