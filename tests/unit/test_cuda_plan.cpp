// What the CUDA plan decides (Target::cuda(), src/plan/fusion.cpp): which kernels run on the
// device and how, and which run on the host with their reason (plan::Kernel::host), so the
// executor only reads the plan. These run without a GPU; the generated module of the new
// pointwise forms is compiled with NVRTC (which needs no device) when the toolkit is there. The
// device runs the same ops through the backend sweep (tests/unit/backend_ops_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <set>

#include "backend/executor.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "passes/pipeline.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/library_desc.hpp"
#include "plan/target.hpp"
#include "runtime/graph_builder.hpp"

#ifdef BRRR_HAVE_CUDA
#include "backend/cuda/codegen_cuda.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#endif

namespace brrr {
namespace {

using plan::KernelKind;
using plan::Target;

Compiled plan_for(const Graph& g, const Target& t) { return compile(g, t, {}); }

// The kernel that covers the graph's first node.
const plan::Kernel& kernel_of_first_node(const Compiled& c) {
  for (const plan::Kernel& k : c.plan.kernels)
    for (int n : k.nodes)
      if (c.graph.nodes[size_t(n)].op == c.graph.nodes[0].op) return k;
  ADD_FAILURE() << "no kernel holds " << c.graph.nodes[0].op;
  return c.plan.kernels.at(0);
}

Graph conv_graph(DType t, bool bias_relu) {
  GraphBuilder b;
  int x = b.input("x", {1, 4, 8, 8}, t);
  int w = b.input("w", {6, 4, 3, 3}, t);
  std::vector<int> ins = {x, w};
  if (bias_relu) ins.push_back(b.input("bias", {6}, t));
  int y = b.node("Conv", ins, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.output(bias_relu ? b.node("Relu", {y}) : y);
  return b.g;
}

// The dynamo exporter's tied lm_head, MatMul(x, Transpose(embedding)): on CUDA the GEMM reads the
// constant table transposed (trans_b, uploaded once), so no kernel runs the Transpose; a
// Transpose of a runtime B, or of A, stays a kernel (CUDA's GEMM transposes only constants).
TEST(CudaPlan, TransposedConstantWeightIsTheGemmsTransposedB) {
  GraphBuilder b;
  int ids = b.input("ids", {1, 8}, DType::i64);
  // Past the constant folder's budget (4 MB), as real tables are: a small one is folded.
  int E = b.constant("E", Tensor::zeros(DType::bf16, {2100, 1024}));
  int h = b.node("Gather", {E, ids});
  int et = b.node("Transpose", {E}, {{"perm", std::vector<int64_t>{1, 0}}});
  b.output(b.node("MatMul", {h, et}));
  int x = b.input("x", {12, 1024}, DType::bf16);
  int xt = b.node("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0}}});
  b.output(b.node("MatMul", {h, b.node("Relu", {xt})}));
  Compiled c = plan_for(b.g, Target::cuda());
  int gemms = 0, transposes = 0;
  for (const plan::Kernel& k : c.plan.kernels) {
    for (int n : k.nodes) transposes += c.graph.nodes[size_t(n)].op == "Transpose" && k.nodes.size() == 1;
    if (const plan::GemmDesc* d = plan::desc_of<plan::GemmDesc>(k)) {
      if (!d->trans_b) continue;
      ++gemms;
      EXPECT_TRUE(c.graph.value(d->b).constant.defined());
      EXPECT_EQ(c.graph.value(d->b).shape, (Shape{2100, 1024}));
    }
  }
  EXPECT_EQ(gemms, 1) << c.plan.print(c.graph);
  EXPECT_EQ(transposes, 0);  // the runtime one is fused into the Relu's kernel, not the GEMM
}

// bf16 and fp16 Conv are cuDNN library kernels on CUDA (with their epilogue), and oneDNN ones on
// the CPU where it has oneDNN (which may still refuse a case at build: then its reference kernel).
TEST(CudaPlan, SixteenBitConvIsALibraryKernel) {
  for (DType t : {DType::bf16, DType::f16}) {
    Compiled c = plan_for(conv_graph(t, true), Target::cuda());
    ASSERT_EQ(c.plan.kernels.size(), 1u) << c.plan.print(c.graph);
    const plan::Kernel& k = c.plan.kernels[0];
    EXPECT_EQ(k.kind, KernelKind::Library) << dtype_name(t);
    EXPECT_EQ(k.host, "");
    EXPECT_EQ(k.activation, "relu");
    ASSERT_NE(plan::desc_of<plan::ConvDesc>(k), nullptr);
    Compiled cpu = plan_for(conv_graph(t, false), Target::cpu());
    EXPECT_EQ(kernel_of_first_node(cpu).kind,
              Target::cpu().library_16bit_conv ? KernelKind::Library : KernelKind::Reference)
        << cpu.plan.print(cpu.graph);
    EXPECT_EQ(kernel_of_first_node(cpu).host, "");  // the CPU plan marks no host kernels
  }
}

TEST(CudaPlan, SixteenBitGlobalAveragePoolIsALibraryKernel) {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    GraphBuilder b;
    b.output(b.node("GlobalAveragePool", {b.input("x", {2, 8, 7, 7}, t)}));
    Compiled c = plan_for(b.g, Target::cuda());
    ASSERT_EQ(c.plan.kernels.size(), 1u);
    EXPECT_EQ(c.plan.kernels[0].kind, KernelKind::Library) << dtype_name(t);
    EXPECT_EQ(c.plan.kernels[0].host, "");
    EXPECT_NE(plan::desc_of<plan::RowReduceDesc>(c.plan.kernels[0]), nullptr);
  }
  // float64: no device kernel; the plan says so (the CPU plan still makes it a library kernel).
  GraphBuilder b;
  b.output(b.node("GlobalAveragePool", {b.input("x", {2, 8, 7, 7}, DType::f64)}));
  Compiled c = plan_for(b.g, Target::cuda());
  EXPECT_EQ(c.plan.kernels[0].kind, KernelKind::Reference);
  EXPECT_NE(c.plan.kernels[0].host.find("GlobalAveragePool on float64"), std::string::npos)
      << c.plan.kernels[0].host;
  EXPECT_EQ(plan_for(b.g, Target::cpu()).plan.kernels[0].kind, KernelKind::Library);
}

TEST(CudaPlan, SplitIsDeviceCopies) {
  for (DType t : {DType::f32, DType::bf16, DType::i64, DType::boolean}) {
    GraphBuilder b;
    int x = b.input("x", {2, 12, 5}, t);
    int s = b.constant("s", Tensor::from_vector<int64_t>({3}, {3, 4, 5}));
    int y0 = b.node("Split", {x, s}, {{"axis", int64_t(-2)}}, 3);
    for (int i = 0; i < 3; ++i) b.output(y0 + i);
    Compiled c = plan_for(b.g, Target::cuda());
    const plan::Kernel& k = kernel_of_first_node(c);
    EXPECT_EQ(k.kind, KernelKind::Library) << dtype_name(t) << "\n" << c.plan.print(c.graph);
    EXPECT_EQ(k.host, "");
    EXPECT_EQ(k.outputs.size(), 3u);
    const auto* d = plan::desc_of<plan::SplitDesc>(k);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->why, "");
    EXPECT_EQ(d->axis, 1);
    EXPECT_EQ(d->sizes, (std::vector<int64_t>{3, 4, 5}));
    EXPECT_EQ(kernel_of_first_node(plan_for(b.g, Target::cpu())).kind, KernelKind::Reference);
  }
}

TEST(CudaPlan, GatherIsALibraryKernel) {
  GraphBuilder b;
  int x = b.input("x", {10, 16}, DType::bf16);
  b.output(b.node("Gather", {x, b.input("i", {3}, DType::i32)}));
  Compiled c = plan_for(b.g, Target::cuda());
  ASSERT_EQ(c.plan.kernels.size(), 1u);
  EXPECT_EQ(c.plan.kernels[0].kind, KernelKind::Library);
  EXPECT_EQ(c.plan.kernels[0].host, "");
  EXPECT_NE(plan::desc_of<plan::GatherDesc>(c.plan.kernels[0]), nullptr);
  // The CPU copies rows of any element type too, and marks nothing as a host kernel.
  Compiled cpu = plan_for(b.g, Target::cpu());
  EXPECT_EQ(cpu.plan.kernels[0].kind, KernelKind::Library);
  EXPECT_EQ(cpu.plan.kernels[0].host, "");
}

// Cast / CastLike between generated dtypes, inference Dropout, Mean and Pow with an int64
// exponent: one fused kernel on CUDA and on the CPU.
Graph pointwise_graph() {
  GraphBuilder b;
  int x = b.input("x", {4, 33}, DType::f32);
  int h = b.node("Cast", {x}, {{"to", int64_t(16)}});                  // -> bfloat16
  int f = b.node("Cast", {h}, {{"to", int64_t(1)}});                   // -> float32
  int like = b.input("like", {1}, DType::f16);
  int l = b.node("CastLike", {f, like});                               // -> float16
  int d = b.node("Dropout", {b.node("Cast", {l}, {{"to", int64_t(1)}})});
  int p = b.node("Pow", {d, b.constant("e", Tensor::scalar<int64_t>(3))});
  int m = b.node("Mean", {p, x, d});
  b.output(b.node("Cast", {m}, {{"to", int64_t(9)}}));                 // -> bool
  return b.g;
}

TEST(CudaPlan, CastDropoutMeanAndPowAreGenerated) {
  Graph g = pointwise_graph();
  Compiled c = plan_for(g, Target::cuda());
  ASSERT_EQ(c.plan.kernels.size(), 1u) << c.plan.print(c.graph);
  EXPECT_EQ(c.plan.kernels[0].kind, KernelKind::Fused) << c.plan.print(c.graph);
  EXPECT_EQ(c.plan.kernels[0].host, "");
  Compiled cpu = plan_for(g, Target::cpu());  // the C++ emitter takes 16-bit buffers too
  ASSERT_EQ(cpu.plan.kernels.size(), 1u) << cpu.plan.print(cpu.graph);
  EXPECT_EQ(cpu.plan.kernels[0].kind, KernelKind::Fused) << cpu.plan.print(cpu.graph);
}

// Integer and float64 pointwise math: typed kernels that compute in the tensors' own type
// (int64 Div and Mod with the reference's semantics, comparisons into bool, Where), one kernel
// per type; a transpose of int32 data too.
Graph typed_graph() {
  GraphBuilder b;
  int a = b.input("a", {6, 7}, DType::i64);
  int c = b.input("c", {7}, DType::i64);
  int q = b.node("Div", {b.node("Mul", {a, c}), c});
  int m = b.node("Mod", {b.node("Sub", {q, a}), c});
  int lt = b.node("Less", {m, a});
  b.output(b.node("Where", {lt, m, b.node("Neg", {a})}));
  int x = b.input("x", {5, 3}, DType::f64);
  b.output(b.node("Max", {b.node("Exp", {x}), b.node("Abs", {x})}));
  // Casts with an integer or float64 side: float32 -> int64 -> bool -> int32, int64 -> float16,
  // float64 -> int32.
  int f = b.input("f", {6, 7}, DType::f32);
  int fi = b.node("Cast", {f}, {{"to", int64_t(7)}});
  b.output(b.node("Cast", {b.node("Cast", {fi}, {{"to", int64_t(9)}})}, {{"to", int64_t(6)}}));
  b.output(b.node("Cast", {b.node("Add", {fi, a})}, {{"to", int64_t(10)}}));
  b.output(b.node("Cast", {x}, {{"to", int64_t(6)}}));
  int i = b.input("i", {4, 9}, DType::i32);
  b.output(b.node("Add", {b.node("Transpose", {i}, {{"perm", std::vector<int64_t>{1, 0}}}),
                          b.input("j", {9, 4}, DType::i32)}));
  return b.g;
}

TEST(CudaPlan, IntegerAndFloat64MathIsGeneratedInItsOwnType) {
  Compiled c = plan_for(typed_graph(), Target::cuda());
  std::set<std::string> types;
  for (const plan::Kernel& k : c.plan.kernels) {
    EXPECT_EQ(k.kind, KernelKind::Fused) << c.plan.print(c.graph);
    EXPECT_EQ(k.host, "");
    types.insert(std::string(dtype_name(k.compute)));
  }
  EXPECT_EQ(types, (std::set<std::string>{"int64", "float64", "int32"}));
  for (const plan::Kernel& k : plan_for(typed_graph(), Target::cpu()).plan.kernels)
    EXPECT_EQ(k.kind, KernelKind::Reference);  // the CPU plan is as it was
}

// Slice (negative starts, clamped ends, negative steps) and Expand as views: loads with strides
// and an offset, stored by a copy kernel when a view is itself an output.
Graph view_graph() {
  GraphBuilder b;
  int x = b.input("x", {4, 6, 5});
  auto ints = [&](const char* name, std::vector<int64_t> v) {
    return b.constant(name, Tensor::from_vector<int64_t>({int64_t(v.size())}, v));
  };
  int s1 = b.node("Slice", {x, ints("st", {1, -4}), ints("en", {100, 1}), ints("ax", {0, -2}),
                            ints("sp", {2, -2})});  // [2, 1, 5]: rows 1, 3; column 2
  b.output(b.node("Mul", {s1, b.input("y", {2, 1, 5})}));
  b.output(b.node("Slice", {x, ints("st2", {-3}), ints("en2", {-1}), ints("ax2", {2})}));
  int e = b.node("Expand", {b.input("z", {6, 1}), ints("sh", {4, 6, 5})});
  b.output(b.node("Add", {e, x}));
  b.output(b.node("Expand", {b.input("w", {5}), ints("sh2", {3, 5})}));
  return b.g;
}

TEST(CudaPlan, SliceAndExpandAreViews) {
  Compiled c = plan_for(view_graph(), Target::cuda());
  for (const plan::Kernel& k : c.plan.kernels) {
    EXPECT_EQ(k.kind, KernelKind::Fused) << c.plan.print(c.graph);
    EXPECT_EQ(k.host, "");
  }
  EXPECT_EQ(c.plan.kernels.size(), 4u) << c.plan.print(c.graph);
}

// The plan decisions that are not CUDA-specific (views, the Cast / Dropout / Mean / Pow forms)
// checked by value here: a CPU executor runs a float32 plan made with those Target flags on (the
// C++ emitter reads the same strides, offsets and expressions) against the reference.
TEST(CudaPlan, ViewsAndPointwiseFormsMatchTheReferenceOnTheCpu) {
  Target t = Target::cpu();
  t.generated_views = true;
  t.generated_casts = true;
  GraphBuilder pb;
  {
    int x = pb.input("x", {4, 33});
    int d = pb.node("Dropout", {pb.node("Cast", {x}, {{"to", int64_t(1)}})});
    int p = pb.node("Pow", {d, pb.constant("e", Tensor::scalar<int64_t>(3))});
    pb.output(pb.node("Mean", {p, x, d}));
  }
  for (const Graph& g : {view_graph(), pb.g}) {
    Compiled c = compile(g, t, {});
    for (const plan::Kernel& k : c.plan.kernels)
      EXPECT_EQ(k.kind, KernelKind::Fused) << c.plan.print(c.graph);
    std::map<std::string, Tensor> feeds;
    int seed = 1;
    for (int v : c.graph.inputs) {
      Tensor in = Tensor::empty(DType::f32, c.graph.value(v).shape);
      float* p = in.data<float>();
      for (int64_t i = 0; i < in.numel(); ++i) p[i] = float((i * 7 + seed) % 13) * 0.25f - 1.5f;
      feeds[c.graph.value(v).name] = in;
      ++seed;
    }
    std::vector<Tensor> want = run_reference(c.graph, feeds);
    auto exec = cpu::make_cpu_executor(c.graph, c.plan, SessionOptions{});
    std::vector<Tensor> got = exec->run(feeds);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].shape(), want[o].shape()) << o;
      std::vector<double> a = got[o].to_double_vector(), b = want[o].to_double_vector();
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(b[i]))) << "output " << o << " element " << i;
    }
  }
}

