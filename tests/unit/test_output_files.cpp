// Files brrr writes: a full disk (/dev/full) or a missing folder is a one-line error with exit 2,
// never exit 0 with an empty file; output paths are checked before any work. The ceilings cache
// is validated when read, and the HTML roofline stays bounded on degenerate ceilings.
#include <gtest/gtest.h>

#include "sanitized.hpp"
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "bounded_run.hpp"
#include "brrr/doctor.hpp"
#include "brrr/error.hpp"
#include "core/file_io.hpp"
#include "hostile_util.hpp"

namespace brrr {
namespace {

namespace fs = std::filesystem;
using doctor::Ceilings;
using hostile::run_cli;

std::string model() {
  return std::string(BRRR_TEST_DATA) + "/cli/add_relu.onnx";
}

Ceilings fixed_ceilings() {
  Ceilings c;
  c.backend = "cpu";
  c.threads = 2;
  c.bandwidth_gbs = 20;
  c.memcpy_gbs = 10;
  c.peak_gflops = {{"fp32", 500}};
  c.special_gops = {{"exp", 5}};
  c.dispatch_us = 1;
  c.fork_join_us = 2;
  c.kernel_call_us = 0.01;
  return c;
}

// A cached ceilings file where run_cli's doctor and probe look, so they do not probe.
void cache_ceilings(const nlohmann::json& j) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  fs::path dir = hostile::scratch() / "xdg" / "brrr";
  fs::create_directories(dir);
  std::ofstream(dir / fmt::format("ceilings-{}-cpu.json", host)) << j.dump(2);
}

TEST(OutputFiles, FullDiskIsAnErrorForEveryOutput) {
  cache_ceilings(doctor::ceilings_to_json(fixed_ceilings()));
  fs::path link = hostile::scratch() / "full_link.json";
  fs::remove(link);
  fs::create_symlink("/dev/full", link);
  for (std::string opt : {"--json", "--trace", "--html", "--save-profile"}) {
    for (std::string path : {std::string("/dev/full"), link.string()}) {
      auto r = run_cli(fmt::format("doctor '{}' --reps 1 {} '{}'", model(), opt, path));
      EXPECT_EQ(r.code, 2) << opt << " " << path << ": " << r.err;
      EXPECT_NE(r.err.find("cannot write '" + path + "': No space left on device"),
                std::string::npos)
          << opt << ": " << r.err;
    }
  }
  auto p = run_cli("probe --json /dev/full");
  EXPECT_EQ(p.code, 2) << p.err;
  EXPECT_NE(p.err.find("No space left on device"), std::string::npos) << p.err;
  auto b = run_cli(fmt::format("bench '{}' --reps 1 --json '{}'", model(), link.string()));
  EXPECT_EQ(b.code, 2) << b.err;
  EXPECT_NE(b.err.find("No space left on device"), std::string::npos) << b.err;
}

// A regular file that cannot grow (RLIMIT_FSIZE, as on a full disk): the error names the file,
// nothing partial is published, and an older file under the name stays whole.
TEST(OutputFiles, WriteThatRunsOutOfSpaceIsAnErrorAndPublishesNothing) {
  if (BRRR_TEST_SANITIZED)
    GTEST_SKIP() << "under a sanitizer: a file-size limit also stops the sanitizer's and LLVM "
                    "OpenMP's own files (OMP: System error #27); the main build runs this test";
  cache_ceilings(doctor::ceilings_to_json(fixed_ceilings()));
  fs::path out = hostile::scratch() / "limited_report.json";
  fs::remove(out);
  ASSERT_EQ(run_cli(fmt::format("doctor '{}' --reps 1", model())).code, 0);  // kernels cached
  // Only brrr runs under the limit; its stderr goes through a pipe (which the limit spares).
  auto limited = [&](const std::string& args) {
    fs::path err = hostile::scratch() / "limited_err", rc = hostile::scratch() / "limited_rc";
    std::string cmd = fmt::format(
        "(ulimit -f 1; trap '' XFSZ; XDG_CACHE_HOME='{}' '{}' {} 2>&1 >/dev/null; echo $? >&3) "
        "3>'{}' | cat >'{}'",
        (hostile::scratch() / "xdg").string(), BRRR_CLI, args, rc.string(), err.string());
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return std::make_pair(std::atoi(hostile::slurp(rc).c_str()), hostile::slurp(err));
  };
  auto [code, err] =
      limited(fmt::format("doctor '{}' --reps 1 --json '{}'", model(), out.string()));
  EXPECT_EQ(code, 2) << err;
  EXPECT_NE(err.find("cannot write '" + out.string() + "': File too large"), std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(out)) << "a partial report was published";
  // probe: the cache file keeps its old (valid) content and the command fails.
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  fs::path cached = hostile::scratch() / "xdg" / "brrr" / fmt::format("ceilings-{}-cpu.json", host);
  std::string before = hostile::slurp(cached);
  auto [pcode, perr] = limited("probe --refresh");
  EXPECT_EQ(pcode, 2) << perr;
  EXPECT_NE(perr.find("File too large"), std::string::npos) << perr;
  EXPECT_EQ(hostile::slurp(cached), before) << "the ceilings cache was damaged";
  for (const auto& e : fs::directory_iterator(cached.parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(OutputFiles, BadOutputPathFailsBeforeProfiling) {
  cache_ceilings(doctor::ceilings_to_json(fixed_ceilings()));
  for (std::string opt : {"--json", "--trace", "--html", "--save-profile"}) {
    auto r = run_cli(fmt::format("doctor '{}' {} /nonexistent/x.json", model(), opt));
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("/nonexistent"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("profiling"), std::string::npos) << opt << ": started work: " << r.err;
  }
  fs::path d = hostile::scratch() / "a_dir";
  fs::create_directories(d);
  auto r = run_cli(fmt::format("bench '{}' --json '{}'", model(), d.string()));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
}

TEST(OutputFiles, WriteFileReplacesWholeOrNothing) {
  fs::path d = hostile::scratch() / "writes";
  fs::create_directories(d);
  fs::path f = d / "out.json";
  write_file(f.string(), "old");
  EXPECT_THROW(write_file((d / "missing" / "x").string(), "new"), Error);
  write_file(f.string(), "new");
  EXPECT_EQ(hostile::slurp(f), "new");
  int files = 0;
  for (const auto& e : fs::directory_iterator(d)) files += e.path().filename() != "out.json";
  EXPECT_EQ(files, 0) << "a temporary file was left behind";
  if (geteuid() != 0) {  // root ignores permission bits
    fs::path ro = d / "ro";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(check_output_path((ro / "x").string(), "--json"), Error);
    EXPECT_THROW(write_file((ro / "x").string(), "x"), Error);
    fs::permissions(ro, fs::perms::owner_all);
  }
}

TEST(CeilingsCache, DegenerateValuesAreRejected) {
  auto with = [](const char* key, double v) {
    nlohmann::json j = doctor::ceilings_to_json(fixed_ceilings());
    j[key] = v;
    return j;
  };
  EXPECT_NO_THROW(doctor::ceilings_from_json(doctor::ceilings_to_json(fixed_ceilings())));
  for (auto [key, v] : std::vector<std::pair<const char*, double>>{{"bandwidth_gbs", -5},
                                                                   {"bandwidth_gbs", 0},
                                                                   {"bandwidth_gbs", 1e300},
                                                                   {"dispatch_us", -1},
                                                                   {"fork_join_us", 1e200},
                                                                   {"threads", 0}})
    EXPECT_THROW(doctor::ceilings_from_json(with(key, v)), Error) << key << " = " << v;
  nlohmann::json j = doctor::ceilings_to_json(fixed_ceilings());
  j["peak_gflops"]["fp32"] = -1;
  EXPECT_THROW(doctor::ceilings_from_json(j), Error);
  j["peak_gflops"] = nlohmann::json::object();
  EXPECT_THROW(doctor::ceilings_from_json(j), Error);
}

TEST(CeilingsCache, ProbeIgnoresANegativeBandwidthWithOneWarning) {
  nlohmann::json j = doctor::ceilings_to_json(fixed_ceilings());
  j["bandwidth_gbs"] = -5;
  cache_ceilings(j);
  auto r = run_cli("probe");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("ignoring the cached ceilings"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bandwidth_gbs = -5"), std::string::npos) << r.err;
  // Re-probed and cached again: valid now.
  auto again = run_cli("probe");
  EXPECT_EQ(again.err.find("ignoring"), std::string::npos) << again.err;
  cache_ceilings(doctor::ceilings_to_json(fixed_ceilings()));
}

TEST(DoctorHtml, DegenerateCeilingsStayBounded) {
  std::string r = brrr_test::run_bounded(
      [] {
        for (double bw : {-5.0, 0.0, double(NAN), double(INFINITY), 1e-300}) {
          Ceilings c = fixed_ceilings();
          c.bandwidth_gbs = bw;
          RunProfile p;
          p.backend = "cpu";
          p.wall_ms = 2;
          KernelRecord k;
          k.name = "relu";
          k.kind = "fused";
          k.ops = {"Relu"};
          k.cls = OpClass::elementwise;
          k.cost.flops = 1e6;
          k.cost.bytes = 8e6;
          k.time_ms = 1;
          p.kernels.push_back(k);
          std::string h = doctor::render_html(doctor::diagnose(p, c, {.model = "m.onnx"}));
          if (h.size() > (1 << 20)) return fmt::format("bandwidth {}: {} bytes", bw, h.size());
          if (h.find("</html>") == std::string::npos) return std::string("page not finished");
        }
        return std::string();
      },
      30, size_t(2) << 30);
  EXPECT_EQ(r, "");
}

}  // namespace
}  // namespace brrr
