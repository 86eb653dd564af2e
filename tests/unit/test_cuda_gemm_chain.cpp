// Small-batch GEMM chains as one cluster kernel (src/backend/cuda/gemm_chain.hpp): the source
// compiles with NVRTC for sm_90 on any machine; on a GPU the chain matches the reference for
// each activation, batch 1 to 8 and several widths, and later kernels can read its layers.
#include <gtest/gtest.h>

#include <random>

#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "runtime/graph_builder.hpp"

#ifdef BRRR_HAVE_CUDA
#include "backend/cuda/gemm_chain.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "cuda_test_util.hpp"

namespace brrr {
namespace {

using cuda::ChainLayer;
using cuda::GemmChainSpec;

Tensor uniform(const Shape& s, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor x = Tensor::empty(DType::f32, s);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = d(rng);
  return x;
}

// x [m, widths[0]] through len(widths)-1 Linear layers with `act` ("", "relu", "gelu_tanh").
Graph chain_graph(int64_t m, const std::vector<int64_t>& widths, const std::string& act,
                  bool bias = true) {
  GraphBuilder b;
  int x = b.input("x", {m, widths[0]});
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    float r = 1.5f / std::sqrt(float(widths[l]));
    int W = b.constant("W" + std::to_string(l), uniform({widths[l], widths[l + 1]}, -r, r, 7 + l));
    x = b.node("MatMul", {x, W});
    if (bias) x = b.node("Add", {x, b.constant("b" + std::to_string(l), uniform({widths[l + 1]}, -1, 1, 50 + l))});
    if (act == "relu") x = b.node("Relu", {x});
    if (act == "gelu_tanh") x = b.node("Gelu", {x}, {{"approximate", std::string("tanh")}});
  }
  b.output(x);
  return b.g;
}

TEST(CudaGemmChain, LimitsAreExplained) {
  GemmChainSpec s{1, {{256, 256, true, "relu"}}};
  EXPECT_NE(cuda::gemm_chain_unsupported(s), "");  // one layer is not a chain
  s.layers.push_back({256, 256, true, "relu"});
  EXPECT_EQ(cuda::gemm_chain_unsupported(s), "");
  s.m = 9;
  EXPECT_NE(cuda::gemm_chain_unsupported(s).find("batch"), std::string::npos);
  s.m = 1;
  s.layers[1].k = 128;
  EXPECT_NE(cuda::gemm_chain_unsupported(s).find("chain"), std::string::npos);
  s.layers[1] = {256, 100, false, ""};
  EXPECT_NE(cuda::gemm_chain_unsupported(s).find("multiple"), std::string::npos);
  s.layers[1] = {256, 256, false, "gelu_erf"};
  EXPECT_NE(cuda::gemm_chain_unsupported(s).find("activation"), std::string::npos);
  s.layers = {{256, 258, true, ""}, {258, 256, true, ""}};
  EXPECT_NE(cuda::gemm_chain_unsupported(s), "");  // N=258 is not a multiple of 8
  s.layers = {{256, 96, true, ""}, {96, 256, true, ""}, {256, 40, true, ""}};
  EXPECT_EQ(cuda::gemm_chain_unsupported(s), "");
  s.layers = {{6, 256, true, ""}, {256, 256, true, ""}};
  EXPECT_NE(cuda::gemm_chain_unsupported(s).find("multiple of 4"), std::string::npos);
  // 512x512: two columns of 512 weights per lane would not stay in registers.
  s.layers = {{512, 512, true, ""}, {512, 512, true, ""}};
  EXPECT_NE(cuda::gemm_chain_unsupported(s).find("weights per lane"), std::string::npos);
}

TEST(CudaGemmChain, PackedWeightsAreTheTransposePadded) {
  // K=100: 25 float4 chunks per column, a 32-lane group, so each column pads to 128.
  GemmChainSpec s{1, {{100, 16, false, ""}, {16, 8, false, ""}}};
  std::vector<float> w(100 * 16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i + 1);
  std::vector<float> p = cuda::gemm_chain_pack(s, 0, w.data());
  ASSERT_EQ(p.size(), 16u * 128u);
  for (int c = 0; c < 16; ++c)
    for (int k = 0; k < 128; ++k) ASSERT_EQ(p[size_t(c * 128 + k)], k < 100 ? w[size_t(k * 16 + c)] : 0.0f) << c << " " << k;
  // K=16: 4 chunks, a 4-lane group, no padding.
  std::vector<float> w1(16 * 8, 2.0f);
  EXPECT_EQ(cuda::gemm_chain_pack(s, 1, w1.data()).size(), 8u * 16u);
  EXPECT_GE(cuda::gemm_chain_threads(s), 32);
  EXPECT_EQ(cuda::gemm_chain_threads(s) % 32, 0);
}

TEST(CudaGemmChain, SourceCompilesWithNvrtc) {
  cuda::NvrtcCompiler nv("sm_90", "");
  std::string src = "#include \"brrr/scalar_ops.h\"\n";
  src += cuda::gemm_chain_source("chain_a", {1, {{256, 256, true, "relu"}, {256, 256, true, "relu"}}});
  src += cuda::gemm_chain_source("chain_b", {8, {{64, 128, false, ""}, {128, 64, true, "gelu_tanh"}, {64, 8, true, ""}}});
  // The largest shared-memory footprint the limits allow (M*K = 4096 floats of input, twice),
  // with the most weights per lane (16) in both layers.
  src += cuda::gemm_chain_source("chain_c", {8, {{512, 256, true, "relu"}, {256, 512, true, "relu"}}});
  // Groups of 2, 16 and 32 lanes, several slots.
  src += cuda::gemm_chain_source("chain_d", {2, {{100, 64, true, "relu"}, {64, 512, true, "relu"}, {512, 8, true, "relu"}, {8, 136, true, "relu"}}});
  EXPECT_NO_THROW(nv.compile(src, "chain")) << src;
}

double check(const Graph& g, int64_t m, int64_t k0, const std::string& expect_in_summary) {
  SessionOptions o;
  o.backend = "cuda";
  Session s(g, o);
  std::map<std::string, Tensor> in{{"x", uniform({m, k0}, -1, 1, 99)}};
  Tensor got = s.run(in)[0];
  Tensor want = run_reference(s.graph(), in)[0];
  std::vector<float> out(size_t(got.numel()));
  std::vector<double> ref(out.size());
  for (int64_t i = 0; i < got.numel(); ++i) {
    out[size_t(i)] = got.data<float>()[i];
    ref[size_t(i)] = want.data<float>()[i];
  }
  EXPECT_NE(s.plan_summary().find(expect_in_summary), std::string::npos) << s.plan_summary();
  // Replays give the same answer (the chain's shared-memory exchange is deterministic).
  Tensor again = s.run(in)[0];
  EXPECT_EQ(std::memcmp(got.raw(), again.raw(), got.nbytes()), 0);
  return brrr_cuda_test::rel_l2(out, ref);
}

TEST(CudaGemmChain, MatchesReference) {
  BRRR_REQUIRE_CUDA_DEVICE();
  for (int64_t m : {1, 3, 8})
    for (std::string act : {"relu", "gelu_tanh", ""}) {
      std::vector<int64_t> w = {256, 256, 256, 256, 256, 256, 256, 256, 256};
      EXPECT_LE(check(chain_graph(m, w, act), m, 256, "GEMM chain"), 1e-5) << m << " " << act;
    }
  // Uneven widths: K not a multiple of 128 (padded chunks), groups of 16 and 2 lanes, one column
  // per CTA, 17 columns per CTA.
  std::vector<int64_t> w = {100, 64, 512, 8, 136};
  EXPECT_LE(check(chain_graph(2, w, "relu"), 2, 100, "GEMM chain"), 1e-5);
  EXPECT_LE(check(chain_graph(1, {256, 256, 256}, "", false), 1, 256, "GEMM chain"), 1e-5);
}

TEST(CudaGemmChain, IntermediateOutputsAreWritten) {
  BRRR_REQUIRE_CUDA_DEVICE();
  // A layer output that is also a graph output keeps its value.
  Graph g = chain_graph(4, {128, 128, 128, 128}, "relu");
  int mid = g.nodes[2].outputs[0];  // the first layer's ReLU
  g.outputs.push_back(mid);
  SessionOptions o;
  o.backend = "cuda";
  Session s(g, o);
  std::map<std::string, Tensor> in{{"x", uniform({4, 128}, -1, 1, 5)}};
  std::vector<Tensor> got = s.run(in), want = run_reference(s.graph(), in);
  ASSERT_EQ(got.size(), 2u);
  for (size_t k = 0; k < 2; ++k)
    for (int64_t i = 0; i < got[k].numel(); ++i)
      EXPECT_NEAR(got[k].data<float>()[i], want[k].data<float>()[i], 1e-4) << k << " " << i;
}

TEST(CudaGemmChain, IntermediateReadByAnotherKernelIsWritten) {
  BRRR_REQUIRE_CUDA_DEVICE();
  // The second layer's output also feeds a Sigmoid kernel after the chain.
  Graph g = chain_graph(2, {64, 64, 64, 64}, "relu");
  GraphBuilder b;
  b.g = g;
  b.count = 1000;  // fresh names
  int mid = b.g.nodes[5].outputs[0];  // the second layer's ReLU
  b.output(b.node("Sigmoid", {mid}));
  SessionOptions o;
  o.backend = "cuda";
  Session s(b.g, o);
  EXPECT_NE(s.plan_summary().find("GEMM chain"), std::string::npos) << s.plan_summary();
  std::map<std::string, Tensor> in{{"x", uniform({2, 64}, -1, 1, 8)}};
  std::vector<Tensor> got = s.run(in), want = run_reference(s.graph(), in);
  ASSERT_EQ(got.size(), 2u);
  for (size_t k = 0; k < 2; ++k)
    for (int64_t i = 0; i < got[k].numel(); ++i)
      EXPECT_NEAR(got[k].data<float>()[i], want[k].data<float>()[i], 1e-4) << k << " " << i;
}

TEST(CudaGemmChain, ProfileHasOneRecordForTheChain) {
  BRRR_REQUIRE_CUDA_DEVICE();
  SessionOptions o;
  o.backend = "cuda";
  Session s(chain_graph(1, {256, 256, 256, 256}, "relu"), o);
  RunProfile p = s.profile({{"x", uniform({1, 256}, -1, 1, 3)}}, 5);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].kind, "gemm_chain");
  EXPECT_GE(p.kernels[0].cost.flops, 3 * 2.0 * 256 * 256);  // the three layers
  EXPECT_GT(p.kernels[0].time_ms, 0);
}

TEST(CudaGemmChain, BatchOverEightUsesCuBlasLt) {
  BRRR_REQUIRE_CUDA_DEVICE();
  EXPECT_LE(check(chain_graph(16, {256, 256, 256}, "relu"), 16, 256, "cuBLASLt"), 1e-5);
}

}  // namespace
}  // namespace brrr
#else
TEST(CudaGemmChain, NotBuilt) { GTEST_SKIP() << "no CUDA device: built without the CUDA toolkit"; }
#endif
