// IEEE special values (NaN, +-Inf, -0.0, denormals) as initializers, scalar constants and
// attributes (Clip bounds, LeakyRelu / Elu / HardSigmoid alpha and beta) through the generated C++:
// the compiled Session agrees with the reference in NaN-ness and sign for every element.
#include "hostile_util.hpp"

namespace brrr::hostile {
namespace {

TEST(HostileFloats, SpecialConstantsMatchReferenceBitForBit) {
  auto in = load_inputs(fixture("special_floats_data"));
  ASSERT_EQ(in.size(), 1u);
  // Fused kernels and one kernel per op: both paths print constants into generated C++. Elu's
  // expm1 may differ by an ulp between libm and the vector library; everything else is exact.
  for (int fusion : {1, 0}) {
    SessionOptions so = session_options();
    so.fusion = fusion;
    Session s(fixture("special_floats.onnx"), so);
    std::vector<Tensor> got = s.run(in);
    std::vector<Tensor> want = reference(fixture("special_floats.onnx"), in);
    ASSERT_EQ(got.size(), want.size());
    const Graph& g = s.graph();
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string& name = g.value(g.outputs[i]).name;
      int ulps = name.rfind("elu_", 0) == 0 ? 4 : 0;
      expect_same(got[i], want[i], fmt::format("fusion={} {}", fusion, name), ulps);
    }
  }
}

TEST(HostileFloats, SpotChecksAgainstIeee) {
  // Independent of the reference: a few values IEEE arithmetic fixes exactly.
  auto in = load_inputs(fixture("special_floats_data"));
  Session s(fixture("special_floats.onnx"), session_options());
  std::vector<Tensor> out = s.run(in);
  const Graph& g = s.graph();
  auto get = [&](const std::string& name) -> const float* {
    for (size_t i = 0; i < out.size(); ++i)
      if (g.value(g.outputs[i]).name == name) return out[i].data<float>();
    ADD_FAILURE() << "no output " << name;
    static float zeros[16] = {};
    return zeros;
  };
  // x = [nan, inf, -inf, -0, 0, 1e-45, -1e-45, 1, -1, ...]
  EXPECT_TRUE(std::isnan(get("mul_s_nzero")[1]));    // inf * -0
  EXPECT_TRUE(std::signbit(get("mul_s_nzero")[7]));  // 1 * -0 = -0
  EXPECT_EQ(get("mul_s_nzero")[8], 0.f);             // -1 * -0 = +0
  EXPECT_FALSE(std::signbit(get("mul_s_nzero")[8]));
  EXPECT_EQ(get("div_s_nzero")[7], 0.f);  // -0 / 1 = -0
  EXPECT_TRUE(std::signbit(get("div_s_nzero")[7]));
  EXPECT_FALSE(std::signbit(get("div_s_nzero")[8]));  // -0 / -1 = +0
  EXPECT_TRUE(std::isnan(get("div_s_nzero")[4]));     // -0 / 0
  EXPECT_EQ(get("div_s_inf")[3], -INFINITY);          // inf / -0
  EXPECT_EQ(get("add_s_denorm")[4], 1e-45f);          // denormal survives (no FTZ)
  EXPECT_EQ(get("mul_s_denorm")[7], 1e-45f);
  EXPECT_TRUE(std::isnan(get("add_const_nan")[7]));
  EXPECT_TRUE(std::signbit(get("mul_const_nzero")[7]));
  EXPECT_EQ(get("leaky_nzero")[8], 0.f);  // -1 * alpha(-0) = +0
  EXPECT_FALSE(std::signbit(get("leaky_nzero")[8]));
  EXPECT_EQ(get("leaky_ninf")[8], INFINITY);  // -1 * -inf
  EXPECT_TRUE(std::isnan(get("leaky_nan")[8]));
  EXPECT_EQ(get("leaky_nan")[7], 1.f);
}

TEST(HostileFloats, CliRunsSpecialFloats) {
  CliResult r = run_cli("run '" + fixture("special_floats.onnx") + "' --data '" +
                        fixture("special_floats_data") + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("'mul_const_nzero'"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace brrr::hostile