// What CUDA truly cannot do today is marked in the plan with its reason: integer Pow (no typed
// form) and a Cast to int8 (generated kernels have no 8-bit integer buffers).
TEST(CudaPlan, HostKernelsAreMarkedWithTheirReason) {
  GraphBuilder b;
  int x = b.input("x", {4, 5}, DType::i64);
  b.output(b.node("Pow", {x, x}));  // integer Pow: no typed form
  int f = b.input("f", {4, 5}, DType::f32);
  b.output(b.node("Cast", {f}, {{"to", int64_t(3)}}));  // float32 -> int8: no int8 kernels
  Compiled c = plan_for(b.g, Target::cuda());
  ASSERT_EQ(c.plan.kernels.size(), 2u) << c.plan.print(c.graph);
  EXPECT_NE(c.plan.kernels[0].host.find("Pow on int64: the device's int64 kernels have no pow"),
            std::string::npos) << c.plan.kernels[0].host;
  EXPECT_NE(c.plan.kernels[1].host.find("is not float32"), std::string::npos)
      << c.plan.kernels[1].host;
  for (const plan::Kernel& k : c.plan.kernels) EXPECT_EQ(k.kind, KernelKind::Reference);
  EXPECT_NE(c.plan.print(c.graph).find("on the host: "), std::string::npos);
  for (const plan::Kernel& k : plan_for(b.g, Target::cpu()).plan.kernels) EXPECT_EQ(k.host, "");
}

