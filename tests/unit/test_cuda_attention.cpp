// Fused attention on CUDA (plan/attention.cpp, device/attention.cuh): the plan for the CUDA
// target makes one attention kernel of Q.K^T, the scale, the masks, the softmax, P.V and the head
// split and merge around them (checked here without a device), its module compiles with NVRTC,
// and on a device it equals the reference executor in float32, bfloat16 and float16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "brrr/onnx.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "attention_graph.hpp"
#include "env_var.hpp"
#include "passes/pipeline.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/library_desc.hpp"
#include "plan/target.hpp"
#include "runtime/graph_builder.hpp"

#ifdef BRRR_HAVE_CUDA
#include "backend/cuda/codegen_cuda.hpp"
#include "backend/cuda/cudnn_attention.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "cuda_test_util.hpp"
#endif

namespace brrr {
namespace {

const std::string kExamples = std::string(BRRR_TEST_DATA) + "/../../examples/";

using namespace attention_test;

plan::Plan cuda_plan(Graph& g) {
  infer_shapes(g, {});
  plan::FusionOptions fo;
  fo.float16 = true;
  fo.booleans = true;
  return plan::build_plan(g, fo, plan::Target::cuda());
}

int count_attention(const plan::Plan& p) {
  int n = 0;
  for (const plan::Kernel& k : p.kernels) n += plan::desc_of<plan::AttentionDesc>(k) != nullptr;
  return n;
}

// The whole block is one kernel for the CUDA target: no head-split copy, no transpose kernel, no
// GEMM, no softmax; its descriptor reads the projections through the head split's strides.
TEST(FusedAttentionPlan, SyntheticBlockIsOneKernel) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  for (Spec s : {Spec{}, Spec{2, 4, 77, 32, Mask::Add, DType::bf16, true, true},
                 Spec{2, 3, 20, 16, Mask::Add, DType::f32},
                 Spec{1, 8, 40, 64, Mask::Add, DType::bf16, false, false, 2, true},
                 Spec{1, 2, 24, 16, Mask::Bool, DType::f32, false, false, 0, true},
                 Spec{1, 4, 50, 64, Mask::CausalAdd, DType::bf16, true, true, 2, true},
                 Spec{2, 2, 33, 32, Mask::CausalAdd, DType::f16},
                 Spec{1, 2, 65, 64, Mask::Causal, DType::f16}}) {
    Graph g = attention(s);
    plan::Plan p = cuda_plan(g);
    ASSERT_EQ(p.kernels.size(), 1u) << p.print(g);
    const plan::AttentionDesc* d = plan::desc_of<plan::AttentionDesc>(p.kernels[0]);
    ASSERT_NE(d, nullptr) << p.print(g);
    EXPECT_EQ(p.kernels[0].kind, plan::KernelKind::Library);
    EXPECT_EQ(d->batch, s.batch);
    EXPECT_EQ(d->heads, s.heads);
    EXPECT_EQ(d->seq_q, s.seq);
    EXPECT_EQ(d->seq_k, s.seq);
    EXPECT_EQ(d->head_dim, s.dim);
    EXPECT_EQ(d->dtype, s.dt);
    // (the scale constants are rounded to the graph's type: 16-bit ones to within 2^-8)
    const double want = 1.0 / std::sqrt(double(s.dim));
    EXPECT_NEAR(d->scale, want, (s.dt == DType::f32 ? 1e-6 : 1e-2) * want);
    const int64_t HD = s.heads * s.dim, S = s.seq;
    // Q and V [B,S,H,D] buffers read as [B,H,S,D]; K likewise (the descriptor holds K, not K^T).
    const std::array<int64_t, 4> split{S * HD, s.dim, HD, 1};
    EXPECT_EQ(d->q_strides, split);
    const int64_t KV = s.kv_heads ? s.kv_heads : s.heads;
    EXPECT_EQ(d->kv_heads, KV);
    const std::array<int64_t, 4> kv_split{S * KV * s.dim, s.dim, KV * s.dim, 1};
    EXPECT_EQ(d->k_strides, kv_split);  // the repeated heads are not materialized
    EXPECT_EQ(d->v_strides, kv_split);
    EXPECT_EQ(d->out_strides, split);  // the merged heads written in place
    EXPECT_EQ(d->q, g.inputs[0]);
    EXPECT_EQ(d->out, g.outputs[0]);
    EXPECT_EQ(d->zero_empty_rows, s.nan_guard);
    if (s.mask == Mask::Add) {
      EXPECT_GE(d->mask, 0);
      EXPECT_EQ(d->mask_strides, (std::array<int64_t, 4>{s.batch > 1 ? S : 0, 0, 0, 1}));
    } else {
      EXPECT_EQ(d->mask, -1);
    }
    EXPECT_EQ(d->causal, s.mask == Mask::Causal || s.mask == Mask::CausalAdd);
    if (s.mask == Mask::Bool) {
      EXPECT_GE(d->keep, 0);
      EXPECT_TRUE(d->keep_when);
      EXPECT_TRUE(std::isinf(d->fill) && d->fill < 0);
      EXPECT_EQ(d->keep_strides, (std::array<int64_t, 4>{0, 0, S, 1}));
    } else {
      EXPECT_EQ(d->keep, -1);  // a causal mask is computed, not read
    }
  }
}

// Q, K and V as parts of one merged projection (merge_parallel_gemms's Slices) are read in place:
// one buffer at three offsets, each row as wide as the merged one; no Slice copy remains.
TEST(FusedAttentionPlan, MergedProjectionIsReadAtOffsets) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  for (Spec s : {Spec{1, 12, 128, 64, Mask::Add, DType::bf16},
                 Spec{2, 4, 77, 32, Mask::CausalAdd, DType::f16, true, true},
                 Spec{1, 8, 40, 64, Mask::Causal, DType::bf16, false, false, 2, true}}) {
    s.merged = true;
    Graph g = attention(s);
    plan::Plan p = cuda_plan(g);
    ASSERT_EQ(p.kernels.size(), 1u) << p.print(g);
    const plan::AttentionDesc* d = plan::desc_of<plan::AttentionDesc>(p.kernels[0]);
    ASSERT_NE(d, nullptr) << p.print(g);
    const int64_t KV = s.kv_heads ? s.kv_heads : s.heads, D = s.dim, S = s.seq;
    const int64_t W = (s.heads + 2 * KV) * D;
    EXPECT_EQ(d->q, g.inputs[0]);
    EXPECT_EQ(d->k, g.inputs[0]);
    EXPECT_EQ(d->v, g.inputs[0]);
    EXPECT_EQ(d->q_offset, 0);
    EXPECT_EQ(d->k_offset, s.heads * D);
    EXPECT_EQ(d->v_offset, (s.heads + KV) * D);
    EXPECT_EQ(d->kv_heads, KV);
    const std::array<int64_t, 4> rows{S * W, D, W, 1};
    EXPECT_EQ(d->q_strides, rows);
    EXPECT_EQ(d->k_strides, rows);
    EXPECT_EQ(d->v_strides, rows);
    EXPECT_EQ(d->out_strides, (std::array<int64_t, 4>{S * s.heads * D, D, s.heads * D, 1}));
  }
}

