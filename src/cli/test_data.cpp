#include "cli/test_data.hpp"

#include <algorithm>
#include <filesystem>

#include "brrr/onnx.hpp"

namespace fs = std::filesystem;

namespace brrr::cli {

std::vector<std::string> list_pb_files(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail("data folder '{}' does not exist", dir);
  if (!fs::is_directory(dir, ec)) fail("data folder '{}' is not a folder", dir);
  std::map<int, std::string> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string f = e.path().filename().string();
    std::string head = prefix + "_";
    if (f.rfind(head, 0) != 0 || f.size() <= head.size() + 3 || f.substr(f.size() - 3) != ".pb")
      continue;
    std::string num = f.substr(head.size(), f.size() - head.size() - 3);
    if (num.empty() || num.size() > 6 || num.find_first_not_of("0123456789") != std::string::npos)
      continue;
    auto [it, added] = found.emplace(std::stoi(num), e.path().string());
    if (!added) {  // input_0.pb and input_00.pb: which one is meant is unknowable
      std::string a = fs::path(it->second).filename().string();
      fail("data folder '{}' has both {} and {}: they give the same {} number {}", dir,
           std::min(a, f), std::max(a, f), prefix, it->first);
    }
  }
  if (ec) fail("cannot list data folder '{}': {}", dir, ec.message());
  std::vector<std::string> out;
  for (const auto& [k, p] : found) {
    if (k != int(out.size()))
      fail("data folder '{}' has {}_{}.pb but no {}_{}.pb", dir, prefix, k, prefix, out.size());
    out.push_back(p);
  }
  return out;
}

// Index in `ids` of the value called `name`, or -1.
static int position_of(const Graph& g, const std::vector<int>& ids, const std::string& name) {
  if (name.empty()) return -1;
  for (size_t i = 0; i < ids.size(); ++i)
    if (g.value(ids[i]).name == name) return int(i);
  return -1;
}

// Assigns loaded tensors to positions in `ids`: by name first, then the rest by file position.
static std::vector<Tensor> assign(const Graph& g, const std::vector<int>& ids,
                                  const std::vector<std::string>& files, const char* what) {
  if (files.size() > ids.size())
    fail("the data folder has {} {} files but the model has {} {}s", files.size(), what, ids.size(),
         what);
  std::vector<Tensor> slot(ids.size());
  std::vector<std::string> from(ids.size());
  std::vector<std::pair<size_t, Tensor>> unnamed;
  for (size_t k = 0; k < files.size(); ++k) {
    std::string name;
    Tensor t = load_tensor_pb(files[k], &name);
    int pos = position_of(g, ids, name);
    if (pos < 0) {
      unnamed.push_back({k, std::move(t)});
      continue;
    }
    if (slot[pos].defined())
      fail("{} and {} both give {} '{}'", from[pos], files[k], what, g.value(ids[pos]).name);
    slot[pos] = std::move(t);
    from[pos] = files[k];
  }
  for (auto& [k, t] : unnamed) {
    if (slot[k].defined())
      fail("{} has no matching name and position {} is already given by {}", files[k], k, from[k]);
    slot[k] = std::move(t);
    from[k] = files[k];
  }
  return slot;
}

std::map<std::string, Tensor> load_inputs(const Graph& g, const std::vector<std::string>& files) {
  std::vector<Tensor> slot = assign(g, g.inputs, files, "input");
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < slot.size(); ++i) {
    const std::string& name = g.value(g.inputs[i]).name;
    if (!slot[i].defined()) {
      if (g.value(g.inputs[i]).default_value.defined()) continue;  // its initializer is used
      fail("the data folder gives no data for model input '{}'", name);
    }
    out[name] = std::move(slot[i]);
  }
  return out;
}

std::vector<Tensor> load_expected_outputs(const Graph& g, const std::vector<std::string>& files) {
  return assign(g, g.outputs, files, "output");
}

}  // namespace brrr::cli
