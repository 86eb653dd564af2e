// Fused scaled dot-product attention on the CPU (plan::AttentionDesc, found by plan/attention.cpp):
// out = softmax(scale * Q K^T [masked]) V for each (batch, head) in one OpenMP region, where the
// unfused plan ran Q.K^T and P.V as strided batched GEMMs (oneDNN's gemm:jit) around a softmax
// kernel. Per head, K is packed transposed and V densely (both zero-padded to whole 64-key /
// 64-dim blocks) in the thread's work space, scores of 4 query rows at a time stay in L1, and the
// products run on 16-float vectors held in registers (4 rows x 4 vectors of accumulators).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/library.hpp"
#include "plan/library_desc.hpp"

// The vector helpers below are always inlined into the AVX-512 and the portable entry points, so
// the ABI of returning 64-byte vectors that GCC warns about never applies.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace brrr::cpu {

namespace {

typedef float vf __attribute__((vector_size(64)));
typedef float vfu __attribute__((vector_size(64), aligned(4)));  // an unaligned load or store
typedef int vi __attribute__((vector_size(64)));
constexpr int kLanes = 16;
constexpr int kRows = 4;             // query rows per register block
constexpr int kBlock = 4 * kLanes;   // keys (Q.K^T) or head dims (P.V) per register block
// The loops over those rows and vectors are unrolled (#pragma GCC unroll), so the 16 accumulators
// live in registers: at -O2 GCC kept them in memory, a load and a store per FMA.

#define BRRR_INLINE inline __attribute__((always_inline))

BRRR_INLINE vf load(const float* p) { return *reinterpret_cast<const vfu*>(p); }
BRRR_INLINE void store(float* p, const vf& v) { *reinterpret_cast<vfu*>(p) = v; }
BRRR_INLINE vf splat(float x) { return vf{} + x; }

// e^x for x <= 0 (scores minus their row's max): x = n ln2 + r, |r| <= ln2/2, e^r by its Taylor
// series to r^6 (relative error ~1e-7), 2^n built in the exponent bits. -inf gives 0.
BRRR_INLINE vf exp_nonpositive(const vf& in) {
  const vi live = in > splat(-std::numeric_limits<float>::infinity());
  const vf x = in < splat(-87.0f) ? splat(-87.0f) : in;  // 2^n stays a normal float
  const vf magic = splat(12582912.0f);         // 1.5 * 2^23: adding it rounds to an integer
  const vf n = (x * splat(1.44269504f) + magic) - magic;
  const vf r = (x - n * splat(0.693145752f)) - n * splat(1.42860677e-6f);
  vf p = splat(1.f / 720);
  p = p * r + splat(1.f / 120);
  p = p * r + splat(1.f / 24);
  p = p * r + splat(1.f / 6);
  p = p * r + splat(0.5f);
  p = p * r + splat(1.f);
  p = p * r + splat(1.f);
  const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
  const vf e = p * __builtin_bit_cast(vf, bits);
  return live ? e : vf{};
}

// acc[r][u] += a[r * lda + t] * b[t * ldb + 16 u .. 16 u + 15] over steps t: kRows rows of `a`
// (one value per row and step, broadcast) times a 64-wide row of `b` per step. Q.K^T (a = Q,
// b = K^T) and P.V (a = P, b = V) alike.
BRRR_INLINE void block_product(const float* a, int64_t lda, const float* b, int64_t ldb,
                               int64_t steps, vf acc[kRows][4]) {
  for (int64_t t = 0; t < steps; ++t) {
    const float* br = b + t * ldb;
    const vf b0 = load(br), b1 = load(br + kLanes), b2 = load(br + 2 * kLanes),
             b3 = load(br + 3 * kLanes);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const vf x = splat(a[r * lda + t]);
      acc[r][0] += x * b0, acc[r][1] += x * b1, acc[r][2] += x * b2, acc[r][3] += x * b3;
    }
  }
}

