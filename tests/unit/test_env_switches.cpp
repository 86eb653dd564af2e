// The BRRR_* switches: one table (src/core/env.cpp) that the README documents exactly, one strict
// parsing rule, and the compiler chosen by BRRR_CXX, else CXX, else g++.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "backend/cpu/compiler.hpp"
#include "core/env.hpp"
#include "env_var.hpp"
#include "hostile_util.hpp"

namespace brrr {
namespace {

namespace fs = std::filesystem;
using brrr_test::EnvVar;
using hostile::run_cli;

std::string cli_data() {
  return std::string(BRRR_TEST_DATA) + "/cli";
}

std::set<std::string> readme_switches() {
  std::ifstream f(fs::path(BRRR_TEST_DATA).parent_path().parent_path() / "README.md");
  std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  size_t a = text.find("## Environment switches");
  EXPECT_NE(a, std::string::npos) << "README.md has no 'Environment switches' section";
  if (a == std::string::npos) return {};
  size_t b = text.find("\n## ", a + 1);
  std::string sec = text.substr(a, b == std::string::npos ? std::string::npos : b - a);
  std::set<std::string> names;
  std::regex re("BRRR_[A-Z0-9_]+");
  for (auto it = std::sregex_iterator(sec.begin(), sec.end(), re); it != std::sregex_iterator();
       ++it)
    names.insert(it->str());
  return names;
}

TEST(EnvSwitches, ReadmeDocumentsExactlyTheTable) {
  std::set<std::string> table;
  for (const auto& s : env::switches()) {
    table.insert(s.name);
    EXPECT_NE(std::string(s.help), "") << s.name;
  }
  std::set<std::string> readme = readme_switches();
  for (const auto& n : table) EXPECT_TRUE(readme.count(n)) << n << " is not in README.md";
  for (const auto& n : readme) EXPECT_TRUE(table.count(n)) << n << " is not in core/env.cpp";
  EXPECT_GE(table.size(), 15u);
}

TEST(EnvSwitches, BadCompileTimeoutIsAOneLineError) {
  cpu::CompileOptions o;
  o.cache_dir = (hostile::scratch() / "env_timeout").string();
  for (const char* bad : {"abc", "-5", "0", "99999999999999999999", "3s", " 3"}) {
    EnvVar t("BRRR_COMPILE_TIMEOUT", bad);
    std::string m = hostile::error_of(
        [&] { cpu::compile_cpp("extern \"C\" int brrr_env_t() { return 1; }\n", o); });
    EXPECT_NE(m.find(fmt::format("BRRR_COMPILE_TIMEOUT='{}'", bad)), std::string::npos) << m;
    EXPECT_NE(m.find("1 to 86400"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(EnvSwitches, BadValuesFailTheCliWithExit2) {
  std::string run = fmt::format("run '{0}/add_relu.onnx' --data '{0}/data_ok' --check", cli_data());
  struct Case {
    const char* env;
    const char* want;
  };
  for (const Case& c : {Case{"BRRR_MAX_TENSOR_BYTES=garbage", "BRRR_MAX_TENSOR_BYTES='garbage'"},
                        Case{"BRRR_MAX_TENSOR_BYTES=-1", "BRRR_MAX_TENSOR_BYTES='-1'"},
                        Case{"BRRR_DISABLE_FUSION=yes", "BRRR_DISABLE_FUSION='yes'"},
                        Case{"BRRR_CONV_LAYOUT=nchw", "nhwc|blocked|plain"},
                        Case{"BRRR_DEBUG=verbose", "BRRR_DEBUG='verbose'"}}) {
    auto r = run_cli(run, c.env);
    EXPECT_EQ(r.code, 2) << c.env << ": " << r.err;
    EXPECT_NE(r.err.find(c.want), std::string::npos) << c.env << ": " << r.err;
  }
  // The accepted spellings still work.
  auto ok = run_cli(run, "BRRR_DISABLE_FUSION=0 BRRR_MAX_TENSOR_BYTES=1000000");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST(EnvSwitches, CxxIsUsedWhenBrrrCxxIsUnset) {
  fs::path d = hostile::scratch() / "env_cxx";
  fs::create_directories(d);
  fs::path log = d / "calls";
  fs::path w = d / "logging-g++";
  std::ofstream(w) << "#!/bin/sh\necho \"$1\" >> '" << log.string() << "'\n"
                   << "if [ \"$1\" = --version ]; then echo 'logging g++ 1'; exit 0; fi\n"
                   << "exec g++ \"$@\"\n";
  chmod(w.c_str(), 0755);
  EnvVar unset_brrr("BRRR_CXX", "");  // empty counts as unset
  EnvVar cxx("CXX", w.string());
  cpu::CompileOptions o;
  o.cache_dir = (d / "cache").string();
  auto m = cpu::compile_cpp("extern \"C\" int brrr_env_cxx() { return 4; }\n", o);
  EXPECT_EQ(reinterpret_cast<int (*)()>(m->symbol("brrr_env_cxx"))(), 4);
  EXPECT_NE(hostile::slurp(log).find("--version"), std::string::npos) << "CXX was not used";
  EXPECT_EQ(env::cxx(), w.string());
  EnvVar brrr_cxx("BRRR_CXX", "/bin/false");
  EXPECT_EQ(env::cxx(), "/bin/false") << "BRRR_CXX wins over CXX";
}

}  // namespace
}  // namespace brrr
