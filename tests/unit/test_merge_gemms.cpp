// merge_parallel_gemms (src/passes/merge_parallel_gemms.cpp): MatMuls on one activation with
// constant weights become one GEMM whose parts are Slices read as views; and the erf GELU after a
// 16-bit CUDA GEMM as cuBLASLt's tanh-form epilogue (Target::gemm_gelu_erf_as_tanh_16bit).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "backend/executor.hpp"
#include "brrr/onnx.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/scalar_ops.h"
#include "brrr/session.hpp"
#include "cuda_test_util.hpp"
#include "dnnl_flag.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "passes/pipeline.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/library_desc.hpp"
#include "plan/target.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

const std::string kExamples = std::string(BRRR_TEST_DATA) + "/../../examples/";

Tensor rnd(const Shape& s, unsigned seed, DType t = DType::f32) {
  std::mt19937 rng(seed);
  Tensor f = brrr_test::uniform_f32(s, rng, -1.f, 1.f);
  return t == DType::f32 ? f : f.cast(t);
}

int reshape(GraphBuilder& b, int x, const std::vector<int64_t>& to) {
  Tensor s = Tensor::from_vector<int64_t>({int64_t(to.size())}, to);
  return b.node("Reshape", {x, b.constant("shape" + std::to_string(b.count), s)});
}
int transpose(GraphBuilder& b, int x, const std::vector<int64_t>& perm) {
  return b.node("Transpose", {x}, {{"perm", perm}});
}
int projection(GraphBuilder& b, int x, int64_t k, int64_t n, unsigned seed, bool bias_first) {
  int y = b.node("MatMul", {x, b.constant("w" + std::to_string(seed), rnd({k, n}, seed))});
  int bias = b.constant("b" + std::to_string(seed), rnd({n}, seed + 100));
  return b.node("Add", bias_first ? std::vector<int>{bias, y} : std::vector<int>{y, bias});
}

// Attention over one input as BERT's export writes it, the projections of unequal N (Q and K
// 4 heads of 8, V 4 heads of 4): three MatMul+Add projections of x, of N 32, 32 and 16.
Graph qkv_attention() {
  GraphBuilder b;
  int x = b.input("x", {1, 8, 32});
  int q = transpose(b, reshape(b, projection(b, x, 32, 32, 1, true), {1, 8, 4, 8}), {0, 2, 1, 3});
  int k = transpose(b, reshape(b, projection(b, x, 32, 32, 2, false), {1, 8, 4, 8}), {0, 2, 3, 1});
  int v = transpose(b, reshape(b, projection(b, x, 32, 16, 3, true), {1, 8, 4, 4}), {0, 2, 1, 3});
  int p = b.node("Softmax", {b.node("MatMul", {q, k})}, {{"axis", int64_t(-1)}});
  int ctx = transpose(b, b.node("MatMul", {p, v}), {0, 2, 1, 3});
  b.output(reshape(b, ctx, {1, 8, 16}));
  return b.g;
}

// Two projections read by pointwise ops (Llama's gate and up: silu(g) * u).
Graph gate_up() {
  GraphBuilder b;
  int x = b.input("x", {1, 4, 16});
  int g = b.node("MatMul", {x, b.constant("wg", rnd({16, 24}, 5))});
  int u = b.node("MatMul", {x, b.constant("wu", rnd({16, 24}, 6))});
  b.output(b.node("Mul", {b.node("Mul", {g, b.node("Sigmoid", {g})}), u}));
  return b.g;
}

