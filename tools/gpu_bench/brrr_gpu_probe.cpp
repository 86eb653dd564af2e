// brrr_gpu_probe: measures this GPU's ceilings with brrr's own CUDA backend (driver API, NVRTC,
// cuBLASLt, CUDA Graphs) and a fused-vs-unfused demo. Events around the timed region, warmup
// first, medians of repeats; random data, never zeros. Prints a table last.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/bench_kernels.hpp"
#include "backend/cuda/cublaslt_gemm.hpp"
#include "backend/cuda/gpu_probe.hpp"
#include "backend/cuda/cuda_runtime.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "brrr/error.hpp"

using namespace brrr::cuda;

namespace {

struct Row {
  std::string what, value, note;
};
std::vector<Row> g_rows;
void row(std::string what, std::string value, std::string note = "") {
  std::printf("  %-44s %-22s %s\n", what.c_str(), value.c_str(), note.c_str());
  std::fflush(stdout);
  g_rows.push_back({std::move(what), std::move(value), std::move(note)});
}


std::string fmt2(double v, const char* unit) { return fmt::format("{:.2f} {}", v, unit); }

}  // namespace

int main() {
  std::string why;
  if (!cuda_device_available(&why)) {
    std::printf("brrr_gpu_probe: no CUDA device: %s\n", why.c_str());
    return 2;
  }
  try {
    Device dev(0);
    const DeviceInfo& info = dev.info();
    std::printf("device: %s, %s, %d SMs, L2 %d MiB, %.1f GiB, driver %d, NVRTC %s\n",
                info.name.c_str(), info.arch().c_str(), info.sm_count, info.l2_bytes >> 20,
                info.total_mem / 1073741824.0, info.driver_version, nvrtc_version().c_str());
    Stream s;

    // ---- NVRTC: cold compile of a tiny kernel + load, then the bench source (cached) ----
    {
      // No cache: measures NVRTC itself. The first compile in a process also loads NVRTC's
      // builtins; the second shows the steady cost a Session pays per new kernel.
      NvrtcCompiler cold(info.arch(), "");
      for (int i = 0; i < 2; ++i) {
        const std::string tiny = fmt::format(
            "extern \"C\" __global__ void brrr_tiny(float* x) {{ x[threadIdx.x] += {}.0f; }}", i);
        auto t0 = std::chrono::steady_clock::now();
        CompiledKernel k = cold.compile(tiny, "brrr_tiny");
        Module m(k.cubin, "brrr_tiny");
        (void)m.function("brrr_tiny");
        double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        row(i == 0 ? "NVRTC compile + load, tiny kernel, 1st" : "NVRTC compile + load, tiny, 2nd",
            fmt2(ms, "ms"), "no cache; anchor 12.4 ms");
      }
    }
    ProbeKernels K(dev);
    row("NVRTC bench kernels (11 kernels)", fmt2(K.compile_ms, "ms"),
        K.from_cache ? "from disk cache" : "compiled, now cached");
    std::printf("  cos_cos regs %d, local bytes %d; fma regs %d\n", K.cos2.num_regs(),
                K.cos2.local_bytes(), K.fma.num_regs());

    // ---- D2D copy bandwidth, 1 GiB ----
    const std::size_t GiB = 1ull << 30;
    {
      double ms = measure_copy_ms(K, GiB, s);
      row("D2D copy 1 GiB (read+write bytes)", fmt2(2.0 * GiB / (ms * 1e-3) / 1e12, "TB/s"),
          fmt::format("{:.3f} ms; anchor 4.21 TB/s", ms));
    }

    // ---- cos(cos(x)) on 2^28 fp32: fused vs two kernels ----
    {
      const unsigned long long n = 1ull << 28, n4 = n / 4;
      DeviceBuffer x(n * 4, "x"), y(n * 4, "y"), tmp(n * 4, "tmp");
      K.fill(GemmPrecision::kFp32, x.ptr(), n, 7, 4.0f, s);
      DevPtr px = x.ptr(), py = y.ptr(), pt = tmp.ptr();
      unsigned long long m4 = n4;
      for (unsigned per_sm : {8u, 32u}) {
        const unsigned grid = K.grid_for(n4, 256, per_sm);
        void* fused_args[] = {&px, &py, &m4};
        void* a1[] = {&px, &pt, &m4};
        void* a2[] = {&pt, &py, &m4};
        double fused = time_events_ms(s, [&] { launch(K.cos2, {grid}, {256}, 0, s, fused_args); }, 3, 20);
        double two = time_events_ms(
            s,
            [&] {
              launch(K.cos1, {grid}, {256}, 0, s, a1);
              launch(K.cos1, {grid}, {256}, 0, s, a2);
            },
            3, 20);
        const double bytes = 2.0 * n * 4;  // compulsory: x read once, y written once
        row(fmt::format("cos(cos(x)) 2^28 fp32 fused, grid {}", grid),
            fmt::format("{:.3f} ms", fused),
            fmt::format("{:.2f} TB/s; anchor torch.compile 0.551 ms", bytes / (fused * 1e-3) / 1e12));
        row(fmt::format("cos(cos(x)) 2^28 fp32 two kernels, grid {}", grid),
            fmt::format("{:.3f} ms", two),
            fmt::format("{:.2f} TB/s compulsory; anchor eager 1.019 ms",
                        bytes / (two * 1e-3) / 1e12));
      }
      // Check a slice against the CPU (cosf is not fast-math: a few ulp).
      const std::size_t check = 1 << 20;
      std::vector<float> hx(check), hy(check);
      copy_d2h(hx.data(), px, check * 4, s, "x");
      copy_d2h(hy.data(), py, check * 4, s, "y");
      s.synchronize();
      double max_err = 0;
      for (std::size_t i = 0; i < check; ++i)
        max_err = std::max(max_err, std::fabs(hy[i] - std::cos(std::cos((double)hx[i]))));
      row("cos(cos(x)) max abs error vs CPU double", fmt::format("{:.2e}", max_err),
          max_err < 1e-5 ? "ok" : "TOO LARGE");
    }

    // ---- CUDA-core FP32 FMA peak and special-function throughput ----
    {
      row("CUDA-core FP32 FMA peak", fmt2(measure_fma_flops(K, s) / 1e12, "TFLOP/s"),
          "datasheet ~67");
      for (const auto& [name, evals] : measure_special_evals(K, s))
        row(fmt::format("{}f throughput (+1 FMA each)", name), fmt2(evals / 1e9, "Geval/s"));
    }

    // ---- launch cost: eager back to back, and per node in a 1000-kernel graph ----
    {
      LaunchCost lc = measure_launch_cost(K, s);
      row("empty kernel, eager launch (host)", fmt2(lc.host_us, "us"), "anchor 3.73 us");
      row("empty kernel, eager (stream, per kernel)", fmt2(lc.stream_us, "us"), "anchor 3.73 us");
      row(fmt::format("CUDA graph, {} empty kernels, per node", lc.nodes),
          fmt2(lc.graph_node_us, "us"), "anchor 0.50 us");
    }

    // ---- cuBLASLt GEMM 8192^3 per precision, plus the bf16 bias+GELU epilogue ----
    {
      const std::int64_t n = 8192;
      LtGemm lt;
      const double flops = 2.0 * n * n * n;
      const char* anchors[] = {"torch 51", "torch 367", "torch 684; cuBLASLt 811", "torch 664"};
      GemmPrecision precs[] = {GemmPrecision::kFp32, GemmPrecision::kTf32, GemmPrecision::kBf16,
                               GemmPrecision::kFp16};
      for (int i = 0; i < 4; ++i) {
        GemmPrecision p = precs[i];
        const int reps = p == GemmPrecision::kFp32 ? 5 : 10;
        double ms = measure_gemm_ms(K, lt, p, GemmEpilogue::kNone, n, s, reps);
        row(fmt::format("cuBLASLt GEMM 8192^3 {}", to_string(p)),
            fmt2(flops / (ms * 1e-3) / 1e12, "TFLOP/s"),
            fmt::format("{:.3f} ms; anchor {}", ms, anchors[i]));
        if (p == GemmPrecision::kBf16) {
          double ms2 = measure_gemm_ms(K, lt, p, GemmEpilogue::kGeluBias, n, s, 10);
          row("cuBLASLt GEMM+bias+GELU 8192^3 bf16", fmt::format("{:.3f} ms", ms2),
              fmt::format("{:.1f} TFLOP/s; GEMM alone {:.3f} ms; torch.compile 1.673 ms",
                          flops / (ms2 * 1e-3) / 1e12, ms));
        }
      }
    }
  } catch (const brrr::Error& e) {
    std::printf("brrr_gpu_probe: error: %s\n", e.what());
    return 1;
  }

  std::printf("\n==== brrr_gpu_probe table ====\n");
  for (const Row& r : g_rows)
    std::printf("| %-44s | %-16s | %s\n", r.what.c_str(), r.value.c_str(), r.note.c_str());
  return 0;
}
