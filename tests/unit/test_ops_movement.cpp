// Movement ops: small hand-built graphs through infer_shapes + run_reference, against values
// worked out by hand or with numpy.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "brrr/op.hpp"
#include "brrr/passes.hpp"
#include "brrr/reference.hpp"

using namespace brrr;

namespace {

// One op input: a graph input (run-time data) or a constant (initializer).
struct In {
  Tensor t;
  bool is_const = false;
};
In data(Tensor t) {
  return {std::move(t), false};
}
In cst(Tensor t) {
  return {std::move(t), true};
}
In none() {
  return {};
}

using Attrs = std::map<std::string, AttrValue>;

// Builds a one-node graph, infers shapes and runs the reference executor.
std::vector<Tensor> run_op(const std::string& op, const std::vector<In>& ins,
                           const Attrs& attrs = {}, int n_out = 1, int opset = 18) {
  Graph g;
  g.opset = opset;
  Node n;
  n.op = op;
  n.name = "the_" + op;
  n.attrs = attrs;
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i].t.defined()) {
      n.inputs.push_back(-1);
      continue;
    }
    std::string name = "in" + std::to_string(i);
    int id = g.add_value(name);
    Value& v = g.value(id);
    v.dtype = ins[i].t.dtype();
    v.shape = ins[i].t.shape();
    v.typed = true;
    if (ins[i].is_const) {
      v.constant = ins[i].t;
    } else {
      g.inputs.push_back(id);
      feeds[name] = ins[i].t;
    }
    n.inputs.push_back(id);
  }
  for (int o = 0; o < n_out; ++o) {
    int id = g.add_value("out" + std::to_string(o));
    n.outputs.push_back(id);
    g.outputs.push_back(id);
  }
  g.nodes.push_back(std::move(n));
  infer_shapes(g, {});
  return run_reference(g, feeds);
}

Tensor run1(const std::string& op, const std::vector<In>& ins, const Attrs& attrs = {},
            int opset = 18) {
  return run_op(op, ins, attrs, 1, opset)[0];
}

Tensor iota_f(const Shape& s) {
  std::vector<float> v(size_t(shape_numel(s)));
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor::from_vector<float>(s, v);
}
Tensor ints(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>({int64_t(v.size())}, v);
}
Tensor floats(const Shape& s, const std::vector<float>& v) {
  return Tensor::from_vector<float>(s, v);
}

std::vector<double> vals(const Tensor& t) {
  return t.to_double_vector();
}
std::vector<double> dv(std::initializer_list<double> v) {
  return v;
}

void expect_near(const Tensor& t, const std::vector<double>& want) {
  std::vector<double> got = vals(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "at " << i;
}

// Expects a brrr::Error whose message contains every fragment.
template <typename F>
void expect_error(F&& f, std::initializer_list<const char*> frags) {
  try {
    f();
    ADD_FAILURE() << "expected a brrr::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const char* s : frags) EXPECT_NE(msg.find(s), std::string::npos) << msg;
  }
}

}  // namespace

TEST(Movement, AllOpsRegisteredAsMovement) {
  for (const char* op : {"Constant",    "Shape",   "Size",           "Reshape",  "Flatten",
                         "Transpose",   "Squeeze", "Unsqueeze",      "Concat",   "Split",
                         "Slice",       "Gather",  "GatherElements", "GatherND", "ScatterElements",
                         "ScatterND",   "Expand",  "Tile",           "Pad",      "ConstantOfShape",
                         "Range",       "EyeLike", "Trilu",          "OneHot",   "DepthToSpace",
                         "SpaceToDepth"}) {
    const OpDef* d = OpTable::get().find("", op);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_EQ(d->cls, OpClass::movement) << op;
    EXPECT_TRUE(d->foldable) << op;
  }
}

