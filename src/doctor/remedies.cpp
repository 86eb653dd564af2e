// Remedies with a predicted gain, computed from the profile and the ceilings before any is applied:
// fusion (intermediate traffic removed / bandwidth), a static plan (per-kernel dispatch removed),
// faster units (compute-bound work at the fastest measured ceiling).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "brrr/doctor.hpp"
#include "core/median.hpp"

namespace brrr::doctor {

namespace {

// Can producer class `p` hand its output to consumer class `c` inside one kernel? Pointwise,
// reduction and view chains fuse; a contraction takes an elementwise epilogue.
bool fusable(OpClass p, OpClass c) {
  if (c == OpClass::contraction) return false;
  if (p == OpClass::contraction) return c == OpClass::elementwise;
  return true;
}

// One intermediate a fused kernel could keep: producer kernel -> its only consumer.
struct FusionPair {
  int producer = 0, consumer = 0;
  std::string value;
  double ms = 0;  // its write and read as shares of those kernels' time, plus a fixed cost
  std::string boundary;  // the plan's reason it was not fused ("" when none was recorded)
};

struct FusionEstimate {
  double bytes = 0;
  double ms = 0;        // time those bytes cost in the kernels that move them now
  double fixed_ms = 0;  // fixed per-kernel cost of the kernels that merging removes
  int merges = 0, groups = 0, kernels_in_groups = 0;
  std::vector<FusionPair> pairs;
};

// The plan's boundary line for `value` from producer `k` to `consumer`, without its "-> ..." head.
std::string boundary_reason(const KernelRecord& k, const std::string& consumer,
                            const std::string& value) {
  const std::string head = "-> " + consumer + " via '" + value + "': ";
  for (const auto& b : k.boundaries)
    if (b.rfind(head, 0) == 0) return b.substr(head.size());
  return "";
}

// Union-find over kernels joined by single-consumer intermediates. Each side's saving is the
// share of that kernel's work time (its time less its fixed cost) that the intermediate's bytes
// are of all its bytes: a memory-bound kernel at 60% of the copy rate saves time at 60% of it,
// and a kernel cannot save more than it takes (mlp_tiny's cache-resident intermediates priced at
// the DRAM rate "saved" more than their kernels' whole time). The bytes of a compute- or
// overhead-bound kernel are not what its time is spent on: they save at most their time at the
// kernel's roof. The times
// are each kernel's median over the runs where the profile has them: a kernel preempted in the
// reported run (milliseconds on a loaded machine) would otherwise make its bytes look slow, and
// fusing them a large saving (squeezenet1_1: 10.2 ms predicted of a 13.9 ms wall, measured 6.3).
// Each merge also removes a kernel, and with it one fixed per-kernel cost as the probe measured
// it (a kernel call and fork/join on the CPU, a launch, or a graph node in a CUDA graph). Not the
// small kernel's whole time: on the H200, bert_tiny's plan one kernel per op in a graph took
// 0.144 ms for 78 kernels of about 1.8 us each, and fused to 42 kernels 0.121 ms, 0.64 us per
// kernel removed, near the 0.505 us graph node cost.
// A kernel's time over the runs: its median where the profile has per-run samples (a kernel
// preempted in the reported run on a loaded machine is not slow), else its reported time.
double steady_time(const KernelRecord& r) {
  return r.samples_ms.empty() ? r.time_ms : median(r.samples_ms);
}

FusionEstimate estimate_fusion(const RunProfile& p, const std::vector<KernelAnalysis>& ks,
                               const Ceilings& c) {
  // The time `bytes` of kernel k's traffic cost it (ms).
  auto cost = [&](size_t k, double bytes) {
    const KernelRecord& r = p.kernels[k];
    const double roof = (k < ks.size() && ks[k].roof_gbs > 0 ? ks[k].roof_gbs : c.bandwidth_gbs) * 1e9;
    const double at_roof = bytes / roof * 1e3;
    if (k >= ks.size() || r.cost.bytes <= 0) return at_roof;
    const double t = steady_time(r);
    const double share = std::max(0.0, t - ks[k].overhead_ms) * std::min(1.0, bytes / r.cost.bytes);
    return ks[k].regime == Regime::memory ? share : std::min(at_roof, share);
  };
  FusionEstimate e;
  size_t n = p.kernels.size();
  std::map<std::string, int> producer;
  std::map<std::string, std::vector<int>> consumers;
  for (size_t k = 0; k < n; ++k) {
    for (const auto& w : p.kernels[k].writes) producer[w.name] = int(k);
    for (const auto& r : p.kernels[k].reads) consumers[r.name].push_back(int(k));
  }
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (size_t k = 0; k < n; ++k)
    for (const auto& w : p.kernels[k].writes) {
      auto it = consumers.find(w.name);
      if (it == consumers.end() || it->second.size() != 1) continue;  // graph output or shared
      int c = it->second[0];
      if (!fusable(p.kernels[k].cls, p.kernels[size_t(c)].cls)) continue;
      int a = find(int(k)), b = find(c);
      FusionPair pair{int(k), c, w.name, cost(k, w.bytes) + cost(size_t(c), w.bytes),
                      boundary_reason(p.kernels[k], p.kernels[size_t(c)].name, w.name)};
      e.bytes += 2 * w.bytes;  // written once and read once, both gone when fused
      e.ms += pair.ms;
      if (a != b) {
        parent[b] = a, e.merges++;
        if (k < ks.size() && size_t(c) < ks.size()) {
          // Never more than the smaller kernel takes whole: mlp_tiny's generated kernels take
          // 0.1 us, below the probe's 0.5 us call + fork/join (they run on one thread).
          double fixed = std::min({ks[k].overhead_ms, ks[size_t(c)].overhead_ms,
                                   steady_time(p.kernels[k]), steady_time(p.kernels[size_t(c)])});
          e.fixed_ms += fixed;
          pair.ms += fixed;
        }
      }
      e.pairs.push_back(std::move(pair));
    }
  std::map<int, int> sizes;
  for (size_t k = 0; k < n; ++k) sizes[find(int(k))]++;
  for (const auto& [root, s] : sizes)
    if (s > 1) e.groups++, e.kernels_in_groups += s;
  std::stable_sort(e.pairs.begin(), e.pairs.end(),
                   [](const FusionPair& a, const FusionPair& b) { return a.ms > b.ms; });
  return e;
}

// A library kernel whose layout (and algorithm) may change in the fused plan: any but a GEMM
// (convs, pools, channel scales and means on the CPU's blocked activations: EfficientNet's SE
// gates ran 0.44 ms fused where their calls one op per kernel took 2 ms).
bool has_any(const KernelRecord& k, std::initializer_list<const char*> ops) {
  return std::any_of(k.ops.begin(), k.ops.end(), [&](const std::string& o) {
    return std::any_of(ops.begin(), ops.end(), [&](const char* x) { return o == x; });
  });
}

bool relayouts(const KernelRecord& r) { return !has_any(r, {"MatMul", "Gemm"}); }

// A library call that does in one algorithm what the plan one kernel per op did in several
// calls and kernels: fused attention (cuDNN's SDPA or brrr's flash kernel: both batched GEMMs,
// the scale, the mask and the softmax), which no sum of those kernels' times or floors prices
// (GPT-2 bf16 b1 on an H100: predicted 0.639 ms after fusion, measured 0.468).
bool another_algorithm(const KernelRecord& r) { return has_any(r, {"Softmax"}); }

}  // namespace

bool priced_alone(const KernelRecord& planned) {
  return planned.kind == "library" && !planned.samples_ms.empty() &&
         (relayouts(planned) || another_algorithm(planned));
}

namespace {

bool is_generated(const KernelRecord& r) { return r.kind == "fused" || r.kind == "reference"; }

// The share of their memory roof that the profile's memory-bound generated kernels reach (their
// median; 1 without any): the price of a generated kernel a plan would run instead.
double generated_memory_share(const std::vector<KernelAnalysis>& ks) {
  std::vector<double> shares;
  for (const auto& k : ks) {
    const double work = steady_time(k.rec) - k.overhead_ms;
    if (is_generated(k.rec) && k.regime == Regime::memory && k.memory_floor_ms > 0 && work > 0)
      shares.push_back(std::min(1.0, k.memory_floor_ms / work));
  }
  return shares.empty() ? 1.0 : std::max(0.05, median(shares));
}

// A generated kernel of another plan, not timed: one fixed cost plus the larger of its bytes at
// `share` of its roof and its compute floor.
double generated_price(const KernelRecord& r, const Ceilings& c, double share) {
  const KernelAnalysis an = analyze_kernel(r, c);
  return an.overhead_ms + std::max(an.memory_floor_ms / share, an.compute_floor_ms);
}

// Kernels 0..n-1 (`rec`) joined where they cover a common ONNX node, as `key` names it
// (union-find): each kernel's group root.
std::vector<size_t> node_groups(size_t n, const std::function<const KernelRecord&(size_t)>& rec,
                                const std::function<std::string(const std::string&)>& key) {
  std::vector<size_t> parent(n);
  std::iota(parent.begin(), parent.end(), size_t(0));
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  std::map<std::string, size_t> owner;
  for (size_t i = 0; i < n; ++i)
    for (const auto& node : rec(i).nodes) {
      auto [it, fresh] = owner.emplace(key(node), i);
      if (!fresh) parent[find(i)] = find(it->second);
    }
  std::vector<size_t> root(n);
  for (size_t i = 0; i < n; ++i) root[i] = find(i);
  return root;
}

// Fusion priced from the plan fusion would compile (DoctorOptions::fused_kernels): the measured
// kernels and the planned ones joined where they cover a common ONNX node (union-find, as
// --compare's "where the time moved"); each group saves what its measured kernels took less what
// its planned kernels are priced at:
//  - a planned kernel covering exactly the nodes of one measured kernel: that kernel's time
//    (unchanged);
//  - a planned conv or pool the backend timed alone (a record with samples: the CPU runs the
//    fused plan's library calls by themselves, Session::time_library_kernels_alone): that time;
//  - else a planned library kernel (a GEMM or conv with its epilogue now inside): the measured
//    library calls it shares nodes with (the call is the same; the epilogue rides along); a conv
//    or pool at most its FLOPs at the library rate the probe measured (its layout changes, below);
//  - a planned generated kernel: one fixed per-kernel cost, plus the larger of its bytes at the
//    bandwidth the profile's own generated kernels reached (their median share of the roof) and
//    the compute time the measured generated kernels of its group spent beyond their bytes.
// The fixed costs of the kernels that disappear, the traffic of the intermediates that stay in
// registers and the views that fold into GEMMs all follow from that.
struct PlanFusionEstimate {
  double saved_ms = 0;
  double lowers_floor_ms = 0;  // floors of the measured kernels whose group changed
  int before = 0, after = 0;   // kernels measured, kernels planned
  double memory_share = 1;     // the generated kernels' median share of their memory roof
  // Planned library kernels the backend timed alone (DoctorOptions::fused_kernels with times):
  // how many, their time, and the measured library calls of the same nodes they replace.
  int timed_alone = 0;
  double timed_alone_ms = 0, replaced_calls_ms = 0;
};

PlanFusionEstimate estimate_fusion_from_plan(const RunProfile& p,
                                             const std::vector<KernelAnalysis>& ks,
                                             const Ceilings& c,
                                             const std::vector<KernelRecord>& planned) {
  PlanFusionEstimate e;
  const double weights = model_weight_bytes(p);  // fusion leaves the weights as they are
  const size_t nb = std::min(p.kernels.size(), ks.size()), n = nb + planned.size();
  e.before = int(nb);
  e.after = int(planned.size());
  e.memory_share = generated_memory_share(ks);
  auto rec = [&](size_t i) -> const KernelRecord& {
    return i < nb ? p.kernels[i] : planned[i - nb];
  };
  const std::vector<size_t> root = node_groups(n, rec, [](const std::string& x) { return x; });
  std::map<size_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < n; ++i) groups[root[i]].push_back(i);
  std::vector<std::vector<std::string>> sorted_nodes(n);
  for (size_t i = 0; i < n; ++i) {
    sorted_nodes[i] = rec(i).nodes;
    std::sort(sorted_nodes[i].begin(), sorted_nodes[i].end());
  }
  auto same_nodes = [&](size_t x, size_t y) { return sorted_nodes[x] == sorted_nodes[y]; };
  // A planned conv or pool the backend timed alone: in the fused plan it reads and writes the
  // library's own layout (the CPU's blocked activations) with another algorithm, which the
  // profile one kernel per op cannot show. A GEMM keeps its layout: its measured call is the
  // better price (timed alone in rounds of library kernels only, bert_tiny's GEMMs took 15%
  // longer than in the plan).
  for (const auto& [root, members] : groups) {
    std::vector<size_t> b, a;
    for (size_t i : members) (i < nb ? b : a).push_back(i);
    // Unchanged, unless it is a conv or pool timed alone (its layout may still change).
    if (b.size() == 1 && a.size() == 1 && same_nodes(b[0], a[0]) && !priced_alone(rec(a[0])))
      continue;
    double before_ms = 0, compute_ms = 0;
    for (size_t k : b) {
      const double t = steady_time(p.kernels[k]);
      before_ms += t;
      e.lowers_floor_ms += ks[k].floor_ms;
      if (is_generated(p.kernels[k]))
        compute_ms += std::max(0.0, t - ks[k].overhead_ms - ks[k].memory_floor_ms / e.memory_share);
    }
    int planned_generated = 0;
    for (size_t i : a) planned_generated += is_generated(rec(i));
    std::vector<char> used(nb, 0);
    double after_ms = 0;
    for (size_t i : a) {
      const KernelRecord& r = rec(i);
      const KernelAnalysis an = analyze_kernel(r, c, weights);
      double t = -1;
      const bool timed = priced_alone(r);
      for (size_t k : b)  // the same kernel, measured
        if (!timed && !used[k] && same_nodes(k, i)) t = steady_time(p.kernels[k]), used[k] = 1;
      // A conv or pool of the fused plan that the backend timed alone: its own time, in the
      // layout and algorithm the library picked there (the conv nets' fused convs ran another
      // oneDNN algorithm in blocked layout, 2-2.7x off any rate the probe measures).
      if (timed) {
        t = steady_time(r);
        e.timed_alone++, e.timed_alone_ms += t;
        for (size_t k : b)
          if (!used[k] && !is_generated(p.kernels[k]) && p.kernels[k].kind != "copy" &&
              std::any_of(p.kernels[k].nodes.begin(), p.kernels[k].nodes.end(),
                          [&](const std::string& x) {
                            return std::binary_search(sorted_nodes[i].begin(),
                                                      sorted_nodes[i].end(), x);
                          }))
            e.replaced_calls_ms += steady_time(p.kernels[k]), used[k] = 1;
      }
      if (t < 0 && !is_generated(r)) {  // a library call: the measured calls of its nodes
        // One call for several (Q/K/V projections merged into one GEMM, two batched attention
        // GEMMs inside one attention kernel): the slowest call's time plus the others' floors,
        // not their sum. At batch 1 each call is mostly its fixed latency, which the one call
        // pays once (BERT-base: the sum predicted 0.560 ms after fusion, 0.431 measured).
        int calls = 0;
        double sum_t = 0, max_t = 0, sum_floor = 0, max_floor = 0;
        for (size_t k : b)
          if (!used[k] && !is_generated(p.kernels[k]) && p.kernels[k].kind != "copy" &&
              std::any_of(p.kernels[k].nodes.begin(), p.kernels[k].nodes.end(), [&](const std::string& x) {
                return std::binary_search(sorted_nodes[i].begin(), sorted_nodes[i].end(), x);
              })) {
            const double tk = steady_time(p.kernels[k]);
            calls++, sum_t += tk, max_t = std::max(max_t, tk);
            sum_floor += ks[k].floor_ms, max_floor = std::max(max_floor, ks[k].floor_ms);
            used[k] = 1;
          }
        if (calls == 1) t = sum_t;
        else if (calls > 1) t = std::min(sum_t, max_t + (sum_floor - max_floor));
      }
      // A conv or pool between library kernels reads and writes the library's own layout in the
      // fused plan (the CPU's blocked / NHWC activations), with no reorder per call and another
      // algorithm: it is priced at the rate the probe measured for the library (its bytes at the
      // generated kernels' share of the roof), when that is faster than its measured call.
      const auto rate = c.library_gflops.find(r.precision.empty() ? "fp32" : r.precision);
      const bool relayout = relayouts(r);
      if (!timed && t >= 0 && rate != c.library_gflops.end() && rate->second > 0 && relayout)
        t = std::min(t, an.overhead_ms + std::max(r.cost.flops / (rate->second * 1e9) * 1e3,
                                                  an.memory_floor_ms / e.memory_share));
      if (t < 0)
        t = an.overhead_ms + std::max(an.memory_floor_ms / e.memory_share,
                                      std::max(an.compute_floor_ms,
                                               planned_generated ? compute_ms / planned_generated : 0.0));
      after_ms += t;
    }
    // No generated kernel left in the group: its pointwise work rides in the library call's
    // epilogue (a GELU's Erf after a GEMM), the bytes gone but not the arithmetic, at its
    // compute floor (bert_tiny's fused GEMMs ran 0.113 -> 0.135 ms with their epilogues); a call
    // timed alone in the fused plan has it in its time already.
    if (planned_generated == 0 && !a.empty() &&
        std::none_of(a.begin(), a.end(), [&](size_t i) { return priced_alone(rec(i)); }))
      for (size_t k : b)
        if (is_generated(p.kernels[k])) after_ms += ks[k].compute_floor_ms;
    e.saved_ms += before_ms - after_ms;
  }
  return e;
}

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

// Adds kernel `k` (and its ONNX nodes) to the remedy's lists once.
void concern(Remedy& r, const KernelRecord& k) {
  if (std::find(r.kernels.begin(), r.kernels.end(), k.name) != r.kernels.end()) return;
  r.kernels.push_back(k.name);
  for (const auto& n : k.nodes)
    if (std::find(r.nodes.begin(), r.nodes.end(), n) == r.nodes.end()) r.nodes.push_back(n);
}

// The unit `--precision unit` moves a float32 library kernel to, "" when it does not move it:
// GEMMs compute at that precision; convs too where the precision stores the model in 16 bits
// (the CPU's oneDNN convs read bf16 operands like its GEMMs; on the GPU the whole model turns
// 16-bit and cuDNN runs its convs so), while at tf32 the GPU's convs (cuDNN) take TF32 math.
bool sixteen_bit(const std::string& unit) { return unit == "bf16" || unit == "fp16"; }

std::string moved_to(const KernelRecord& k, const std::string& unit, const Ceilings& c,
                     bool cpu) {
  if (k.kind != "library" || (!k.precision.empty() && k.precision != "fp32")) return "";
  if (has_any(k, {"MatMul", "Gemm"})) return unit;
  if (has_any(k, {"Conv"}) && (cpu || sixteen_bit(unit))) return unit;
  if (has_any(k, {"Conv"}) && c.peak_gflops.count("tf32")) return "tf32";
  return "";
}

// A rate the probe measured for kernel `k` at unit `prec`, FLOP/s (0: not measured): the library
// GEMM's own rate where the probe ran one at that precision, else the peak loop's. On the CPU a
// conv takes the GEMM's rate too: oneDNN runs both on the same units (AMX tiles at bf16, where
// the tile loop's peak is 14x the fp32 FMA loop's and oneDNN's GEMM 6.5x its fp32 one).
double unit_rate(const KernelRecord& k, const std::string& prec, const Ceilings& c,
                 bool* library) {
  const bool gemm = has_any(k, {"MatMul", "Gemm"}) || (c.backend == "cpu" && has_any(k, {"Conv"}));
  auto lib = c.library_gflops.find(prec);
  if (gemm && c.library_gflops.count("fp32") && lib != c.library_gflops.end()) {
    *library = true;
    return lib->second * 1e9;
  }
  *library = false;
  auto pk = c.peak_gflops.find(prec);
  return pk == c.peak_gflops.end() ? 0 : pk->second * 1e9;
}

// What `--precision unit` would do to this profile.
struct UnitPrediction {
  std::string unit;
  bool measured = false;  // the probe measured a rate for every kernel it moves
  double gain_ms = 0;     // net: kernels moved to a slower unit count against it
  int moved = 0;
  double moved_ms = 0;
  std::vector<std::pair<double, const KernelAnalysis*>> gains;  // largest first
  std::string rates, slower, generated_note, already_note, added_note;
  int timed_alone = 0;  // moved kernels priced at their time alone at `unit`
  int narrowed = 0;     // memory-bound kernels that only store 16 bits (GPU)
  double narrowed_ms = 0;
  double alone_ms = 0, alone_before_ms = 0;
  int others = 0;  // library kernels it does not move, timed alone at `unit` (pools on its data)
  double others_before_ms = 0, others_after_ms = 0;
  int generated = 0;  // generated kernels timed alone at `unit` (on its 16-bit data)
  double generated_before_ms = 0, generated_after_ms = 0;
};

// The ONNX node a plan node came from: passes that split a node name the pieces
// "<node>/part<i>", "<node>/sum<i>" (distribute_concat), "<node>/heads<i>" or
// "<node>/head_slice<i>" (merge_parallel_gemms); a plan at another precision may not split it.
std::string origin_node(const std::string& n) {
  const size_t slash = n.rfind('/');
  if (slash == std::string::npos) return n;
  size_t d = n.size();
  while (d > slash + 1 && std::isdigit(static_cast<unsigned char>(n[d - 1]))) --d;
  if (d == n.size()) return n;
  const std::string tag = n.substr(slash + 1, d - slash - 1);
  return tag == "part" || tag == "sum" || tag == "heads" || tag == "head_slice" ? n.substr(0, slash)
                                                                               : n;
}

// The kernels of a profile and of `alone` (the plan at another precision, its kernels timed
// alone: the CPU one by one, the GPU on that plan's own timeline) joined where they cover a
// common ONNX node (union-find; split nodes count as their origin). A kernel of the profile maps
// to its group's price: the summed time alone of the group's `alone` records (a generated one not
// timed at generated_price with `share`), shared in proportion to the profile kernels' steady
// times; only where every profile kernel of the group is a library kernel `moved` accepts or a
// generated kernel whose group is timed throughout (whisper's fused fp32 attention is, at bf16,
// two GEMMs and a softmax; GPT-2 fp32's GEMM and GELU kernel are one GEMM with a GELU epilogue,
// whose prediction at bf16 was 22% over while the pair was left to the rates, H100).
// `extra_ms`: records of `alone` that cover no node of the profile's kernels (a Concat the narrow
// plan copies, a cast of an input), a cost it adds.
struct AlonePrices {
  std::map<const KernelRecord*, double> after_ms;
  double extra_ms = 0;
  int extra = 0;
};

AlonePrices price_alone(const std::vector<KernelAnalysis>& ks,
                        const std::vector<KernelRecord>& alone, const Ceilings& c, double share,
                        const std::function<bool(const KernelRecord&)>& moved) {
  const size_t nb = ks.size(), n = nb + alone.size();
  auto rec = [&](size_t i) -> const KernelRecord& {
    return i < nb ? ks[i].rec : alone[i - nb];
  };
  const std::vector<size_t> root = node_groups(n, rec, origin_node);
  struct Group {
    bool ok = true;
    int before = 0, timed = 0;
    int generated = 0, untimed = 0;  // the profile's generated kernels; records not timed
    double before_ms = 0, alone_ms = 0;
  };
  std::map<size_t, Group> groups;
  std::vector<double> price(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    Group& g = groups[root[i]];
    const KernelRecord& r = rec(i);
    if (i < nb) {
      g.before++, g.before_ms += steady_time(r);
      if (is_generated(r)) g.generated++;
      else g.ok = g.ok && moved(r);
      continue;
    }
    if (r.kind == "library" && r.samples_ms.empty()) {
      g.ok = false;  // a library kernel not timed
      continue;
    }
    if (r.samples_ms.empty()) g.untimed++;
    price[i] = !r.samples_ms.empty() ? median(r.samples_ms) : generated_price(r, c, share);
    g.alone_ms += price[i], g.timed++;
  }
  AlonePrices out;
  for (size_t i = 0; i < n; ++i) {
    const Group& g = groups[root[i]];
    // A generated kernel of the profile is repriced only by times (the CPU times every kernel
    // of the plan: its bf16 loads and stores move half the bytes).
    if (!g.ok || g.timed == 0 || (g.generated > 0 && g.untimed > 0)) continue;
    if (g.before == 0) {
      out.extra_ms += price[i], out.extra++;
    } else if (i < nb) {
      out.after_ms[&ks[i].rec] =
          g.before_ms > 0 ? g.alone_ms * steady_time(ks[i].rec) / g.before_ms : g.alone_ms;
    }
  }
  return out;
}

// `alone`: the same plan at `unit`, its kernels timed alone (DoctorOptions::unit_kernels; null:
// none): a kernel priced there (price_alone) takes that time, which holds the library's own
// algorithm, its casts and the narrower data; moved kernels without a price take the probed rates.
UnitPrediction predict_unit(const std::vector<KernelAnalysis>& ks, const Ceilings& c,
                            const std::string& unit, bool cpu_convs,
                            const std::vector<KernelRecord>* alone) {
  UnitPrediction u;
  u.unit = unit;
  u.measured = true;
  bool any_library = false, any_peak = false;
  int n_slower = 0, n_gen = 0, n_already = 0;
  double slower_ms = 0, gen_ms = 0, already_ms = 0;
  std::set<std::string> already_precs;
  AlonePrices priced;
  if (alone)
    priced = price_alone(
        ks, *alone, c, generated_memory_share(ks),
        [&](const KernelRecord& r) {
          return r.kind == "library" && (r.precision.empty() || r.precision == "fp32");
        });
  // A GPU run whose library GEMMs or convs already compute in 16 bits stores its activations in
  // 16 bits (a bf16 or fp16 model, or --precision bf16|fp16): its memory-bound kernels have no
  // bytes left to halve (GPT-2 bf16 b16's 26 LayerNorms were said to save 0.048 ms at bf16).
  const bool stored_16 = std::any_of(ks.begin(), ks.end(), [](const KernelAnalysis& k) {
    return k.rec.kind == "library" && sixteen_bit(k.rec.precision);
  });
  for (const auto& k : ks) {
    const std::string to = moved_to(k.rec, unit, c, cpu_convs);
    if (to.empty()) {
      // A library kernel the precision does not move (a pool) may still read 16-bit data there.
      if (auto twin = priced.after_ms.find(&k.rec); twin != priced.after_ms.end()) {
        const double before = steady_time(k.rec), g = before - twin->second;
        u.gain_ms += g;
        if (is_generated(k.rec))
          u.generated++, u.generated_before_ms += before, u.generated_after_ms += twin->second;
        else
          u.others++, u.others_before_ms += before, u.others_after_ms += twin->second;
        continue;
      }
      // A library GEMM or conv of a 16-bit model already runs at its data's precision.
      if (k.rec.kind == "library" && has_any(k.rec, {"MatMul", "Gemm", "Conv"}) &&
          !k.rec.precision.empty() && k.rec.precision != "fp32") {
        already_ms += k.rec.time_ms, n_already++;
        already_precs.insert(k.rec.precision);
        continue;
      }
      if (k.regime == Regime::compute) gen_ms += k.rec.time_ms, n_gen++;
      // On the GPU a 16-bit precision stores every activation in 16 bits: a memory-bound kernel
      // of a float32 model moves half its bytes, so its work above the fixed cost halves.
      if (!cpu_convs && !stored_16 && sixteen_bit(unit) && k.regime == Regime::memory &&
          (k.rec.precision.empty() || k.rec.precision == "fp32")) {
        const double g = 0.5 * std::max(0.0, steady_time(k.rec) - k.overhead_ms);
        u.gain_ms += g, u.narrowed_ms += g, u.narrowed++;
      }
      continue;
    }
    if (auto twin = priced.after_ms.find(&k.rec); twin != priced.after_ms.end()) {
      const double before = steady_time(k.rec), after = twin->second;
      const double g = before - after;
      if (g < 0) slower_ms -= g, n_slower++;
      u.gain_ms += g, u.moved_ms += k.rec.time_ms, u.moved++;
      u.timed_alone++, u.alone_ms += after, u.alone_before_ms += before;
      u.gains.push_back({g, &k});
      continue;
    }
    bool lib_old = false, lib_new = false;
    const double old_rate = unit_rate(k.rec, "fp32", c, &lib_old);
    const double new_rate = unit_rate(k.rec, to, c, &lib_new);
    if (old_rate <= 0 || new_rate <= 0 || lib_old != lib_new) {
      u.measured = false;
      continue;
    }
    (lib_new ? any_library : any_peak) = true;
    double special_ms = 0;
    for (const auto& [fn, n] : k.rec.cost.special) special_ms += n / c.special_per_s(fn) * 1e3;
    // On the GPU a 16-bit unit also stores the moved kernel's operands in 16 bits: half its
    // float32 bytes, half its memory floor (GPT-2 fp32's 61 GEMMs at batch 1, memory-bound at
    // bf16, were predicted 0.11 ms slower than measured with the float32 floor, H100).
    const double mem_new =
        !cpu_convs && sixteen_bit(to) ? 0.5 * k.memory_floor_ms : k.memory_floor_ms;
    const double floor_old = std::max(k.memory_floor_ms, k.rec.cost.flops / old_rate * 1e3 + special_ms);
    const double floor_new = std::max(mem_new, k.rec.cost.flops / new_rate * 1e3 + special_ms);
    const double work = std::max(0.0, steady_time(k.rec) - k.overhead_ms);
    // A library GEMM measured at both precisions: its work scales by the library's own rate
    // ratio, never below its memory floor. Its floors cannot say it: a small GEMM far from both
    // roofs (bert_tiny's 32x128x384) is "memory-bound" by its floors, yet oneDNN's bf16 GEMM
    // (AMX) ran bert_tiny's twelve GEMMs 0.224 -> 0.080 ms here. Other kernels: the floors.
    const double work_new =
        lib_new ? std::max(std::min(work, mem_new), work * old_rate / new_rate)
        : floor_old > 0 ? work * floor_new / floor_old
                        : work;
    // On the CPU a moved kernel casts its float32 activations to bf16 first, a second oneDNN call
    // with its own fixed cost (mlp_tiny's four tiny GEMMs ran 0.007 -> 0.009 ms at bf16); never
    // more than the kernel takes whole (a probe whose fork/join ran on a loaded machine measured
    // 1.3 ms, and priced squeezenet1_1's 33 casts at 43 ms).
    const double cast_ms = cpu_convs ? std::min(k.overhead_ms, steady_time(k.rec)) : 0;
    const double g = work - work_new - cast_ms;
    if (g < 0) slower_ms -= g, n_slower++;
    u.gain_ms += g, u.moved_ms += k.rec.time_ms, u.moved++;
    u.gains.push_back({g, &k});
  }
  if (u.others > 0)
    u.added_note += fmt::format("; {} other library kernel{} (pools and the like, on its data) "
                                "take{} {:.3f} -> {:.3f} ms there, timed alone",
                                u.others, u.others == 1 ? "" : "s", u.others == 1 ? "s" : "",
                                u.others_before_ms, u.others_after_ms);
  if (u.generated > 0)
    u.added_note += fmt::format("; {} generated kernel{} take{} {:.3f} -> {:.3f} ms there, timed "
                                "alone",
                                u.generated, u.generated == 1 ? "" : "s",
                                u.generated == 1 ? "s" : "", u.generated_before_ms,
                                u.generated_after_ms);
  if (priced.extra > 0 && u.moved > 0) {
    u.gain_ms -= priced.extra_ms;
    u.added_note += fmt::format("; the plan at --precision {} adds {} kernel{} ({:.3f} ms "
                               "timed alone or priced)",
                               unit, priced.extra, priced.extra == 1 ? "" : "s", priced.extra_ms);
  }
  std::stable_sort(u.gains.begin(), u.gains.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  auto lib = [&](const std::string& prec) { return c.library_gflops.at(prec); };
  if (any_library)
    u.rates = fmt::format("the library GEMM rate measured at {} ({:.1f} GFLOP/s against {:.1f} at "
                          "fp32)",
                          unit, lib(unit), lib("fp32"));
  if (any_peak && c.peak_gflops.count(unit))
    u.rates += fmt::format("{}the {} peak loop ({:.1f} GFLOP/s against {:.1f} fp32){}",
                           any_library ? " and " : "", unit, c.peak_gflops.at(unit),
                           c.peak_flops_per_s("fp32") / 1e9,
                           any_library ? " for the others" : "");
  if (u.rates.empty()) u.rates = "the " + unit + " ceiling";
  if (u.timed_alone > 0)
    u.rates = fmt::format("{} timed alone in the plan at --precision {} ({:.3f} ms; {:.3f} ms "
                          "here){}",
                          u.timed_alone, unit, u.alone_ms, u.alone_before_ms,
                          u.timed_alone < u.moved ? ", the others at " + u.rates : std::string());
  if (n_slower > 0)
    u.slower = fmt::format("; {} of them run{} slower there (+{:.3f} ms)", n_slower,
                           n_slower == 1 ? "s" : "", slower_ms);
  if (n_already > 0)
    u.already_note = fmt::format("; {} library GEMM{} and conv{} ({:.3f} ms) already run{} in {}",
                                 n_already, n_already == 1 ? "" : "s", n_already == 1 ? "" : "s",
                                 already_ms, n_already == 1 ? "s" : "",
                                 fmt::join(already_precs, "/"));
  if (n_gen > 0)
    u.generated_note = fmt::format("; {} compute-bound kernel{} that {} not library GEMMs or convs "
                                   "({:.3f} ms) compute{} in fp32 whatever --precision says",
                                   n_gen, n_gen == 1 ? "" : "s", n_gen == 1 ? "is" : "are", gen_ms,
                                   n_gen == 1 ? "s" : "");
  if (u.narrowed > 0)
    u.generated_note += fmt::format("; {} memory-bound kernel{} store{} 16 bits, half the bytes "
                                    "(-{:.3f} ms)",
                                    u.narrowed, u.narrowed == 1 ? "" : "s",
                                    u.narrowed == 1 ? "s" : "", u.narrowed_ms);
  return u;
}

}  // namespace


std::vector<Remedy> predict_remedies(const RunProfile& p, const std::vector<KernelAnalysis>& ks,
                                     const Attribution& a, const Ceilings& c,
                                     const DoctorOptions& opts) {
  std::vector<Remedy> out;
  double floors = 0;
  for (const auto& k : ks) floors += k.floor_ms;
  double headroom = std::max(0.0, a.wall_ms - floors);  // no remedy beats the roofline
  // Faster units move the roof itself, so only they may go below the fp32 floors.
  // `lowers_floor_ms`: how much the remedy lowers the roofline itself (fusion removes bytes).
  auto add = [&](std::string name, double gain, std::string detail, double lowers_floor_ms = 0) {
    // Faster units may predict a loss (units slower than fp32 for some kernels): not clamped at 0.
    gain = name == "faster_units"
               ? std::min(gain, a.wall_ms)
               : std::clamp(gain, 0.0, std::min(a.wall_ms, headroom + lowers_floor_ms));
    Remedy r;
    r.name = std::move(name);
    r.detail = std::move(detail);
    r.gain_ms = gain;
    r.predicted_ms = a.wall_ms - gain;
    out.push_back(std::move(r));
    return &out.back();
  };
  const bool reference = p.backend == "reference";
  const bool gpu = c.backend == "cuda";
  const bool cpu_convs = p.backend == "cpu";  // --precision reaches oneDNN's convs too

  // Fusion. What is left to fuse in a fused plan is what the fuser refused: the action is then
  // its boundary reason. A plan profiled one kernel per op gets the fused plan by a switch.
  FusionEstimate f = estimate_fusion(p, ks, c);
  double at_ceiling_ms = f.bytes / (c.bandwidth_gbs * 1e9) * 1e3;
  const bool fused = opts.fused >= 0 ? opts.fused == 1 : !reference;
  const bool from_plan = !fused && !reference && !opts.fused_kernels.empty();
  if (f.merges > 0 || from_plan) {
    Remedy* r = nullptr;
    if (from_plan) {
      const PlanFusionEstimate e = estimate_fusion_from_plan(p, ks, c, opts.fused_kernels);
      const std::string library =
          e.timed_alone > 0
              ? fmt::format("its {} library kernels but GEMMs (convs, pools, channel scales, "
                            "attention) timed {} in the fused plan's own layouts and algorithms "
                            "({:.3f} ms; the calls of their nodes here took {:.3f} ms), GEMMs keep "
                            "their measured time",
                            e.timed_alone, gpu ? "on its CUPTI timeline" : "alone",
                            e.timed_alone_ms, e.replaced_calls_ms)
              : std::string("library calls keep their measured time, convs and pools at most the "
                            "library's probed rate in its own layout");
      // On the GPU the idle time between kernels (dependency resolution of each graph node or
      // launch) goes with the kernel boundaries: a share of it, as many fewer kernels as the
      // fused plan has. H100, bf16 b1, kept whole: BERT-base predicted 0.449 ms after fusion,
      // GPT-2 0.549, ViT-B/16 0.561, ResNet-50 0.476; measured 0.423, 0.482, 0.499, 0.354 (the
      // gaps fell from 0.070-0.156 ms to 0.031-0.036).
      const double gaps_ms = gpu && e.before > 0 && e.after < e.before
                                 ? a.gap_ms * (1.0 - double(e.after) / e.before)
                                 : 0.0;
      r = add("fusion", e.saved_ms + gaps_ms,
              fmt::format("the fused plan brrr compiles runs {} kernels instead of {}: {}; "
                          "generated kernels priced at {:.0f}% of their memory roof as this run's "
                          "reached, one fixed cost each{}",
                          e.after, e.before, library, 100 * e.memory_share,
                          gaps_ms > 0 ? fmt::format("; the {:.3f} ms of idle GPU time between "
                                                    "kernels shrinks with their number (-{:.3f} ms)",
                                                    a.gap_ms, gaps_ms)
                                      : std::string()),
              e.lowers_floor_ms);
    } else {
      r = add(
          "fusion", f.ms + f.fixed_ms,
          fmt::format("fusing {} kernels into {} removes {} of intermediate traffic, about {:.3f} ms "
                      "as its share of those kernels' time ({:.3f} ms at the {:.1f} GB/s ceiling), "
                      "and {} kernel call{}{}",
                      f.kernels_in_groups, f.groups, human_bytes(f.bytes), f.ms, at_ceiling_ms,
                      c.bandwidth_gbs, f.merges, f.merges == 1 ? "" : "s",
                      f.fixed_ms > 0 ? fmt::format(", about {:.3f} ms of fixed per-kernel cost",
                                                   f.fixed_ms)
                                     : std::string()),
          at_ceiling_ms + f.fixed_ms);
    }
    for (const auto& pr : f.pairs) {
      const KernelRecord &from = p.kernels[size_t(pr.producer)], &to = p.kernels[size_t(pr.consumer)];
      concern(*r, from);
      concern(*r, to);
      r->boundaries.push_back(fmt::format(
          "{} -> {} via '{}' ({:.3f} ms): {}", from.name, to.name, pr.value, pr.ms,
          pr.boundary.empty() ? "no boundary reason recorded (not a planned run)" : pr.boundary));
    }
    if (reference) {
      r->action = "--backend cpu: the compiled plan fuses these kernels";
      r->applicable = true;
    } else if (!fused) {
      r->action = "drop --no-fusion and unset BRRR_DISABLE_FUSION: brrr fuses by default";
      r->applicable = true;
    } else if (!f.pairs.empty()) {
      const FusionPair& top = f.pairs.front();
      r->action = "brrr cannot do this yet: " +
                  (top.boundary.empty() ? std::string("the fuser left these kernels apart and "
                                                      "recorded no reason")
                                        : top.boundary) +
                  (f.pairs.size() > 1
                       ? fmt::format(" ({} -> {}; {} more boundaries listed)",
                                     p.kernels[size_t(top.producer)].name,
                                     p.kernels[size_t(top.consumer)].name, f.pairs.size() - 1)
                       : fmt::format(" ({} -> {})", p.kernels[size_t(top.producer)].name,
                                     p.kernels[size_t(top.consumer)].name));
    }
  } else {
    Remedy* r = add("fusion", 0,
                    p.kernels.empty() || (p.kernels[0].reads.empty() && p.kernels[0].writes.empty())
                        ? "no tensor reads/writes in this profile: cannot see intermediates"
                        : "no single-consumer intermediates left to fuse");
    r->action = "none: nothing left to fuse";
  }

  // Static plan: every kernel keeps its call but loses the executor's dispatch, and the host
  // gaps between kernels go away. On the GPU the static plan is one CUDA graph: each kernel then
  // costs a graph node. A compiled CPU plan is static already, and so is a CUDA plan replayed as
  // a graph: then the remedy is in effect, and what is left of the fixed cost is said instead.
  const bool graphed = gpu && !p.kernels.empty() &&
                       std::all_of(p.kernels.begin(), p.kernels.end(),
                                   [](const KernelRecord& k) { return k.graph_node; });
  // CUPTI's activity records time kernels on the device; the fallback times them from the host.
  const bool device_timeline = p.timing_source.rfind("CUPTI", 0) == 0;
  double static_us = c.per_kernel_overhead_us("fused", gpu);
  if (p.backend == "cpu" || graphed) {
    Remedy* r = add(
        "static_plan", 0,
        fmt::format(fmt::runtime(graphed
                                     ? "in effect: the plan is replayed as one CUDA graph ({} "
                                       "nodes at {:.3f} us each); {:.3f} ms of the wall is outside "
                                       "kernels"
                                     : "in effect: the plan is static ({} kernel calls at {:.3f} "
                                       "us each); {:.3f} ms of the wall is host gaps"),
                    ks.size(), static_us, a.gap_ms));
    r->in_effect = true;
    r->action = graphed ? "in effect: CUDA graphs are on" : "in effect: the compiled plan is static";
  } else {
    Remedy* r = nullptr;
    if (gpu && device_timeline) {
      // Kernel times from the device's own timeline (CUPTI) hold no launch cost: the host's part
      // shows as idle gaps between kernels. Replayed as a graph, the kernels keep their times and
      // each GPU activity costs at most the probed time of an empty graph node (a longer kernel's
      // launch overlaps its predecessor's tail: the fp32 exports of BERT-base, GPT-2, ViT-B/16 and
      // ResNet-50 at batch 1 measured 0.56, 0.02, 0.05 and 0 us per kernel on the H200).
      int nodes = 0;
      for (const auto& k : p.kernels) nodes += std::max(1, k.gpu_activities);
      const double graph_gaps_ms = std::min(a.gap_ms, nodes * static_us * 1e-3);
      const double plan_ms = a.gap_ms - graph_gaps_ms;
      r = add("static_plan", plan_ms,
              fmt::format("a CUDA graph replays the {} kernels ({} GPU activities) at their times "
                          "on this timeline, and the {:.3f} ms of idle GPU gaps between them "
                          "become at most {:.3f} us per graph node ({:.3f} ms), about {:.3f} ms",
                          ks.size(), nodes, a.gap_ms, static_us, graph_gaps_ms, plan_ms));
    } else {
      // Host-timed kernels: each holds its launch or dispatch, which the static plan replaces.
      double per_kernel_saving_ms = 0;
      for (const auto& k : ks) per_kernel_saving_ms += std::max(0.0, k.overhead_ms - static_us * 1e-3);
      const double plan_ms = per_kernel_saving_ms + a.gap_ms;
      r = add("static_plan", plan_ms,
              fmt::format(fmt::runtime(gpu ? "a CUDA graph replaces {} launches ({:.3f} -> {:.3f} us "
                                             "each) and removes {:.3f} ms of idle GPU gaps, about "
                                             "{:.3f} ms"
                                           : "a static plan removes {} dispatches ({:.3f} -> {:.3f} "
                                             "us each) and {:.3f} ms of host gaps, about {:.3f} ms"),
                          ks.size(), ks.empty() ? 0.0 : ks[0].overhead_ms * 1e3, static_us,
                          a.gap_ms, plan_ms));
    }
    // Every kernel pays the same fixed cost: the list names them all, in plan order.
    for (const auto& k : p.kernels) concern(*r, k);
    r->action = gpu ? "unset BRRR_DISABLE_GRAPHS: CUDA graphs are on by default"
                    : "--backend cpu: the compiled plan is static";
    r->applicable = true;
  }

  // Faster units: what `--precision` changes, for each precision the backend's validation
  // accepts; the one predicted to save most is offered. It moves only library GEMMs and convs
  // (the generated kernels compute in fp32 whatever the flag says). A moved kernel keeps its fixed
  // per-kernel cost and its share of the roof: its work time scales by how much its floor moves,
  // at the rates the probe measured for that unit (the library GEMM itself where the probe ran
  // it, else the peak loops). The floor can rise (a CPU's bf16 dot loop slower than its fp32 FMA
  // loop): then that kernel's gain is negative, and the prediction says so.
  double cb_ms = 0;
  int n_cb = 0;
  for (const auto& k : ks)
    if (k.regime == Regime::compute) cb_ms += k.rec.time_ms, n_cb++;
  std::vector<UnitPrediction> units;
  for (const auto& prec : opts.precisions) {
    auto alone = opts.unit_kernels.find(prec);
    UnitPrediction u = predict_unit(ks, c, prec, cpu_convs,
                                    alone == opts.unit_kernels.end() ? nullptr : &alone->second);
    if (u.measured) units.push_back(std::move(u));
  }
  const UnitPrediction* best = nullptr;
  for (const auto& u : units)
    if (!best || u.gain_ms > best->gain_ms) best = &u;
  const std::string backend_name = p.backend.empty() ? c.backend : p.backend;
  if (!best) {
    Remedy* r = add("faster_units", 0,
                    n_cb == 0 ? fmt::format("no compute-bound kernels: faster units cannot help "
                                            "(compute is {:.0f}% of the time)",
                                            100 * a.share(Regime::compute))
                              : fmt::format("{} compute-bound kernel{} take{} {:.3f} ms; no faster "
                                            "unit to move them to on this backend",
                                            n_cb, n_cb == 1 ? "" : "s", n_cb == 1 ? "s" : "",
                                            cb_ms));
    if (opts.precisions.empty())
      r->action = "not on the " + backend_name + " backend: " +
                  (opts.precision_refusal.empty() ? "it accepts no --precision but fp32"
                                                  : opts.precision_refusal);
    else
      r->action = fmt::format("none: the probe measured no rate for --precision {}",
                              fmt::join(opts.precisions, "/"));
    for (const auto& k : ks)
      if (k.regime == Regime::compute) concern(*r, k.rec);
  } else {
    std::string others;
    for (const auto& u : units)
      if (&u != best) others += fmt::format("; --precision {}: {:.3f} ms", u.unit, u.gain_ms);
    const bool all_alone = best->timed_alone == best->moved;
    // Nothing to move (a 16-bit model's GEMMs already run at its precision): say that, not
    // "0 library kernels".
    const std::string detail =
        best->moved == 0
            ? fmt::format("no float32 library GEMM or conv to move{}{}{}", best->already_note,
                          best->generated_note, others)
            : fmt::format("{} library kernel{} ({:.3f} ms) at {}{}{}{}{}{}{}", best->moved,
                          best->moved == 1 ? "" : "s", best->moved_ms, best->rates,
                          all_alone ? std::string()
                          : cpu_convs ? ", each keeping its fixed cost and its share of the "
                                        "roof, plus one more fixed cost for casting its "
                                        "activations to " + best->unit
                                      : std::string(", each keeping its fixed cost and its "
                                                    "share of the roof"),
                          best->slower, best->added_note, best->already_note,
                          best->generated_note, others);
    // With no library kernel to move, what is left of the gain is the generated kernels timed
    // again at the precision: under 1% of the wall that is their noise, not a remedy (a bf16
    // BERT-base on an H100: "would save about 0.000 ms, but --precision tf32").
    const bool nothing = best->moved == 0 && best->gain_ms < 0.01 * a.wall_ms;
    Remedy* r = add("faster_units", nothing ? 0.0 : best->gain_ms, detail);
    for (const auto& [g, k] : best->gains)
      if (g != 0 && !nothing) concern(*r, k->rec);
    r->action = nothing ? "none: no float32 library GEMM or conv to move"
                        : "--precision " + best->unit;
    r->applicable = best->moved > 0 && r->gain_ms > 0;
  }

  // Kernels a compiled plan runs on brrr's reference executor: an op, or a case of one, that no
  // generated or library kernel of this backend takes. They run plain loops in double precision,
  // often far below every roof, and no flag helps: the honest remedy is brrr's to build. Priced
  // at their roofline floors (an upper bound on the gain, as a kernel reaches its roof at best).
  if (!reference) {
    double ms = 0, floors_ms = 0;
    std::vector<const KernelAnalysis*> refs;
    for (const auto& k : ks)
      if (k.rec.kind == "reference") {
        refs.push_back(&k);
        ms += steady_time(k.rec);
        floors_ms += k.floor_ms;
      }
    if (!refs.empty()) {
      std::stable_sort(refs.begin(), refs.end(), [](const KernelAnalysis* x, const KernelAnalysis* y) {
        return steady_time(x->rec) > steady_time(y->rec);
      });
      std::string ops;
      for (const KernelAnalysis* k : refs) {
        const std::string op = k->rec.ops.empty() ? k->rec.name : fmt::format("{}", fmt::join(k->rec.ops, "+"));
        if (ops.find(op) == std::string::npos) ops += (ops.empty() ? "" : ", ") + op;
      }
      Remedy* r = add("reference_kernels", ms - floors_ms,
                      fmt::format("{} kernel{} ({:.3f} ms, {:.0f}% of the wall) run on brrr's "
                                  "reference executor, whose roofline floors are {:.3f} ms: at "
                                  "their roofs they would save up to that difference",
                                  refs.size(), refs.size() == 1 ? "" : "s", ms,
                                  a.wall_ms > 0 ? 100 * ms / a.wall_ms : 0.0, floors_ms));
      for (const KernelAnalysis* k : refs) concern(*r, k->rec);
      r->action = fmt::format("brrr cannot do this yet: {} ({} kernel{}) run{} on the reference "
                              "executor ({} has no generated or library kernel for {})",
                              ops, refs.size(), refs.size() == 1 ? "" : "s",
                              refs.size() == 1 ? "s" : "", p.backend,
                              refs.size() == 1 ? "it" : "them");
      r->applicable = false;
    }
  }
  return out;
}

Verdict make_verdict(const Attribution& a, const std::vector<Remedy>& rs,
                     const std::optional<BatchScaling>& b) {
  Verdict v;
  double sc = a.share(Regime::compute), sm = a.share(Regime::memory),
         so = a.share(Regime::overhead);
  v.regime = so >= sc && so >= sm ? Regime::overhead : sc >= sm ? Regime::compute : Regime::memory;
  // Overhead where most of it is tiny kernels running far past their fixed cost is their own
  // latency, not launches: the sentence says which part is which.
  const std::string overhead =
      a.slow_ms > 0.25 * a.overhead_ms
          ? fmt::format("fixed per-kernel cost and host gaps ({:.3f} ms) and tiny work done slowly "
                        "inside kernels ({:.3f} ms: their own latency, which fewer launches do not "
                        "remove)",
                        a.overhead_ms - a.slow_ms, a.slow_ms)
          : std::string("fixed per-kernel cost and host gaps");
  std::string s = fmt::format(
      "{}-bound: {:.0f}% of the time is {} (compute {:.0f}%, memory {:.0f}%, overhead {:.0f}%).",
      regime_name(v.regime),
      100 * (v.regime == Regime::compute ? sc : v.regime == Regime::memory ? sm : so),
      v.regime == Regime::compute ? "arithmetic" : v.regime == Regime::memory ? "moving bytes" : overhead,
      100 * sc, 100 * sm, 100 * so);
  // Every remedy of the table, largest gain first; each sentence is that row's own numbers.
  std::vector<const Remedy*> order;
  for (const auto& r : rs)
    if (r.name != "applied") order.push_back(&r);
  std::stable_sort(order.begin(), order.end(),
                   [](const Remedy* x, const Remedy* y) { return x->gain_ms > y->gain_ms; });
  auto names = [](const Remedy& r) {
    if (r.kernels.empty()) return std::string();
    size_t n = std::min<size_t>(r.kernels.size(), 3);
    std::string k;
    for (size_t i = 0; i < n; ++i) k += (i ? ", " : "") + r.kernels[i];
    if (r.kernels.size() > n) k += fmt::format(" and {} more", r.kernels.size() - n);
    return " (" + k + ")";
  };
  int todo = 0;
  for (const Remedy* r : order) {
    if (r->in_effect) {
      s += fmt::format(" {}: {}.", r->name, r->action);
    } else if (r->applicable && r->gain_ms > 0) {
      s += fmt::format(" Do: {}, {}: saves about {:.3f} ms ({:.3f} -> {:.3f} ms){}.", r->name,
                       r->action, r->gain_ms, a.wall_ms, r->predicted_ms, names(*r));
      todo++;
    } else if (r->gain_ms > 0) {
      s += fmt::format(" {} would save about {:.3f} ms{}, but {}.", r->name, r->gain_ms, names(*r),
                       r->action);
    } else if (r->gain_ms < 0) {  // a flag the backend takes, predicted to slow this model
      s += fmt::format(" {}: not {}: predicted {:.3f} ms slower ({:.3f} -> {:.3f} ms; {}).",
                       r->name, r->action, -r->gain_ms, a.wall_ms, r->predicted_ms, r->detail);
    } else if (r->action.rfind("none", 0) == 0) {
      s += fmt::format(" {}: {}.", r->name, r->detail);
    } else {
      s += fmt::format(" {}: {} ({}).", r->name, r->action, r->detail);
    }
  }
  if (todo == 0) s += " Nothing brrr offers on this backend saves time here.";
  if (b) s += " Batch scaling: " + b->verdict + ".";
  v.advice = s;
  return v;
}

}  // namespace brrr::doctor
