#include "passes/plan_memory.hpp"

#include <algorithm>
#include <numeric>

#include "plan/library_desc.hpp"

namespace brrr {

namespace {

// The requests whose lifetimes overlap a given one, without looking at all others: those alive at
// its first kernel (a segment tree over kernel indices, each lifetime stored in O(log T) nodes),
// plus those that start later within it (a range of the requests sorted by first kernel).
class Lifetimes {
 public:
  explicit Lifetimes(const std::vector<BufferRequest>& reqs) : reqs_(reqs) {
    for (const auto& r : reqs) span_ = std::max(span_, r.last + 1);
    tree_.resize(size_t(4) * size_t(std::max(span_, 1)));
    by_first_.resize(reqs.size());
    std::iota(by_first_.begin(), by_first_.end(), size_t(0));
    std::stable_sort(by_first_.begin(), by_first_.end(),
                     [&](size_t a, size_t b) { return reqs[a].first < reqs[b].first; });
    for (size_t r = 0; r < reqs.size(); ++r)
      if (reqs[r].first <= reqs[r].last) insert(1, 0, span_ - 1, r);
  }

  // Calls f(q) once for every request q != r whose lifetime overlaps r's.
  template <typename F>
  void overlapping(size_t r, F&& f) const {
    const BufferRequest& R = reqs_[r];
    if (R.first > R.last) return;
    // Alive at R.first (first <= R.first <= last).
    for (int node = 1, lo = 0, hi = span_ - 1;;) {
      for (size_t q : tree_[size_t(node)])
        if (q != r) f(q);
      if (lo == hi) break;
      int mid = (lo + hi) / 2;
      if (R.first <= mid) node = 2 * node, hi = mid;
      else node = 2 * node + 1, lo = mid + 1;
    }
    // Starting in (R.first, R.last].
    auto it = std::upper_bound(by_first_.begin(), by_first_.end(), R.first,
                               [&](int t, size_t q) { return t < reqs_[q].first; });
    for (; it != by_first_.end() && reqs_[*it].first <= R.last; ++it)
      if (*it != r && reqs_[*it].first <= reqs_[*it].last) f(*it);
  }

 private:
  const std::vector<BufferRequest>& reqs_;
  int span_ = 0;
  std::vector<std::vector<size_t>> tree_;
  std::vector<size_t> by_first_;

  void insert(int node, int lo, int hi, size_t r) {
    const BufferRequest& R = reqs_[r];
    if (R.last < lo || hi < R.first) return;
    if (R.first <= lo && hi <= R.last) {
      tree_[size_t(node)].push_back(r);
      return;
    }
    int mid = (lo + hi) / 2;
    insert(2 * node, lo, mid, r);
    insert(2 * node + 1, mid + 1, hi, r);
  }
};

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest>& reqs) {
  MemoryPlan p;
  p.offsets.assign(reqs.size(), 0);
  auto align = [](size_t b) { return (b + 63) / 64 * 64; };
  std::vector<size_t> order(reqs.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return reqs[a].bytes > reqs[b].bytes; });
  Lifetimes life(reqs);
  std::vector<char> placed(reqs.size(), 0);
  std::vector<std::pair<size_t, size_t>> busy;
  for (size_t r : order) {
    size_t need = align(reqs[r].bytes);
    p.total_bytes += need;
    // Occupied ranges of buffers alive at the same time, sorted by offset.
    busy.clear();
    life.overlapping(r, [&](size_t q) {
      if (placed[q]) busy.push_back({p.offsets[q], p.offsets[q] + align(reqs[q].bytes)});
    });
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (const auto& [lo, hi] : busy) {
      if (off + need <= lo) break;
      off = std::max(off, hi);
    }
    p.offsets[r] = off;
    p.arena_bytes = std::max(p.arena_bytes, off + need);
    placed[r] = 1;
  }
  return p;
}

namespace {

// Whether copy kernel i of p writes its input's bytes to a buffer that may simply be its input's
// (an intermediate on both sides, the same size).
bool aliases_input(const Graph& g, const plan::Plan& p, size_t i, const std::vector<bool>& is_out,
                   const std::vector<int>& first_write, const std::function<size_t(int)>& nbytes) {
  const plan::Kernel& k = p.kernels[i];
  if (k.kind != plan::KernelKind::Copy || k.inputs.size() != 1 || k.outputs.size() != 1)
    return false;
  const int in = k.inputs[0], out = k.outputs[0];
  return in >= 0 && out >= 0 && !is_out[size_t(in)] && !is_out[size_t(out)] &&
         first_write[size_t(in)] >= 0 && first_write[size_t(in)] < int(i) &&
         !g.value(in).constant.defined() && nbytes(in) == nbytes(out) &&
         g.value(in).nbytes() == g.value(out).nbytes();
}

}  // namespace

