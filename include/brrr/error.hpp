// Two error families (DESIGN.md section 7): user/model errors throw brrr::Error with a message that
// names what is wrong; broken invariants abort with file and line.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace brrr {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

[[noreturn]] void internal_assert_failed(const char* cond, const char* file, int line,
                                         const std::string& msg);

}  // namespace brrr

// User error: the model, the input or the command line is wrong.
#define BRRR_CHECK(cond, ...)                                  \
  do {                                                         \
    if (!(cond)) ::brrr::fail(__VA_ARGS__);                    \
  } while (0)

// Internal invariant: a bug in brrr. Aborts with file and line.
#define BRRR_ASSERT(cond, ...)                                                            \
  do {                                                                                    \
    if (!(cond)) ::brrr::internal_assert_failed(#cond, __FILE__, __LINE__, "" __VA_ARGS__); \
  } while (0)
