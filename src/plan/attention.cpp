// Attention blocks for one fused kernel (plan/attention.hpp): from each Softmax, back through
// the mask and scale nodes to Q.K^T, forward through the exporters' NaN guard to P.V, then the
// operands' head-split views and the result's head-merge view.
#include "plan/attention.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "plan/operand_view.hpp"

namespace brrr::plan {

namespace {

using Strides4 = std::array<int64_t, 4>;

bool attention_dtype(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

class Matcher {
 public:
  Matcher(const Graph& g, int64_t max_d, const std::function<bool(int)>& free)
      : g_(g), max_d_(max_d), free_(free), consumers_(g.values.size()) {
    for (size_t n = 0; n < g.nodes.size(); ++n)
      for (int i : g.nodes[n].inputs)
        if (i >= 0) consumers_[size_t(i)].push_back(int(n));
    graph_out_.insert(g.outputs.begin(), g.outputs.end());
  }

  // The block at Softmax sm: first with operand views that may share their source side (ViT's
  // q, k and v picked by three Gathers out of one Squeeze of the in-projection), then, when that
  // leaves a shared node read outside the block, with views of their own only.
  std::optional<AttentionMatch> match(int sm) {
    share_views_ = true;
    if (std::optional<AttentionMatch> m = match_block(sm)) return m;
    share_views_ = false;
    return match_block(sm);
  }

 private:
  std::optional<AttentionMatch> match_block(int sm) {
    nodes_.clear();
    views_.clear();
    AttentionDesc d;
    const Node& soft = g_.nodes[size_t(sm)];
    if (!plain(soft, 1, 1)) return std::nullopt;
    const Value& sv = g_.value(soft.outputs[0]);
    const int64_t rank = int64_t(sv.shape.size());
    int64_t axis = soft.attr_int("axis", -1);
    if (rank < 3 || rank > 4 || (axis != -1 && axis != rank - 1)) return std::nullopt;
    if (!attention_dtype(sv.dtype) || shape_numel(sv.shape) == 0) return std::nullopt;
    d.dtype = sv.dtype;
    nodes_.insert(sm);
    // Back from the Softmax: [Add mask] <- [Where keep] <- scalar Mul/Div* <- MatMul(Q, K^T).
    int cur = soft.inputs[0];
    int qk = -1;
    double scale = 1;
    // Backwards the nodes come in the reverse of their one allowed order.
    bool seen_add = false, seen_where = false, seen_scale = false;
    while (qk < 0) {
      int p = inner_producer(cur);
      if (p < 0) return std::nullopt;
      const Node& n = g_.nodes[size_t(p)];
      if (op_id(n) == OpId::MatMul && plain(n, 2, 1)) {
        qk = p;
      } else if ((op_id(n) == OpId::Mul || op_id(n) == OpId::Div) && plain(n, 2, 1)) {
        int x = n.inputs[0], c = n.inputs[1];
        if (op_id(n) == OpId::Mul && !scalar(c)) std::swap(x, c);
        std::optional<double> s = scalar(c);
        if (!s || g_.value(x).shape != g_.value(cur).shape) return std::nullopt;
        scale *= op_id(n) == OpId::Mul ? *s : 1.0 / *s;
        seen_scale = true;
        cur = x;
      } else if (op_id(n) == OpId::Add && plain(n, 2, 1) && !seen_add && !seen_where && !seen_scale) {
        // (a scale after the mask would scale the mask too)
        // The scores are the input of the output's shape that the chain continues from.
        int a = n.inputs[0], m = n.inputs[1];
        if (!continues(a) || g_.value(a).shape != g_.value(cur).shape) std::swap(a, m);
        if (!continues(a) || g_.value(a).shape != g_.value(cur).shape || a == m) return std::nullopt;
        if (g_.value(m).dtype != d.dtype || !broadcast_strides(m, sv.shape, &d.mask_strides))
          return std::nullopt;
        d.mask = m;
        seen_add = true;
        cur = a;
      } else if (op_id(n) == OpId::Where && plain(n, 3, 1) && !seen_where && !seen_scale) {
        // Where(keep, scores, fill) or Where(keep, fill, scores) with a scalar fill.
        int c = n.inputs[0];
        bool first = continues(n.inputs[1]) && !scalar(n.inputs[1]);
        int x = first ? n.inputs[1] : n.inputs[2], f = first ? n.inputs[2] : n.inputs[1];
        std::optional<double> fill = scalar(f);
        if (!fill || !continues(x) || g_.value(x).shape != g_.value(cur).shape ||
            g_.value(c).dtype != DType::boolean || !broadcast_strides(c, sv.shape, &d.keep_strides))
          return std::nullopt;
        d.keep = c;
        d.keep_when = first;
        d.fill = float(*fill);
        seen_where = true;
        cur = x;
      } else {
        return std::nullopt;
      }
      nodes_.insert(p);
    }
    // Forward from the Softmax: [IsNaN + Where(isnan, 0, p)] -> MatMul(P, V).
    int prob = soft.outputs[0];
    int pv = -1;
    if (consumers_[size_t(prob)].size() == 2 && !graph_out_.count(prob)) {
      int isnan = -1, where = -1;
      for (int c : consumers_[size_t(prob)])
        (op_id(g_.nodes[size_t(c)]) == OpId::IsNaN ? isnan : where) = c;
      if (isnan < 0 || where < 0 || !plain(g_.nodes[size_t(isnan)], 1, 1)) return std::nullopt;
      const Node& w = g_.nodes[size_t(where)];
      int flag = g_.nodes[size_t(isnan)].outputs[0];
      std::optional<double> zero = w.inputs.size() == 3 ? scalar(w.inputs[1]) : std::nullopt;
      if (op_id(w) != OpId::Where || !plain(w, 3, 1) || w.inputs[0] != flag || w.inputs[2] != prob ||
          !zero || *zero != 0 || sole_consumer(flag) != where)
        return std::nullopt;
      nodes_.insert(isnan);
      nodes_.insert(where);
      d.zero_empty_rows = true;
      prob = w.outputs[0];
    }
    // Casts of the probabilities that change no value: to their own type, or a float32 round
    // trip of 16-bit ones (softmax "in float32", then back), ending in the data's type.
    for (int c = sole_consumer(prob), at = prob; c >= 0;) {
      if (!is_cast(c, d.dtype) && !is_cast(c, DType::f32)) break;
      at = g_.nodes[size_t(c)].outputs[0];
      nodes_.insert(c);
      if (g_.value(at).dtype == d.dtype) prob = at;  // else float32, on the way back
      c = sole_consumer(at);
    }
    pv = sole_consumer(prob);
    if (pv < 0 || !free_(pv)) return std::nullopt;
    const Node& pvn = g_.nodes[size_t(pv)];
    if (op_id(pvn) != OpId::MatMul || !plain(pvn, 2, 1) || pvn.inputs[0] != prob || pvn.inputs[1] == prob)
      return std::nullopt;
    nodes_.insert(pv);
    // The operands through their head-split views, the result through the head merge's.
    const Node& qkn = g_.nodes[size_t(qk)];
    Operand q, kt, v, o;
    if (!operand(qkn.inputs[0], qk, &q) || !operand(qkn.inputs[1], qk, &kt) ||
        !operand(pvn.inputs[1], pv, &v) || !result(pvn.outputs[0], &o) ||
        !same_heads({&q, &kt, &v, &o}))
      return std::nullopt;
    // Q [B,H,Sq,D], K^T [B,H,D,Sk], V [B,H,Sk,D]: equal batch and heads (MatMul broadcasting
    // would otherwise be in play), the scores of shape [B,H,Sq,Sk].
    const Shape& sc = g_.value(qkn.outputs[0]).shape;
    if (q.group != 1 || kt.group != v.group || q.dims[0] != kt.dims[0] || q.dims[1] != kt.dims[1] || v.dims[0] != q.dims[0] ||
        v.dims[1] != q.dims[1] || q.dims[3] != kt.dims[2] || kt.dims[3] != v.dims[2] ||
        sc.size() != size_t(rank))
      return std::nullopt;
    d.batch = q.dims[0], d.heads = q.dims[1], d.kv_heads = d.heads / kt.group;
    d.seq_q = q.dims[2], d.head_dim = q.dims[3], d.seq_k = kt.dims[3];
    if (v.dims[3] != d.head_dim || d.head_dim > max_d_ || d.head_dim < 1 || d.seq_k < 1)
      return std::nullopt;
    d.q = q.source, d.k = kt.source, d.v = v.source;
    d.q_offset = q.offset, d.k_offset = kt.offset, d.v_offset = v.offset;
    d.q_strides = q.strides;
    d.k_strides = {kt.strides[0], kt.strides[1], kt.strides[3], kt.strides[2]};  // K, not K^T
    d.v_strides = v.strides;
    d.scale = float(scale * q.scale * kt.scale);
    for (int b : {d.q, d.k, d.v})
      if (g_.value(b).dtype != d.dtype) return std::nullopt;
    if (v.scale != 1) return std::nullopt;  // a scaled V: the fused kernel has no output scale
    d.out = o.source;
    d.out_strides = o.strides;
    if (!closed(d.out)) return std::nullopt;
    find_causal(&d);
    AttentionMatch m;
    m.nodes.assign(nodes_.begin(), nodes_.end());
    for (int n : m.nodes)
      if (!free_(n)) return std::nullopt;
    m.desc = d;
    return m;
  }

  struct Operand {
    int source = -1;
    Shape dims;  // rank 4, as the MatMul reads it (heads counted after any repeat)
    Strides4 strides{};  // of source; the heads' stride is that of the source's own heads
    int64_t offset = 0;  // elements into source (a part of a merged Q/K/V product)
    double scale = 1;
    int64_t group = 1;  // grouped-query attention: heads h reads the source's head h / group
  };

  const Graph& g_;
  int64_t max_d_;
  const std::function<bool(int)>& free_;
  std::vector<std::vector<int>> consumers_;
  std::set<int> graph_out_;
  std::set<int> nodes_;  // the block so far
  bool share_views_ = false;  // whether operand views may read through nodes read elsewhere too
  std::set<int> views_;        // the nodes of the block's operand views so far
  // Constant masks already read (value, its strides over query and key, seq_q, seq_k, keep_when):
  // causal or not. The exports share one mask among all layers.
  std::map<std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                      bool>,
           bool>
      causal_;

  // A default-domain node with `in` present inputs and `out` outputs.
  bool plain(const Node& n, size_t in, size_t out) const {
    if (!n.domain.empty() || n.inputs.size() != in || n.outputs.size() != out) return false;
    for (int i : n.inputs)
      if (i < 0) return false;
    return n.outputs[0] >= 0;
  }
  int sole_consumer(int v) const {
    if (consumers_[size_t(v)].size() != 1 || graph_out_.count(v)) return -1;
    return consumers_[size_t(v)][0];
  }
  // The producer of v when v is read only by the block's next node and that producer is free.
  int inner_producer(int v) const {
    int p = g_.value(v).producer;
    if (p < 0 || graph_out_.count(v) || consumers_[size_t(v)].size() != 1 || !free_(p)) return -1;
    return p;
  }
  // Whether the chain of scores may continue back through v (a computed, unshared value).
  bool continues(int v) const { return inner_producer(v) >= 0; }
  bool is_cast(int n, DType to) const {
    const Node& c = g_.nodes[size_t(n)];
    return op_id(c) == OpId::Cast && plain(c, 1, 1) && free_(n) && g_.value(c.outputs[0]).dtype == to;
  }
  std::optional<double> scalar(int v) const {
    const Value& c = g_.value(v);
    if (!c.constant.defined() || c.constant.numel() != 1 || !is_floating(c.dtype)) return std::nullopt;
    return c.constant.at_double(0);
  }
  // A view as the kernel's [batch, heads, seq, dim]: rank 4 as is; rank 3 [B*H, S, D] as
  // [1, B*H, S, D], or as [B, H, S, D] when its dim 0 is factored in two (torch's MHA: B*H over
  // the [S, B, 3E] in-projection). Other factored dims have no place in the descriptor.
  static bool as4(const OperandView& v, Shape* d4, Strides4* s4) {
    const bool factored_heads = !v.factors.empty() && v.factors[0].size() == 2;
    for (size_t i = 0; i < v.factors.size(); ++i)
      if (!v.factors[i].empty() && !(i == 0 && factored_heads && v.dims.size() == 3)) return false;
    if (v.dims.size() == 4) {
      *d4 = v.dims;
      for (size_t i = 0; i < 4; ++i) (*s4)[i] = v.strides[i];
      return true;
    }
    if (v.dims.size() != 3) return false;
    if (factored_heads) {
      const Factor &b = v.factors[0][0], &h = v.factors[0][1];
      *d4 = {b.size, h.size, v.dims[1], v.dims[2]};
      *s4 = {b.stride, h.stride, v.strides[1], v.strides[2]};
    } else {
      *d4 = {1, v.dims[0], v.dims[1], v.dims[2]};
      *s4 = {0, v.strides[0], v.strides[1], v.strides[2]};
    }
    return true;
  }
  // Q, K^T, V and out over the same (batch, head) pairs: where one reads [B, H, ...] (a factored
  // B*H, or rank 4), an operand read as [1, B*H, ...] is split into B and H too (its B*H index
  // b*H + h at stride s is b at s*H and h at s). False when they cannot agree.
  static bool same_heads(std::initializer_list<Operand*> ops) {
    const Operand* split = nullptr;
    for (const Operand* o : ops)
      if (!split && o->dims[0] != 1) split = o;
    if (!split) return true;
    const int64_t B = split->dims[0], H = split->dims[1];
    for (Operand* o : ops) {
      if (o->dims[0] == B && o->dims[1] == H) continue;
      if (o->dims[0] != 1 || o->dims[1] != B * H || o->group != 1) return false;
      o->dims[0] = B, o->dims[1] = H;
      o->strides[0] = o->strides[1] * H;
    }
    return true;
  }
  // Whether node p may join a view read by `next`: p's output is read by `next` alone, or (when
  // views may share) by several nodes that closed() checks are all in the block once it is
  // complete. A node already in the block joins only as a part of another operand's view.
  bool joins_view(int p, int next) const {
    if (nodes_.count(p) && !(share_views_ && views_.count(p))) return false;
    const int out = g_.nodes[size_t(p)].outputs[0];
    if (sole_consumer(out) == next) return true;
    const std::vector<int>& readers = consumers_[size_t(out)];
    return share_views_ && readers.size() > 1 && !graph_out_.count(out) &&
           std::find(readers.begin(), readers.end(), next) != readers.end();
  }
  // Every value the block's nodes make, except `out` (the one it writes), is read only inside the
  // block: the kernel materializes none of them.
  bool closed(int out) const {
    for (int n : nodes_)
      for (int v : g_.nodes[size_t(n)].outputs) {
        if (v < 0 || v == out) continue;
        if (graph_out_.count(v)) return false;
        for (int c : consumers_[size_t(v)])
          if (!nodes_.count(c)) return false;
      }
    return true;
  }
  // Value v (read by node `user`) through the view the exporters' head split makes: Reshapes,
  // Transposes and scalar Muls not yet in a block, each read by the next (or, shared, by several
  // nodes of this block).
  OperandView head_view(int v, int user, bool factored) {
    int next = user;
    auto take = [&](int p) {
      if (!free_(p) || !joins_view(p, next)) return false;
      next = p;
      return true;
    };
    return operand_view(g_, v, take, /*float16=*/true, factored);
  }
  // The view (value v itself when it has no nodes) as the kernel's operand, when it can be one.
  bool as_operand(const OperandView& view, int v, Operand* o) const {
    OperandView whole;
    if (view.nodes.empty()) {
      whole.source = v;
      whole.dims = g_.value(v).shape;
      whole.strides = row_major_strides(whole.dims);
    }
    const OperandView& w = view.nodes.empty() ? whole : view;
    if (w.offset < 0 || !as4(w, &o->dims, &o->strides)) return false;
    o->source = w.source;
    o->offset = w.offset;
    o->scale = w.scale;
    return true;
  }
  // MatMul operand v (read by node `user`) through its head-split view: factored where the
  // descriptor takes it, else (a shorter view) plain strides.
  bool operand(int v, int user, Operand* o) {
    OperandView view = head_view(v, user, true);
    if (!as_operand(view, v, o)) {
      view = head_view(v, user, false);
      if (!as_operand(view, v, o)) return false;
    }
    if (view.nodes.empty() && g_.value(v).constant.defined()) return false;  // computed buffers only
    if (!view.nodes.empty() && !repeated_heads(o, view.nodes.front())) return false;
    nodes_.insert(view.nodes.begin(), view.nodes.end());
    views_.insert(view.nodes.begin(), view.nodes.end());
    return true;
  }
  // The result ctx through the head merge's view (Transposes and Reshapes, each read by the next
  // alone), written in place of the last one's output; factored or plain, as operand()'s.
  bool result(int ctx, Operand* o) {
    auto take = [&, cur = ctx](int c) mutable {
      if (!free_(c) || sole_consumer(cur) != c) return false;
      cur = g_.nodes[size_t(c)].outputs[0];
      return true;
    };
    OperandView view = output_view(g_, ctx, take, /*float16=*/true, /*factored=*/true);
    if (!as_operand(view, ctx, o) || o->offset != 0) {
      view = output_view(g_, ctx, take, /*float16=*/true, /*factored=*/false);
      if (!as_operand(view, ctx, o) || o->offset != 0) return false;
    }
    nodes_.insert(view.nodes.begin(), view.nodes.end());
    return true;
  }
  // Grouped-query attention as the exporters write it: the key/value heads X [B, Hkv, S, D]
  // repeated by Unsqueeze -> [B, Hkv, 1, S, D], Expand -> [B, Hkv, rep, S, D] and the Reshape
  // to [B, Hkv * rep, S, D] that begins the operand's view (`first`). When the operand's source
  // is that Expand, it reads X instead (through X's own head-split view) with group = rep.
  // Returns false only when the pattern is there but cannot be read so.
  bool repeated_heads(Operand* o, int first) {
    const int e = g_.value(o->source).producer;
    if (e < 0 || op_id(g_.nodes[size_t(e)]) != OpId::Expand || !free_(e) || nodes_.count(e) ||
        sole_consumer(o->source) != first)
      return true;
    const Node& ex = g_.nodes[size_t(e)];
    const int u = g_.value(ex.inputs[0]).producer;
    if (u < 0 || ex.inputs.size() != 2 || !free_(u) || sole_consumer(ex.inputs[0]) != e) return true;
    const Node& un = g_.nodes[size_t(u)];
    if ((op_id(un) != OpId::Unsqueeze && op_id(un) != OpId::Reshape) || !un.domain.empty() || un.inputs.empty())
      return true;
    const int x = un.inputs[0];
    const Shape &xs = g_.value(x).shape, &us = g_.value(un.outputs[0]).shape,
                &es = g_.value(o->source).shape;
    if (xs.size() != 4 || es.size() != 5 || us != Shape{xs[0], xs[1], 1, xs[2], xs[3]} ||
        es != Shape{xs[0], xs[1], es[2], xs[2], xs[3]} || es[2] < 1)
      return true;
    // The operand's dims over E's row-major buffer: batch, the merged heads, then S and D in
    // either order (K^T reads them swapped).
    const int64_t S = xs[2], D = xs[3], rep = es[2];
    const int64_t eb = xs[1] * rep * S * D;
    if ((o->dims[0] != 1 && o->strides[0] != eb) || o->strides[1] != S * D ||
        o->dims[1] != xs[1] * rep)
      return false;
    const bool swapped = o->strides[2] == 1 && o->strides[3] == D;
    if (!swapped && !(o->strides[2] == D && o->strides[3] == 1)) return false;
    // X through its own view (the head split of the K/V projections), each node read by the next.
    OperandView xv = head_view(x, u, false);
    Strides4 xst{};
    int src = x;
    if (xv.nodes.empty()) {
      if (g_.value(x).constant.defined()) return false;
      std::vector<int64_t> r = row_major_strides(xs);
      for (size_t i = 0; i < 4; ++i) xst[i] = r[i];
    } else {
      if (xv.dims.size() != 4 || xv.scale != 1 || xv.offset < 0) return false;
      for (size_t i = 0; i < 4; ++i) xst[i] = xv.strides[i];
      src = xv.source;
    }
    o->source = src;
    o->offset = xv.nodes.empty() ? 0 : xv.offset;
    o->group = rep;
    o->strides = {xst[0], xst[1], swapped ? xst[3] : xst[2], swapped ? xst[2] : xst[3]};
    for (int n : xv.nodes) nodes_.insert(n);
    nodes_.insert(u);
    nodes_.insert(e);
    return true;
  }
  // A constant mask that is the causal one (key j visible to query i when j <= i + seq_k - seq_q,
  // the same for every batch and head): the kernel computes it from the indices instead, and
  // skips the key tiles no query of a block sees. A bool mask must fill with -inf; an additive
  // one must hold 0 and values <= -1e4 (the exporters write the type's lowest: -3.4e38, or
  // -65504 in float16), whose exp() after the row's max is 0 in float32 as long as the scores
  // stay within 9900 of each other, as in the reference.
  void find_causal(AttentionDesc* d) {
    // A constant additive mask of zeros (BERT's, folded at batch 1 with no padding) is no mask.
    if (d->mask >= 0 && g_.value(d->mask).constant.defined()) {
      const Tensor& t = g_.value(d->mask).constant;
      bool zeros = true;
      for (int64_t i = 0; i < t.numel() && zeros; ++i) zeros = t.at_double(i) == 0;
      if (zeros) {
        d->mask = -1;
        d->mask_strides = Strides4{};
      }
    }
    const int64_t off = d->seq_k - d->seq_q;
    if (off < 0) return;  // some rows would see no key: the masks' own values matter then
    // Every (batch, head) slice is checked: an export at batch > 1 folds the mask to one copy
    // per batch ([B, 1, S, S], GPT-2's), the same causal mask each time.
    auto causal = [&](int v, const Strides4& st, const std::function<int(double)>& kind) {
      if (v < 0 || !g_.value(v).constant.defined()) return false;
      const auto key = std::make_tuple(v, st[0], st[1], st[2], st[3], d->batch, d->heads,
                                       d->seq_q, d->seq_k, d->keep_when);
      auto it = causal_.find(key);
      if (it != causal_.end()) return it->second;
      const Tensor& t = g_.value(v).constant;
      const int64_t slices = (st[0] ? d->batch : 1) * (st[1] ? d->heads : 1);
      bool ok = slices * d->seq_q * d->seq_k <= (int64_t(1) << 24);  // a bounded look
      for (int64_t b = 0; b < (st[0] ? d->batch : 1) && ok; ++b)
        for (int64_t h = 0; h < (st[1] ? d->heads : 1) && ok; ++h)
          for (int64_t i = 0; i < d->seq_q && ok; ++i)
            for (int64_t j = 0; j < d->seq_k && ok; ++j) {
              // 1 visible, 0 hidden, -1 neither
              int k = kind(t.at_double(b * st[0] + h * st[1] + i * st[2] + j * st[3]));
              ok = k == (j <= i + off ? 1 : 0);
            }
      causal_[key] = ok;
      return ok;
    };
    if (d->keep >= 0 && d->mask < 0 && std::isinf(d->fill) && d->fill < 0 &&
        causal(d->keep, d->keep_strides, [&](double x) { return (x != 0) == d->keep_when ? 1 : 0; })) {
      d->keep = -1;
      d->causal = true;
    } else if (d->mask >= 0 && d->keep < 0 &&
               causal(d->mask, d->mask_strides,
                      [](double x) { return x == 0 ? 1 : x <= -1e4 ? 0 : -1; })) {
      d->mask = -1;
      d->causal = true;
    }
    if (d->causal) d->mask_strides = d->keep_strides = Strides4{};
  }

  // Strides of value m broadcast (right-aligned, numpy rules) to `full`, 0 on broadcast dims;
  // false when it does not broadcast to it.
  bool broadcast_strides(int m, const Shape& full, Strides4* out) const {
    const Shape& ms = g_.value(m).shape;
    if (ms.size() > full.size()) return false;
    std::vector<int64_t> rs = row_major_strides(ms);
    Strides4 s{};
    const size_t off = 4 - full.size();  // rank 3 scores: dim 0 of the 4 is 1
    for (size_t i = 0; i < full.size(); ++i) {
      int64_t md = int64_t(i) - int64_t(full.size() - ms.size());
      if (md < 0) continue;
      if (ms[size_t(md)] == full[i] && full[i] != 1) s[i + off] = rs[size_t(md)];
      else if (ms[size_t(md)] != 1) return false;
    }
    *out = s;
    return true;
  }
};

}  // namespace

std::vector<AttentionMatch> find_attention(const Graph& g, int64_t max_head_dim,
                                           const std::function<bool(int node)>& free) {
  std::vector<AttentionMatch> out;
  if (max_head_dim <= 0) return out;
  std::set<int> taken;
  auto is_free = [&](int n) { return !taken.count(n) && free(n); };
  std::function<bool(int)> f = is_free;
  Matcher m(g, max_head_dim, f);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (op_id(g.nodes[n]) != OpId::Softmax) continue;
    std::optional<AttentionMatch> a = m.match(int(n));
    if (!a) continue;
    taken.insert(a->nodes.begin(), a->nodes.end());
    out.push_back(std::move(*a));
  }
  return out;
}

}  // namespace brrr::plan
