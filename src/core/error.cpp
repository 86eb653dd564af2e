#include "brrr/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace brrr {

void internal_assert_failed(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "brrr internal error at %s:%d: %s %s\n(this is a bug in brrr)\n", file, line,
               cond, msg.c_str());
  std::abort();
}

}  // namespace brrr
