// libFuzzer target: one-node models of ops that take attributes, each attribute of a fuzzed type
// and value (NaN, inf, huge ints, text), through load, shape inference, the reference and the
// compiled CPU plan. Every outcome is a result or a brrr::Error; text from the model (strings
// carry the marker kMarker) must never appear in generated source.
#include <fuzzer/FuzzedDataProvider.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "backend/cpu/codegen_cpp.hpp"
#include "brrr/onnx.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "passes/pipeline.hpp"
#include "plan/kernel_ir.hpp"

namespace {

constexpr const char* kMarker = "Zq7";
std::string cache_dir;  // per process, removed at exit

struct OpSpec {
  const char* op;
  int inputs;
  std::vector<const char*> attrs;  // the schema's own names; a fuzzed name is added sometimes
};

const std::vector<OpSpec>& ops() {
  static const std::vector<OpSpec> v = {
      {"LeakyRelu", 1, {"alpha"}},
      {"Elu", 1, {"alpha"}},
      {"Selu", 1, {"alpha", "gamma"}},
      {"Celu", 1, {"alpha"}},
      {"HardSigmoid", 1, {"alpha", "beta"}},
      {"ThresholdedRelu", 1, {"alpha"}},
      {"Gelu", 1, {"approximate"}},
      {"Softmax", 1, {"axis"}},
      {"LogSoftmax", 1, {"axis"}},
      {"ReduceMax", 1, {"axes", "keepdims"}},
      {"ReduceSum", 1, {"keepdims", "noop_with_empty_axes"}},
      {"ArgMax", 1, {"axis", "keepdims", "select_last_index"}},
      {"MaxPool", 1, {"kernel_shape", "strides", "pads", "ceil_mode", "auto_pad", "dilations"}},
      {"AveragePool", 1, {"kernel_shape", "strides", "pads", "count_include_pad", "auto_pad"}},
      {"Transpose", 1, {"perm"}},
      {"Flatten", 1, {"axis"}},
      {"IsInf", 1, {"detect_positive", "detect_negative"}},
      {"Mod", 2, {"fmod"}},
      {"Clip", 1, {"min", "max"}},
      {"Cast", 1, {"to"}},
      {"LayerNormalization", 1, {"axis", "epsilon"}},
  };
  return v;
}

float fuzzed_float(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange(0, 5)) {
    case 0:
      return NAN;
    case 1:
      return INFINITY;
    case 2:
      return -INFINITY;
    case 3:
      return -0.f;
    default:
      return p.ConsumeFloatingPoint<float>();
  }
}

std::string fuzzed_text(FuzzedDataProvider& p) {
  std::string s = p.ConsumeRandomLengthString(24);
  return p.ConsumeBool() ? kMarker + s : s;
}

void fuzzed_attribute(FuzzedDataProvider& p, onnx::NodeProto* n, const std::string& name) {
  using A = onnx::AttributeProto;
  auto* a = n->add_attribute();
  a->set_name(name);
  switch (p.ConsumeIntegralInRange(0, 5)) {
    case 0:
      a->set_type(A::INT);
      a->set_i(p.ConsumeBool() ? p.ConsumeIntegralInRange<int64_t>(-3, 3)
                               : p.ConsumeIntegral<int64_t>());
      break;
    case 1:
      a->set_type(A::FLOAT);
      a->set_f(fuzzed_float(p));
      break;
    case 2:
      a->set_type(A::STRING);
      a->set_s(fuzzed_text(p));
      break;
    case 3: {
      a->set_type(A::INTS);
      int k = p.ConsumeIntegralInRange(0, 6);
      for (int i = 0; i < k; ++i) a->add_ints(p.ConsumeIntegralInRange<int64_t>(-2, 4));
      break;
    }
    case 4: {
      a->set_type(A::FLOATS);
      int k = p.ConsumeIntegralInRange(0, 4);
      for (int i = 0; i < k; ++i) a->add_floats(fuzzed_float(p));
      break;
    }
    default: {
      a->set_type(A::STRINGS);
      int k = p.ConsumeIntegralInRange(0, 3);
      for (int i = 0; i < k; ++i) a->add_strings(fuzzed_text(p));
      break;
    }
  }
}

std::string model_bytes(FuzzedDataProvider& p, brrr::Shape* shape) {
  const OpSpec& spec = ops()[p.ConsumeIntegralInRange<size_t>(0, ops().size() - 1)];
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* opset = m.add_opset_import();
  opset->set_version(p.ConsumeIntegralInRange(13, 21));
  auto* g = m.mutable_graph();
  g->set_name("fuzz");
  int rank = p.ConsumeIntegralInRange(1, 4);
  shape->clear();
  for (int d = 0; d < rank; ++d) shape->push_back(p.ConsumeIntegralInRange(1, 4));
  auto* node = g->add_node();
  node->set_op_type(spec.op);
  for (int i = 0; i < spec.inputs; ++i) {
    std::string name = "x" + std::to_string(i);
    auto* vi = g->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : *shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
    node->add_input(name);
  }
  node->add_output("y");
  g->add_output()->set_name("y");
  for (const char* a : spec.attrs)
    if (p.ConsumeBool()) fuzzed_attribute(p, node, a);
  if (p.ConsumeIntegralInRange(0, 7) == 0)
    fuzzed_attribute(p, node, p.ConsumeRandomLengthString(8));
  return m.SerializeAsString();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("BRRR_MAX_TENSOR_BYTES", "67108864", 1);
  setenv("BRRR_CACHE_QUIET", "1", 1);
  cache_dir = (std::filesystem::temp_directory_path() /
               ("brrr_fuzz_attributes_" + std::to_string(getpid())))
                  .string();
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(cache_dir, ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brrr;
  FuzzedDataProvider p(data, size);
  Shape shape;
  std::string bytes = model_bytes(p, &shape);
  try {
    Graph g = compile(load_onnx_bytes(bytes, "fuzz"), plan::Target::reference(), {}).graph;
    for (bool fuse : {true, false}) {
      plan::FusionOptions fo;
      fo.enable = fuse;
      for (const std::string& src :
           cpu::generate_cpp(g, plan::build_plan(g, fo), cpu::CodegenOptions{}).parts)
        if (src.find(kMarker) != std::string::npos) {
          fprintf(stderr, "model text reached generated source:\n%s\n", src.c_str());
          abort();
        }
    }
    std::map<std::string, Tensor> in;
    for (int id : g.inputs) {
      std::vector<float> v(size_t(shape_numel(g.value(id).shape)));
      for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 7) - 3) * 0.75f;
      in[g.value(id).name] = Tensor::from_vector<float>(g.value(id).shape, v);
    }
    run_reference(g, in);
    SessionOptions so;
    so.cache_dir = cache_dir;
    Session s(std::move(g), so);
    s.run(in);
  } catch (const Error&) {
  }
  return 0;
}
