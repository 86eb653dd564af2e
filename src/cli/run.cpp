// `brrr run MODEL.onnx`: load, bind input shapes, prepare, execute, print outputs, and with
// --check compare them with a test_data_set's expected outputs.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "brrr/error.hpp"
#include "brrr/onnx.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "cli/commands.hpp"
#include "cli/inputs.hpp"
#include "cli/compare.hpp"
#include "cli/test_data.hpp"
#include "passes/pipeline.hpp"

namespace fs = std::filesystem;

namespace brrr::cli {
namespace {

struct RunOptions {
  std::string model;
  std::string data;
  bool check = false;
  std::string backend = "cpu";  // cpu or cuda: compiled Session; reference: the oracle
  std::string precision = "fp32";
  bool no_graphs = false;
  bool no_fusion = false;
  std::vector<std::string> shapes;
  double rtol = 1e-4;
  double atol = 1e-6;
};

// The one place that picks the executor: the compiled static-plan Session for cpu and cuda, the
// reference executor for reference. Either way the loaded graph goes through the compile pipeline
// once (the Session runs it; for the reference it stops after the graph passes).
struct Prepared {
  std::optional<Session> session;
  Graph reference;  // the prepared graph, for the reference executor
  const Graph& graph() const { return session ? session->graph() : reference; }
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) {
    return session ? session->run(inputs) : run_reference(reference, inputs);
  }
};

Prepared prepare(const Graph& loaded, const std::map<std::string, Shape>& shapes,
                 const RunOptions& o) {
  Prepared e;
  if (o.backend == "reference") {
    CompileOptions co;
    co.input_shapes = shapes;
    e.reference = compile(loaded, plan::Target::reference(), co).graph;
    return e;
  }
  SessionOptions so;
  so.backend = o.backend;
  so.precision = o.precision;
  if (o.no_graphs) so.graphs = 0;
  if (o.no_fusion) so.fusion = 0;
  so.input_shapes = shapes;
  e.session.emplace(loaded, so);
  return e;
}

// "NAME:1x3x224x224" (also "NAME:1,3,224,224"; "NAME:" is a scalar).
std::pair<std::string, Shape> parse_shape_arg(const std::string& arg) {
  size_t colon = arg.rfind(':');
  if (colon == std::string::npos || colon == 0)
    fail("--shape '{}' should look like NAME:1x3x224x224", arg);
  std::string name = arg.substr(0, colon), dims = arg.substr(colon + 1);
  Shape s;
  size_t i = 0;
  while (i < dims.size()) {
    size_t j = dims.find_first_of("x,", i);
    if (j == std::string::npos) j = dims.size();
    std::string d = dims.substr(i, j - i);
    if (d.empty() || d.size() > 12 || d.find_first_not_of("0123456789") != std::string::npos)
      fail("--shape '{}': '{}' is not a non-negative dimension", arg, d);
    s.push_back(std::stoll(d));
    i = j + 1;
    if (j + 1 == dims.size()) fail("--shape '{}' ends with a separator", arg);
  }
  shape_numel(s);  // rejects overflow
  return {name, s};
}

void check_model_path(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("model file '{}' does not exist", path);
  if (fs::is_directory(path, ec))
    fail("'{}' is a folder; give the model file (e.g. {}/model.onnx)", path, path);
  if (!fs::is_regular_file(path, ec)) fail("'{}' is not a regular file", path);
  if (fs::file_size(path, ec) == 0) fail("model file '{}' is empty", path);
}

// "[batch, 3]": the declared shape with symbolic dims by name.
std::string declared_str(const Value& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.shape.size(); ++k) {
    if (k) s += ", ";
    bool named = v.shape[k] < 0 && k < v.dim_names.size() && !v.dim_names[k].empty();
    s += named ? v.dim_names[k] : v.shape[k] < 0 ? "?" : std::to_string(v.shape[k]);
  }
  return s + "]";
}

// Shapes for every graph input: --data tensors, then --shape, else the declared shape with
// symbolic dims set to 1 (with a note).
std::map<std::string, Shape> bind_shapes(const Graph& g, const std::map<std::string, Tensor>& data,
                                         const std::vector<std::string>& shape_args) {
  std::map<std::string, Shape> shapes;
  for (const auto& a : shape_args) {
    auto [name, s] = parse_shape_arg(a);
    if (shapes.count(name)) fail("--shape given twice for '{}'", name);
    shapes[name] = s;
  }
  for (int id : g.inputs) {
    const Value& v = g.value(id);
    auto d = data.find(v.name);
    if (d != data.end()) {
      const Shape& ds = d->second.shape();
      bool fits = v.shape.empty() && v.dim_names.empty();  // no declared shape
      if (!fits && ds.size() == v.shape.size()) {
        fits = true;
        for (size_t k = 0; k < ds.size(); ++k)
          fits = fits && (v.shape[k] < 0 || v.shape[k] == ds[k]);
      }
      if (!fits)
        fail("--data gives input '{}' shape {} but the model declares {}", v.name, shape_str(ds),
             declared_str(v));
      auto s = shapes.find(v.name);
      if (s != shapes.end() && s->second != d->second.shape())
        fail("--shape {}:{} disagrees with the data file's shape {}", v.name, shape_str(s->second),
             shape_str(d->second.shape()));
      shapes[v.name] = d->second.shape();
      continue;
    }
    if (shapes.count(v.name)) continue;
    bool symbolic = false;
    Shape s = v.shape;
    for (size_t k = 0; k < s.size(); ++k)
      if (s[k] < 0) {
        symbolic = true;
        std::string dn = k < v.dim_names.size() && !v.dim_names[k].empty() ? v.dim_names[k] : "?";
        std::fprintf(stderr,
                     "brrr: note: input '%s' dim %zu ('%s') has no value; using 1 "
                     "(set it with --shape)\n",
                     v.name.c_str(), k, dn.c_str());
        s[k] = 1;
      }
    if (symbolic) shapes[v.name] = s;
  }
  return shapes;
}

