// --precision bf16 on the CPU: the decision (which CPUs may, which precisions have no CPU path),
// the precision pass that writes it into the plan's descriptors, and bf16 GEMM / conv sessions
// against the float32 reference within bf16's tolerance (run where this CPU has avx512_bf16 or
// AMX, with oneDNN; skipped with the reason elsewhere).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "dnnl_flag.hpp"
#include "env_var.hpp"
#include "passes/pipeline.hpp"
#include "plan/library_desc.hpp"
#include "plan/target.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

using plan::cpu_precision_refusal;
using plan::Target;

CpuFeatures with(bool bf16, bool amx) {
  CpuFeatures f;
  f.avx512_core = bf16 || amx;
  f.avx512_bf16 = bf16;
  f.amx_bf16 = amx;
  return f;
}

TEST(CpuBf16, RefusalNamesWhatIsMissing) {
  EXPECT_EQ(cpu_precision_refusal("fp32", CpuFeatures{}, false), "");
  EXPECT_EQ(cpu_precision_refusal("bf16", with(true, false), true), "");
  EXPECT_EQ(cpu_precision_refusal("bf16", with(false, true), true), "");
  std::string no_cpu = cpu_precision_refusal("bf16", CpuFeatures{}, true);
  EXPECT_NE(no_cpu.find("avx512_bf16 or amx_bf16"), std::string::npos) << no_cpu;
  EXPECT_NE(cpu_precision_refusal("bf16", with(true, true), false).find("oneDNN"), std::string::npos);
  EXPECT_NE(cpu_precision_refusal("fp16", with(true, true), true).find("no fp16 path"),
            std::string::npos);
  EXPECT_NE(cpu_precision_refusal("tf32", with(true, true), true).find("GPU"), std::string::npos);
  for (const char* p : {"bf16", "fp16", "tf32", "fp8"})
    EXPECT_EQ(cpu_precision_refusal(p, with(true, true), true).find('\n'), std::string::npos) << p;
}

// bf16 without AMX is taken; the note follows this machine's probe: where oneDNN's bf16 GEMM
// measured under 1.2x the fp32 rate it says bf16 gains little, from 1.2x (AMD Zen 4: 2.0x) it
// says nothing, and with no probe cached it says how to find out.
TEST(CpuBf16, NoteSaysWhenBf16ComputesNoFaster) {
  using plan::cpu_precision_note;
  const std::string slow = cpu_precision_note("bf16", with(true, false), 0.9);
  EXPECT_NE(slow.find("no AMX"), std::string::npos) << slow;
  EXPECT_NE(slow.find("0.90x the fp32 rate"), std::string::npos) << slow;
  EXPECT_EQ(slow.find('\n'), std::string::npos) << slow;
  EXPECT_EQ(cpu_precision_note("bf16", with(true, false), 2.0), "");
  const std::string unknown = cpu_precision_note("bf16", with(true, false));
  EXPECT_NE(unknown.find("brrr probe"), std::string::npos) << unknown;
  EXPECT_EQ(unknown.find('\n'), std::string::npos) << unknown;
  EXPECT_EQ(cpu_precision_note("bf16", with(true, true)), "");
  EXPECT_EQ(cpu_precision_note("bf16", with(false, true)), "");
  EXPECT_EQ(cpu_precision_note("fp32", with(true, false)), "");
  EXPECT_EQ(cpu_precision_note("bf16", CpuFeatures{}), "");  // refused instead
}

TEST(CpuBf16, TargetCarriesThePrecision) {
  EXPECT_EQ(Target::cpu().library_math, DType::f32);
  EXPECT_EQ(Target::named("cpu", "fp32").library_math, DType::f32);
  if (!brrr_test::kDnnl) GTEST_SKIP() << brrr_test::kNoDnnl;
  EXPECT_EQ(Target::cpu("bf16", with(true, false)).library_math, DType::bf16);
  try {
    Target::cpu("bf16", CpuFeatures{});
    FAIL() << "a CPU without avx512_bf16 / amx_bf16 took bf16";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "precision bf16 on the cpu backend: bf16 needs a CPU with avx512_bf16 or "
                 "amx_bf16, and this one has neither (fp32 runs here)");
  }
  EXPECT_THROW(Target::cpu("fp16", with(true, true)), Error);
  EXPECT_THROW(Target::named("reference", "bf16"), Error);
}

