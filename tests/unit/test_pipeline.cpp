// The compile pipeline (src/passes/pipeline.cpp), the Target the passes consult
// (src/plan/target.hpp) and the arena pass (src/passes/plan_memory.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "dnnl_flag.hpp"
#include "env_var.hpp"
#include "passes/pipeline.hpp"
#include "random_tensor.hpp"
#include "passes/plan_memory.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/kernel_record.hpp"
#include "plan/library_desc.hpp"
#include "plan/target.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

Graph matmul_graph(DType t) {
  GraphBuilder b;
  int x = b.input("x", {4, 8}, t);
  int w = b.input("w", {8, 16}, t);
  b.output(b.node("MatMul", {x, w}));
  return b.g;
}

plan::KernelKind only_kernel(const Graph& g, const plan::Target& t) {
  Compiled c = compile(g, t, {});
  EXPECT_EQ(c.plan.kernels.size(), 1u) << c.plan.print(c.graph);
  return c.plan.kernels.at(0).kind;
}

// The plan depends on the backend it is for, not on which backends the build contains.
TEST(Target, LibraryKernelsAreTheTargetsToSay) {
  using plan::KernelKind;
  using plan::Target;
  Graph f32 = matmul_graph(DType::f32), bf16 = matmul_graph(DType::bf16);
  EXPECT_EQ(only_kernel(f32, Target::cpu(true)), KernelKind::Library);
  EXPECT_EQ(only_kernel(f32, Target::cpu(false)), KernelKind::Reference);
  EXPECT_EQ(only_kernel(f32, Target::cuda()), KernelKind::Library);
  // 16-bit GEMMs have a library where there is one: cuBLASLt on CUDA, oneDNN on the CPU.
  EXPECT_EQ(only_kernel(bf16, Target::cpu(true)), KernelKind::Library);
  EXPECT_EQ(only_kernel(bf16, Target::cpu(false)), KernelKind::Reference);
  EXPECT_EQ(only_kernel(bf16, Target::cuda()), KernelKind::Library);
}

// A kernel that will run on the host is decided in the plan, with its reason (the device test
// CudaSession.HostFallbackIsReported runs this graph).
TEST(Target, CumSumRunsOnTheHostOnCuda) {
  GraphBuilder b;
  int x = b.input("x", {4, 8});
  int axis = b.constant("axis", Tensor::scalar<int64_t>(1));
  b.output(b.node("Cos", {b.node("CumSum", {b.node("Cos", {x}), axis})}));
  Compiled c = compile(b.g, plan::Target::cuda(), {});
  int host = 0;
  for (const plan::Kernel& k : c.plan.kernels)
    if (!k.host.empty()) {
      ++host;
      EXPECT_NE(k.host.find("CumSum"), std::string::npos) << k.host;
    }
  EXPECT_EQ(host, 1) << c.plan.print(c.graph);
}

// CUDA's contraction math is the plan's (GemmDesc::tf32 / math), not the executor's options.
TEST(Target, CudaPrecisionIsInTheGemmDescriptor) {
  Graph g = matmul_graph(DType::f32);
  auto gemm_of = [&](const std::string& precision) {
    Compiled c = compile(g, plan::Target::named("cuda", precision), {});
    EXPECT_EQ(c.plan.kernels.size(), 1u);
    const plan::GemmDesc* d = plan::desc_of<plan::GemmDesc>(c.plan.kernels.at(0));
    EXPECT_NE(d, nullptr);
    return d ? *d : plan::GemmDesc{};
  };
  EXPECT_FALSE(gemm_of("fp32").tf32);
  EXPECT_EQ(gemm_of("fp32").math, DType::f32);
  EXPECT_TRUE(gemm_of("tf32").tf32);
  EXPECT_EQ(gemm_of("tf32").math, DType::f32);
  EXPECT_EQ(gemm_of("bf16").math, DType::bf16);  // a float32 GEMM left after convert_precision
  EXPECT_EQ(gemm_of("fp16").math, DType::f16);
  try {
    plan::Target::named("cuda", "fp8");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown precision 'fp8'"), std::string::npos) << e.what();
  }
}

