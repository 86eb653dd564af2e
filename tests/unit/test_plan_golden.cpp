// The plans of the example models, for the CPU and CUDA targets (CUDA plans need no GPU), against
// golden files in tests/data/plans/. What a pass decides about an op lives in its OpDef
// (src/ir/op_table.cpp, src/ops/); moving such knowledge must leave every plan as it was, and a
// change that alters a plan on purpose regenerates the files (the failing test writes what it got
// under the test temp directory and names the file).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "brrr/onnx.hpp"
#include "passes/pipeline.hpp"
#include "plan/kernel_ir.hpp"
#include "plan/library_desc.hpp"
#include "plan/target.hpp"

namespace brrr {
namespace {

const std::string kExamples = std::string(BRRR_TEST_DATA) + "/../../examples/";
const std::string kGolden = std::string(BRRR_TEST_DATA) + "/plans/";

std::string ints(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}
std::string ints(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::string epilogue(const plan::Epilogue& e) {
  return fmt::format("epi bias {} sum {} act {} {} {} '{}'", e.bias, e.sum, int(e.act), e.alpha,
                     e.beta, e.act_name);
}

// Every field a backend reads from a library kernel's descriptor.
std::string describe(const plan::Kernel& k) {
  using namespace plan;
  if (const GemmDesc* d = desc_of<GemmDesc>(k))
    return fmt::format(
        "gemm a {} b {} out {} t {}{} alpha {} beta {} c {} {} M {} N {} K {} batch {} strides "
        "{},{},{} '{}' a [{}] {} +{} b [{}] {} +{} scale {} out [{}] {} '{}' math {} tf32 {}",
        d->a, d->b, d->out, d->trans_a, d->trans_b, d->alpha, d->beta, d->c, epilogue(d->epi),
        d->M, d->N, d->K, d->batch, d->stride_a, d->stride_b, d->stride_c, d->strided_why,
        ints(d->a_dims), ints(d->a_strides), d->a_offset, ints(d->b_dims), ints(d->b_strides),
        d->b_offset, d->scale, ints(d->out_dims), ints(d->out_strides), d->why,
        dtype_name(d->math), d->tf32);
  if (const ConvDesc* d = desc_of<ConvDesc>(k))
    return fmt::format("conv x {} w {} y {} out {} groups {} {} '{}' math {} tf32 {}", d->x, d->w,
                       d->y, d->out, d->groups, epilogue(d->epi), d->why, dtype_name(d->math),
                       d->tf32);
  if (const PoolDesc* d = desc_of<PoolDesc>(k))
    return fmt::format("pool max {} x {} y {} indices {} order {} ceil {} pad {} '{}'", d->max, d->x,
                       d->y, d->indices_used, d->storage_order, d->ceil_mode, d->include_pad,
                       d->why);
  if (const ConcatDesc* d = desc_of<ConcatDesc>(k))
    return fmt::format("concat out {} axis {} in {} '{}'", d->out, d->axis, ints(d->inputs), d->why);
  if (const SplitDesc* d = desc_of<SplitDesc>(k))
    return fmt::format("split x {} axis {} out {} sizes {} '{}'", d->x, d->axis, ints(d->outputs),
                       ints(d->sizes), d->why);
  if (const RowReduceDesc* d = desc_of<RowReduceDesc>(k))
    return fmt::format("rows x {} y {} {}x{} scale {} '{}'", d->x, d->y, d->rows, d->cols, d->scale,
                       d->why);
  if (const ChannelScaleDesc* d = desc_of<ChannelScaleDesc>(k))
    return fmt::format("channel scale x {} s {} y {} {}x{}x{} '{}'", d->x, d->s, d->y, d->images,
                       d->channels, d->pixels, d->why);
  if (const GatherDesc* d = desc_of<GatherDesc>(k))
    return fmt::format("gather x {} idx {} y {} axis {} {}x{}x{} '{}'", d->x, d->indices, d->y,
                       d->axis, d->outer, d->axis_len, d->inner, d->why);
  if (const AttentionDesc* d = desc_of<AttentionDesc>(k))
    return fmt::format("attention q {} k {} v {} out {} mask {} keep {} scale {} fill {} {} {} {} {}",
                       d->q, d->k, d->v, d->out, d->mask, d->keep, d->scale, d->fill, d->keep_when,
                       d->causal, d->zero_empty_rows, dtype_name(d->dtype));
  return k.lib ? "descriptor: none" : "";
}

// The plan's summary, then per kernel its values, exprs and descriptor.
std::string dump(const Compiled& c) {
  std::string s = c.plan.print(c.graph);
  for (const plan::Kernel& k : c.plan.kernels) {
    s += fmt::format("{}: in {} out {} act {} {} {} {}\n", k.name, ints(k.inputs), ints(k.outputs),
                     k.activation, k.act_alpha, k.act_beta, describe(k));
    for (const plan::Expr& e : k.exprs) {
      s += fmt::format("  e{} L{} v{} [{}]+{} c {} {} ({})", int(e.kind), e.level, e.value,
                       ints(e.strides), e.offset, e.constant, scalar_op_name(e.op),
                       ints(e.args));
      for (const ScalarOperand& o : e.attrs) s += fmt::format(" {}:{}:{}", o.input, o.imm, o.integer);
      s += fmt::format(" r{} {} {}\n", int(e.reduce), e.lo, e.hi);
    }
    for (const plan::Store& st : k.stores) s += fmt::format("  store e{} -> v{}\n", st.expr, st.value);
  }
  return s;
}

struct Config {
  const char* name;
  plan::Target (*target)();
  DType storage;
};

plan::Target cpu_bf16() {
  plan::Target t = plan::Target::cpu(true);
  t.library_math = DType::bf16;  // Target::cpu("bf16", ...) without asking this CPU's features
  t.narrow_min_columns = 16;
  return t;
}
plan::Target cuda_separate_attention() {
  plan::Target t = plan::Target::cuda();
  t.attention_max_head_dim = 0;  // BRRR_FUSED_ATTENTION=0
  return t;
}

const Config kConfigs[] = {
    {"cpu", [] { return plan::Target::cpu(true); }, DType::f32},
    {"cpu_no_onednn", [] { return plan::Target::cpu(false); }, DType::f32},
    {"cpu_bf16", cpu_bf16, DType::f32},
    {"cuda", [] { return plan::Target::cuda(); }, DType::f32},
    {"cuda_separate_attention", cuda_separate_attention, DType::f32},
    {"cuda_tf32", [] { return plan::Target::cuda("tf32"); }, DType::f32},
    {"cuda_bf16", [] { return plan::Target::cuda("bf16"); }, DType::bf16},
    {"cuda_fp16", [] { return plan::Target::cuda("fp16"); }, DType::f16},
};

class PlanGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanGolden, PlansMatchTheGoldenFile) {
  const std::string model = GetParam();
  const Graph loaded = load_onnx(kExamples + model + "/model.onnx");
  std::string got;
  for (const Config& cfg : kConfigs) {
    CompileOptions o;
    o.storage = cfg.storage;
    Compiled c = compile(loaded, cfg.target(), o);
    got += fmt::format("=== {} on {} ===\n", model, cfg.name);
    if (cfg.storage != DType::f32) got += c.graph.print();  // convert_precision's casts and types
    got += dump(c);
  }
  const std::string path = kGolden + model + ".txt";
  std::ifstream f(path);
  std::stringstream want;
  want << f.rdbuf();
  if (want.str() != got) {
    const std::string out = ::testing::TempDir() + "plan_" + model + ".txt";
    std::ofstream(out) << got;
    FAIL() << "the plans of " << model << " differ from " << path << " (got: " << out << ")";
  }
}

Node node(const char* op) {
  Node n;
  n.op = op;
  return n;
}

// What the passes read of an op is its entry's (brrr/op.hpp), looked up for nodes not yet
// resolved by shape inference too.
TEST(OpTableLowering, EntriesSayWhatThePassesAsk) {
  EXPECT_EQ(library_of(node("MatMul")), LibraryKind::Gemm);
  EXPECT_EQ(library_of(node("Gemm")), LibraryKind::Gemm);
  EXPECT_EQ(library_of(node("Conv")), LibraryKind::Conv);
  EXPECT_EQ(library_of(node("MaxPool")), LibraryKind::Pool);
  EXPECT_EQ(def_of(node("MaxPool"))->reduce, ReduceKind::Max);
  EXPECT_EQ(def_of(node("AveragePool"))->reduce, ReduceKind::Mean);
  EXPECT_EQ(library_of(node("GlobalAveragePool")), LibraryKind::GlobalMean);
  EXPECT_EQ(library_of(node("GlobalMaxPool")), LibraryKind::None);
  EXPECT_EQ(library_of(node("ReduceSum")), LibraryKind::TrailingReduce);
  EXPECT_EQ(library_of(node("ReduceMax")), LibraryKind::None);
  EXPECT_TRUE(def_of(node("ReduceL2"))->dtype_from_input0);
  EXPECT_EQ(library_of(node("Mul")), LibraryKind::ChannelScale);
  EXPECT_EQ(library_of(node("Add")), LibraryKind::None);

  EXPECT_EQ(activation_of(node("Relu")), Activation::Relu);
  EXPECT_EQ(activation_of(node("Clip")), Activation::Clip);
  EXPECT_EQ(activation_of(node("Exp")), Activation::None);
  Node gelu = node("Gelu");
  EXPECT_EQ(activation_of(gelu), Activation::GeluErf);
  gelu.attrs["approximate"] = std::string("tanh");
  EXPECT_EQ(activation_of(gelu), Activation::GeluTanh);
  for (int a = 0; a < int(Activation::Other); ++a)
    EXPECT_EQ(activation_from_name(activation_name(Activation(a))), Activation(a));

  EXPECT_EQ(view_of(node("Transpose")), ViewKind::Permute);
  EXPECT_EQ(view_of(node("Squeeze")), ViewKind::Reshape);
  EXPECT_EQ(view_of(node("Flatten")), ViewKind::None);  // a copy, not a GEMM operand view
  EXPECT_EQ(view_of(node("Gather")), ViewKind::Pick);
  EXPECT_EQ(view_of(node("Slice")), ViewKind::Slice);

  EXPECT_EQ(op_id(node("Softmax")), OpId::Softmax);
  EXPECT_EQ(op_id(node("Sin")), OpId::Other);
  Node other = node("Gelu");
  other.domain = "com.microsoft";  // an op id names an ai.onnx op
  EXPECT_EQ(op_id(other), OpId::Other);
}

INSTANTIATE_TEST_SUITE_P(Examples, PlanGolden,
                         ::testing::Values("mlp_tiny", "bert_tiny", "squeezenet1_1",
                                           "mobilenet_v3_small"));

}  // namespace
}  // namespace brrr
