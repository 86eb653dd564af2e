// Attributes are read through their declared types: a STRING where the ONNX schema declares a
// FLOAT is refused by the loader, and text from a model never reaches generated source (only
// numbers printed by the emitter, or words of the op's own template).
#include "backend/cpu/codegen_cpp.hpp"
#include "hostile_util.hpp"
#include "onnx_builder.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr::hostile {
namespace {

std::string one_node_model(const std::string& op, const std::string& attr, const std::string& text,
                           int opset = 17) {
  onnx_builder::Model m(opset);
  m.input("x", {4});
  onnx_builder::attr(m.node(op, {"x"}, {"y"}), attr, text);
  m.output("y");
  return m.bytes();
}

TEST(AttributeTypes, StringWhereTheSchemaSaysFloatIsRefusedByTheLoader) {
  struct Case {
    const char* op;
    const char* attr;
  };
  for (Case c : {Case{"LeakyRelu", "alpha"}, Case{"Elu", "alpha"}, Case{"HardSigmoid", "alpha"},
                 Case{"HardSigmoid", "beta"}, Case{"Selu", "gamma"}, Case{"Celu", "alpha"},
                 Case{"ThresholdedRelu", "alpha"}}) {
    std::string err = error_of([&] { load_onnx_bytes(one_node_model(c.op, c.attr, "e0")); });
    EXPECT_NE(err.find(std::string("(") + c.op + ")"), std::string::npos) << err;
    EXPECT_NE(err.find(std::string("attribute '") + c.attr + "' must be FLOAT but is STRING"),
              std::string::npos)
        << err;
  }
  // The other direction too: a FLOAT where an INT or a STRING is declared.
  onnx_builder::Model m;
  m.input("x", {2, 3});
  onnx_builder::attr(m.node("Softmax", {"x"}, {"y"}), "axis", 1.5f);
  m.output("y");
  std::string err = error_of([&] { load_onnx_bytes(m.bytes()); });
  EXPECT_NE(err.find("attribute 'axis' must be INT but is FLOAT"), std::string::npos) << err;
  onnx_builder::Model d;
  d.input("x", {1, 4, 2, 2});
  auto* n = d.node("DepthToSpace", {"x"}, {"y"});
  onnx_builder::attr(n, "blocksize", int64_t(2));
  onnx_builder::attr(n, "mode", 1.f);
  d.output("y");
  err = error_of([&] { load_onnx_bytes(d.bytes()); });
  EXPECT_NE(err.find("attribute 'mode' must be STRING but is FLOAT"), std::string::npos) << err;
}

TEST(AttributeTypes, CliRefusesStringAlpha) {
  std::string path = (scratch() / "leaky_string_alpha.onnx").string();
  {
    std::ofstream f(path, std::ios::binary);
    f << one_node_model("LeakyRelu", "alpha", "e0");
  }
  CliResult r = run_cli("run '" + path + "'");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("'alpha' must be FLOAT but is STRING"), std::string::npos) << r.err;
}

// Graphs built in code skip the loader: the emitter still takes only numbers, so a string alpha
// is an error (the reference kernel's), never pasted into the generated C++.
TEST(AttributeTypes, ModelTextNeverReachesGeneratedCode) {
  for (const char* op : {"LeakyRelu", "Elu", "HardSigmoid", "Celu", "ThresholdedRelu"}) {
    GraphBuilder b;
    int x = b.input("x", {4});
    b.output(b.node(op, {x}, {{"alpha", AttrValue(std::string("RAND_MAX"))}}));
    Graph g = b.g;
    infer_shapes(g, {});
    for (bool fuse : {true, false}) {
      plan::FusionOptions fo;
      fo.enable = fuse;
      for (const std::string& src : cpu::generate_cpp(g, plan::build_plan(g, fo), {}).parts)
        EXPECT_EQ(src.find("RAND_MAX"), std::string::npos) << op;
    }
    std::string err = error_of([&] {
      Session s(b.g, session_options());
      s.run({{"x", Tensor::from_vector<float>({4}, {-2, -1, 1, 2})}});
    });
    EXPECT_NE(err.find("alpha"), std::string::npos) << op << ": " << err;
  }
  // A string attribute an op does take (Gelu's approximate) picks one of the op's own forms.
  for (const char* text : {"tanh", "none", "tanh(x)+RAND_MAX"}) {
    Node n;
    n.op = "Gelu";
    n.name = "gelu";
    n.attrs["approximate"] = std::string(text);
    const OpDef* def = OpTable::get().find("", "Gelu");
    ASSERT_NE(def, nullptr);
    if (text[4] == '(') {
      std::string err = error_of([&] { def->pointwise(n); });
      EXPECT_NE(err.find("'approximate'"), std::string::npos) << err;
    } else {
      EXPECT_EQ(def->pointwise(n).op,
                std::string(text) == "tanh" ? ScalarOp::GeluTanh : ScalarOp::GeluErf);
    }
  }
  // Number placeholders take numbers only: a string for Mod's fmod or Clip's min is an error.
  Node mod;
  mod.op = "Mod";
  mod.name = "mod";
  mod.attrs["fmod"] = std::string("1(");
  std::string err = error_of([&] {
    OpTable::get().find("", "Mod")->pointwise(mod);
  });
  EXPECT_NE(err.find("'fmod'"), std::string::npos) << err;
  Node clip;
  clip.op = "Clip";
  clip.name = "clip";
  clip.attrs["min"] = std::string("RAND_MAX");
  err = error_of([&] { OpTable::get().find("", "Clip")->pointwise(clip); });
  EXPECT_NE(err.find("'min'"), std::string::npos) << err;
}

TEST(AttributeTypes, SpecialFloatAttributesCompileAndMatchTheReference) {
  for (float alpha : {NAN, INFINITY, -INFINITY, -0.f, 1e-45f, 3.4028235e38f}) {
    onnx_builder::Model m;
    m.input("x", {4});
    onnx_builder::attr(m.node("LeakyRelu", {"x"}, {"a"}), "alpha", alpha);
    onnx_builder::attr(m.node("Elu", {"x"}, {"b"}), "alpha", alpha);
    auto* hs = m.node("HardSigmoid", {"x"}, {"c"});
    onnx_builder::attr(hs, "alpha", alpha);
    onnx_builder::attr(hs, "beta", alpha);
    m.output("a");
    m.output("b");
    m.output("c");
    std::string path = (scratch() / fmt::format("special_alpha_{}.onnx", alpha)).string();
    m.save(path);
    session_matches_reference(path, {{"x", Tensor::from_vector<float>({4}, {-2, -0.5f, 0, 3})}},
                              session_options(), 4);
  }
}

}  // namespace
}  // namespace brrr::hostile