TEST(Target, NamedBackends) {
  EXPECT_EQ(plan::Target::named("cpu").name, "cpu");
  EXPECT_TRUE(plan::Target::named("cuda").generated_16bit);
  EXPECT_FALSE(plan::Target::named("reference").plans_kernels);
  try {
    plan::Target::named("tpu");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown backend 'tpu'"), std::string::npos) << e.what();
  }
}

// Nodes out of order, a symbolic input dim and a constant subexpression: the pipeline sorts,
// binds, folds and drops the folded node; the reference target stops there with no plan.
TEST(Pipeline, SortsBindsFoldsAndStopsForTheReference) {
  GraphBuilder b;
  int x = b.input("x", {-1, 3});
  int c = b.constant("c", Tensor::from_vector<float>({3}, {1, 2, 3}));
  Node mul;
  mul.op = "Mul";
  mul.name = "mul";
  mul.inputs = {c, c};
  int cc = b.g.add_value("cc");
  mul.outputs = {cc};
  int y = b.node("Add", {x, cc});
  b.g.nodes.push_back(mul);  // after its consumer
  b.output(y);
  CompileOptions o;
  o.input_shapes["x"] = {2, 3};
  Compiled r = compile(b.g, plan::Target::reference(), o);
  ASSERT_EQ(r.graph.nodes.size(), 1u) << r.graph.print();
  EXPECT_EQ(r.graph.nodes[0].op, "Add");
  EXPECT_EQ(r.graph.value(y).shape, (Shape{2, 3}));
  ASSERT_TRUE(r.graph.value(cc).constant.defined());
  EXPECT_FLOAT_EQ(r.graph.value(cc).constant.data<float>()[2], 9.0f);
  EXPECT_TRUE(r.plan.kernels.empty());
  Compiled p = compile(b.g, plan::Target::cpu(), o);
  EXPECT_EQ(p.plan.kernels.size(), 1u) << p.plan.print(p.graph);
  // Without a shape for the symbolic dim: one line naming the input.
  try {
    compile(b.g, plan::Target::reference(), {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' has a symbolic dim"), std::string::npos)
        << e.what();
  }
}

// Compiled targets drop a Pad of all-zero pads (its reader reads its input) and rewrite a BatchNormalization with
// constant parameters as Mul + Add; a Pad that pads stays, and the reference executor (the
// oracle the others are checked against) keeps both ops as they are.
TEST(Pipeline, IdentityPadsAndBatchNormForCompiledTargets) {
  GraphBuilder b;
  int x = b.input("x", {1, 4, 5, 5});
  int zero = b.node("Pad", {x, b.constant("z", Tensor::from_vector<int64_t>({8}, {0, 0, 0, 0, 0, 0, 0, 0}))});
  int one = b.node("Pad", {x, b.constant("o", Tensor::from_vector<int64_t>({8}, {0, 0, 1, 0, 0, 0, 0, 1}))});
  auto vec = [&](const char* n, float v) {
    return b.constant(n, Tensor::from_vector<float>({4}, {v, v + 1, v + 2, v + 3}));
  };
  int bn = b.node("BatchNormalization", {zero, vec("s", 1), vec("b", 0), vec("m", 0.5f), vec("v", 1)});
  b.output(b.node("Relu", {bn}));
  b.output(b.node("Relu", {one}));
  b.output(b.node("Pad", {x, b.constant("z2", Tensor::from_vector<int64_t>({8}, {0, 0, 0, 0, 0, 0, 0, 0}))}));
  // A chain of two: the Relu reads x.
  const int zeros8 = b.constant("z3", Tensor::from_vector<int64_t>({8}, {0, 0, 0, 0, 0, 0, 0, 0}));
  b.output(b.node("Relu", {b.node("Pad", {b.node("Pad", {x, zeros8}), zeros8})}));
  auto ops = [](const Graph& g) {
    std::multiset<std::string> s;
    for (const Node& n : g.nodes) s.insert(n.op);
    return s;
  };
  for (const plan::Target& t : {plan::Target::cpu(), plan::Target::cuda()}) {
    SCOPED_TRACE(t.name);
    const std::multiset<std::string> got = ops(compile(b.g, t, {}).graph);
    EXPECT_EQ(got.count("Pad"), 1u);
    EXPECT_EQ(got.count("Identity"), 1u);  // the graph output's; the other's reader reads x
    EXPECT_EQ(got.count("BatchNormalization"), 0u);
    Compiled c = compile(b.g, t, {});
    const Node& last = c.graph.nodes.back();
    EXPECT_EQ(last.op, "Relu");
    EXPECT_EQ(last.inputs[0], x);
    EXPECT_EQ(got.count("Mul"), 1u);
    EXPECT_EQ(got.count("Add"), 1u);
  }
  const std::multiset<std::string> ref = ops(compile(b.g, plan::Target::reference(), {}).graph);
  EXPECT_EQ(ref.count("Pad"), 5u);
  EXPECT_EQ(ref.count("BatchNormalization"), 1u);
}

// Pow(x, 2) is Mul(x, x) in the CPU's compiled plans (an RMSNorm's variance, as T5's export
// writes it: a powf call per element before), a float or an int exponent alike; Pow(x, 3) (the
// GELU matcher's) and a broadcasting exponent keep Pow, as do the reference and (until a device
// run) CUDA. The square is bit-exact against the reference's pow, NaN and infinities included.
// ShuffleNet-v2's block end: Concat, the channel shuffle (Reshape, Transpose, Reshape) and the
// next block's split (two Slices of channels). On the CPU the shuffle and the Slices become two
// channel Gathers of the Concat; a shuffle whose Transpose is also read elsewhere stays; the
// results match the reference.
TEST(Pipeline, ChannelShufflesBecomeGathersOnTheCpu) {
  auto shape = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>({int64_t(v.size())}, v);
  };
  auto i64 = [](int64_t v) { return Tensor::from_vector<int64_t>({1}, {v}); };
  GraphBuilder b;
  int x1 = b.input("x1", {1, 6, 5, 4}), x2 = b.input("x2", {1, 6, 5, 4});
  int cat = b.node("Concat", {x1, b.node("Neg", {x2})}, {{"axis", int64_t(1)}});
  int r1 = b.node("Reshape", {cat, b.constant("s1", shape({1, 2, 6, 5, 4}))});
  int t = b.node("Transpose", {r1}, {{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}});
  int sh = b.node("Reshape", {t, b.constant("s2", shape({1, 12, 5, 4}))});
  b.output(b.node("Slice", {sh, b.constant("a0", i64(0)), b.constant("a1", i64(6)),
                            b.constant("ax", i64(1))}));
  b.output(b.node("Relu", {b.node("Slice", {sh, b.constant("b0", i64(6)), b.constant("b1", i64(12)),
                                             b.constant("bx", i64(1))})}));
  // A second shuffle whose Transpose is a graph output too: kept as it is.
  int r3 = b.node("Reshape", {cat, b.constant("s3", shape({1, 3, 4, 5, 4}))});
  int t3 = b.node("Transpose", {r3}, {{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}});
  b.output(t3);
  b.output(b.node("Reshape", {t3, b.constant("s4", shape({1, 12, 5, 4}))}));
  auto count = [](const Graph& g, const char* op) {
    int n = 0;
    for (const Node& m : g.nodes) n += m.op == op;
    return n;
  };
  Graph cpu = compile(b.g, plan::Target::cpu(), {}).graph;
  EXPECT_EQ(count(cpu, "Gather"), 2);
  EXPECT_EQ(count(cpu, "Transpose"), 1);
  EXPECT_EQ(count(cpu, "Slice"), 0);
  EXPECT_EQ(count(compile(b.g, plan::Target::cuda(), {}).graph, "Gather"), 0);
  {
    brrr_test::EnvVar off("BRRR_NO_CHANNEL_SHUFFLE_GATHERS", "1");
    EXPECT_EQ(count(compile(b.g, plan::Target::cpu(), {}).graph, "Gather"), 0);
  }
  std::mt19937 rng(3);
  std::map<std::string, Tensor> in{{"x1", brrr_test::uniform_f32({1, 6, 5, 4}, rng, -1, 1)},
                                   {"x2", brrr_test::uniform_f32({1, 6, 5, 4}, rng, -1, 1)}};
  Session s(b.g);
  std::vector<Tensor> got = s.run(in);
  // The oracle runs the graph as exported (the reference target keeps every node).
  std::vector<Tensor> want = run_reference(compile(b.g, plan::Target::reference(), {}).graph, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].shape(), want[o].shape()) << o;
    for (int64_t i = 0; i < got[o].numel(); ++i)
      ASSERT_EQ(got[o].data<float>()[i], want[o].data<float>()[i]) << "output " << o << " at " << i;
  }
}

