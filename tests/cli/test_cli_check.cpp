// `brrr run --check` on a deep-ish model: 12 residual LayerNorm/MLP blocks, its float32 reference
// from the reference executor. Each precision is emulated on the CPU (which computes in float32):
// weights rounded to the precision's mantissa, and values rounded where that precision stores them
// (bf16/fp16: Cast pairs after every op; tf32: the GEMM operands, through float16, whose 10-bit
// mantissa is tf32's). A correct model passes each precision's default tolerance, the same model
// with one wrong weight fails it, and so does a perturbed expected file; 16-bit results are checked
// against float32 references by value; NaN and inf are handled explicitly.
#include <cmath>
#include <cstring>
#include <random>

#include "../unit/onnx_builder.hpp"
#include "brrr/onnx.hpp"
#include "cli/compare.hpp"
#include "cli_util.hpp"

namespace brrr::cli_test {
namespace {

ScratchCleanup cleanup;

constexpr int kBlocks = 12, kWidth = 64, kHidden = 128, kBatch = 8;
constexpr int kFloat = 1, kFloat16 = 10, kBFloat16 = 16;  // TensorProto elem types

// float rounded to `bits` mantissa bits, to nearest even (bf16: 7, fp16/tf32: 10).
float round_mantissa(float x, int bits) {
  if (bits >= 23) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  int drop = 23 - bits;
  uint32_t half = 1u << (drop - 1), lsb = (u >> drop) & 1u;
  u = (u + half - 1 + lsb) & ~((1u << drop) - 1);
  std::memcpy(&x, &u, 4);
  return x;
}

struct Emulation {
  std::string precision = "fp32";
  int bits = 23;
  bool store_all = false;  // round every op's output (16-bit storage), else only GEMM operands
  int elem = kFloat;       // the 16-bit type the Cast pairs go through
};

Emulation emulation(const std::string& p) {
  if (p == "bf16") return {p, 7, true, kBFloat16};
  if (p == "fp16") return {p, 10, true, kFloat16};
  if (p == "tf32") return {p, 10, false, kFloat16};
  return {};
}

// y = x + W2 relu(W1 LN(x)), 12 times, then LN and a 64x64 projection. `wrong`: block 6's W1 has
// its sign flipped (a sign-convention bug in one of the 25 weight matrices).
std::string deep_model(const std::string& file, const Emulation& e, bool wrong = false) {
  onnx_builder::Model m;
  m.input("x", {kBatch, kWidth});
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto weight = [&](const std::string& name, int rows, int cols, float scale) {
    std::vector<float> w(size_t(rows) * cols);
    for (float& v : w) v = round_mantissa(nd(rng) * scale, e.bits);
    if (wrong && name == "W1_6")
      for (float& v : w) v = -v;
    m.initializer(name, {rows, cols}, w);
    return name;
  };
  auto vec = [&](const std::string& name, float base, float spread) {
    std::vector<float> v(kWidth);
    for (float& x : v) x = round_mantissa(base + spread * nd(rng), e.bits);
    m.initializer(name, {kWidth}, v);
    return name;
  };
  int n = 0;
  // A Cast pair through the 16-bit type: the value as that type stores it.
  auto rounded = [&](const std::string& v) {
    if (e.elem == kFloat) return v;
    std::string h = v + "_h", f = v + "_r";
    onnx_builder::attr(m.node("Cast", {v}, {h}), "to", int64_t(e.elem));
    onnx_builder::attr(m.node("Cast", {h}, {f}), "to", int64_t(kFloat));
    return f;
  };
  auto stored = [&](const std::string& v) { return e.store_all ? rounded(v) : v; };
  auto op = [&](const std::string& type, std::vector<std::string> ins) {
    std::string out = type + "_" + std::to_string(n++);
    m.node(type, ins, {out});
    return out;
  };
  auto layernorm = [&](const std::string& x, int k) {
    std::string out = "ln_" + std::to_string(k);
    auto* node = m.node(
        "LayerNormalization",
        {x, vec("g" + std::to_string(k), 1, 0.1f), vec("b" + std::to_string(k), 0, 0.1f)}, {out});
    onnx_builder::attr(node, "axis", int64_t(-1));
    onnx_builder::attr(node, "epsilon", 1e-5f);
    return stored(out);
  };
  // GEMM operands rounded for tf32 (already rounded where everything is stored in 16 bits).
  auto operand = [&](const std::string& v) { return e.store_all ? v : rounded(v); };
  std::string x = "x";
  if (e.store_all) x = rounded(x);
  for (int k = 0; k < kBlocks; ++k) {
    std::string b = std::to_string(k);
    std::string h = layernorm(x, k);
    std::string u = stored(op("MatMul", {operand(h), weight("W1_" + b, kWidth, kHidden, 0.125f)}));
    u = stored(op("Relu", {u}));
    std::string v = stored(op("MatMul", {operand(u), weight("W2_" + b, kHidden, kWidth, 0.09f)}));
    x = stored(op("Add", {x, v}));
  }
  std::string h = layernorm(x, kBlocks);
  std::string y = op("MatMul", {operand(h), weight("Wout", kWidth, kWidth, 0.5f)});
  m.node("Identity", {stored(y)}, {"y"});
  m.output("y");
  std::string path = (scratch() / file).string();
  m.save(path);
  return path;
}

// The float32 model's reference outputs (reference executor) and the inputs they came from.
const std::string& reference_data() {
  static std::string dir;
  if (!dir.empty()) return dir;
  dir = (scratch() / "deep_ref").string();
  CliResult r = run_cli("run " + deep_model("deep_fp32.onnx", emulation("fp32")) +
                        " --backend reference --save-outputs " + dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  return dir;
}

// Runs `model` on the CPU plan with the reference inputs; returns its output 0.
Tensor cpu_output(const std::string& model, const std::string& tag) {
  std::string out = (scratch() / ("got_" + tag)).string();
  CliResult r =
      run_cli("run " + model + " --reps 0 --data " + reference_data() + " --save-outputs " + out);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  return load_tensor_pb(out + "/output_0.pb");
}

// Each precision's default: the correct model passes, one wrong weight fails. The measured
// errors are printed (the defaults in src/cli/compare.cpp leave at least 6x over them).
TEST(CliCheck, DefaultsPassCorrectAndFailWrongAtEachPrecision) {
  Tensor expected = load_tensor_pb(reference_data() + "/output_0.pb");
  for (const char* p : {"fp32", "tf32", "fp16", "bf16"}) {
    SCOPED_TRACE(p);
    cli::Tolerance tol = cli::default_tolerance(p);
    Tensor good = cpu_output(deep_model(std::string("deep_") + p + ".onnx", emulation(p)), p);
    cli::Comparison c = cli::compare_tensors(good, expected, tol);
    std::printf("%s correct: rel L2 %.3g, max abs %.3g of S = %.3g\n", p, c.rel_l2,
                c.max_abs / c.scale, c.scale);
    EXPECT_TRUE(c.pass) << "rel L2 " << c.rel_l2 << ", max abs/S " << c.max_abs / c.scale;
    Tensor bad =
        cpu_output(deep_model(std::string("deep_wrong_") + p + ".onnx", emulation(p), true),
                   std::string("wrong_") + p);
    cli::Comparison w = cli::compare_tensors(bad, expected, tol);
    std::printf("%s one wrong weight: rel L2 %.3g, max abs %.3g of S\n", p, w.rel_l2,
                w.max_abs / w.scale);
    EXPECT_FALSE(w.pass) << "rel L2 " << w.rel_l2 << ", max abs/S " << w.max_abs / w.scale;
  }
}

// A copy of the reference folder with output 0's largest element moved by `delta` * S.
std::string perturbed_reference(const std::string& tag, double delta) {
  fs::path dir = scratch() / ("deep_ref_" + tag);
  fs::create_directories(dir);
  fs::copy_file(fs::path(reference_data()) / "input_0.pb", dir / "input_0.pb",
                fs::copy_options::overwrite_existing);
  std::string name;
  Tensor y = load_tensor_pb(reference_data() + "/output_0.pb", &name).clone();
  float* v = y.data<float>();
  int64_t k = 0;
  for (int64_t i = 0; i < y.numel(); ++i)
    if (std::fabs(v[i]) > std::fabs(v[k])) k = i;
  v[k] += float(delta * std::fabs(v[k]));
  save_tensor_pb((dir / "output_0.pb").string(), y, name);
  return dir.string();
}

// Through the CLI: the precision is the plan's (a model holding bfloat16 values is checked at
// bf16), the report names the relative L2 error, the max abs error against max|exp| and the worst
// element, and the exit code says PASS (0) or FAIL (1).
TEST(CliCheck, RunCheckReportsAndJudgesByPrecision) {
  std::string ref = " --reps 0 --data " + reference_data() + " --check";
  CliResult f = run_cli("run " + deep_model("deep_fp32.onnx", emulation("fp32")) + ref);
  EXPECT_EQ(f.code, 0) << f.out << f.err;
  EXPECT_TRUE(has(f.out, "check 0 'y': PASS  rel L2 err ")) << f.out;
  EXPECT_TRUE(has(f.out, " of max|exp| ")) << f.out;
  EXPECT_TRUE(has(f.out, "[fp32 criterion: ")) << f.out;
  EXPECT_TRUE(has(f.out, "  worst element [")) << f.out;
  CliResult b = run_cli("run " + deep_model("deep_bf16.onnx", emulation("bf16")) + ref);
  EXPECT_EQ(b.code, 0) << b.out << b.err;
  EXPECT_TRUE(has(b.out, "[bf16 criterion: |got-exp| <= 0.1*S")) << b.out;
  CliResult w = run_cli("run " + deep_model("deep_wrong_bf16.onnx", emulation("bf16"), true) + ref);
  EXPECT_EQ(w.code, 1) << w.out << w.err;
  EXPECT_TRUE(has(w.out, "check 0 'y': FAIL")) << w.out;
  EXPECT_TRUE(has(w.out, "is over the bound 0.05")) << w.out;
  EXPECT_TRUE(has(w.out, "check: FAIL")) << w.out;
  // --rtol / --atol replace the default: tight enough to fail bf16, loose enough to pass wrong.
  CliResult tight = run_cli("run " + deep_model("deep_bf16.onnx", emulation("bf16")) + ref +
                            " --atol 1e-6 --rtol 0");
  EXPECT_EQ(tight.code, 1) << tight.out;
  EXPECT_TRUE(has(tight.out, "bf16 criterion (--rtol/--atol): |got-exp| <= 1e-06*S")) << tight.out;
  CliResult loose = run_cli("run " + deep_model("deep_wrong_bf16.onnx", emulation("bf16"), true) +
                            ref + " --atol 1 --rtol 0");
  EXPECT_EQ(loose.code, 0) << loose.out;
}

// One expected element moved by 20% of max|exp| fails at fp32 and at bf16, naming that element.
TEST(CliCheck, PerturbedExpectedFileFails) {
  std::string dir = perturbed_reference("plus20", 0.2);
  for (const char* p : {"fp32", "bf16"}) {
    SCOPED_TRACE(p);
    CliResult r = run_cli("run " + deep_model(std::string("deep_") + p + ".onnx", emulation(p)) +
                          " --reps 0 --data " + dir + " --check");
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_TRUE(has(r.out, "check 0 'y': FAIL")) << r.out;
    EXPECT_TRUE(has(r.out, "; 1 of 512 outside")) << r.out;
  }
}

// A bfloat16 output against a float32 expected file, and a float32 output against a bfloat16
// file: compared by value at bf16's tolerance, not refused for the dtype.
TEST(CliCheck, SixteenBitAgainstFloat32) {
  onnx_builder::Model id, cast;
  for (auto* m : {&id, &cast}) m->input("x", {4, 8});
  id.node("Identity", {"x"}, {"y"});
  onnx_builder::attr(cast.node("Cast", {"x"}, {"y"}), "to", int64_t(kBFloat16));
  id.output("y");
  cast.output("y");
  std::string mid = (scratch() / "id.onnx").string(), mcast = (scratch() / "cast.onnx").string();
  id.save(mid);
  cast.save(mcast);
  std::string f32 = (scratch() / "f32_ref").string(), b16 = (scratch() / "bf16_ref").string();
  ASSERT_EQ(run_cli("run " + mid + " --save-outputs " + f32).code, 0);
  CliResult a =
      run_cli("run " + mcast + " --reps 0 --data " + f32 + " --check --save-outputs " + b16);
  EXPECT_EQ(a.code, 0) << a.out << a.err;
  EXPECT_TRUE(has(a.out, "check 0 'y': PASS")) << a.out;
  EXPECT_TRUE(has(a.out, "[bf16 criterion")) << a.out;
  EXPECT_FALSE(has(a.out, "dtype")) << a.out;
  CliResult b = run_cli("run " + mid + " --reps 0 --data " + b16 + " --check");
  EXPECT_EQ(b.code, 0) << b.out << b.err;
  EXPECT_TRUE(has(b.out, "[bf16 criterion")) << b.out;
}

// NaN matches only NaN and inf only the same inf, counted on their own line; integer outputs
// compare exactly.
TEST(CliCheck, NonFiniteAndIntegerOutputs) {
  onnx_builder::Model m;
  m.input("x", {2, 4});
  m.node("Log", {"x"}, {"y"});  // NaN below 0 (two), -inf at 0 (one)
  onnx_builder::attr(m.node("ArgMax", {"x"}, {"i"}), "axis", int64_t(1));
  m.output("y");
  m.output("i");
  std::string path = (scratch() / "log_argmax.onnx").string();
  m.save(path);
  fs::path in = scratch() / "log_in", dir = scratch() / "log_ref";
  fs::create_directories(in);
  Tensor x = Tensor::from_vector<float>({2, 4}, {-1, 0, 1, 2, 3, -2, 0.5f, 4});
  save_tensor_pb((in / "input_0.pb").string(), x, "x");
  ASSERT_EQ(run_cli("run " + path + " --backend reference --data " + in.string() +
                    " --save-outputs " + dir.string())
                .code,
            0);
  CliResult ok = run_cli("run " + path + " --reps 0 --data " + dir.string() + " --check");
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_TRUE(has(ok.out, "non-finite: got 2 NaN, 1 inf; expected 2 NaN, 1 inf; 0 mismatched"))
      << ok.out;
  EXPECT_TRUE(has(ok.out, "check 1 'i': PASS  [criterion: exact match]")) << ok.out;
  // Expected NaN replaced by 0 and one argmax moved: both fail.
  std::string name;
  Tensor y = load_tensor_pb((dir / "output_0.pb").string(), &name).clone();
  y.data<float>()[0] = 0;
  save_tensor_pb((dir / "output_0.pb").string(), y, name);
  Tensor i = load_tensor_pb((dir / "output_1.pb").string(), &name).clone();
  i.data<int64_t>()[1] += 1;
  save_tensor_pb((dir / "output_1.pb").string(), i, name);
  CliResult bad = run_cli("run " + path + " --reps 0 --data " + dir.string() + " --check");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_TRUE(has(bad.out, "expected 1 NaN, 1 inf; 1 mismatched")) << bad.out;
  EXPECT_TRUE(has(bad.out, "worst element [0, 0] (flat 0): got nan, expected 0")) << bad.out;
  EXPECT_TRUE(has(bad.out, "check 1 'i': FAIL  [criterion: exact match]")) << bad.out;
  EXPECT_TRUE(has(bad.out, "first at [1, 0]: got 3, expected 4")) << bad.out;
}

// The precision an output is judged at: the coarsest of --precision, the graph's 16-bit values
// and the two tensors' dtypes (fp32 < tf32 < fp16 < bf16).
TEST(CliCheck, OutputPrecisionIsTheCoarsest) {
  Graph g;
  g.values.resize(1);
  g.values[0].dtype = DType::f32;
  Tensor f = Tensor::empty(DType::f32, {2}), h = Tensor::empty(DType::f16, {2});
  EXPECT_EQ(cli::output_precision("fp32", g, f, f), "fp32");
  EXPECT_EQ(cli::output_precision("tf32", g, f, f), "tf32");
  EXPECT_EQ(cli::output_precision("tf32", g, h, f), "fp16");
  EXPECT_EQ(cli::output_precision("fp32", g, f, h), "fp16");
  g.values[0].dtype = DType::bf16;
  EXPECT_EQ(cli::output_precision("fp16", g, h, f), "bf16");
  EXPECT_EQ(cli::coarser_precision("fp16", "tf32"), "fp16");
}

// The max relative error counts only elements whose |expected| is at least a thousandth of
// max|exp|: an error of 1e-6 on an expected 1e-30 (logits near zero) read 1e+24 before.
TEST(CliCheck, MaxRelativeErrorSkipsNearZeroExpectedValues) {
  Tensor expected = Tensor::from_vector<float>({4}, {4.0f, 1e-30f, -2.0f, 0.001f});
  Tensor got = Tensor::from_vector<float>({4}, {4.004f, 1e-6f, -2.0f, 0.002f});
  cli::Comparison c = cli::compare_tensors(got, expected, cli::default_tolerance("bf16"));
  EXPECT_TRUE(c.pass);
  EXPECT_NEAR(c.max_rel, 1e-3, 1e-6);  // 4.004 vs 4; 0.002 vs 0.001 (under 0.004) is left out
  EXPECT_NEAR(c.max_abs, 0.004, 1e-6);  // the absolute error still counts every element
}

// Bool and integer outputs: exact, whatever the tolerance.
TEST(CliCheck, BoolAndIntegersAreExact) {
  Tensor a = Tensor::from_vector<bool>({3}, {true, false, true});
  Tensor b = Tensor::from_vector<bool>({3}, {true, true, true});
  cli::Tolerance loose = cli::default_tolerance("bf16");
  loose.atol = 10;
  EXPECT_TRUE(cli::compare_tensors(a, a, loose).pass);
  cli::Comparison c = cli::compare_tensors(a, b, loose);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_EQ(c.worst, 1);
  Tensor i = Tensor::from_vector<int64_t>({2}, {5, 7}),
         j = Tensor::from_vector<int64_t>({2}, {5, 8});
  EXPECT_FALSE(cli::compare_tensors(i, j, loose).pass);
  // An integer output against a float file is a dtype problem, never a conversion.
  EXPECT_FALSE(cli::compare_tensors(i, Tensor::empty(DType::f32, {2}), loose).problem.empty());
}

}  // namespace
}  // namespace brrr::cli_test
