// Hand-written library kernels: Concat as block copies, Mean/Sum over trailing axes
// (GlobalAveragePool, ReduceMean over H,W) as a row reduction, Gather as row copies. Plus the
// provider dispatch.
#include <algorithm>
#include <cstring>
#include <vector>

#include <immintrin.h>

#include "backend/cpu/library.hpp"
#include "core/cpu_features.hpp"
#include "ops/movement_util.hpp"
#include "plan/library_desc.hpp"

namespace brrr::cpu {

namespace {

// Below this many elements a kernel runs on the calling thread: a parallel region costs
// microseconds, more when the cores are shared.
constexpr int64_t kParallelElems = 32768;

// Element loads and stores of the hand-written kernels as float: float32 as it is, bf16 (as its
// bits) widened and rounded to nearest even without branches, so the loops vectorize (the
// bf16 type's own conversion branches on NaN; a bf16 channel scale ran at 3 GB/s with it).
inline float load_f(float v) { return v; }
inline float load_f(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline void store_f(float* p, float v) { *p = v; }
inline void store_f(uint16_t* p, float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  *p = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);  // NaN stays quiet
}

// The row loops of the mean and channel-scale kernels, float32 and bf16 (as bits), each cloned
// for AVX-512 and AVX2 where the machine has them (the portable build is SSE2: bf16 rows ran at
// a third of float32's speed there).
// acc[c] += x[r * stride + c] for r < rows, c < n.
template <class T>
[[gnu::always_inline]] inline void add_rows_t(float* acc, const T* x, int64_t rows, int64_t n,
                                              int64_t stride) {
  for (int64_t r = 0; r < rows; ++r)
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) acc[c] += load_f(x[r * stride + c]);
}
// The same for one channel block (N lanes, a vector register or two): four partial sums in
// registers, a row each in turn, so that the adds do not wait on one another (the loop above
// keeps its sums in memory, one add latency and a store a row: mobilenet_v3_small's squeeze-excite
// means of 576 x 7 x 7 took 8.5 us).
template <int N, class T>
[[gnu::always_inline]] inline void add_block_rows_t(float* acc, const T* x, int64_t rows,
                                                    int64_t stride) {
  float a0[N] = {}, a1[N] = {}, a2[N] = {}, a3[N] = {};
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const T* p = x + r * stride;
#pragma omp simd
    for (int c = 0; c < N; ++c) {
      a0[c] += load_f(p[c]);
      a1[c] += load_f(p[stride + c]);
      a2[c] += load_f(p[2 * stride + c]);
      a3[c] += load_f(p[3 * stride + c]);
    }
  }
  for (; r < rows; ++r)
#pragma omp simd
    for (int c = 0; c < N; ++c) a0[c] += load_f(x[r * stride + c]);
#pragma omp simd
  for (int c = 0; c < N; ++c) acc[c] += (a0[c] + a1[c]) + (a2[c] + a3[c]);
}
template <class T>
[[gnu::always_inline]] inline void add_rows_any(float* acc, const T* x, int64_t rows, int64_t n,
                                                int64_t stride) {
  if (n == 16) add_block_rows_t<16>(acc, x, rows, stride);
  else if (n == 8) add_block_rows_t<8>(acc, x, rows, stride);
  else add_rows_t(acc, x, rows, n, stride);
}
// y[r * n + c] = x[r * n + c] * s[c] for r < rows, c < n.
template <class T>
[[gnu::always_inline]] inline void mul_rows_t(const T* x, const float* s, T* y, int64_t rows,
                                              int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) store_f(&y[r * n + c], load_f(x[r * n + c]) * s[c]);
}
// y[i] = x[i] * s for i < n.
template <class T>
[[gnu::always_inline]] inline void mul_scalar_t(const T* x, float s, T* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) store_f(&y[i], load_f(x[i]) * s);
}
#define BRRR_ROW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
BRRR_ROW_CLONES void add_rows(float* acc, const float* x, int64_t rows, int64_t n, int64_t stride) {
  add_rows_any(acc, x, rows, n, stride);
}
BRRR_ROW_CLONES void add_rows(float* acc, const uint16_t* x, int64_t rows, int64_t n,
                              int64_t stride) {
  add_rows_any(acc, x, rows, n, stride);
}
BRRR_ROW_CLONES void mul_rows_sw(const float* x, const float* s, float* y, int64_t rows, int64_t n) {
  mul_rows_t(x, s, y, rows, n);
}
BRRR_ROW_CLONES void mul_rows_sw(const uint16_t* x, const float* s, uint16_t* y, int64_t rows,
                                 int64_t n) {
  mul_rows_t(x, s, y, rows, n);
}
BRRR_ROW_CLONES void mul_scalar_sw(const float* x, float s, float* y, int64_t n) {
  mul_scalar_t(x, s, y, n);
}
BRRR_ROW_CLONES void mul_scalar_sw(const uint16_t* x, float s, uint16_t* y, int64_t n) {
  mul_scalar_t(x, s, y, n);
}
#undef BRRR_ROW_CLONES