// A constant additive mask of zeros is no mask: the kernel reads none.
TEST(FusedAttentionPlan, ZeroMaskIsDropped) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  GraphBuilder b;
  int q = b.input("q", {1, 2, 8, 16}), kt = b.input("kt", {1, 2, 16, 8}), v = b.input("v", {1, 2, 8, 16});
  Tensor zeros = Tensor::from_vector<float>({1, 1, 1, 8}, std::vector<float>(8, 0.f));
  int s = b.node("Add", {b.node("MatMul", {q, kt}), b.constant("zeros", zeros)});
  b.output(b.node("MatMul", {b.node("Softmax", {s}, {{"axis", int64_t(-1)}}), v}));
  plan::Plan p = cuda_plan(b.g);
  ASSERT_EQ(p.kernels.size(), 1u) << p.print(b.g);
  const plan::AttentionDesc* d = plan::desc_of<plan::AttentionDesc>(p.kernels[0]);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->mask, -1);
  EXPECT_FALSE(d->causal);
  EXPECT_EQ(d->k_strides, (std::array<int64_t, 4>{256, 128, 1, 8}));  // K^T's buffer read as K
}

// A constant causal mask folded with one copy per batch ([B, 1, S, S], GPT-2's at batch > 1) is
// the kernel's causal mask when every copy is causal; one copy that differs keeps it a mask.
TEST(FusedAttentionPlan, CausalMaskCopiedPerBatchIsCausal) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  const int64_t B = 3, S = 8;
  for (bool differs : {false, true}) {
    SCOPED_TRACE(differs ? "one copy differs" : "every copy causal");
    GraphBuilder b;
    int q = b.input("q", {B, 2, S, 16}), kt = b.input("kt", {B, 2, 16, S});
    int v = b.input("v", {B, 2, S, 16});
    Tensor m = Tensor::empty(DType::f32, {B, 1, S, S});
    for (int64_t n = 0; n < B; ++n)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < S; ++j)
          m.data<float>()[(n * S + i) * S + j] =
              j <= i || (differs && n == 2 && i == 3 && j == 5) ? 0.f
                                                                : std::numeric_limits<float>::lowest();
    int sc = b.node("Add", {b.node("MatMul", {q, kt}), b.constant("causal", m)});
    b.output(b.node("MatMul", {b.node("Softmax", {sc}, {{"axis", int64_t(-1)}}), v}));
    plan::Plan p = cuda_plan(b.g);
    ASSERT_EQ(p.kernels.size(), 1u) << p.print(b.g);
    const plan::AttentionDesc* d = plan::desc_of<plan::AttentionDesc>(p.kernels[0]);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->causal, !differs);
    EXPECT_EQ(d->mask >= 0, differs);
  }
}