// GPT-2's attention input as its exports write it: one c_attn Gemm on [S, D], Reshape [1, S, 3D],
// Split into q, k and v, each Reshape [1, S, H, Dh] and Transpose (k to [0, 2, 3, 1]).
Graph gpt2_attention() {
  GraphBuilder b;
  int x = b.input("x", {8, 32});
  int qkv = b.node("Gemm", {x, b.constant("w", rnd({32, 96}, 11)), b.constant("b", rnd({96}, 12))});
  qkv = reshape(b, qkv, {1, 8, 96});
  int s = b.constant("split", Tensor::from_vector<int64_t>({3}, {32, 32, 32}));
  int q0 = b.node("Split", {qkv, s}, {{"axis", int64_t(2)}}, 3);
  int q = transpose(b, reshape(b, q0, {1, 8, 4, 8}), {0, 2, 1, 3});
  int k = transpose(b, reshape(b, q0 + 1, {1, 8, 4, 8}), {0, 2, 3, 1});
  int v = transpose(b, reshape(b, q0 + 2, {1, 8, 4, 8}), {0, 2, 1, 3});
  int p = b.node("Softmax", {b.node("MatMul", {q, k})}, {{"axis", int64_t(-1)}});
  b.output(reshape(b, transpose(b, b.node("MatMul", {p, v}), {0, 2, 1, 3}), {1, 8, 32}));
  return b.g;
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& m : g.nodes) n += m.op == op;
  return n;
}

int count_kind(const plan::Plan& p, plan::KernelKind k) {
  int n = 0;
  for (const plan::Kernel& q : p.kernels) n += q.kind == k;
  return n;
}

// The graph as the reference executor runs it: typed, before any kernel-planning pass.
Graph reference_graph(const Graph& g) { return compile(g, plan::Target::reference(), {}).graph; }

void expect_session_matches_reference(const Graph& g) {
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, 42);
  Session s(g, SessionOptions{});
  brrr_test::expect_outputs_close(s.run(in), run_reference(reference_graph(g), in), 1e-5, 1e-5, s.plan_summary());
}

TEST(MergeGemms, ThreeProjectionsBecomeOneMatMulOnTheConcatenatedWeights) {
  Graph g = qkv_attention();
  InferOptions io;
  infer_shapes(g, io);
  ASSERT_TRUE(merge_parallel_gemms(g, false));
  EXPECT_EQ(count_op(g, "MatMul"), 3);  // the merged projection, Q.K^T, P.V
  EXPECT_EQ(count_op(g, "Add"), 1);
  EXPECT_EQ(count_op(g, "Slice"), 3);  // over the heads of the merged product, reshaped
  int merged = -1;
  for (const Node& n : g.nodes)
    if (n.op == "MatMul" && g.value(n.inputs[1]).constant.defined()) merged = n.inputs[1];
  ASSERT_GE(merged, 0);
  EXPECT_EQ(g.value(merged).shape, (Shape{32, 80}));
  // The merged graph computes what the original does, on the reference executor.
  Graph orig = qkv_attention();
  infer_shapes(orig, io);
  std::map<std::string, Tensor> in{{"x", rnd({1, 8, 32}, 9)}};
  brrr_test::expect_outputs_close(run_reference(g, in), run_reference(orig, in), 1e-5, 1e-5, "");
}

// Weights of tens of MB are concatenated by bands of rows on several threads (where there are
// cores): 2048 x (4096 + 4096 + 1024) float32, 75 MB; the merged weight must hold every part's
// columns exactly.
TEST(MergeGemms, LargeWeightsAreConcatenatedExactly) {
  const int64_t K = 2048;
  const std::vector<int64_t> ns = {4096, 4096, 1024};
  GraphBuilder b;
  int x = b.input("x", {1, 8, K});
  std::vector<Tensor> w;
  for (size_t i = 0; i < ns.size(); ++i) {
    w.push_back(rnd({K, ns[i]}, unsigned(20 + i)));
    int y = b.node("MatMul", {x, b.constant("w" + std::to_string(i), w.back())});
    b.output(transpose(b, reshape(b, y, {1, 8, ns[i] / 64, 64}), {0, 2, 1, 3}));
  }
  Graph g = b.g;
  InferOptions io;
  infer_shapes(g, io);
  ASSERT_TRUE(merge_parallel_gemms(g, false));
  int merged = -1;
  for (const Node& n : g.nodes)
    if (n.op == "MatMul" && g.value(n.inputs[1]).constant.defined()) merged = n.inputs[1];
  ASSERT_GE(merged, 0);
  const Tensor& m = g.value(merged).constant;
  ASSERT_EQ(m.shape(), (Shape{K, 9216}));
  int64_t col = 0, bad = 0;
  for (size_t i = 0; i < ns.size(); ++i) {
    for (int64_t r = 0; r < K; ++r)
      bad += std::memcmp(m.data<float>() + r * 9216 + col, w[i].data<float>() + r * ns[i],
                         size_t(ns[i]) * sizeof(float)) != 0;
    col += ns[i];
  }
  EXPECT_EQ(bad, 0) << "rows that differ";
}