// Rows r[0..15] become the columns: four rounds of interleaving row k with row k + 8 (a perfect
// shuffle) transpose a 16 x 16 block in registers, where scalar stores were most of the kernel.
// (__builtin_shufflevector with constant indices: GCC 12 and Clang both have it.)
BRRR_INLINE void transpose16(vf r[kLanes]) {
#pragma GCC unroll 4
  for (int round = 0; round < 4; ++round) {
    vf n[kLanes];
#pragma GCC unroll 8
    for (int k = 0; k < kLanes / 2; ++k) {
      n[2 * k] = __builtin_shufflevector(r[k], r[k + kLanes / 2], 0, 16, 1, 17, 2, 18, 3, 19, 4,
                                         20, 5, 21, 6, 22, 7, 23);
      n[2 * k + 1] = __builtin_shufflevector(r[k], r[k + kLanes / 2], 8, 24, 9, 25, 10, 26, 11,
                                             27, 12, 28, 13, 29, 14, 30, 15, 31);
    }
#pragma GCC unroll 16
    for (int k = 0; k < kLanes; ++k) r[k] = n[k];
  }
}

// The geometry of one attention kernel, resolved from the descriptor at build.
struct Shape4 {
  int64_t heads, group, sq, sk, d;
  int64_t skp, dp;  // keys and head dims padded to whole kBlock blocks
};

// Per-thread work space, in floats: K^T [d][skp], V [skp][dp], scores [kRows][skp], Q [kRows][d].
int64_t thread_floats(const Shape4& s) {
  return s.d * s.skp + s.skp * s.dp + kRows * s.skp + kRows * s.d;
}

struct Args {
  const float *q, *k, *v, *mask;
  const unsigned char* keep;
  float* out;
  const int64_t *qs, *ks, *vs, *os, *ms, *bs;  // element strides over (batch, head, row, col)
  float scale, fill;
  bool keep_when, causal, zero_empty_rows;
};

