// Elementwise op family: reference kernels against the ONNX reference evaluator, broadcasting,
// size-0 and scalar shapes, integer semantics, error messages, costs and pointwise expansion.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/codegen_cpp.hpp"
#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"

using namespace brrr;

namespace {

struct In {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<double> values;
  bool present = false;  // false: an omitted optional input
};

Tensor make(const In& in) {
  return Tensor::from_vector<double>(in.shape, in.values).cast(in.dtype);
}

// Builds a one-node graph over `inputs` (all graph inputs), infers shapes and runs the reference.
std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                           std::map<std::string, AttrValue> attrs = {}, int num_outputs = 1,
                           std::vector<bool> constant = {}) {
  Graph g;
  g.opset = 21;
  Node n;
  n.op = op;
  n.name = "n0";
  n.attrs = std::move(attrs);
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      n.inputs.push_back(-1);
      continue;
    }
    int id = g.add_value("x" + std::to_string(i));
    Value& v = g.value(id);
    v.dtype = inputs[i].dtype();
    v.shape = inputs[i].shape();
    if (i < constant.size() && constant[i]) {
      v.constant = inputs[i];
      v.typed = true;
    } else {
      g.inputs.push_back(id);
      feeds["x" + std::to_string(i)] = inputs[i];
    }
    n.inputs.push_back(id);
  }
  for (int o = 0; o < num_outputs; ++o) {
    int id = g.add_value("y" + std::to_string(o));
    n.outputs.push_back(id);
    g.outputs.push_back(id);
  }
  g.nodes.push_back(std::move(n));
  infer_shapes(g, {});
  return run_reference(g, feeds);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

struct Case {
  const char* op;
  std::map<std::string, AttrValue> attrs;
  std::vector<In> inputs;
  DType out_dtype;
  Shape out_shape;
  std::vector<double> expect;
};