// bf16 rows where the CPU has avx512_bf16: 16 products rounded by one vcvtneps2bf16 (to nearest
// even, a NaN stays NaN; subnormal results flush to zero, as oneDNN's bf16 stores do) instead
// of the integer rounding above, which bounds a bf16 channel scale by its instructions (0.39 ms
// against 0.36 ms for float32's twice the bytes, [112 x 112, 96] on one thread).
// y[r * n + c] = x[r * n + c] * (s[c], or the one scalar where s is null).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void mul_rows_bf16_hw(
    const uint16_t* x, const float* s, float scalar, uint16_t* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* xr = x + r * n;
    uint16_t* yr = y + r * n;
    for (int64_t c = 0; c < n; c += 16) {
      const __mmask16 m = n - c >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - c)) - 1);
      // (the maskz forms: GCC 12's plain ones warn of an uninitialized operand they discard)
      const __m512i wide = _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, xr + c));
      const __m512 xv = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(m, wide, 16));
      const __m512 sv = s ? _mm512_maskz_loadu_ps(m, s + c) : _mm512_set1_ps(scalar);
      const __m256bh b = _mm512_cvtneps_pbh(_mm512_mul_ps(xv, sv));
      _mm256_mask_storeu_epi16(yr + c, m, reinterpret_cast<const __m256i&>(b));
    }
  }
}
bool bf16_hw() {
  static const bool hw = CpuFeatures::host().avx512_bf16;
  return hw;
}
void mul_rows(const uint16_t* x, const float* s, uint16_t* y, int64_t rows, int64_t n) {
  if (bf16_hw()) return mul_rows_bf16_hw(x, s, 0.f, y, rows, n);
  mul_rows_sw(x, s, y, rows, n);
}
void mul_rows(const float* x, const float* s, float* y, int64_t rows, int64_t n) {
  mul_rows_sw(x, s, y, rows, n);
}
void mul_scalar(const uint16_t* x, float s, uint16_t* y, int64_t n) {
  if (bf16_hw()) return mul_rows_bf16_hw(x, nullptr, s, y, 1, n);
  mul_scalar_sw(x, s, y, n);
}
void mul_scalar(const float* x, float s, float* y, int64_t n) { mul_scalar_sw(x, s, y, n); }

// Output = for each outer index, each input's contiguous chunk in turn.
class ConcatKernel : public LibraryKernel {
 public:
  struct Part {
    int value;
    size_t chunk;  // bytes per outer index
  };
  std::vector<Part> parts;
  int out = -1;
  int64_t outer = 1;
  size_t out_chunk = 0;

  void run(void* const* slots) override {
    char* dst = static_cast<char*>(slots[out]);
    // Many small chunks (NHWC: one per pixel) are split over the threads; one big one is not.
    bool par = outer >= 64 && size_t(outer) * out_chunk >= (size_t(1) << 16);
    auto copy = [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        size_t off = 0;
        for (const Part& p : parts) {
          // A part the memory plan placed inside the output (plan_memory's concats in place) is
          // already there.
          char* to = dst + size_t(o) * out_chunk + off;
          const char* from = static_cast<const char*>(slots[p.value]) + size_t(o) * p.chunk;
          if (to != from) std::memcpy(to, from, p.chunk);
          off += p.chunk;
        }
      }
    };
    if (par)
      parallel_for(outer, copy);
    else
      copy(0, outer);
  }
};

