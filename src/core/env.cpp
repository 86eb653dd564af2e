#include "core/env.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "brrr/error.hpp"

namespace brrr::env {

namespace {

constexpr int64_t kMaxI = std::numeric_limits<int64_t>::max();

const Switch kSwitches[] = {
    {"BRRR_DEBUG", Kind::Int, "0", "", 0, 2,
     "1: one line per kernel on stderr; 2: also the IR after each pass and the plan"},
    {"BRRR_DUMP_DIR", Kind::Path, "", "", 0, 0,
     "writes every generated kernel source (C++ and CUDA) there, and keeps failed ones"},
    {"BRRR_DISABLE_FUSION", Kind::Flag, "0", "", 0, 0, "one generated kernel per op"},
    {"BRRR_DISABLE_GRAPHS", Kind::Flag, "0", "", 0, 0, "CUDA: no CUDA Graphs"},
    {"BRRR_DISABLE_CONCAT_SPLIT", Kind::Flag, "0", "", 0, 0,
     "CPU: keep channel Concats that feed group-1 convs"},
    {"BRRR_PRECISION_GEMMS_ONLY", Kind::Flag, "0", "", 0, 0,
     "--precision bf16|fp16 reaches only the matrix products, not the whole model (CUDA, and "
     "the CPU at bf16: float32 storage, operands cast per call)"},
    {"BRRR_MAX_TENSOR_BYTES", Kind::Size, "8589934592", "", 1, kMaxI,
     "largest tensor brrr allocates, in bytes"},
    {"BRRR_COMPILE_TIMEOUT", Kind::Seconds, "300", "", 1, 86400,
     "time limit of one run-time C++ or NVRTC compile"},
    {"BRRR_CXX", Kind::Path, "", "", 0, 0,
     "C++ compiler for generated kernels (else $CXX, else g++)"},
    {"BRRR_DISABLE_CACHE", Kind::Flag, "0", "", 0, 0,
     "never read or write the on-disk kernel caches"},
    {"BRRR_DISABLE_GEMM_CHAIN", Kind::Flag, "0", "", 0, 0,
     "CUDA: small-batch GEMM chains as one cuBLASLt call per layer"},
    {"BRRR_MAP_EXTERNAL", Kind::Int, "1", "", 0, 1,
     "ONNX external data: 1 maps the file (copy-on-write) and uses 64-byte aligned tensors in "
     "place; 0 reads every tensor into its own memory"},
    {"BRRR_GEMM_TUNE", Kind::Int, "0", "", 0, 1,
     "CUDA: 0 uses cuBLASLt's first heuristic algorithm for every GEMM (no timing at build, no "
     "tuning cache); 1 times the candidates once per shape and caches the choice"},
    {"BRRR_SMALL_M_GEMM", Kind::Int, "3", "", 0, 3,
     "CUDA: 16-bit GEMMs of few rows whose cuBLASLt tiles would leave most SMs idle run as "
     "brrr's split-K cluster kernel: 3 (default) those of at most 16 rows (a classifier head at "
     "batch 1), 1 those of up to 256 rows (experimental: slower than cuBLASLt at a "
     "transformer's 128), 2 wherever it can run (K and N multiples of 8), 0 never"},
    {"BRRR_SMALL_M_BN", Kind::Enum, "", "32|64|128", 0, 0,
     "CUDA (experimental): the small-M GEMM's output columns per CTA (unset: 128 for outputs of "
     "2048 columns or more, else 64)"},
    {"BRRR_SMALL_M_STAGES", Kind::Int, "0", "", 0, 8,
     "CUDA (experimental): the small-M GEMM's pipeline stages of 64-wide K steps (0: the "
     "kernel's default, 3 for the split-K kernel (two CTAs per SM; more may fit only one), 4 for "
     "the multicast kernel (at least 3))"},
    {"BRRR_SMALL_M_ONE_PER_SM", Kind::Flag, "0", "", 0, 0,
     "CUDA (experimental): each small-M GEMM CTA asks for an SM's whole shared memory, so no "
     "two share an SM"},
    {"BRRR_SMALL_M_SPLITS", Kind::Int, "16", "", 1, 16,
     "CUDA (experimental): the most CTAs the small-M GEMM splits K over (1: no split, no "
     "split-K sum; the split-K kernel splits over at most 8, the multicast kernel 16)"},
    {"BRRR_SMALL_M_KERNEL", Kind::Enum, "split", "split|multicast", 0, 0,
     "CUDA (experimental): the small-M GEMM's kernel: split sums its K split over a cluster; "
     "multicast (K a multiple of 64) shares each copy of A among a cluster of neighbouring "
     "column tiles and sums its K split through a float32 workspace"},
    {"BRRR_SMALL_M_CLUSTER", Kind::Enum, "4", "1|2|4|8", 0, 0,
     "CUDA (experimental): the multicast small-M GEMM's cluster: CTAs that share each copy of A"},
    {"BRRR_CUDA_PDL", Kind::Int, "1", "", 0, 2,
     "CUDA (Hopper and newer): 1 launches brrr's own kernels (fused, attention, the padded rows' "
     "copy, the small-M GEMM) with programmatic dependent launch, so each is scheduled while the "
     "kernel before it drains and waits on the device for its results; 2 (experimental) also "
     "lets each of them start the next one right after its own wait, so the next is resident "
     "early and the small-M GEMM loads its weights while the kernel before it runs; 0 launches "
     "them after it completes"},
    {"BRRR_L2_PREFETCH", Kind::Int, "0", "", 0, 3,
     "CUDA (experimental, measured slower on BERT-base at batch 1): the weights of GEMMs and "
     "convs that read more weight than activation bytes are brought into L2 on a side stream "
     "while the steps before them run: 1 by the TMA unit's bulk prefetches, 2 by a prefetch per "
     "128-byte line, 3 by loads; 0 not"},
    {"BRRR_GEMM_PAD_N", Kind::Int, "1", "", 0, 3,
     "CUDA: a GEMM whose output rows would not be 16-byte aligned (GPT-2's 50257 logits): 1 "
     "runs on zero-padded weights into aligned rows, then copies the real columns out; 2 reads "
     "the padded weights and writes its output in place at the odd pitch; 3 (measured slower) "
     "writes it in place in row phases, one GEMM per row residue mod 16 bytes / element from "
     "its rows' first aligned column, the columns before in a small kernel; 0 runs it on the "
     "odd pitch throughout"},
    {"BRRR_GEMM_PAD_OUT", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 leaves such a GEMM's output in its padded rows when it is a model output no other "
     "kernel reads (GPT-2's logits): the plan does not copy the real columns out; run() does, "
     "before its copy to the host, and run_device() into the caller's buffer (in place of its "
     "device-to-device copy); 0 copies them out in the plan"},
    {"BRRR_CUDA_GELU_RESHAPE", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 lets a GELU reach a 16-bit GEMM's epilogue through a Reshape that keeps the rows "
     "(GPT-2's MLP); 0 keeps it a kernel of its own"},
    {"BRRR_CUDA_GELU_NO_BIAS", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 lets a GELU reach a 16-bit GEMM's epilogue "
     "when the GEMM has no bias (a zero bias is added; the dynamo export of a model whose biases "
     "are zero); 0 keeps it a kernel of its own"},
    {"BRRR_CONV_TUNE", Kind::Int, "0", "", 0, 1,
     "CUDA (opt-in; measured slower on ResNet-50 bf16, 0.46 -> 2.3 ms): 1 has cuDNN time every "
     "convolution algorithm once at build (cudnnFindConvolutionForwardAlgorithm) and takes the "
     "fastest that fits"},
    {"BRRR_CUDA_NHWC", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 keeps 16-bit values that only cuDNN convs, pools and GlobalAveragePool produce "
     "and read channels-last (NHWC, KRSC weights); 0 runs every conv on NCHW data"},
    {"BRRR_CUDA_WIDE_ROWS", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 gives generated row kernels (LayerNorm, RMSNorm, softmax) with few long rows more "
     "threads per row (Llama-1B bf16 at batch 1 on an H200: 1.788 -> 1.680 ms); 0 the fixed "
     "quarter-row block"},
    {"BRRR_CONV_FUSE", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 runs a conv's bias, residual add and ReLU inside cuDNN's call "
     "(cudnnConvolutionBiasActivationForward) where cuDNN takes them; 0 always as brrr's "
     "epilogue kernel after the conv"},
    {"BRRR_CONV_PAD_C", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 zero-pads the channels of a channels-last conv's transposed NCHW input (an RGB "
     "image's 3) to a multiple of 8, with zero weights, so cuDNN runs it on Tensor Cores; 0 "
     "keeps the real count"},
    {"BRRR_CONV_GEMM", Kind::Int, "2", "", 0, 3,
     "CUDA: 1 runs a 16-bit 1x1 conv whose channel counts are not all multiples of 8 "
     "(ShuffleNetV2's 58, 116, 232) as cuBLASLt GEMMs, one over the pixels of channels-last data "
     "or one per image of NCHW data; 2 also times every other channels-last 16-bit conv of one "
     "group as im2col and one GEMM against cuDNN at build (a CUDA graph of calls) and keeps the "
     "faster (3: the GEMM, untimed); 0 runs every conv on cuDNN"},
    {"BRRR_CONV_DIRECT", Kind::Int, "1", "", 0, 2,
     "CUDA: 1 also times brrr's direct conv kernel for a "
     "16-bit conv on at most 8 channels of an NCHW input (an RGB stem: the input read as it is, "
     "no transpose or im2col kernel, bias and activation in its epilogue) against the other paths "
     "at build and keeps it where it is 10% faster; 2 takes it untimed; 0 never"},
    {"BRRR_FUSED_ATTENTION", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 runs each attention block as one fused kernel; 0 as separate GEMM, softmax and "
     "head-transpose kernels"},
    {"BRRR_NO_SINK_TRANSPOSES", Kind::Flag, "0", "", 0, 0,
     "CUDA: a Transpose of rows before a MatMul with a constant weight stays before it (ViT's "
     "x -> [S, B, E] before its in-projection) instead of joining the attention's q/k/v views"},
    {"BRRR_NO_PATCH_GEMM", Kind::Flag, "0", "", 0, 0,
     "CUDA: a Conv whose strides equal its kernel (ViT's patch embedding) stays a cuDNN conv "
     "instead of a transpose into patches and a GEMM"},
    {"BRRR_NO_LAZY_VIEWS", Kind::Flag, "0", "", 0, 0,
     "CUDA: a Transpose, Slice, Expand or Reshape of a buffer becomes a kernel of its own (with "
     "its first readers) instead of a strided load in each kernel that reads it, and pointwise "
     "nodes of buffers alone start kernels of their own"},
    {"BRRR_CPU_LAZY_VIEWS", Kind::Flag, "0", "", 0, 0,
     "CPU, opt-in: lazy views and deferred pointwise nodes as on CUDA (BRRR_NO_LAZY_VIEWS), "
     "with the rotary embedding's halves rewrite"},
    {"BRRR_NO_ROTARY_HALVES", Kind::Flag, "0", "", 0, 0,
     "CUDA: the rotary embedding's rotate_half keeps its Slices, Neg and Concat (a library "
     "concat kernel) instead of a Where over x viewed as [..., 2, D/2]"},
    {"BRRR_ATTN_FAST_TILES", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 lets the flash attention kernel skip per-score bounds and mask work on whole "
     "in-range tiles, warps with no live query row and key groups past the sequence (ViT's 197); "
     "0 checks every score"},
    {"BRRR_ATTN_FULL_TILES", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 runs the flash attention kernel's plain tiles (every row and key in range, no "
     "mask or causal cut) through MMA loops without a branch per key group, one block the "
     "compiler schedules whole; 0 keeps the branches on every tile (measured 5-8% faster on "
     "ViT-B/16 on an H100 before the tile copies were simplified; not measured since)"},
    {"BRRR_ATTN_KSPLIT", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 lets the flash attention kernel split each 16 query rows' key tiles over two warps "
     "where one-warp blocks would not fill the SMs twice over (BERT-base at batch 1), merging "
     "their partial softmax sums in shared memory (the default); 0 keeps one warp a row group"},
    {"BRRR_ATTN_WARPS", Kind::Int, "0", "", 0, 4,
     "CUDA: warps (16 query rows each) per flash attention block, 1, 2 or 4, for every "
     "attention; 0 picks per geometry (4 where the grid keeps two blocks per SM)"},
    {"BRRR_ATTN_CUDNN", Kind::Int, "1", "", 0, 2,
     "CUDA: 16-bit fused attention on cuDNN's SDPA engines where cuDNN takes it (additive or "
     "causal masks; the frontend headers at build time): 1 where it times faster than brrr's "
     "flash kernel on the geometry, 2 always, 0 never"},
    {"BRRR_CUDNN_RUNTIME_COMPILED", Kind::Int, "2", "", 0, 2,
     "CUDA: cuDNN engines that compile at run time (NVRTC): 2 builds cuDNN's attention plan in "
     "a forked child (deviceless, cuDNN 9.8+) where such engines may compile, and loads the "
     "compiled plan, cached on disk (H100, cuDNN 9.19, bf16: ViT-B/16 b32 2.89 -> 2.47 ms, b1 "
     "0.580 -> 0.501); 1 lets cuDNN compile them inside brrr's process (NVRTC there damages "
     "libcuda's state: a SIGSEGV in a later module load); 0 leaves them out, and attention "
     "for which cuDNN then has no engine runs on brrr's flash kernel"},
    {"BRRR_ATTENTION_CUDA_CORES", Kind::Flag, "0", "", 0, 0,
     "CUDA: fused attention on CUDA cores even where its Tensor Core kernel applies"},
    {"BRRR_CUDNN_LIB", Kind::Path, "libcudnn.so.9", "", 0, 0, "CUDA: the cuDNN library to load"},
    {"BRRR_CUPTI_LIB", Kind::Path, "", "", 0, 0,
     "CUDA: the CUPTI library the doctor's profile loads (default: searched in the toolkit)"},
    {"BRRR_DISABLE_WINOGRAD", Kind::Flag, "0", "", 0, 0, "CPU: no Winograd 3x3 convs"},
    {"BRRR_NO_FORWARD_IDENTITIES", Kind::Flag, "0", "", 0, 0,
     "CPU: an Identity node stays a node (a copy kernel) instead of its readers reading its input"},
    {"BRRR_NO_SQUARE_POWS", Kind::Flag, "0", "", 0, 0,
     "CPU: Pow(x, 2) stays a Pow (a powf call in generated code) instead of Mul(x, x)"},
    {"BRRR_NO_CHANNEL_SHUFFLE_GATHERS", Kind::Flag, "0", "", 0, 0,
     "CPU: a channel shuffle stays Reshape, Transpose, Reshape (and its Slices) instead of "
     "channel Gathers"},
    {"BRRR_NO_CONV_SILU", Kind::Flag, "0", "", 0, 0,
     "CPU: a conv's Sigmoid, or its x * sigmoid(x) (SiLU), runs as a generated kernel, not as "
     "oneDNN's logistic or swish post-op"},
    {"BRRR_CONV_LAYOUT", Kind::Enum, "", "nhwc|blocked|plain", 0, 0,
     "CPU: activation layout between library kernels (default: by CPU)"},
    {"BRRR_NO_NHWC", Kind::Flag, "0", "", 0, 0, "CPU: every activation NCHW"},
    {"BRRR_NO_PREPACK", Kind::Flag, "0", "", 0, 0,
     "CPU: oneDNN matmuls read constant weights as stored"},
    {"BRRR_NO_WEIGHT_PITCH_PAD", Kind::Flag, "0", "", 0, 0,
     "CPU: prepacked plain weights keep a row pitch that is a multiple of 1 KiB (not padded by "
     "64 bytes)"},
    {"BRRR_CPU_FUSED_ATTENTION", Kind::Int, "2", "", 0, 2,
     "CPU: float32 scaled dot-product attention (Q.K^T, masks, softmax, P.V) as one kernel: 2 "
     "where the keys are many (the scores outgrow the caches), 1 always, 0 never (two GEMMs "
     "around a softmax kernel)"},
    {"BRRR_NO_GEMM_VIEWS", Kind::Flag, "0", "", 0, 0,
     "CPU: Reshape / Transpose / scalar Mul before a MatMul run as their own kernels"},
    {"BRRR_NO_GEMM_VIEWS_16BIT", Kind::Flag, "0", "", 0, 0,
     "CPU: Reshape / Transpose / scalar Mul before a MatMul on bf16 or fp16 data run as their "
     "own kernels (float32 views stay)"},
    {"BRRR_NO_GEMM_POST_OPS_16BIT", Kind::Flag, "0", "", 0, 0,
     "CPU: a bf16 or fp16 GEMM's epilogue stops at a row Reshape or a residual Add (float32 "
     "GEMMs take them)"},
    {"BRRR_NO_GEMM_GELU_TANH", Kind::Flag, "0", "", 0, 0,
     "CPU: the exported tanh GELU after a GEMM runs as a generated kernel"},
    {"BRRR_NO_ROW_CACHE", Kind::Flag, "0", "", 0, 0,
     "CPU: row kernels compute a reduction's element argument again where a later loop needs it"},
    {"BRRR_NO_PREFER_512", Kind::Flag, "0", "", 0, 0,
     "CPU: generated kernels vectorize with the compiler's default width, not 512-bit"},
    {"BRRR_VIEW_CLONES", Kind::Flag, "0", "", 0, 0,
     "CPU: a view read by several view chains into MatMuls is cloned per chain (no copy kernel)"},
    {"BRRR_NO_GEMM_TRANSPOSED_WEIGHTS", Kind::Flag, "0", "", 0, 0,
     "CUDA: a MatMul on Transpose(constant) (the dynamo export's tied lm_head) runs the "
     "Transpose as a kernel on every call instead of uploading the weight transposed"},
    {"BRRR_NO_MERGE_GEMMS", Kind::Flag, "0", "", 0, 0,
     "MatMuls on one activation (Q, K, V) stay separate GEMMs"},
    {"BRRR_CUDA_MERGE_GEMMS", Kind::Int, "1", "", 0, 1,
     "CUDA: 1 merges the MatMuls on one activation (Q, K, V) into one GEMM as on the CPU; 0 "
     "keeps them apart (BRRR_NO_MERGE_GEMMS=1 keeps them apart on every backend)"},
    {"BRRR_NO_GEMM_GELU_16BIT", Kind::Flag, "0", "", 0, 0,
     "CUDA: the erf GELU after a 16-bit GEMM runs as its own kernel, not the tanh epilogue"},
    {"BRRR_THREADS", Kind::Int, "", "", 1, 1024,
     "CPU: threads a session runs on (unset: the CPUs of the affinity mask)"},
    {"BRRR_NO_LOAD_ADAPTIVE", Kind::Flag, "0", "", 0, 0,
     "CPU: threaded oneDNN kernels never fall back to their one-thread twins under load"},
    {"BRRR_NO_WARMUP", Kind::Flag, "0", "", 0, 0,
     "CPU: no kernel runs once on zeros at build (its first execution is the first run's)"},
};

const Switch& find(const char* name, Kind want) {
  for (const Switch& s : kSwitches)
    if (std::strcmp(s.name, name) == 0) {
      BRRR_ASSERT(s.kind == want, "switch read with the wrong type");
      return s;
    }
  BRRR_ASSERT(false, "switch not declared in core/env.cpp");
  __builtin_unreachable();
}

// The value, or "" when unset (an empty value means unset too).
std::string value_of(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Strict decimal: digits only (no sign, spaces or suffix), within [lo, hi].
int64_t number(const Switch& s, const char* what) {
  std::string v = value_of(s.name);
  if (v.empty()) v = s.default_value;
  bool digits = !v.empty() && v.size() <= 19 && v.find_first_not_of("0123456789") == v.npos;
  errno = 0;
  long long n = digits ? std::strtoll(v.c_str(), nullptr, 10) : 0;
  if (!digits || errno != 0 || n < s.lo || n > s.hi)
    fail("{}='{}' is not valid: expected {} from {} to {}", s.name, v, what, s.lo, s.hi);
  return n;
}

}  // namespace

const std::vector<Switch>& switches() {
  static const std::vector<Switch> all(std::begin(kSwitches), std::end(kSwitches));
  return all;
}

bool flag(const char* name) {
  const Switch& s = find(name, Kind::Flag);
  std::string v = value_of(s.name);
  if (v.empty() || v == "0") return false;
  if (v == "1") return true;
  fail("{}='{}' is not valid: expected 1 (on), 0 or unset (off)", s.name, v);
}

int64_t integer(const char* name) {
  return number(find(name, Kind::Int), "a whole number");
}

size_t size(const char* name) {
  return size_t(number(find(name, Kind::Size), "a size in bytes"));
}

int seconds(const char* name) {
  return int(number(find(name, Kind::Seconds), "a whole number of seconds"));
}

std::string text(const char* name) {
  const Switch* s = nullptr;
  for (const Switch& e : kSwitches)
    if (std::strcmp(e.name, name) == 0) s = &e;
  BRRR_ASSERT(s && (s->kind == Kind::Path || s->kind == Kind::Enum), "switch is not text");
  std::string v = value_of(s->name);
  if (v.empty()) return s->default_value;
  if (s->kind == Kind::Enum) {
    std::string acc = s->accepted;
    bool ok = false;
    for (size_t p = 0; p <= acc.size();) {
      size_t q = acc.find('|', p);
      if (q == acc.npos) q = acc.size();
      ok = ok || (acc.compare(p, q - p, v) == 0 && q - p == v.size());
      p = q + 1;
    }
    if (!ok) fail("{}='{}' is not valid: expected one of {} (or unset)", s->name, v, acc);
  }
  return v;
}

std::optional<std::string> raw(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

std::string user_cache_dir() {
  std::string x = value_of("XDG_CACHE_HOME"), h = value_of("HOME");
  if (!x.empty()) return x + "/brrr";
  if (!h.empty()) return h + "/.cache/brrr";
  return "";
}

std::string temp_dir() {
  std::string t = value_of("TMPDIR");
  return t.empty() ? "/tmp" : t;
}

std::string cxx() {
  std::string b = text("BRRR_CXX"), c = value_of("CXX");
  if (!b.empty()) return b;
  return c.empty() ? "g++" : c;
}

}  // namespace brrr::env
