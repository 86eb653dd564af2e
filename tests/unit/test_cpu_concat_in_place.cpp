// Concats in place on the CPU (src/passes/plan_memory.cpp): a channel Concat at batch 1 whose
// output buffer is its inputs' buffers back to back has each input written inside it, and copies
// nothing. DenseNet's concats of a growing list of features all become prefixes of the block's
// last one; a Concat whose input would overlap another's bytes, a batch of 2 and NHWC data stay
// copies. Every session matches the reference.
#include <gtest/gtest.h>

#include <random>

#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "env_var.hpp"
#include "expect_outputs.hpp"
#include "passes/pipeline.hpp"
#include "passes/plan_memory.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/library_desc.hpp"
#include "plan/target.hpp"
#include "random_tensor.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

std::mt19937& rng() {
  static std::mt19937 r(11);
  return r;
}
Tensor rnd(const Shape& s) { return brrr_test::uniform_f32(s, rng(), -1.f, 1.f); }

int conv1x1(GraphBuilder& b, int x, int64_t cin, int64_t cout, const std::string& name) {
  return b.node("Relu",
                {b.node("Conv", {x, b.constant(name + "_w", rnd({cout, cin, 1, 1})),
                                 b.constant(name + "_b", rnd({cout}))})});
}

// A dense block: f0, then each layer reads Concat(f0, ..., fk) (through a Relu, a generated
// kernel, so that the concat is read as a buffer) and makes f(k+1) with 16 channels.
Graph dense_block(int64_t batch, int layers) {
  GraphBuilder b;
  int x = b.input("x", {batch, 8, 10, 10});
  std::vector<int> feats{conv1x1(b, x, 8, 32, "stem")};
  int64_t c = 32;
  for (int l = 0; l < layers; ++l) {
    int cat = feats.size() == 1 ? feats[0] : b.node("Concat", feats, {{"axis", int64_t(1)}});
    int h = b.node("Relu", {b.node("Neg", {cat})});
    feats.push_back(conv1x1(b, h, c, 16, "l" + std::to_string(l)));
    c += 16;
  }
  // Through a Neg: a conv reading the Concat directly would take it apart (distribute_concat).
  b.output(conv1x1(b, b.node("Neg", {b.node("Concat", feats, {{"axis", int64_t(1)}})}), c, 8,
                   "head"));
  return b.g;
}

struct SessionRun {
  std::string summary;
  int aliased = 0;  // concats in place, from the plan summary's memory line
};

SessionRun expect_matches_reference(const Graph& g) {
  std::map<std::string, Tensor> in;
  for (int id : g.inputs) in[g.value(id).name] = rnd(g.value(id).shape);
  Session s(g, SessionOptions{});
  std::vector<Tensor> got;
  for (int r = 0; r < 3; ++r) got = s.run(in);
  brrr_test::expect_outputs_close(got, run_reference(s.graph(), in), 1e-4, 1e-4, s.plan_summary());
  SessionRun run{s.plan_summary(), 0};
  const std::string key = " concat(s) in place";
  if (size_t at = run.summary.find(key); at != std::string::npos) {
    size_t start = run.summary.rfind("memory: ", at) + 8;
    run.aliased = std::stoi(run.summary.substr(start, at - start));
  }
  return run;
}

int concats(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op == "Concat";
  return n;
}

TEST(CpuConcatInPlace, DenseBlockConcatsAreWrittenInPlace) {
  for (const char* layout : {"blocked", "plain"}) {
    SCOPED_TRACE(layout);
    brrr_test::EnvVar env("BRRR_CONV_LAYOUT", layout);
    Graph g = dense_block(1, 4);
    SessionRun r = expect_matches_reference(g);
    EXPECT_EQ(r.aliased, concats(g)) << r.summary;
  }
}

TEST(CpuConcatInPlace, BatchOfTwoAndNhwcStayCopies) {
  {
    SessionRun r = expect_matches_reference(dense_block(2, 3));
    EXPECT_EQ(r.aliased, 0) << r.summary;
  }
  // Concat(conv, conv) into a depthwise conv: all NHWC, each pixel's channels interleaved.
  brrr_test::EnvVar env("BRRR_CONV_LAYOUT", "nhwc");
  GraphBuilder b;
  int x = b.input("x", {1, 8, 6, 6});
  int cat = b.node("Concat", {conv1x1(b, x, 8, 16, "a"), conv1x1(b, x, 8, 16, "b")},
                   {{"axis", int64_t(1)}});
  b.output(b.node("Conv", {cat, b.constant("dw", rnd({32, 1, 3, 3}))}, {{"group", int64_t(32)}}));
  SessionRun r = expect_matches_reference(b.g);
  EXPECT_NE(r.summary.find("kept NHWC"), std::string::npos) << r.summary;
  EXPECT_EQ(r.aliased, 0) << r.summary;
}