TEST(Pipeline, SquarePowsOnTheCpu) {
  GraphBuilder b;
  int x = b.input("x", {2, 16});
  int sq = b.node("Pow", {x, b.scalar(2.f)});
  int var = b.node("ReduceMean", {sq}, {{"axes", std::vector<int64_t>{-1}}});
  int inv = b.node("Reciprocal", {b.node("Sqrt", {b.node("Add", {var, b.scalar(1e-6f)})})});
  b.output(b.node("Mul", {x, inv}));  // an RMSNorm
  b.output(b.node("Pow", {x, b.constant("two", Tensor::from_vector<int64_t>({1}, {2}))}));
  b.output(b.node("Pow", {x, b.scalar(3.f)}));
  b.output(b.node("Pow", {x, b.constant("e", Tensor::from_vector<float>({16}, std::vector<float>(16, 2.f)))}));
  auto pows = [](const Graph& g) {
    int n = 0;
    for (const Node& m : g.nodes) n += m.op == "Pow";
    return n;
  };
  EXPECT_EQ(pows(compile(b.g, plan::Target::cpu(), {}).graph), 2);  // the cube, the [16] exponent
  EXPECT_EQ(pows(compile(b.g, plan::Target::cuda(), {}).graph), 4);
  EXPECT_EQ(pows(compile(b.g, plan::Target::reference(), {}).graph), 4);
  {
    brrr_test::EnvVar off("BRRR_NO_SQUARE_POWS", "1");
    EXPECT_EQ(pows(compile(b.g, plan::Target::cpu(), {}).graph), 4);
  }
  Tensor in = Tensor::from_vector<float>({2, 16}, {0.f, -0.f, 1.5f, -3.25f, 1e-20f, -1e20f, 1e30f,
                                                   std::numeric_limits<float>::infinity(),
                                                   -std::numeric_limits<float>::infinity(),
                                                   std::nanf(""), 7.f, -2.5f, 0.1f, 3e-39f, 65504.f,
                                                   -1.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f,
                                                   9.f, 10.f, 11.f, 12.f, 13.f, 14.f, 15.f, 16.f});
  Session s(b.g);
  std::vector<Tensor> got = s.run({{"x", in}});
  std::vector<Tensor> want = run_reference(s.graph(), {{"x", in}});
  ASSERT_EQ(got.size(), 4u);
  for (int64_t i = 0; i < in.numel(); ++i) {  // output 1, the square: bit for bit
    const float a = got[1].data<float>()[i], e = want[1].data<float>()[i];
    if (std::isnan(e))
      EXPECT_TRUE(std::isnan(a)) << i;
    else
      EXPECT_EQ(a, e) << i;
  }
}