// On by default; BRRR_FUSED_ATTENTION=0 runs attention as the separate kernels.
TEST(FusedAttentionPlan, SwitchRestoresSeparateKernels) {
  {
    Graph g = attention(Spec{});
    EXPECT_EQ(count_attention(cuda_plan(g)), 1) << "on by default";
  }
  brrr_test::EnvVar off("BRRR_FUSED_ATTENTION", "0");
  Graph g = attention(Spec{});
  plan::Plan p = cuda_plan(g);
  EXPECT_EQ(count_attention(p), 0) << p.print(g);
  EXPECT_GE(p.kernels.size(), 5u) << p.print(g);
}

// A block whose intermediate is read outside it (the probabilities are also an output), or a
// head dim past the kernel's 128, stays as separate kernels.
TEST(FusedAttentionPlan, WhatItCannotTakeStaysSeparate) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  {
    Graph g = attention(Spec{1, 2, 16, 160});
    plan::Plan p = cuda_plan(g);
    EXPECT_EQ(count_attention(p), 0) << p.print(g);
  }
  {
    Graph g = attention(Spec{1, 2, 16, 32});
    for (const Node& n : g.nodes)
      if (n.op == "Softmax") g.outputs.push_back(n.outputs[0]);
    plan::Plan p = cuda_plan(g);
    EXPECT_EQ(count_attention(p), 0) << p.print(g);
  }
}

// bert_tiny through the whole compile pipeline for CUDA: one attention kernel per layer, and no
// kernel left of the attention blocks (no Transpose, Softmax or batched MatMul elsewhere).
TEST(FusedAttentionPlan, BertTinyHasOneAttentionKernelPerLayer) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  Graph model = load_onnx(kExamples + "bert_tiny/model.onnx");
  Compiled c = compile(model, plan::Target::cuda(), {});
  int softmaxes = 0;
  for (const Node& n : c.graph.nodes) softmaxes += n.op == "Softmax";
  ASSERT_GT(softmaxes, 0);
  EXPECT_EQ(count_attention(c.plan), softmaxes) << c.plan.print(c.graph);
  for (const plan::Kernel& k : c.plan.kernels) {
    if (plan::desc_of<plan::AttentionDesc>(k)) continue;
    EXPECT_NE(k.kind, plan::KernelKind::Copy) << k.name << "\n" << c.plan.print(c.graph);
    for (int n : k.nodes) {
      const std::string& op = c.graph.nodes[size_t(n)].op;
      EXPECT_TRUE(op != "Transpose" && op != "Softmax") << k.name << " " << op;
    }
  }
  brrr_test::EnvVar off("BRRR_FUSED_ATTENTION", "0");
  Compiled before = compile(model, plan::Target::cuda(), {});
  EXPECT_EQ(count_attention(before.plan), 0);
  EXPECT_GT(before.plan.kernels.size(), c.plan.kernels.size() + size_t(softmaxes) * 4)
      << before.plan.print(before.graph);
}

