#include "plan/target.hpp"

#include <fmt/format.h>

#include "brrr/error.hpp"
#include "core/env.hpp"

namespace brrr::plan {

Target Target::cpu(bool onednn) {
  Target t;
  t.name = "cpu";
  t.library_f32_contractions = onednn;
  // As before Targets: the CPU splits convs over concats whether or not oneDNN fuses the sums.
  t.partial_convs = true;
  t.gemm_post_ops = onednn;
  t.conv_sigmoid_silu = onednn && !env::flag("BRRR_NO_CONV_SILU");
  t.gemm_strided_operands = onednn;
  t.gemm_operand_views = onednn && !env::flag("BRRR_NO_GEMM_VIEWS");
  // ViT-B/16 stored in bf16 ran a copy kernel per head split and merge before (Transpose,
  // Gather, scaled Transpose: 4 per layer), as the float32 plan did before operand views.
  t.gemm_operand_views_16bit = t.gemm_operand_views && !env::flag("BRRR_NO_GEMM_VIEWS_16BIT");
  // GPT-2 stored in bf16 ran each Conv1D's bias Reshape, residual Add and tanh GELU as kernels of
  // their own (the GELU alone 3 ms a layer on two threads).
  t.gemm_post_ops_16bit = t.gemm_post_ops && t.gemm_operand_views && !env::flag("BRRR_NO_GEMM_POST_OPS_16BIT");
  // Opt-in: on ViT-B/16 (one thread) it removes ~3 ms of copies per run, but the attention GEMMs
  // then read q/k/v with a row stride of 2304 instead of 768 and take ~4.5 ms longer.
  t.clone_shared_views = t.gemm_operand_views && env::flag("BRRR_VIEW_CLONES");
  t.gemm_gelu_tanh = onednn && !env::flag("BRRR_NO_GEMM_GELU_TANH");
  t.merge_gemms = t.gemm_operand_views && !env::flag("BRRR_NO_MERGE_GEMMS");
  // LayerNorm's and RMSNorm's Pow(x, 2) as x * x: the T5 encoder's RMSNorm 0.10 -> see README.
  t.square_pows = !env::flag("BRRR_NO_SQUARE_POWS");
  // ShuffleNet's channel shuffles: see README.
  t.channel_shuffle_gathers = !env::flag("BRRR_NO_CHANNEL_SHUFFLE_GATHERS");
  // A shared weight's Identities: ALBERT-xxlarge copied 9 GB of weights a run (see README).
  t.forward_identities = !env::flag("BRRR_NO_FORWARD_IDENTITIES");
  t.generated_bool = true;  // the C++ emitter reads and writes bool buffers (codegen_cpp.cpp)
  // ... and bfloat16 / float16 ones (float32 math, rounded by the store), and oneDNN multiplies
  // 16-bit matrices: a bf16 export ran every kernel by reference before.
  t.generated_16bit = true;
  t.library_16bit_gemm = onednn;
  t.library_16bit_conv = onednn;  // ViT's patch embedding, conv nets at --precision bf16
  // bf16 pools (oneDNN), and bf16 means over trailing axes and channel scales between convs
  // (library_cpu.cpp): conv nets at --precision bf16 ran them by reference, reordering to NCHW
  // and back around each (mobilenet_v3_small: 10 ReduceMeans, 131 reorders a run).
  t.library_16bit_pool = onednn;
  t.library_16bit_row_reduce = true;
  t.library_16bit_channel_scale = true;
  // Casts between float32 and bool (the identity; a store to bool keeps v != 0), Slice and
  // Expand as strided loads, and Gather as a row copy (library_cpu.cpp): Llama's exports ran 23
  // such reference kernels per layer pair before (an RMSNorm's Casts, rotary's Slices, repeat_kv's
  // Expands).
  t.generated_casts = true;
  t.generated_views = true;
  t.library_gather = true;
  // Scaled dot-product attention as one kernel (backend/cpu/library_attention.cpp) on float32
  // data where the keys are many (BRRR_CPU_FUSED_ATTENTION=2, the default; 1 always, 0 never):
  // there the unfused plan writes and reads a [heads, seq, seq] score tensor that outgrows the
  // caches. At seq 128 it is not faster than Q.K^T, the softmax and P.V as three kernels
  // (BERT-base, one thread: 0.65-0.73 against 0.62 ms per layer); see README for the crossover.
  const int64_t fused_attention = env::integer("BRRR_CPU_FUSED_ATTENTION");
  if (fused_attention) t.attention_max_head_dim = 128;
  if (fused_attention == 2) t.attention_min_keys = kCpuAttentionMinKeys;
  // Opt-in on the CPU (BRRR_CPU_LAZY_VIEWS=1), on by default on CUDA: the CPU's copies of
  // intermediates are aliases already, and its plans were tuned without them.
  t.lazy_views = env::flag("BRRR_CPU_LAZY_VIEWS");
  t.rotary_halves = t.lazy_views && !env::flag("BRRR_NO_ROTARY_HALVES");
  return t;
}

namespace {
#ifdef BRRR_HAVE_DNNL
constexpr bool kOnednn = true;
#else
constexpr bool kOnednn = false;
#endif
}  // namespace

Target Target::cpu() { return cpu(kOnednn); }

std::string cpu_precision_refusal(const std::string& p, const CpuFeatures& f, bool onednn) {
  if (p == "fp32") return "";
  if (p == "tf32") return "tf32 is a GPU Tensor Core format; the CPU computes in fp32 or bf16";
  if (p == "fp16") return "the CPU has no fp16 path (use bf16 or fp32)";
  if (p != "bf16") return "unknown precision (use fp32, tf32, bf16 or fp16)";
  if (!onednn) return "bf16 runs through oneDNN, and this build has none";
  if (!f.avx512_bf16 && !f.amx_bf16)
    return "bf16 needs a CPU with avx512_bf16 or amx_bf16, and this one has neither (fp32 runs "
           "here)";
  return "";
}

std::string cpu_precision_refusal(const std::string& p) {
  if (p == "fp32") return "";  // no cpuid for the common case
  return cpu_precision_refusal(p, CpuFeatures::host(), kOnednn);
}

std::string cpu_precision_note(const std::string& p, const CpuFeatures& f, double ratio) {
  if (p != "bf16" || f.amx_bf16 || !f.avx512_bf16) return "";
  if (ratio >= 1.2) return "";
  if (ratio > 0)
    return fmt::format(
        "this CPU has avx512_bf16 but no AMX, and its probe measured oneDNN's bf16 GEMM at {:.2f}x "
        "the fp32 rate: bf16 saves little arithmetic here and adds the activations' casts, so it "
        "may run slower than fp32",
        ratio);
  return "this CPU has avx512_bf16 but no AMX: bf16 matrix products run on vdpbf16ps, from half "
         "to twice the fp32 rate depending on the CPU; `brrr probe` measures it here";
}

Target Target::cpu(const std::string& precision, const CpuFeatures& features) {
  if (std::string why = cpu_precision_refusal(precision, features, kOnednn); !why.empty())
    fail("precision {} on the cpu backend: {}", precision, why);
  Target t = cpu();
  // The fused attention kernel computes in float32: at bf16 the attention's two GEMMs stay
  // oneDNN matmuls that read bf16.
  if (precision == "bf16") t.library_math = DType::bf16, t.attention_max_head_dim = 0;
  // The whole model stored in bf16, as on CUDA (BRRR_PRECISION_GEMMS_ONLY=1: float32 storage,
  // bf16 operands in the contractions alone): no per-call activation casts, half the bytes
  // between kernels. BERT-base (seq 128) and ViT-B/16 on two AMX cores: see README.
  // Pools, global means and squeeze-excite scales take bf16 too, so conv nets are stored in bf16
  // throughout, NHWC between oneDNN's AMX convs (choose_layouts).
  if (precision == "bf16") t.storage_16bit = true;
  t.narrow_min_columns = 16;  // measured on mobilenet_v3_small: depthwise convs lost time
  return t;
}

Target Target::cuda() {
  Target t;
  t.name = "cuda";
  t.generated_16bit = true;
  t.generated_bool = true;
  t.library_f32_contractions = true;
  t.library_16bit_gemm = true;
  t.library_16bit_pool = true;
  t.device = true;
  t.library_16bit_conv = true;
  t.library_16bit_row_reduce = true;
  t.library_gather = true;
  t.library_split = true;
  t.generated_casts = true;
  t.generated_typed = true;
  t.generated_views = true;
  t.storage_16bit = true;
  t.gemm_gelu_erf_as_tanh_16bit = !env::flag("BRRR_NO_GEMM_GELU_16BIT");
  t.gemm_gelu_through_reshape = env::integer("BRRR_CUDA_GELU_RESHAPE") == 1;
  t.gemm_gelu_without_bias = env::integer("BRRR_CUDA_GELU_NO_BIAS") != 0;
  // On by default (BRRR_FUSED_ATTENTION=0 turns it off): with the Q/K/V merge, BERT-base bf16 on
  // an H200 ran 494 -> 434 us at batch 1 and 2.245 -> 1.642 ms at batch 32 (the merge alone
  // against both; scripts/gpu_tools/config_check.sh, docs/CUDA.md), and BERT-base and GPT-2 pass
  // --check at fp32, bf16 and fp32 with --precision bf16 with it.
  t.attention_max_head_dim = env::integer("BRRR_FUSED_ATTENTION") ? 128 : 0;
  t.sink_row_transposes = t.attention_max_head_dim > 0 && !env::flag("BRRR_NO_SINK_TRANSPOSES");
  t.attention_16bit = true;
  t.patchify_convs = !env::flag("BRRR_NO_PATCH_GEMM");
  // On by default (BRRR_CUDA_MERGE_GEMMS=0 or BRRR_NO_MERGE_GEMMS=1 turns it off), fused
  // attention or not: its descriptor reads Q, K and V at offsets into the merged product. BERT-base
  // bf16 on an H200: 610 -> 494 us at batch 1, 2.50 -> 2.25 ms at batch 32 (without attention).
  t.merge_gemms = env::integer("BRRR_CUDA_MERGE_GEMMS") && !env::flag("BRRR_NO_MERGE_GEMMS");
  t.merge_gemms_any_reader = true;
  t.gemm_transposed_constant_b = !env::flag("BRRR_NO_GEMM_TRANSPOSED_WEIGHTS");
  t.lazy_views = !env::flag("BRRR_NO_LAZY_VIEWS");
  t.rotary_halves = t.lazy_views && !env::flag("BRRR_NO_ROTARY_HALVES");
  return t;
}

Target Target::cuda(const std::string& precision) {
  Target t = cuda();
  if (precision == "tf32") t.library_tf32 = true;
  else if (precision == "bf16") t.library_math = DType::bf16;
  else if (precision == "fp16") t.library_math = DType::f16;
  else if (precision != "fp32" && !precision.empty())
    fail("unknown precision '{}' (use fp32, tf32, bf16 or fp16)", precision);
  return t;
}

bool Target::generates(ScalarOp op, DType t) const {
  if (!generated_typed) return false;
  using O = ScalarOp;
  switch (op) {  // both: what integer and float64 kernels share
    case O::Identity: case O::Add: case O::Sub: case O::Mul: case O::Div: case O::Where:
    case O::Equal: case O::Less: case O::LessOrEqual: case O::Greater: case O::GreaterOrEqual:
    case O::Min: case O::Max: case O::Neg: case O::Abs: case O::Not:
      return t == DType::i32 || t == DType::i64 || t == DType::f64;
    case O::ModNumpy: case O::ModFmod: case O::Sign:  // the integer forms
      return t == DType::i32 || t == DType::i64;
    case O::Pow: case O::Sqrt: case O::Reciprocal: case O::Exp: case O::Log: case O::Tanh:
    case O::Erf: case O::Cos: case O::Sin: case O::Floor: case O::Ceil:  // libm's double forms
      return t == DType::f64;
    default: return false;
  }
}

Target Target::reference() {
  Target t;
  t.name = "reference";
  t.plans_kernels = false;
  return t;
}

Target Target::named(const std::string& backend) {
  if (backend == "cpu") return cpu();
  if (backend == "cuda") return cuda();
  if (backend == "reference") return reference();
  fail("unknown backend '{}' (use cpu or cuda)", backend);
}

Target Target::named(const std::string& backend, const std::string& precision) {
  if (backend == "cpu") return precision == "fp32" ? cpu() : cpu(precision, CpuFeatures::host());
  if (backend == "cuda") return cuda(precision);
  if (backend == "reference" && precision != "fp32")
    fail("precision {}: the reference backend computes in float32 only", precision);
  return named(backend);
}

}  // namespace brrr::plan