// Layers that share their weights (ALBERT) share the merged weight and bias too: one
// concatenation, not one per layer.
TEST(MergeGemms, LayersThatShareWeightsShareTheMergedWeight) {
  GraphBuilder b;
  int x = b.input("x", {1, 8, 32});
  std::vector<int> w, bias;
  for (unsigned i = 0; i < 3; ++i) {
    w.push_back(b.constant("w" + std::to_string(i), rnd({32, 32}, 30 + i)));
    bias.push_back(b.constant("b" + std::to_string(i), rnd({32}, 40 + i)));
  }
  for (int layer = 0; layer < 2; ++layer) {
    std::vector<int> heads;
    for (int i = 0; i < 3; ++i)
      heads.push_back(transpose(b, reshape(b, b.node("Add", {b.node("MatMul", {x, w[size_t(i)]}),
                                                               bias[size_t(i)]}),
                                           {1, 8, 4, 8}),
                                {0, 2, 1, 3}));
    int p = b.node("Softmax", {b.node("MatMul", {heads[0], transpose(b, heads[1], {0, 1, 3, 2})})},
                   {{"axis", int64_t(-1)}});
    x = reshape(b, transpose(b, b.node("MatMul", {p, heads[2]}), {0, 2, 1, 3}), {1, 8, 32});
  }
  b.output(x);
  Graph g = b.g;
  InferOptions io;
  infer_shapes(g, io);
  ASSERT_TRUE(merge_parallel_gemms(g, false));
  std::set<int> weights, biases;
  for (const Node& n : g.nodes)
    for (int in : n.inputs)
      if (in >= 0 && g.value(in).constant.defined() && g.value(in).shape == Shape{32, 96})
        weights.insert(in);
      else if (in >= 0 && g.value(in).constant.defined() && g.value(in).shape == Shape{96})
        biases.insert(in);
  EXPECT_EQ(weights.size(), 1u);
  EXPECT_EQ(biases.size(), 1u);
  EXPECT_EQ(count_op(g, "MatMul"), 2 + 2 * 2);  // a merged projection and two attention products a layer
  std::map<std::string, Tensor> in{{"x", rnd({1, 8, 32}, 9)}};
  brrr_test::expect_outputs_close(run_reference(g, in), run_reference(reference_graph(b.g), in),
                                  1e-5, 1e-5, "");
}

TEST(MergeGemms, CpuReadsThePartsThroughGemmViews) {
  expect_session_matches_reference(qkv_attention());
  Compiled on = compile(qkv_attention(), plan::Target::cpu(), {});
  Compiled off;
  {
    brrr_test::EnvVar no("BRRR_NO_MERGE_GEMMS", "1");
    expect_session_matches_reference(qkv_attention());
    off = compile(qkv_attention(), plan::Target::cpu(), {});
  }
  if (!brrr_test::kDnnl) GTEST_SKIP() << "no oneDNN in this build";
  // One projection GEMM instead of three, and no copy kernel for its parts' head splits.
  EXPECT_EQ(count_op(on.graph, "Slice"), 3);
  EXPECT_EQ(count_kind(on.plan, plan::KernelKind::Library) + 2,
            count_kind(off.plan, plan::KernelKind::Library))
      << on.plan.print(on.graph) << off.plan.print(off.graph);
  EXPECT_EQ(on.plan.kernels.size() + 2, off.plan.kernels.size()) << on.plan.print(on.graph);
  EXPECT_EQ(count_kind(on.plan, plan::KernelKind::Copy),
            count_kind(off.plan, plan::KernelKind::Copy));
}