#ifdef BRRR_HAVE_CUDA
// NVRTC needs no device: a module with the attention kernels compiles for sm_90 anywhere.
TEST(FusedAttentionCodegen, ModuleCompilesWithNvrtc) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  Graph g = attention(Spec{1, 2, 16, 32, Mask::Add, DType::bf16});
  plan::Plan p = cuda_plan(g);
  ASSERT_EQ(count_attention(p), 1) << p.print(g);
  brrr::cuda::CudaSource src = brrr::cuda::generate_cuda(g, p, {});
  EXPECT_NE(src.text.find("attention.cuh"), std::string::npos);
  brrr::cuda::NvrtcCompiler nv("sm_90", "");
  EXPECT_NO_THROW(nv.compile(src.text, "attention_module"));
}

// The module instantiates only the attention kernels its plan can pick (each costs NVRTC about
// a second): for bf16 with a head dim of 64, the flash, strided and CUDA core kernels of bf16.
TEST(FusedAttentionCodegen, ModuleHasOnlyTheKernelsItsPlanPicks) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  Graph g = attention(Spec{1, 2, 16, 64, Mask::Add, DType::bf16});
  plan::Plan p = cuda_plan(g);
  ASSERT_EQ(count_attention(p), 1) << p.print(g);
  brrr::cuda::CudaSource src = brrr::cuda::generate_cuda(g, p, {});
  brrr::cuda::NvrtcCompiler nv("sm_90", "");
  const std::vector<char> cubin = nv.compile(src.text, "attention_select").cubin;
  auto has = [&](const std::string& name) {
    const std::string z = name + '\0';  // the symbol, not a longer name it begins
    return std::search(cubin.begin(), cubin.end(), z.begin(), z.end()) != cubin.end();
  };
  for (const char* k : {"brrr_attention_flash64_bf16", "brrr_attention_mma64_bf16", "brrr_attention_bf16"})
    EXPECT_TRUE(has(k)) << k;
  for (const char* k : {"brrr_attention_flash128_bf16", "brrr_attention_mma64_f16",
                        "brrr_attention_flash64_f16", "brrr_attention_f32", "brrr_attention_f16"})
    EXPECT_FALSE(has(k)) << k;
}

Tensor rnd(const Shape& s, DType t, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  Tensor x = Tensor::empty(DType::f32, s);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = d(rng);
  return x.cast(t);
}

// The CUDA session (one fused kernel, whose plan summary names `path`) against the reference
// executor (node by node, each result rounded to the graph's type). Tolerances: float32 math in
// the kernel against the reference's, a few units of the 16-bit formats' precision. Inputs are
// uniform in [-2, 2]; an input named "mask" is BERT's: 0 for tokens, a large negative for padding.
// Returns the plan summary.
std::string check_graph_on_device(const Graph& g, DType dt, const std::string& path) {
  std::map<std::string, Tensor> in;
  unsigned seed = 7;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape, dt, seed++);
  if (in.count("mask")) {
    Tensor m = Tensor::empty(DType::f32, in["mask"].shape());
    for (int64_t i = 0; i < m.numel(); ++i) m.data<float>()[i] = i % 7 == 3 ? -10000.f : 0.f;
    in["mask"] = m.cast(dt);
  }
  SessionOptions o;
  o.backend = "cuda";
  Session sess(g, o);
  EXPECT_EQ(sess.num_kernels(), 1) << sess.plan_summary();
  EXPECT_NE(sess.plan_summary().find(path), std::string::npos) << sess.plan_summary();
  std::vector<Tensor> got = sess.run(in);
  std::vector<Tensor> want = run_reference(sess.graph(), in);
  const double tol = dt == DType::f32 ? 1e-5 : dt == DType::f16 ? 5e-3 : 2e-2;
  brrr_cuda_test::expect_rel_l2(got, want, tol, sess.plan_summary());
  return sess.plan_summary();
}

// 16-bit data with head dims of 64 and 128 runs on Tensor Cores unless `cuda_cores`: through the
// flash kernel, since attention() gives every operand contiguous rows.
void check_on_device(const Spec& s, bool cuda_cores) {
  std::optional<brrr_test::EnvVar> force;
  if (cuda_cores) force.emplace("BRRR_ATTENTION_CUDA_CORES", "1");
  const bool mma = !cuda_cores && s.dt != DType::f32 && (s.dim == 64 || s.dim == 128);
  check_graph_on_device(attention(s), s.dt, mma ? "tensor cores flash" : "cuda cores");
}

