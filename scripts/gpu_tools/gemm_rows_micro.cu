// brrr's few-row GEMM kernels alone (src/backend/cuda/device/gemm_rows.cuh, the cluster-multicast
// kernel, and gemm_small_m.cuh, the split-K cluster kernel before it) against cuBLASLt, on the
// GEMMs of a transformer at batch 1, with no brrr build: each configuration is checked against a
// float32 reference kernel, then timed as a CUDA graph of one launch per copy of the weights
// (copies enough to exceed L2 twice over, so the weights come from DRAM as in a model; A stays in
// L2, as a model's activations do), median of the graph's replays over the launches.
//   gemm_rows_micro [M N K ACT]...   (default: BERT-base's four GEMMs at 128 rows)
// Prints, per shape, cuBLASLt (heuristic #0, bias or GELU-bias epilogue), the split-K kernel and
// every multicast configuration that passed, fastest first, and a last line per shape:
//   best SHAPE: cublaslt T us, rows T us (CONFIG)
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/device/gemm_rows.cuh"
#include "backend/cuda/device/gemm_small_m.cuh"
#include "micro_check.cuh"
#include "micro_ptx.cuh"
#define CL(x)                                                                       \
  do {                                                                              \
    cublasStatus_t s_ = (x);                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                              \
      std::fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

BRRR_GEMM_MC(bf16, brrr_bf16, 32, 1, 4)
BRRR_GEMM_MC(bf16, brrr_bf16, 32, 2, 4)
BRRR_GEMM_MC(bf16, brrr_bf16, 32, 4, 4)
BRRR_GEMM_MC(bf16, brrr_bf16, 32, 8, 4)
BRRR_GEMM_MC(bf16, brrr_bf16, 32, 4, 6)
BRRR_GEMM_MC(bf16, brrr_bf16, 32, 8, 6)
BRRR_GEMM_MC(bf16, brrr_bf16, 64, 1, 4)
BRRR_GEMM_MC(bf16, brrr_bf16, 64, 2, 4)
BRRR_GEMM_MC(bf16, brrr_bf16, 64, 4, 4)
BRRR_GEMM_MC(bf16, brrr_bf16, 64, 4, 6)
BRRR_GEMM_MC(bf16, brrr_bf16, 128, 2, 4)
BRRR_GEMM_SK(bf16, brrr_bf16, 32, 1, 3)
BRRR_GEMM_SK(bf16, brrr_bf16, 32, 2, 3)
BRRR_GEMM_SK(bf16, brrr_bf16, 32, 4, 3)
BRRR_GEMM_SK(bf16, brrr_bf16, 32, 5, 3)

struct McKernel { const char* name; void (*fn)(const brrr_gmc_args); int bn, cn, st; };
static const McKernel kMc[] = {
    {"n32c1st4", brrr_gemm_mc_bf16_n32_c1_st4, 32, 1, 4}, {"n32c2st4", brrr_gemm_mc_bf16_n32_c2_st4, 32, 2, 4},
    {"n32c4st4", brrr_gemm_mc_bf16_n32_c4_st4, 32, 4, 4}, {"n32c8st4", brrr_gemm_mc_bf16_n32_c8_st4, 32, 8, 4},
    {"n32c4st6", brrr_gemm_mc_bf16_n32_c4_st6, 32, 4, 6}, {"n32c8st6", brrr_gemm_mc_bf16_n32_c8_st6, 32, 8, 6},
    {"n64c1st4", brrr_gemm_mc_bf16_n64_c1_st4, 64, 1, 4}, {"n64c2st4", brrr_gemm_mc_bf16_n64_c2_st4, 64, 2, 4},
    {"n64c4st4", brrr_gemm_mc_bf16_n64_c4_st4, 64, 4, 4}, {"n64c4st6", brrr_gemm_mc_bf16_n64_c4_st6, 64, 4, 6},
    {"n128c2st4", brrr_gemm_mc_bf16_n128_c2_st4, 128, 2, 4},
};
struct SkKernel { const char* name; void (*fn)(const brrr_gemm_sk_args); int s; };
static const SkKernel kSk[] = {
    {"sk_n32s1", brrr_gemm_sk_bf16_n32_s1_st3, 1}, {"sk_n32s2", brrr_gemm_sk_bf16_n32_s2_st3, 2},
    {"sk_n32s4", brrr_gemm_sk_bf16_n32_s4_st3, 4}, {"sk_n32s5", brrr_gemm_sk_bf16_n32_s5_st3, 5},
};


__global__ void reference(const unsigned short* a, const unsigned short* b, const unsigned short* bias,
                          float* c, long long M, long long N, long long K, int act) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= M * N) return;
  const long long r = i / N, col = i % N;
  float s = 0.f;
  for (long long k = 0; k < K; ++k)
    s += __uint_as_float((unsigned)a[r * K + k] << 16) * __uint_as_float((unsigned)b[k * N + col] << 16);
  s += __uint_as_float((unsigned)bias[col] << 16);
  if (act == 1) s = fmaxf(s, 0.f);
  else if (act == 3) s = 0.5f * s * (1.f + erff(s * 0.70710678f));
  c[i] = s;
}

