// Smaller hostile-model findings: size errors print true byte counts ("more than ..." when the
// product overflows), run-time kernel errors and unsupported dtypes name the node or value, and an
// initializer that shadows a graph input is that input's default value (ONNX IR >= 4).
#include "hostile_util.hpp"
#include "onnx_builder.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr::hostile {
namespace {

TEST(NamedErrors, SizeErrorsNeverPrintAWrappedByteCount) {
  // [2^31, 2^31] float32 is 2^64 bytes: the old message said "needs 0 bytes".
  GraphBuilder b;
  int x = b.input("x", {1, 1});
  int s = b.constant("s", Tensor::from_vector<int64_t>({2}, {int64_t(1) << 31, int64_t(1) << 31}));
  b.output(b.node("Expand", {x, s}));
  std::string err = error_of([&] { infer_shapes(b.g, {}); });
  EXPECT_NE(err.find("needs more than 18446744073709551615 bytes"), std::string::npos) << err;
  EXPECT_EQ(err.find("needs 0 bytes"), std::string::npos) << err;
  err = error_of([] { Tensor::empty(DType::f64, {int64_t(1) << 61, 2}); });
  EXPECT_NE(err.find("more than 18446744073709551615 bytes"), std::string::npos) << err;
  // Below the wrap the count is exact.
  EXPECT_EQ(byte_count(int64_t(3) << 60, 4), "13835058055282163712 bytes");
  EXPECT_EQ(byte_count(int64_t(3) << 61, 4), "more than 18446744073709551615 bytes");
}

TEST(NamedErrors, IntegerDivisionByZeroNamesNodeAndInput) {
  for (const char* op : {"Div", "Mod"}) {
    GraphBuilder b;
    int x = b.input("x", {2}, DType::i64);
    int y = b.input("y", {2}, DType::i64);
    b.output(b.node(op, {x, y}));
    Session s(b.g, session_options());
    std::string err = error_of([&] {
      s.run({{"x", Tensor::from_vector<int64_t>({2}, {4, 5})},
             {"y", Tensor::from_vector<int64_t>({2}, {1, 0})}});
    });
    EXPECT_NE(err.find(std::string("node '") + op + "_0' (" + op + ")"), std::string::npos) << err;
    EXPECT_NE(err.find("by zero (a zero in B, input 1)"), std::string::npos) << err;
    EXPECT_NE(err.find("inputs: int64[2], int64[2]"), std::string::npos) << err;
  }
}

TEST(NamedErrors, UnsupportedInputDtypeNamesTheInput) {
  onnx_builder::Model m;
  m.input("words", {2}, 8 /* STRING */);
  m.node("Identity", {"words"}, {"y"});
  m.output("y");
  std::string err = error_of([&] { load_onnx_bytes(m.bytes(), "m.onnx"); });
  EXPECT_NE(err.find("value 'words'"), std::string::npos) << err;
  EXPECT_NE(err.find("STRING"), std::string::npos) << err;
}

// x + w where w is both a graph input and an initializer: the initializer is w's default.
std::string shadowing_model(int ir_version) {
  onnx_builder::Model m;
  m.m.set_ir_version(ir_version);
  m.input("x", {3});
  m.input("w", {3});
  m.initializer("w", {3}, {10, 20, 30});
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y");
  std::string path = (scratch() / fmt::format("shadow_ir{}.onnx", ir_version)).string();
  m.save(path);
  return path;
}

TEST(NamedErrors, InitializerShadowingAnInputIsItsDefault) {
  std::string path = shadowing_model(8);
  Graph g = load_onnx(path);
  ASSERT_EQ(g.inputs.size(), 2u);
  EXPECT_EQ(g.value(g.inputs[1]).name, "w");
  Tensor x = Tensor::from_vector<float>({3}, {1, 2, 3});
  Session s(path, session_options());
  std::vector<Tensor> fed = s.run({{"x", x}, {"w", Tensor::from_vector<float>({3}, {1, 1, 1})}});
  EXPECT_EQ(fed[0].to_double_vector(), (std::vector<double>{2, 3, 4}));
  std::vector<Tensor> dflt = s.run({{"x", x}});
  EXPECT_EQ(dflt[0].to_double_vector(), (std::vector<double>{11, 22, 33}));
  EXPECT_EQ(reference(path, {{"x", x}})[0].to_double_vector(), (std::vector<double>{11, 22, 33}));
  // --data with input_0.pb (x) only uses the default; with both, the file's w.
  fs::path dir = scratch() / "shadow_data";
  fs::create_directories(dir);
  onnx_builder::save_tensor((dir / "input_0.pb").string(), "x", {3}, {1, 2, 3});
  onnx_builder::save_tensor((dir / "output_0.pb").string(), "y", {3}, {11, 22, 33});
  CliResult r = run_cli("run '" + path + "' --data '" + dir.string() + "' --check");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  onnx_builder::save_tensor((dir / "input_1.pb").string(), "w", {3}, {1, 1, 1});
  onnx_builder::save_tensor((dir / "output_0.pb").string(), "y", {3}, {2, 3, 4});
  r = run_cli("run '" + path + "' --data '" + dir.string() + "' --check");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  // IR 3 lists every initializer as an input: there they stay constants.
  Graph g3 = load_onnx(shadowing_model(3));
  EXPECT_EQ(g3.inputs.size(), 1u);
}

}  // namespace
}  // namespace brrr::hostile
