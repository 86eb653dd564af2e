// Tensors with no elements (batch 0, K = 0) through every kind of kernel on the CPU: library
// set-up must not divide by the size (oneDNN's matmul did: SIGFPE), K = 0 contractions give zeros
// or the bias, and run, doctor and bench accept them.
#include "hostile_util.hpp"
#include "onnx_builder.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr::hostile {
namespace {

Tensor filled(const Shape& s, float start = 0.5f) {
  std::vector<float> v(size_t(shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + 0.25f * float(i % 7);
  return Tensor::from_vector<float>(s, v);
}

// Compiled plan (fused and one kernel per op) against the reference executor.
std::vector<Tensor> run_both(const Graph& g, const std::map<std::string, Tensor>& in) {
  std::vector<Tensor> last;
  for (int fusion : {1, 0}) {
    SessionOptions so = session_options();
    so.fusion = fusion;
    Session s(g, so);
    std::vector<Tensor> got = s.run(in);
    std::vector<Tensor> want = run_reference(s.graph(), in);
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size() && i < want.size(); ++i)
      expect_same(got[i], want[i], fmt::format("fusion={} output {}", fusion, i));
    last = got;
  }
  return last;
}

TEST(ZeroSize, MatMulBatchZero) {
  GraphBuilder b;
  int x = b.input("x", {0, 3});
  b.output(b.node("MatMul", {x, b.constant("w", filled({3, 4}))}));
  b.output(b.node("Gemm", {x, b.constant("w2", filled({4, 3})), b.constant("c", filled({4}))},
                  {{"transB", int64_t(1)}}));
  auto out = run_both(b.g, {{"x", Tensor::empty(DType::f32, {0, 3})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].shape(), (Shape{0, 4}));
  EXPECT_EQ(out[1].shape(), (Shape{0, 4}));
}

TEST(ZeroSize, ContractionOverKZeroGivesZerosOrBias) {
  GraphBuilder b;
  int x = b.input("x", {2, 0});
  int w = b.input("w", {0, 3});
  b.output(b.node("MatMul", {x, w}));
  b.output(b.node("Gemm", {x, w, b.constant("c", filled({3}, 1.f))}));
  auto out = run_both(
      b.g, {{"x", Tensor::empty(DType::f32, {2, 0})}, {"w", Tensor::empty(DType::f32, {0, 3})}});
  ASSERT_EQ(out.size(), 2u);
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(out[0].data<float>()[i], 0.f) << i;
    EXPECT_EQ(out[1].data<float>()[i], 1.f + 0.25f * float(i % 3)) << i;
  }
}

TEST(ZeroSize, EveryKernelKindOnBatchZero) {
  GraphBuilder b;
  int x = b.input("x", {0, 3, 6, 6});
  int c = b.node("Conv", {x, b.constant("w", filled({4, 3, 3, 3})), b.constant("cb", filled({4}))},
                 {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  int r = b.node("Relu", {c});
  int p = b.node("MaxPool", {r}, {{"kernel_shape", std::vector<int64_t>{2, 2}}});
  b.output(p);
  b.output(b.node("GlobalAveragePool", {r}));
  int f = b.node("Flatten", {p});
  b.output(b.node("Softmax", {f}, {{"axis", int64_t(-1)}}));
  b.output(b.node("ReduceSum", {f}, {{"axes", std::vector<int64_t>{0}}}));  // over 0 rows: zeros
  b.output(b.node("Concat", {x, b.input("y", {2, 3, 6, 6})}, {{"axis", int64_t(0)}}));
  b.output(b.node("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}));
  auto out =
      run_both(b.g, {{"x", Tensor::empty(DType::f32, {0, 3, 6, 6})}, {"y", filled({2, 3, 6, 6})}});
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0].shape(), (Shape{0, 4, 5, 5}));
  ASSERT_EQ(out[3].shape(), (Shape{1, 100}));
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(out[3].data<float>()[i], 0.f);
  EXPECT_EQ(out[4].shape(), (Shape{2, 3, 6, 6}));
}

// The model: a dynamic-batch MLP run with --shape x:0x8 through run, doctor and bench.
TEST(ZeroSize, CliRunDoctorBenchOnBatchZero) {
  onnx_builder::Model m;
  m.input("x", {-1, 8});
  m.initializer("w", {8, 4}, std::vector<float>(32, 0.5f));
  m.initializer("w2", {4, 2}, std::vector<float>(8, 0.25f));
  m.initializer("b", {2}, {1.f, 2.f});
  m.node("MatMul", {"x", "w"}, {"h"});
  m.node("Relu", {"h"}, {"r"});
  m.node("Gemm", {"r", "w2", "b"}, {"y"});
  m.output("y");
  std::string path = (scratch() / "mlp_batch0.onnx").string();
  m.save(path);
  for (const char* cmd : {"run", "doctor"}) {
    CliResult r = run_cli(std::string(cmd) + " '" + path + "' --shape x:0x8");
    EXPECT_EQ(r.code, 0) << cmd << ": " << r.err << r.out;
  }
  // bench takes no --shape: a one-node MatMul with a static [0,3] input.
  onnx_builder::Model mm;
  mm.input("x", {0, 3});
  mm.initializer("w", {3, 4}, std::vector<float>(12, 1.f));
  mm.node("MatMul", {"x", "w"}, {"y"});
  mm.output("y");
  std::string mm_path = (scratch() / "matmul_batch0.onnx").string();
  mm.save(mm_path);
  for (const char* cmd : {"run", "doctor", "bench"}) {
    CliResult r = run_cli(std::string(cmd) + " '" + mm_path + "'");
    EXPECT_EQ(r.code, 0) << cmd << ": " << r.err << r.out;
  }
  SessionOptions so = session_options();
  so.input_shapes["x"] = {0, 8};
  Session s(path, so);
  std::vector<Tensor> out = s.run({{"x", Tensor::empty(DType::f32, {0, 8})}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape{0, 2}));
}

}  // namespace
}  // namespace brrr::hostile