TEST(FusedAttentionCuda, MatchesReference) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  brrr_test::EnvVar own("BRRR_ATTN_CUDNN", "0");  // brrr's kernels, not cuDNN's
  BRRR_REQUIRE_CUDA_DEVICE();
  const std::vector<Spec> specs = {
      {1, 12, 128, 64, Mask::None},  // BERT-base's shape
      {2, 4, 77, 32, Mask::Add, DType::f32, false, true},
      {1, 2, 65, 64, Mask::Causal, DType::f32, true, true},
      {1, 2, 33, 128, Mask::Add, DType::f32, true},
      {3, 1, 5, 8, Mask::Causal},
      {2, 3, 20, 16, Mask::Add},
      {1, 2, 24, 16, Mask::Bool, DType::f32, false, true},
      {1, 3, 40, 64, Mask::Bool},
      {1, 12, 128, 64, Mask::CausalAdd, DType::f32, true, true},  // GPT-2's
      {2, 2, 100, 128, Mask::CausalAdd},
      {1, 8, 128, 64, Mask::Causal, DType::f32, false, false, 2},  // GQA
      {2, 8, 37, 64, Mask::Add, DType::f32, true, true, 4, true},
      {1, 4, 1, 64, Mask::None},  // one query, one key
  };
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (bool cuda_cores : {false, true}) {
      if (dt == DType::f32 && !cuda_cores) continue;  // float32 has the CUDA core kernel alone
      for (Spec s : specs) {
        s.dt = dt;
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << (cuda_cores ? " cuda cores" : "")
                                          << " b" << s.batch << " h" << s.heads << " s" << s.seq
                                          << " d" << s.dim << " mask " << int(s.mask));
        check_on_device(s, cuda_cores);
      }
    }
}

// The flash kernel at the shapes it is for: BERT-base (batch 1 and 4, 12 heads, d 64, additive
// padding mask), GPT-2's causal block, and the edges of its tiling: sequences that are no
// multiple of the key tile and longer than its two stages, d 128, grouped-query heads, batches
// large enough for 4-warp blocks, a bool mask, the NaN guard.
TEST(FusedAttentionCuda, FlashMatchesReference) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  brrr_test::EnvVar own("BRRR_ATTN_CUDNN", "0");  // brrr's kernels, not cuDNN's
  BRRR_REQUIRE_CUDA_DEVICE();
  const std::vector<Spec> specs = {
      {1, 12, 128, 64, Mask::Add},                                // BERT-base batch 1
      {4, 12, 128, 64, Mask::Add},                                // BERT-base batch 4
      {1, 12, 128, 64, Mask::CausalAdd, DType::f32, true, true},  // GPT-2's export
      {1, 12, 128, 64, Mask::Causal},
      {2, 12, 300, 64, Mask::Causal},                             // 10 tiles, the last partial
      {1, 4, 1000, 64, Mask::Add, DType::f32, false, true},
      {32, 12, 128, 64, Mask::Add},                               // 4-warp blocks
      {3, 6, 77, 128, Mask::Add},
      {2, 4, 200, 128, Mask::CausalAdd, DType::f32, true, true},
      {1, 8, 130, 64, Mask::Causal, DType::f32, false, false, 2},  // GQA
      {16, 8, 96, 128, Mask::None, DType::f32, false, false, 4, true},
      {1, 3, 40, 64, Mask::Bool, DType::f32, false, true},
      {1, 4, 1, 64, Mask::None},
      // Q, K and V at offsets into one merged projection (merge_parallel_gemms)
      {1, 12, 128, 64, Mask::Add, DType::f32, false, false, 0, false, true},
      {2, 12, 128, 64, Mask::CausalAdd, DType::f32, true, true, 0, false, true},
      {1, 8, 130, 64, Mask::Causal, DType::f32, false, false, 2, false, true},
      // ViT-B/16's 197 tokens, no mask: plain tiles, a last tile of 5 keys, idle warps
      {1, 12, 197, 64, Mask::None},
      {32, 12, 197, 64, Mask::None},
      {8, 4, 197, 128, Mask::None},
      {8, 12, 197, 64, Mask::Causal},
  };
  // BRRR_ATTN_FAST_TILES=0: every score through the bounds and mask checks. BRRR_ATTN_KSPLIT=1:
  // the small grids (batch 1, one or two tiles' worth of heads) split their keys over two warps,
  // odd tile counts (ViT's 197 keys, 300, 1000, d 128's 32-key tiles) included.
  for (const char* split : {"0", "1"})
    for (const char* fast : {"1", "0"})
      for (DType dt : {DType::bf16, DType::f16})
        for (Spec s : specs) {
          brrr_test::EnvVar ks("BRRR_ATTN_KSPLIT", split);
          brrr_test::EnvVar tiles("BRRR_ATTN_FAST_TILES", fast);
          s.dt = dt;
          SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " b" << s.batch << " h" << s.heads
                                            << " s" << s.seq << " d" << s.dim << " mask "
                                            << int(s.mask) << " fast tiles " << fast
                                            << " key split " << split);
          check_on_device(s, false);
        }
}