#ifdef BRRR_HAVE_CUDA
// The emitter needs no GPU: the module of the new pointwise forms and typed kernels (and the
// helper kernels, 16-bit Conv epilogues and row means among them) is compiled with NVRTC here.
void compiles(const Graph& g) {
  Compiled c = plan_for(g, Target::cuda());
  cuda::CudaSource src = cuda::generate_cuda(c.graph, c.plan, {});
  ASSERT_EQ(src.launches.size(), c.plan.kernels.size());
  for (const cuda::CudaLaunch& l : src.launches) EXPECT_NE(l.symbol, "");
  cuda::NvrtcCompiler nv("sm_90", "");
  cuda::CompiledKernel ck;
  try {
    ck = nv.compile(src.text, "cuda_plan_test");
  } catch (const Error& e) {
    if (std::string(e.what()).find("nvrtc") != std::string::npos &&
        std::string(e.what()).find("load") != std::string::npos)
      GTEST_SKIP() << "NVRTC cannot be loaded here: " << e.what();
    FAIL() << e.what() << "\n" << src.text;
    return;
  }
  EXPECT_FALSE(ck.cubin.empty());
  if (::testing::Test::HasFailure()) std::cout << src.text;
}

TEST(CudaPlan, GeneratedModuleCompilesWithNvrtc) {
  compiles(pointwise_graph());
  compiles(typed_graph());
  compiles(view_graph());
}

