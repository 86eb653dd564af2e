// Every environment variable brrr reads: the BRRR_* switches are declared once in a table
// (env.cpp) with their type, default and help, and parsed by one rule; nothing else reads the
// environment.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace brrr::env {

enum class Kind { Flag, Int, Size, Seconds, Path, Enum };

struct Switch {
  const char* name;
  Kind kind;
  const char* default_value;  // as text; "" for none
  const char* accepted;       // Enum: "a|b|c"; otherwise ""
  int64_t lo, hi;             // Int, Size, Seconds: the accepted range
  const char* help;
};

// The table, in README order.
const std::vector<Switch>& switches();

// Flags: unset, "" or "0" false, "1" true. Numbers: strict decimal within the declared range.
// A bad value throws brrr::Error naming the variable, its value and what is accepted.
bool flag(const char* name);
int64_t integer(const char* name);   // Int
size_t size(const char* name);       // Size: bytes, > 0
int seconds(const char* name);       // Seconds: 1..86400
std::string text(const char* name);  // Path or Enum: the value, else the default

// Variables that are not brrr's own, read through here too (env.cpp is the only reader).
std::optional<std::string> raw(const char* name);
// $XDG_CACHE_HOME/brrr, else $HOME/.cache/brrr; "" when neither is set.
std::string user_cache_dir();
// $TMPDIR, else /tmp.
std::string temp_dir();
// $BRRR_CXX, else $CXX, else g++ (the compiler for generated C++ kernels).
std::string cxx();

}  // namespace brrr::env
