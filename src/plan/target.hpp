// A Target says what one backend can lower and how: the passes consult it (fusion's choice
// between a library, a generated and a reference kernel; whether distribute_concat pays), so a
// plan depends on the backend it is for, never on which other backends the build contains.
#pragma once
#include <string>

#include "brrr/dtype.hpp"
#include "brrr/op.hpp"
#include "core/cpu_features.hpp"

namespace brrr::plan {

// The CPU fuses attention blocks with at least this many keys by default (Target::cpu).
inline constexpr int64_t kCpuAttentionMinKeys = 384;

struct Target {
  std::string name = "cpu";  // "cpu", "cuda" or "reference"
  // False: the reference executor runs the typed graph node by node; the pipeline stops after
  // the graph passes and makes no plan.
  bool plans_kernels = true;
  // Generated (fused) kernels load and store bfloat16/float16 buffers, computing in float32 (both
  // emitters convert in registers) ...
  bool generated_16bit = false;
  // ... and bool buffers, read as 0 or 1 and stored as v != 0 (both emitters).
  bool generated_bool = false;
  // Library lowerings. float32 MatMul, Gemm, Conv, MaxPool and AveragePool (oneDNN on the CPU;
  // cuBLASLt, cuDNN and brrr's pool kernel on CUDA). A pool whose Indices output is used runs by
  // reference everywhere.
  bool library_f32_contractions = false;
  // MatMul and Gemm whose inputs and outputs are all bfloat16 or all float16 (cuBLASLt; oneDNN on
  // the CPU, with float32 accumulation).
  bool library_16bit_gemm = false;
  // MaxPool and AveragePool on 16-bit data where generated kernels take it (CUDA's pool kernel;
  // oneDNN's on the CPU, bf16).
  bool library_16bit_pool = false;
  // distribute_concat: convs over a channel Concat become partial convs chained by sum post-ops
  // (the CPU's oneDNN convs fuse the sums).
  bool partial_convs = false;
  // MatMul/Gemm library calls fuse a residual sum and any activation the fuser recognizes
  // (Sigmoid, Tanh, the exported erf-GELU subgraph) as post-ops (the CPU's oneDNN). Without it
  // only a bias row and Relu / Gelu / HardSwish join a GEMM.
  bool gemm_post_ops = false;
  // A Transpose of the last two axes feeding only a MatMul/Gemm is read through the GEMM's
  // strides (oneDNN memory descriptors), not copied first.
  bool gemm_strided_operands = false;
  // ... of a constant B alone (CUDA: the weight is transposed once, on the host at upload): the
  // dynamo exporter writes a tied lm_head as MatMul(x, Transpose(embedding)), which ran a
  // transpose of the whole table on every call (Llama-1B: 262 M elements) and then a GEMM on a
  // runtime B that cannot be padded to aligned rows (GPT-2's 50257 columns).
  bool gemm_transposed_constant_b = false;
  // Reshapes, Transposes (any permutation) and scalar Muls feeding only a MatMul are read
  // through its operand's strides and a scale on its product (plan/operand_view.hpp; the CPU's
  // oneDNN; BRRR_NO_GEMM_VIEWS=1 turns it off).
  bool gemm_operand_views = false;
  // ... of bfloat16 and float16 data too (a 16-bit export, or --precision bf16's storage; the
  // CPU with gemm_operand_views; BRRR_NO_GEMM_VIEWS_16BIT=1 keeps such views float32-only).
  bool gemm_operand_views_16bit = false;
  // A 16-bit GEMM's epilogue continues through a Reshape that keeps the rows and takes a 16-bit
  // residual as the sum post-op, as a float32 one does (the CPU with gemm_post_ops;
  // BRRR_NO_GEMM_POST_OPS_16BIT=1 stops it at the first of those, as before).
  bool gemm_post_ops_16bit = false;
  // split_shared_views: a view node read by several view chains into MatMuls is cloned per chain,
  // so each chain is a GEMM operand view (the CPU with gemm_operand_views, opt-in:
  // BRRR_VIEW_CLONES=1).
  bool clone_shared_views = false;
  // The tanh GELU as exporters write it (eight nodes) joins a GEMM as oneDNN's gelu_tanh post-op
  // (the CPU; BRRR_NO_GEMM_GELU_TANH=1 leaves it to a generated kernel).
  bool gemm_gelu_tanh = false;
  // merge_parallel_gemms: MatMuls on one activation with constant weights become one MatMul on
  // the concatenated weights, their results Slices of it, read as views: by any generated kernel
  // (merge_gemms_any_reader) or else only by GEMM operand views (BRRR_NO_MERGE_GEMMS=1 turns it
  // off; CUDA leaves it off with fused attention, whose operands have no offsets yet).
  bool merge_gemms = false;
  // CUDA. Not the CPU, although its generated kernels read Slices as views: the merge reshapes
  // the product into heads per part, and that Reshape of a shared buffer is a copy kernel there
  // (Llama's Q, K and V: two GEMM calls fewer, three copies more; llama_1b small, 6 interleaved
  // rounds: 1.10 vs 1.11 ms fp32, 0.80 vs 0.78 ms bf16 merged vs not, so the CPU keeps them apart).
  bool merge_gemms_any_reader = false;
  // The erf GELU (the exported subgraph or a Gelu node) after a GEMM whose result is bfloat16 or
  // float16 joins it as the library's tanh-form GELU epilogue (cuBLASLt's GELU_BIAS):
  // |gelu_erf - gelu_tanh| <= 4.8e-4 everywhere, under half a bfloat16 ulp of any result of
  // magnitude >= 1/4 (float16: >= 1); in the negative tail (x < -2, results under 0.05) that is
  // many ulps of the small result, still under 4.8e-4 absolute (tests/unit/test_merge_gemms.cpp); never at float32 or tf32 (BRRR_NO_GEMM_GELU_16BIT=1:
  // off). The tanh GELU as GPT-2's exports write it joins such a GEMM in the same form.
  bool gemm_gelu_erf_as_tanh_16bit = false;
  // ... also when a Reshape that keeps the rows sits between the GEMM and the GELU (GPT-2's
  // Conv1D: a 2-D Gemm, then its 3-D view); the GEMM then writes the Reshape's value
  // (BRRR_CUDA_GELU_RESHAPE=0: off; GPT-2 small bf16 on the H200: 548 -> 480 us at batch 1).
  bool gemm_gelu_through_reshape = false;
  // ... also on a GEMM with no bias (the executor adds a zero bias for cuBLASLt's GELU_BIAS): the
  // dynamo export of a model whose biases are zero drops them (GPT-2 with random init: its
  // c_fc GELU ran as a kernel of its own per layer; on the H200, bf16: 481 -> 433 us at batch 1,
  // 1.509 -> 1.225 ms at batch 16). BRRR_CUDA_GELU_NO_BIAS=0 turns it off.
  bool gemm_gelu_without_bias = false;
  // Scaled dot-product attention (Q.K^T, scale, masks, softmax, P.V, with the head split and
  // merge as views) as one kernel for head dims up to this (plan/attention.hpp; CUDA's
  // device/attention.cuh; on unless BRRR_FUSED_ATTENTION=0). 0: no fused attention.
  int64_t attention_max_head_dim = 0;
  // ... and at least this many keys (seq_k); 0: any.
  int64_t attention_min_keys = 0;
  // sink_row_transposes: a Transpose of rows before a MatMul with a constant weight moves after
  // it (and its bias) where views read the product, so the fused attention reads q, k and v
  // through it (CUDA with fused attention; BRRR_NO_SINK_TRANSPOSES=1 turns it off).
  bool sink_row_transposes = false;
  // patchify_convs: a Conv that tiles its input (strides equal to the kernel) runs as a GEMM on
  // its patches (CUDA; BRRR_NO_PATCH_GEMM=1 keeps it a Conv).
  bool patchify_convs = false;
  // A conv's epilogue may end in Sigmoid, or in x * sigmoid(x) (SiLU: EfficientNet's and the
  // YOLOs' activation, exported as Sigmoid and Mul): oneDNN's logistic and swish post-ops (CPU).
  bool conv_sigmoid_silu = false;
  // ...on 16-bit data too (CUDA); else float32 attention only (the CPU's kernel).
  bool attention_16bit = false;

