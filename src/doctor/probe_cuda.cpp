// `brrr probe --backend cuda`: the GPU's ceilings, measured with the shared probe code
// (backend/cuda/gpu_probe.cpp): D2D copy bandwidth, CUDA-core FP32 FMA peak, Tensor Core peaks
// through cuBLASLt, special functions, launch cost, graph per-node cost and our executor's
// dispatch cost per kernel. About 5-10 s on an H200.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "brrr/doctor.hpp"
#include "brrr/error.hpp"
#include "core/machine_load.hpp"
#include "core/median.hpp"

#ifdef BRRR_HAVE_CUDA
#include "backend/cuda/gpu_probe.hpp"
#include "brrr/session.hpp"
#include "runtime/graph_builder.hpp"
#endif

namespace brrr::doctor {

#ifndef BRRR_HAVE_CUDA
Ceilings probe_cuda(bool) { fail("no CUDA device: this brrr was built without the CUDA toolkit"); }
#else

namespace {

using Clock = std::chrono::steady_clock;

// Datasheet figures (dense, boost clock) for the GPUs we know; shown beside the measured ones.
void datasheet(Ceilings& c) {
  if (c.cpu_model.find("H200") != std::string::npos) {
    c.datasheet = {{"bandwidth_gbs", 4800}, {"fp32_gflops", 67000}, {"tf32_gflops", 494700},
                   {"bf16_gflops", 989400}, {"fp16_gflops", 989400}};
    c.datasheet_note = "NVIDIA H200 SXM datasheet, dense (no sparsity)";
  } else if (c.cpu_model.find("H100") != std::string::npos &&
             c.cpu_model.find("HBM3") != std::string::npos) {
    c.datasheet = {{"bandwidth_gbs", 3350}, {"fp32_gflops", 67000}, {"tf32_gflops", 494700},
                   {"bf16_gflops", 989400}, {"fp16_gflops", 989400}};
    c.datasheet_note = "NVIDIA H100 SXM datasheet, dense (no sparsity)";
  }
}

// Host time of one Session::run of a chain of n Relu kernels on 4 floats, graphs off (median).
double chain_run_us(int n) {
  GraphBuilder b;
  int v = b.input("x", {4});
  for (int i = 0; i < n; ++i) v = b.node("Relu", {v});
  b.output(v);
  SessionOptions o;
  o.backend = "cuda";
  o.graphs = 0;
  o.fusion = 0;
  Session s(b.g, o);
  std::map<std::string, Tensor> in{{"x", Tensor::zeros(DType::f32, {4})}};
  for (int i = 0; i < 20; ++i) s.run(in);
  std::vector<double> t;
  for (int r = 0; r < 200; ++r) {
    auto t0 = Clock::now();
    s.run(in);
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return median(t);
}

}  // namespace

Ceilings probe_cuda(bool progress) {
  using namespace brrr::cuda;
  std::string why;
  if (!cuda_device_available(&why)) fail("no CUDA device: {}", why);
  auto t_start = Clock::now();
  LoadMeter load;
  auto step = [&](const std::string& what) {
    if (progress) fmt::print(stderr, "probe: {}\n", what);
  };
  Device dev(0);
  const DeviceInfo& info = dev.info();
  Ceilings c;
  c.backend = "cuda";
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  c.host = host;
  c.cpu_model = info.name;
  c.isa = info.arch();
  c.threads = info.sm_count;
  datasheet(c);
  Stream s;
  step(fmt::format("{} ({}, {} SMs): compiling the probe kernels", info.name, info.arch(),
                   info.sm_count));
  ProbeKernels K(dev);

  step("memory bandwidth: device-to-device copy of 1 GiB");
  const std::size_t bytes = std::min<std::size_t>(1ull << 30, dev.free_bytes() / 4);
  c.bandwidth_gbs = 2.0 * bytes / (measure_copy_ms(K, bytes, s) * 1e-3) / 1e9;

  // L2: source + destination fill half the L2 and 32 copies run between one pair of events, so
  // the launch cost is spread over enough traffic to be small (one copy of a few MiB takes a
  // few microseconds).
  if (info.l2_bytes >= (1 << 20)) {
    const std::size_t l2_copy = (std::size_t(info.l2_bytes) / 4) & ~std::size_t(255);
    step(fmt::format("L2 bandwidth: 32 copies of {} KiB within {} MiB of L2", l2_copy >> 10,
                     info.l2_bytes >> 20));
    DeviceBuffer a(l2_copy, "L2 copy src"), b(l2_copy, "L2 copy dst");
    K.fill(GemmPrecision::kFp32, a.ptr(), l2_copy / 4, 1, 1.0f, s);
    const int copies = 32;
    double ms = time_events_ms(
        s,
        [&] {
          for (int i = 0; i < copies; ++i) copy_d2d(b.ptr(), a.ptr(), l2_copy, s, "L2 probe");
        },
        2, 10);
    c.cache_bandwidth_gbs = 2.0 * double(l2_copy) * copies / (ms * 1e-3) / 1e9;
    c.cache_bytes = double(info.l2_bytes);
  }

  step("peak FLOP/s: CUDA-core FP32 FMA kernel");
  c.peak_gflops["fp32"] = measure_fma_flops(K, s) / 1e9;
  step("peak FLOP/s: cuBLASLt GEMM 8192^3, tf32 / bf16 / fp16 (Tensor Cores), fp32");
  {
    LtGemm lt;
    const std::int64_t n = 8192;
    const double flops = 2.0 * n * n * n;
    std::pair<const char*, GemmPrecision> precs[] = {{"tf32", GemmPrecision::kTf32},
                                                     {"bf16", GemmPrecision::kBf16},
                                                     {"fp16", GemmPrecision::kFp16},
                                                     {"fp32_gemm", GemmPrecision::kFp32}};
    for (auto& [name, p] : precs) {
      int reps = p == GemmPrecision::kFp32 ? 3 : 10;
      double ms = measure_gemm_ms(K, lt, p, GemmEpilogue::kNone, n, s, reps);
      c.peak_gflops[name] = flops / (ms * 1e-3) / 1e9;
    }
  }
  step("special functions: expf, cosf, tanhf, erff throughput");
  for (const auto& [fn, evals] : measure_special_evals(K, s)) c.special_gops[fn] = evals / 1e9;

  step("overhead: empty kernel, eager launches and CUDA graph nodes");
  LaunchCost lc = measure_launch_cost(K, s);
  c.launch_us = std::max(lc.host_us, lc.stream_us);
  c.graph_node_us = lc.graph_node_us;

  step("overhead: brrr CUDA executor dispatch per kernel (Relu chains of 1 and 65, no graph)");
  c.dispatch_us = std::max(0.0, (chain_run_us(65) - chain_run_us(1)) / 64);

  c.probe_seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  c.probed_at = utc_timestamp();
  c.probe_other_busy_cpus = load.other_busy_cpus();
  c.probe_online_cpus = LoadMeter::online_cpus();
  c.probe_host_threads = 1;  // one host thread launches and times everything
  return c;
}

#endif

}  // namespace brrr::doctor