int run_command(const RunOptions& o) {
  check_model_path(o.model);
  if (o.check && o.data.empty()) fail("--check needs --data DIR with output_N.pb files");
  if (!(o.rtol >= 0) || !(o.atol >= 0)) fail("--rtol and --atol must be non-negative");
  Graph g = load_onnx(o.model);

  std::map<std::string, Tensor> inputs;
  std::vector<std::string> output_files;
  if (!o.data.empty()) {
    std::vector<std::string> files = list_pb_files(o.data, "input");
    if (files.empty() && !g.inputs.empty())
      fail("data folder '{}' has no input_N.pb files", o.data);
    inputs = load_inputs(g, files);
    if (o.check) {
      output_files = list_pb_files(o.data, "output");
      if (output_files.empty()) fail("--check: data folder '{}' has no output_N.pb files", o.data);
    }
  }

  Prepared ex = prepare(g, bind_shapes(g, inputs, o.shapes), o);
  g = ex.graph();
  for (int id : g.inputs)
    if (!inputs.count(g.value(id).name) && !g.value(id).default_value.defined())
      inputs[g.value(id).name] = random_tensor(g.value(id).dtype, g.value(id).shape, uint64_t(id));

  std::vector<Tensor> outs = ex.run(inputs);

  std::printf("model: %s (%zu nodes after preparation), backend: %s\n", o.model.c_str(),
              g.nodes.size(), o.backend.c_str());
  if (o.data.empty() && !g.inputs.empty()) std::printf("inputs: synthetic (no --data given)\n");
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& t = outs[i];
    std::printf("output %zu '%s': %s %s  %s\n", i, g.value(g.outputs[i]).name.c_str(),
                std::string(dtype_name(t.dtype())).c_str(), shape_str(t.shape()).c_str(),
                tensor_summary(t).c_str());
  }
  if (!o.check) return 0;

  std::vector<Tensor> expected = load_expected_outputs(g, output_files);
  Tolerance tol{o.rtol, o.atol, true};
  bool all_pass = true;
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string& name = g.value(g.outputs[i]).name;
    if (!expected[i].defined()) {
      std::printf("check %zu '%s': no expected output file; not compared\n", i, name.c_str());
      continue;
    }
    Comparison c = compare_tensors(outs[i], expected[i], tol);
    if (!c.problem.empty()) {
      std::printf("check %zu '%s': FAIL (%s)\n", i, name.c_str(), c.problem.c_str());
      all_pass = false;
      continue;
    }
    std::printf("check %zu '%s': %s  max abs err %.3g, max rel err %.3g  [criterion: %s]\n", i,
                name.c_str(), c.pass ? "PASS" : "FAIL", c.max_abs, c.max_rel,
                criterion_str(expected[i], tol, c).c_str());
    if (!c.pass) {
      std::printf(
          "  %lld of %lld elements outside; worst at flat index %lld: got %.9g, "
          "expected %.9g\n",
          (long long)c.mismatches, (long long)expected[i].numel(), (long long)c.worst, c.worst_got,
          c.worst_expected);
      all_pass = false;
    }
  }
  std::printf("%s\n", all_pass ? "check: PASS" : "check: FAIL");
  return all_pass ? 0 : 1;
}

}  // namespace

void setup_run(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "run a model and print its outputs (--check: compare)");
  cmd->add_option("model", opts->model, "ONNX model file")->required();
  cmd->add_option("--data", opts->data, "test_data_set folder with input_N.pb (and output_N.pb)");
  cmd->add_flag("--check", opts->check, "compare outputs with the folder's output_N.pb");
  cmd->add_option("--backend", opts->backend,
                  "cpu (compiled plan, default), cuda (compiled plan on the GPU) or reference "
                  "(the oracle)")
      ->check(CLI::IsMember({"cpu", "cuda", "reference"}));
  cmd->add_option("--precision", opts->precision,
                  "cuda: precision of matrix products: fp32, tf32, bf16 or fp16 (weights cast "
                  "once, fp32 accumulate)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
  cmd->add_flag("--no-graphs", opts->no_graphs, "cuda: launch kernels one by one (no CUDA Graph)");
  cmd->add_flag("--no-fusion", opts->no_fusion, "one generated kernel per op");
  cmd->add_option("--shape", opts->shapes, "input shape, NAME:1x3x224x224 (repeatable)");
  cmd->add_option("--rtol", opts->rtol, "relative tolerance for --check (default 1e-4)");
  cmd->add_option("--atol", opts->atol,
                  "absolute tolerance for --check, times max|expected| (default 1e-6)");
  cmd->callback([opts] {
    std::fflush(stdout);
    int rc = run_command(*opts);
    std::fflush(stdout);
    if (rc != 0) throw ExitWith{rc};
  });
}

}  // namespace brrr::cli