  // Device targets (CUDA). Kernels run on a device, so a kernel the device cannot run is a host
  // step (a reference kernel on host copies): the plan marks it, with its reason
  // (Kernel::host), and the executor only reads the mark. Library kernels are made only of
  // what the device library takes (the dtype lists below), never demoted after planning.
  bool device = false;
  // Conv whose data, weights, bias and residual are all bfloat16 or all float16 (cuDNN, with
  // float32 accumulation).
  bool library_16bit_conv = false;
  // GlobalAveragePool / trailing ReduceMean / ReduceSum on 16-bit data (CUDA's row-mean kernel,
  // the CPU's for bf16; float32 sums). Without it a device target takes float32 only.
  bool library_16bit_row_reduce = false;
  // A squeeze-excite scale between convs (x[N,C,H,W] * s[N,C,1,1]) on bf16 data as a library
  // kernel (the CPU's, which keeps NHWC between the convs); without it float32 only.
  bool library_16bit_channel_scale = false;
  // Pow(x, 2) as Mul(x, x) (passes/square_pows.cpp; BRRR_NO_SQUARE_POWS=1 keeps Pow). The CPU
  // only until the CUDA plans with it have run on a device.
  bool square_pows = false;
  // Channel shuffles as channel Gathers (passes/channel_shuffles.cpp; BRRR_NO_CHANNEL_SHUFFLE_
  // GATHERS=1 keeps the Reshape-Transpose-Reshape). The CPU only (its Gather is a row copy)
  // until the CUDA plans with it have run on a device.
  bool channel_shuffle_gathers = false;
  // Identity nodes read through (passes/forward_identities.cpp; BRRR_NO_FORWARD_IDENTITIES=1
  // keeps them). The CPU only until the CUDA plans with it have run on a device.
  bool forward_identities = false;
  // Gather of any 1, 2, 4 or 8-byte element with int32 or int64 indices (CUDA's gather kernel,
  // the CPU's row copies): a Library kernel rather than a Reference one.
  bool library_gather = false;
  // Split as device copies (one strided copy per output; any dtype).
  bool library_split = false;
  // Pointwise forms the generated kernels give ops whose reference kernel is the only other
  // lowering: Cast / CastLike between the generated dtypes (float32 math, rounded by the store),
  // inference Dropout (the identity; its mask output all true), Mean (a sum over n), and a
  // scalar constant operand of another dtype whose value float32 holds exactly (Pow's int64
  // exponent). CUDA and the CPU (whose generated dtypes are float32 and bool).
  bool generated_casts = false;
  // Typed pointwise kernels (plan::Kernel::compute): nodes whose tensors are all int32, all
  // int64 or all float64 (bool besides: Where's condition, a comparison's result) compute in that
  // type, for the scalar ops generates() lists; transposes of such tensors too.
  bool generated_typed = false;
  // Slice (constant starts / ends / axes / steps) and Expand (a constant shape) as views, like
  // Transpose: strides and an offset on the loads that read them; a copy kernel when stored
  // (CUDA and the CPU).
  bool generated_views = false;
  // Lazy views (CUDA; BRRR_NO_LAZY_VIEWS=1 turns them off): a Transpose, Slice, Expand or
  // stride-describable Reshape of a buffer is no kernel of its own; every fused kernel that
  // reads it loads the buffer through the view's strides, and one copy is made only where a
  // library kernel or a graph output needs the view as a buffer. Likewise a pointwise node
  // that reads no value a fused kernel computes and feeds one pointwise node is computed inside
  // that node's kernel (Llama's rotary embedding: one kernel for q and one for k, not ten).
  bool lazy_views = false;
  // The rotary embedding's rotate_half, x * cos + cat(-x2, x1) * sin, rewritten over x viewed as
  // [..., 2, D/2] (passes/split_rotary_halves.cpp) so that lazy views fuse it whole
  // (BRRR_NO_ROTARY_HALVES=1 keeps the Concat).
  bool rotary_halves = false;
  // `--precision bf16|fp16` stores the whole model in 16 bits (convert_precision: weights and
  // activations, float32 math inside kernels), as the generated and library 16-bit paths above
  // run it. Without it the precision flag reaches only the matrix products.
  bool storage_16bit = false;
  // Float32 MatMul, Gemm and Conv library kernels read their operands rounded to this type
  // (constant weights once at build, activations per call), accumulate in float32 and store
  // float32: bf16 on a CPU with avx512_bf16 or AMX (--precision bf16). Generated kernels still
  // compute in float32. The precision pass (passes/precision.cpp) copies it into the descriptors.
  DType library_math = DType::f32;
  // ... and float32 contractions on Tensor Cores with their operands rounded to tf32 (CUDA at
  // --precision tf32), float32 data and accumulation.
  bool library_tf32 = false;
  // Output columns per group below which a contraction keeps float32 math (library_math and
  // library_tf32): on the CPU each call converts its activation operand, which a contraction
  // with few columns does not earn back; cuBLASLt and cuDNN read the narrow type directly.
  int64_t narrow_min_columns = 1;