// Identities of a shared weight (ALBERT's export writes one per layer that reuses it) are read
// through on the CPU: both MatMuls read the one constant, no copy kernel, and the results match
// the reference. One whose output is a graph output stays (it must write that output).
TEST(Pipeline, SharedWeightIdentitiesAreReadThrough) {
  std::mt19937 rng(2);
  GraphBuilder b;
  int x = b.input("x", {4, 32});
  int w = b.constant("w", brrr_test::uniform_f32({32, 32}, rng, -0.5f, 0.5f));
  int h = b.node("Relu", {b.node("MatMul", {x, b.node("Identity", {w})})});
  b.output(b.node("MatMul", {h, b.node("Identity", {b.node("Identity", {w})})}));
  b.output(b.node("Identity", {h}));
  CompileOptions o;
  o.fold_budget_bytes = 64;  // the weight is over it: its Identities are not folded
  auto count = [](const Graph& g, const char* op) {
    int n = 0;
    for (const Node& m : g.nodes) n += m.op == op;
    return n;
  };
  Compiled c = compile(b.g, plan::Target::cpu(), o);
  EXPECT_EQ(count(c.graph, "Identity"), 1);  // the graph output's
  for (const Node& m : c.graph.nodes)
    if (m.op == "MatMul") EXPECT_EQ(m.inputs[1], w);
  EXPECT_EQ(count(compile(b.g, plan::Target::reference(), o).graph, "Identity"), 4);
  {
    brrr_test::EnvVar off("BRRR_NO_FORWARD_IDENTITIES", "1");
    EXPECT_EQ(count(compile(b.g, plan::Target::cpu(), o).graph, "Identity"), 4);
  }
  std::map<std::string, Tensor> in{{"x", brrr_test::uniform_f32({4, 32}, rng, -1, 1)}};
  Session s(b.g);
  std::vector<Tensor> got = s.run(in);
  // The oracle runs the graph as exported (the reference target keeps every node).
  std::vector<Tensor> want = run_reference(compile(b.g, plan::Target::reference(), {}).graph, in);
  ASSERT_EQ(got.size(), 2u);
  for (size_t k = 0; k < got.size(); ++k)
    for (int64_t i = 0; i < want[k].numel(); ++i)
      EXPECT_NEAR(got[k].data<float>()[i], want[k].data<float>()[i], 1e-4) << k << " " << i;
}

