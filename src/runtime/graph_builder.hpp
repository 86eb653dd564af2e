// A few lines to build small graphs in C++ (tests and built-in benchmark workloads).
#pragma once
#include <string>
#include <vector>

#include "brrr/graph.hpp"

namespace brrr {

struct GraphBuilder {
  Graph g;
  int count = 0;

  int input(const std::string& name, const Shape& s, DType t = DType::f32) {
    int id = g.add_value(name);
    g.value(id).dtype = t;
    g.value(id).shape = s;
    g.value(id).typed = true;
    g.inputs.push_back(id);
    return id;
  }
  int constant(const std::string& name, const Tensor& t) {
    int id = g.add_value(name);
    g.value(id).dtype = t.dtype();
    g.value(id).shape = t.shape();
    g.value(id).constant = t;
    g.value(id).typed = true;
    return id;
  }
  int scalar(float v) { return constant("c" + std::to_string(count++), Tensor::scalar<float>(v)); }
  // Adds a node and returns its first output.
  int node(const std::string& op, std::vector<int> ins, std::map<std::string, AttrValue> attrs = {},
           int num_outputs = 1) {
    Node n;
    n.op = op;
    n.name = op + "_" + std::to_string(count++);
    n.inputs = std::move(ins);
    n.attrs = std::move(attrs);
    for (int i = 0; i < num_outputs; ++i) n.outputs.push_back(g.add_value(n.name + "_out" + std::to_string(i)));
    g.nodes.push_back(std::move(n));
    return g.nodes.back().outputs[0];
  }
  void output(int v) { g.outputs.push_back(v); }
};

}  // namespace brrr
