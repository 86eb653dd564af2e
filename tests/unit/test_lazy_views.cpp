// Lazy views and deferred pointwise nodes in the fuser (Target::lazy_views: CUDA by default, the
// CPU with BRRR_CPU_LAZY_VIEWS=1) and the rotary rewrite they make pay
// (passes/split_rotary_halves.cpp). Checked without a device: the rewrite against the original
// graph on the reference executor, the CUDA pipeline's plan, and CPU sessions with the opt-in
// (the fuser's decisions are the same; the C++ emitter reads the same kernel IR) against the
// reference, including the views and deferred values that a library kernel must read as buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "llama_glue.hpp"
#include "passes/pipeline.hpp"
#include "plan/target.hpp"
#include "runtime/graph_builder.hpp"
#ifdef BRRR_HAVE_CUDA
#include "cuda_test_util.hpp"
#endif

namespace brrr {
namespace {

using namespace llama_glue_test;  // NOLINT: kSeq, llama_glue, ...

int count(const Graph& g, const std::string& op) {
  return int(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; }));
}

std::map<std::string, Tensor> some_ids() {
  return {{"ids", Tensor::from_vector<int64_t>({1, kSeq}, {3, 0, 10, 1, 7})}};
}

// Each output within tol of the reference, relative and as a share of its largest magnitude (a
// 16-bit result is a few roundings of the largest value off).
void expect_close_scaled(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double tol,
                         const std::string& context) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    double top = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) top = std::max(top, std::fabs(want[o].at_double(i)));
    brrr_test::expect_outputs_close({got[o]}, {want[o]}, tol, tol * std::max(1.0, top), context);
  }
}

// The kernels of a plan whose nodes include `op`.
std::vector<const plan::Kernel*> kernels_with(const Compiled& c, const std::string& op) {
  std::vector<const plan::Kernel*> out;
  for (const plan::Kernel& k : c.plan.kernels)
    if (std::any_of(k.nodes.begin(), k.nodes.end(), [&](int n) { return c.graph.nodes[size_t(n)].op == op; }))
      out.push_back(&k);
  return out;
}

TEST(SplitRotaryHalves, SameValuesOnTheReference) {
  for (DType dt : {DType::f32, DType::bf16}) {
    Graph g = llama_glue(dt);
    infer_shapes(g, {});
    const Graph before = g;
    ASSERT_TRUE(split_rotary_halves(g));
    EXPECT_EQ(count(g, "Concat"), 0) << g.print();
    EXPECT_EQ(count(g, "Neg"), 0);
    EXPECT_EQ(count(g, "Where"), 2);  // q and k
    std::vector<Tensor> want = run_reference(before, some_ids()), got = run_reference(g, some_ids());
    ASSERT_EQ(want.size(), got.size());
    // The same roundings at the same points: rot * sign is -x2 or x1 exactly.
    for (size_t o = 0; o < want.size(); ++o) brrr_test::expect_outputs_close({got[o]}, {want[o]}, 0, 0, "");
  }
}

// Halves in the other order, another axis or a Slice that is not a half: left alone.
TEST(SplitRotaryHalves, LeavesOtherConcatsAlone) {
  auto graph = [](int variant) {
    GraphBuilder b;
    int x = b.input("x", {2, 3, 8});
    const int64_t big = std::numeric_limits<int64_t>::max();
    const int64_t lo_end = variant == 2 ? 3 : 4;  // 2: not a half
    int lo = b.node("Slice", {x, ints(b, "s0", {0}), ints(b, "e0", {lo_end}), ints(b, "a0", {-1})});
    int hi = b.node("Slice", {x, ints(b, "s1", {lo_end}), ints(b, "e1", {big}), ints(b, "a1", {-1})});
    // 0: the real pattern; 1: Concat(-x1, x2), the wrong rotation.
    int cat = variant == 1 ? b.node("Concat", {b.node("Neg", {lo}), hi}, {{"axis", int64_t(-1)}})
                           : b.node("Concat", {b.node("Neg", {hi}), lo}, {{"axis", int64_t(-1)}});
    int cos = b.constant("cos", ramp({3, 8}, 1)), sin = b.constant("sin", ramp({3, 8}, 2));
    b.output(b.node("Add", {b.node("Mul", {x, cos}), b.node("Mul", {cat, sin})}));
    infer_shapes(b.g, {});
    return b.g;
  };
  Graph real = graph(0);
  EXPECT_TRUE(split_rotary_halves(real));
  for (int v : {1, 2}) {
    Graph g = graph(v);
    EXPECT_FALSE(split_rotary_halves(g)) << "variant " << v;
    EXPECT_EQ(count(g, "Concat"), 1);
  }
}