// A Gather reads the rows it picks, not its whole table: the doctor judged an embedding lookup
// (a 32128 x 512 table, 64 tokens) at 179 times its memory roof before. A table other nodes of
// the kernel read whole counts whole.
TEST(KernelRecord, GatherReadsThePickedRowsOfItsTable) {
  GraphBuilder b;
  int table = b.input("table", {1000, 64});
  int ids = b.input("ids", {1, 8}, DType::i64);
  b.output(b.node("Gather", {table, ids}));
  CompileOptions o;
  Compiled c = compile(b.g, plan::Target::cpu(), o);
  ASSERT_EQ(c.plan.kernels.size(), 1u) << c.plan.print(c.graph);
  KernelRecord r = plan::kernel_record(c.graph, c.plan.kernels[0]);
  const double rows = 8 * 64 * 4, index_bytes = 8 * 8;
  EXPECT_DOUBLE_EQ(r.cost.bytes, rows + index_bytes + rows);  // picked rows, ids, output
  // The same table read whole by another node of the kernel: all 256000 bytes.
  GraphBuilder b2;
  int t2 = b2.input("table", {1000, 64});
  int g2 = b2.node("Gather", {t2, b2.input("ids", {1, 8}, DType::i64)});
  b2.output(g2);
  b2.output(b2.node("Relu", {t2}));
  Compiled c2 = compile(b2.g, plan::Target::cpu(), o);
  plan::Kernel both;  // one kernel of both nodes, reading the table
  for (size_t n = 0; n < c2.graph.nodes.size(); ++n) both.nodes.push_back(int(n));
  both.inputs = {t2};
  EXPECT_DOUBLE_EQ(plan::kernel_record(c2.graph, both).cost.bytes, 1000 * 64 * 4);
}