// Mean (or sum: scale 1) over trailing axes, float32 or bf16 data (float32 sums, one rounding of
// each result).
class RowMeanKernel : public LibraryKernel {
 public:
  int in = -1, out = -1;
  int64_t rows = 0, cols = 0;
  float scale = 1;
  bool bf = false;  // bf16 data, else float32

  int64_t channels = 0, images = 0;  // NHWC input: [images, cols, channels]
  bool blocked = false;              // ...or blocked: [images, channels / B, cols, B]
  bool par = false;                  // big enough to split over the pool's threads

  // Loops over units, on the pool when `par`; every output sums its inputs in the same order
  // whichever thread runs it, so results do not depend on the thread count.
  template <class F>
  void units(int64_t n, F&& f) {
    if (par)
      parallel_for(n, f);
    else
      f(int64_t(0), n);
  }

  void run(void* const* slots) override {
    if (bf)
      run_t(static_cast<const uint16_t*>(slots[in]), static_cast<uint16_t*>(slots[out]));
    else
      run_t(static_cast<const float*>(slots[in]), static_cast<float*>(slots[out]));
  }

  template <class T>
  void run_t(const T* x, T* y) {
    if (blocked) {  // a row of B lanes per pixel of each (image, channel block)
      const int64_t B = channel_block();
      const int64_t nb = (channels + B - 1) / B;
      units(images * nb, [&](int64_t lo, int64_t hi) {
        for (int64_t ib = lo; ib < hi; ++ib) {
          const T* xb = x + ib * cols * B;
          float acc[kMaxChannelBlock] = {};
          add_rows(acc, xb, cols, B, B);
          const int64_t i = ib / nb, c0 = ib % nb * B;  // padding lanes are not channels
          for (int64_t c = 0; c < B && c0 + c < channels; ++c)
            store_f(&y[i * channels + c0 + c], acc[c] * scale);
        }
      });
      return;
    }
    if (channels) {
      // Units of (image, band of kBand channels): each sums its band down all the pixels.
      constexpr int64_t kBand = 64;
      const int64_t bands = (channels + kBand - 1) / kBand;
      units(images * bands, [&](int64_t lo, int64_t hi) {
        for (int64_t u = lo; u < hi; ++u) {
          const int64_t i = u / bands, c0 = u % bands * kBand;
          const int64_t n = std::min(channels, c0 + kBand) - c0;
          const T* xi = x + i * cols * channels + c0;
          float acc[kBand] = {};
          add_rows(acc, xi, cols, n, channels);
          for (int64_t c = 0; c < n; ++c) store_f(&y[i * channels + c0 + c], acc[c] * scale);
        }
      });
      return;
    }
    units(rows, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const T* p = x + r * cols;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // eight lanes: the compiler vectorizes this
        int64_t c = 0;
        for (; c + 8 <= cols; c += 8)
          for (int j = 0; j < 8; ++j) acc[j] += load_f(p[c + j]);
        float s = 0;
        for (; c < cols; ++c) s += load_f(p[c]);
        store_f(&y[r], (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) +
                        s) *
                           scale);
      }
    });
  }
};

// y = x * s with s one value per (image, channel), x NCHW, NHWC or channel-blocked (y alike);
// float32 or bf16 data (the product rounded once).
class ChannelScaleKernel : public LibraryKernel {
 public:
  int x = -1, s = -1, out = -1;
  int64_t images = 0, channels = 0, pixels = 0;
  char layout = kNCHW;
  bool par = false;  // enough elements to be worth a parallel region
  bool bf = false;   // bf16 data, else float32
  std::vector<float> sf;  // NHWC: the scales as float32

