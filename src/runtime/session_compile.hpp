// The compile pipeline's options for a Session's options (src/runtime/session.cpp): what a
// Session compiles, for callers that want the same plan without running it (the doctor's fusion
// remedy prices the fused plan).
#pragma once
#include "brrr/session.hpp"
#include "passes/pipeline.hpp"

namespace brrr {

CompileOptions session_compile_options(const SessionOptions& opts);

}  // namespace brrr