namespace {

// Concats in place: a Concat whose output buffer is its inputs' buffers back to back (batch 1,
// channels outermost) has each input written at its offset inside the output's buffer by the
// kernel that makes it, and copies nothing. Concats are taken last to first, so that DenseNet's
// concats of a growing list of the same features (each layer's input: all the block's features
// so far) all become prefixes of the block's last one. An input already placed fixes where the
// output goes; a Concat whose inputs disagree, or whose new input would overlap bytes already
// given to another value, stays a copy.
void place_concats(const Graph& g, const plan::Plan& p, const std::function<size_t(int)>& nbytes,
                   const std::function<bool(size_t)>& concat_chunks, const std::vector<bool>& is_out,
                   const std::vector<int>& first_write, ArenaPlan& a) {
  const size_t nv = g.values.size();
  std::vector<bool> aliased(nv, false);  // a root or a member of an earlier sharing
  for (size_t v = 0; v < nv; ++v)
    if (a.share[v] >= 0) aliased[v] = aliased[size_t(a.share[v])] = true;
  // Placed values: root buffer and offset; leaves hold bytes a kernel writes (not a placed
  // Concat's output, which is its inputs' bytes).
  std::vector<int> root(nv, -1);
  std::vector<int64_t> off(nv, 0);
  std::vector<bool> leaf(nv, false);
  std::vector<std::vector<int>> members(nv);  // per root: every value placed in it
  // An intermediate written by a kernel that is not a copy (a copy's output that is not its
  // input's buffer stays apart, so that copy_aliases_input reads `share` as before).
  auto usable = [&](int v) {
    return v >= 0 && !is_out[size_t(v)] && first_write[size_t(v)] >= 0 && !aliased[size_t(v)] &&
           !g.value(v).constant.defined() &&
           p.kernels[size_t(first_write[size_t(v)])].kind != plan::KernelKind::Copy;
  };
  for (size_t i = p.kernels.size(); i-- > 0;) {
    const plan::Kernel& k = p.kernels[i];
    const auto* d = plan::desc_of<plan::ConcatDesc>(k);
    if (k.kind != plan::KernelKind::Library || !d || !d->why.empty() || k.nodes.size() != 1 ||
        !concat_chunks(i))
      continue;
    const int out = d->out;
    if (!usable(out) || first_write[size_t(out)] != int(i)) continue;
    std::vector<int64_t> at;  // each input's offset in the output
    int64_t total = 0;
    bool ok = true;
    for (size_t j = 0; j < d->inputs.size() && ok; ++j) {
      const int v = d->inputs[j];
      ok = usable(v) && v != out &&
           std::count(d->inputs.begin(), d->inputs.end(), v) == 1;
      at.push_back(total);
      if (ok) total += int64_t(nbytes(v));
    }
    if (!ok || total != int64_t(nbytes(out))) continue;
    // Where the output goes: where it was placed, else where a placed input puts it, else it is a
    // root of its own.
    int r = root[size_t(out)] >= 0 ? root[size_t(out)] : out;
    int64_t o = root[size_t(out)] >= 0 ? off[size_t(out)] : 0;
    if (root[size_t(out)] < 0)
      for (size_t j = 0; j < d->inputs.size(); ++j)
        if (const int v = d->inputs[j]; root[size_t(v)] >= 0) {
          r = root[size_t(v)], o = off[size_t(v)] - at[j];
          break;
        }
    if (o < 0) continue;
    for (size_t j = 0; j < d->inputs.size() && ok; ++j) {
      const int v = d->inputs[j];
      const int64_t lo = o + at[j], hi = lo + int64_t(nbytes(v));
      if (root[size_t(v)] >= 0) {
        ok = root[size_t(v)] == r && off[size_t(v)] == lo;
        continue;
      }
      // A new leaf: no other leaf of the buffer may hold these bytes (the output's own range is
      // what its inputs tile).
      for (int u : members[size_t(r)])
        if (leaf[size_t(u)] && u != out && off[size_t(u)] < hi &&
            lo < off[size_t(u)] + int64_t(nbytes(u)))
          ok = false;
    }
    if (!ok) continue;
    if (root[size_t(out)] < 0 && r == out) {
      root[size_t(out)] = out, off[size_t(out)] = 0;
      members[size_t(out)].push_back(out);
    } else if (root[size_t(out)] < 0) {
      root[size_t(out)] = r, off[size_t(out)] = o;
      members[size_t(r)].push_back(out);
    }
    leaf[size_t(out)] = false;
    for (size_t j = 0; j < d->inputs.size(); ++j) {
      const int v = d->inputs[j];
      if (root[size_t(v)] >= 0) continue;
      root[size_t(v)] = r, off[size_t(v)] = o + at[j], leaf[size_t(v)] = true;
      members[size_t(r)].push_back(v);
    }
    a.concat_in_place[i] = true;
  }
  for (size_t v = 0; v < nv; ++v)
    if (root[v] >= 0 && root[v] != int(v)) a.share[v] = root[v], a.share_offset[v] = off[v];
}

}  // namespace