  void run(void* const* slots) override {
    if (bf)
      run_t(static_cast<const uint16_t*>(slots[x]), static_cast<const uint16_t*>(slots[s]),
            static_cast<uint16_t*>(slots[out]));
    else
      run_t(static_cast<const float*>(slots[x]), static_cast<const float*>(slots[s]),
            static_cast<float*>(slots[out]));
  }

  template <class T>
  void run_t(const T* xp, const T* sp, T* yp) {
    // NHWC: each image's scales as float32 once, then (image, band of pixels) units; NCHW: one
    // (image, channel) row of pixels a unit; blocked: one (image, channel block) a unit.
    const bool nhwc = layout == kNHWC, blocked = layout == kBlocked;
    const int64_t B = channel_block();
    constexpr int64_t kPixelBand = 16;
    if (nhwc) {
      if (sf.size() < size_t(images * channels)) sf.resize(size_t(images * channels));
      for (int64_t i = 0; i < images * channels; ++i) sf[size_t(i)] = load_f(sp[i]);
    }
    const int64_t bands = (pixels + kPixelBand - 1) / kPixelBand;
    const int64_t per = nhwc ? bands : blocked ? (channels + B - 1) / B : channels;
    auto body = [&](int64_t lo, int64_t hi) {
      for (int64_t ir = lo; ir < hi; ++ir) {
        const int64_t i = ir / per, r = ir % per;
        if (blocked) {  // padding lanes (past the last channel) are scaled by 0: they stay 0
          float si[kMaxChannelBlock] = {};
          for (int64_t c = 0; c < B && r * B + c < channels; ++c)
            si[c] = load_f(sp[i * channels + r * B + c]);
          mul_rows(xp + ir * pixels * B, si, yp + ir * pixels * B, pixels, B);
        } else if (nhwc) {
          const int64_t p0 = r * kPixelBand, np = std::min(kPixelBand, pixels - p0);
          const int64_t at = (i * pixels + p0) * channels;
          mul_rows(xp + at, sf.data() + i * channels, yp + at, np, channels);
        } else {
          mul_scalar(xp + ir * pixels, load_f(sp[ir]), yp + ir * pixels, pixels);
        }
      }
    };
    if (par)
      parallel_for(images * per, body);
    else
      body(0, images * per);
  }
};

// Gather: y[o, j, :] = x[o, idx[j], :], one row copy per (outer slice, index). Every index is
// checked first, with the reference kernel's message, so a bad one never reads out of bounds.
class GatherKernel : public LibraryKernel {
 public:
  int x = -1, indices = -1, y = -1;
  bool idx64 = true;  // int64 indices, else int32
  int64_t outer = 1, axis = 0, axis_len = 0, count = 0;
  size_t row = 0;  // bytes per entry along the axis
  std::string label;
  Shape data;  // x's shape, for the error
  std::vector<int64_t> idx;  // the checked indices, made at build (no allocation per run)

  void run(void* const* slots) override {
    for (int64_t j = 0; j < count; ++j) {
      int64_t i = idx64 ? static_cast<const int64_t*>(slots[indices])[j]
                        : static_cast<const int32_t*>(slots[indices])[j];
      idx[size_t(j)] = ops::checked_gather_index(label, i, axis_len, axis, data);
    }
    const char* xp = static_cast<const char*>(slots[x]);
    char* yp = static_cast<char*>(slots[y]);
    auto copy = [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const int64_t o = r / count, j = r % count;
        std::memcpy(yp + size_t(r) * row, xp + size_t(o * axis_len + idx[size_t(j)]) * row, row);
      }
    };
    if (size_t(outer * count) * row >= size_t(kParallelElems) * 4)
      parallel_for(outer * count, copy);
    else
      copy(0, outer * count);
  }
};

}  // namespace

