// Sets an environment variable for one scope (switches that brrr reads when a Session is built).
#pragma once
#include <cstdlib>
#include <string>

#include "core/env.hpp"

namespace brrr_test {

struct EnvVar {
  std::string name;
  std::string old;
  bool had;
  EnvVar(const std::string& n, const std::string& v) : name(n) {
    auto o = brrr::env::raw(n.c_str());
    had = o.has_value();
    if (had) old = *o;
    setenv(n.c_str(), v.c_str(), 1);
  }
  ~EnvVar() {
    if (had)
      setenv(name.c_str(), old.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;
};

}  // namespace brrr_test
