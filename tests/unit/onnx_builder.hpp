// ONNX models built in code for tests that must go through the loader (attribute types,
// initializers shadowing inputs, CLI runs): a ModelProto, a few helpers, and a file writer.
#pragma once
#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "brrr/tensor.hpp"

namespace brrr::onnx_builder {

struct Model {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  explicit Model(int opset = 17) {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    g = m.mutable_graph();
    g->set_name("test");
  }
  // dims < 0 are symbolic ("N").
  void input(const std::string& name, const std::vector<int64_t>& dims, int elem = 1) {
    value_info(g->add_input(), name, dims, elem);
  }
  void output(const std::string& name) {
    auto* vi = g->add_output();
    vi->set_name(name);
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& ins,
                        const std::vector<std::string>& outs) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g->node_size()));
    for (const auto& i : ins) n->add_input(i);
    for (const auto& o : outs) n->add_output(o);
    return n;
  }
  void initializer(const std::string& name, const std::vector<int64_t>& dims,
                   const std::vector<float>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
  }
  std::string bytes() const { return m.SerializeAsString(); }
  void save(const std::string& path) const {
    std::ofstream f(path, std::ios::binary);
    f << bytes();
  }

 private:
  static void value_info(onnx::ValueInfoProto* vi, const std::string& name,
                         const std::vector<int64_t>& dims, int elem) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* sh = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = sh->add_dim();
      if (d < 0)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
    }
  }
};

inline void attr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void attr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
inline void attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// A serialized TensorProto of float32 values (an input_N.pb file).
inline void save_tensor(const std::string& path, const std::string& name,
                        const std::vector<int64_t>& dims, const std::vector<float>& v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  std::ofstream f(path, std::ios::binary);
  f << t.SerializeAsString();
}

}  // namespace brrr::onnx_builder
