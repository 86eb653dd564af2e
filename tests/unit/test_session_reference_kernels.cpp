// Reference kernels inside a compiled plan write into pre-placed arena buffers. Some kernels
// (Cast, Identity, Sum of one input) return a new tensor instead of filling the given one; the
// plan must still see their results (this once returned uninitialized memory).
#include <gtest/gtest.h>

#include "brrr/reference.hpp"
#include "brrr/session.hpp"
#include "runtime/graph_builder.hpp"

using namespace brrr;

TEST(SessionReferenceKernels, CastChainMatchesReference) {
  GraphBuilder b;
  int x = b.input("x", {4, 8});
  int c = b.node("Cast", {b.node("Cos", {x})}, {{"to", int64_t(7)}});
  int y = b.node("Cast", {c}, {{"to", int64_t(1)}});
  b.output(b.node("Add", {b.node("Identity", {y}), x}));
  std::vector<float> xs(32);
  for (int i = 0; i < 32; ++i) xs[size_t(i)] = float(i) * 0.37f - 5.0f;
  Tensor in = Tensor::from_vector<float>({4, 8}, xs);
  Session s(b.g);
  for (int rep = 0; rep < 2; ++rep) {
    std::vector<Tensor> got = s.run({{"x", in}});
    for (int i = 0; i < 32; ++i) {
      float want = float(int64_t(std::cos(xs[size_t(i)]))) + xs[size_t(i)];
      EXPECT_EQ(got[0].data<float>()[i], want) << i;
    }
  }
}