// Expected outputs come from onnx.reference.ReferenceEvaluator (onnx 1.23.2, opset 21) on the
// same inputs; float results were computed by numpy in the input's precision.
const std::vector<Case>& onnx_cases() {
  // clang-format off
  static const std::vector<Case> cases = {
    {"Neg", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {3.0, 1.5, 0.4000000059604645, -0.0, -0.30000001192092896, -1.5, -3.0}},
    {"Abs", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {3.0, 1.5, 0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}},
    {"Reciprocal", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.3333333432674408, -0.6666666865348816, -2.5, INFINITY, 3.3333332538604736, 0.6666666865348816, 0.3333333432674408}},
    {"Exp", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {0.049787066876888275, 0.22313015162944794, 0.6703200340270996, 1.0, 1.3498587608337402, 4.481688976287842, 20.08553695678711}},
    {"Tanh", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.9950547814369202, -0.9051482081413269, -0.3799489736557007, 0.0, 0.29131263494491577, 0.9051482081413269, 0.9950547814369202}},
    {"Sigmoid", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {0.04742587357759476, 0.18242552876472473, 0.40131232142448425, 0.5, 0.5744425058364868, 0.8175745010375977, 0.9525741338729858}},
    {"Erf", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.9999778866767883, -0.9661051630973816, -0.42839235067367554, 0.0, 0.3286267817020416, 0.9661051630973816, 0.9999778866767883}},
    {"Cos", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.9899924993515015, 0.07073719799518585, 0.9210609793663025, 1.0, 0.9553365111351013, 0.07073719799518585, -0.9899924993515015}},
    {"Sin", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.14112000167369843, -0.9974949955940247, -0.3894183337688446, 0.0, 0.29552021622657776, 0.9974949955940247, 0.14112000167369843}},
    {"Tan", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {0.14254653453826904, -14.101420402526855, -0.4227932393550873, 0.0, 0.30933627486228943, 14.101420402526855, -0.14254653453826904}},
    {"Atan", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-1.249045729637146, -0.9827937483787537, -0.38050636649131775, 0.0, 0.29145681858062744, 0.9827937483787537, 1.249045729637146}},
    {"Sinh", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-10.017874717712402, -2.129279375076294, -0.4107523262500763, 0.0, 0.30452030897140503, 2.129279375076294, 10.017874717712402}},
    {"Cosh", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {10.06766128540039, 2.352409601211548, 1.081072449684143, 1.0, 1.0453383922576904, 2.352409601211548, 10.06766128540039}},
    {"Floor", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-3.0, -2.0, -1.0, 0.0, 0.0, 1.0, 3.0}},
    {"Ceil", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-3.0, -1.0, -0.0, 0.0, 1.0, 2.0, 3.0}},
    {"Sign", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-1.0, -1.0, -1.0, 0.0, 1.0, 1.0, 1.0}},
    {"Relu", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {0.0, 0.0, 0.0, 0.0, 0.30000001192092896, 1.5, 3.0}},
    {"HardSwish", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.0, -0.375, -0.1733333319425583, 0.0, 0.16500000655651093, 1.125, 3.0}},
    {"Softplus", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {0.04858735203742981, 0.20141328871250153, 0.5130152702331543, 0.6931471824645996, 0.8543552756309509, 1.7014132738113403, 3.0485873222351074}},
    {"Softsign", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.75, -0.6000000238418579, -0.2857142984867096, 0.0, 0.23076924681663513, 0.6000000238418579, 0.75}},
    {"Mish", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.14564746618270874, -0.2980997562408447, -0.18891648948192596, 0.0, 0.20800140500068665, 1.4033782482147217, 2.98653507232666}},
    {"Selu", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-1.6705687046051025, -1.3658143281936646, -0.5796101093292236, 0.0, 0.3152103126049042, 1.5760514736175537, 3.1521029472351074}},
    {"HardSigmoid", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {0.0, 0.19999998807907104, 0.41999998688697815, 0.5, 0.5600000023841858, 0.800000011920929, 1.0}},
    {"LeakyRelu", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.029999999329447746, -0.014999999664723873, -0.004000000189989805, 0.0, 0.30000001192092896, 1.5, 3.0}},
    {"Elu", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.9502128958702087, -0.7768698334693909, -0.3296799659729004, 0.0, 0.30000001192092896, 1.5, 3.0}},
    {"ThresholdedRelu", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {0.0, 0.0, 0.0, 0.0, 0.0, 1.5, 3.0}},
    {"Sqrt", {}, {{DType::f32, {5}, {0.009999999776482582, 0.5, 1.0, 2.5, 100.0}, true}}, DType::f32, {5}, {0.10000000149011612, 0.7071067690849304, 1.0, 1.5811388492584229, 10.0}},
    {"Log", {}, {{DType::f32, {5}, {0.009999999776482582, 0.5, 1.0, 2.5, 100.0}, true}}, DType::f32, {5}, {-4.605170249938965, -0.6931471824645996, 0.0, 0.9162907600402832, 4.605170249938965}},
    {"Acos", {}, {{DType::f32, {6}, {-1.0, -0.6000000238418579, 0.0, 0.20000000298023224, 0.8999999761581421, 1.0}, true}}, DType::f32, {6}, {3.1415927410125732, 2.2142975330352783, 1.5707963705062866, 1.3694384098052979, 0.4510268568992615, 0.0}},
    {"Asin", {}, {{DType::f32, {6}, {-1.0, -0.6000000238418579, 0.0, 0.20000000298023224, 0.8999999761581421, 1.0}, true}}, DType::f32, {6}, {-1.5707963705062866, -0.6435011625289917, 0.0, 0.20135793089866638, 1.11976957321167, 1.5707963705062866}},
    {"Round", {}, {{DType::f32, {9}, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4000000953674316, 2.5999999046325684, -2.5999999046325684}, true}}, DType::f32, {9}, {-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 2.0, 3.0, -3.0}},
    {"LeakyRelu", {{"alpha", AttrValue(0.2f)}}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.6000000238418579, -0.30000001192092896, -0.08000000566244125, 0.0, 0.30000001192092896, 1.5, 3.0}},
    {"Elu", {{"alpha", AttrValue(2.0f)}}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-1.9004257917404175, -1.5537396669387817, -0.6593599319458008, 0.0, 0.30000001192092896, 1.5, 3.0}},
    {"Celu", {{"alpha", AttrValue(1.5f)}}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-1.2969970703125, -0.9481807947158813, -0.35110750794410706, 0.0, 0.30000001192092896, 1.5, 3.0}},
    {"Gelu", {}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.0040496885776519775, -0.1002107709646225, -0.13783131539821625, 0.0, 0.1853734403848648, 1.3997893333435059, 2.995950222015381}},
    {"Gelu", {{"approximate", AttrValue(std::string("tanh"))}}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-0.003637343645095825, -0.10042843222618103, -0.13783882558345795, 0.0, 0.18537092208862305, 1.3995715379714966, 2.9963626861572266}},
    {"HardSigmoid", {{"alpha", AttrValue(0.3f)}, {"beta", AttrValue(0.4f)}}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {0.0, 0.0, 0.2800000011920929, 0.4000000059604645, 0.49000000953674316, 0.8500000238418579, 1.0}},
    {"ThresholdedRelu", {{"alpha", AttrValue(0.2f)}}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {0.0, 0.0, 0.0, 0.0, 0.30000001192092896, 1.5, 3.0}},
    {"Selu", {{"alpha", AttrValue(2.0f)}, {"gamma", AttrValue(3.0f)}}, {{DType::f32, {7}, {-3.0, -1.5, -0.4000000059604645, 0.0, 0.30000001192092896, 1.5, 3.0}, true}}, DType::f32, {7}, {-5.701277256011963, -4.661219120025635, -1.9780797958374023, 0.0, 0.9000000357627869, 4.5, 9.0}},
    {"Add", {}, {{DType::f32, {2, 3}, {1.0, -2.0, 3.0, 4.5, -5.0, 6.0}, true}, {DType::f32, {3}, {2.0, -4.0, 0.5}, true}}, DType::f32, {2, 3}, {3.0, -6.0, 3.5, 6.5, -9.0, 6.5}},
    {"Sub", {}, {{DType::f32, {2, 3}, {1.0, -2.0, 3.0, 4.5, -5.0, 6.0}, true}, {DType::f32, {3}, {2.0, -4.0, 0.5}, true}}, DType::f32, {2, 3}, {-1.0, 2.0, 2.5, 2.5, -1.0, 5.5}},
    {"Mul", {}, {{DType::f32, {2, 3}, {1.0, -2.0, 3.0, 4.5, -5.0, 6.0}, true}, {DType::f32, {3}, {2.0, -4.0, 0.5}, true}}, DType::f32, {2, 3}, {2.0, 8.0, 1.5, 9.0, 20.0, 3.0}},
    {"Div", {}, {{DType::f32, {2, 3}, {1.0, -2.0, 3.0, 4.5, -5.0, 6.0}, true}, {DType::f32, {3}, {2.0, -4.0, 0.5}, true}}, DType::f32, {2, 3}, {0.5, 0.5, 6.0, 2.25, 1.25, 12.0}},
    {"Pow", {}, {{DType::f32, {2, 3}, {2.0, 3.0, 0.5, 4.0, -2.0, 9.0}, true}, {DType::f32, {3}, {3.0, -1.0, 2.0}, true}}, DType::f32, {2, 3}, {8.0, 0.3333333432674408, 0.25, 64.0, -0.5, 81.0}},
    {"Pow", {}, {{DType::f32, {4}, {2.0, -3.0, 0.5, 4.0}, true}, {DType::i64, {4}, {3.0, 3.0, 2.0, -1.0}, true}}, DType::f32, {4}, {8.0, -27.0, 0.25, 0.25}},
    {"Pow", {}, {{DType::i64, {4}, {2.0, -3.0, 5.0, 4.0}, true}, {DType::i64, {4}, {3.0, 3.0, 0.0, 2.0}, true}}, DType::i64, {4}, {8.0, -27.0, 1.0, 16.0}},
    {"Pow", {}, {{DType::i32, {4}, {2.0, 9.0, 5.0, 4.0}, true}, {DType::f32, {4}, {0.5, 0.5, 2.0, 1.5}, true}}, DType::i32, {4}, {1.0, 3.0, 25.0, 8.0}},
    {"Mod", {{"fmod", AttrValue(int64_t(1))}}, {{DType::f32, {5}, {5.5, -5.5, 5.5, -5.5, 4.0}, true}, {DType::f32, {5}, {2.0, 2.0, -2.0, -2.0, 3.0}, true}}, DType::f32, {5}, {1.5, -1.5, 1.5, -1.5, 1.0}},
    {"Mod", {}, {{DType::i64, {6}, {7.0, -7.0, 7.0, -7.0, 6.0, -6.0}, true}, {DType::i64, {6}, {3.0, 3.0, -3.0, -3.0, 3.0, -4.0}, true}}, DType::i64, {6}, {1.0, 2.0, -2.0, -1.0, 0.0, -2.0}},
    {"Mod", {{"fmod", AttrValue(int64_t(1))}}, {{DType::i64, {6}, {7.0, -7.0, 7.0, -7.0, 6.0, -6.0}, true}, {DType::i64, {6}, {3.0, 3.0, -3.0, -3.0, 3.0, -4.0}, true}}, DType::i64, {6}, {1.0, -1.0, 1.0, -1.0, 0.0, -2.0}},
    {"Mod", {}, {{DType::i32, {6}, {7.0, -7.0, 7.0, -7.0, 6.0, -6.0}, true}, {DType::i32, {6}, {3.0, 3.0, -3.0, -3.0, 3.0, -4.0}, true}}, DType::i32, {6}, {1.0, 2.0, -2.0, -1.0, 0.0, -2.0}},
    {"Div", {}, {{DType::i32, {5}, {7.0, -7.0, 7.0, -7.0, 1.0}, true}, {DType::i32, {5}, {2.0, 2.0, -2.0, -2.0, 3.0}, true}}, DType::i32, {5}, {3.0, -3.0, -3.0, 3.0, 0.0}},
    {"Max", {}, {{DType::f32, {3}, {1.0, NAN, 3.0}, true}, {DType::f32, {2, 1}, {2.0, 0.0}, true}, {DType::f32, {2, 3}, {0.0, 5.0, -1.0, 9.0, 0.0, NAN}, true}}, DType::f32, {2, 3}, {2.0, NAN, 3.0, 9.0, NAN, NAN}},
    {"Min", {}, {{DType::f32, {3}, {1.0, NAN, 3.0}, true}, {DType::f32, {2, 1}, {2.0, 0.0}, true}, {DType::f32, {2, 3}, {0.0, 5.0, -1.0, 9.0, 0.0, NAN}, true}}, DType::f32, {2, 3}, {0.0, NAN, -1.0, 0.0, NAN, NAN}},
    {"Sum", {}, {{DType::f32, {3}, {1.0, 2.0, 3.0}, true}, {DType::f32, {2, 1}, {10.0, 20.0}, true}, {DType::f32, {2, 3}, {0.5, 0.25, 1.0, 2.0, 3.0, 4.0}, true}}, DType::f32, {2, 3}, {11.5, 12.25, 14.0, 23.0, 25.0, 27.0}},
    {"Mean", {}, {{DType::f32, {2, 3}, {0.5, 0.25, 1.0, 2.0, 3.0, 4.0}, true}, {DType::f32, {3}, {1.0, 2.0, 3.0}, true}, {DType::f32, {2, 1}, {10.0, 20.0}, true}}, DType::f32, {2, 3}, {3.8333332538604736, 4.083333492279053, 4.666666507720947, 7.666666507720947, 8.333333015441895, 9.0}},
    {"Max", {}, {{DType::i32, {3}, {1.0, -2.0, 3.0}, true}, {DType::i32, {2, 1}, {0.0, 5.0}, true}}, DType::i32, {2, 3}, {1.0, 0.0, 3.0, 5.0, 5.0, 5.0}},
    {"Min", {}, {{DType::i64, {1, 3}, {1.0, -2.0, 3.0}, true}}, DType::i64, {1, 3}, {1.0, -2.0, 3.0}},
    {"PRelu", {}, {{DType::f32, {2, 3}, {1.0, -2.0, 3.0, 4.5, -5.0, 6.0}, true}, {DType::f32, {3}, {0.10000000149011612, 0.20000000298023224, 0.30000001192092896}, true}}, DType::f32, {2, 3}, {1.0, -0.4000000059604645, 3.0, 4.5, -1.0, 6.0}},
    {"PRelu", {}, {{DType::f32, {2, 2}, {-1.0, 2.0, -3.0, 4.0}, true}, {DType::f32, {2, 1}, {0.5, 2.0}, true}}, DType::f32, {2, 2}, {-0.5, 2.0, -6.0, 4.0}},
    {"Clip", {}, {{DType::f32, {7}, {-3.0, -1.0, 0.0, NAN, 1.0, 5.0, 7.0}, true}, {DType::f32, {}, {-1.0}, true}, {DType::f32, {}, {2.0}, true}}, DType::f32, {7}, {-1.0, -1.0, 0.0, NAN, 1.0, 2.0, 2.0}},
    {"Clip", {}, {{DType::f32, {7}, {-3.0, -1.0, 0.0, NAN, 1.0, 5.0, 7.0}, true}, {DType::f32, {}, {0.0}, true}}, DType::f32, {7}, {0.0, 0.0, 0.0, NAN, 1.0, 5.0, 7.0}},
    {"Clip", {}, {{DType::f32, {7}, {-3.0, -1.0, 0.0, NAN, 1.0, 5.0, 7.0}, true}, {}, {DType::f32, {}, {1.0}, true}}, DType::f32, {7}, {-3.0, -1.0, 0.0, NAN, 1.0, 1.0, 1.0}},
    {"Clip", {}, {{DType::f32, {7}, {-3.0, -1.0, 0.0, NAN, 1.0, 5.0, 7.0}, true}, {DType::f32, {}, {3.0}, true}, {DType::f32, {}, {1.0}, true}}, DType::f32, {7}, {1.0, 1.0, 1.0, NAN, 1.0, 1.0, 1.0}},
    {"Clip", {}, {{DType::i32, {4}, {-5.0, 0.0, 5.0, 100.0}, true}, {DType::i32, {}, {-2.0}, true}, {DType::i32, {}, {50.0}, true}}, DType::i32, {4}, {-2.0, 0.0, 5.0, 50.0}},
    {"Clip", {{"min", AttrValue(-0.5f)}, {"max", AttrValue(0.5f)}}, {{DType::f32, {7}, {-3.0, -1.0, 0.0, NAN, 1.0, 5.0, 7.0}, true}}, DType::f32, {7}, {-0.5, -0.5, 0.0, NAN, 0.5, 0.5, 0.5}},
    {"Equal", {}, {{DType::f32, {2, 3}, {1.0, NAN, 3.0, 4.0, 5.0, 6.0}, true}, {DType::f32, {3}, {1.0, NAN, 4.0}, true}}, DType::boolean, {2, 3}, {1.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
    {"Less", {}, {{DType::f32, {2, 3}, {1.0, NAN, 3.0, 4.0, 5.0, 6.0}, true}, {DType::f32, {3}, {1.0, NAN, 4.0}, true}}, DType::boolean, {2, 3}, {0.0, 0.0, 1.0, 0.0, 0.0, 0.0}},
    {"LessOrEqual", {}, {{DType::f32, {2, 3}, {1.0, NAN, 3.0, 4.0, 5.0, 6.0}, true}, {DType::f32, {3}, {1.0, NAN, 4.0}, true}}, DType::boolean, {2, 3}, {1.0, 0.0, 1.0, 0.0, 0.0, 0.0}},
    {"Greater", {}, {{DType::f32, {2, 3}, {1.0, NAN, 3.0, 4.0, 5.0, 6.0}, true}, {DType::f32, {3}, {1.0, NAN, 4.0}, true}}, DType::boolean, {2, 3}, {0.0, 0.0, 0.0, 1.0, 0.0, 1.0}},
    {"GreaterOrEqual", {}, {{DType::f32, {2, 3}, {1.0, NAN, 3.0, 4.0, 5.0, 6.0}, true}, {DType::f32, {3}, {1.0, NAN, 4.0}, true}}, DType::boolean, {2, 3}, {1.0, 0.0, 0.0, 1.0, 0.0, 1.0}},
    {"Equal", {}, {{DType::i64, {3}, {1.0, 2.0, 3.0}, true}, {DType::i64, {2, 1}, {3.0, 2.0}, true}}, DType::boolean, {2, 3}, {0.0, 0.0, 1.0, 0.0, 1.0, 0.0}},
    {"And", {}, {{DType::boolean, {2, 2}, {1.0, 0.0, 1.0, 1.0}, true}, {DType::boolean, {2}, {1.0, 0.0}, true}}, DType::boolean, {2, 2}, {1.0, 0.0, 1.0, 0.0}},
    {"Or", {}, {{DType::boolean, {2, 2}, {1.0, 0.0, 1.0, 1.0}, true}, {DType::boolean, {2}, {1.0, 0.0}, true}}, DType::boolean, {2, 2}, {1.0, 0.0, 1.0, 1.0}},
    {"Xor", {}, {{DType::boolean, {2, 2}, {1.0, 0.0, 1.0, 1.0}, true}, {DType::boolean, {2}, {1.0, 0.0}, true}}, DType::boolean, {2, 2}, {0.0, 0.0, 0.0, 1.0}},
    {"Not", {}, {{DType::boolean, {2, 2}, {1.0, 0.0, 1.0, 1.0}, true}}, DType::boolean, {2, 2}, {0.0, 1.0, 0.0, 0.0}},
    {"Where", {}, {{DType::boolean, {2, 1}, {1.0, 0.0}, true}, {DType::f32, {3}, {1.0, 2.0, 3.0}, true}, {DType::f32, {}, {-1.0}, true}}, DType::f32, {2, 3}, {1.0, 2.0, 3.0, -1.0, -1.0, -1.0}},
    {"IsNaN", {}, {{DType::f32, {4}, {1.0, NAN, INFINITY, -INFINITY}, true}}, DType::boolean, {4}, {0.0, 1.0, 0.0, 0.0}},
    {"IsInf", {}, {{DType::f32, {4}, {1.0, NAN, INFINITY, -INFINITY}, true}}, DType::boolean, {4}, {0.0, 0.0, 1.0, 1.0}},
    {"IsInf", {{"detect_negative", AttrValue(int64_t(0))}}, {{DType::f32, {4}, {1.0, NAN, INFINITY, -INFINITY}, true}}, DType::boolean, {4}, {0.0, 0.0, 1.0, 0.0}},
    {"IsInf", {{"detect_positive", AttrValue(int64_t(0))}}, {{DType::f32, {4}, {1.0, NAN, INFINITY, -INFINITY}, true}}, DType::boolean, {4}, {0.0, 0.0, 0.0, 1.0}},
    {"Abs", {}, {{DType::i8, {4}, {-128.0, -5.0, 0.0, 127.0}, true}}, DType::i8, {4}, {-128.0, 5.0, 0.0, 127.0}},
    {"Neg", {}, {{DType::i32, {3}, {-5.0, 0.0, 7.0}, true}}, DType::i32, {3}, {5.0, 0.0, -7.0}},
    {"Relu", {}, {{DType::i64, {3}, {-5.0, 0.0, 7.0}, true}}, DType::i64, {3}, {0.0, 0.0, 7.0}},
    {"Sign", {}, {{DType::i64, {3}, {-5.0, 0.0, 7.0}, true}}, DType::i64, {3}, {-1.0, 0.0, 1.0}},
    {"Cast", {{"to", AttrValue(int64_t(6))}}, {{DType::f32, {4}, {1.7000000476837158, -1.7000000476837158, 0.0, 2.5}, true}}, DType::i32, {4}, {1.0, -1.0, 0.0, 2.0}},
    {"Cast", {{"to", AttrValue(int64_t(9))}}, {{DType::f32, {4}, {1.7000000476837158, -1.7000000476837158, 0.0, 2.5}, true}}, DType::boolean, {4}, {1.0, 1.0, 0.0, 1.0}},
    {"Cast", {{"to", AttrValue(int64_t(1))}}, {{DType::i64, {3}, {3.0, -2.0, 0.0}, true}}, DType::f32, {3}, {3.0, -2.0, 0.0}},
    {"Cast", {{"to", AttrValue(int64_t(10))}}, {{DType::f32, {3}, {0.10000000149011612, 1.0009765625, 65504.0}, true}}, DType::f16, {3}, {0.0999755859375, 1.0009765625, 65504.0}},
    {"CastLike", {}, {{DType::f32, {2}, {1.5, -2.5}, true}, {DType::i64, {1}, {0.0}, true}}, DType::i64, {2}, {1.0, -2.0}},
    {"Identity", {}, {{DType::f32, {2, 3}, {1.0, -2.0, 3.0, 4.5, -5.0, 6.0}, true}}, DType::f32, {2, 3}, {1.0, -2.0, 3.0, 4.5, -5.0, 6.0}},
  };
  // clang-format on
  return cases;
}

}  // namespace

