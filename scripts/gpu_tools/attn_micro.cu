// brrr's flash attention kernel alone (src/backend/cuda/device/attention.cuh), launched straight
// from the runtime API on head-split bf16 tensors [batch, seq, heads, 64] (the layout the exporters
// give): median time of single launches (CUDA events, after a warm-up), a check of one head
// against a float64 reference, and a plain process for Nsight Compute. Variants of the kernel
// are compile-time switches (-D...), so one device call times several (attention_micro.sh).
//   attn_micro BATCH SEQ [causal 0|1] [mask 0|1] [warps 1|2|4] [ksplit 1|2] [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/device/attention.cuh"
#include "micro_check.cuh"


int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s BATCH SEQ [causal] [mask] [warps] [ksplit] [reps]\n", argv[0]);
    return 2;
  }
  const long long B = std::atoll(argv[1]), S = std::atoll(argv[2]), H = 12, D = 64;
  const int causal = argc > 3 ? std::atoi(argv[3]) : 0, use_mask = argc > 4 ? std::atoi(argv[4]) : 0;
  const int warps = argc > 5 ? std::atoi(argv[5]) : 4, ksplit = argc > 6 ? std::atoi(argv[6]) : 1;
  const int reps = argc > 7 ? std::atoi(argv[7]) : 200;
  const long long n = B * S * H * D;
  std::vector<unsigned short> hq(n), hk(n), hv(n), hm(S > 0 ? B * S : 1);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (long long i = 0; i < n; ++i) hq[i] = to_bf16(nd(rng)), hk[i] = to_bf16(nd(rng)), hv[i] = to_bf16(nd(rng));
  for (long long i = 0; i < B * S; ++i) hm[i] = to_bf16((i % S) >= S - 7 ? -10000.0f : 0.0f);
  void *q, *k, *v, *o, *m;
  CK(cudaMalloc(&q, n * 2));
  CK(cudaMalloc(&k, n * 2));
  CK(cudaMalloc(&v, n * 2));
  CK(cudaMalloc(&o, n * 2));
  CK(cudaMalloc(&m, B * S * 2));
  CK(cudaMemcpy(q, hq.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(k, hk.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(v, hv.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(m, hm.data(), B * S * 2, cudaMemcpyHostToDevice));
  brrr_attn_args a{};
  a.q = q, a.k = k, a.v = v, a.out = o, a.mask = use_mask ? m : nullptr, a.keep = nullptr;
  const long long st[4] = {S * H * D, D, H * D, 1};
  for (int i = 0; i < 4; ++i) a.qs[i] = a.ks[i] = a.vs[i] = a.os[i] = st[i];
  a.ms[0] = S, a.ms[1] = 0, a.ms[2] = 0, a.ms[3] = 1;  // [B, 1, 1, S]: BERT's padding mask
  a.heads = H, a.group = 1, a.seq_q = S, a.seq_k = S, a.head_dim = D;
  a.scale = 0.125f, a.fill = 0.0f, a.keep_when = 1, a.causal = causal, a.zero_empty_rows = 0;
  a.fast_tiles = 1, a.ksplit = ksplit, a.full_tiles = 1;
  const int rows = 16 * warps / ksplit;
  dim3 grid((unsigned)((S + rows - 1) / rows), (unsigned)H, (unsigned)B), block(32 * warps);
  auto launch = [&] { brrr_attention_flash64_bf16<<<grid, block>>>(a); };
  for (int i = 0; i < 10; ++i) launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> t(reps);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&t[r], e0, e1));
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  // 20 launches back to back, for the time without each launch's event gap.
  CK(cudaEventRecord(e0));
  for (int i = 0; i < 20; ++i) launch();
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float burst = 0;
  CK(cudaEventElapsedTime(&burst, e0, e1));
  // Check head (b = B-1, h = 5) against float64.
  std::vector<unsigned short> ho(n);
  CK(cudaMemcpy(ho.data(), o, n * 2, cudaMemcpyDeviceToHost));
  const long long bb = B - 1, hh = 5;
  double max_err = 0, max_ref = 0;
  std::vector<double> p(S);
  for (long long i = 0; i < S; ++i) {
    double mx = -1e300;
    for (long long j = 0; j < S; ++j) {
      double s = 0;
      for (long long d = 0; d < D; ++d)
        s += (double)from_bf16(hq[((bb * S + i) * H + hh) * D + d]) *
             from_bf16(hk[((bb * S + j) * H + hh) * D + d]);
      s *= a.scale;
      if (use_mask) s += from_bf16(hm[bb * S + j]);
      if (causal && j > i) s = -1e300;
      p[j] = s;
      mx = std::max(mx, s);
    }
    double sum = 0;
    for (long long j = 0; j < S; ++j) sum += (p[j] = p[j] <= -1e299 ? 0 : std::exp(p[j] - mx));
    for (long long d = 0; d < D; ++d) {
      double r = 0;
      for (long long j = 0; j < S; ++j) r += p[j] * from_bf16(hv[((bb * S + j) * H + hh) * D + d]);
      r /= sum;
      const double got = from_bf16(ho[((bb * S + i) * H + hh) * D + d]);
      max_err = std::max(max_err, std::fabs(got - r));
      max_ref = std::max(max_ref, std::fabs(r));
    }
  }
  const double flops = 4.0 * B * H * S * S * D * (causal ? 0.5 : 1.0);
  const float med = t[reps / 2];
  std::printf("b%lld s%lld causal%d mask%d %dw split%d: median %.2f us (p10 %.2f p90 %.2f), "
              "burst %.2f us/launch, %.1f TFLOP/s, max err %.2e of %.2f %s\n",
              B, S, causal, use_mask, warps, ksplit, med * 1e3, t[reps / 10] * 1e3,
              t[reps * 9 / 10] * 1e3, burst * 1e3 / 20, flops / (burst * 1e-3 / 20) * 1e-12, max_err,
              max_ref, max_err < 0.02 * std::max(1.0, max_ref) ? "ok" : "WRONG");
  return max_err < 0.02 * std::max(1.0, max_ref) ? 0 : 1;
}
