// The backend-neutral part of a profile record: a plan kernel's name, kind, ops, class and cost
// (compulsory bytes of the kernel as it runs). Shared by the CPU and CUDA executors' profiles:
// it reads only the plan and the graph, so it lives with the plan.
#pragma once
#include "brrr/profile.hpp"
#include "plan/kernel_ir.hpp"

namespace brrr::plan {

KernelRecord kernel_record(const Graph& g, const Kernel& k);
// The same for plan kernel i, with the plan's fusion-boundary reasons where it is the producer.
KernelRecord kernel_record(const Graph& g, const Plan& plan, size_t i);

}  // namespace brrr::plan
