// ONNX ModelProto -> Graph. Every field read from the file is validated: sizes against dims,
// dims against overflow and the tensor budget, external-data paths against the model's folder.
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "brrr/onnx.hpp"
#include "frontend/onnx_schema_check.hpp"
#include "frontend/onnx_tensor.hpp"
#include "core/file_io.hpp"

namespace brrr {
namespace fs = std::filesystem;

namespace {

constexpr int kMinIrVersion = 3;
constexpr int kMaxIrVersion = 14;
constexpr int kMaxOpset = 28;
constexpr size_t kMaxProtobufBytes = size_t(INT32_MAX);  // protobuf's limit for one message

std::string read_file(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail("cannot open '{}': no such file", path);
  if (fs::is_directory(st)) fail("'{}' is a directory, not a file", path);
  if (!fs::is_regular_file(st)) fail("'{}' is not a regular file", path);
  uintmax_t size = fs::file_size(path, ec);
  if (ec) fail("cannot read size of '{}': {}", path, ec.message());
  if (size > max_bytes)
    fail("'{}' is {} bytes, over the limit of {} bytes{}", path, size, max_bytes,
         max_bytes == kMaxProtobufBytes ? " (protobuf reads at most 2 GiB - 1 per message)" : "");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '{}' for reading", path);
  std::string bytes(size_t(size), '\0');
  in.read(bytes.data(), std::streamsize(size));
  if (size_t(in.gcount()) != size) fail("short read on '{}'", path);
  return bytes;
}

struct Loader {
  std::string what;       // file name for messages
  fs::path model_dir;     // empty: external data refused
  Graph g;
  std::unordered_map<std::string, int> by_name;

  int value_id(const std::string& name) {
    auto it = by_name.find(name);
    if (it != by_name.end()) return it->second;
    int id = g.add_value(name);
    by_name.emplace(name, id);
    return id;
  }

  Tensor tensor(const onnx::TensorProto& t) {
    return tensor_from_proto(t, model_dir, fmt::format("initializer '{}'", t.name()));
  }

  void read_type(const onnx::ValueInfoProto& vi, Value& v) {
    if (!vi.has_type()) return;
    const auto& ty = vi.type();
    if (!ty.has_tensor_type())
      fail("{}: value '{}' is not a tensor (sequence, map and optional types are unsupported)",
           what, vi.name());
    const auto& tt = ty.tensor_type();
    try {
      v.dtype = dtype_from_onnx(tt.elem_type());
    } catch (const Error& e) {
      fail("{}: value '{}': {}", what, vi.name(), e.what());
    }
    v.shape.clear();
    v.dim_names.clear();
    if (!tt.has_shape()) return;
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        BRRR_CHECK(d.dim_value() >= 0, "{}: value '{}' has a negative dim {}", what, vi.name(),
                   d.dim_value());
        v.shape.push_back(d.dim_value());
        v.dim_names.push_back("");
      } else {
        v.shape.push_back(-1);
        v.dim_names.push_back(d.has_dim_param() ? d.dim_param() : "");
      }
    }
    if (std::none_of(v.shape.begin(), v.shape.end(), [](int64_t x) { return x < 0; }))
      shape_numel(v.shape);  // overflow check on declared shapes
  }

  AttrValue attribute(const onnx::AttributeProto& a, const std::string& node_label) {
    using A = onnx::AttributeProto;
    switch (a.type()) {
      case A::INT: return int64_t(a.i());
      case A::FLOAT: return a.f();
      case A::STRING: return a.s();
      case A::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
      case A::FLOATS: return std::vector<float>(a.floats().begin(), a.floats().end());
      case A::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
      case A::TENSOR: return tensor_from_proto(a.t(), model_dir, node_label + " attribute '" + a.name() + "'");
      case A::GRAPH:
      case A::GRAPHS:
        fail("{}: attribute '{}' is a subgraph; control flow (If, Loop, Scan) is unsupported",
             node_label, a.name());
      default:
        fail("{}: attribute '{}' has unsupported type {}", node_label, a.name(), int(a.type()));
    }
  }