std::unique_ptr<LibraryKernel> make_cpu_kernel(const Graph& g, const plan::Kernel& k,
                                               const Layouts& layouts) {
  const Node& n = g.nodes[size_t(k.nodes[0])];
  if (k.nodes.size() != 1 || n.outputs.size() != 1) return nullptr;
  if (const auto* d = plan::desc_of<plan::ConcatDesc>(k)) {
    if (!d->why.empty()) return nullptr;
    const int vout = d->out;
    const Value& ov = g.value(vout);
    auto kern = std::make_unique<ConcatKernel>();
    kern->out = vout;
    size_t es = dtype_size(ov.dtype);
    // NHWC (inputs and output alike, channel concat): each pixel's channels in turn. Blocked
    // (every part a whole number of channel blocks): each image's blocks in turn, as NCHW.
    if (is_nhwc(layouts, vout)) kern->outer = ov.shape[0] * ov.shape[2] * ov.shape[3];
    else
      for (int64_t i = 0; i < d->axis; ++i) kern->outer *= ov.shape[size_t(i)];
    kern->out_chunk = size_t(shape_numel(ov.shape) / std::max<int64_t>(kern->outer, 1)) * es;
    size_t total = 0;
    for (int v : d->inputs) {
      const Value& iv = g.value(v);
      if (iv.dtype != ov.dtype || iv.shape.size() != ov.shape.size()) return nullptr;
      if (is_blocked(layouts, vout) &&
          (d->axis != 1 || !is_blocked(layouts, v) || iv.shape[1] % channel_block()))
        return nullptr;
      size_t chunk = size_t(shape_numel(iv.shape) / std::max<int64_t>(kern->outer, 1)) * es;
      if (shape_numel(iv.shape) == 0) continue;
      kern->parts.push_back({v, chunk});
      total += chunk;
    }
    if (total != kern->out_chunk || kern->outer == 0) return nullptr;
    return kern;
  }
  if (const auto* d = plan::desc_of<plan::ChannelScaleDesc>(k)) {  // between two convs
    if (!d->why.empty()) return nullptr;
    auto kern = std::make_unique<ChannelScaleKernel>();
    kern->x = d->x, kern->s = d->s, kern->out = d->y;
    kern->images = d->images, kern->channels = d->channels, kern->pixels = d->pixels;
    kern->layout = layout_of(layouts, d->y);
    if (layout_of(layouts, d->x) != kern->layout) return nullptr;
    const DType t = g.value(d->x).dtype;
    if ((t != DType::f32 && t != DType::bf16) || g.value(d->s).dtype != t ||
        g.value(d->y).dtype != t)
      return nullptr;
    kern->bf = t == DType::bf16;
    kern->par = d->images * d->channels * d->pixels >= kParallelElems;
    return kern;
  }
  if (const auto* d = plan::desc_of<plan::GatherDesc>(k)) {
    const Value &xv = g.value(d->x), &iv = g.value(d->indices);
    if (!d->why.empty() || (iv.dtype != DType::i64 && iv.dtype != DType::i32)) return nullptr;
    if (!layouts.empty() && (layout_of(layouts, d->x) != kNCHW || layout_of(layouts, d->y) != kNCHW))
      return nullptr;
    auto kern = std::make_unique<GatherKernel>();
    kern->x = d->x, kern->indices = d->indices, kern->y = d->y;
    kern->idx64 = iv.dtype == DType::i64;
    kern->outer = d->outer, kern->axis = d->axis, kern->axis_len = d->axis_len;
    kern->count = shape_numel(iv.shape);
    kern->row = size_t(d->inner) * dtype_size(xv.dtype);
    kern->label = n.label();
    kern->data = xv.shape;
    kern->idx.assign(size_t(kern->count), 0);
    return kern;
  }
  if (const auto* d = plan::desc_of<plan::RowReduceDesc>(k)) {
    if (!d->why.empty()) return nullptr;
    const int vin = d->x;
    const DType t = g.value(vin).dtype;
    if ((t != DType::f32 && t != DType::bf16) || g.value(d->y).dtype != t) return nullptr;
    auto kern = std::make_unique<RowMeanKernel>();
    kern->bf = t == DType::bf16;
    if (is_nhwc(layouts, vin) || is_blocked(layouts, vin)) {  // a mean down the columns per image
      const Shape& xs = g.value(vin).shape;
      kern->channels = xs[1];
      kern->images = xs[0];
      kern->blocked = is_blocked(layouts, vin);
    }
    kern->in = vin;
    kern->out = d->y;
    kern->rows = d->rows;
    kern->cols = d->cols;
    kern->scale = d->scale;
    kern->par = d->rows * d->cols >= kParallelElems;
    return kern;
  }
  return nullptr;
}

