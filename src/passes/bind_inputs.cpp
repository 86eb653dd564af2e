// bind_inputs: gives every graph input a concrete shape (the caller's, or the model's own).
#include <fmt/format.h>

#include <algorithm>

#include "brrr/passes.hpp"

namespace brrr {

void bind_inputs(Graph& g, const std::map<std::string, Shape>& input_shapes) {
  for (const auto& [name, shape] : input_shapes) {
    int id = g.find_value(name);
    if (id < 0 || std::find(g.inputs.begin(), g.inputs.end(), id) == g.inputs.end())
      fail("--shape names '{}', which is not an input of the model", name);
  }
  for (int id : g.inputs) {
    Value& v = g.value(id);
    auto it = input_shapes.find(v.name);
    if (it != input_shapes.end()) {
      const Shape& s = it->second;
      if (!v.shape.empty() || !v.dim_names.empty()) {
        if (s.size() != v.shape.size())
          fail("input '{}' has rank {} in the model but shape {} was given", v.name, v.shape.size(),
               shape_str(s));
        for (size_t d = 0; d < s.size(); ++d)
          if (v.shape[d] >= 0 && v.shape[d] != s[d])
            fail("input '{}' has dim {} fixed to {} in the model but {} was given", v.name, d,
                 v.shape[d], s[d]);
      }
      shape_numel(s);
      v.shape = s;
    } else {
      for (size_t d = 0; d < v.shape.size(); ++d)
        if (v.shape[d] < 0) {
          // An example that works when typed: the declared dims, 1 for each symbolic one.
          std::vector<int64_t> example(v.shape.size());
          for (size_t k = 0; k < v.shape.size(); ++k) example[k] = v.shape[k] < 0 ? 1 : v.shape[k];
          fail("input '{}' has a symbolic dim '{}' (axis {}); give its shape "
               "(SessionOptions::input_shapes; on the command line e.g. --shape {}:{})",
               v.name, d < v.dim_names.size() ? v.dim_names[d] : "?", d, v.name,
               fmt::join(example, "x"));
        }
    }
    v.typed = true;
  }
}

}  // namespace brrr