TEST(OpsElementwise, MatchesOnnxReference) {
  for (const Case& c : onnx_cases()) {
    std::vector<Tensor> ins;
    for (const In& in : c.inputs) ins.push_back(in.present ? make(in) : Tensor());
    std::vector<Tensor> out = run_op(c.op, ins, c.attrs);
    std::string where = fmt::format("op {} case with {} inputs", c.op, c.inputs.size());
    ASSERT_EQ(out[0].dtype(), c.out_dtype) << where;
    ASSERT_EQ(out[0].shape(), c.out_shape) << where;
    ASSERT_EQ(size_t(out[0].numel()), c.expect.size()) << where;
    bool low = c.out_dtype == DType::f16 || c.out_dtype == DType::bf16;
    for (size_t i = 0; i < c.expect.size(); ++i) {
      double got = out[0].at_double(int64_t(i)), want = c.expect[i];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << where << " element " << i;
      } else if (is_floating(c.out_dtype) && std::isfinite(want)) {
        double tol = (low ? 1e-3 : 2e-6) * std::max(1.0, std::fabs(want));
        EXPECT_NEAR(got, want, tol) << where << " element " << i;
      } else {
        EXPECT_EQ(got, want) << where << " element " << i;
      }
    }
  }
}

TEST(OpsElementwise, BroadcastSizeZeroAndScalars) {
  Tensor empty = Tensor::empty(DType::f32, {0, 3});
  Tensor row = Tensor::from_vector<float>({3}, {1, 2, 3});
  std::vector<Tensor> y = run_op("Add", {empty, row});
  EXPECT_EQ(y[0].shape(), (Shape{0, 3}));
  // A size-1 dim broadcasts against a size-0 dim.
  y = run_op("Mul",
             {Tensor::empty(DType::f32, {2, 0}), Tensor::from_vector<float>({2, 1}, {1, 2})});
  EXPECT_EQ(y[0].shape(), (Shape{2, 0}));
  y = run_op("Where", {Tensor::empty(DType::boolean, {0}), Tensor::scalar<float>(1),
                       Tensor::scalar<float>(2)});
  EXPECT_EQ(y[0].shape(), (Shape{0}));
  y = run_op("Sigmoid", {Tensor::empty(DType::f32, {4, 0})});
  EXPECT_EQ(y[0].shape(), (Shape{4, 0}));

  y = run_op("Sub", {Tensor::scalar<float>(5), Tensor::scalar<float>(7)});
  EXPECT_EQ(y[0].shape(), Shape{});
  EXPECT_EQ(y[0].at_double(0), -2.0);
  // Scalar against a 3-d tensor; rank grows to the larger operand.
  y = run_op("Div",
             {Tensor::from_vector<float>({2, 1, 2}, {2, 4, 6, 8}), Tensor::scalar<float>(2)});
  EXPECT_EQ(y[0].shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(y[0].to_double_vector(), (std::vector<double>{1, 2, 3, 4}));
  // [2,1] x [1,3] -> [2,3] (both sides broadcast).
  y = run_op("Sub", {Tensor::from_vector<int64_t>({2, 1}, {10, 20}),
                     Tensor::from_vector<int64_t>({1, 3}, {1, 2, 3})});
  EXPECT_EQ(y[0].to_int64_vector(), (std::vector<int64_t>{9, 8, 7, 19, 18, 17}));
}

TEST(OpsElementwise, NonContiguousInputs) {
  Tensor t = Tensor::from_vector<float>({2, 3}, {0, 1, 2, 3, 4, 5}).permute({1, 0});  // [3, 2]
  std::vector<Tensor> y = run_op("Neg", {t});
  EXPECT_EQ(y[0].to_double_vector(), (std::vector<double>{-0, -3, -1, -4, -2, -5}));
  y = run_op("Add", {t, Tensor::from_vector<float>({2}, {100, 200})});
  EXPECT_EQ(y[0].to_double_vector(), (std::vector<double>{100, 203, 101, 204, 102, 205}));
}

TEST(OpsElementwise, IntegerSemantics) {
  // Div truncates toward zero like C; INT_MIN / -1 wraps instead of trapping.
  int32_t mn = std::numeric_limits<int32_t>::min();
  auto y = run_op("Div", {Tensor::from_vector<int32_t>({3}, {-7, 7, mn}),
                          Tensor::from_vector<int32_t>({3}, {2, -2, -1})});
  EXPECT_EQ(y[0].to_int64_vector(), (std::vector<int64_t>{-3, -3, mn}));
  // Overflow wraps (two's complement), no UB.
  y = run_op("Add", {Tensor::from_vector<uint8_t>({2}, {250, 1}),
                     Tensor::from_vector<uint8_t>({2}, {10, 2})});
  EXPECT_EQ(y[0].to_int64_vector(), (std::vector<int64_t>{4, 3}));
  int32_t mx = std::numeric_limits<int32_t>::max();
  y = run_op("Add", {Tensor::scalar<int32_t>(mx), Tensor::scalar<int32_t>(1)});
  EXPECT_EQ(y[0].at_int(0), mn);
  // Int Pow: negative exponents truncate 1/a^n; ±1 stay exact.
  y = run_op("Pow", {Tensor::from_vector<int64_t>({4}, {2, 1, -1, -1}),
                     Tensor::from_vector<int64_t>({4}, {-1, -5, -3, -4})});
  EXPECT_EQ(y[0].to_int64_vector(), (std::vector<int64_t>{0, 1, -1, 1}));
  // Mixed Pow: i32 base, i8 exponent.
  y = run_op("Pow", {Tensor::from_vector<int32_t>({2}, {3, -2}),
                     Tensor::from_vector<int8_t>({2}, {4, 3})});
  EXPECT_EQ(y[0].dtype(), DType::i32);
  EXPECT_EQ(y[0].to_int64_vector(), (std::vector<int64_t>{81, -8}));
  // Min / Max over int8 with broadcasting.
  y = run_op("Max", {Tensor::from_vector<int8_t>({2, 1}, {-128, 5}),
                     Tensor::from_vector<int8_t>({2}, {0, 127})});
  EXPECT_EQ(y[0].to_int64_vector(), (std::vector<int64_t>{0, 127, 5, 127}));
}

TEST(OpsElementwise, HalfPrecisionComputesInFloat) {
  Tensor x = Tensor::from_vector<float>({3}, {-1, 0, 2}).cast(DType::f16);
  auto y = run_op("Sigmoid", {x});
  EXPECT_EQ(y[0].dtype(), DType::f16);
  EXPECT_NEAR(y[0].at_double(0), 1 / (1 + std::exp(1.0)), 1e-3);
  EXPECT_EQ(y[0].at_double(1), 0.5);
  Tensor b = Tensor::from_vector<float>({3}, {1, 2, 3}).cast(DType::bf16);
  y = run_op("Sum", {b, b, b});
  EXPECT_EQ(y[0].dtype(), DType::bf16);
  EXPECT_EQ(y[0].to_double_vector(), (std::vector<double>{3, 6, 9}));
  y = run_op("Mean", {Tensor::from_vector<double>({2}, {1, 2}), Tensor::scalar<double>(4)});
  EXPECT_EQ(y[0].to_double_vector(), (std::vector<double>{2.5, 3}));
}

TEST(OpsElementwise, FloatModFmod0IsNumpyMod) {
  // Outside opsets 10..21 (which require fmod=1 for floats) but defined by newer ONNX; values
  // from numpy.mod, including the divisor-signed zero.
  auto y = run_op("Mod", {Tensor::from_vector<float>({7}, {5.5f, -5.5f, 5.5f, -5.5f, 0, -0.0f, 4}),
                          Tensor::from_vector<float>({7}, {2, 2, -2, -2, -3, 3, 2})});
  EXPECT_EQ(y[0].to_double_vector(), (std::vector<double>{1.5, 0.5, -0.5, -1.5, 0, 0, 0}));
  std::vector<bool> neg = {false, false, true, true, true, false, false};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(std::signbit(y[0].at_double(i)), neg[i]) << i;
}

TEST(OpsElementwise, ReluKeepsNaNAndRoundIsHalfToEven) {
  auto y = run_op("Relu", {Tensor::from_vector<float>({3}, {NAN, -1, 2})});
  EXPECT_TRUE(std::isnan(y[0].at_double(0)));
  EXPECT_EQ(y[0].at_double(1), 0);
  y = run_op("Round", {Tensor::from_vector<double>({4}, {0.5, 1.5, 2.5, -3.5})});
  EXPECT_EQ(y[0].to_double_vector(), (std::vector<double>{0, 2, 2, -4}));
}

TEST(OpsElementwise, DtypeMismatchIsAnError) {
  std::string msg = error_of([] {
    run_op("Add",
           {Tensor::from_vector<float>({2}, {1, 2}), Tensor::from_vector<int64_t>({2}, {1, 2})});
  });
  EXPECT_NE(msg.find("node 'n0' (Add)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("input 1 is int64"), std::string::npos) << msg;
  // Float-only ops refuse integers; logic refuses floats; Where needs a bool condition.
  msg = error_of([] { run_op("Exp", {Tensor::from_vector<int32_t>({1}, {1})}); });
  EXPECT_NE(msg.find("takes float tensors"), std::string::npos) << msg;
  msg = error_of([] { run_op("And", {Tensor::scalar<float>(1), Tensor::scalar<float>(0)}); });
  EXPECT_NE(msg.find("takes bool tensors"), std::string::npos) << msg;
  msg = error_of([] {
    run_op("Where", {Tensor::scalar<float>(1), Tensor::scalar<float>(1), Tensor::scalar<float>(2)});
  });
  EXPECT_NE(msg.find("must be bool"), std::string::npos) << msg;
  msg = error_of([] {
    run_op("Where",
           {Tensor::scalar<bool>(true), Tensor::scalar<float>(1), Tensor::scalar<double>(2)});
  });
  EXPECT_NE(msg.find("Y (input 2) is float64"), std::string::npos) << msg;
  msg = error_of([] {
    run_op("Add", {Tensor::empty(DType::f32, {2, 3}), Tensor::empty(DType::f32, {4})});
  });
  EXPECT_NE(msg.find("cannot be broadcast"), std::string::npos) << msg;
  msg = error_of([] { run_op("Mod", {Tensor::scalar<bool>(1), Tensor::scalar<bool>(0)}); });
  EXPECT_NE(msg.find("takes float or integer tensors"), std::string::npos) << msg;
  msg = error_of([] {
    run_op("Gelu", {Tensor::scalar<float>(1)}, {{"approximate", std::string("fast")}});
  });
  EXPECT_NE(msg.find("approximate"), std::string::npos) << msg;
  msg = error_of([] {
    run_op("PRelu", {Tensor::empty(DType::f32, {3}), Tensor::empty(DType::f32, {2, 3})});
  });
  EXPECT_NE(msg.find("must broadcast to the input shape"), std::string::npos) << msg;
  msg = error_of([] { run_op("Cast", {Tensor::scalar<float>(1)}, {{"to", int64_t(8)}}); });
  EXPECT_NE(msg.find("STRING"), std::string::npos) << msg;
}

TEST(OpsElementwise, IntegerDivisionByZeroIsAnError) {
  std::string msg = error_of([] {
    run_op("Div",
           {Tensor::from_vector<int32_t>({2}, {1, 2}), Tensor::from_vector<int32_t>({2}, {1, 0})});
  });
  EXPECT_NE(msg.find("node 'n0' (Div)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("division by zero"), std::string::npos) << msg;
  msg = error_of([] {
    run_op("Mod", {Tensor::from_vector<int64_t>({1}, {5}), Tensor::from_vector<int64_t>({1}, {0})});
  });
  EXPECT_NE(msg.find("Mod by zero"), std::string::npos) << msg;
  msg = error_of([] { run_op("Pow", {Tensor::scalar<int64_t>(0), Tensor::scalar<int64_t>(-1)}); });
  EXPECT_NE(msg.find("negative power"), std::string::npos) << msg;
  // Constant inputs fold at load time, so the error surfaces from infer_shapes.
  msg = error_of([] {
    run_op("Div", {Tensor::scalar<int64_t>(1), Tensor::scalar<int64_t>(0)}, {}, 1, {true, true});
  });
  EXPECT_NE(msg.find("division by zero"), std::string::npos) << msg;
  // Float division by zero is IEEE, not an error.
  auto y = run_op("Div", {Tensor::scalar<float>(1), Tensor::scalar<float>(0)});
  EXPECT_TRUE(std::isinf(y[0].at_double(0)));
}

TEST(OpsElementwise, DropoutIsIdentityAtInference) {
  Tensor x = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  auto y = run_op("Dropout", {x}, {}, 2);
  EXPECT_EQ(y[0].to_double_vector(), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(y[1].dtype(), DType::boolean);
  EXPECT_EQ(y[1].to_int64_vector(), (std::vector<int64_t>{1, 1, 1, 1}));
  // training_mode = true with ratio 0 is still the identity ...
  y = run_op("Dropout", {x, Tensor::scalar<float>(0), Tensor::scalar<bool>(true)}, {}, 1,
             {false, true, true});
  EXPECT_EQ(y[0].to_double_vector(), (std::vector<double>{1, 2, 3, 4}));
  // ... but a random (training) dropout is refused clearly, at load or at run time.
  std::string msg = error_of([&] {
    run_op("Dropout", {x, Tensor::scalar<float>(0.5f), Tensor::scalar<bool>(true)}, {}, 1,
           {false, true, true});
  });
  EXPECT_NE(msg.find("training-mode Dropout"), std::string::npos) << msg;
  msg = error_of([&] { run_op("Dropout", {x, Tensor(), Tensor::scalar<bool>(true)}); });
  EXPECT_NE(msg.find("training-mode Dropout"), std::string::npos) << msg;
}

TEST(OpsElementwise, CastRoundTripsAndCastLike) {
  auto y = run_op("Cast", {Tensor::from_vector<float>({3}, {NAN, 0, -0.5f})}, {{"to", int64_t(9)}});
  EXPECT_EQ(y[0].to_int64_vector(), (std::vector<int64_t>{1, 0, 1}));
  y = run_op("Cast", {Tensor::from_vector<bool>({2}, {true, false})}, {{"to", int64_t(1)}});
  EXPECT_EQ(y[0].to_double_vector(), (std::vector<double>{1, 0}));
  y = run_op("CastLike",
             {Tensor::from_vector<int64_t>({2}, {3, -4}), Tensor::empty(DType::bf16, {0})});
  EXPECT_EQ(y[0].dtype(), DType::bf16);
  EXPECT_EQ(y[0].to_double_vector(), (std::vector<double>{3, -4}));
  y = run_op("Identity", {Tensor::from_vector<int8_t>({2}, {-1, 1})});
  EXPECT_EQ(y[0].to_int64_vector(), (std::vector<int64_t>{-1, 1}));
}

namespace {
// Shape-infers a one-node graph with fresh f32 inputs and returns its cost.
Cost cost_of(const std::string& op, std::vector<Shape> shapes,
             std::map<std::string, AttrValue> attrs = {}) {
  Graph g;
  Node n;
  n.op = op;
  n.name = "n0";
  n.attrs = std::move(attrs);
  for (size_t i = 0; i < shapes.size(); ++i) {
    int id = g.add_value("x" + std::to_string(i));
    g.value(id).shape = shapes[i];
    g.inputs.push_back(id);
    n.inputs.push_back(id);
  }
  n.outputs.push_back(g.add_value("y"));
  g.outputs.push_back(n.outputs[0]);
  g.nodes.push_back(n);
  infer_shapes(g, {});
  return op_cost(g, g.nodes[0]);
}
}  // namespace

TEST(OpsElementwise, CostCountsFlopsAndSpecialFunctions) {
  Cost c = cost_of("Add", {{4, 5}, {5}});
  EXPECT_EQ(c.flops, 20);
  EXPECT_EQ(c.bytes, (20 + 5 + 20) * 4);
  c = cost_of("Sigmoid", {{10}});
  EXPECT_EQ(c.flops, 20);
  EXPECT_EQ(c.special.at("exp"), 10);
  c = cost_of("Gelu", {{10}});
  EXPECT_EQ(c.special.at("erf"), 10);
  EXPECT_EQ(c.flops, 40);
  c = cost_of("Gelu", {{10}}, {{"approximate", std::string("tanh")}});
  EXPECT_EQ(c.special.at("tanh"), 10);
  c = cost_of("Cos", {{3}});
  EXPECT_EQ(c.special.at("cos"), 3);
  EXPECT_EQ(c.flops, 0);
  c = cost_of("Sum", {{6}, {6}, {6}});
  EXPECT_EQ(c.flops, 12);
}

// The C form of node n's pointwise lowering, with input i rendered as inputs[i].
std::string c_form(const OpDef& d, const Node& n, const std::vector<std::string>& inputs) {
  PointwiseForm f = d.pointwise(n);
  std::vector<std::string> ops;
  for (const ScalarOperand& o : f.operands)
    ops.push_back(o.input >= 0 ? inputs.at(size_t(o.input)) : plan::imm_lit(o));
  return cpu::render_op(cpu::c_code_for_op(), f.op, ops);
}

TEST(OpsElementwise, PointwiseExpansion) {
  const OpTable& t = OpTable::get();
  Node n;
  n.op = "LeakyRelu";
  n.inputs = {0};
  EXPECT_EQ(c_form(*t.find("", "LeakyRelu"), n, {"x"}), "brrr_leaky_relu(x, 0.00999999978f)");
  n.attrs["alpha"] = -0.5f;
  EXPECT_EQ(c_form(*t.find("", "LeakyRelu"), n, {"(a + b)"}), "brrr_leaky_relu((a + b), (-0.5f))");
  Node g;
  g.op = "Gelu";
  g.inputs = {0};
  EXPECT_EQ(c_form(*t.find("", "Gelu"), g, {"x"}), "brrr_gelu_erf(x)");
  g.attrs["approximate"] = std::string("tanh");
  EXPECT_EQ(c_form(*t.find("", "Gelu"), g, {"x"}), "brrr_gelu_tanh(x)");
  Node c;
  c.op = "Clip";
  c.inputs = {0, -1, 2};
  EXPECT_EQ(c_form(*t.find("", "Clip"), c, {"x", "", "hi"}), "brrr_clip(x, NAN, hi)");
  Node c6;  // opset-6 form: bounds are attributes
  c6.op = "Clip";
  c6.inputs = {0};
  c6.attrs["min"] = 0.0f;
  c6.attrs["max"] = 6.0f;
  EXPECT_EQ(c_form(*t.find("", "Clip"), c6, {"x"}), "brrr_clip(x, 0.0f, 6.0f)");
  Node s;  // variadic: the binary op, folded by the fuser over every input
  s.op = "Max";
  s.inputs = {0, 1, 2};
  PointwiseForm mx = t.find("", "Max")->pointwise(s);
  EXPECT_EQ(mx.op, ScalarOp::Max);
  EXPECT_TRUE(mx.fold);
  EXPECT_EQ(mx.operands.size(), 3u);
  Node i;
  i.op = "IsInf";
  i.inputs = {0};
  i.attrs["detect_negative"] = int64_t(0);
  EXPECT_EQ(c_form(*t.find("", "IsInf"), i, {"x"}), "brrr_isinf(x, 1, 0)");
  EXPECT_FALSE(t.find("", "Cast")->pointwise);
}

TEST(OpsElementwise, EveryPointwiseOpExpands) {
  // Each registered elementwise op with a pointwise form renders with default attributes, and
  // every scalar op has a C form.
  for (const OpDef* d : OpTable::get().all()) {
    if (!d->pointwise) continue;
    Node n;
    n.op = d->name;
    n.inputs = {0, 1, 2};
    std::string e = c_form(*d, n, {"a", "b", "c"});
    EXPECT_EQ(e.find('{'), std::string::npos) << d->name << ": " << e;
  }
  for (size_t op = 0; op < size_t(ScalarOp::Count); ++op)
    EXPECT_FALSE(cpu::c_code_for_op()[op].empty()) << scalar_op_name(ScalarOp(op));
}