// A [m, k] as device/gemm_rows.cuh reads it: boxes of 64 columns x box_rows rows, 128-byte swizzle.
static brrr_gmc_tmap a_map(const void* a, long long m, long long k, unsigned box_rows) {
  const CUtensorMap map = tmap_bf16_2d(a, m, k, box_rows, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  brrr_gmc_tmap t;
  std::memcpy(&t, &map, sizeof map);
  return t;
}


int main(int argc, char** argv) {
  std::vector<std::vector<long long>> shapes;
  for (int i = 1; i + 3 < argc; i += 4)
    shapes.push_back({std::atoll(argv[i]), std::atoll(argv[i + 1]), std::atoll(argv[i + 2]), std::atoll(argv[i + 3])});
  if (shapes.empty()) shapes = {{128, 2304, 768, 0}, {128, 768, 768, 0}, {128, 3072, 768, 3}, {128, 768, 3072, 0}};
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cublasLtHandle_t lt;
  CL(cublasLtCreate(&lt));
  const size_t lt_ws_bytes = 32 << 20;
  void* lt_ws;
  CK(cudaMalloc(&lt_ws, lt_ws_bytes));
  for (const McKernel& k : kMc)
    CK(cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, BRRR_GMC_SMEM_BYTES(k.bn, k.st)));
  CK(cudaFree(nullptr));  // the runtime's context, current for the driver calls
  for (const SkKernel& k : kSk)
    CK(cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, BRRR_GSK_SMEM_BYTES(32, 3)));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> U(-1.f, 1.f);

  for (const auto& sh : shapes) {
    const long long M = sh[0], N = sh[1], K = sh[2];
    const int act = (int)sh[3];
    const size_t wbytes = (size_t)K * N * 2;
    const int copies = (int)std::min<size_t>(64, std::max<size_t>(8, (2 * (size_t)prop.l2CacheSize + wbytes - 1) / wbytes));
    std::vector<unsigned short> ha(M * K), hb(K * N), hbias(N);
    for (auto& x : ha) x = to_bf16(U(rng));
    for (auto& x : hb) x = to_bf16(U(rng) / std::sqrt((float)K));
    for (auto& x : hbias) x = to_bf16(U(rng) * 0.1f);
    unsigned short *da, *dbias, *dc;
    std::vector<unsigned short*> db(copies);
    float* dref;
    CK(cudaMalloc(&da, M * K * 2));
    CK(cudaMalloc(&dbias, N * 2));
    CK(cudaMalloc(&dc, M * N * 2));
    CK(cudaMalloc(&dref, M * N * 4));
    for (auto& p : db) {
      CK(cudaMalloc(&p, wbytes));
      CK(cudaMemcpy(p, hb.data(), wbytes, cudaMemcpyHostToDevice));
    }
    CK(cudaMemcpy(da, ha.data(), M * K * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dbias, hbias.data(), N * 2, cudaMemcpyHostToDevice));
    reference<<<(unsigned)((M * N + 255) / 256), 256, 0, st>>>(da, db[0], dbias, dref, M, N, K, act);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(st));  // the copy below runs on the legacy stream, which st does not wait for
    std::vector<float> ref(M * N);
    CK(cudaMemcpy(ref.data(), dref, M * N * 4, cudaMemcpyDeviceToHost));
    float refmax = 0.f;
    for (float v : ref) refmax = std::max(refmax, std::fabs(v));
    auto check = [&](const char* what) {
      CK(cudaStreamSynchronize(st));
      CK(cudaGetLastError());
      std::vector<unsigned short> hc(M * N);
      CK(cudaMemcpy(hc.data(), dc, M * N * 2, cudaMemcpyDeviceToHost));
      float err = 0.f;
      for (long long i = 0; i < M * N; ++i) err = std::max(err, std::fabs(from_bf16(hc[i]) - ref[i]));
      const bool ok = err <= 0.02f * refmax;
      if (!ok) std::printf("  FAIL %s: max error %.4g of %.4g\n", what, err, refmax);
      return ok;
    };
    char shape[96];
    std::snprintf(shape, sizeof shape, "m%lld n%lld k%lld act%d", M, N, K, act);
    std::printf("== %s: %d weight copies of %.2f MB\n", shape, copies, wbytes / 1e6);

    // cuBLASLt, row-major C = A B as column-major C^T[N,M] = B^T[N,K] A^T[K,M].
    cublasLtMatmulDesc_t op;
    CL(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtEpilogue_t epi = act == 3 || act == 2 ? CUBLASLT_EPILOGUE_GELU_BIAS : act == 1 ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    CL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    const void* bp = dbias;
    CL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
    cudaDataType_t bt = CUDA_R_16BF;
    CL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    cublasLtMatrixLayout_t la, lb, lc;
    CL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, N, K, N));
    CL(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, M, K));
    CL(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    CL(cublasLtMatmulPreferenceCreate(&pref));
    CL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt_ws_bytes, sizeof lt_ws_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    CL(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found));
    const float one = 1.f, zero = 0.f;
    auto lt_launch = [&](int i) {
      CL(cublasLtMatmul(lt, op, &one, db[i], la, da, lb, &zero, dc, lc, dc, lc, &heur.algo, lt_ws, lt_ws_bytes, st));
    };
    lt_launch(0);
    CK(cudaStreamSynchronize(st));
    const bool lt_ok = act >= 2 || check("cublaslt");  // its GELU is the tanh form: not checked
    const float t_lt = time_graph(st, copies, lt_launch);
    std::printf("  cublaslt %8.2f us%s\n", t_lt, lt_ok ? "" : " (wrong)");

    struct Res { std::string name; float us; };
    std::vector<Res> res;
    const long long KT = K / 64, mt = (M + 127) / 128;
    // The split-K cluster kernel, 32 columns, grid (S, N/32, M/128).
    for (const SkKernel& k : kSk) {
      if (k.s > KT) continue;
      brrr_gemm_sk_args a{da, db[0], dc, dbias, M, N, K, act, 1};
      auto launch = [&](int i) {
        a.b = db[i];
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3((unsigned)k.s, (unsigned)((N + 31) / 32), (unsigned)mt);
        cfg.blockDim = dim3(BRRR_GSK_THREADS(32));
        cfg.dynamicSmemBytes = BRRR_GSK_SMEM_BYTES(32, 3);
        cfg.stream = st;
        CK(cudaLaunchKernelEx(&cfg, k.fn, a));
      };
      CK(cudaMemset(dc, 0, M * N * 2));
      launch(0);
      if (!check(k.name)) continue;
      res.push_back({k.name, time_graph(st, copies, launch)});
    }
    // The multicast kernel: every cluster size, stage count and split.
    for (const McKernel& k : kMc) {
      const long long nx = ((N + k.bn - 1) / k.bn + k.cn - 1) / k.cn * k.cn;
      for (int s : {1, 2, 3, 4, 6, 8, 12}) {
        if (s > KT || nx * s * mt > 4LL * sms) continue;
        float* ws = nullptr;
        unsigned* cnt = nullptr;
        if (s > 1) {
          CK(cudaMalloc(&ws, (size_t)nx * mt * s * 128 * k.bn * 4));
          CK(cudaMalloc(&cnt, (size_t)nx * mt * 4));
          CK(cudaMemset(cnt, 0, (size_t)nx * mt * 4));
        }
        for (int pdl = 0; pdl < 2; ++pdl) {
          brrr_gmc_args a{a_map(da, M, K, 128 / k.cn), db[0], dc, dbias, ws, cnt, M, N, K, act, 1};
          auto launch = [&](int i) {
            a.b = db[i];
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3((unsigned)nx, (unsigned)s, (unsigned)mt);
            cfg.blockDim = dim3(BRRR_GMC_THREADS(k.bn));
            cfg.dynamicSmemBytes = BRRR_GMC_SMEM_BYTES(k.bn, k.st);
            cfg.stream = st;
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            at[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = at;
            cfg.numAttrs = pdl;
            CK(cudaLaunchKernelEx(&cfg, k.fn, a));
          };
          char name[64];
          std::snprintf(name, sizeof name, "%s s%d%s", k.name, s, pdl ? " pdl" : "");
          CK(cudaMemset(dc, 0, M * N * 2));
          launch(0);
          launch(0);  // twice: the counters must be back at zero after a run
          if (!check(name)) continue;
          res.push_back({name, time_graph(st, copies, launch)});
        }
        if (ws) CK(cudaFree(ws));
        if (cnt) CK(cudaFree(cnt));
      }
    }
    std::sort(res.begin(), res.end(), [](const Res& x, const Res& y) { return x.us < y.us; });
    for (size_t i = 0; i < res.size() && i < 12; ++i) std::printf("  %-22s %8.2f us\n", res[i].name.c_str(), res[i].us);
    for (const Res& r : res)
      if (r.name.rfind("sk_", 0) == 0) std::printf("  %-22s %8.2f us (split-K cluster kernel)\n", r.name.c_str(), r.us);
    if (!res.empty())
      std::printf("best %s: cublaslt %.2f us, rows %.2f us (%s)\n", shape, t_lt, res[0].us, res[0].name.c_str());
    CK(cudaFree(da));
    CK(cudaFree(dbias));
    CK(cudaFree(dc));
    CK(cudaFree(dref));
    for (auto p : db) CK(cudaFree(p));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
  }
  return 0;
}
