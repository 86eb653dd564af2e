// A Llama decoder's glue as the exports write it (embedding Gather, RMSNorm in float32, q and k
// heads with the rotary embedding's rotate_half, repeat_kv), shared by the CPU views test and the
// lazy views test.
#pragma once
#include <limits>

#include "runtime/graph_builder.hpp"

namespace brrr::llama_glue_test {

constexpr int64_t kSeq = 5, kHidden = 16, kHeads = 4, kKvHeads = 2, kHeadDim = 4, kVocab = 11;

inline int ints(GraphBuilder& b, const char* name, std::vector<int64_t> v) {
  return b.constant(name, Tensor::from_vector<int64_t>({int64_t(v.size())}, v));
}

inline Tensor ramp(const Shape& s, int seed, DType t = DType::f32) {
  Tensor r = Tensor::empty(DType::f32, s);
  float* p = r.data<float>();
  for (int64_t i = 0; i < r.numel(); ++i) p[i] = float((i * 7 + seed) % 13) * 0.25f - 1.5f;
  return r.cast(t);
}

// rotate_half(x) = concat(-x[..., d/2:], x[..., :d/2]) on the last axis, as the exports write it.
inline int rotate_half(GraphBuilder& b, int x) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  int lo = b.node("Slice", {x, ints(b, "s0", {0}), ints(b, "e0", {kHeadDim / 2}), ints(b, "a0", {-1}),
                            ints(b, "p0", {1})});
  int hi = b.node("Slice", {x, ints(b, "s1", {kHeadDim / 2}), ints(b, "e1", {big}),
                            ints(b, "a1", {-1}), ints(b, "p1", {1})});
  return b.node("Concat", {b.node("Neg", {hi}), lo}, {{"axis", int64_t(-1)}});
}

// ids [1, S] -> embedding -> RMSNorm (in float32) -> q [1, H, S, D] and k [1, KvH, S, D] with
// rotary, k repeated to H heads -> scores q . k^T [1, H, S, S]; weights and activations in `t`
// (float32, or bfloat16 as the bf16 exports store them).
inline Graph llama_glue(DType t = DType::f32) {
  GraphBuilder b;
  const int64_t to_t = t == DType::bf16 ? 16 : 1;  // ONNX's code for t
  int ids = b.input("ids", {1, kSeq}, DType::i64);
  int x = b.node("Gather", {b.constant("table", ramp({kVocab, kHidden}, 3, t)), ids});
  int xf = b.node("Cast", {x}, {{"to", int64_t(1)}});
  int var = b.node("ReduceMean", {b.node("Pow", {xf, b.scalar(2.f)}), ints(b, "ax", {-1})});
  int rms = b.node("Sqrt", {b.node("Add", {var, b.scalar(1e-6f)})});
  int h = b.node("Mul", {b.constant("w", ramp({kHidden}, 5, t)),
                         b.node("Cast", {b.node("Div", {xf, rms})}, {{"to", to_t}})});
  auto heads = [&](int v, int64_t n, const char* name) {
    int r = b.node("Reshape", {v, ints(b, name, {1, kSeq, n, kHeadDim})});
    return b.node("Transpose", {r}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  int q = heads(b.node("MatMul", {h, b.constant("wq", ramp({kHidden, kHeads * kHeadDim}, 7, t))}),
                kHeads, "qs");
  int k = heads(b.node("MatMul", {h, b.constant("wk", ramp({kHidden, kKvHeads * kHeadDim}, 9, t))}),
                kKvHeads, "ks");
  int cos = b.constant("cos", ramp({kSeq, kHeadDim}, 1, t));
  int sin = b.constant("sin", ramp({kSeq, kHeadDim}, 2, t));
  auto rope = [&](int v) {
    return b.node("Add", {b.node("Mul", {v, cos}), b.node("Mul", {rotate_half(b, v), sin})});
  };
  int qr = rope(q), kr = rope(k);
  int ku = b.node("Unsqueeze", {kr, ints(b, "u", {2})});
  int ke = b.node("Expand", {ku, ints(b, "es", {1, kKvHeads, kHeads / kKvHeads, kSeq, kHeadDim})});
  int kk = b.node("Reshape", {ke, ints(b, "rs", {1, kHeads, kSeq, kHeadDim})});
  b.output(kk);  // the repeated keys themselves: a stored view
  int kt = b.node("Transpose", {kk}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  b.output(b.node("MatMul", {qr, kt}));
  return b.g;
}

}  // namespace brrr::llama_glue_test
