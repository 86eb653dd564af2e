// GPU ceiling measurements (see gpu_probe.hpp).
#include "backend/cuda/gpu_probe.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "backend/cuda/bench_kernels.hpp"
#include "backend/cuda/cuda_graph.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "core/median.hpp"

namespace brrr::cuda {

double time_events_ms(const Stream& s, const std::function<void()>& body, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) body();
  s.synchronize();
  Event a, b;
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    a.record(s);
    body();
    b.record(s);
    b.synchronize();
    t.push_back(Event::elapsed_ms(a, b));
  }
  return median(t);
}

ProbeKernels::ProbeKernels(const Device& d) : dev(d) {
  NvrtcCompiler nvrtc(dev.info().arch());
  auto t0 = std::chrono::steady_clock::now();
  CompiledKernel ck = nvrtc.compile(bench_kernels_source(), "brrr_bench_kernels");
  compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  from_cache = ck.from_cache;
  mod = std::make_unique<Module>(ck.cubin, "brrr_bench_kernels");
  empty = mod->function("brrr_empty");
  fill_f32 = mod->function("brrr_fill_f32");
  fill_bf16 = mod->function("brrr_fill_bf16");
  fill_f16 = mod->function("brrr_fill_f16");
  cos1 = mod->function("brrr_cos_f32x4");
  cos2 = mod->function("brrr_cos_cos_f32x4");
  fma = mod->function("brrr_fma_peak");
  expf_t = mod->function("brrr_expf_tput");
  cosf_t = mod->function("brrr_cosf_tput");
  tanhf_t = mod->function("brrr_tanhf_tput");
  erff_t = mod->function("brrr_erff_tput");
}
ProbeKernels::~ProbeKernels() = default;

unsigned ProbeKernels::grid_for(unsigned long long work, unsigned block, unsigned per_sm) const {
  unsigned long long want = (work + block - 1) / block;
  unsigned long long cap = static_cast<unsigned long long>(dev.info().sm_count) * per_sm;
  return static_cast<unsigned>(std::max(1ull, std::min(want, cap)));
}

void ProbeKernels::fill(GemmPrecision p, DevPtr x, unsigned long long n, unsigned seed,
                        float scale, const Stream& s) const {
  const Function& f = element_bytes(p) == 4 ? fill_f32
                      : p == GemmPrecision::kBf16 ? fill_bf16
                                                  : fill_f16;
  void* args[] = {&x, &n, &seed, &scale};
  launch(f, {grid_for(n, 256, 16)}, {256}, 0, s, args);
}

double measure_copy_ms(const ProbeKernels& K, std::size_t bytes, const Stream& s) {
  DeviceBuffer a(bytes, "copy src"), b(bytes, "copy dst");
  K.fill(GemmPrecision::kFp32, a.ptr(), bytes / 4, 1, 1.0f, s);
  return time_events_ms(s, [&] { copy_d2d(b.ptr(), a.ptr(), bytes, s, "copy probe"); }, 3, 20);
}

double measure_fma_flops(const ProbeKernels& K, const Stream& s) {
  DeviceBuffer sink(4096, "sink");
  DevPtr ps = sink.ptr();
  const unsigned block = 256, grid = K.dev.info().sm_count * 8;
  int iters = 1 << 16;
  void* args[] = {&ps, &iters};
  double ms = time_events_ms(s, [&] { launch(K.fma, {grid}, {block}, 0, s, args); }, 2, 10);
  double flops = 2.0 * kFmaChains * iters * double(grid) * block;
  return flops / (ms * 1e-3);
}

std::map<std::string, double> measure_special_evals(const ProbeKernels& K, const Stream& s) {
  DeviceBuffer sink(4096, "sink");
  DevPtr ps = sink.ptr();
  const unsigned block = 256, grid = K.dev.info().sm_count * 8;
  int iters = 1 << 12;
  void* args[] = {&ps, &iters};
  std::pair<const char*, const Function*> fns[] = {
      {"exp", &K.expf_t}, {"cos", &K.cosf_t}, {"tanh", &K.tanhf_t}, {"erf", &K.erff_t}};
  std::map<std::string, double> out;
  for (auto& [name, f] : fns) {
    double ms = time_events_ms(s, [&] { launch(*f, {grid}, {block}, 0, s, args); }, 2, 10);
    out[name] = double(kSpecialChains) * iters * double(grid) * block / (ms * 1e-3);
  }
  return out;
}

LaunchCost measure_launch_cost(const ProbeKernels& K, const Stream& s, int eager, int nodes) {
  LaunchCost lc;
  std::vector<double> host_us, stream_us;
  Event a, b;
  for (int rep = 0; rep < 7; ++rep) {
    s.synchronize();
    a.record(s);
    auto h0 = std::chrono::steady_clock::now();
    for (int i = 0; i < eager; ++i) launch(K.empty, {1}, {32}, 0, s, nullptr);
    auto h1 = std::chrono::steady_clock::now();
    b.record(s);
    b.synchronize();
    if (rep == 0) continue;  // warmup
    host_us.push_back(std::chrono::duration<double, std::micro>(h1 - h0).count() / eager);
    stream_us.push_back(Event::elapsed_ms(a, b) * 1e3 / eager);
  }
  lc.host_us = median(host_us);
  lc.stream_us = median(stream_us);
  CudaGraph g = CudaGraph::capture(
      s, [&] { for (int i = 0; i < nodes; ++i) launch(K.empty, {1}, {32}, 0, s, nullptr); },
      "empty kernels");
  lc.nodes = static_cast<int>(g.num_nodes());
  double ms = time_events_ms(s, [&] { g.replay(s); }, 3, 20);
  lc.graph_node_us = ms * 1e3 / std::max(1, lc.nodes);
  return lc;
}

double measure_gemm_ms(const ProbeKernels& K, LtGemm& lt, GemmPrecision p, GemmEpilogue e,
                       std::int64_t n, const Stream& s, int reps) {
  const std::size_t elems = std::size_t(n) * n, eb = element_bytes(p);
  DeviceBuffer A(elems * eb, "A"), B(elems * eb, "B"), C(elems * eb, "C"), bias(n * eb, "bias");
  K.fill(p, A.ptr(), elems, 11, 1.0f, s);
  K.fill(p, B.ptr(), elems, 12, 1.0f, s);
  K.fill(p, bias.ptr(), n, 13, 1.0f, s);
  return time_events_ms(
      s,
      [&] {
        lt.run(p, e, {n, n, n}, A.ptr(), B.ptr(), C.ptr(), e == GemmEpilogue::kNone ? 0 : bias.ptr(),
               s, "gemm probe");
      },
      2, reps);
}

}  // namespace brrr::cuda
