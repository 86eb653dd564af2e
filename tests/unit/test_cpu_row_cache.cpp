// Row kernels of the C++ emitter keep a reduction's computed element argument that a later loop
// of the row needs again in a per-row scratch array (CodegenOptions::row_cache): softmax's
// exp(x - max) is computed once, not twice. Results against the reference executor, on and off.
#include <gtest/gtest.h>

#include <random>

#include "backend/cpu/codegen_cpp.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "passes/pipeline.hpp"
#include "plan/target.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// Softmax over rows of 197 (not a multiple of any vector width), and Add + LayerNormalization
// over rows of 40: the residual sum is the mean's argument, and the normalization reads it again.
Graph rows_graph() {
  GraphBuilder b;
  int x = b.input("x", {3, 5, 197});
  b.output(b.node("Softmax", {x}, {{"axis", int64_t(-1)}}));
  int y = b.input("y", {6, 40});
  int r = b.input("r", {6, 40});
  std::mt19937 rng(3);
  int scale = b.constant("scale", brrr_test::uniform_f32({40}, rng, 0.5f, 1.5f));
  int bias = b.constant("bias", brrr_test::uniform_f32({40}, rng, -1.f, 1.f));
  b.output(b.node("LayerNormalization", {b.node("Add", {y, r}), scale, bias},
                  {{"axis", int64_t(-1)}, {"epsilon", 1e-5f}}));
  return b.g;
}

std::string source(bool row_cache) {
  Graph g = rows_graph();
  Compiled c = compile(g, plan::Target::cpu(), {});
  cpu::CodegenOptions o;
  o.row_cache = row_cache;
  std::string all;
  for (const std::string& part : cpu::generate_cpp(c.graph, c.plan, o).parts) all += part;
  return all;
}

TEST(CpuRowCache, SoftmaxComputesEachExpOnce) {
  const std::string on = source(true), off = source(false);
  // expf appears in the preamble's declarations as well: compare the calls' difference.
  EXPECT_EQ(count(off, "expf((") - count(on, "expf(("), 1u) << on;
  EXPECT_EQ(count(on, "expf(("), 1u) << on;
  EXPECT_NE(on.find("__attribute__((aligned(64)));"), std::string::npos) << on;
  EXPECT_EQ(off.find(" sc"), std::string::npos) << off;
}

TEST(CpuRowCache, ResultsMatchTheReferenceOnAndOff) {
  std::mt19937 rng(7);
  std::map<std::string, Tensor> in{{"x", brrr_test::uniform_f32({3, 5, 197}, rng, -8.f, 8.f)},
                                   {"y", brrr_test::uniform_f32({6, 40}, rng, -2.f, 2.f)},
                                   {"r", brrr_test::uniform_f32({6, 40}, rng, -2.f, 2.f)}};
  Graph ref = compile(rows_graph(), plan::Target::reference(), {}).graph;
  auto want = run_reference(ref, in);
  for (const char* flag : {"0", "1"}) {
    brrr_test::EnvVar no("BRRR_NO_ROW_CACHE", flag);
    Session s(rows_graph(), SessionOptions{});
    brrr_test::expect_outputs_close(s.run(in), want, 1e-6, 1e-5, s.plan_summary());
  }
}

}  // namespace
}  // namespace brrr
