// brrr from another C++ project: load an example model, run it on its test_data_set_0 inputs,
// compare with the reference outputs there, and print where the time of one run goes.
//
//   brrr_example MODEL_DIR [cpu|cuda]     (MODEL_DIR holds model.onnx and test_data_set_0/)
#include <brrr/error.hpp>
#include <brrr/onnx.hpp>
#include <brrr/session.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace {

// Worst excess over |got - exp| <= 1e-6 * max|exp| + 1e-4 * |exp| (brrr run --check's default
// tolerance); <= 0 means every element is within it. The absolute term scales with the output so
// that outputs as small as mobilenet_v3_small's (about 1e-9) are judged by relative error.
double worst_excess(const brrr::Tensor& got, const brrr::Tensor& exp) {
  std::vector<double> g = got.to_double_vector(), e = exp.to_double_vector();
  double scale = 0;
  for (double v : e) scale = std::max(scale, std::fabs(v));
  double worst = -1;
  for (size_t i = 0; i < e.size(); ++i) {
    double excess = std::fabs(g[i] - e[i]) - (1e-6 * scale + 1e-4 * std::fabs(e[i]));
    if (std::isnan(excess)) return INFINITY;
    worst = std::max(worst, excess);
  }
  return worst;
}

bool same_shape(const brrr::Tensor& a, const brrr::Tensor& b) { return a.shape() == b.shape(); }

int run(const std::string& dir, const std::string& backend) {
  brrr::SessionOptions opts;
  opts.backend = backend;
  brrr::Session session(dir + "/model.onnx", opts);
  const brrr::Graph& g = session.graph();
  std::string data = dir + "/test_data_set_0";

  // Model-zoo test data is positional: input_K.pb feeds the K-th graph input.
  std::map<std::string, brrr::Tensor> inputs;
  for (size_t k = 0; k < g.inputs.size(); ++k)
    inputs[g.value(g.inputs[k]).name] =
        brrr::load_tensor_pb(data + "/input_" + std::to_string(k) + ".pb");

  std::vector<brrr::Tensor> outputs = session.run(inputs);
  int failed = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    std::string path = data + "/output_" + std::to_string(k) + ".pb";
    if (!std::filesystem::exists(path)) continue;
    brrr::Tensor expected = brrr::load_tensor_pb(path);
    const std::string& name = g.value(g.outputs[k]).name;
    if (!same_shape(outputs[k], expected)) {
      std::printf("output %s: shape %s, expected %s\n", name.c_str(),
                  brrr::shape_str(outputs[k].shape()).c_str(),
                  brrr::shape_str(expected.shape()).c_str());
      ++failed;
      continue;
    }
    double excess = worst_excess(outputs[k], expected);
    std::printf("output %s %s: %s\n", name.c_str(), brrr::shape_str(expected.shape()).c_str(),
                excess <= 0 ? "matches the reference" : "DIFFERS from the reference");
    failed += excess > 0;
  }

  // The profile: per-kernel medians over 10 runs, the slowest five listed.
  brrr::RunProfile prof = session.profile(inputs, 10);
  std::printf("profile (%s): %.3f ms per run, %zu kernels\n", prof.backend.c_str(), prof.wall_ms,
              prof.kernels.size());
  std::vector<brrr::KernelRecord> ks = prof.kernels;
  std::sort(ks.begin(), ks.end(), [](const auto& a, const auto& b) { return a.time_ms > b.time_ms; });
  for (size_t i = 0; i < ks.size() && i < 5; ++i)
    std::printf("  %8.4f ms  %-8s %s\n", ks[i].time_ms, ks[i].kind.c_str(), ks[i].name.c_str());
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [cpu|cuda]\n", argv[0]);
    return 2;
  }
  try {
    return run(argv[1], argc == 3 ? argv[2] : "cpu");
  } catch (const brrr::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