TEST(MergeGemms, CpuLeavesPartsThatPointwiseOpsRead) {
  Compiled c = compile(gate_up(), plan::Target::cpu(), {});
  EXPECT_EQ(count_op(c.graph, "Slice"), 0);
  EXPECT_EQ(count_op(c.graph, "MatMul"), 2);
  expect_session_matches_reference(gate_up());
}

// On CUDA a part's Slice is free inside the head transpose's kernel (with the fused attention off;
// with it on, inside the attention kernel); a part read by a pointwise kernel would be a kernel
// more, so Llama's gate and up stay two GEMMs.
TEST(MergeGemms, CudaMergesPartsThatHeadTransposesRead) {
  EXPECT_TRUE(plan::Target::cuda().merge_gemms) << "on by default";
  {
    brrr_test::EnvVar off("BRRR_CUDA_MERGE_GEMMS", "0");
    EXPECT_FALSE(plan::Target::cuda().merge_gemms) << "BRRR_CUDA_MERGE_GEMMS=0 turns it off";
  }
  brrr_test::EnvVar separate("BRRR_FUSED_ATTENTION", "0");
  {  // Llama's gate and up: merged where the SiLU product reads both halves lazily (one kernel)
    Compiled c = compile(gate_up(), plan::Target::cuda(), {});
    EXPECT_EQ(count_op(c.graph, "MatMul"), 1) << c.plan.print(c.graph);
    EXPECT_EQ(c.plan.kernels.size(), 2u) << c.plan.print(c.graph);
    brrr_test::EnvVar eager("BRRR_NO_LAZY_VIEWS", "1");  // else a Slice would be a kernel more
    Compiled d = compile(gate_up(), plan::Target::cuda(), {});
    EXPECT_EQ(count_op(d.graph, "MatMul"), 2) << d.plan.print(d.graph);
    EXPECT_EQ(count_op(d.graph, "Slice"), 0);
  }
  Compiled a = compile(qkv_attention(), plan::Target::cuda(), {});
  brrr_test::EnvVar no("BRRR_NO_MERGE_GEMMS", "1");
  Compiled b = compile(qkv_attention(), plan::Target::cuda(), {});
  EXPECT_EQ(count_op(a.graph, "MatMul"), 3);
  EXPECT_EQ(a.plan.kernels.size() + 2, b.plan.kernels.size())
      << a.plan.print(a.graph) << b.plan.print(b.graph);
  EXPECT_EQ(count_kind(a.plan, plan::KernelKind::Fused), count_kind(b.plan, plan::KernelKind::Fused));
}

// The CUDA plan's decisions checked by value: a CPU executor runs a float32 plan made with the
// device's generated views on (the C++ emitter reads the same strides and offsets: the part's
// Slice composed with the head transpose) against the reference.
TEST(MergeGemms, SliceViewsOfTheMergedProductMatchTheReference) {
  plan::Target t = plan::Target::cpu();
  t.generated_views = true;
  t.merge_gemms_any_reader = true;
  t.gemm_operand_views = false;
  for (const Graph& g : {qkv_attention(), gpt2_attention()}) {
    Compiled c = compile(g, t, {});
    EXPECT_EQ(count_op(c.graph, "Slice") > 0, true) << c.plan.print(c.graph);
    EXPECT_EQ(count_kind(c.plan, plan::KernelKind::Reference), 0) << c.plan.print(c.graph);
    std::map<std::string, Tensor> in;
    for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, 21);
    auto exec = cpu::make_cpu_executor(c.graph, c.plan, SessionOptions{});
    brrr_test::expect_outputs_close(exec->run(in), run_reference(reference_graph(g), in), 1e-5, 1e-5,
                                    c.plan.print(c.graph));
  }
}

