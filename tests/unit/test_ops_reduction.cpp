// Normalization and reduction ops: one-node graphs through infer_shapes + run_reference, compared
// with values computed independently by numpy (constants below came from numpy 2.x).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"

using namespace brrr;

namespace {

// A graph with one node under test; inputs are graph inputs, constants are initializers.
struct OneNode {
  Graph g;
  std::map<std::string, Tensor> feeds;
  std::vector<int> ins;

  OneNode() { g.opset = 21; }
  OneNode& input(const std::string& name, const Tensor& t) {
    int id = g.add_value(name);
    g.value(id).dtype = t.dtype();
    g.value(id).shape = t.shape();
    g.inputs.push_back(id);
    feeds[name] = t;
    ins.push_back(id);
    return *this;
  }
  OneNode& constant(const std::string& name, const Tensor& t) {
    int id = g.add_value(name);
    Value& v = g.value(id);
    v.dtype = t.dtype();
    v.shape = t.shape();
    v.constant = t;
    v.typed = true;
    ins.push_back(id);
    return *this;
  }
  OneNode& none() {
    ins.push_back(-1);
    return *this;
  }
  Node& node(const std::string& op, int num_outputs = 1) {
    Node n;
    n.op = op;
    n.name = "n0";
    n.inputs = ins;
    for (int i = 0; i < num_outputs; ++i) {
      int id = g.add_value("out" + std::to_string(i));
      n.outputs.push_back(id);
      g.outputs.push_back(id);
    }
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
  std::vector<Tensor> run() {
    infer_shapes(g, {});
    return run_reference(g, feeds);
  }
};

const std::vector<float> kX = {0.5,  -1.25, 2.0,  3.5,   -0.75, 1.0,  0.0,   2.25,
                               -2.5, 1.5,   0.25, -1.0,  1.75,  -0.5, 3.0,   -3.25,
                               0.75, 2.5,   -1.5, 0.125, 1.25,  -2.0, 0.375, 4.0};
Tensor x234() {
  return Tensor::from_vector<float>({2, 3, 4}, kX);
}
Tensor i64s(std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>({int64_t(v.size())}, v);
}

void expect_near(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  std::vector<double> got = t.to_double_vector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "at " << i;
}

std::string error_of(OneNode& t) {
  try {
    t.run();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(OpsNorm, SoftmaxNegativeAxisMatchesNumpy) {
  OneNode t;
  t.input("x", x234());
  t.node("Softmax").attrs["axis"] = int64_t(-2);
  Tensor y = t.run()[0];
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  expect_near(
      y, {0.7483395338058472,  0.03826965019106865,  0.7638782262802124,   0.7706453800201416,
          0.21440285444259644, 0.363092303276062,    0.10337967425584793,  0.22079357504844666,
          0.03725763037800789, 0.5986379981040955,   0.13274213671684265,  0.008561096154153347,
          0.5064803957939148,  0.046929262578487396, 0.9228934049606323,   0.0006952511612325907,
          0.18632371723651886, 0.9425994157791138,   0.010252418927848339, 0.02031821757555008,
          0.30719590187072754, 0.010471333749592304, 0.06685417145490646,  0.9789865612983704});
  // Each column along axis -2 sums to 1.
  std::vector<double> v = y.to_double_vector();
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; ++k)
      EXPECT_NEAR(v[n * 12 + k] + v[n * 12 + 4 + k] + v[n * 12 + 8 + k], 1.0, 1e-6);
}

TEST(OpsNorm, SoftmaxDefaultAxisRowsSumToOneLargeValues) {
  OneNode t;
  t.input("x", Tensor::from_vector<float>({2, 3}, {1000, 1001, 1002, -5, -5, -5}));
  t.node("Softmax");
  std::vector<double> v = t.run()[0].to_double_vector();
  EXPECT_NEAR(v[0] + v[1] + v[2], 1.0, 1e-6);
  EXPECT_NEAR(v[2], 0.6652409557748219, 1e-6);  // exp(2) / (1 + e + e^2)
  EXPECT_NEAR(v[3], 1.0 / 3, 1e-6);
}

TEST(OpsNorm, LogSoftmaxAxis0) {
  OneNode t;
  t.input("x", x234());
  t.node("LogSoftmax").attrs["axis"] = int64_t(0);
  expect_near(
      t.run()[0],
      {-1.5019290447235107,   -1.1368709802627563,   -1.31326162815094,    -0.0011701886542141438,
       -1.7014132738113403,   -1.7014132738113403,   -0.20141322910785675, -0.11282224953174591,
       -3.773245334625244,    -0.029750416055321693, -0.7575989961624146,  -5.006715297698975,
       -0.25192904472351074,  -0.38687098026275635,  -0.31326165795326233, -6.7511701583862305,
       -0.20141322910785675,  -0.20141322910785675,  -1.7014132738113403,  -2.2378222942352295,
       -0.023245444521307945, -3.529750347137451,    -0.6325989961624146,  -0.006715348921716213});
}

TEST(OpsNorm, HardmaxFirstMaxWins) {
  OneNode t;
  t.input("x", Tensor::from_vector<float>({2, 3}, {1, 3, 3, -1, -2, -3}));
  t.node("Hardmax");
  expect_near(t.run()[0], {0, 1, 0, 1, 0, 0});
}

TEST(OpsNorm, SoftmaxFloat16) {
  OneNode t;
  t.input("x", Tensor::from_vector<f16>({1, 2}, {f16(0.0f), f16(1.0f)}));
  t.node("Softmax");
  Tensor y = t.run()[0];
  EXPECT_EQ(y.dtype(), DType::f16);
  expect_near(y, {0.2689414213699951, 0.7310585786300049}, 1e-3);
}

TEST(OpsNorm, LayerNormLastAxisWithBiasAndStats) {
  OneNode t;
  t.input("x", x234());
  t.constant("w", Tensor::from_vector<float>({4}, {1.0, 0.5, -2.0, 1.5}));
  t.constant("b", Tensor::from_vector<float>({4}, {0.1, -0.2, 0.3, 0.0}));
  t.node("LayerNormalization", 3).attrs["axis"] = int64_t(-1);
  auto out = t.run();
  expect_near(
      out[0],
      {-0.29012916655044235, -0.8915926190521313,   -0.6221234761749365, 1.9683789842046358,
       -1.1222173922284835,  -0.033333994745877726, 1.4111067334832923,  2.1666581070466084,
       -1.2907810179962553,  0.4532456273845785,    -0.6271873344033186, -0.568955871608061,
       0.7307054414338559,   -0.35767636296616717,  -2.012586601206117,  -2.2074690398030894,
       0.2964424012130943,   0.5093753293527444,    3.050193608042623,   -0.3601443994921266,
       0.2601958898044373,   -0.8771917126725901,   0.7951509394379218,  2.1626444922433365});
  EXPECT_EQ(out[1].shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(out[1].dtype(), DType::f32);
  expect_near(out[1], {1.1875, 0.625, -0.4375, 0.25, 0.46875, 0.90625});
  expect_near(out[2], {0.5674606080589941, 0.8888853772498907, 0.6743180700539982,
                       0.4204702932958265, 0.6984618656817001, 0.46602440236893444});
}

TEST(OpsNorm, LayerNormAxis1NoBias) {
  OneNode t;
  t.input("x", x234());
  std::vector<float> w(12);
  for (int i = 0; i < 12; ++i) w[i] = 0.5f + 0.1f * float(i);
  t.constant("w", Tensor::from_vector<float>({3, 4}, w));
  t.node("LayerNormalization", 3).attrs["axis"] = int64_t(1);
  auto out = t.run();
  expect_near(
      out[0],
      {0.012812067893872106, -0.6303537654265144,  0.6636651056004252,   1.496449552303097,
       -0.6687899263432404,  0.33311376524067465,  -0.31005204975190187, 1.3222054591873231,
       -2.365107646457155,   0.896844737297872,    -0.19218101840808147, -1.4349516254961203,
       0.2955796628892252,   -0.30577207720810934, 0.8418924047885197,   -1.4840137778608105,
       0.09173161708728772,  0.9580858038478334,   -1.098740977588999,   -0.24461766176648747,
       0.4505041593274589,   -1.740862260749142,   -0.12230882602312765, 2.7071020563175225});
  EXPECT_EQ(out[1].shape(), (Shape{2, 1, 1}));
  expect_near(out[1], {0.4583333333333333, 0.5416666666666666});
  expect_near(out[2], {0.6149792589058608, 0.48923530409251065});
}

TEST(OpsNorm, LayerNormScaleMustBroadcast) {
  OneNode t;
  t.input("x", x234());
  t.constant("w", Tensor::from_vector<float>({3}, {1, 1, 1}));
  t.node("LayerNormalization");
  EXPECT_NE(error_of(t).find("Scale"), std::string::npos);
}

TEST(OpsNorm, BatchNormInference) {
  OneNode t;
  t.input("x", Tensor::from_vector<float>({1, 2, 2}, {1, 2, 3, 4}));
  t.constant("s", Tensor::from_vector<float>({2}, {1, 2}));
  t.constant("b", Tensor::from_vector<float>({2}, {0, 1}));
  t.constant("m", Tensor::from_vector<float>({2}, {1, 3}));
  t.constant("v", Tensor::from_vector<float>({2}, {4, 1}));
  t.node("BatchNormalization").attrs["epsilon"] = 0.0f;
  // (x - m) / sqrt(v) * s + b
  expect_near(t.run()[0], {0, 0.5, 1, 3});
}

TEST(OpsNorm, BatchNormTrainingModeIsAClearError) {
  OneNode t;
  t.input("x", Tensor::from_vector<float>({1, 2, 2}, {1, 2, 3, 4}));
  for (const char* n : {"s", "b", "m", "v"}) t.constant(n, Tensor::from_vector<float>({2}, {1, 1}));
  t.node("BatchNormalization").attrs["training_mode"] = int64_t(1);
  std::string e = error_of(t);
  EXPECT_NE(e.find("training_mode=1 is not supported"), std::string::npos) << e;
  EXPECT_NE(e.find("BatchNormalization"), std::string::npos) << e;
}

TEST(OpsNorm, InstanceNorm) {
  OneNode t;
  t.input("x", x234());
  t.constant("s", Tensor::from_vector<float>({3}, {1, 2, -1}));
  t.constant("b", Tensor::from_vector<float>({3}, {0, 0.5, 1}));
  t.node("InstanceNormalization");
  expect_near(t.run()[0],
              {-0.3901291787624359, -1.3831852674484253,  0.4610617458820343,  1.3122526407241821,
               -1.9444348812103271, 1.1666640639305115,   -0.6111067533493042, 3.3888776302337646,
               2.390781044960022,   -0.30649125576019287, 0.5364063084125519,  1.3793039321899414,
               0.6307054758071899,  -0.31535273790359497, 1.1562933921813965,  -1.4716460704803467,
               0.8928847908973694,  3.337501287460327,    -2.2501935958862305, 0.01980745792388916,
               0.8398041129112244,  2.3543834686279297,   1.2475754618644714,  -0.4417630434036255},
              1e-4);
}

TEST(OpsNorm, GroupNormPerChannelScale) {
  OneNode t;
  t.input("x", Tensor::from_vector<float>({2, 4, 3}, kX));
  t.constant("s", Tensor::from_vector<float>({4}, {1, -1, 0.5, 2}));
  t.constant("b", Tensor::from_vector<float>({4}, {0, 1, -1, 0.25}));
  t.node("GroupNormalization").attrs["num_groups"] = int64_t(2);
  expect_near(t.run()[0],
              {-0.2076692283153534,
               -1.297932744026184,
               0.7268424034118652,
               -0.6613540649414062,
               1.9864288568496704,
               0.8961653634905815,
               -1.026726070791483,
               -0.30512213706970215,
               -1.8285081386566162,
               2.067372679710388,
               0.4638085514307022,
               -1.1397557258605957,
               0.4940088987350464,
               -0.5730502605438232,
               1.0868195295333862,
               2.877233624458313,
               0.980239637196064,
               0.15030473470687866,
               -1.4775352776050568,
               -1.0636713728308678,
               -0.7771501988172531,
               -2.1695120334625244,
               0.25,
               3.942939519882202},
              1e-4);
}

TEST(OpsNorm, LpNormalizationL1) {
  OneNode t;
  t.input("x", x234());
  Node& n = t.node("LpNormalization");
  n.attrs["axis"] = int64_t(1);
  n.attrs["p"] = int64_t(1);
  expect_near(t.run()[0], {0.13333334028720856,
                           -0.3333333432674408,
                           0.8888888955116272,
                           0.5185185074806213,
                           -0.20000000298023224,
                           0.2666666805744171,
                           0.0,
                           0.3333333432674408,
                           -0.6666666865348816,
                           0.4000000059604645,
                           0.1111111119389534,
                           -0.14814814925193787,
                           0.46666666865348816,
                           -0.10000000149011612,
                           0.6153846383094788,
                           -0.4406779706478119,
                           0.20000000298023224,
                           0.5,
                           -0.3076923191547394,
                           0.016949152573943138,
                           0.3333333432674408,
                           -0.4000000059604645,
                           0.07692307978868484,
                           0.5423728823661804});
}

TEST(OpsNorm, MeanVarianceNormalization) {
  OneNode t;
  t.input("x", x234());
  t.node("MeanVarianceNormalization").attrs["axes"] = std::vector<int64_t>{0, 2};
  expect_near(
      t.run()[0],
      {-0.10198621451854706, -0.9178759455680847, 0.5973478555679321,   1.2966818809509277,
       -1.0054144859313965,  0.35128939151763916, -0.42396998405456543, 1.3203636407852173,
       -1.392974853515625,   0.644748330116272,   0.007959856651723385, -0.6288286447525024,
       0.48079216480255127,  -0.5682089328765869, 1.063570499420166,    -1.8503212928771973,
       0.1574745625257492,   1.5141785144805908,  -1.5868589878082275,  -0.32706254720687866,
       0.5173906683921814,   -1.1382594108581543, 0.07163870334625244,  1.9183253049850464},
      1e-4);
}

TEST(OpsNorm, MvnDefaultAxesNeedRank4) {
  OneNode t;
  t.input("x", x234());
  t.node("MeanVarianceNormalization");
  std::string e = error_of(t);
  EXPECT_NE(e.find("out of range for rank 3"), std::string::npos) << e;
}

TEST(OpsNorm, BadAxisNamesRank) {
  OneNode t;
  t.input("x", Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  t.node("Softmax").attrs["axis"] = int64_t(2);
  std::string e = error_of(t);
  EXPECT_NE(e.find("axis 2 is out of range for rank 2"), std::string::npos) << e;
  EXPECT_NE(e.find("Softmax"), std::string::npos) << e;
  EXPECT_NE(e.find("[2, 3]"), std::string::npos) << e;
}

// --- reductions ---

TEST(OpsReduce, ReduceMeanKeepdimsAttrVsInput) {
  std::vector<double> want = {0.71875, 0.546875, 0.234375};
  for (int64_t keep : {0, 1}) {
    OneNode a;  // axes as attribute (opset < 18)
    a.g.opset = 13;
    a.input("x", x234());
    Node& na = a.node("ReduceMean");
    na.attrs["axes"] = std::vector<int64_t>{0, -1};
    na.attrs["keepdims"] = keep;
    Tensor ya = a.run()[0];

    OneNode b;  // axes as input (opset >= 18)
    b.input("x", x234());
    b.constant("axes", i64s({0, 2}));
    b.node("ReduceMean").attrs["keepdims"] = keep;
    Tensor yb = b.run()[0];

    Shape s = keep ? Shape{1, 3, 1} : Shape{3};
    EXPECT_EQ(ya.shape(), s);
    EXPECT_EQ(yb.shape(), s);
    expect_near(ya, want);
    expect_near(yb, want);
  }
}

TEST(OpsReduce, ReduceSumDefaultAndNoop) {
  OneNode t;
  t.input("x", x234());
  t.node("ReduceSum").attrs["keepdims"] = int64_t(0);
  Tensor y = t.run()[0];
  EXPECT_EQ(y.shape(), Shape{});
  expect_near(y, {12.0});

  OneNode n;
  n.input("x", x234());
  n.constant("axes", Tensor::from_vector<int64_t>({0}, {}));
  n.node("ReduceSum").attrs["noop_with_empty_axes"] = int64_t(1);
  Tensor z = n.run()[0];
  EXPECT_EQ(z.shape(), (Shape{2, 3, 4}));
  expect_near(z, std::vector<double>(kX.begin(), kX.end()));
}

TEST(OpsReduce, ReduceSumSquareNoopSquares) {
  // numpy's axis=() semantics, as in the ONNX reference: the elementwise part still applies.
  OneNode n;
  n.input("x", Tensor::from_vector<float>({2}, {-3, 2}));
  n.node("ReduceSumSquare").attrs["noop_with_empty_axes"] = int64_t(1);
  expect_near(n.run()[0], {9, 4});
}

TEST(OpsReduce, EmptySetConventions) {
  auto run_empty = [](const char* op) {
    OneNode t;
    t.input("x", Tensor::empty(DType::f32, {2, 0, 4}));
    t.constant("axes", i64s({1}));
    t.node(op);
    Tensor y = t.run()[0];
    EXPECT_EQ(y.shape(), (Shape{2, 1, 4})) << op;
    return y.at_double(0);
  };
  double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(run_empty("ReduceSum"), 0);
  EXPECT_EQ(run_empty("ReduceProd"), 1);
  EXPECT_EQ(run_empty("ReduceMax"), -inf);
  EXPECT_EQ(run_empty("ReduceMin"), inf);
  EXPECT_EQ(run_empty("ReduceL1"), 0);
  EXPECT_EQ(run_empty("ReduceL2"), 0);
  EXPECT_EQ(run_empty("ReduceSumSquare"), 0);
  EXPECT_EQ(run_empty("ReduceLogSum"), -inf);
  EXPECT_EQ(run_empty("ReduceLogSumExp"), -inf);
  EXPECT_TRUE(std::isnan(run_empty("ReduceMean")));
}

TEST(OpsReduce, IntMaxEmptySetIsTypeMinimum) {
  OneNode t;
  t.input("x", Tensor::empty(DType::i32, {0, 2}));
  t.constant("axes", i64s({0}));
  t.node("ReduceMax");
  EXPECT_EQ(t.run()[0].to_int64_vector(),
            (std::vector<int64_t>{std::numeric_limits<int32_t>::lowest(),
                                  std::numeric_limits<int32_t>::lowest()}));
}

TEST(OpsReduce, BoolMaxMin) {
  OneNode t;
  t.input("x", Tensor::from_vector<bool>({2, 2}, {true, false, false, false}));
  t.constant("axes", i64s({1}));
  t.node("ReduceMax").attrs["keepdims"] = int64_t(0);
  EXPECT_EQ(t.run()[0].to_int64_vector(), (std::vector<int64_t>{1, 0}));
}

TEST(OpsReduce, LogSumExpL2Prod) {
  {
    OneNode t;
    t.input("x", x234());
    t.constant("axes", i64s({1}));
    t.node("ReduceLogSumExp").attrs["keepdims"] = int64_t(0);
    expect_near(t.run()[0],
                {0.7898985132521532, 2.0130981521677795, 2.269346926293858, 3.760527034253488,
                 2.4302696706417346, 2.5591138952728034, 3.0802415373571375, 4.021237393862022});
  }
  {
    OneNode t;
    t.input("x", x234());
    t.node("ReduceL2");
    expect_near(t.run()[0], {9.375833296299588});
  }
  {
    OneNode t;
    t.input("x", x234());
    t.constant("axes", i64s({2}));
    t.node("ReduceProd");
    expect_near(t.run()[0], {-4.375, -0.0, 0.9375, 8.53125, -0.3515625, -3.75});
  }
  {  // large inputs must not overflow
    OneNode t;
    t.input("x", Tensor::from_vector<float>({2}, {1000, 1000}));
    t.node("ReduceLogSumExp");
    expect_near(t.run()[0], {1000.6931471805599});
  }
}

TEST(OpsReduce, IntSumIsExact) {
  OneNode t;
  t.input("x", Tensor::from_vector<int64_t>({3}, {int64_t(1) << 60, 1, 2}));
  t.node("ReduceSum");
  EXPECT_EQ(t.run()[0].to_int64_vector(), (std::vector<int64_t>{(int64_t(1) << 60) + 3}));
}

TEST(OpsReduce, BadAxesAreClearErrors) {
  OneNode t;
  t.input("x", x234());
  t.constant("axes", i64s({5}));
  t.node("ReduceSum");
  std::string e = error_of(t);
  EXPECT_NE(e.find("axis 5 is out of range for rank 3"), std::string::npos) << e;
  EXPECT_NE(e.find("ReduceSum"), std::string::npos) << e;

  OneNode d;
  d.input("x", x234());
  d.constant("axes", i64s({1, -2}));
  d.node("ReduceMax");
  EXPECT_NE(error_of(d).find("appears twice"), std::string::npos);

  OneNode r;  // axes only known at run time: shape inference cannot proceed
  r.input("x", x234());
  r.input("axes", i64s({1}));
  r.node("ReduceSum");
  EXPECT_NE(error_of(r).find("must be a constant"), std::string::npos);
}

TEST(OpsReduce, ArgMaxSelectLastIndex) {
  Tensor x = Tensor::from_vector<float>({2, 4}, {1, 3, 3, 0, 2, 2, -1, 2});
  for (int64_t last : {0, 1}) {
    OneNode t;
    t.input("x", x);
    Node& n = t.node("ArgMax");
    n.attrs["axis"] = int64_t(1);
    n.attrs["select_last_index"] = last;
    Tensor y = t.run()[0];
    EXPECT_EQ(y.dtype(), DType::i64);
    EXPECT_EQ(y.shape(), (Shape{2, 1}));
    EXPECT_EQ(y.to_int64_vector(),
              last ? (std::vector<int64_t>{2, 3}) : (std::vector<int64_t>{1, 0}));
  }
  OneNode t;
  t.input("x", x);
  Node& n = t.node("ArgMin");
  n.attrs["axis"] = int64_t(0);
  n.attrs["keepdims"] = int64_t(0);
  Tensor y = t.run()[0];
  EXPECT_EQ(y.shape(), (Shape{4}));
  EXPECT_EQ(y.to_int64_vector(), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(OpsReduce, CumSumExclusiveReverse) {
  OneNode t;
  t.input("x", x234());
  t.constant("axis", Tensor::scalar<int64_t>(1));
  Node& n = t.node("CumSum");
  n.attrs["exclusive"] = int64_t(1);
  n.attrs["reverse"] = int64_t(1);
  expect_near(t.run()[0], {-3.25, 2.5, 0.25,   1.25,  -2.5, 1.5,  0.25,  -1.0, 0.0, 0.0, 0.0, 0.0,
                           2.0,   0.5, -1.125, 4.125, 1.25, -2.0, 0.375, 4.0,  0.0, 0.0, 0.0, 0.0});
}

TEST(OpsReduce, CumSumInt) {
  OneNode t;
  t.input("x", Tensor::from_vector<int32_t>({5}, {1, 2, 3, 4, 5}));
  t.constant("axis", Tensor::scalar<int32_t>(0));
  t.node("CumSum");
  EXPECT_EQ(t.run()[0].to_int64_vector(), (std::vector<int64_t>{1, 3, 6, 10, 15}));
}

TEST(OpsReduce, TopKTiesKeepLowerIndex) {
  OneNode t;
  t.input("x", Tensor::from_vector<float>({2, 4}, {0, 1, 1, 2, 5, 5, 5, 1}));
  t.constant("k", i64s({3}));
  t.node("TopK", 2);
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  expect_near(out[0], {2, 1, 1, 5, 5, 5});
  EXPECT_EQ(out[1].to_int64_vector(), (std::vector<int64_t>{3, 1, 2, 0, 1, 2}));

  OneNode s;
  s.input("x", Tensor::from_vector<int64_t>({4}, {3, 1, 1, 2}));
  s.constant("k", i64s({2}));
  s.node("TopK", 2).attrs["largest"] = int64_t(0);
  auto o2 = s.run();
  EXPECT_EQ(o2[0].to_int64_vector(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(o2[1].to_int64_vector(), (std::vector<int64_t>{1, 2}));

  OneNode bad;
  bad.input("x", Tensor::from_vector<float>({2}, {1, 2}));
  bad.constant("k", i64s({3}));
  bad.node("TopK", 2);
  EXPECT_NE(error_of(bad).find("K = 3"), std::string::npos);
}

TEST(OpsReduce, CostAndClass) {
  OneNode t;
  t.input("x", x234());
  t.node("Softmax");
  t.run();
  const Node& n = t.g.nodes[0];
  Cost c = op_cost(t.g, n);
  EXPECT_EQ(n.def->cls, OpClass::normalization);
  EXPECT_EQ(c.flops, 4 * 24);
  EXPECT_EQ(c.special.at("exp"), 24);
  EXPECT_EQ(c.bytes, 2 * 24 * 4);
  for (const char* op : {"ReduceSum", "ArgMax", "LayerNormalization", "CumSum", "TopK"})
    EXPECT_EQ(OpTable::get().find("", op)->cls, OpClass::normalization) << op;
}
