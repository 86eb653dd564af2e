// `brrr bench MODEL.onnx`: the trtexec-style report (latency percentiles, throughput, kernels,
// cold compile and warm load) and its --json record; --iterations, --duration and --warmup.
#include <nlohmann/json.hpp>

#include "../unit/onnx_builder.hpp"
#include "cli_util.hpp"

namespace brrr::cli_test {
namespace {

ScratchCleanup cleanup;

nlohmann::json bench_json(const std::string& args, CliResult* r = nullptr) {
  fs::path json = scratch() / "bench_model.json";
  fs::remove(json);
  CliResult res = run_cli("bench " + args + " --json " + json.string());
  EXPECT_EQ(res.code, 0) << res.out << res.err;
  if (r) *r = res;
  return res.code == 0 ? nlohmann::json::parse(slurp(json)) : nlohmann::json::array({{}});
}

TEST(CliBench, ModelReportAndJson) {
  std::string m = cli_data() + "/symbolic_batch.onnx";  // x: [batch, 3]
  CliResult r;
  nlohmann::json j = bench_json(m + " --shape x:4x3 --iterations 25 --warmup 3", &r);
  for (const char* line :
       {"model: ", "backend: cpu, threads: ", "shapes: x:4x3\n", "cold compile ",
        "generated code: compiled)", "warm load ", "generated code: from cache)",
        "kernels: 1 (1 generated, 0 library, 0 "
        "copy, 0 on the host)",
        "timed: 25 runs after 3 warm-up runs", "latency: min ", ", median ", ", p90 ", ", p99 ",
        ", max ", "throughput: ", "samples/s (batch 4, the symbolic leading dim)"})
    EXPECT_TRUE(has(r.out, line)) << line << "\n" << r.out;
  ASSERT_EQ(j.size(), 1u);
  const nlohmann::json& rec = j[0];
  EXPECT_EQ(rec["variant"], "fused");
  EXPECT_EQ(rec["backend"], "cpu");
  EXPECT_EQ(rec["precision"], "fp32");
  EXPECT_EQ(rec["iterations"], 25);
  EXPECT_EQ(rec["warmup"], 3);
  EXPECT_EQ(rec["batch"], 4);
  EXPECT_EQ(rec["shapes"]["x"], nlohmann::json({4, 3}));
  EXPECT_EQ(rec["kernels"], 1);
  EXPECT_EQ(rec["cold_code"], "compiled");
  EXPECT_EQ(rec["warm_code"], "from cache");
  for (const char* k : {"device", "brrr_version"}) EXPECT_FALSE(rec[k].get<std::string>().empty());
  const nlohmann::json& l = rec["latency_ms"];
  EXPECT_LE(l["min"].get<double>(), l["median"].get<double>());
  EXPECT_LE(l["median"].get<double>(), l["p90"].get<double>());
  EXPECT_LE(l["p90"].get<double>(), l["p99"].get<double>());
  EXPECT_LE(l["p99"].get<double>(), l["max"].get<double>());
  EXPECT_EQ(rec["ms"], l["median"]);
  EXPECT_GT(rec["throughput_per_s"].get<double>(), 0);
  EXPECT_TRUE(rec["queued_ms_per_run"].is_null());  // CUDA only
  EXPECT_FALSE(has(r.out, "queued: ")) << r.out;
  EXPECT_DOUBLE_EQ(rec["samples_per_s"].get<double>(), 4 * rec["throughput_per_s"].get<double>());
  // Cold runs the C++ compiler; warm reads the cached object.
  EXPECT_GT(rec["cold_compile_ms"].get<double>(), rec["warm_load_ms"].get<double>());
}

// Static shapes: no batch is known, so throughput is per inference only.
TEST(CliBench, StaticShapesHaveNoBatch) {
  CliResult r;
  nlohmann::json j = bench_json(cli_data() + "/add_relu.onnx --iterations 5", &r);
  EXPECT_FALSE(has(r.out, "samples/s")) << r.out;
  EXPECT_TRUE(j[0]["samples_per_s"].is_null()) << j.dump();
  EXPECT_EQ(j[0]["batch"], 0);
}

TEST(CliBench, DurationRunsUntilTimeIsUp) {
  auto t0 = std::chrono::steady_clock::now();
  nlohmann::json j = bench_json(cli_data() + "/add_relu.onnx --duration 0.3 --warmup 0");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(j[0]["iterations"].get<int>(), 1) << j.dump();
  EXPECT_GE(s, 0.3);
}

TEST(CliBench, TimingOptionsNeedAModel) {
  std::string m = cli_data() + "/add_relu.onnx";
  expect_usage_error(run_cli("bench add_mul --iterations 5"), "time MODEL.onnx files");
  expect_usage_error(run_cli("bench " + m + " --iterations 5 --duration 1"), "--iterations");
  expect_usage_error(run_cli("bench " + m + " mlp_b1 --backend cuda"),
                     "give built-in workloads or MODEL.onnx files, not both");
  expect_usage_error(run_cli("bench " + m + " --duration -1"), "--duration");
}

}  // namespace
}  // namespace brrr::cli_test