  // Whether a typed kernel computing in `t` (int32, int64, float64) renders `op`.
  bool generates(ScalarOp op, DType t) const;

  // The CPU, with oneDNN when brrr was built with it (the one place that asks the build).
  static Target cpu();
  static Target cpu(bool onednn);
  // The CPU at a precision ("fp32" or "bf16"); fails in one line with cpu_precision_refusal's
  // reason when this build or `features` cannot run it.
  static Target cpu(const std::string& precision, const CpuFeatures& features);
  static Target cuda();
  // CUDA at a precision: tf32 sets library_tf32; bf16 and fp16 store the model in 16 bits
  // (convert_precision) and give any float32 contraction left that math (library_math).
  static Target cuda(const std::string& precision);
  static Target reference();
  // "cpu", "cuda" or "reference"; fails with a one-line error on anything else.
  static Target named(const std::string& backend);
  // ... at a precision: the CPU's is chosen from the host's features, CUDA's from its Tensor
  // Core formats; the reference backend computes in float32 only.
  static Target named(const std::string& backend, const std::string& precision);
};

// Why the CPU backend cannot compute at `precision` on a CPU with `features` in this build
// (oneDNN or not), as the end of a one-line error; "" when it can: fp32 always, bf16 with oneDNN on a CPU with
// avx512_bf16 or amx_bf16. fp16 and tf32 have no CPU path.
std::string cpu_precision_refusal(const std::string& precision, const CpuFeatures& features,
                                  bool onednn);
std::string cpu_precision_refusal(const std::string& precision);  // the host, this build

// What a user should know before timing `precision` on a CPU with `features` that takes it (one
// line, "" for nothing). bf16 without AMX computes on vdpbf16ps, whose rate against fp32 FMAs
// depends on the CPU: below it on a 2-core Xeon VM (one thread: 140-145 against 160-167
// GFLOP/s; BERT-base and ViT-B/16 ran 1.2-2.0x slower at bf16 there), twice it on a 2-core
// AMD EPYC VM (Zen 4: oneDNN's bf16 GEMM 457 against 229 GFLOP/s; BERT-base and ViT-B/16 ran
// 1.8x and 1.9x faster). `bf16_gemm_ratio` is oneDNN's bf16 GEMM rate over its fp32 rate from
// this machine's probe (0: not probed): under 1.2 the note says bf16 gains little here, from
// 1.2 there is nothing to say, unknown it says how to find out.
std::string cpu_precision_note(const std::string& precision, const CpuFeatures& features,
                               double bf16_gemm_ratio = 0);

}  // namespace brrr::plan
