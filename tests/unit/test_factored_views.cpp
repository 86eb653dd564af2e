// Factored dims in operand views (plan/operand_view.hpp): a Reshape that merges dims memory does
// not keep adjacent (ViT's B*H over its [S, B, 3E] in-projection) makes a dim of factors, each
// with its own stride; splitting it back along its factors gives plain strides again; Transposes
// move factors as units; a Gather or Slice of a factored dim stops the view; callers that did not
// ask for factors get the views they always got.
#include <gtest/gtest.h>

#include <random>

#include "brrr/passes.hpp"
#include "plan/operand_view.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr {
namespace {

using plan::Factor;
using Dims = std::vector<std::vector<Factor>>;

// A view whose dims are one factor each.
Dims plain(const Shape& sizes, const std::vector<int64_t>& strides) {
  Dims d;
  for (size_t i = 0; i < sizes.size(); ++i) d.push_back({Factor{sizes[i], strides[i]}});
  return d;
}

// The element offsets a view reads, in its row-major order (each dim's factors outermost first,
// so the order of the flattened factors).
std::vector<int64_t> offsets(const Dims& d) {
  std::vector<Factor> fs;
  for (const auto& dim : d) fs.insert(fs.end(), dim.begin(), dim.end());
  std::vector<int64_t> out{0};
  for (const Factor& f : fs) {
    std::vector<int64_t> next;
    for (int64_t o : out)
      for (int64_t i = 0; i < f.size; ++i) next.push_back(o + i * f.stride);
    out = std::move(next);
  }
  return out;
}

// Whether the elements at `offs` (row-major over `shape`) have one stride per dim.
bool strided(const std::vector<int64_t>& offs, const Shape& shape) {
  std::vector<int64_t> rm(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) rm[i - 1] = rm[i] * shape[i];
  for (size_t dim = 0; dim < shape.size(); ++dim) {
    if (shape[dim] == 1) continue;
    const int64_t step = offs[size_t(rm[dim])] - offs[0];
    for (size_t i = 0; i < offs.size(); ++i)
      if ((int64_t(i) / rm[dim]) % shape[dim] + 1 < shape[dim] &&
          offs[i + size_t(rm[dim])] - offs[i] != step)
        return false;
  }
  return true;
}

// ViT's q: [S, B, E] taken from [S, B, 3E] (strides B*3E, 3E, 1), viewed as [S, B*H, D]. No
// stride describes B*H; factors do: B at 3E, H at D.
TEST(FactoredViews, MergeOfNonAdjacentDimsIsFactored) {
  const int64_t S = 5, B = 3, H = 2, D = 4, E = H * D;
  const Dims q = plain({S, B, E}, {B * 3 * E, 3 * E, 1});
  EXPECT_FALSE(plan::reshape_factors(q, {S, B * H, D}, false));
  auto f = plan::reshape_factors(q, {S, B * H, D}, true);
  ASSERT_TRUE(f);
  EXPECT_EQ(*f, (Dims{{{S, B * 3 * E}}, {{B, 3 * E}, {H, D}}, {{D, 1}}}));
  // Dims memory keeps adjacent still merge into one stride: H and D are E's.
  EXPECT_EQ(*plan::reshape_factors(q, {S * B, E}, true), (Dims{{{S * B, 3 * E}}, {{E, 1}}}));
}

// Split back along its factors (torch 2's Reshape [B, H, S, D] after the Transpose), the dim is
// plain again; a split that cuts a factor in two keeps the outer part factored; one whose sizes
// do not divide the factors has no view.
TEST(FactoredViews, SplitsOfAFactoredDim) {
  const int64_t S = 5, B = 3, H = 2, D = 4;
  const Dims heads{{{B, 24}, {H, D}}, {{S, 72}}, {{D, 1}}};  // [B*H, S, D]
  EXPECT_EQ(*plan::reshape_factors(heads, {B, H, S, D}, false),
            plain({B, H, S, D}, {24, D, 72, 1}));
  const Dims bh{{{4, 100}, {6, 10}}};
  EXPECT_EQ(*plan::reshape_factors(bh, {8, 3}, true), (Dims{{{4, 100}, {2, 30}}, {{3, 10}}}));
  EXPECT_FALSE(plan::reshape_factors(bh, {8, 3}, false));
  EXPECT_FALSE(plan::reshape_factors(bh, {3, 8}, true));
  EXPECT_EQ(*plan::reshape_factors(bh, {2, 2, 6}, false), plain({2, 2, 6}, {200, 100, 10}));
}

// Dims of 1 keep the stride they always had (one past their inner neighbour), so GEMM
// descriptors compare as before; element counts must agree.
TEST(FactoredViews, OnesAndCounts) {
  const Dims v = plain({4, 6}, {1, 4});  // a transposed [6, 4]
  EXPECT_EQ(*plan::reshape_factors(v, {1, 4, 1, 6, 1}, false),
            plain({1, 4, 1, 6, 1}, {4, 1, 24, 4, 4}));
  EXPECT_FALSE(plan::reshape_factors(v, {25}, true));
  EXPECT_FALSE(plan::reshape_factors(v, {0, 24}, true));
}

// Random views (permuted row-major buffers of small dims, then reshaped twice): every reshape
// that succeeds reads the elements the reshape means; without factors it succeeds exactly when
// one stride per dim describes the result; with factors whenever it does without.
TEST(FactoredViews, RandomReshapesReadTheRightElements) {
  std::mt19937 rng(5);
  const std::vector<int64_t> sizes{1, 2, 3, 4, 6};
  auto pick = [&](int64_t n) { return int64_t(rng() % uint64_t(n)); };
  // A random shape of `numel` elements, each dim a divisor of what is left.
  auto random_shape = [&](int64_t numel) {
    Shape s;
    while (numel > 1 && s.size() < 4) {
      std::vector<int64_t> divs;
      for (int64_t d = 2; d <= numel; ++d)
        if (numel % d == 0) divs.push_back(d);
      s.push_back(divs[size_t(pick(int64_t(divs.size())))]);
      numel /= s.back();
      if (pick(5) == 0) s.push_back(1);
    }
    if (numel > 1) s.push_back(numel);
    std::shuffle(s.begin(), s.end(), rng);
    return s;
  };
  int factored_only = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Shape base;
    for (int64_t r = 1 + pick(4); r > 0; --r) base.push_back(sizes[size_t(pick(5))]);
    std::vector<int64_t> perm(base.size());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int64_t> rm(base.size(), 1);
    for (size_t i = base.size(); i-- > 1;) rm[i - 1] = rm[i] * base[i];
    Shape shape;
    std::vector<int64_t> st;
    for (int64_t p : perm) shape.push_back(base[size_t(p)]), st.push_back(rm[size_t(p)]);
    Dims v = plain(shape, st);
    for (int step = 0; step < 2; ++step) {
      const std::vector<int64_t> want = offsets(v);
      const Shape to = random_shape(int64_t(want.size()));
      SCOPED_TRACE(::testing::Message() << "trial " << trial << " step " << step << " to "
                                        << shape_str(to));
      auto p = plan::reshape_factors(v, to, false);
      auto f = plan::reshape_factors(v, to, true);
      EXPECT_EQ(bool(p), strided(want, to));
      if (p) {
        EXPECT_EQ(offsets(*p), want);
        EXPECT_EQ(f, p);
      }
      if (!f) break;
      EXPECT_EQ(offsets(*f), want);
      factored_only += !p;
      v = *f;
    }
  }
  EXPECT_GT(factored_only, 100);  // the random views do exercise factors
}