TEST(Movement, ReshapeZeroAndMinusOne) {
  Tensor y = run1("Reshape", {data(iota_f({2, 3, 4})), cst(ints({0, -1}))});
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  EXPECT_EQ(vals(y), vals(iota_f({2, 12})));
  y = run1("Reshape", {data(iota_f({2, 3, 4})), cst(ints({-1, 0, 2}))});
  EXPECT_EQ(y.shape(), (Shape{4, 3, 2}));
  // allowzero: 0 is a real zero dim.
  y = run1("Reshape", {data(iota_f({0, 4})), cst(ints({4, 0}))}, {{"allowzero", int64_t(1)}});
  EXPECT_EQ(y.shape(), (Shape{4, 0}));
  expect_error(
      [] {
        run1("Reshape", {data(iota_f({6})), cst(ints({-1, -1}))});
      },
      {"the_Reshape", "more than one -1"});
  expect_error([] { run1("Reshape", {data(iota_f({6})), cst(ints({4, -1}))}); }, {"the_Reshape"});
  expect_error(
      [] {
        run1("Reshape", {data(iota_f({6})), data(ints({6}))});
      },
      {"the_Reshape", "must be a constant"});
}

TEST(Movement, FlattenTransposeSqueezeUnsqueeze) {
  EXPECT_EQ(run1("Flatten", {data(iota_f({2, 3, 4}))}, {{"axis", int64_t(-1)}}).shape(),
            (Shape{6, 4}));
  EXPECT_EQ(run1("Flatten", {data(iota_f({2, 3, 4}))}, {{"axis", int64_t(0)}}).shape(),
            (Shape{1, 24}));
  Tensor t = run1("Transpose", {data(iota_f({2, 3}))});
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(vals(t), dv({0, 3, 1, 4, 2, 5}));
  t = run1("Transpose", {data(iota_f({2, 3, 4}))}, {{"perm", std::vector<int64_t>{1, 2, 0}}});
  EXPECT_EQ(t.shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(vals(t), dv({0, 12, 1, 13, 2, 14, 3, 15, 4,  16, 5,  17,
                         6, 18, 7, 19, 8, 20, 9, 21, 10, 22, 11, 23}));
  EXPECT_EQ(run1("Squeeze", {data(iota_f({2, 1, 3, 1})), cst(ints({-1}))}).shape(),
            (Shape{2, 1, 3}));
  EXPECT_EQ(run1("Squeeze", {data(iota_f({2, 1, 3, 1}))}).shape(), (Shape{2, 3}));
  EXPECT_EQ(
      run1("Squeeze", {data(iota_f({1, 3}))}, {{"axes", std::vector<int64_t>{0}}}, 11).shape(),
      (Shape{3}));
  expect_error(
      [] {
        run1("Squeeze", {data(iota_f({2, 3})), cst(ints({0}))});
      },
      {"the_Squeeze", "cannot squeeze axis 0 of size 2"});
  Tensor u = run1("Unsqueeze", {data(iota_f({2, 3})), cst(ints({0, -1}))});
  EXPECT_EQ(u.shape(), (Shape{1, 2, 3, 1}));
  EXPECT_EQ(vals(u), vals(iota_f({6})));
  EXPECT_EQ(run1("Unsqueeze", {data(iota_f({}))}, {{"axes", std::vector<int64_t>{0}}}, 11).shape(),
            (Shape{1}));
}

TEST(Movement, ConcatWithZeroSizeInput) {
  Tensor a = floats({2, 1}, {1, 2}), b = Tensor::empty(DType::f32, {2, 0}),
         c = floats({2, 2}, {3, 4, 5, 6});
  Tensor y = run1("Concat", {data(a), data(b), data(c)}, {{"axis", int64_t(-1)}});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(y), dv({1, 3, 4, 2, 5, 6}));
  expect_error(
      [&] {
        run1("Concat", {data(a), data(floats({3, 1}, {1, 2, 3}))}, {{"axis", int64_t(1)}});
      },
      {"the_Concat", "dim 0"});
}