// The executor compiles CudaSource::parts side by side, each on its own: every part compiles
// alone (it needs only the prelude), the helpers are a part of their own, and each generated
// kernel is in exactly one part. Softmax then Transpose, ten times: twenty fused kernels, so
// more than one part of them.
TEST(CudaPlan, ModulePartsCompileAloneAndHoldEachKernelOnce) {
  GraphBuilder b;
  int t = b.input("x", {16, 16}, DType::f32);
  for (int i = 0; i < 10; ++i) {
    t = b.node("Softmax", {t}, {{"axis", int64_t(-1)}});
    t = b.node("Transpose", {t}, {{"perm", std::vector<int64_t>{1, 0}}});
  }
  b.output(t);
  Compiled c = plan_for(b.g, Target::cuda());
  cuda::CudaSource src = cuda::generate_cuda(c.graph, c.plan, {});
  std::set<std::string> symbols;
  for (const cuda::CudaLaunch& l : src.launches)
    if (!l.symbol.empty()) symbols.insert(l.symbol);
  ASSERT_GT(symbols.size(), 8u) << c.plan.print(c.graph);
  ASSERT_GE(src.parts.size(), 3u);
  EXPECT_NE(src.parts[0].find("backend/cuda/device/kernels.cuh"), std::string::npos);
  cuda::NvrtcCompiler nv("sm_90", "");
  std::map<std::string, int> found;
  for (size_t i = 0; i < src.parts.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "part " << i);
    const std::string prelude = "device/prelude.cuh\"\n\n";  // the part's own code follows
    const size_t code = src.parts[i].find(prelude);
    ASSERT_NE(code, std::string::npos);
    EXPECT_NE(src.text.find(src.parts[i].substr(code + prelude.size())), std::string::npos);
    std::vector<char> cubin;
    try {
      cubin = nv.compile(src.parts[i], "cuda_part_test").cubin;
    } catch (const Error& e) {
      FAIL() << e.what() << "\n" << src.parts[i];
    }
    for (const std::string& sym : symbols) {
      const std::string z = sym + '\0';
      if (std::search(cubin.begin(), cubin.end(), z.begin(), z.end()) != cubin.end()) ++found[sym];
    }
  }
  for (const std::string& sym : symbols) EXPECT_EQ(found[sym], 1) << sym;
}
#endif

}  // namespace
}  // namespace brrr