int ints(GraphBuilder& b, const std::vector<int64_t>& v) {
  return b.constant("i" + std::to_string(b.count++), Tensor::from_vector<int64_t>({int64_t(v.size())}, v));
}

// x [S, B, 2E], its first half [S, B, E] (a Slice) viewed as [S, B*H, D] and Transposed to
// [B*H, S, D], then `tail` applied; the operand a MatMul reads.
struct Chain {
  GraphBuilder b;
  int x = -1, half = -1, merged = -1, operand = -1;
};
static constexpr int64_t S = 5, B = 3, H = 2, D = 4, E = H * D;
void build(Chain& c, const std::function<int(GraphBuilder&, int)>& tail) {
  GraphBuilder& b = c.b;
  c.x = b.input("x", {S, B, 2 * E});
  c.half = b.node("Slice", {c.x, ints(b, {0}), ints(b, {E}), ints(b, {2})});
  c.merged = b.node("Reshape", {c.half, ints(b, {S, B * H, D})});
  c.operand = tail(b, b.node("Transpose", {c.merged}, {{"perm", std::vector<int64_t>{1, 0, 2}}}));
  b.output(b.node("MatMul", {c.operand, b.input("w", {D, 3})}));
  infer_shapes(b.g, {});
}
auto all = [](int) { return true; };

