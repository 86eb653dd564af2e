// One attention block as BERT's, GPT-2's and Llama's exports write it (Q.K^T, the scale, masks,
// softmax, P.V, with the head split and merge around them), for the fused-attention tests of
// each backend (test_cuda_attention.cpp, test_cpu_attention.cpp).
#pragma once
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "brrr/graph.hpp"
#include "runtime/graph_builder.hpp"

namespace brrr::attention_test {

// Causal: a constant lower-triangular bool mask through Where(keep, scores, -inf), which the plan
// turns into the kernel's own causal mask; CausalAdd: the same as an additive constant (0 and
// the lowest float32), as the exports fold it; Bool: a constant bool mask that is not causal.
enum class Mask { None, Add, Causal, CausalAdd, Bool };

struct Spec {
  int64_t batch = 1, heads = 12, seq = 128, dim = 64;
  Mask mask = Mask::None;
  DType dt = DType::f32;
  bool split_scale = false;  // sqrt(sqrt(1/d)) on Q and on K^T (the exporters' other form)
  bool nan_guard = false;    // Softmax -> IsNaN -> Where(isnan, 0, p), as the exports write it
  int64_t kv_heads = 0;      // grouped-query attention (Llama): K and V heads repeated; 0: heads
  // 16-bit probabilities cast to float32 and back (Llama's export), float32 ones to float32
  bool cast_trip = false;
  // Q, K and V as Slices of one [B, S, (H + 2 KV) D] input, as merge_parallel_gemms leaves a
  // merged Q/K/V projection: read at offsets 0, H D and (H + KV) D into it.
  bool merged = false;
};

inline int typed_scalar(GraphBuilder& b, float v, DType dt) {
  return b.constant("c" + std::to_string(b.count++), Tensor::scalar<float>(v).cast(dt));
}
inline int reshape(GraphBuilder& b, int x, const std::vector<int64_t>& to) {
  Tensor s = Tensor::from_vector<int64_t>({int64_t(to.size())}, to);
  return b.node("Reshape", {x, b.constant("shape" + std::to_string(b.count++), s)});
}
inline int transpose(GraphBuilder& b, int x, const std::vector<int64_t>& perm) {
  return b.node("Transpose", {x}, {{"perm", perm}});
}

// One attention block as BERT's and GPT-2's exports write it, from projections [B, S, H*D]
// to the merged heads [B, S, H*D]. An additive mask is a graph input [B, 1, 1, S]; a causal one
// a constant lower-triangular bool [1, 1, S, S] through Where(keep, scores, -inf).
inline Graph attention(const Spec& s) {
  GraphBuilder b;
  const int64_t B = s.batch, H = s.heads, S = s.seq, D = s.dim;
  const int64_t KV = s.kv_heads ? s.kv_heads : H;
  int xq, xk, xv;
  if (s.merged) {
    const int64_t W = (H + 2 * KV) * D;
    int qkv = b.input("qkv", {B, S, W}, s.dt);
    auto part = [&](int64_t from, int64_t to) {
      auto c = [&](int64_t x) {
        return b.constant("i" + std::to_string(b.count++), Tensor::from_vector<int64_t>({1}, {x}));
      };
      return b.node("Slice", {qkv, c(from), c(to), c(2)});
    };
    xq = part(0, H * D), xk = part(H * D, (H + KV) * D), xv = part((H + KV) * D, W);
  } else {
    xq = b.input("q", {B, S, H * D}, s.dt), xk = b.input("k", {B, S, KV * D}, s.dt);
    xv = b.input("v", {B, S, KV * D}, s.dt);
  }
  int q = transpose(b, reshape(b, xq, {B, S, H, D}), {0, 2, 1, 3});
  int kt, v;
  if (KV == H) {
    kt = transpose(b, reshape(b, xk, {B, S, H, D}), {0, 2, 3, 1});
    v = transpose(b, reshape(b, xv, {B, S, H, D}), {0, 2, 1, 3});
  } else {  // Llama's repeat_kv: Unsqueeze, Expand, Reshape; K^T after it
    auto repeat = [&](int x) {
      int heads = transpose(b, reshape(b, x, {B, S, KV, D}), {0, 2, 1, 3});
      Tensor axes = Tensor::from_vector<int64_t>({1}, {2});
      int u = b.node("Unsqueeze", {heads, b.constant("axes" + std::to_string(b.count++), axes)});
      Tensor to = Tensor::from_vector<int64_t>({5}, {B, KV, H / KV, S, D});
      int e = b.node("Expand", {u, b.constant("to" + std::to_string(b.count++), to)});
      return reshape(b, e, {B, H, S, D});
    };
    kt = transpose(b, repeat(xk), {0, 1, 3, 2});
    v = repeat(xv);
  }
  int scores;
  if (s.split_scale) {
    const float r = std::sqrt(1.f / std::sqrt(float(D)));
    scores = b.node("MatMul", {b.node("Mul", {q, typed_scalar(b, r, s.dt)}),
                               b.node("Mul", {kt, typed_scalar(b, r, s.dt)})});
  } else {
    scores = b.node("Div", {b.node("MatMul", {q, kt}), typed_scalar(b, std::sqrt(float(D)), s.dt)});
  }
  if (s.mask == Mask::Add) scores = b.node("Add", {scores, b.input("mask", {B, 1, 1, S}, s.dt)});
  if (s.mask == Mask::Causal || s.mask == Mask::Bool) {
    Tensor keep = Tensor::empty(DType::boolean, {1, 1, S, S});
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j)
        keep.data<bool>()[i * S + j] = s.mask == Mask::Causal ? j <= i : (i + 2 * j) % 5 != 1;
    scores = b.node("Where", {b.constant("keep", keep), scores, typed_scalar(b, -INFINITY, s.dt)});
  }
  if (s.mask == Mask::CausalAdd) {
    Tensor m = Tensor::empty(DType::f32, {1, 1, S, S});
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j)
        m.data<float>()[i * S + j] = j <= i ? 0.f : std::numeric_limits<float>::lowest();
    scores = b.node("Add", {scores, b.constant("causal", m.cast(s.dt))});
  }
  int p = b.node("Softmax", {scores}, {{"axis", int64_t(-1)}});
  if (s.nan_guard)
    p = b.node("Where", {b.node("IsNaN", {p}), typed_scalar(b, 0.f, s.dt), p});
  if (s.cast_trip && s.dt == DType::f32)  // GPT-2's: a Cast to the type it has
    p = b.node("Cast", {p}, {{"to", int64_t(1)}});
  else if (s.cast_trip)
    p = b.node("Cast", {b.node("Cast", {p}, {{"to", int64_t(1)}})},
               {{"to", int64_t(s.dt == DType::bf16 ? 16 : 10)}});
  int ctx = b.node("MatMul", {p, v});
  b.output(reshape(b, transpose(b, ctx, {0, 2, 1, 3}), {B, S, H * D}));
  return b.g;
}

}  // namespace brrr::attention_test
