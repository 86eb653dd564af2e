// The graph IR: values (typed, shaped, possibly constant) and nodes in topological order.
#pragma once
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "brrr/tensor.hpp"

namespace brrr {

struct OpDef;

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                               std::vector<std::string>, Tensor>;

struct Value {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;              // concrete after shape inference
  bool typed = false;       // dtype and shape known
  std::vector<std::string> dim_names;  // symbolic names of declared graph-input dims ("" if fixed)
  Tensor constant;          // defined for initializers and folded values
  // A graph input that an initializer of the same name shadows (IR >= 4): its value when the
  // caller feeds none (ONNX: the initializer is the input's default).
  Tensor default_value;
  int producer = -1;        // node index, -1 for graph inputs and constants

  // Bytes of the value's data: elements of `shape` times the size of `dtype` (saturating at
  // SIZE_MAX instead of wrapping). The one place a value's byte count is derived.
  size_t nbytes() const;
};

struct Node {
  std::string op;
  std::string domain;  // "" is the default ONNX domain
  std::string name;
  std::vector<int> inputs;  // value ids; -1 for an omitted optional input
  std::vector<int> outputs;
  std::map<std::string, AttrValue> attrs;
  const OpDef* def = nullptr;  // resolved by shape inference

  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  int64_t attr_int(const std::string& k, int64_t dflt) const;
  float attr_float(const std::string& k, float dflt) const;
  std::string attr_string(const std::string& k, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& k, const std::vector<int64_t>& dflt = {}) const;
  std::vector<float> attr_floats(const std::string& k, const std::vector<float>& dflt = {}) const;
  const Tensor* attr_tensor(const std::string& k) const;
  // "node 'name' (Op)" for error messages.
  std::string label() const;
};

struct Graph {
  std::string name;
  int opset = 0;  // default-domain opset
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;   // graph inputs that are not initializers (or have them as defaults)
  std::vector<int> outputs;

  int add_value(const std::string& name);
  int find_value(const std::string& name) const;  // -1 if absent
  Value& value(int id) { return values.at(size_t(id)); }
  const Value& value(int id) const { return values.at(size_t(id)); }
  // Readable listing of the graph, one node per line, with shapes and dtypes.
  std::string print() const;
  // The tensor given for graph input `id`; fails naming the input when it is missing or its dtype
  // or shape differs from what the graph was prepared for. Shared by every executor.
  const Tensor& bound_input(int id, const std::map<std::string, Tensor>& given) const;
};

}  // namespace brrr