// Through the CUDA target's pipeline (no device needed): each of q and k is one fused kernel
// from the projection's output to the rotated heads, no Concat kernel; BRRR_NO_LAZY_VIEWS=1 and
// BRRR_NO_ROTARY_HALVES=1 give the old plan back.
TEST(LazyViews, CudaPlanFusesTheRotaryEmbeddingWhole) {
  auto plan = [] { return compile(llama_glue(DType::bf16), plan::Target::named("cuda", "fp32"), CompileOptions{}); };
  {
    Compiled c = plan();
    EXPECT_TRUE(kernels_with(c, "Concat").empty()) << c.plan.print(c.graph);
    std::vector<const plan::Kernel*> rot = kernels_with(c, "Where");
    ASSERT_EQ(rot.size(), 2u) << c.plan.print(c.graph);
    for (const plan::Kernel* k : rot) {
      EXPECT_EQ(k->kind, plan::KernelKind::Fused);
      // The head split (Reshape, Transpose) read through strides in the same kernel.
      bool has_transpose = std::any_of(k->nodes.begin(), k->nodes.end(), [&](int n) {
        return c.graph.nodes[size_t(n)].op == "Transpose";
      });
      EXPECT_TRUE(has_transpose) << c.plan.print(c.graph);
      EXPECT_EQ(k->stores.size(), 1u);
    }
  }
  for (const char* off : {"BRRR_NO_LAZY_VIEWS", "BRRR_NO_ROTARY_HALVES"}) {
    brrr_test::EnvVar e(off, "1");
    Compiled c = plan();
    EXPECT_EQ(kernels_with(c, "Concat").size(), 2u) << off;
  }
}

// Every node of the plan is in exactly one kernel, lazy views and deferred nodes included.
TEST(LazyViews, EveryNodeInOneKernel) {
  Compiled c = compile(llama_glue(DType::bf16), plan::Target::named("cuda", "fp32"), CompileOptions{});
  std::vector<int> seen(c.graph.nodes.size(), 0);
  for (const plan::Kernel& k : c.plan.kernels)
    for (int n : k.nodes) seen[size_t(n)]++;
  for (size_t n = 0; n < seen.size(); ++n)
    EXPECT_EQ(seen[n], 1) << c.graph.nodes[n].op << " #" << n << "\n" << c.plan.print(c.graph);
}

// The CPU with the opt-in runs the same fuser decisions: the Llama glue equals the reference
// with fewer kernels, in float32 and bfloat16.
TEST(LazyViews, CpuOptInMatchesTheReference) {
  for (DType dt : {DType::f32, DType::bf16}) {
    SessionOptions so;
    int64_t before = 0;
    {
      Session s(llama_glue(dt), so);
      before = s.num_kernels("fused") + s.num_kernels("copy") + s.num_kernels("library");
    }
    brrr_test::EnvVar on("BRRR_CPU_LAZY_VIEWS", "1");
    Session s(llama_glue(dt), so);
    // Without avx512_bf16 or AMX oneDNN takes no bf16 matmul: those run as reference kernels.
    if (dt == DType::f32 || plan::cpu_precision_refusal("bf16").empty())
      EXPECT_EQ(s.num_kernels("reference"), 0) << s.plan_summary();
    EXPECT_LT(s.num_kernels("fused") + s.num_kernels("copy") + s.num_kernels("library"), before)
        << s.plan_summary();
    std::vector<Tensor> got = s.run(some_ids());
    std::vector<Tensor> want = run_reference(s.graph(), some_ids());
    expect_close_scaled(got, want, dt == DType::f32 ? 1e-5 : 2e-2, s.plan_summary());
  }
}

