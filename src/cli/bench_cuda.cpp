// brrr bench --backend cuda: memory-bound fused kernels, GEMMs and an overhead-bound MLP through
// the CUDA Session. Times are medians of CUDA-event-timed whole-plan runs on device-resident
// inputs (Session::profile wall_ms). GB/s counts compulsory bytes; the copy ceiling and the
// cuBLASLt-direct GEMM are measured in the same process for the ratios.
#include "cli/bench_cuda.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>

#include "brrr/error.hpp"
#include "brrr/op.hpp"
#include "brrr/session.hpp"
#include "runtime/graph_builder.hpp"
#ifdef BRRR_HAVE_CUDA
#include "backend/cuda/cublaslt_gemm.hpp"
#include "backend/cuda/cuda_graph.hpp"
#include "backend/cuda/cuda_runtime.hpp"
#include "core/env.hpp"
#include "core/file_io.hpp"
#include "core/median.hpp"
#endif

namespace brrr::cli {

namespace {

Tensor rand_tensor(DType t, const Shape& s, uint32_t seed) {
  Tensor x = Tensor::empty(t, s);
  uint32_t st = seed * 2654435761u | 1u;
  auto next = [&st] {
    st ^= st << 13;
    st ^= st >> 17;
    st ^= st << 5;
    return float(st >> 8) * (2.0f / 16777216.0f) - 1.0f;  // never all zeros
  };
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (t == DType::f32) x.data<float>()[i] = next();
    else x.data<bf16>()[i] = bf16(next());
  }
  return x;
}

struct Work {
  std::string name, torch, what;
  std::function<Graph()> build;
  bool mlp = false;  // run with graphs on and off
};

std::vector<Work> workloads() {
  std::vector<Work> w;
  const int64_t R = 16384, C = 4096;
  w.push_back({"cos_cos", "cos(cos(x)) 2^28 fp32", "cos(cos(x)) on 2^28 float32", [] {
                 GraphBuilder b;
                 int x = b.input("x", {int64_t(1) << 28});
                 b.output(b.node("Cos", {b.node("Cos", {x})}));
                 return b.g;
               }});
  auto ln = [=](bool pre) {
    return [=] {
      GraphBuilder b;
      int x = b.input("x", {R, C}, DType::bf16);
      int g = b.constant("gamma", rand_tensor(DType::bf16, {C}, 3));
      int be = b.constant("beta", rand_tensor(DType::bf16, {C}, 4));
      if (pre) {
        Tensor half = Tensor::empty(DType::bf16, {});
        half.data<bf16>()[0] = bf16(0.5f);
        x = b.node("Add", {x, b.node("Mul", {x, b.constant("half", half)})});
      }
      b.output(b.node("LayerNormalization", {x, g, be}, {{"epsilon", 1e-5f}}));
      return b.g;
    };
  };
  w.push_back({"layernorm", "LayerNorm bf16 16384x4096", "LayerNorm 16384x4096 bfloat16", ln(false)});
  w.push_back({"softmax", "softmax(-1) bf16 16384x4096", "Softmax(-1) 16384x4096 bfloat16", [=] {
                 GraphBuilder b;
                 int x = b.input("x", {R, C}, DType::bf16);
                 b.output(b.node("Softmax", {x}, {{"axis", int64_t(-1)}}));
                 return b.g;
               }});
  w.push_back({"gelu_bias", "GELU(x+b) bf16 16384x4096", "GELU(x+b) (erf) 16384x4096 bfloat16", [=] {
                 GraphBuilder b;
                 int x = b.input("x", {R, C}, DType::bf16);
                 int bias = b.constant("b", rand_tensor(DType::bf16, {C}, 5));
                 b.output(b.node("Gelu", {b.node("Add", {x, bias})}));
                 return b.g;
               }});
  w.push_back({"ln_x_half", "LayerNorm(x+0.5x) bf16 16384x4096", "LayerNorm(x+0.5x) 16384x4096 bfloat16", ln(true)});
  const int64_t n = 8192;
  auto gemm = [=](std::string act) {
    return [=] {
      GraphBuilder b;
      int a = b.input("A", {n, n}, DType::bf16);
      int W = b.constant("W", rand_tensor(DType::bf16, {n, n}, 6));
      int y = b.node("MatMul", {a, W});
      if (!act.empty()) {
        int bias = b.constant("b", rand_tensor(DType::bf16, {n}, 7));
        y = b.node("Gelu", {b.node("Add", {y, bias})}, {{"approximate", std::string(act)}});
      }
      b.output(y);
      return b.g;
    };
  };
  w.push_back({"gemm_bf16", "GEMM bf16 8192^3", "A@W bf16 8192^3", gemm("")});
  w.push_back({"gemm_gelu_tanh", "GELU(A@W+b) bf16 8192^3", "GELU_tanh(A@W+b) bf16 8192^3 (cuBLASLt epilogue)", gemm("tanh")});
  w.push_back({"gemm_gelu_erf", "GELU(A@W+b) bf16 8192^3", "GELU_erf(A@W+b) bf16 8192^3 (bias epilogue + erf kernel)", gemm("none")});
  // One attention block from the projections to the merged heads, as BERT-base's, GPT-2's and
  // ViT-B/16's exports write it (12 heads of 64, bf16; seq 128 with an additive mask or causal,
  // or ViT's 197 with none): one fused kernel by default, so the time is that kernel's; with
  // BRRR_FUSED_ATTENTION=0, the head split, the batched GEMMs and the softmax it replaces.
  enum class Mask { additive, causal, none };
  auto attention = [](int64_t batch, int64_t S, Mask mask) {
    return [=] {
      const int64_t H = 12, D = 64;
      GraphBuilder b;
      auto heads = [&](int x, std::vector<int64_t> perm) {
        Tensor to = Tensor::from_vector<int64_t>({4}, {batch, S, H, D});
        int split = b.node("Reshape", {x, b.constant(fmt::format("to{}", b.count++), to)});
        return b.node("Transpose", {split}, {{"perm", perm}});
      };
      int q = heads(b.input("q", {batch, S, H * D}, DType::bf16), {0, 2, 1, 3});
      int kt = heads(b.input("k", {batch, S, H * D}, DType::bf16), {0, 2, 3, 1});
      int v = heads(b.input("v", {batch, S, H * D}, DType::bf16), {0, 2, 1, 3});
      Tensor eight = Tensor::scalar<float>(8.f).cast(DType::bf16);
      int s = b.node("Div", {b.node("MatMul", {q, kt}), b.constant("sqrt_d", eight)});
      if (mask == Mask::causal) {
        Tensor keep = Tensor::empty(DType::boolean, {1, 1, S, S});
        for (int64_t i = 0; i < S; ++i)
          for (int64_t j = 0; j < S; ++j) keep.data<bool>()[i * S + j] = j <= i;
        Tensor ninf = Tensor::scalar<float>(-INFINITY).cast(DType::bf16);
        s = b.node("Where", {b.constant("keep", keep), s, b.constant("ninf", ninf)});
      } else if (mask == Mask::additive) {
        s = b.node("Add", {s, b.input("mask", {batch, 1, 1, S}, DType::bf16)});
      }
      int ctx = b.node("MatMul", {b.node("Softmax", {s}, {{"axis", int64_t(-1)}}), v});
      Tensor merged = Tensor::from_vector<int64_t>({3}, {batch, S, H * D});
      int t = b.node("Transpose", {ctx}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
      b.output(b.node("Reshape", {t, b.constant("merged", merged)}));
      return b.g;
    };
  };
  for (int64_t batch : {1, 32})
    w.push_back({fmt::format("attn_bert_b{}", batch), fmt::format("BERT-base attention bf16 b{}", batch),
                 fmt::format("BERT-base attention block (12x64, seq 128, additive mask) "
                             "bfloat16, batch {}", batch),
                 attention(batch, 128, Mask::additive)});
  for (int64_t batch : {1, 16})
    w.push_back({fmt::format("attn_gpt2_b{}", batch), fmt::format("GPT-2 attention bf16 b{}", batch),
                 fmt::format("GPT-2 attention block (12x64, seq 128, causal) bfloat16, batch {}", batch),
                 attention(batch, 128, Mask::causal)});
  for (int64_t batch : {1, 32})
    w.push_back({fmt::format("attn_vit_b{}", batch), fmt::format("ViT-B/16 attention bf16 b{}", batch),
                 fmt::format("ViT-B/16 attention block (12x64, seq 197, no mask) bfloat16, batch {}", batch),
                 attention(batch, 197, Mask::none)});
  for (int64_t batch : {1, 64, 4096}) {
    w.push_back({fmt::format("mlp_b{}", batch), fmt::format("MLP 8x(Linear256+ReLU) fp32 b={}", batch),
                 fmt::format("8 x (Linear(256,256)+ReLU) float32, batch {}", batch),
                 [=] {
                   GraphBuilder b;
                   int x = b.input("x", {batch, 256});
                   for (int l = 0; l < 8; ++l) {
                     int W = b.constant(fmt::format("W{}", l), rand_tensor(DType::f32, {256, 256}, 10 + l));
                     int bb = b.constant(fmt::format("b{}", l), rand_tensor(DType::f32, {256}, 30 + l));
                     x = b.node("Relu", {b.node("Add", {b.node("MatMul", {x, W}), bb})});
                   }
                   b.output(x);
                   return b.g;
                 },
                 true});
  }
  return w;
}

std::pair<double, double> cost_of(const Graph& G) {
  double bytes = 0, flops = 0;
  std::set<int> read;
  for (const Node& n : G.nodes)
    for (int i : n.inputs)
      if (i >= 0 && G.value(i).producer < 0) read.insert(i);
  auto vb = [&](int v) { return double(G.value(v).nbytes()); };
  for (int v : read) bytes += vb(v);
  for (int v : G.outputs) bytes += vb(v);
  for (const Node& n : G.nodes) {
    Cost c = op_cost(G, n);
    flops += c.flops;
  }
  return {bytes, flops};
}

#ifdef BRRR_HAVE_CUDA
// Device-to-device copy of 1 GiB, read + write bytes: the bandwidth ceiling.
double copy_gbps(int reps) {
  using namespace brrr::cuda;
  Device dev(0);
  Stream s;
  const size_t bytes = size_t(1) << 30;
  DeviceBuffer a(bytes, "copy src"), b(bytes, "copy dst");
  memset_u32(a.ptr(), 0x3f800000u, bytes / 4, s, "copy src");
  Event e0, e1;
  std::vector<double> t;
  for (int r = 0; r < reps + 2; ++r) {
    e0.record(s);
    copy_d2d(b.ptr(), a.ptr(), bytes, s, "copy");
    e1.record(s);
    e1.synchronize();
    if (r >= 2) t.push_back(Event::elapsed_ms(e0, e1));
  }
  return 2.0 * double(bytes) / (median(t) * 1e-3) / 1e9;
}

// cuBLASLt called directly (no Session), on the same random operands as the Session's GEMM: the
// GEMM ceiling for the ratios. once() enqueues one GEMM between two events and waits for it:
// launched on the stream (a plain library call), or replayed as a one-node CUDA graph (launched
// the way a brrr plan launches its GEMM, which measured ~2% faster on the H200).
class DirectGemm {
 public:
  explicit DirectGemm(cuda::GemmEpilogue epi)
      : epi_(epi), a_(bytes(n * n), "A"), b_(bytes(n * n), "B"), c_(bytes(n * n), "C"), bias_(bytes(n), "bias") {
    using namespace brrr::cuda;
    // Random data like the Session's (constant data draws less power and runs faster).
    Tensor ha = rand_tensor(DType::bf16, {n, n}, 100), hb = rand_tensor(DType::bf16, {n, n}, 6);
    copy_h2d(a_.ptr(), ha.raw(), ha.nbytes(), s_, "A");
    copy_h2d(b_.ptr(), hb.raw(), hb.nbytes(), s_, "B");
    memset_u32(bias_.ptr(), 0, size_t(n / 2), s_, "bias");
    s_.synchronize("direct GEMM operands");
  }
  double once(bool graph = false) {
    dev_.make_current();
    if (graph && !graph_)
      graph_.emplace(cuda::CudaGraph::capture(s_, [&] { enqueue(); }, "direct GEMM"));
    e0_.record(s_);
    if (graph) graph_->replay(s_);
    else enqueue();
    e1_.record(s_);
    e1_.synchronize();
    return cuda::Event::elapsed_ms(e0_, e1_);
  }
  // Median of `reps` back-to-back calls after 3 warm-up calls.
  double median_ms(int reps) {
    std::vector<double> t;
    for (int r = 0; r < reps + 3; ++r) {
      double ms = once();
      if (r >= 3) t.push_back(ms);
    }
    return median(t);
  }

 private:
  static constexpr int64_t n = 8192;
  static size_t bytes(int64_t elems) { return size_t(elems) * 2; }
  void enqueue() {
    lt_.run(cuda::GemmPrecision::kBf16, epi_, {n, n, n, 1}, a_.ptr(), b_.ptr(), c_.ptr(), bias_.ptr(), s_, "direct");
  }
  cuda::GemmEpilogue epi_;
  cuda::Device dev_{0};
  cuda::Stream s_;
  cuda::DeviceBuffer a_, b_, c_, bias_;
  cuda::LtGemm lt_;
  cuda::Event e0_, e1_;
  std::optional<cuda::CudaGraph> graph_;
};
#endif

}  // namespace

std::string cuda_device_name() {
#ifndef BRRR_HAVE_CUDA
  return "none (built without CUDA)";
#else
  std::string why;
  if (!cuda::cuda_device_available(&why)) return "none (" + why + ")";
  cuda::Device dev(0);
  const cuda::DeviceInfo& i = dev.info();
  return fmt::format("{} ({}, {} SMs)", i.name, i.arch(), i.sm_count);
#endif
}

void bench_cuda(const CudaBenchArgs& args) {
  auto all = workloads();
  if (args.list) {
    for (const auto& w : all) fmt::print("{:<16} {}\n", w.name, w.what);
    return;
  }
#ifndef BRRR_HAVE_CUDA
  fail("brrr bench --backend cuda: brrr was built without the CUDA toolkit");
#else
  std::string why;
  BRRR_CHECK(cuda::cuda_device_available(&why), "brrr bench --backend cuda: no CUDA device: {}", why);
  std::vector<const Work*> todo;
  for (const auto& w : all)
    if (args.items.empty() || std::find(args.items.begin(), args.items.end(), w.name) != args.items.end())
      todo.push_back(&w);
  for (const auto& it : args.items)
    BRRR_CHECK(std::any_of(all.begin(), all.end(), [&](const Work& w) { return w.name == it; }),
               "unknown CUDA workload '{}' (see brrr bench --backend cuda --list)", it);
  double copy = copy_gbps(args.reps);
  DirectGemm direct_plain(cuda::GemmEpilogue::kNone);
  double lt_ms = direct_plain.median_ms(args.reps);
  double lt_gelu_ms = DirectGemm(cuda::GemmEpilogue::kGeluBias).median_ms(args.reps);
  fmt::print("copy ceiling (1 GiB D2D, read+write): {:.0f} GB/s; cuBLASLt direct bf16 8192^3: "
             "{:.3f} ms ({:.0f} TFLOP/s), with bias+GELU epilogue {:.3f} ms\n",
             copy, lt_ms, 2.0 * 8192.0 * 8192 * 8192 / (lt_ms * 1e-3) / 1e12, lt_gelu_ms);
  fmt::print("times: median CUDA-event time of one whole-plan run on device-resident inputs;\n"
             "GB/s: compulsory bytes; TFLOP/s: 2 per multiply-add, 1 per arithmetic op.\n");
  fmt::print("{:<16} {:<10} {:>10} {:>9} {:>9} {:>8} {:>8}  {}\n", "workload", "variant", "ms",
             "GB/s", "TFLOP/s", "copy%", "kernels", "note");
  nlohmann::json out = nlohmann::json::array();
  for (const Work* w : todo) {
    std::vector<int> graph_modes = w->mlp ? std::vector<int>{1, 0} : std::vector<int>{args.no_graphs ? 0 : 1};
    for (int gm : graph_modes) {
      SessionOptions o;
      o.backend = "cuda";
      o.precision = args.precision;
      o.graphs = gm;
      Session s(w->build(), o);
      const Graph& G = s.graph();
      std::map<std::string, Tensor> in;
      uint32_t seed = 100;
      for (int id : G.inputs) in[G.value(id).name] = rand_tensor(G.value(id).dtype, G.value(id).shape, seed++);
      // GEMMs: whole-plan runs alternate with the plain GEMM on cuBLASLt direct (launched on the
      // stream and replayed as a graph), run for run, so each plan run sees the same clock and
      // power state as the GEMMs around it (a sustained GEMM runs into the H200's power cap
      // within a second). A plan run is compared with the mean of the direct GEMMs just before and
      // just after it, so order does not favour either side; ratios are medians over runs.
      bool gemm = w->name.rfind("gemm", 0) == 0;
      RunProfile p;
      double lt_here = 0, ratio_stream = 0, ratio_graph = 0;
      if (gemm) {
        std::vector<double> lt_s, lt_g;
        auto directs = [&] {
          lt_s.push_back(direct_plain.once(false));
          lt_g.push_back(direct_plain.once(true));
        };
        std::vector<double> plan_t = s.time_runs(in, args.reps, directs);
        directs();
        std::vector<double> rs, rg;
        for (size_t i = 0; i < plan_t.size(); ++i) {
          rs.push_back(plan_t[i] / (0.5 * (lt_s[i] + lt_s[i + 1])));
          rg.push_back(plan_t[i] / (0.5 * (lt_g[i] + lt_g[i + 1])));
        }
        p.wall_ms = median(plan_t);
        lt_here = median(lt_s);
        ratio_stream = median(rs);
        ratio_graph = median(rg);
      } else {
        p = s.profile(in, args.reps);
      }
      auto [bytes, flops] = cost_of(G);
      double ms = p.wall_ms;
      double gbps = bytes / (ms * 1e-3) / 1e9, tflops = flops / (ms * 1e-3) / 1e12;
      std::string note;
      if (gemm)
        note = fmt::format("{:.3f}x the plain GEMM on cuBLASLt direct ({:.3f} ms), {:.3f}x it "
                           "graph-launched; runs alternating",
                           ratio_stream, lt_here, ratio_graph);
      if (w->mlp) note = fmt::format("{:.1f} us/fwd", ms * 1e3);
      std::string variant = gm ? "graphs" : "no-graphs";
      fmt::print("{:<16} {:<10} {:>10.4f} {:>9.0f} {:>9.2f} {:>7.1f}% {:>8}  {}\n", w->name, variant,
                 ms, gbps, tflops, 100.0 * gbps / copy, s.num_kernels(), note);
      if (env::integer("BRRR_DEBUG") > 0) fmt::print(stderr, "{}", s.plan_summary());
      out.push_back({{"workload", w->name}, {"torch", w->torch}, {"variant", variant}, {"ms", ms},
                     {"gbps", gbps}, {"tflops", tflops}, {"copy_frac", gbps / copy},
                     {"kernels", s.num_kernels()}, {"copy_gbps", copy}, {"lt_direct_ms", lt_ms},
                     {"lt_gelu_ms", lt_gelu_ms}, {"lt_here_ms", lt_here}, {"lt_ratio", ratio_stream}, {"lt_graph_ratio", ratio_graph}});
    }
  }
  if (!args.json.empty()) {
    write_file(args.json, out.dump(2) + "\n");
  }
#endif
}

}  // namespace brrr::cli
