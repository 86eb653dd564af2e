// Loader tests: valid models, and one test per user-facing error message of the import.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "brrr/onnx.hpp"
#include "brrr/reference.hpp"
#include "env_var.hpp"
#include "frontend/onnx_tensor.hpp"
#include "passes/pipeline.hpp"

using namespace brrr;
namespace fs = std::filesystem;

static std::string fixture(const std::string& name) {
  return std::string(BRRR_TEST_DATA) + "/loader/" + name;
}

// Expects `f` to throw brrr::Error whose message contains `needle`.
template <typename F>
static void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message was: " << e.what();
  }
}

// A fixture loaded and prepared the way every caller prepares a model: the compile pipeline (for
// the reference target: only the typed graph is wanted).
static Graph prepared(const std::string& name, const CompileOptions& o = {}) {
  return compile(load_onnx(fixture(name)), plan::Target::reference(), o).graph;
}

TEST(OnnxLoader, RunsAValidModelWithRawAndTypedInitializers) {
  Graph g = prepared("add_relu.onnx");
  Tensor x = Tensor::from_vector<float>({2, 3}, {1, 2, 3, -4, 0.5f, 6});
  auto out = run_reference(g, {{"x", x}});
  ASSERT_EQ(out.size(), 1u);
  // b = arange(6) - 2.5, c = [1, -1, 0.5]
  std::vector<float> want = {0.0f, 0.0f, 3.0f, 0.0f, 1.0f, 9.0f};
  for (int i = 0; i < 6; ++i) {
    float b = float(i) - 2.5f, c = std::vector<float>{1, -1, 0.5f}[i % 3];
    float v = x.data<float>()[i] + b + c;
    EXPECT_FLOAT_EQ(out[0].data<float>()[i], v > 0 ? v : 0) << i;
  }
  (void)want;
}

TEST(OnnxLoader, ExternalDataInsideTheModelFolder) {
  Graph g = prepared("external_ok.onnx");
  Tensor x = Tensor::zeros(DType::f32, {2, 3});
  auto out = run_reference(g, {{"x", x}});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[0].data<float>()[i], float(i));
}

TEST(OnnxLoader, SymbolicDimNeedsAShape) {
  expect_error([] { prepared("symbolic_batch.onnx"); }, "symbolic dim 'batch'");
  // The example in the message works when typed: real numbers, not placeholders.
  expect_error([] { prepared("symbolic_batch.onnx"); }, "--shape x:1x3)");
  CompileOptions o;
  o.input_shapes["x"] = {5, 3};
  Graph g = prepared("symbolic_batch.onnx", o);
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{5, 3}));
}

TEST(OnnxLoader, WrongGivenShape) {
  CompileOptions o;
  o.input_shapes["x"] = {5, 4};
  expect_error([&] { prepared("symbolic_batch.onnx", o); }, "dim 1 fixed to 3");
  CompileOptions o2;
  o2.input_shapes["nope"] = {1};
  expect_error([&] { prepared("symbolic_batch.onnx", o2); }, "not an input of the model");
}

TEST(OnnxLoaderErrors, MissingFile) {
  expect_error([] { load_onnx(fixture("does_not_exist.onnx")); }, "no such file");
}

TEST(OnnxLoaderErrors, Directory) {
  expect_error([] { load_onnx(std::string(BRRR_TEST_DATA)); }, "is a directory");
}