  void load(const onnx::ModelProto& m) {
    if (!m.has_graph()) fail("{}: not an ONNX model (no graph)", what);
    int64_t irv = m.ir_version();
    if (irv < kMinIrVersion || irv > kMaxIrVersion)
      fail("{}: IR version {} is unsupported (brrr reads {} to {})", what, irv, kMinIrVersion,
           kMaxIrVersion);
    for (const auto& op : m.opset_import()) {
      if (op.domain().empty() || op.domain() == "ai.onnx") {
        g.opset = int(op.version());
        if (op.version() < 1 || op.version() > kMaxOpset)
          fail("{}: opset {} is unsupported (brrr reads opsets 1 to {})", what, op.version(),
               kMaxOpset);
      }
    }
    if (g.opset == 0 && irv >= 3) fail("{}: the model imports no default-domain opset", what);
    const onnx::GraphProto& gp = m.graph();
    g.name = gp.name();

    for (const auto& init : gp.initializer()) {
      int id = value_id(init.name());
      Value& v = g.value(id);
      if (v.constant.defined()) fail("{}: initializer '{}' is defined twice", what, init.name());
      v.constant = tensor(init);
      v.dtype = v.constant.dtype();
      v.shape = v.constant.shape();
      v.typed = true;
    }
    for (const auto& in : gp.input()) {
      int id = value_id(in.name());
      Value& v = g.value(id);
      if (std::find(g.inputs.begin(), g.inputs.end(), id) != g.inputs.end())
        fail("{}: graph input '{}' is listed twice", what, in.name());
      if (v.constant.defined()) {
        if (irv < 4) continue;  // IR < 4 lists every initializer as an input: constants
        // IR >= 4: an initializer named like a graph input is that input's default value; fed
        // data overrides it.
        v.default_value = std::move(v.constant);
        v.constant = Tensor();
        v.typed = false;
        if (in.has_type()) read_type(in, v);
        g.inputs.push_back(id);
        continue;
      }
      if (!in.has_type()) fail("{}: graph input '{}' has no type", what, in.name());
      read_type(in, v);
      g.inputs.push_back(id);
    }
    size_t k = 0;
    for (const auto& np : gp.node()) {
      Node n;
      n.op = np.op_type();
      n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
      n.name = np.name().empty() ? fmt::format("{}_{}", n.op, k) : np.name();
      ++k;
      for (const auto& i : np.input()) n.inputs.push_back(i.empty() ? -1 : value_id(i));
      for (const auto& o : np.output()) {
        if (o.empty()) {
          n.outputs.push_back(g.add_value(""));  // omitted optional output
          continue;
        }
        int id = value_id(o);
        if (g.value(id).constant.defined() ||
            std::find(g.inputs.begin(), g.inputs.end(), id) != g.inputs.end())
          fail("{}: {} writes '{}', which is a graph input or initializer", what, n.label(), o);
        n.outputs.push_back(id);
      }
      for (const auto& a : np.attribute()) {
        if (a.name().empty()) fail("{}: {} has an attribute without a name", what, n.label());
        if (n.attrs.count(a.name()))
          fail("{}: {} has attribute '{}' twice", what, n.label(), a.name());
        n.attrs.emplace(a.name(), attribute(a, n.label()));
      }
      check_node_arity(n, g);
      check_node_attributes(n, g);
      g.nodes.push_back(std::move(n));
    }
    for (const auto& out : gp.output()) {
      auto it = by_name.find(out.name());
      if (it == by_name.end())
        fail("{}: graph output '{}' is not produced by any node", what, out.name());
      g.outputs.push_back(it->second);
    }
    if (g.outputs.empty()) fail("{}: the graph has no outputs", what);
  }
};

Graph load_from_bytes(const std::string& bytes, const std::string& what, fs::path dir) {
  if (bytes.empty()) fail("'{}' is empty, not an ONNX model", what);
  onnx::ModelProto m;
  if (bytes.size() > kMaxProtobufBytes || !m.ParseFromArray(bytes.data(), int(bytes.size())))
    fail("'{}' is not a valid ONNX model (protobuf parse failed: truncated or not a model file)",
         what);
  Loader l;
  l.what = what;
  l.model_dir = std::move(dir);
  l.load(m);
  return std::move(l.g);
}

}  // namespace

Graph load_onnx(const std::string& path) {
  std::string bytes = read_file(path, kMaxProtobufBytes);
  fs::path dir = fs::absolute(fs::path(path)).parent_path();
  return load_from_bytes(bytes, path, dir);
}

Graph load_onnx_bytes(const std::string& bytes, const std::string& what) {
  return load_from_bytes(bytes, what, fs::path());
}

Tensor load_tensor_pb(const std::string& path, std::string* name) {
  // Refused on size before reading: protobuf parses at most 2 GiB - 1 bytes in one message.
  size_t budget = max_tensor_bytes();
  std::string bytes = read_file(path, budget >= kMaxProtobufBytes - (size_t(1) << 20)
                                          ? kMaxProtobufBytes
                                          : budget + (size_t(1) << 20));
  onnx::TensorProto t;
  if (bytes.empty() || !t.ParseFromArray(bytes.data(), int(bytes.size())))
    fail("'{}' is not a valid serialized TensorProto", path);
  if (name) *name = t.name();
  return tensor_from_proto(t, fs::path(), fmt::format("tensor file '{}'", path));
}

void save_tensor_pb(const std::string& path, const Tensor& t, const std::string& name) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.shape()) p.add_dims(d);
  Tensor c = t.contiguous();
  p.set_raw_data(std::string(static_cast<const char*>(c.raw()), c.nbytes()));
  std::string bytes;
  if (!p.SerializeToString(&bytes)) fail("cannot serialize tensor '{}' for '{}'", name, path);
  write_file(path, bytes);
}

}  // namespace brrr