// GPT-2's tanh GELU (Pow(u, 3) among its eight nodes) as a GEMM's library epilogue is priced as
// the epilogue computes it: u^3 two products, one tanh per element, no powf. The same Pow in a
// generated kernel keeps its powf price.
TEST(KernelRecord, TanhGeluEpilogueCubesWithProducts) {
  GraphBuilder b;
  std::mt19937 rng(5);
  const int64_t M = 16, K = 32, N = 64;
  int x = b.input("x", {M, K});
  int up = b.node("MatMul", {x, b.constant("w", brrr_test::uniform_f32({K, N}, rng, -1, 1))});
  int cube = b.node("Pow", {up, b.scalar(3.f)});
  int inner = b.node("Add", {up, b.node("Mul", {b.scalar(0.044715f), cube})});
  int t = b.node("Tanh", {b.node("Mul", {b.scalar(0.7978845608f), inner})});
  b.output(b.node("Mul", {b.node("Mul", {b.scalar(0.5f), up}), b.node("Add", {b.scalar(1.f), t})}));
  b.output(b.node("Pow", {b.input("y", {M, N}), b.scalar(3.f)}));
  Compiled c = compile(b.g, plan::Target::cpu(), CompileOptions{});
  int epilogues = 0, generated_pows = 0;
  for (const plan::Kernel& k : c.plan.kernels) {
    KernelRecord r = plan::kernel_record(c.graph, k);
    if (k.activation == "gelu_tanh") {
      ++epilogues;
      EXPECT_EQ(r.cost.special.count("pow"), 0u) << k.name;
      EXPECT_DOUBLE_EQ(r.cost.special["tanh"], double(M * N)) << k.name;
      EXPECT_GE(r.cost.flops, 2.0 * M * K * N + 2.0 * M * N) << k.name;
    } else if (k.kind == plan::KernelKind::Fused && r.cost.special.count("pow")) {
      ++generated_pows;
      EXPECT_DOUBLE_EQ(r.cost.special["pow"], double(M * N)) << k.name;
    }
  }
  EXPECT_EQ(generated_pows, 1) << c.plan.print(c.graph);
  if (!brrr_test::kDnnl) GTEST_SKIP() << brrr_test::kNoDnnl << ": no GEMM epilogue";
  EXPECT_EQ(epilogues, 1) << c.plan.print(c.graph);
}

// One kernel per node: each intermediate gets arena bytes, the graph output none, and buffers
// whose lifetimes do not overlap share bytes.
TEST(Pipeline, PlanMemoryPlacesIntermediates) {
  GraphBuilder b;
  int v = b.input("x", {256});
  std::vector<int> mids;
  for (int i = 0; i < 4; ++i) {
    v = b.node(i % 2 ? "Relu" : "Neg", {v});
    mids.push_back(v);
  }
  b.output(v);
  CompileOptions o;
  o.fusion = false;
  Compiled c = compile(b.g, plan::Target::cpu(), o);
  ASSERT_EQ(c.plan.kernels.size(), 4u) << c.plan.print(c.graph);
  ArenaPlan a = plan_memory(c.graph, c.plan, [&](int id) {
    return size_t(shape_numel(c.graph.value(id).shape)) * dtype_size(c.graph.value(id).dtype);
  });
  EXPECT_EQ(a.num_buffers, 3u);
  EXPECT_EQ(a.offset[size_t(mids.back())], -1);  // the graph output is the caller's buffer
  for (int i = 0; i < 3; ++i) EXPECT_GE(a.offset[size_t(mids[size_t(i)])], 0);
  // mids[0] and mids[1] live at once; mids[0] is dead when mids[2] is written.
  EXPECT_NE(a.offset[size_t(mids[0])], a.offset[size_t(mids[1])]);
  EXPECT_EQ(a.arena_bytes, 2 * 1024u);
  EXPECT_EQ(a.intermediate_bytes, 3 * 1024u);
}

}  // namespace
}  // namespace brrr