// Llama's gate and up merged on a lazy-view target: the SiLU product reads both halves of the
// merged product through strides, checked by value on a CPU executor with the same decisions.
TEST(MergeGemms, GateUpMergedWithLazyViewsMatchesTheReference) {
  plan::Target t = plan::Target::cpu();
  t.generated_views = true;
  t.merge_gemms_any_reader = true;
  t.gemm_operand_views = false;
  t.lazy_views = true;
  const Graph g = gate_up();
  Compiled c = compile(g, t, {});
  EXPECT_EQ(count_op(c.graph, "MatMul"), 1) << c.plan.print(c.graph);
  EXPECT_EQ(c.plan.kernels.size(), 2u) << c.plan.print(c.graph);
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, 23);
  auto exec = cpu::make_cpu_executor(c.graph, c.plan, SessionOptions{});
  brrr_test::expect_outputs_close(exec->run(in), run_reference(reference_graph(g), in), 1e-5, 1e-5,
                                  c.plan.print(c.graph));
}

// The Split of GPT-2's c_attn becomes Slices its head splits read as views: no Split kernel (a
// reference kernel on the CPU, device copies on CUDA) and no copy in its place.
TEST(MergeGemms, Gpt2SplitBecomesViews) {
  brrr_test::EnvVar on("BRRR_CUDA_MERGE_GEMMS", "1");  // the default, whatever the caller set
  expect_session_matches_reference(gpt2_attention());
  for (std::string name : {"cpu", "cuda"}) {  // Targets read the switch when made
    if (name == "cpu" && !brrr_test::kDnnl) continue;
    plan::Target t = plan::Target::named(name);
    Compiled on = compile(gpt2_attention(), t, {});
    brrr_test::EnvVar no("BRRR_NO_MERGE_GEMMS", "1");
    Compiled off = compile(gpt2_attention(), plan::Target::named(name), {});
    EXPECT_EQ(count_op(on.graph, "Split"), 0) << t.name;
    EXPECT_EQ(count_op(off.graph, "Split"), 1) << t.name;
    // (at least the Split's kernel gone; on CUDA the attention kernel also takes the Reshape that
    // the three Slices share, where without the merge the Reshape before the Split stays)
    EXPECT_LE(on.plan.kernels.size() + 1, off.plan.kernels.size())
        << t.name << "\n" << on.plan.print(on.graph) << off.plan.print(off.graph);
    EXPECT_EQ(count_kind(on.plan, plan::KernelKind::Reference), 0) << t.name;
  }
}

TEST(MergeGemms, BertTinyRunsOneProjectionGemmPerLayer) {
  brrr_test::EnvVar on("BRRR_CUDA_MERGE_GEMMS", "1");  // the default, whatever the caller set
  Graph model = load_onnx(kExamples + "bert_tiny/model.onnx");
  for (std::string name : {"cpu", "cuda"}) {  // Targets read the switch when made
    if (name == "cpu" && !brrr_test::kDnnl) continue;
    plan::Target t = plan::Target::named(name);
    Compiled on = compile(model, t, {});
    Compiled off;
    {
      brrr_test::EnvVar no("BRRR_NO_MERGE_GEMMS", "1");
      off = compile(model, plan::Target::named(name), {});
    }
    const int layers = count_op(on.graph, "Softmax");
    ASSERT_GT(layers, 0);
    EXPECT_EQ(count_op(on.graph, "Slice") - count_op(off.graph, "Slice"), 3 * layers) << t.name;
    EXPECT_EQ(count_kind(on.plan, plan::KernelKind::Library) + 2 * size_t(layers),
              count_kind(off.plan, plan::KernelKind::Library))
        << t.name << "\n" << on.plan.print(on.graph);
    EXPECT_EQ(on.plan.kernels.size() + 2 * size_t(layers), off.plan.kernels.size())
        << t.name << "\n" << on.plan.print(on.graph) << off.plan.print(off.graph);
  }
}