// Channel-blocked data: each part a whole number of channel blocks, so the output's blocks are
// the parts' blocks in turn.
TEST(CpuConcatInPlace, ChannelBlockedConcatIntoADepthwiseConv) {
  brrr_test::EnvVar env("BRRR_CONV_LAYOUT", "blocked");
  GraphBuilder b;
  int x = b.input("x", {1, 8, 9, 9});
  int cat = b.node("Concat",
                   {conv1x1(b, x, 8, 16, "a"), conv1x1(b, x, 8, 32, "b"), conv1x1(b, x, 8, 16, "c")},
                   {{"axis", int64_t(1)}});
  b.output(b.node("Conv", {cat, b.constant("dw", rnd({64, 1, 3, 3}))}, {{"group", int64_t(64)}}));
  SessionRun r = expect_matches_reference(b.g);
  EXPECT_NE(r.summary.find("kept channel-blocked"), std::string::npos) << r.summary;
  EXPECT_EQ(r.aliased, 1) << r.summary;
  // Parts of 8 and 24 channels are not whole blocks: whatever the layouts, the results hold.
  GraphBuilder b2;
  int x2 = b2.input("x", {1, 8, 9, 9});
  int cat2 = b2.node("Concat", {conv1x1(b2, x2, 8, 8, "a"), conv1x1(b2, x2, 8, 24, "b")},
                     {{"axis", int64_t(1)}});
  b2.output(
      b2.node("Conv", {cat2, b2.constant("dw", rnd({32, 1, 3, 3}))}, {{"group", int64_t(32)}}));
  expect_matches_reference(b2.g);
}

// The arena plan itself: every feature of the block at its channel offset inside the last
// Concat's buffer, each earlier Concat a prefix of it, and that buffer alive from the first
// feature's write to the last read.
TEST(CpuConcatInPlace, FeaturesSitAtTheirOffsetsInTheLastConcat) {
  CompileOptions o;
  Compiled c = compile(dense_block(1, 3), plan::Target::cpu(), o);
  auto bytes = [&](int v) {
    return size_t(shape_numel(c.graph.value(v).shape)) * dtype_size(c.graph.value(v).dtype);
  };
  ArenaPlan a = plan_memory(c.graph, c.plan, bytes, [](size_t) { return true; });
  const plan::ConcatDesc* last = nullptr;
  int in_place = 0;
  for (size_t i = 0; i < c.plan.kernels.size(); ++i)
    if (const auto* d = plan::desc_of<plan::ConcatDesc>(c.plan.kernels[i])) {
      EXPECT_TRUE(a.concat_in_place[i]) << c.plan.print(c.graph);
      in_place += a.concat_in_place[i];
      last = d;
    }
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(in_place, 3);
  const int root = last->out;
  EXPECT_EQ(a.share[size_t(root)], -1);
  ASSERT_GE(a.offset[size_t(root)], 0);
  int64_t at = 0;
  for (int v : last->inputs) {
    EXPECT_EQ(a.share[size_t(v)], root);
    EXPECT_EQ(a.share_offset[size_t(v)], at);
    EXPECT_EQ(a.offset[size_t(v)], -1);
    at += int64_t(bytes(v));
  }
  EXPECT_EQ(size_t(at), bytes(root));
  for (size_t i = 0; i < c.plan.kernels.size(); ++i)
    if (const auto* d = plan::desc_of<plan::ConcatDesc>(c.plan.kernels[i]); d && d != last) {
      EXPECT_EQ(a.share[size_t(d->out)], root);
      EXPECT_EQ(a.share_offset[size_t(d->out)], 0);
    }
}

// o1 = Concat(a, b, d), o2 = Concat(b, c): b sits after a in o1, so c would land on d's bytes.
// o1 (the later) is placed; o2 stays a copy; both are read after all are made.
TEST(CpuConcatInPlace, ConcatsThatWouldOverlapStayCopies) {
  brrr_test::EnvVar env("BRRR_CONV_LAYOUT", "blocked");
  GraphBuilder b;
  int x = b.input("x", {1, 8, 6, 6});
  int a = conv1x1(b, x, 8, 16, "a"), bb = conv1x1(b, x, 8, 16, "b");
  int c = conv1x1(b, x, 8, 16, "c"), d = conv1x1(b, x, 8, 16, "d");
  int o2 = b.node("Concat", {bb, c}, {{"axis", int64_t(1)}});
  int o1 = b.node("Concat", {a, bb, d}, {{"axis", int64_t(1)}});
  b.output(conv1x1(b, b.node("Neg", {o1}), 48, 8, "h1"));
  b.output(conv1x1(b, b.node("Neg", {o2}), 32, 8, "h2"));
  SessionRun r = expect_matches_reference(b.g);
  EXPECT_EQ(r.aliased, 1) << r.summary;
}

}  // namespace
}  // namespace brrr
