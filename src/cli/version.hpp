// `brrr --version`: what this binary is and what was built into it.
#pragma once
#include <string>

namespace brrr::cli {

// Several lines: version, git commit, build type and compiler, backends, libraries.
std::string version_text();

}  // namespace brrr::cli