// |gelu_erf - gelu_tanh| over [-10, 10] in steps of 1e-4: below 1e-3 everywhere (4.8e-4 at most,
// near x = -2.7), and below half a 16-bit ulp of the result wherever the result is large enough
// for that (|gelu| >= 1/4 in bfloat16, >= 1 in float16). In the negative tail (x < -2, results
// under 0.05) the difference is many ulps of the small result, though still under 4.8e-4
// absolute: that is the approximation the 16-bit epilogue accepts.
TEST(GeluEpilogue, TanhFormIsWithinSixteenBitRounding) {
  double worst = 0;
  auto half_ulp = [](double v, int mantissa_bits) {
    return std::ldexp(1.0, std::ilogb(v) - mantissa_bits - 1);
  };
  for (int i = -100000; i <= 100000; ++i) {
    const double x = i * 1e-4;
    const double e = brrr_scalar::gelu_erf(x), t = brrr_scalar::gelu_tanh(x);
    const double d = std::abs(e - t);
    worst = std::max(worst, d);
    if (std::abs(e) >= 0.25) EXPECT_LT(d, half_ulp(e, 7)) << "bf16 at x = " << x;
    if (std::abs(e) >= 1.0) EXPECT_LT(d, half_ulp(e, 10)) << "fp16 at x = " << x;
  }
  EXPECT_LT(worst, 1e-3);
  EXPECT_GT(worst, 4e-4);  // the two forms do differ: the test measures something
}

// MatMul + bias (or a Gemm with its C) + the exported erf GELU, (x * 0.5) * (1 + erf(x / sqrt 2)),
// in type t.
Graph gemm_gelu(DType t, bool gemm = false) {
  GraphBuilder b;
  int x = b.input("x", {4, 32}, t);
  int w = b.constant("w", rnd({32, 48}, 7, t)), bias = b.constant("b", rnd({48}, 8, t));
  int y = gemm ? b.node("Gemm", {x, w, bias}) : b.node("Add", {b.node("MatMul", {x, w}), bias});
  auto c = [&](float v) { return b.constant("c" + std::to_string(b.count), Tensor::scalar<float>(v).cast(t)); };
  int e = b.node("Erf", {b.node("Div", {y, c(std::sqrt(2.f))})});
  b.output(b.node("Mul", {b.node("Mul", {y, c(0.5f)}), b.node("Add", {e, c(1.f)})}));
  return b.g;
}

TEST(GeluEpilogue, CudaTakesTheErfGeluIntoSixteenBitGemmsOnly) {
  for (DType t : {DType::bf16, DType::f16, DType::f32}) {
    Compiled c = compile(gemm_gelu(t), plan::Target::cuda(), {});
    const bool half = t != DType::f32;
    ASSERT_FALSE(c.plan.kernels.empty());
    const plan::Kernel& k = c.plan.kernels[0];
    const auto* d = plan::desc_of<plan::GemmDesc>(k);
    ASSERT_NE(d, nullptr) << c.plan.print(c.graph);
    if (half) EXPECT_EQ(c.plan.kernels.size(), 1u) << dtype_name(t) << c.plan.print(c.graph);
    else EXPECT_GT(c.plan.kernels.size(), 1u) << c.plan.print(c.graph);  // GELU generated
    EXPECT_EQ(k.activation, half ? "gelu_erf_as_tanh" : "") << dtype_name(t);
    EXPECT_EQ(d->epi.act, half ? plan::Activation::GeluTanh : plan::Activation::None);
  }
  Compiled gemm = compile(gemm_gelu(DType::bf16, true), plan::Target::cuda(), {});
  EXPECT_EQ(gemm.plan.kernels.size(), 1u) << gemm.plan.print(gemm.graph);
  EXPECT_EQ(gemm.plan.kernels[0].activation, "gelu_erf_as_tanh");
  // Never at tf32 (float32 data), nor with the switch off.
  Compiled tf = compile(gemm_gelu(DType::f32), plan::Target::cuda("tf32"), {});
  EXPECT_GT(tf.plan.kernels.size(), 1u) << tf.plan.print(tf.graph);
  EXPECT_EQ(tf.plan.kernels[0].activation, "");
  brrr_test::EnvVar no("BRRR_NO_GEMM_GELU_16BIT", "1");
  Compiled off = compile(gemm_gelu(DType::bf16), plan::Target::cuda(), {});
  EXPECT_GT(off.plan.kernels.size(), 1u) << off.plan.print(off.graph);
  EXPECT_EQ(off.plan.kernels[0].activation, "");
}

