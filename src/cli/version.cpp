#include "cli/version.hpp"

#include <fmt/format.h>

namespace brrr::cli {

extern const char* const kBuildCommit;  // generated at build time (cmake/cli_commit.cmake)

std::string version_text() {
  std::string backends = "cpu, reference";
#ifdef BRRR_HAVE_CUDA
  backends += ", cuda";
#endif
  std::string libs = BRRR_BUILT_IN_LIBS;
#ifdef BRRR_HAVE_SLEEF
  libs += libs.empty() ? "SLEEF" : ", SLEEF";
#endif
#ifndef BRRR_HAVE_DNNL
  libs += libs.empty() ? "" : ", ";
  libs += "no oneDNN (contractions, convs and pools on brrr's own kernels)";
#endif
  return fmt::format(
      "brrr {}\ncommit: {}\nbuild: {}, {} {}\nbackends: {}\nlibraries: {}\n", BRRR_VERSION,
      kBuildCommit, BRRR_BUILD_TYPE,
#if defined(__clang__)
      "clang", __clang_version__,
#else
      "g++", __VERSION__,
#endif
      backends, libs.empty() ? "none optional" : libs);
}

}  // namespace brrr::cli