// The key split is taken where one-warp blocks leave the SMs idle (BERT-base and ViT-B/16 at batch
// 1, 12 heads: 96 and 156 blocks on the H200's 132 SMs, both over more than one key tile) and not
// where the grid is full (batch 32: 4-warp blocks) or the keys are one tile (32 of them).
TEST(FusedAttentionCuda, KeySplitOnlyWhereTheGridIsSmall) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  brrr_test::EnvVar own("BRRR_ATTN_CUDNN", "0");
  brrr_test::EnvVar ks("BRRR_ATTN_KSPLIT", "1");
  BRRR_REQUIRE_CUDA_DEVICE();
  const struct {
    Spec s;
    const char* path;
  } cases[] = {
      {{1, 12, 128, 64, Mask::Add, DType::bf16}, "flash 2w key split 2"},
      {{1, 12, 197, 64, Mask::None, DType::bf16}, "flash 2w key split 2"},
      {{1, 12, 128, 64, Mask::Causal, DType::f16}, "flash 2w key split 2"},
      {{32, 12, 128, 64, Mask::Add, DType::bf16}, "flash 4w bfloat16"},
      {{1, 12, 32, 64, Mask::Add, DType::bf16}, "flash 1w bfloat16"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message() << "b" << c.s.batch << " s" << c.s.seq);
    check_graph_on_device(attention(c.s), c.s.dt, c.path);
  }
}

// cuDNN's SDPA (BRRR_ATTN_CUDNN=2: wherever cuDNN takes it) at the shapes of the model suite: BERT-base's
// additive padding mask, GPT-2's causal block, ViT-B/16's 197 tokens, Llama's grouped-query
// heads, Q/K/V read at offsets into one merged projection, and odd lengths. Where this build has
// the cuDNN frontend, those must run on cuDNN; a bool mask must stay on the flash kernel and the
// summary must say why; a constant additive causal mask may go either way (the plan may turn it
// into the causal flag). Every result equals the reference.
TEST(FusedAttentionCuda, CudnnMatchesReference) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  BRRR_REQUIRE_CUDA_DEVICE();
  enum Want { kCudnn, kFlash, kEither };
  struct Case {
    Spec s;
    Want want;
  };
  const std::vector<Case> cases = {
      {{1, 12, 128, 64, Mask::Add}, kCudnn},                                // BERT-base batch 1
      {{32, 12, 128, 64, Mask::Add}, kCudnn},                               // BERT-base batch 32
      {{1, 12, 128, 64, Mask::Causal}, kCudnn},                             // GPT-2
      {{16, 12, 128, 64, Mask::Causal, DType::f32, true}, kCudnn},          // b16, split scale
      {{1, 12, 197, 64, Mask::None}, kCudnn},                               // ViT-B/16
      {{32, 12, 197, 64, Mask::None}, kCudnn},
      {{1, 32, 128, 64, Mask::Causal, DType::f32, false, false, 8}, kCudnn},  // Llama-1B's GQA
      {{2, 12, 128, 64, Mask::Add, DType::f32, false, false, 0, false, true}, kCudnn},  // merged
      {{3, 6, 77, 128, Mask::Add}, kCudnn},
      {{2, 4, 200, 128, Mask::CausalAdd}, kEither},
      {{1, 12, 128, 64, Mask::CausalAdd, DType::f32, true, true}, kEither},  // GPT-2's export
      {{1, 3, 40, 64, Mask::Bool}, kFlash},
  };
  const bool built = cuda::CudnnSdpa::built();
  // 2: cuDNN wherever it takes the geometry; 1 (the default): where it also times faster than
  // the flash kernel, so either path.
  for (const char* mode : {"2", "1"})
  for (DType dt : {DType::bf16, DType::f16})
    for (Case c : cases) {
      brrr_test::EnvVar dnn("BRRR_ATTN_CUDNN", mode);
      c.s.dt = dt;
      const Spec& s = c.s;
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " b" << s.batch << " h" << s.heads
                                        << " s" << s.seq << " d" << s.dim << " mask "
                                        << int(s.mask) << " BRRR_ATTN_CUDNN=" << mode);
      if (std::string(mode) == "1" && c.want == kCudnn) c.want = kEither;
      const std::string path = !built || c.want == kEither ? "attention "
                               : c.want == kCudnn          ? "cuDNN SDPA"
                                                           : "(not cuDNN: a bool mask)";
      check_graph_on_device(attention(s), dt, path);
    }
}