// GPT-2's MLP as its exports write it, in type t: a 2-D Gemm (Conv1D's addmm), the Reshape back
// to [1, S, N], then the tanh GELU in eight nodes.
Graph gpt2_gemm_gelu(DType t, bool bias = true) {
  GraphBuilder b;
  auto c = [&](float v) { return b.constant("c" + std::to_string(b.count), Tensor::scalar<float>(v).cast(t)); };
  int x = b.input("x", {8, 32}, t);
  int w = b.constant("w", rnd({32, 48}, 7, t));
  int y = bias ? b.node("Gemm", {x, w, b.constant("b", rnd({48}, 8, t))}) : b.node("Gemm", {x, w});
  int v = b.node("Reshape", {y, b.constant("shape", Tensor::from_vector<int64_t>({3}, {1, 8, 48}))});
  int half = b.node("Mul", {v, c(0.5f)});
  int cube = b.node("Mul", {b.node("Pow", {v, c(3.f)}), c(0.044715f)});
  int inner = b.node("Mul", {b.node("Add", {v, cube}), c(0.7978845608f)});
  int one = b.node("Add", {b.node("Tanh", {inner}), c(1.f)});
  b.output(b.node("Mul", {half, one}));
  return b.g;
}

// On CUDA the GELU reaches the 16-bit Gemm through the Reshape between them: one library kernel
// with the tanh epilogue (GPT-2 had a GEMM and two GELU kernels per layer); float32 keeps the
// GELU in generated kernels.
TEST(GeluEpilogue, CudaTakesGpt2sGeluThroughTheRowReshape) {
  brrr_test::EnvVar on("BRRR_CUDA_GELU_RESHAPE", "1");
  for (DType t : {DType::bf16, DType::f16, DType::f32}) {
    Compiled c = compile(gpt2_gemm_gelu(t), plan::Target::cuda(), {});
    ASSERT_FALSE(c.plan.kernels.empty());
    const bool half = t != DType::f32;
    EXPECT_EQ(c.plan.kernels[0].activation, half ? "gelu_tanh" : "") << c.plan.print(c.graph);
    // The Reshape keeps the rows: a plain GEMM writes the same bytes, so cuBLASLt takes it (the
    // executor runs a GEMM with a strided_why on the host).
    const auto* d = plan::desc_of<plan::GemmDesc>(c.plan.kernels[0]);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->strided_why, "") << dtype_name(t);
    EXPECT_EQ(d->why, "") << dtype_name(t);
    size_t computing = 0;
    for (const plan::Kernel& k : c.plan.kernels) computing += k.kind != plan::KernelKind::Copy;
    if (half) EXPECT_EQ(computing, 1u) << dtype_name(t) << c.plan.print(c.graph);
    else EXPECT_GE(computing, 2u) << c.plan.print(c.graph);  // the GELU generated
  }
  {
    brrr_test::EnvVar no("BRRR_NO_GEMM_GELU_16BIT", "1");
    Compiled off = compile(gpt2_gemm_gelu(DType::bf16), plan::Target::cuda(), {});
    EXPECT_EQ(off.plan.kernels[0].activation, "") << off.plan.print(off.graph);
  }
  brrr_test::EnvVar off_switch("BRRR_CUDA_GELU_RESHAPE", "0");
  Compiled off = compile(gpt2_gemm_gelu(DType::bf16), plan::Target::cuda(), {});
  EXPECT_EQ(off.plan.kernels[0].activation, "") << off.plan.print(off.graph);
}