// One (batch, head): every query row's output.
BRRR_INLINE void attend_head(const Args& a, const Shape4& s, int64_t b, int64_t h, float* work) {
  float* kt = work;                  // [d][skp]
  float* vd = kt + s.d * s.skp;      // [skp][dp]
  float* sc = vd + s.skp * s.dp;     // [kRows][skp]
  float* qd = sc + kRows * s.skp;    // [kRows][d]
  const int64_t kvh = h / s.group;
  const float* K = a.k + b * a.ks[0] + kvh * a.ks[1];
  const float* V = a.v + b * a.vs[0] + kvh * a.vs[1];
  // K^T: whole 16 x 16 blocks transposed in registers where rows are contiguous, the rest by
  // element.
  const int64_t kfull = a.ks[3] == 1 ? s.sk / kLanes * kLanes : 0, dfull = s.d / kLanes * kLanes;
  for (int64_t j0 = 0; j0 < kfull; j0 += kLanes)
    for (int64_t c0 = 0; c0 < dfull; c0 += kLanes) {
      vf blk[kLanes];
#pragma GCC unroll 16
      for (int l = 0; l < kLanes; ++l) blk[l] = load(K + (j0 + l) * a.ks[2] + c0);
      transpose16(blk);
#pragma GCC unroll 16
      for (int l = 0; l < kLanes; ++l) store(kt + (c0 + l) * s.skp + j0, blk[l]);
    }
  for (int64_t j = 0; j < s.sk; ++j) {
    const float* kj = K + j * a.ks[2];
    for (int64_t c = j < kfull ? dfull : 0; c < s.d; ++c) kt[c * s.skp + j] = kj[c * a.ks[3]];
  }
  for (int64_t c = 0; c < s.d; ++c) std::fill(kt + c * s.skp + s.sk, kt + (c + 1) * s.skp, 0.f);
  for (int64_t j = 0; j < s.sk; ++j) {
    const float* vj = V + j * a.vs[2];
    float* row = vd + j * s.dp;
    if (a.vs[3] == 1)
      std::memcpy(row, vj, size_t(s.d) * sizeof(float));
    else
      for (int64_t c = 0; c < s.d; ++c) row[c] = vj[c * a.vs[3]];
    std::fill(row + s.d, row + s.dp, 0.f);
  }
  std::fill(vd + s.sk * s.dp, vd + s.skp * s.dp, 0.f);
  const float* Q = a.q + b * a.qs[0] + h * a.qs[1];
  float* O = a.out + b * a.os[0] + h * a.os[1];
  const float* M = a.mask ? a.mask + b * a.ms[0] + h * a.ms[1] : nullptr;
  const unsigned char* B = a.keep ? a.keep + b * a.bs[0] + h * a.bs[1] : nullptr;
  const int64_t causal_off = s.sk - s.sq;  // key j is visible to query i when j <= i + off
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t i0 = 0; i0 < s.sq; i0 += kRows) {
    const int rows = int(std::min<int64_t>(kRows, s.sq - i0));
    for (int r = 0; r < kRows; ++r) {
      const float* qr = Q + (i0 + r) * a.qs[2];
      if (r >= rows)
        std::fill(qd + r * s.d, qd + (r + 1) * s.d, 0.f);
      else if (a.qs[3] == 1)
        std::memcpy(qd + r * s.d, qr, size_t(s.d) * sizeof(float));
      else
        for (int64_t c = 0; c < s.d; ++c) qd[r * s.d + c] = qr[c * a.qs[3]];
    }
    // Keys past the block's last row's causal limit are masked for all of its rows.
    int64_t kend = s.sk;
    if (a.causal) kend = std::clamp<int64_t>(i0 + rows - 1 + causal_off + 1, 0, s.sk);
    const int64_t kendp = (kend + kBlock - 1) / kBlock * kBlock;
    // Scores: kRows x kBlock accumulators per key block, one K^T row and kRows Q values per step.
    for (int64_t j0 = 0; j0 < kendp; j0 += kBlock) {
      vf acc[kRows][4] = {};
      block_product(qd, s.d, kt + j0, s.skp, s.d, acc);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) store(sc + r * s.skp + j0 + u * kLanes, acc[r][u] * splat(a.scale));
    }
    // Masks, then the softmax numerators and each row's sum.
    float inv[kRows];
    for (int r = 0; r < rows; ++r) {
      float* row = sc + r * s.skp;
      const int64_t i = i0 + r;
      if (B)
        for (int64_t j = 0; j < kend; ++j)
          if ((B[i * a.bs[2] + j * a.bs[3]] != 0) != a.keep_when) row[j] = a.fill;
      if (M && a.ms[3] == 1) {
        const float* mrow = M + i * a.ms[2];
#pragma omp simd
        for (int64_t j = 0; j < kend; ++j) row[j] += mrow[j];
      } else if (M) {
        for (int64_t j = 0; j < kend; ++j) row[j] += M[i * a.ms[2] + j * a.ms[3]];
      }
      const int64_t visible = a.causal ? std::clamp<int64_t>(i + causal_off + 1, 0, kend) : kend;
      for (int64_t j = visible; j < kendp; ++j) row[j] = ninf;
      vf vmax = splat(ninf);  // the keys past `visible` are -inf now
      for (int64_t j = 0; j < kendp; j += kLanes) {
        const vf x = load(row + j);
        vmax = x > vmax ? x : vmax;
      }
      float mx = ninf;
      for (int u = 0; u < kLanes; ++u) mx = std::max(mx, vmax[u]);
      const vf base = splat(mx == ninf ? 0.f : mx);  // all -inf: every numerator 0
      vf sum = {};
      for (int64_t j = 0; j < kendp; j += kLanes) {
        const vf p = exp_nonpositive(load(row + j) - base);
        store(row + j, p);
        sum += p;
      }
      float total = 0;
      for (int u = 0; u < kLanes; ++u) total += sum[u];
      // A row with no visible key: softmax's 0/0 is NaN, which the exporters' guard makes 0.
      inv[r] = total > 0 ? 1.f / total
                         : a.zero_empty_rows ? 0.f : std::numeric_limits<float>::quiet_NaN();
    }
    // P.V: kRows x kBlock accumulators per block of head dims, one V row per step.
    for (int64_t c0 = 0; c0 < s.dp; c0 += kBlock) {
      vf acc[kRows][4] = {};
      block_product(sc, s.skp, vd + c0, s.dp, kend, acc);
      for (int r = 0; r < rows; ++r) {
        float* o = O + (i0 + r) * a.os[2];
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
          const vf res = acc[r][u] * splat(inv[r]);
          if (a.os[3] == 1 && c0 + (u + 1) * kLanes <= s.d) {
            store(o + c0 + u * kLanes, res);
            continue;
          }
          for (int l = 0; l < kLanes; ++l) {
            const int64_t c = c0 + u * kLanes + l;
            if (c < s.d) o[c * a.os[3]] = res[l];
          }
        }
      }
    }
  }
}