// BRRR_CUDNN_RUNTIME_COMPILED=2: cuDNN's plan built in a forked child (deviceless, NVRTC there)
// and loaded here, or, where that fails, the plan summary says why ("child build: ..."); the
// results match the reference either way. (On an H100 with cuDNN 9.19 the child builds every
// case here since the handle and the device id are set apart, docs/CUDA.md; 2 is the default.)
TEST(FusedAttentionCuda, CudnnPlanBuiltInAChildMatchesReference) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  brrr_test::EnvVar dnn("BRRR_ATTN_CUDNN", "2");
  brrr_test::EnvVar rtc("BRRR_CUDNN_RUNTIME_COMPILED", "2");
  BRRR_REQUIRE_CUDA_DEVICE();
  const std::vector<Spec> cases = {
      {1, 12, 128, 64, Mask::Add},      // BERT-base batch 1
      {16, 12, 128, 64, Mask::Causal},  // GPT-2 batch 16
      {32, 12, 197, 64, Mask::None},    // ViT-B/16 batch 32
      {3, 6, 77, 128, Mask::Add},
  };
  const bool built = cuda::CudnnSdpa::built();
  for (DType dt : {DType::bf16, DType::f16})
    for (Spec s : cases) {
      s.dt = dt;
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " b" << s.batch << " h" << s.heads
                                        << " s" << s.seq << " d" << s.dim << " mask "
                                        << int(s.mask));
      const std::string summary =
          check_graph_on_device(attention(s), dt, built ? "child" : "attention ");
      if (built)
        EXPECT_TRUE(summary.find("plan built in a child") != std::string::npos ||
                    summary.find("(child build: ") != std::string::npos)
            << summary;
    }
}

// K^T as the graph's own input [B, H, D, S] (no transposed copy): K's rows are strided, so the
// 16-bit Tensor Core path is the strided kernel rather than the flash one.
TEST(FusedAttentionCuda, StridedKeysUseTheStridedKernel) {
  brrr_test::EnvVar on("BRRR_FUSED_ATTENTION", "1");
  brrr_test::EnvVar own("BRRR_ATTN_CUDNN", "0");  // brrr's kernels, not cuDNN's
  BRRR_REQUIRE_CUDA_DEVICE();
  for (DType dt : {DType::bf16, DType::f16}) {
    const int64_t B = 2, H = 4, S = 70, D = 64;
    GraphBuilder b;
    int q = b.input("q", {B, H, S, D}, dt), kt = b.input("kt", {B, H, D, S}, dt);
    int v = b.input("v", {B, H, S, D}, dt);
    int sc = b.node("Div", {b.node("MatMul", {q, kt}), typed_scalar(b, 8.f, dt)});
    sc = b.node("Add", {sc, b.input("mask", {B, 1, 1, S}, dt)});
    b.output(b.node("MatMul", {b.node("Softmax", {sc}, {{"axis", int64_t(-1)}}), v}));
    SCOPED_TRACE(dtype_name(dt));
    check_graph_on_device(b.g, dt, "tensor cores strided");
  }
}
#endif

}  // namespace
}  // namespace brrr