// Lazy views and deferred values that library kernels and graph outputs read as buffers get a
// kernel that writes them: a Transpose read by a Concat, a fused Relu and the graph; a Reshape
// read by a MatMul; a pointwise node of an input alone that a MatMul's epilogue adds.
TEST(LazyViews, BuffersForLibraryReadersAndOutputs) {
  GraphBuilder b;
  int x = b.input("x", {4, 3, 8});
  int y = b.input("y", {3, 4, 8});
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto rnd = [&](const Shape& s) {
    Tensor t = Tensor::empty(DType::f32, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(gen);
    return t;
  };
  int t = b.node("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});  // [3, 4, 8]
  b.output(b.node("Concat", {t, y}, {{"axis", int64_t(0)}}));
  b.output(b.node("Relu", {t}));
  b.output(t);
  int r = b.node("Reshape", {t, ints(b, "rows", {12, 8})});
  int prod = b.node("MatMul", {r, b.constant("w", rnd({8, 8}))});
  int twice = b.node("Mul", {b.node("Reshape", {y, ints(b, "yrows", {12, 8})}), b.scalar(2.f)});
  b.output(b.node("Add", {prod, twice}));
  infer_shapes(b.g, {});
  std::map<std::string, Tensor> in{{"x", rnd({4, 3, 8})}, {"y", rnd({3, 4, 8})}};
  brrr_test::EnvVar on("BRRR_CPU_LAZY_VIEWS", "1");
  for (bool fusion : {true, false}) {
    SessionOptions so;
    so.fusion = fusion;
    Session s(b.g, so);
    std::vector<Tensor> got = s.run(in);
    std::vector<Tensor> want = run_reference(s.graph(), in);
    brrr_test::expect_outputs_close(got, want, 1e-5, 1e-5, s.plan_summary());
  }
  Compiled c = compile(b.g, plan::Target::named("cuda", "fp32"), CompileOptions{});
  std::vector<int> seen(c.graph.nodes.size(), 0);
  for (const plan::Kernel& k : c.plan.kernels)
    for (int n : k.nodes) seen[size_t(n)]++;
  for (size_t n = 0; n < seen.size(); ++n) EXPECT_GE(seen[n], 1) << c.graph.nodes[n].op;
}

// On the device: the Llama glue (float32 and bfloat16) and the library-reader graph with lazy
// views on and off, against the reference executor.
TEST(LazyViewsCuda, LlamaGlueMatchesTheReference) {
#ifdef BRRR_HAVE_CUDA
  BRRR_REQUIRE_CUDA_DEVICE();
  for (const char* off : {"0", "1"})
    for (DType dt : {DType::f32, DType::bf16}) {
      brrr_test::EnvVar e("BRRR_NO_LAZY_VIEWS", off);
      SessionOptions so;
      so.backend = "cuda";
      Session s(llama_glue(dt), so);
      EXPECT_EQ(s.plan_summary().find("host"), std::string::npos) << s.plan_summary();
      std::vector<Tensor> got = s.run(some_ids());
      std::vector<Tensor> want = run_reference(s.graph(), some_ids());
      expect_close_scaled(got, want, dt == DType::f32 ? 1e-4 : 2e-2,
                          std::string("BRRR_NO_LAZY_VIEWS=") + off + "\n" + s.plan_summary());
      brrr_test::expect_same_bytes(got, s.run(some_ids()));  // the graph replay
    }
#else
  GTEST_SKIP() << "no CUDA device: built without the CUDA toolkit";
#endif
}

// Llama's MLP on the device: gate and up merged into one GEMM, the SiLU product reading both
// halves through strides, then down; bfloat16, against the reference.
TEST(LazyViewsCuda, GateUpMergedMlpMatchesTheReference) {
#ifdef BRRR_HAVE_CUDA
  BRRR_REQUIRE_CUDA_DEVICE();
  GraphBuilder b;
  int x = b.input("x", {2, 8, kHidden}, DType::bf16);
  int g = b.node("MatMul", {x, b.constant("wg", ramp({kHidden, 40}, 3, DType::bf16))});
  int u = b.node("MatMul", {x, b.constant("wu", ramp({kHidden, 40}, 4, DType::bf16))});
  int h = b.node("Mul", {b.node("Mul", {g, b.node("Sigmoid", {g})}), u});
  b.output(b.node("MatMul", {h, b.constant("wd", ramp({40, kHidden}, 5, DType::bf16))}));
  std::map<std::string, Tensor> in{{"x", ramp({2, 8, kHidden}, 6, DType::bf16)}};
  SessionOptions so;
  so.backend = "cuda";
  Session s(b.g, so);
  EXPECT_EQ(s.num_kernels("library"), 2) << s.plan_summary();  // gate+up, down
  std::vector<Tensor> got = s.run(in);
  std::vector<Tensor> want = run_reference(s.graph(), in);
  expect_close_scaled(got, want, 2e-2, s.plan_summary());
#else
  GTEST_SKIP() << "no CUDA device: built without the CUDA toolkit";
#endif
}

}  // namespace
}  // namespace brrr
