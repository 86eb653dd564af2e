// Typed library descriptors (DESIGN.md section 3): what a library call needs of a kernel, built
// once at plan time from its node's attributes and shapes (describe_library,
// src/passes/describe_library.cpp) and stored on the plan kernel. Backends read these, never ONNX
// attributes. A descriptor's `why` is non-empty when no library call can express the kernel (every
// backend then runs it by reference); what only one backend cannot do (a dtype, transA on
// cuBLASLt) that backend decides from the descriptor's fields.
#pragma once
#include <array>
#include <string>
#include <variant>
#include <vector>

#include "brrr/graph.hpp"
#include "ops/window.hpp"
#include "plan/kernel_ir.hpp"

namespace brrr::plan {

// The activation a library call applies last (after the bias and a Conv's residual sum).
using brrr::Activation;  // brrr/op.hpp: an op's OpDef says which activation it is

// Bias, residual and activation fused into the call (the fusion pass's epilogue).
struct Epilogue {
  int bias = -1;  // value id: one value per output column (GEMM) or channel (Conv)
  int sum = -1;   // a same-shape value added before the activation (Conv; GEMM on the CPU)
  Activation act = Activation::None;
  float alpha = 0, beta = 0;  // HardSigmoid: max(0, min(1, alpha*x + beta)); Clip: [alpha, beta]
  std::string act_name;       // the plan's name for it ("" for none), for messages
};

// MatMul or Gemm: out = act(A' * B' + bias), A' = transA ? A^T : A (likewise B).
struct GemmDesc {
  int a = -1, b = -1, out = -1;
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 1;
  int c = -1;  // Gemm's C input (-1: none); when present it is the epilogue's bias
  Epilogue epi;
  // As `batch` row-major GEMMs out[i] (M x N) = A'[i] (M x K) * B'[i] (K x N), with these element
  // strides between batches (stride_b 0: B is 2-D and shared; a MatMul with a 2-D B folds A's
  // batch into M). strided_why says why not (vectors, broadcast batch dims): oneDNN takes those.
  int64_t M = 0, N = 0, K = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  std::string strided_why;
  // A MatMul operand read through a strided view of an earlier buffer (plan/operand_view.hpp;
  // a and b then name that buffer): its shape as the GEMM reads it and its element strides.
  // Empty: the operand is its value, row-major (or transposed by trans_a / trans_b).
  Shape a_dims, b_dims;
  std::vector<int64_t> a_strides, b_strides;
  int64_t a_offset = 0, b_offset = 0;  // elements into a's and b's buffers (a view's Gather)
  float scale = 1;  // the views' scalar Muls: out = act(scale * A' * B' + sum); no bias then
  // The product written through a view of `out` (its Reshapes and Transposes in the kernel):
  // the product's shape and where each element lands in out. Empty: out, row-major.
  Shape out_dims;
  std::vector<int64_t> out_strides;
  std::string why;  // alpha != 1, or a C that is not a bias row with beta 1
  // The type A and B are read in (f32, or bf16 / fp16 on a Target whose library_math is: the
  // precision pass); the accumulation, bias, post-ops and output stay float32.
  DType math = DType::f32;
  bool tf32 = false;  // float32 operands rounded to tf32 on Tensor Cores (Target::library_tf32)
};

// Conv: out = act(conv(x, w) + bias + sum) in `groups` groups.
struct ConvDesc {
  int x = -1, w = -1;
  int y = -1;    // the Conv node's own output
  int out = -1;  // the kernel's output (after the epilogue)
  int64_t groups = 1;
  ops::Window window;  // over x's spatial dims; valid when why is empty
  Epilogue epi;        // bias: the Conv's B input
  std::string why;     // no X or W, ranks, window attributes, a bias both in B and fused
  DType math = DType::f32;  // the type X and W are read in, as GemmDesc::math
  bool tf32 = false;        // as GemmDesc::tf32
};

// MaxPool / AveragePool.
struct PoolDesc {
  bool max = true;
  int x = -1, y = -1;
  bool indices_used = false;  // MaxPool's second output is read
  int64_t storage_order = 0;
  bool ceil_mode = false;
  bool include_pad = false;  // AveragePool's count_include_pad
  ops::Window window;        // over x's spatial dims; valid when why is empty
  std::string why;
};

// Concat along `axis` (normalized to [0, rank)).
struct ConcatDesc {
  int out = -1;
  int64_t axis = 0;
  std::vector<int> inputs;  // every input, in order
  std::string why;          // axis out of range, a missing input
};

// Split along `axis` (normalized): each present output is `outer` rows of its share of the axis,
// cut from the input's rows in order (outputs holds -1 where one is omitted; its share is still
// skipped, so `sizes` gives every share along the axis).
struct SplitDesc {
  int x = -1;
  int64_t axis = 0;
  std::vector<int> outputs;
  std::vector<int64_t> sizes;
  std::string why;  // axis out of range, shares that do not add up
};

// GlobalAveragePool / ReduceMean / ReduceSum over trailing axes: y[r] = scale * sum_c x[r, c]
// (the fusion pass sends only trailing reductions here).
struct RowReduceDesc {
  int x = -1, y = -1;
  int64_t rows = 0, cols = 0;
  float scale = 1;
  std::string why;
};

// Mul of x [N, C, H, W] by s [N, C, 1, 1] (squeeze-excite's scale), in either input order.
struct ChannelScaleDesc {
  int x = -1, s = -1, y = -1;
  int64_t images = 0, channels = 0, pixels = 0;
  std::string why;
};

// Gather along `axis` (normalized): y[o, i, r] = x[o, idx[i], r] over `outer` leading slices,
// `axis_len` entries along the axis and `inner` elements per entry.
struct GatherDesc {
  int x = -1, indices = -1, y = -1;
  int64_t axis = 0, outer = 1, axis_len = 0, inner = 1;
  std::string why;
};

// Scaled dot-product attention, MatMul(Q, K^T) -> scale -> mask -> Softmax -> MatMul(., V), as
// one kernel (plan/attention.cpp finds it; CUDA's device/attention.cuh runs it). Per batch b,
// head h and query row i:
//   s[j] = scale * dot(Q[b,h,i,:], K[b,h/group,j,:]), then where(keep[b,h,i,j] == keep_when, s[j],
//   fill) when there is a bool mask, then + mask[b,h,i,j] when there is an additive one, then
//   -inf for j > i + seq_k - seq_q when causal; out[b,h,i,:] = softmax(s) . V[b,h/group,:,:].
// Q, K, V and out are read and written through element strides over (batch, head, seq, dim) of
// their buffers from an element offset into each (the head split and merge around attention are
// views, no copies; Q, K and V may be parts of one merged Q/K/V product); the masks
// through strides over (batch, head, query, key), 0 where they broadcast.
enum class AttentionMask { None, Add, Causal };
struct AttentionDesc {
  int q = -1, k = -1, v = -1, out = -1;  // buffers (value ids)
  int mask = -1;                          // additive mask buffer (-1: none)
  int keep = -1;                          // bool mask buffer (-1: none)
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 0, seq_k = 0, head_dim = 0;
  std::array<int64_t, 4> q_strides{}, k_strides{}, v_strides{}, out_strides{};
  int64_t q_offset = 0, k_offset = 0, v_offset = 0;  // elements into q, k and v
  std::array<int64_t, 4> mask_strides{}, keep_strides{};
  float scale = 1;
  float fill = 0;      // the bool mask's value where keep != keep_when
  bool keep_when = true;
  bool causal = false;  // a lower-triangular mask, computed from the indices
  // Softmax's NaN rows (every score -inf) become 0, as the exporters' IsNaN -> Where writes it.
  bool zero_empty_rows = false;
  DType dtype = DType::f32;  // of Q, K, V, out and the additive mask
  AttentionMask kind() const {
    return mask >= 0 ? AttentionMask::Add : causal ? AttentionMask::Causal : AttentionMask::None;
  }
};

// One of the above. A struct (not an alias) so that kernel_ir.hpp can declare it.
struct LibraryDesc : std::variant<std::monostate, GemmDesc, ConvDesc, PoolDesc, ConcatDesc,
                                  RowReduceDesc, ChannelScaleDesc, GatherDesc, SplitDesc,
                                  AttentionDesc> {
  using variant::variant;
};

// The descriptor of kernel k when it is a D, else nullptr.
template <class D>
const D* desc_of(const Kernel& k) {
  return k.lib ? std::get_if<D>(static_cast<const LibraryDesc::variant*>(k.lib.get())) : nullptr;
}

// Descriptors of one node from its attributes and the shapes it reads and writes (public for the
// tests of each backend's geometry mapping). Bad attributes land in `why`; nothing throws.
ConvDesc describe_conv(const Node& n, const Shape& x, const Shape& w);
PoolDesc describe_pool(const Graph& g, const Node& n);

// Sets the descriptor of every Library kernel, and of single-node Reference kernels a backend may
// still run on its own device path (Gather). Called once, at the end of build_plan. With
// `views_16bit`, GEMM operand and result views of 16-bit data are read (Target's
// gemm_operand_views_16bit: the fusion pass put them in the kernel).
void describe_library(const Graph& g, Plan& plan, bool views_16bit = false);

struct Target;
// The precision pass (passes/precision.cpp): the float32 GEMMs and convs a library runs read
// their operands in target.library_math or as tf32 (GemmDesc::math / tf32, ConvDesc's). Returns
// how many.
int choose_precision(const Graph& g, Plan& plan, const Target& target);

}  // namespace brrr::plan