bool copy_aliases_input(const plan::Plan& p, size_t i, const ArenaPlan& a) {
  const plan::Kernel& k = p.kernels[i];
  return k.kind == plan::KernelKind::Copy && k.outputs.size() == 1 &&
         a.share[size_t(k.outputs[0])] >= 0;
}

ArenaPlan plan_memory(const Graph& g, const plan::Plan& p, const std::function<size_t(int)>& nbytes,
                      const std::function<bool(size_t)>& concat_chunks) {
  using plan::KernelKind;
  size_t nv = g.values.size();
  std::vector<bool> is_out(nv, false);
  for (int o : g.outputs) is_out[size_t(o)] = true;
  std::vector<int> last_use(nv, -1);
  for (size_t i = 0; i < p.kernels.size(); ++i)
    for (int v : p.kernels[i].inputs) last_use[size_t(v)] = int(i);
  ArenaPlan a;
  a.share.assign(nv, -1);
  auto root_of = [&](int v) { return a.share[size_t(v)] >= 0 ? a.share[size_t(v)] : v; };
  std::vector<int> first_write(nv, -1);
  for (size_t i = 0; i < p.kernels.size(); ++i)
    for (int v : p.kernels[i].outputs) first_write[size_t(v)] = int(i);
  // A copy kernel (Reshape, Flatten, Squeeze, Unsqueeze, Identity) of an intermediate is that
  // buffer's bytes under another shape: its output shares the input's buffer, which then lives
  // until the last reader of either, and the copy does no work (ViT-B/16: 37 per run).
  // No kernel writes a buffer it did not produce but for the sum sharing below, which checks
  // every alias of the buffer it writes over.
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const plan::Kernel& k = p.kernels[i];
    if (!aliases_input(g, p, i, is_out, first_write, nbytes)) continue;
    const int root = root_of(k.inputs[0]), out = k.outputs[0];
    a.share[size_t(out)] = root;
    last_use[size_t(root)] = std::max(last_use[size_t(root)], last_use[size_t(out)]);
  }
  // A conv whose sum post-op reads a value for the last time writes its result over it, so the
  // kernel skips copying the addend into its output (residuals, distribute_concat's partials).
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const plan::Kernel& k = p.kernels[i];
    if (k.kind != KernelKind::Library || k.sum < 0 || k.outputs.size() != 1) continue;
    int s = k.sum, d = k.outputs[0];
    const int root = root_of(s);
    const std::vector<int>& conv_in = g.nodes[size_t(k.nodes[0])].inputs;  // read while writing d
    if (is_out[size_t(s)] || is_out[size_t(d)] || first_write[size_t(s)] < 0 ||
        last_use[size_t(root)] != int(i) || nbytes(s) != nbytes(d) ||
        std::find(conv_in.begin(), conv_in.end(), s) != conv_in.end() ||
        std::any_of(k.inputs.begin(), k.inputs.end(),
                    [&](int v) { return v != s && root_of(v) == root; }))
      continue;
    a.share[size_t(d)] = root;
    last_use[size_t(root)] = std::max(last_use[size_t(root)], last_use[size_t(d)]);
  }
  // A copy of d above shares d's buffer, which may now be another's.
  for (size_t v = 0; v < nv; ++v)
    while (a.share[v] >= 0 && a.share[size_t(a.share[v])] >= 0)
      a.share[v] = a.share[size_t(a.share[v])];
  a.share_offset.assign(nv, 0);
  a.concat_in_place.assign(p.kernels.size(), false);
  if (concat_chunks) place_concats(g, p, nbytes, concat_chunks, is_out, first_write, a);
  // A buffer lives from the first write of any value in it to the last read of any.
  std::vector<int> first(nv, -1);
  for (size_t v = 0; v < nv; ++v) {
    if (first_write[v] < 0 || is_out[v]) continue;
    const size_t root = size_t(root_of(int(v)));
    first[root] = first[root] < 0 ? first_write[v] : std::min(first[root], first_write[v]);
    last_use[root] = std::max(last_use[root], last_use[v]);
  }
  std::vector<BufferRequest> reqs;
  std::vector<int> req_value;
  for (size_t i = 0; i < p.kernels.size(); ++i)
    for (int v : p.kernels[i].outputs) {
      if (is_out[size_t(v)] || a.share[size_t(v)] >= 0) continue;
      reqs.push_back({nbytes(v), first[size_t(v)], std::max(int(i), last_use[size_t(v)])});
      req_value.push_back(v);
    }
  MemoryPlan mp = plan_memory(reqs);
  a.arena_bytes = mp.arena_bytes;
  a.intermediate_bytes = mp.total_bytes;
  a.num_buffers = reqs.size();
  a.offset.assign(nv, -1);
  for (size_t r = 0; r < reqs.size(); ++r) a.offset[size_t(req_value[r])] = int64_t(mp.offsets[r]);
  return a;
}

}  // namespace brrr