TEST(Movement, Split) {
  auto outs = run_op("Split", {data(iota_f({2, 3})), cst(ints({1, 2}))}, {{"axis", int64_t(1)}}, 2);
  EXPECT_EQ(vals(outs[0]), dv({0, 3}));
  EXPECT_EQ(vals(outs[1]), dv({1, 2, 4, 5}));
  outs = run_op("Split", {data(iota_f({7}))}, {{"num_outputs", int64_t(3)}}, 3);
  EXPECT_EQ(vals(outs[0]), dv({0, 1, 2}));
  EXPECT_EQ(vals(outs[1]), dv({3, 4, 5}));
  EXPECT_EQ(vals(outs[2]), dv({6}));
  outs = run_op("Split", {data(iota_f({4}))}, {{"split", std::vector<int64_t>{3, 1}}}, 2, 11);
  EXPECT_EQ(vals(outs[1]), dv({3}));
  outs = run_op("Split", {data(iota_f({4}))}, {}, 2);  // equal halves
  EXPECT_EQ(vals(outs[1]), dv({2, 3}));
}

TEST(Movement, SliceNegativeStepAndClamping) {
  Tensor x = iota_f({10});
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(vals(run1("Slice", {data(x), cst(ints({-1})), cst(ints({lo})), cst(ints({0})),
                                cst(ints({-1}))})),
            dv({9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(vals(run1("Slice", {data(x), cst(ints({8})), cst(ints({1})), none(), cst(ints({-3}))})),
            dv({8, 5, 2}));
  EXPECT_EQ(
      vals(run1("Slice", {data(x), cst(ints({-100})), cst(ints({hi})), none(), cst(ints({4}))})),
      dv({0, 4, 8}));
  EXPECT_EQ(run1("Slice", {data(x), cst(ints({5})), cst(ints({2}))}).shape(), (Shape{0}));
  // 2-D, negative axis, step beyond the dim.
  Tensor y = run1("Slice", {data(iota_f({2, 4})), cst(ints({3})), cst(ints({-5})), cst(ints({-1})),
                            cst(ints({-2}))});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(vals(y), dv({3, 1, 7, 5}));
  // Slice-1: starts/ends/axes as attributes.
  Tensor z = run1("Slice", {data(iota_f({3, 4}))},
                  {{"starts", std::vector<int64_t>{1}},
                   {"ends", std::vector<int64_t>{1000}},
                   {"axes", std::vector<int64_t>{0}}},
                  9);
  EXPECT_EQ(z.shape(), (Shape{2, 4}));
  EXPECT_EQ(vals(z)[0], 4);
  expect_error(
      [&] {
        run1("Slice", {data(x), cst(ints({0})), cst(ints({5})), none(), cst(ints({0}))});
      },
      {"the_Slice", "step is 0"});
}

TEST(Movement, GatherNegativeIndicesAndErrors) {
  Tensor x = iota_f({2, 3});
  Tensor idx = Tensor::from_vector<int64_t>({1, 2}, {-1, 0});
  Tensor y = run1("Gather", {data(x), data(idx)}, {{"axis", int64_t(1)}});
  EXPECT_EQ(y.shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(vals(y), dv({2, 0, 5, 3}));
  // Scalar index drops the axis; int32 indices.
  y = run1("Gather", {data(x), data(Tensor::scalar<int32_t>(1))});
  EXPECT_EQ(y.shape(), (Shape{3}));
  EXPECT_EQ(vals(y), dv({3, 4, 5}));
  // Out of range at run time and at load time: a clear error naming the node.
  expect_error(
      [&] {
        run1("Gather", {data(x), data(ints({0, 3}))}, {{"axis", int64_t(1)}});
      },
      {"the_Gather", "index 3 is out of range", "size 3"});
  expect_error([&] { run1("Gather", {data(x), cst(ints({-3}))}); }, {"the_Gather", "index -3"});
  // Other dtypes: bool and f16.
  Tensor b = Tensor::from_vector<bool>({3}, {true, false, true});
  EXPECT_EQ(vals(run1("Gather", {data(b), data(ints({1, 2}))})), dv({0, 1}));
  Tensor h = Tensor::from_vector<f16>({2}, {f16(1.5f), f16(-2.0f)});
  EXPECT_EQ(vals(run1("Gather", {data(h), data(ints({1}))})), dv({-2.0}));
}

TEST(Movement, GatherElements) {
  Tensor x = floats({2, 2}, {1, 2, 3, 4});
  Tensor idx = Tensor::from_vector<int64_t>({2, 2}, {0, 0, -1, 0});
  EXPECT_EQ(vals(run1("GatherElements", {data(x), data(idx)}, {{"axis", int64_t(1)}})),
            dv({1, 1, 4, 3}));
  Tensor bad = Tensor::from_vector<int64_t>({1, 2}, {0, 2});
  expect_error(
      [&] {
        run1("GatherElements", {data(x), data(bad)}, {{"axis", int64_t(0)}});
      },
      {"the_GatherElements", "index 2 is out of range"});
}

TEST(Movement, GatherND) {
  Tensor x = iota_f({2, 2, 2});
  Tensor y = run1("GatherND", {data(x), data(Tensor::from_vector<int64_t>({2, 1}, {1, 0}))},
                  {{"batch_dims", int64_t(1)}});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(vals(y), dv({2, 3, 4, 5}));
  y = run1("GatherND", {data(x), data(Tensor::from_vector<int64_t>({2, 2}, {0, 1, -1, 0}))});
  EXPECT_EQ(vals(y), dv({2, 3, 4, 5}));
  expect_error(
      [&] {
        run1("GatherND", {data(x), data(Tensor::from_vector<int64_t>({1, 1}, {2}))});
      },
      {"the_GatherND", "out of range"});
}

TEST(Movement, ScatterElements) {
  Tensor x = Tensor::zeros(DType::f32, {3, 3});
  Tensor idx = Tensor::from_vector<int64_t>({2, 3}, {1, 0, 2, 0, 2, 1});
  Tensor upd = floats({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f});
  expect_near(run1("ScatterElements", {data(x), data(idx), data(upd)}),
              {2.0, 1.1f, 0, 1.0, 0, 2.2f, 0, 2.1f, 1.2f});
  Tensor x2 = floats({1, 5}, {1, 2, 3, 4, 5});
  Tensor i2 = Tensor::from_vector<int64_t>({1, 2}, {1, -4});
  Tensor u2 = floats({1, 2}, {1.1f, 2.1f});
  expect_near(run1("ScatterElements", {data(x2), data(i2), data(u2)},
                   {{"axis", int64_t(1)}, {"reduction", std::string("add")}}),
              {1, 2 + 1.1f + 2.1f, 3, 4, 5});
  Tensor i3 = Tensor::from_vector<int64_t>({1, 2}, {1, 5});
  expect_error(
      [&] {
        run1("ScatterElements", {data(x2), data(i3), data(u2)}, {{"axis", int64_t(1)}});
      },
      {"the_ScatterElements", "index 5 is out of range"});
}

TEST(Movement, ScatterND) {
  Tensor x = floats({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor idx = Tensor::from_vector<int64_t>({4, 1}, {4, 3, 1, 7});
  Tensor upd = floats({4}, {9, 10, 11, 12});
  EXPECT_EQ(vals(run1("ScatterND", {data(x), data(idx), data(upd)})),
            dv({1, 11, 3, 10, 9, 6, 7, 12}));
  EXPECT_EQ(
      vals(run1("ScatterND", {data(x), data(idx), data(upd)}, {{"reduction", std::string("mul")}})),
      dv({1, 22, 3, 40, 45, 6, 7, 96}));
  // Slices: update whole rows of a 2-D tensor.
  Tensor rows = run1("ScatterND", {data(Tensor::zeros(DType::i32, {3, 2})),
                                   data(Tensor::from_vector<int64_t>({1, 1}, {2})),
                                   data(Tensor::from_vector<int32_t>({1, 2}, {7, 8}))});
  EXPECT_EQ(vals(rows), dv({0, 0, 0, 0, 7, 8}));
  expect_error(
      [&] {
        run1("ScatterND",
             {data(x), data(Tensor::from_vector<int64_t>({1, 1}, {8})), data(floats({1}, {0}))});
      },
      {"the_ScatterND", "out of range"});
}

TEST(Movement, ExpandAndTile) {
  Tensor e = run1("Expand", {data(floats({3, 1}, {1, 2, 3})), cst(ints({2, 1, 2}))});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(vals(e), dv({1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  Tensor t = run1("Tile", {data(floats({2, 2}, {1, 2, 3, 4})), cst(ints({2, 2}))});
  EXPECT_EQ(t.shape(), (Shape{4, 4}));
  EXPECT_EQ(vals(t), dv({1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_EQ(run1("Tile", {data(iota_f({2, 3})), cst(ints({0, 2}))}).shape(), (Shape{0, 6}));
  expect_error([] { run1("Expand", {data(iota_f({3})), cst(ints({2}))}); }, {"the_Expand"});
}

TEST(Movement, Pad) {
  Tensor x = floats({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  Tensor pads = ints({0, 2, 0, 0});
  expect_near(run1("Pad", {data(x), cst(pads)}),
              {0, 0, 1.0f, 1.2f, 0, 0, 2.3f, 3.4f, 0, 0, 4.5f, 5.7f});
  expect_near(run1("Pad", {data(x), cst(pads), data(Tensor::scalar<float>(9.5f))}),
              {9.5, 9.5, 1.0f, 1.2f, 9.5, 9.5, 2.3f, 3.4f, 9.5, 9.5, 4.5f, 5.7f});
  expect_near(run1("Pad", {data(x), cst(pads)}, {{"mode", std::string("reflect")}}),
              {1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f});
  expect_near(run1("Pad", {data(x), cst(pads)}, {{"mode", std::string("edge")}}),
              {1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f});
  // axes input (opset 18): pad only axis -2, by 1 on both sides, edge mode.
  Tensor y = run1("Pad", {data(x), cst(ints({1, 1})), none(), cst(ints({-2}))},
                  {{"mode", std::string("edge")}});
  EXPECT_EQ(y.shape(), (Shape{5, 2}));
  expect_near(y, {1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f});
  // Reflect wider than the tensor (numpy reflects repeatedly), and a negative pad that crops.
  expect_near(run1("Pad", {data(floats({4}, {1, 2, 3, 4})), cst(ints({5, 6}))},
                   {{"mode", std::string("reflect")}}),
              {2, 3, 4, 3, 2, 1, 2, 3, 4, 3, 2, 1, 2, 3, 4});
  EXPECT_EQ(vals(run1("Pad", {data(floats({4}, {1, 2, 3, 4})), cst(ints({-1, 1}))})),
            dv({2, 3, 4, 0}));
  // Pad-2: pads and value as attributes.
  EXPECT_EQ(vals(run1("Pad", {data(floats({2}, {1, 2}))},
                      {{"pads", std::vector<int64_t>{1, 0}}, {"value", 7.0f}}, 2)),
            dv({7, 1, 2}));
}

TEST(Movement, ConstantOfShapeAndHugeOutputs) {
  Tensor v = Tensor::from_vector<int64_t>({1}, {5});
  Tensor y = run1("ConstantOfShape", {cst(ints({2, 3}))}, {{"value", v}});
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(vals(y), dv({5, 5, 5, 5, 5, 5}));
  Tensor s = run1("ConstantOfShape", {cst(ints({}))});
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.dtype(), DType::f32);
  Tensor z = run1("ConstantOfShape", {cst(ints({0, 3}))});
  EXPECT_EQ(z.numel(), 0);
  int64_t big = int64_t(1) << 40;
  expect_error([&] { run1("ConstantOfShape", {cst(ints({big}))}); }, {"over the limit"});
  expect_error([&] { run1("ConstantOfShape", {cst(ints({big, big}))}); }, {"64 bits"});
  expect_error([&] { run1("ConstantOfShape", {cst(ints({2, -1}))}); }, {"the_ConstantOfShape"});
  expect_error([&] { run1("Expand", {data(iota_f({1})), cst(ints({big}))}); }, {"over the limit"});
  expect_error([&] { run1("Tile", {data(iota_f({2})), cst(ints({big}))}); }, {"over the limit"});
  expect_error([&] { run1("Tile", {data(iota_f({2, 2})), cst(ints({big, big}))}); }, {"64 bits"});
  expect_error(
      [&] {
        run1("Range", {cst(Tensor::scalar<int64_t>(0)), cst(Tensor::scalar<int64_t>(big)),
                       cst(Tensor::scalar<int64_t>(1))});
      },
      {"over the limit"});
  expect_error(
      [&] {
        run1("Range", {cst(Tensor::scalar<float>(0)), cst(Tensor::scalar<float>(1e30f)),
                       cst(Tensor::scalar<float>(1e-30f))});
      },
      {"the_Range", "too many"});
  expect_error(
      [&] {
        run1("Pad", {data(iota_f({2})), cst(ints({big, big}))});
      },
      {"over the limit"});
}

TEST(Movement, Range) {
  auto r = [](auto a, auto b, auto d) {
    return run1("Range", {cst(Tensor::scalar(a)), cst(Tensor::scalar(b)), cst(Tensor::scalar(d))});
  };
  EXPECT_EQ(vals(r(int64_t(1), int64_t(10), int64_t(3))), dv({1, 4, 7}));
  EXPECT_EQ(vals(r(int32_t(10), int32_t(4), int32_t(-3))), dv({10, 7}));
  EXPECT_EQ(vals(r(0.0f, 1.0f, 0.25f)), dv({0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(r(5.0, 1.0, 1.0).numel(), 0);
  expect_error([&] { r(int64_t(0), int64_t(4), int64_t(0)); }, {"the_Range", "delta is 0"});
  // Run-time start/limit/delta cannot give a shape.
  expect_error(
      [] {
        run1("Range", {data(Tensor::scalar<int64_t>(0)), cst(Tensor::scalar<int64_t>(3)),
                       cst(Tensor::scalar<int64_t>(1))});
      },
      {"the_Range", "must be a constant"});
}

TEST(Movement, EyeLikeTriluOneHot) {
  Tensor e = run1("EyeLike", {data(iota_f({3, 4}))}, {{"k", int64_t(1)}, {"dtype", int64_t(7)}});
  EXPECT_EQ(e.dtype(), DType::i64);
  EXPECT_EQ(vals(e), dv({0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  Tensor x = iota_f({3, 3});
  EXPECT_EQ(vals(run1("Trilu", {data(x), data(Tensor::scalar<int64_t>(-1))})),
            dv({0, 1, 2, 3, 4, 5, 0, 7, 8}));
  EXPECT_EQ(vals(run1("Trilu", {data(x)}, {{"upper", int64_t(0)}})),
            dv({0, 0, 0, 3, 4, 0, 6, 7, 8}));
  EXPECT_EQ(vals(run1("Trilu", {data(iota_f({2, 2, 2}))}, {{"upper", int64_t(1)}})),
            dv({0, 1, 0, 3, 4, 5, 0, 7}));
  Tensor oh = run1("OneHot", {data(ints({0, -1, 5})), cst(Tensor::scalar<int64_t>(3)),
                              data(floats({2}, {0, 1}))});
  EXPECT_EQ(oh.shape(), (Shape{3, 3}));
  EXPECT_EQ(vals(oh), dv({1, 0, 0, 0, 0, 1, 0, 0, 0}));
  oh = run1("OneHot",
            {data(ints({1, 0})), cst(Tensor::scalar<float>(3)),
             data(Tensor::from_vector<int32_t>({2}, {-2, 9}))},
            {{"axis", int64_t(0)}});
  EXPECT_EQ(oh.shape(), (Shape{3, 2}));
  EXPECT_EQ(vals(oh), dv({-2, 9, 9, -2, -2, -2}));
}

TEST(Movement, DepthToSpaceAndBack) {
  Tensor x = iota_f({1, 8, 2, 3});
  Tensor d = run1("DepthToSpace", {data(x)}, {{"blocksize", int64_t(2)}});
  EXPECT_EQ(d.shape(), (Shape{1, 2, 4, 6}));
  EXPECT_EQ(vals(d), dv({0,  12, 1,  13, 2,  14, 24, 36, 25, 37, 26, 38, 3,  15, 4,  16,
                         5,  17, 27, 39, 28, 40, 29, 41, 6,  18, 7,  19, 8,  20, 30, 42,
                         31, 43, 32, 44, 9,  21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47}));
  Tensor c =
      run1("DepthToSpace", {data(x)}, {{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}});
  EXPECT_EQ(vals(c), dv({0,  6,  1,  7,  2,  8,  12, 18, 13, 19, 14, 20, 3,  9,  4,  10,
                         5,  11, 15, 21, 16, 22, 17, 23, 24, 30, 25, 31, 26, 32, 36, 42,
                         37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47}));
  Tensor back = run1("SpaceToDepth", {data(d)}, {{"blocksize", int64_t(2)}});
  EXPECT_EQ(back.shape(), x.shape());
  EXPECT_EQ(vals(back), vals(x));
  expect_error(
      [&] {
        run1("DepthToSpace", {data(iota_f({1, 6, 2, 2}))}, {{"blocksize", int64_t(2)}});
      },
      {"the_DepthToSpace", "not divisible"});
}

TEST(Movement, ShapeSizeConstant) {
  Tensor x = iota_f({2, 3, 4});
  EXPECT_EQ(vals(run1("Shape", {data(x)})), dv({2, 3, 4}));
  EXPECT_EQ(vals(run1("Shape", {data(x)}, {{"start", int64_t(-2)}})), dv({3, 4}));
  EXPECT_EQ(vals(run1("Shape", {data(x)}, {{"start", int64_t(1)}, {"end", int64_t(-1)}})), dv({3}));
  EXPECT_EQ(run1("Shape", {data(x)}, {{"start", int64_t(3)}, {"end", int64_t(1)}}).numel(), 0);
  EXPECT_EQ(vals(run1("Size", {data(x)})), dv({24}));
  EXPECT_EQ(vals(run1("Constant", {}, {{"value_ints", std::vector<int64_t>{4, 5}}})), dv({4, 5}));
  EXPECT_EQ(vals(run1("Constant", {}, {{"value_float", 2.5f}})), dv({2.5}));
  EXPECT_EQ(vals(run1("Constant", {}, {{"value", floats({2}, {1, 2})}})), dv({1, 2}));
}

// A dynamic-looking shape chain: Reshape(x, Concat(Gather(Shape(x), 0), [-1])) with x a run-time
// input. Shape folds from x's inferred shape, so the Reshape's shape is a constant.
TEST(Movement, ShapeChainOfRuntimeInputFolds) {
  Graph g;
  g.opset = 18;
  auto val = [&](const std::string& name) { return g.add_value(name); };
  int x = val("x"), shp = val("shp"), zero = val("zero"), d0 = val("d0"), m1 = val("m1"),
      cat = val("cat"), y = val("y");
  g.value(x).dtype = DType::f32;
  g.value(x).shape = {2, 3, 4};
  g.inputs = {x};
  for (auto [id, t] : {std::pair{zero, ints({0})}, std::pair{m1, ints({-1})}}) {
    g.value(id).constant = t;
    g.value(id).dtype = DType::i64;
    g.value(id).shape = t.shape();
    g.value(id).typed = true;
  }
  auto add = [&](const char* op, std::vector<int> in, int out, Attrs attrs = {}) {
    Node n;
    n.op = op;
    n.name = op;
    n.inputs = std::move(in);
    n.outputs = {out};
    n.attrs = std::move(attrs);
    g.nodes.push_back(std::move(n));
  };
  add("Reshape", {x, cat}, y);  // out of order on purpose: infer_shapes sorts
  add("Shape", {x}, shp);
  add("Gather", {shp, zero}, d0);
  add("Concat", {d0, m1}, cat, {{"axis", int64_t(0)}});
  g.outputs = {y};
  infer_shapes(g, {});
  EXPECT_TRUE(g.value(cat).constant.defined());
  EXPECT_EQ(g.value(y).shape, (Shape{2, 12}));
  std::vector<Tensor> out = run_reference(g, {{"x", iota_f({2, 3, 4})}});
  EXPECT_EQ(vals(out[0]), vals(iota_f({24})));
}

// Malformed nodes: each is a brrr::Error (never a crash, UB or huge allocation).
TEST(Movement, BadInputsAreErrors) {
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  Tensor x = iota_f({2, 3});
  auto bad = [](auto f) { EXPECT_THROW(f(), Error); };
  bad([&] { run1("Reshape", {data(x), cst(ints({hi, hi, -1}))}); });
  bad([&] { run1("Reshape", {data(x), cst(ints({-2, 3}))}); });
  bad([&] { run1("Flatten", {data(x)}, {{"axis", int64_t(3)}}); });
  bad([&] { run1("Transpose", {data(x)}, {{"perm", std::vector<int64_t>{0, 0}}}); });
  bad([&] { run1("Unsqueeze", {data(x), cst(ints({1, 1}))}); });
  bad([&] { run1("Unsqueeze", {data(x), cst(ints({5}))}); });
  bad([&] { run1("Split", {data(x), cst(ints({1, 1}))}, {{"axis", int64_t(1)}}, 2); });
  bad([&] { run_op("Split", {data(iota_f({5}))}, {{"num_outputs", int64_t(4)}}, 4); });
  bad([&] { run1("Slice", {data(x), cst(ints({0})), cst(ints({1})), cst(ints({2}))}); });
  bad([&] { run1("Slice", {data(x), cst(ints({0, 0})), cst(ints({1, 1})), cst(ints({1, -1}))}); });
  bad([&] { run1("Gather", {data(x), data(ints({hi}))}); });
  bad([&] { run1("Gather", {data(x), data(ints({lo}))}); });
  bad([&] { run1("Gather", {data(x), data(floats({1}, {0}))}); });
  bad([&] { run1("Tile", {data(x), cst(ints({1, -1}))}); });
  bad([&] { run1("Tile", {data(x), cst(ints({1}))}); });
  bad([&] { run1("Expand", {data(x), cst(ints({-1, 3}))}); });
  bad([&] { run1("Pad", {data(x), cst(ints({0, -5, 0, 0}))}); });
  bad([&] { run1("Pad", {data(x), cst(ints({hi, 0, hi, 0}))}); });
  bad([&] {
    run1("Pad", {data(Tensor::empty(DType::f32, {0})), cst(ints({1, 1}))},
         {{"mode", std::string("reflect")}});
  });
  bad([&] { run1("Pad", {data(x), cst(ints({1, 1}))}); });
  bad([&] {
    run1("OneHot", {data(ints({0})), cst(Tensor::scalar<int64_t>(-3)), data(floats({2}, {0, 1}))});
  });
  bad([&] {
    run1("DepthToSpace", {data(iota_f({1, 4, 1, 1}))}, {{"blocksize", int64_t(int64_t(1) << 33)}});
  });
  bad([&] { run1("SpaceToDepth", {data(iota_f({1, 1, 3, 3}))}, {{"blocksize", int64_t(2)}}); });
  bad([&] {
    run1("Range", {cst(Tensor::scalar<float>(0)), cst(Tensor::scalar<float>(NAN)),
                   cst(Tensor::scalar<float>(0))});
  });
  bad([&] {
    run1("Range", {cst(Tensor::scalar<int64_t>(lo)), cst(Tensor::scalar<int64_t>(hi)),
                   cst(Tensor::scalar<int64_t>(1))});
  });
  bad([&] { run1("GatherND", {data(x), data(Tensor::from_vector<int64_t>({1, 3}, {0, 0, 0}))}); });
  bad([&] {
    run1("ScatterND",
         {data(x), data(Tensor::from_vector<int64_t>({1, 1}, {0})), data(floats({1}, {0}))});
  });
  bad([&] { run1("Constant", {}); });
  // Extreme but valid: INT64_MIN step and a NaN Range are fine, not UB.
  EXPECT_EQ(vals(run1("Slice", {data(iota_f({4})), cst(ints({-1})), cst(ints({lo})), none(),
                                cst(ints({lo}))})),
            dv({3}));
  EXPECT_EQ(run1("Range", {cst(Tensor::scalar<float>(0)), cst(Tensor::scalar<float>(NAN)),
                           cst(Tensor::scalar<float>(1))})
                .numel(),
            0);
}
