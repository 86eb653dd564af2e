// Compiles the translation units of one generated module side by side (compile_cpp per part,
// each cached on its own), on up to one thread per core.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/compiler.hpp"

namespace brrr::cpu {

// One module per part, in order; the first error any part raised is rethrown.
std::vector<std::shared_ptr<CompiledModule>> compile_parts(const std::vector<std::string>& parts,
                                                           const CompileOptions& opts);

}  // namespace brrr::cpu
