// Headers embedded at build time (src/backend/embedded_headers.cpp.in), each under the name
// generated sources include it by: "brrr/scalar_ops.h" (pasted into every C++ source, included
// by every CUDA one) and "backend/cuda/device/*.cuh" (NVRTC's include table). Host builds include
// the same files from the source tree by the same names (-Iinclude -Isrc).
#pragma once
#include <string_view>
#include <vector>

namespace brrr {

struct EmbeddedHeader {
  const char* name;
  const char* text;
};

const std::vector<EmbeddedHeader>& embedded_headers();
// The text of embedded header `name`; throws brrr::Error when there is none by that name.
const char* embedded_header(std::string_view name);

}  // namespace brrr