// The dynamo export of GPT-2 with zero biases: a Gemm without C, then the Reshape and the tanh
// GELU. The GELU joins the GEMM (a zero bias in the executor); with BRRR_CUDA_GELU_NO_BIAS=0 it
// stays a kernel of its own.
TEST(GeluEpilogue, CudaTakesTheGeluOfAGemmWithoutBias) {
  brrr_test::EnvVar reshape("BRRR_CUDA_GELU_RESHAPE", "1");
  for (const char* on : {"0", "1"}) {
    brrr_test::EnvVar flag("BRRR_CUDA_GELU_NO_BIAS", on);
    Compiled c = compile(gpt2_gemm_gelu(DType::bf16, false), plan::Target::cuda(), {});
    ASSERT_FALSE(c.plan.kernels.empty());
    const bool fused = std::string(on) == "1";
    EXPECT_EQ(c.plan.kernels[0].activation, fused ? "gelu_tanh" : "") << c.plan.print(c.graph);
    size_t computing = 0;
    for (const plan::Kernel& k : c.plan.kernels) computing += k.kind != plan::KernelKind::Copy;
    EXPECT_EQ(computing, fused ? 1u : 2u) << c.plan.print(c.graph);
  }
}

// On the device: the tanh epilogue's bf16 result equals the reference's erf GELU within bf16's
// tolerance.
TEST(GeluEpilogue, CudaDeviceMatchesTheReference) {
#ifndef BRRR_HAVE_CUDA
  GTEST_SKIP() << "no CUDA in this build";
#else
  BRRR_REQUIRE_CUDA_DEVICE();
  brrr_test::EnvVar lib("BRRR_SMALL_M_GEMM", "0");  // cuBLASLt's epilogue, not the small-M kernel
  Graph g = gemm_gelu(DType::bf16);
  std::map<std::string, Tensor> in{{"x", rnd({4, 32}, 9, DType::bf16)}};
  SessionOptions o;
  o.backend = "cuda";
  Session s(g, o);
  EXPECT_NE(s.plan_summary().find("tanh-form epilogue at bf16"), std::string::npos)
      << s.plan_summary();
  brrr_test::expect_outputs_close(s.run(in), run_reference(reference_graph(g), in), 2e-2, 2e-2, s.plan_summary());
  brrr_test::EnvVar on("BRRR_CUDA_GELU_RESHAPE", "1");
  Graph gpt2 = gpt2_gemm_gelu(DType::bf16);  // through the Reshape, GPT-2's own tanh form
  std::map<std::string, Tensor> in2{{"x", rnd({8, 32}, 10, DType::bf16)}};
  Session s2(gpt2, o);
  EXPECT_EQ(s2.plan_summary().find("host"), std::string::npos) << s2.plan_summary();
  EXPECT_EQ(s2.num_kernels("library"), 1) << s2.plan_summary();
  brrr_test::expect_outputs_close(s2.run(in2), run_reference(reference_graph(gpt2), in2), 2e-2, 2e-2, s2.plan_summary());
  brrr_test::EnvVar no_bias("BRRR_CUDA_GELU_NO_BIAS", "1");  // the GEMM's epilogue on a zero bias
  Graph nb = gpt2_gemm_gelu(DType::bf16, false);
  Session s3(nb, o);
  EXPECT_EQ(s3.num_kernels("library"), 1) << s3.plan_summary();
  EXPECT_EQ(s3.num_kernels("fused"), 0) << s3.plan_summary();
  brrr_test::expect_outputs_close(s3.run(in2), run_reference(reference_graph(nb), in2), 2e-2, 2e-2, s3.plan_summary());
#endif
}

}  // namespace
}  // namespace brrr