// Asked for, the view reaches x with B*H factored (the Transpose moved both factors to dim 0);
// not asked for (the CPU's and the GEMMs' callers), the view starts at the Slice's output, where
// the Reshape has plain strides, as before.
TEST(FactoredViews, OperandViewFactorsOnlyWhenAsked) {
  Chain c;
  build(c, [](GraphBuilder&, int t) { return t; });
  plan::OperandView f = plan::operand_view(c.b.g, c.operand, all, false, true);
  EXPECT_EQ(f.source, c.x);
  EXPECT_EQ(f.dims, (Shape{B * H, S, D}));
  EXPECT_EQ(f.strides, (std::vector<int64_t>{0, B * 2 * E, 1}));
  ASSERT_EQ(f.factors.size(), 3u);
  EXPECT_EQ(f.factors[0], (std::vector<Factor>{{B, 2 * E}, {H, D}}));
  EXPECT_TRUE(f.factors[1].empty() && f.factors[2].empty());
  plan::OperandView p = plan::operand_view(c.b.g, c.operand, all);
  EXPECT_EQ(p.source, c.half);
  EXPECT_EQ(p.strides, (std::vector<int64_t>{D, B * E, 1}));
  EXPECT_TRUE(p.factors.empty());
}

// A Gather of one head, or a Slice of some, cuts a factored dim: the view does not reach x; it
// starts at the Slice's output, where the Reshape has plain strides. A Slice that takes a
// factored dim whole and cuts another keeps the factors.
TEST(FactoredViews, PickOrSliceOfAFactoredDimStopsTheView) {
  auto gather = [](GraphBuilder& b, int t) {
    int i = b.constant("one", Tensor::scalar<int64_t>(1));
    return b.node("Gather", {b.node("Transpose", {t}, {{"perm", std::vector<int64_t>{1, 0, 2}}}), i},
                  {{"axis", int64_t(1)}});  // [S, D] of head 1
  };
  auto slice = [](GraphBuilder& b, int t) {
    return b.node("Slice", {t, ints(b, {0}), ints(b, {2}), ints(b, {0})});
  };
  for (const auto& tail : {std::function<int(GraphBuilder&, int)>(gather), std::function<int(GraphBuilder&, int)>(slice)}) {
    Chain c;
    build(c, tail);
    plan::OperandView v = plan::operand_view(c.b.g, c.operand, all, false, true);
    EXPECT_EQ(v.source, c.half);
    EXPECT_TRUE(v.factors.empty());
  }
  Chain c;
  build(c, [](GraphBuilder& b, int t) {
    return b.node("Slice", {t, ints(b, {1}), ints(b, {4}), ints(b, {1})});  // rows 1..3 of S
  });
  plan::OperandView v = plan::operand_view(c.b.g, c.operand, all, false, true);
  EXPECT_EQ(v.source, c.x);
  EXPECT_EQ(v.dims, (Shape{B * H, 3, D}));
  EXPECT_EQ(v.offset, B * 2 * E);
  EXPECT_EQ(v.factors[0], (std::vector<Factor>{{B, 2 * E}, {H, D}}));
}

// The other direction: a result [S, B*H, D] written through Reshape [S, B, H, D], Transpose to
// [B, S, H, D] and Reshape [B, S, E] lands at B*H = (B: S*E) x (H: D) of that buffer.
TEST(FactoredViews, OutputViewFactorsOnlyWhenAsked) {
  GraphBuilder b;
  int r = b.node("MatMul", {b.input("a", {S, B * H, 3}), b.input("w", {3, D})});
  int split = b.node("Reshape", {r, ints(b, {S, B, H, D})});
  int t = b.node("Transpose", {split}, {{"perm", std::vector<int64_t>{1, 0, 2, 3}}});
  int out = b.node("Reshape", {t, ints(b, {B, S, E})});
  b.output(out);
  infer_shapes(b.g, {});
  plan::OperandView f = plan::output_view(b.g, r, all, false, true);
  EXPECT_EQ(f.source, out);
  EXPECT_EQ(f.dims, (Shape{S, B * H, D}));
  EXPECT_EQ(f.strides, (std::vector<int64_t>{E, 0, 1}));
  ASSERT_EQ(f.factors.size(), 3u);
  EXPECT_EQ(f.factors[1], (std::vector<Factor>{{B, S * E}, {H, D}}));
  // Without factors it stops at the first Reshape's output, whose strides are plain.
  EXPECT_EQ(plan::output_view(b.g, r, all).nodes, std::vector<int>{b.g.value(split).producer});
}

}  // namespace
}  // namespace brrr