Graph gemm_conv_graph(std::mt19937& rng) {
  GraphBuilder b;
  int x = b.input("x", {2, 8, 64});
  int w = b.constant("w", brrr_test::uniform_f32({64, 96}, rng, -1, 1));
  int y = b.node("Relu", {b.node("Add", {b.node("MatMul", {x, w}),
                                         b.constant("bias", brrr_test::uniform_f32({96}, rng, -1, 1))})});
  b.output(y);
  int img = b.input("img", {1, 3, 32, 32});
  int cw = b.constant("cw", brrr_test::uniform_f32({16, 3, 3, 3}, rng, -1, 1));
  b.output(b.node("Conv", {img, cw}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  return b.g;
}

// The precision pass marks float32 library GEMMs and convs, only on a bf16 Target.
TEST(CpuBf16, PrecisionPassMarksDescriptors) {
  if (!brrr_test::kDnnl) GTEST_SKIP() << brrr_test::kNoDnnl;
  std::mt19937 rng(3);
  for (bool bf16 : {false, true}) {
    Target t = bf16 ? Target::cpu("bf16", with(true, false)) : Target::cpu();
    Compiled c = compile(gemm_conv_graph(rng), t, CompileOptions{});
    int gemms = 0, convs = 0;
    for (const plan::Kernel& k : c.plan.kernels) {
      if (const plan::GemmDesc* d = plan::desc_of<plan::GemmDesc>(k)) {
        ++gemms;
        EXPECT_EQ(d->math, bf16 ? DType::bf16 : DType::f32);
      }
      if (const plan::ConvDesc* d = plan::desc_of<plan::ConvDesc>(k)) {
        ++convs;
        EXPECT_EQ(d->math, bf16 ? DType::bf16 : DType::f32);
      }
    }
    EXPECT_EQ(gemms, 1) << c.plan.print(c.graph);
    EXPECT_EQ(convs, 1) << c.plan.print(c.graph);
    EXPECT_EQ(c.plan.print(c.graph).find("reads bfloat16") != std::string::npos, bf16);
  }
}

// A depthwise conv (one output channel per group) and a GEMM with few output columns stay float32:
// converting their activation costs more than bf16 saves.
TEST(CpuBf16, NarrowContractionsStayFloat32) {
  if (!brrr_test::kDnnl) GTEST_SKIP() << brrr_test::kNoDnnl;
  std::mt19937 rng(4);
  GraphBuilder b;
  int img = b.input("img", {1, 32, 16, 16});
  b.output(b.node("Conv", {img, b.constant("dw", brrr_test::uniform_f32({32, 1, 3, 3}, rng, -1, 1))},
                  {{"group", int64_t(32)}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  int x = b.input("x", {64, 256});
  b.output(b.node("MatMul", {x, b.constant("w", brrr_test::uniform_f32({256, 8}, rng, -1, 1))}));
  Compiled c = compile(b.g, Target::cpu("bf16", with(true, false)), CompileOptions{});
  int library = 0;
  for (const plan::Kernel& k : c.plan.kernels) {
    if (k.kind != plan::KernelKind::Library) continue;
    ++library;
    if (const plan::GemmDesc* d = plan::desc_of<plan::GemmDesc>(k)) EXPECT_EQ(d->math, DType::f32);
    if (const plan::ConvDesc* d = plan::desc_of<plan::ConvDesc>(k)) EXPECT_EQ(d->math, DType::f32);
  }
  EXPECT_EQ(library, 2) << c.plan.print(c.graph);
}

bool host_has_bf16() {
  return brrr_test::kDnnl && cpu_precision_refusal("bf16").empty();
}

// Relative L2 error of got against want.
double rel_l2(const Tensor& got, const Tensor& want) {
  const float* a = got.data<float>();
  const float* b = want.data<float>();
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// A bf16 session of g with float32 storage (BRRR_PRECISION_GEMMS_ONLY=1): every library
// GEMM/conv reads bf16 on a fast oneDNN kernel, and the outputs are within bf16's error of the
// float32 reference, yet not float32's (so bf16 ran).
void expect_bf16_close(const Graph& g, int library_kernels) {
  brrr_test::EnvVar gemms_only("BRRR_PRECISION_GEMMS_ONLY", "1");
  std::mt19937 rng(11);
  std::map<std::string, Tensor> in;
  for (int id : g.inputs)
    in[g.value(id).name] = brrr_test::uniform_f32(g.value(id).shape, rng, -1, 1);
  SessionOptions o;
  o.precision = "bf16";
  Session s(g, o);
  std::vector<Tensor> got;
  for (int r = 0; r < 2; ++r) got = s.run(in);  // the second run reuses the converted buffers
  std::vector<Tensor> want = run_reference(s.graph(), in);
  std::string summary = s.plan_summary();
  EXPECT_NE(summary.find(fmt::format("precision: {0} of {0} library GEMM/conv kernel(s) read bf16",
                                     library_kernels)),
            std::string::npos)
      << summary;
  EXPECT_EQ(summary.find("ref:"), std::string::npos) << summary;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    double e = rel_l2(got[i], want[i]);
    EXPECT_LT(e, 1e-2) << "output " << i << "\n" << summary;
    EXPECT_GT(e, 1e-5) << "output " << i << " is float32-exact: bf16 did not run\n" << summary;
  }
}

TEST(CpuBf16, GemmAndConvSessionsWithinBf16Tolerance) {
  if (!host_has_bf16()) GTEST_SKIP() << "bf16: " << cpu_precision_refusal("bf16");
  std::mt19937 rng(5);
  expect_bf16_close(gemm_conv_graph(rng), 2);
}

// Attention's two activation-by-activation MatMuls (K read transposed through its strides) and a
// Gemm with transB and a bias: both operands converted per run.
TEST(CpuBf16, AttentionMatMulsAndGemm) {
  if (!host_has_bf16()) GTEST_SKIP() << "bf16: " << cpu_precision_refusal("bf16");
  std::mt19937 rng(9);
  GraphBuilder b;
  int q = b.input("q", {1, 4, 32, 16}), k = b.input("k", {1, 4, 32, 16}), v = b.input("v", {1, 4, 32, 16});
  int kt = b.node("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  int att = b.node("Softmax", {b.node("MatMul", {q, kt})}, {{"axis", int64_t(-1)}});
  b.output(b.node("MatMul", {att, v}));
  int x = b.input("x", {5, 48});
  b.output(b.node("Gemm", {x, b.constant("w", brrr_test::uniform_f32({40, 48}, rng, -1, 1)),
                           b.constant("c", brrr_test::uniform_f32({40}, rng, -1, 1))},
                  {{"transB", int64_t(1)}}));
  expect_bf16_close(b.g, 3);
}

// ViT's patch embedding: a 16x16 stride-16 conv with a bias.
TEST(CpuBf16, PatchConv) {
  if (!host_has_bf16()) GTEST_SKIP() << "bf16: " << cpu_precision_refusal("bf16");
  std::mt19937 rng(13);
  GraphBuilder b;
  int x = b.input("x", {1, 3, 64, 64});
  b.output(b.node("Conv", {x, b.constant("w", brrr_test::uniform_f32({32, 3, 16, 16}, rng, -1, 1)),
                           b.constant("b", brrr_test::uniform_f32({32}, rng, -1, 1))},
                  {{"strides", std::vector<int64_t>{16, 16}}}));
  expect_bf16_close(b.g, 1);
}

// --precision bf16 stores the whole model in bf16 on the CPU (Target::storage_16bit), conv nets
// too (pools, global means and squeeze-excite scales take bf16); the 16-bit GEMMs take views and
// epilogues as float32 ones do. Each has its switch.
TEST(CpuBf16, TargetStoresTheModelInBf16) {
  if (!brrr_test::kDnnl) GTEST_SKIP() << brrr_test::kNoDnnl;
  EXPECT_FALSE(Target::cpu().storage_16bit);
  const Target t = Target::cpu("bf16", with(true, true));
  EXPECT_TRUE(t.storage_16bit);
  EXPECT_TRUE(t.library_16bit_pool);
  EXPECT_TRUE(t.library_16bit_row_reduce);
  EXPECT_TRUE(t.library_16bit_channel_scale);
  EXPECT_FALSE(Target::cuda().library_16bit_channel_scale);
  EXPECT_TRUE(t.gemm_operand_views_16bit);
  EXPECT_TRUE(t.gemm_post_ops_16bit);
  EXPECT_FALSE(Target::cuda().gemm_operand_views_16bit);
  EXPECT_FALSE(Target::cuda().gemm_post_ops_16bit);
  {
    brrr_test::EnvVar off("BRRR_NO_GEMM_VIEWS_16BIT", "1");
    EXPECT_FALSE(Target::cpu().gemm_operand_views_16bit);
    EXPECT_TRUE(Target::cpu().gemm_post_ops_16bit);
  }
  brrr_test::EnvVar off("BRRR_NO_GEMM_POST_OPS_16BIT", "1");
  EXPECT_FALSE(Target::cpu().gemm_post_ops_16bit);
  EXPECT_TRUE(Target::cpu().gemm_operand_views_16bit);
}

Tensor shape_of(const std::vector<int64_t>& to) {
  return Tensor::from_vector<int64_t>({int64_t(to.size())}, to);
}

// One transformer layer's GEMMs as the exporters write them: BERT's head split (Reshape,
// Transpose [0,2,1,3] / [0,2,3,1], scalar Muls) and merge, then GPT-2's Conv1D (a 2-D Gemm with
// its bias, a Reshape back to 3-D, the residual Add) and a tanh GELU after the next GEMM.
Graph layer_graph() {
  std::mt19937 rng(21);
  GraphBuilder b;
  auto reshape = [&](int x, const std::vector<int64_t>& to) {
    return b.node("Reshape", {x, b.constant("shape" + std::to_string(b.count), shape_of(to))});
  };
  auto transpose = [&](int x, const std::vector<int64_t>& perm) {
    return b.node("Transpose", {x}, {{"perm", perm}});
  };
  const int S = 16, H = 4, D = 16, E = H * D;
  int x = b.input("x", {1, S, E});
  auto proj = [&](int in, const char* name) {
    return b.node("MatMul", {in, b.constant(name, brrr_test::uniform_f32({E, E}, rng, -0.2f, 0.2f))});
  };
  int q = b.node("Mul", {transpose(reshape(proj(x, "wq"), {1, S, H, D}), {0, 2, 1, 3}), b.scalar(0.5f)});
  int k = b.node("Mul", {transpose(reshape(proj(x, "wk"), {1, S, H, D}), {0, 2, 3, 1}), b.scalar(0.5f)});
  int v = transpose(reshape(proj(x, "wv"), {1, S, H, D}), {0, 2, 1, 3});
  int p = b.node("Softmax", {b.node("MatMul", {q, k})}, {{"axis", int64_t(-1)}});
  int ctx = b.node("MatMul", {p, v});
  int merged = reshape(transpose(ctx, {0, 2, 1, 3}), {S, E});
  int o = b.node("Gemm", {merged, b.constant("wo", brrr_test::uniform_f32({E, E}, rng, -0.2f, 0.2f)),
                          b.constant("bo", brrr_test::uniform_f32({E}, rng, -0.2f, 0.2f))});
  int h = b.node("Add", {reshape(o, {1, S, E}), x});
  int up = b.node("MatMul", {h, b.constant("wu", brrr_test::uniform_f32({E, 2 * E}, rng, -0.2f, 0.2f))});
  // 0.5 * u * (1 + tanh(sqrt(2/pi) * (u + 0.044715 * u^3))), as GPT-2's export writes it
  int cube = b.node("Pow", {up, b.scalar(3.f)});
  int inner = b.node("Add", {up, b.node("Mul", {b.scalar(0.044715f), cube})});
  int t = b.node("Tanh", {b.node("Mul", {b.scalar(0.7978845608f), inner})});
  int gelu = b.node("Mul", {b.node("Mul", {b.scalar(0.5f), up}), b.node("Add", {b.scalar(1.f), t})});
  b.output(gelu);
  return b.g;
}

int count_kind(const plan::Plan& p, plan::KernelKind kind) {
  int n = 0;
  for (const plan::Kernel& k : p.kernels) n += k.kind == kind;
  return n;
}

// Stored in bf16, the layer runs the float32 plan's kernels: the views are the GEMMs' strides and
// the bias Reshape, residual and GELU the Gemm's and the MatMul's post-ops. Without the switches'
// views and post-ops the 16-bit plan runs movement kernels and a generated GELU.
TEST(CpuBf16, StoredLayerKeepsViewsAndEpilogues) {
  if (!brrr_test::kDnnl) GTEST_SKIP() << brrr_test::kNoDnnl;
  CompileOptions bf16;
  bf16.storage = DType::bf16;
  Compiled f32 = compile(layer_graph(), Target::cpu(), CompileOptions{});
  Compiled on = compile(layer_graph(), Target::cpu("bf16", with(true, true)), bf16);
  EXPECT_GT(on.precision.converted, 0);
  const std::string plan = on.plan.print(on.graph);
  EXPECT_EQ(on.plan.kernels.size(), f32.plan.kernels.size() + 2) << plan;  // the casts in and out
  EXPECT_EQ(count_kind(on.plan, plan::KernelKind::Library),
            count_kind(f32.plan, plan::KernelKind::Library)) << plan;
  EXPECT_EQ(count_kind(on.plan, plan::KernelKind::Copy), 0) << plan;
  int epilogues = 0;
  for (const plan::Kernel& k : on.plan.kernels)
    if (const plan::GemmDesc* d = plan::desc_of<plan::GemmDesc>(k)) {
      EXPECT_EQ(on.graph.value(d->out).dtype, DType::bf16) << plan;
      epilogues += d->epi.sum >= 0;
      epilogues += d->epi.act == Activation::GeluTanh;
    }
  EXPECT_EQ(epilogues, 2) << plan;
  {
    brrr_test::EnvVar no_views("BRRR_NO_GEMM_VIEWS_16BIT", "1");
    Compiled off = compile(layer_graph(), Target::cpu("bf16", with(true, true)), bf16);
    EXPECT_GT(off.plan.kernels.size(), on.plan.kernels.size() + 3) << off.plan.print(off.graph);
  }
  brrr_test::EnvVar no_epi("BRRR_NO_GEMM_POST_OPS_16BIT", "1");
  Compiled off = compile(layer_graph(), Target::cpu("bf16", with(true, true)), bf16);
  EXPECT_GE(off.plan.kernels.size(), on.plan.kernels.size() + 2) << off.plan.print(off.graph);
}

// The float32 model g run stored in bf16 (--precision bf16, two runs: the second reuses the
// buffers) on inputs uniform in [-1, 1], and the float32 model's reference outputs.
struct StoredRun {
  std::unique_ptr<Session> session;
  std::vector<Tensor> got, want;
  std::string summary;
};
StoredRun run_stored_bf16(const Graph& g, unsigned seed) {
  std::mt19937 rng(seed);
  std::map<std::string, Tensor> in;
  for (int id : g.inputs)
    in[g.value(id).name] = brrr_test::uniform_f32(g.value(id).shape, rng, -1, 1);
  SessionOptions o;
  o.precision = "bf16";
  StoredRun r;
  r.session = std::make_unique<Session>(g, o);
  for (int k = 0; k < 2; ++k) r.got = r.session->run(in);
  Graph f32 = g;
  infer_shapes(f32, {});
  r.want = run_reference(f32, in);  // the float32 model
  r.summary = r.session->plan_summary();
  return r;
}

// A small conv net as the CNN exports write them: a stem conv and a max pool, a squeeze-excite
// block (global mean, two 1x1 convs, HardSigmoid, the channel scale between two convs), an
// average pool, then a global mean and a Gemm head.
Graph conv_net_graph() {
  std::mt19937 rng(8);
  GraphBuilder b;
  auto conv = [&](int x, int64_t co, int64_t ci, int64_t k, const char* act) {
    int y = b.node("Conv", {x, b.constant("w" + std::to_string(b.count),
                                          brrr_test::uniform_f32({co, ci, k, k}, rng, -0.3f, 0.3f)),
                            b.constant("b" + std::to_string(b.count),
                                       brrr_test::uniform_f32({co}, rng, -0.1f, 0.1f))},
                   {{"pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2}}});
    return act ? b.node(act, {y}) : y;
  };
  int img = b.input("img", {1, 3, 32, 32});
  int x = b.node("MaxPool", {conv(img, 32, 3, 3, "Relu")},
                 {{"kernel_shape", std::vector<int64_t>{3, 3}},
                  {"strides", std::vector<int64_t>{2, 2}},
                  {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  int h = conv(x, 48, 32, 1, "Relu");
  int squeeze = b.node("GlobalAveragePool", {h});
  int gate = conv(conv(squeeze, 16, 48, 1, "Relu"), 48, 16, 1, "HardSigmoid");
  int y = conv(b.node("Mul", {h, gate}), 64, 48, 3, "Relu");
  y = b.node("AveragePool", {y}, {{"kernel_shape", std::vector<int64_t>{2, 2}},
                                  {"strides", std::vector<int64_t>{2, 2}}});
  int pooled = b.node("Flatten", {b.node("GlobalAveragePool", {conv(y, 64, 64, 3, "Relu")})});
  b.output(b.node("Gemm", {pooled, b.constant("fc", brrr_test::uniform_f32({10, 64}, rng, -0.3f, 0.3f))},
                  {{"transB", int64_t(1)}}));
  return b.g;
}

// Conv nets are stored in bf16 like transformers (they kept float32 storage before, the CPU's
// pools computing float32 only): the pools, global means and the channel scale are library
// kernels on bf16 data.
TEST(CpuBf16, ConvNetStoredInBf16) {
  if (!brrr_test::kDnnl) GTEST_SKIP() << brrr_test::kNoDnnl;
  CompileOptions bf16;
  bf16.storage = DType::bf16;
  Compiled got = compile(conv_net_graph(), Target::cpu("bf16", with(true, true)), bf16);
  EXPECT_GT(got.precision.converted, 0);
  int pools = 0, means = 0, scales = 0;
  for (const plan::Kernel& k : got.plan.kernels) {
    EXPECT_NE(k.kind, plan::KernelKind::Reference) << got.plan.print(got.graph);
    pools += plan::desc_of<plan::PoolDesc>(k) != nullptr;
    means += plan::desc_of<plan::RowReduceDesc>(k) != nullptr;
    if (const auto* d = plan::desc_of<plan::ChannelScaleDesc>(k)) {
      ++scales;
      EXPECT_EQ(got.graph.value(d->x).dtype, DType::bf16);
    }
  }
  EXPECT_EQ(pools, 2) << got.plan.print(got.graph);
  EXPECT_EQ(means, 2) << got.plan.print(got.graph);
  EXPECT_EQ(scales, 1) << got.plan.print(got.graph);
}

// The conv net on this CPU: no reference kernel, within bf16's error of the float32 model; on a
// CPU with AMX its activations stay NHWC between the convs (oneDNN's AMX convs take NHWC only),
// on one without, channel-blocked.
TEST(CpuBf16, ConvNetWithinBf16Tolerance) {
  if (!host_has_bf16()) GTEST_SKIP() << "bf16: " << cpu_precision_refusal("bf16");
  const StoredRun r = run_stored_bf16(conv_net_graph(), 3);
  const std::vector<Tensor>& got = r.got;
  const std::vector<Tensor>& want = r.want;
  const std::string& summary = r.summary;
  EXPECT_NE(summary.find("stored in 16 bits"), std::string::npos) << summary;
  EXPECT_EQ(r.session->num_kernels("reference"), 0) << summary;
  const bool amx = CpuFeatures::host().amx_bf16;
  EXPECT_NE(summary.find(amx ? "kept NHWC" : "kept channel-blocked"), std::string::npos) << summary;
  ASSERT_EQ(got.size(), want.size());
  double e = rel_l2(got[0], want[0]);
  EXPECT_LT(e, 2e-2) << summary;
  EXPECT_GT(e, 1e-5) << "float32-exact: bf16 did not run\n" << summary;
}

// A bf16 max pool propagates a NaN as the reference does (oneDNN's drops it), and a bf16 channel
// scale and global mean match the reference on bf16 data.
TEST(CpuBf16, PoolMeanAndScaleOnBf16Data) {
  if (!host_has_bf16()) GTEST_SKIP() << "bf16: " << cpu_precision_refusal("bf16");
  std::mt19937 rng(4);
  GraphBuilder b;
  int x = b.input("x", {1, 24, 12, 12}, DType::bf16), x2 = b.input("x2", {1, 24, 12, 12}, DType::bf16);
  int w = b.constant("w", brrr_test::uniform_f32({24, 24, 1, 1}, rng, -0.3f, 0.3f).cast(DType::bf16));
  auto pool = [&](int v) {
    return b.node("MaxPool", {v}, {{"kernel_shape", std::vector<int64_t>{2, 2}},
                                   {"strides", std::vector<int64_t>{2, 2}}});
  };
  b.output(pool(b.node("Conv", {x, w})));  // x holds a NaN
  int c = b.node("Relu", {b.node("Conv", {x2, w})});
  int gate = b.node("Sigmoid", {b.node("GlobalAveragePool", {c})});
  int y = b.node("Conv", {b.node("Mul", {c, gate}), w});
  b.output(b.node("GlobalAveragePool", {y}));
  b.output(pool(y));
  Tensor xt = brrr_test::uniform_f32({1, 24, 12, 12}, rng, -1, 1).cast(DType::bf16);
  Tensor x2t = brrr_test::uniform_f32({1, 24, 12, 12}, rng, -1, 1).cast(DType::bf16);
  xt.data<bf16>()[5 * 144 + 3 * 12 + 7] = bf16(std::nanf(""));  // channel 5, row 3, column 7
  const std::map<std::string, Tensor> in{{"x", xt}, {"x2", x2t}};
  Session s(b.g);
  std::vector<Tensor> got = s.run(in);
  std::vector<Tensor> want = run_reference(s.graph(), in);
  const std::string summary = s.plan_summary();
  EXPECT_EQ(s.num_kernels("reference"), 0) << summary;
  EXPECT_NE(summary.find("library     1 op(s) [Mul]"), std::string::npos) << summary;  // the scale
  ASSERT_EQ(got.size(), 3u);
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].dtype(), DType::bf16);
    Tensor g32 = got[o].cast(DType::f32), w32 = want[o].cast(DType::f32);
    int64_t nans = 0;
    for (int64_t i = 0; i < w32.numel(); ++i) {
      const float a = g32.data<float>()[i], e = w32.data<float>()[i];
      if (std::isnan(e)) {
        EXPECT_TRUE(std::isnan(a)) << "output " << o << " element " << i;
        ++nans;
        continue;
      }
      EXPECT_NEAR(a, e, 2e-2 * std::max(1.f, std::fabs(e))) << "output " << o << " element " << i;
    }
    if (o == 0)
      EXPECT_GT(nans, 0) << "the max pool dropped the NaN\n" << summary;
    else
      EXPECT_EQ(nans, 0) << "output " << o << "\n" << summary;
  }
}

// The stored layer on this CPU: within bf16's error of the float32 model's reference, no
// reference kernel, no copy.
TEST(CpuBf16, StoredLayerWithinBf16Tolerance) {
  if (!host_has_bf16()) GTEST_SKIP() << "bf16: " << cpu_precision_refusal("bf16");
  const StoredRun r = run_stored_bf16(layer_graph(), 12);
  const std::vector<Tensor>& got = r.got;
  const std::vector<Tensor>& want = r.want;
  const std::string& summary = r.summary;
  EXPECT_NE(summary.find("stored in 16 bits"), std::string::npos) << summary;
  EXPECT_EQ(r.session->num_kernels("reference"), 0) << summary;
  EXPECT_EQ(r.session->num_kernels("copy"), 0) << summary;
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(got[0].dtype(), DType::f32);
  double e = rel_l2(got[0], want[0]);
  EXPECT_LT(e, 2e-2) << summary;
  EXPECT_GT(e, 1e-5) << "float32-exact: bf16 did not run\n" << summary;
}

}  // namespace
}  // namespace brrr
