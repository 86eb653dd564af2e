// Whether this build has oneDNN. Without it (a machine without libdnnl) conv and pooling run on
// reference kernels: tests still check the values, not the kernel structure.
#pragma once

namespace brrr_test {
#ifdef BRRR_HAVE_DNNL
constexpr bool kDnnl = true;
#else
constexpr bool kDnnl = false;
#endif
}  // namespace brrr_test
