// Gather / GatherElements with indices that arrive at run time (graph inputs, so nothing is
// constant-folded): in-range ones (negative included) match the reference, out-of-range ones give
// a brrr::Error naming the node, never a crash or a read out of bounds.
#include "hostile_util.hpp"

namespace brrr::hostile {
namespace {

Tensor idx(const Shape& s, std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>(s, v);
}

Tensor iota(const Shape& s) {
  std::vector<float> v(size_t(shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) + 0.5f;
  return Tensor::from_vector<float>(s, v);
}

void expect_index_error(Session& s, const std::map<std::string, Tensor>& in,
                        const std::string& node) {
  std::string m = error_of([&] { s.run(in); });
  EXPECT_NE(m.find(node), std::string::npos) << m;
  EXPECT_TRUE(m.find("out of range") != std::string::npos || m.find("outside") != std::string::npos)
      << m;
  // The reference executor refuses them as well.
  std::string r = error_of([&] {
    reference(fixture(node == "ge"        ? "gather_elements.onnx"
                      : node == "gather1" ? "gather_axis1.onnx"
                                          : "gather.onnx"),
              in);
  });
  EXPECT_FALSE(r.empty());
}

TEST(HostileIndices, GatherAxis0) {
  Session s(fixture("gather.onnx"), session_options());
  Tensor data = iota({5, 3});
  session_matches_reference(fixture("gather.onnx"), {{"data", data}, {"idx", idx({2}, {4, -5})}},
                            session_options());
  auto ok = s.run({{"data", data}, {"idx", idx({2}, {-1, 0})}});
  EXPECT_EQ(ok[0].data<float>()[0], 12.5f);
  EXPECT_EQ(ok[0].data<float>()[3], 0.5f);
  for (int64_t bad : {int64_t(5), int64_t(-6), int64_t(1) << 40, INT64_MAX, INT64_MIN})
    expect_index_error(s, {{"data", data}, {"idx", idx({2}, {0, bad})}}, "gather");
  // The session still runs correctly after a failed run.
  auto again = s.run({{"data", data}, {"idx", idx({2}, {2, 2})}});
  EXPECT_EQ(again[0].data<float>()[0], 6.5f);
}

TEST(HostileIndices, GatherAxis1) {
  Session s(fixture("gather_axis1.onnx"), session_options());
  Tensor data = iota({2, 3});
  session_matches_reference(fixture("gather_axis1.onnx"),
                            {{"data", data}, {"idx", idx({2, 2}, {0, -1, 2, -3})}},
                            session_options());
  for (int64_t bad : {int64_t(3), int64_t(-4), INT64_MIN})
    expect_index_error(s, {{"data", data}, {"idx", idx({2, 2}, {0, 1, bad, 2})}}, "gather1");
}

TEST(HostileIndices, GatherElements) {
  Session s(fixture("gather_elements.onnx"), session_options());
  Tensor data = iota({3, 4});
  session_matches_reference(fixture("gather_elements.onnx"),
                            {{"data", data}, {"idx", idx({3, 2}, {0, 3, -1, -4, 2, 1})}},
                            session_options());
  for (int64_t bad : {int64_t(4), int64_t(-5), INT64_MAX, INT64_MIN})
    expect_index_error(s, {{"data", data}, {"idx", idx({3, 2}, {0, 1, 2, 3, bad, 0})}}, "ge");
}

TEST(HostileIndices, CliOutOfRangeExits2) {
  for (const char* d : {"gather_bad_pos", "gather_bad_neg"}) {
    CliResult r = run_cli("run '" + fixture("gather.onnx") + "' --data '" + fixture(d) + "'");
    EXPECT_EQ(r.code, 2) << d << ": " << r.out << r.err;
    EXPECT_EQ(r.err.rfind("brrr: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("gather"), std::string::npos) << r.err;
  }
  CliResult ge = run_cli("run '" + fixture("gather_elements.onnx") + "' --data '" +
                         fixture("gather_elements_bad") + "'");
  EXPECT_EQ(ge.code, 2) << ge.out << ge.err;
  CliResult ok =
      run_cli("run '" + fixture("gather.onnx") + "' --data '" + fixture("gather_ok") + "'");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

}  // namespace
}  // namespace brrr::hostile