TEST(OnnxLoaderErrors, EmptyTruncatedAndRandomFiles) {
  fs::path dir = fs::temp_directory_path() / "brrr_loader_test";
  fs::create_directories(dir);
  std::ofstream(dir / "empty.onnx").close();
  expect_error([&] { load_onnx((dir / "empty.onnx").string()); }, "is empty");

  std::ifstream in(fixture("add_relu.onnx"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir / "trunc.onnx", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_error([&] { load_onnx((dir / "trunc.onnx").string()); }, "not a valid ONNX model");

  uint32_t s = 12345;
  std::string junk(4096, '\0');
  for (char& c : junk) c = char((s = s * 1103515245u + 12345u) >> 16);
  std::ofstream(dir / "random.onnx", std::ios::binary) << junk;
  try {
    load_onnx((dir / "random.onnx").string());
    ADD_FAILURE() << "random bytes loaded as a model";
  } catch (const Error&) {
  }
}

TEST(OnnxLoaderErrors, UnsupportedOpNamesNodeAndOp) {
  expect_error([] { prepared("unsupported_op.onnx"); },
               "node 'fancy' (com.example.FancyOp): unsupported op 'com.example.FancyOp'");
}

TEST(OnnxLoaderErrors, RawDataLengthMismatch) {
  expect_error([] { load_onnx(fixture("raw_data_short.onnx")); }, "raw_data has 10 bytes");
}

TEST(OnnxLoaderErrors, TypedDataCountMismatch) {
  expect_error([] { load_onnx(fixture("float_data_short.onnx")); }, "float_data has 2 values");
}

TEST(OnnxLoaderErrors, DimsOverflow) {
  expect_error([] { load_onnx(fixture("dims_overflow.onnx")); }, "more elements than fit");
}

TEST(OnnxLoaderErrors, ShapesThatDoNotBroadcast) {
  expect_error([] { prepared("bad_broadcast.onnx"); }, "node 'add_bad' (Add)");
}

TEST(OnnxLoaderErrors, Cycle) { expect_error([] { prepared("cycle.onnx"); }, "cycle"); }

TEST(OnnxLoaderErrors, DanglingInput) {
  expect_error([] { prepared("dangling_input.onnx"); }, "input 'ghost' is not a graph input");
}

TEST(OnnxLoaderErrors, ExternalDataDotDot) {
  expect_error([] { load_onnx(fixture("external_dotdot.onnx")); }, "leaves the model's folder");
}

TEST(OnnxLoaderErrors, ExternalDataAbsolute) {
  expect_error([] { load_onnx(fixture("external_absolute.onnx")); }, "is absolute");
}

TEST(OnnxLoaderErrors, ExternalDataMissing) {
  expect_error([] { load_onnx(fixture("external_missing.onnx")); }, "does not exist");
}

TEST(OnnxLoaderErrors, ExternalDataThroughSymlinkOutside) {
  fs::path dir = fs::temp_directory_path() / "brrr_symlink_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(fixture("external_symlink.onnx"), dir / "m.onnx");
  fs::create_directory_symlink("/etc", dir / "escape_link");
  expect_error([&] { load_onnx((dir / "m.onnx").string()); }, "outside the model's folder");
  fs::remove_all(dir);
}

TEST(OnnxLoaderErrors, IrVersion) {
  expect_error([] { load_onnx(fixture("ir_version_99.onnx")); }, "IR version 99 is unsupported");
}

TEST(OnnxLoader, WeirdNamesSurviveAndAppearInErrorsVerbatim) {
  Graph g = prepared("weird_names.onnx");
  Tensor x = Tensor::from_vector<float>({2, 3}, {-1, 2, -3, 4, -5, 6});
  auto out = run_reference(g, {{"x", x}});
  EXPECT_EQ(out[0].data<float>()[1], 2.0f);
  EXPECT_EQ(out[0].data<float>()[0], 0.0f);
}

TEST(TensorPb, RoundTrip) {
  fs::path p = fs::temp_directory_path() / "brrr_tensor_rt.pb";
  Tensor t = Tensor::from_vector<int64_t>({2, 2}, {1, -2, 3, 1 << 30});
  save_tensor_pb(p.string(), t, "ids");
  std::string name;
  Tensor u = load_tensor_pb(p.string(), &name);
  EXPECT_EQ(name, "ids");
  EXPECT_EQ(u.to_int64_vector(), t.to_int64_vector());
}

TEST(OnnxLoaderErrors, InputCountAgainstSchema) {
  expect_error([] { load_onnx(fixture("add_one_input.onnx")); },
               "node 'add_one' (Add): has 1 inputs, but Add takes 2 to 2");
}

// External data is used in place from a copy-on-write mapping of its file where it is 64-byte
// aligned there, and read into its own memory otherwise or under BRRR_MAP_EXTERNAL=0: the same
// values every way, and a write into a loaded weight never reaches the file.
TEST(OnnxLoader, ExternalDataMappedInPlaceOrRead) {
  const fs::path dir = fs::temp_directory_path() / ("brrr_extmap_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<float> vals(64);
  for (int i = 0; i < 64; ++i) vals[size_t(i)] = float(i) * 0.5f;
  {
    std::ofstream f(dir / "w.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(vals.data()), std::streamsize(vals.size() * 4));
  }
  auto proto = [](int64_t offset) {
    onnx::TensorProto p;
    p.set_name("w");
    p.set_data_type(onnx::TensorProto::FLOAT);
    p.add_dims(2);
    p.add_dims(4);
    p.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* loc = p.add_external_data();
    loc->set_key("location");
    loc->set_value("w.bin");
    auto* off = p.add_external_data();
    off->set_key("offset");
    off->set_value(std::to_string(offset));
    return p;
  };
  for (const char* map : {"1", "0"})
    for (int64_t offset : {0, 4, 64}) {  // 4: not 64-byte aligned, read instead of mapped
      brrr_test::EnvVar e("BRRR_MAP_EXTERNAL", map);
      Tensor t = tensor_from_proto(proto(offset), dir, "w");
      ASSERT_EQ(t.shape(), (Shape{2, 4}));
      for (int i = 0; i < 8; ++i)
        EXPECT_EQ(t.data<float>()[i], vals[size_t(offset / 4 + i)]) << map << " " << offset << " " << i;
    }
  {
    Tensor a = tensor_from_proto(proto(0), dir, "w");
    Tensor b = tensor_from_proto(proto(64), dir, "w");
    a.data<float>()[0] = 42.f;  // the process's own page, not the file's
    EXPECT_EQ(b.data<float>()[0], vals[16]);
  }
  std::ifstream f(dir / "w.bin", std::ios::binary);
  float first = -1;
  f.read(reinterpret_cast<char*>(&first), 4);
  EXPECT_EQ(first, 0.f);
  std::error_code ec;
  fs::remove_all(dir, ec);
}
