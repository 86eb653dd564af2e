#include "cli/options.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "brrr/error.hpp"
#include "core/env.hpp"
#include "core/file_io.hpp"
#include "plan/target.hpp"

namespace fs = std::filesystem;

namespace brrr::cli {
namespace {

// "NAME:1x3x224x224" (also "NAME:1,3,224,224"; "NAME:" is a scalar).
std::pair<std::string, Shape> parse_one_shape(const std::string& arg) {
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

// Splits one --shape value into its NAME:DIMS items. A comma starts a new item only when what
// follows it has a ':' of its own, so "x:1,3,224,224" stays one item (dims by commas) while
// "a:1x3,b:1x128" is two.
std::vector<std::string> split_items(const std::string& value) {
  std::vector<std::string> pieces;
  size_t i = 0;
  while (true) {
    size_t j = value.find(',', i);
    pieces.push_back(value.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  std::vector<std::string> items;
  for (const auto& p : pieces) {
    if (items.empty() || p.find(':') != std::string::npos)
      items.push_back(p);
    else
      items.back() += "," + p;
  }
  return items;
}

}  // namespace

std::map<std::string, Shape> parse_shape_args(const std::vector<std::string>& args) {
  std::map<std::string, Shape> shapes;
  for (const auto& value : args)
    for (const auto& item : split_items(value)) {
      auto [name, s] = parse_one_shape(item);
      if (shapes.count(name)) fail("--shape given twice for '{}'", name);
      shapes[name] = s;
    }
  return shapes;
}

std::string declared_shape(const Value& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.shape.size(); ++k) {
    if (k) s += ", ";
    bool named = v.shape[k] < 0 && k < v.dim_names.size() && !v.dim_names[k].empty();
    s += named ? v.dim_names[k] : v.shape[k] < 0 ? "?" : std::to_string(v.shape[k]);
  }
  return s + "]";
}

void bind_symbolic_dims(const Graph& g, std::map<std::string, Shape>& shapes) {
  std::vector<std::string> names;
  for (int id : g.inputs) names.push_back(g.value(id).name);
  for (const auto& [name, s] : shapes)
    if (std::find(names.begin(), names.end(), name) == names.end())
      fail("--shape names '{}', which is not an input of the model (its inputs: {})", name,
           names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
  for (int id : g.inputs) {
    const Value& v = g.value(id);
    if (shapes.count(v.name)) continue;
    Shape s = v.shape;
    bool symbolic = false;
    for (auto& d : s)
      if (d < 0) symbolic = true, d = 1;
    if (!symbolic) continue;
    std::fprintf(stderr, "brrr: note: input '%s' has symbolic dims %s; using --shape %s:%s\n",
                 v.name.c_str(), declared_shape(v).c_str(), v.name.c_str(),
                 fmt::format("{}", fmt::join(s, "x")).c_str());
    shapes[v.name] = s;
  }
}

int session_threads(int flag) {
  if (flag > 0) return flag;
  if (env::raw("BRRR_THREADS")) return 0;
  return omp_get_max_threads();
}

void check_backend_options(const std::string& backend, int threads, const std::string& precision) {
  if (backend == "cpu") {
    if (std::string why = plan::cpu_precision_refusal(precision); !why.empty())
      fail("--precision {} on --backend cpu: {}", precision, why);
  } else if (backend != "cuda" && precision != "fp32") {
    fail("--precision {}: the {} backend computes in float32 only", precision, backend);
  }
  if (backend != "cpu" && threads > 0)
    fail("--threads sets the CPU backend's threads; --backend {} does not use it", backend);
}

CLI::Option* add_shape_option(CLI::App* cmd, std::vector<std::string>& shapes) {
  return cmd->add_option("--shape", shapes,
                         "input shape NAME:1x3x224x224; several comma-separated "
                         "(a:1x3x224x224,b:1x128) or repeated; symbolic dims left open are 1")
      ->default_str("");
}

CLI::Option* add_threads_option(CLI::App* cmd, int& threads) {
  return cmd
      ->add_option("--threads", threads,
                   "cpu: threads to run on; 0: BRRR_THREADS, else OMP_NUM_THREADS, else the CPUs "
                   "of the affinity mask")
      ->check(CLI::Range(0, 1024));
}

void check_output_dir(const std::string& dir, const std::string& what) {
  BRRR_CHECK(!dir.empty(), "{}: the folder name is empty", what);
  std::error_code ec;
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();  // "out/" is the folder "out"
  fs::path p(d);
  if (fs::exists(p, ec)) {
    if (!fs::is_directory(p, ec)) fail("{} '{}': exists and is not a folder", what, dir);
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      fail("{} '{}': cannot write into it", what, dir);
    return;
  }
  fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec))
    fail("{} '{}': the folder '{}' does not exist", what, dir, parent.string());
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    fail("{} '{}': cannot create it in '{}'", what, dir, parent.string());
}

}  // namespace brrr::cli

namespace brrr::cli {

void add_plan_options(CLI::App* cmd, std::string& save_plan, std::string& load_plan) {
  cmd->add_option("--save-plan", save_plan,
                  "cpu: write FILE with the session's generated kernels and packed weights, keyed "
                  "to the model, brrr, the options and the CPU (trtexec's --saveEngine)");
  cmd->add_option("--load-plan", load_plan,
                  "cpu: start from FILE (--save-plan's): no compiler run, no weight reorders; "
                  "refused when it was saved for another model, build, option or CPU");
}

void check_plan_options(const std::string& backend, const std::string& save_plan,
                        const std::string& load_plan) {
  if (save_plan.empty() && load_plan.empty()) return;
  if (backend != "cpu")
    fail("--save-plan and --load-plan are for --backend cpu only (this run has {})", backend);
  if (!save_plan.empty()) check_output_path(save_plan, "--save-plan");
  std::error_code ec;
  if (!load_plan.empty() && !fs::exists(load_plan, ec))
    fail("--load-plan file '{}' does not exist", load_plan);
}

}  // namespace brrr::cli