// The same code for AVX-512 (picked at run time) and for the build's baseline ISA.
__attribute__((target("avx512f,avx512dq,fma"))) void attend_avx512(const Args& a, const Shape4& s,
                                                                   int64_t b, int64_t h, float* w) {
  attend_head(a, s, b, h, w);
}
void attend_portable(const Args& a, const Shape4& s, int64_t b, int64_t h, float* w) {
  attend_head(a, s, b, h, w);
}

class CpuAttention : public LibraryKernel {
 public:
  plan::AttentionDesc d;
  Shape4 shape{};
  int threads = 1;
  float* work = nullptr;
  bool avx512 = false;

  size_t work_bytes() const override {
    return size_t(threads) * size_t(thread_floats(shape)) * sizeof(float) + 64;
  }
  void use_work(char* p) override { work = reinterpret_cast<float*>(p); }

  void run(void* const* slots) override {
    auto at = [&](int v, int64_t off) { return static_cast<float*>(slots[v]) + off; };
    Args a{at(d.q, d.q_offset), at(d.k, d.k_offset), at(d.v, d.v_offset),
           d.mask >= 0 ? at(d.mask, 0) : nullptr,
           d.keep >= 0 ? static_cast<const unsigned char*>(slots[d.keep]) : nullptr,
           at(d.out, 0), d.q_strides.data(), d.k_strides.data(), d.v_strides.data(),
           d.out_strides.data(), d.mask_strides.data(), d.keep_strides.data(), d.scale, d.fill,
           d.keep_when, d.causal, d.zero_empty_rows};
    const int64_t units = d.batch * shape.heads;
    const int64_t per = thread_floats(shape);
    // As many threads as the session's OpenMP count allows (1 in a serial run), units dealt
    // round-robin: heads cost the same, so a static deal balances.
    const int nt = int(std::min<int64_t>({units, int64_t(threads), int64_t(omp_get_max_threads())}));
#pragma omp parallel num_threads(nt)
    {
      const int t = omp_get_thread_num(), n = omp_get_num_threads();
      float* w = work + int64_t(t) * per;
      for (int64_t u = t; u < units; u += n) {
        if (avx512)
          attend_avx512(a, shape, u / shape.heads, u % shape.heads, w);
        else
          attend_portable(a, shape, u / shape.heads, u % shape.heads, w);
      }
    }
  }
};

}  // namespace

std::unique_ptr<LibraryKernel> make_cpu_attention(const Graph& g, const plan::Kernel& k) {
  const plan::AttentionDesc* d = plan::desc_of<plan::AttentionDesc>(k);
  if (!d || d->dtype != DType::f32 || d->head_dim < 1 || d->heads < 1 || d->kv_heads < 1 ||
      d->heads % d->kv_heads != 0 || d->seq_q < 1 || d->seq_k < 1)
    return nullptr;
  auto kern = std::make_unique<CpuAttention>();
  kern->d = *d;
  Shape4& s = kern->shape;
  s.heads = d->heads, s.group = d->heads / d->kv_heads, s.sq = d->seq_q, s.sk = d->seq_k;
  s.d = d->head_dim;
  s.skp = (s.sk + kBlock - 1) / kBlock * kBlock;
  s.dp = (s.d + kBlock - 1) / kBlock * kBlock;
  kern->threads = std::max(1, omp_get_max_threads());
  kern->openmp = kern->threads > 1;
  kern->avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  (void)g;
  return kern;
}

}  // namespace brrr::cpu
