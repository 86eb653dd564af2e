#include "brrr/graph.hpp"

#include <fmt/format.h>

#include "brrr/op.hpp"

namespace brrr {

template <typename T>
static const T* get_attr(const Node& n, const std::string& k) {
  auto it = n.attrs.find(k);
  if (it == n.attrs.end()) return nullptr;
  const T* p = std::get_if<T>(&it->second);
  if (!p) fail("{}: attribute '{}' has the wrong type", n.label(), k);
  return p;
}

int64_t Node::attr_int(const std::string& k, int64_t dflt) const {
  const int64_t* p = get_attr<int64_t>(*this, k);
  return p ? *p : dflt;
}
float Node::attr_float(const std::string& k, float dflt) const {
  auto it = attrs.find(k);
  if (it != attrs.end())
    if (const int64_t* i = std::get_if<int64_t>(&it->second)) return float(*i);
  const float* p = get_attr<float>(*this, k);
  return p ? *p : dflt;
}
std::string Node::attr_string(const std::string& k, const std::string& dflt) const {
  const std::string* p = get_attr<std::string>(*this, k);
  return p ? *p : dflt;
}
std::vector<int64_t> Node::attr_ints(const std::string& k, const std::vector<int64_t>& dflt) const {
  const auto* p = get_attr<std::vector<int64_t>>(*this, k);
  return p ? *p : dflt;
}
std::vector<float> Node::attr_floats(const std::string& k, const std::vector<float>& dflt) const {
  const auto* p = get_attr<std::vector<float>>(*this, k);
  return p ? *p : dflt;
}
const Tensor* Node::attr_tensor(const std::string& k) const { return get_attr<Tensor>(*this, k); }

std::string Node::label() const {
  return fmt::format("node '{}' ({}{}{})", name, domain, domain.empty() ? "" : ".", op);
}

size_t Value::nbytes() const {
  uint64_t n = uint64_t(shape_numel(shape)), es = dtype_size(dtype);
  return n > SIZE_MAX / es ? SIZE_MAX : size_t(n * es);
}

int Graph::add_value(const std::string& n) {
  values.push_back(Value{});
  values.back().name = n;
  return int(values.size()) - 1;
}

int Graph::find_value(const std::string& n) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == n) return int(i);
  return -1;
}

static std::string value_str(const Graph& g, int id) {
  if (id < 0) return "<none>";
  const Value& v = g.value(id);
  std::string s = "%" + v.name;
  if (v.typed) s += fmt::format(":{}{}", dtype_name(v.dtype), shape_str(v.shape));
  if (v.constant.defined()) s += "=const";
  return s;
}

static std::string attr_str(const AttrValue& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, float>)
          return fmt::format("{}", v);
        else if constexpr (std::is_same_v<T, std::string>)
          return fmt::format("\"{}\"", v);
        else if constexpr (std::is_same_v<T, Tensor>)
          return fmt::format("tensor{}", shape_str(v.shape()));
        else
          return fmt::format("[{}]", fmt::join(v, ","));
      },
      a);
}

const Tensor& Graph::bound_input(int id, const std::map<std::string, Tensor>& given) const {
  const Value& v = value(id);
  auto it = given.find(v.name);
  if (it == given.end() && !v.default_value.defined())
    fail("no data given for model input '{}'", v.name);
  const Tensor& t = it == given.end() ? v.default_value : it->second;
  if (t.dtype() != v.dtype)
    fail("input '{}' is {} but the model expects {}", v.name, dtype_name(t.dtype()),
         dtype_name(v.dtype));
  if (t.shape() != v.shape)
    fail("input '{}' has shape {} but the model was prepared for {}", v.name,
         shape_str(t.shape()), shape_str(v.shape));
  return t;
}

std::string Graph::print() const {
  std::string out = fmt::format("graph {} (opset {})\n", name, opset);
  for (int i : inputs) out += "  input " + value_str(*this, i) + "\n";
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = nodes[k];
    std::vector<std::string> outs, ins, attrs;
    for (int o : n.outputs) outs.push_back(value_str(*this, o));
    for (int i : n.inputs) ins.push_back(value_str(*this, i));
    for (const auto& [key, v] : n.attrs) attrs.push_back(key + "=" + attr_str(v));
    out += fmt::format("  #{:<3} {} = {}({}){}{}\n", k, fmt::join(outs, ", "), n.op, fmt::join(ins, ", "),
                       attrs.empty() ? "" : " ", attrs.empty() ? "" : "{" + fmt::format("{}", fmt::join(attrs, ", ")) + "}");
  }
  for (int o : outputs) out += "  output " + value_str(*this, o) + "\n";
  return out;
}

}  // namespace brrr