std::unique_ptr<LibraryKernel> make_library_kernel(const Graph& g, const plan::Kernel& k,
                                                   const Layouts& layouts) {
  // Zero-size tensors never reach a library (the plan runs them by reference; oneDNN's matmul
  // set-up divides by M).
  for (const auto* vs : {&k.inputs, &k.outputs})
    for (int v : *vs)
      if (shape_numel(g.value(v).shape) == 0 && !g.value(v).constant.defined()) return nullptr;
  if (plan::desc_of<plan::AttentionDesc>(k)) return make_cpu_attention(g, k);
  if (auto p = make_cpu_pool(g, k, layouts)) return p;
  if (auto p = make_cpu_kernel(g, k, layouts)) return p;
  return make_dnnl_kernel(g, k, layouts);
}

namespace {
// A run-time 4-D float32 or bf16 value: every kernel that may take it NHWC or blocked (oneDNN's
// convs and pools, the hand-written ones above) takes both types.
bool spatial4(const Graph& g, int v) {
  const Value& val = g.value(v);
  return (val.dtype == DType::f32 || val.dtype == DType::bf16) && val.shape.size() == 4 &&
         !val.constant.defined();
}
}  // namespace

size_t value_bytes(const Graph& g, int v, const Layouts& l) {
  const Value& val = g.value(v);
  Shape s = val.shape;
  if (is_blocked(l, v)) s[1] = (s[1] + channel_block() - 1) / channel_block() * channel_block();
  return size_t(shape_numel(s)) * dtype_size(val.dtype);
}

void relayout_capable_values(const Graph& g, const plan::Kernel& k, std::vector<int>* ins,
                             std::vector<int>* outs, std::vector<std::vector<int>>* ties,
                             std::vector<int>* unpadded) {
  int out = k.outputs.empty() ? -1 : k.outputs[0];
  if (out < 0 || k.outputs.size() != 1) return;
  if (const auto* rr = plan::desc_of<plan::RowReduceDesc>(k)) {
    // A mean over H,W only; its output, [N, C, 1, 1] or [N, C] (keepdims 0: ShuffleNet-v2's
    // x.mean([2, 3])), is the same bytes in every layout.
    const Shape& xs = g.value(rr->x).shape;
    if (spatial4(g, rr->x) && shape_numel(g.value(out).shape) == xs[0] * xs[1])
      ins->push_back(rr->x);
    return;
  }
  if (!spatial4(g, out)) return;
  const plan::ConvDesc* conv = plan::desc_of<plan::ConvDesc>(k);
  const plan::PoolDesc* pool = plan::desc_of<plan::PoolDesc>(k);
  if (conv || pool) {
    const int x = conv ? conv->x : pool->x;
    if (spatial4(g, x)) ins->push_back(x);
    outs->push_back(out);
    if (conv && conv->epi.sum >= 0) {
      ins->push_back(conv->epi.sum);
      ties->push_back({conv->epi.sum, out});
    }
  } else if (const auto* cat = plan::desc_of<plan::ConcatDesc>(k)) {
    if (!cat->why.empty() || cat->axis != 1) return;
    std::vector<int> tie{out};
    for (int v : cat->inputs) {
      if (!spatial4(g, v)) return;
      tie.push_back(v);
    }
    ins->insert(ins->end(), tie.begin() + 1, tie.end());
    outs->push_back(out);
    ties->push_back(tie);
    unpadded->insert(unpadded->end(), tie.begin(), tie.end());
  } else if (const auto* cs = plan::desc_of<plan::ChannelScaleDesc>(k)) {
    if (!spatial4(g, cs->x)) return;
    ins->push_back(cs->x);
    outs->push_back(out);
    ties->push_back({cs->x, out});
  }
}

}  // namespace brrr::cpu
