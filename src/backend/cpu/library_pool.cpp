// MaxPool on channel-blocked (nChw16c, nChw8c) or NHWC activations, float32 or bf16, separably:
// per output row, the max over the window's input rows into a one-row float buffer, then the max
// over the window's columns. B channels are one SIMD register (16 on AVX-512, 8 on AVX2); a
// pixel holds one block (blocked) or C channels, C / B registers (NHWC). bf16 values widen to
// float exactly and the max, one of them, narrows back exactly.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/library.hpp"
#include "plan/library_desc.hpp"

namespace brrr::cpu {

namespace {

// Below this many input elements the pool runs on the calling thread.
constexpr int64_t kParallelPoolElems = 32768;

// A block of B floats: 16 are one AVX-512 register, 8 one AVX2 register (GCC's generic vectors;
// loads by memcpy).
template <int B>
struct Lanes {
  typedef float V __attribute__((vector_size(B * sizeof(float))));
  typedef int32_t Vi __attribute__((vector_size(B * sizeof(int32_t))));
  typedef uint16_t Vh __attribute__((vector_size(B * sizeof(uint16_t))));
};

struct PoolGeometry {
  int64_t blocks = 0;  // planes: images * channel blocks (blocked), images (NHWC)
  int64_t block = 16;  // channels a register: 16 or 8
  int64_t pix = 16;    // elements a pixel: `block` (blocked), C (NHWC; a multiple of `block`)
  int64_t h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
};

// A register of B channels from float or bf16 storage, and back (the bf16 bits are a float's
// upper half).
template <class V, class T>
__attribute__((always_inline)) inline V load_v(const T* q) {
  V v;
  if constexpr (std::is_same_v<T, float>) {
    __builtin_memcpy(&v, q, sizeof v);
  } else {
    constexpr int B = sizeof(V) / sizeof(float);
    typename Lanes<B>::Vh h;
    __builtin_memcpy(&h, q, sizeof h);
    const typename Lanes<B>::Vi i = __builtin_convertvector(h, typename Lanes<B>::Vi) << 16;
    __builtin_memcpy(&v, &i, sizeof v);
  }
  return v;
}
// (Functions, not lambdas: a lambda is not cloned for its caller's target.)
template <class V, class T>
__attribute__((always_inline)) inline void store_v(T* q, V v) {
  if constexpr (std::is_same_v<T, float>) {
    __builtin_memcpy(q, &v, sizeof v);
  } else {
    constexpr int B = sizeof(V) / sizeof(float);
    typename Lanes<B>::Vi i;
    __builtin_memcpy(&i, &v, sizeof i);
    const typename Lanes<B>::Vh h = __builtin_convertvector(i >> 16, typename Lanes<B>::Vh);
    __builtin_memcpy(q, &h, sizeof h);
  }
}
template <class V>
__attribute__((always_inline)) inline V mx(V a, V b) {
  return a < b ? b : a;
}

// The taps [lo, hi) of a k-tap window starting at `start` that fall inside [0, size) (pads never
// win a max).
inline std::pair<int64_t, int64_t> taps(int64_t start, int64_t k, int64_t size) {
  const int64_t lo = std::min(k, std::max<int64_t>(0, -start));
  return {lo, std::max(lo, std::min(k, size - start))};
}

// The exact rows: NaN-propagating per tap. Output rows [r0, r1) in the order (output row, block):
// a thread's band of rows reads the input rows that the conv before it wrote on that thread (oneDNN
// splits rows), in its cache (0.14 -> 0.10 ms in place against block-major bands). `row` holds w
// vectors. The clones let this loop use AVX-512 where the machine has it (as oneDNN's jit code
// does) in a portable build.
template <int B, class T>
__attribute__((always_inline)) inline void max_pool_rows_exact(const PoolGeometry& p, const T* x,
                                                               T* y, float* row, int64_t r0,
                                                               int64_t r1) {
  using V = typename Lanes<B>::V;
  using Vi = typename Lanes<B>::Vi;
  const V lowest = V{} - std::numeric_limits<float>::infinity();
  const V quiet_nan = V{} + std::numeric_limits<float>::quiet_NaN();
  const int64_t n = p.w * p.pix;  // elements an input row
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t oh = r / p.blocks, b = r % p.blocks;
    const T* xb = x + b * p.h * n;
    // Rows of the window inside the input (pads never win a max), then their max per column; a
    // NaN wins (a max propagates NaN, as the reference does). The NaN mask is kept apart from the
    // max: GCC lowers a select on `acc < v | v != v` per tap to scalar code (9x slower).
    const int64_t hb = oh * p.sh - p.ph;
    const auto [i0, i1] = taps(hb, p.kh, p.h);
    for (int64_t c = 0; c < n; c += B) {
      V acc = lowest;
      Vi nan = {};
      for (int64_t i = i0; i < i1; ++i) {
        const V v = load_v<V>(xb + (hb + i) * n + c);
        acc = acc < v ? v : acc;
        nan |= v != v;
      }
      acc = nan ? quiet_nan : acc;
      store_v(row + c, acc);
    }
    T* yr = y + (b * p.oh + oh) * p.ow * p.pix;
    for (int64_t ow = 0; ow < p.ow; ++ow) {
      const int64_t wb = ow * p.sw - p.pw;
      const auto [j0, j1] = taps(wb, p.kw, p.w);
      for (int64_t e = 0; e < p.pix; e += B) {
        V acc = lowest;
        Vi nan = {};
        for (int64_t j = j0; j < j1; ++j) {
          const V v = load_v<V>(row + (wb + j) * p.pix + e);
          acc = acc < v ? v : acc;
          nan |= v != v;
        }
        acc = nan ? quiet_nan : acc;
        store_v(yr + ow * p.pix + e, acc);
      }
    }
  }
}

// The same rows without NaN per tap, column-streamed: the window's input rows reduced into the
// row buffer in one pass (3 rows fused, the common 3x3 window), then the row's windows. Returns
// whether any input it read was NaN or infinite; the caller then redoes the rows exactly. The
// exact loop's per-column tap loop and mask blend bound it (squeezenet's first pool, 64 x 111 x
// 111, two threads after its conv: 0.11 -> 0.09-0.10 ms).
template <int B, class T>
__attribute__((always_inline)) inline bool max_pool_rows_fast(const PoolGeometry& p, const T* x,
                                                              T* y, float* row, int64_t r0,
                                                              int64_t r1) {
  using V = typename Lanes<B>::V;
  using Vi = typename Lanes<B>::Vi;
  // 0 while every input read is finite: x * 0 is NaN for a NaN or an infinity, and NaN sticks.
  V bad = {};
  const int64_t n = p.w * p.pix;  // elements an input row
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t oh = r / p.blocks, b = r % p.blocks;
    const T* xb = x + b * p.h * n;
    const int64_t hb = oh * p.sh - p.ph;
    const auto [i0, i1] = taps(hb, p.kh, p.h);
    if (i1 == i0) return true;  // a window of pads only: the exact loop gives its -inf
    const T* x0 = xb + (hb + i0) * n;
    int64_t i = i0 + 1;
    if (i1 - i0 >= 3) {
      const T *x1 = x0 + n, *x2 = x1 + n;
      for (int64_t c = 0; c < n; c += B) {
        const V a = load_v<V>(x0 + c), bb = load_v<V>(x1 + c), cc = load_v<V>(x2 + c);
        bad += (a + bb + cc) * 0.f;
        store_v(row + c, mx(mx(a, bb), cc));
      }
      i = i0 + 3;
    } else {
      for (int64_t c = 0; c < n; c += B) {
        const V a = load_v<V>(x0 + c);
        bad += a * 0.f;
        store_v(row + c, a);
      }
    }
    for (; i < i1; ++i) {
      const T* xi = xb + (hb + i) * n;
      for (int64_t c = 0; c < n; c += B) {
        const V a = load_v<V>(xi + c);
        bad += a * 0.f;
        store_v(row + c, mx(load_v<V>(row + c), a));
      }
    }
    T* yr = y + (b * p.oh + oh) * p.ow * p.pix;
    for (int64_t ow = 0; ow < p.ow; ++ow) {
      const int64_t wb = ow * p.sw - p.pw;
      const auto [j0, j1] = taps(wb, p.kw, p.w);
      if (j1 == j0) return true;
      const float* q0 = row + (wb + j0) * p.pix;
      for (int64_t e = 0; e < p.pix; e += B) {
        const float* q = q0 + e;
        V acc = load_v<V>(q);
        if (j1 - j0 == 3) {
          acc = mx(mx(acc, load_v<V>(q + p.pix)), load_v<V>(q + 2 * p.pix));
        } else {
          for (int64_t j = 1; j < j1 - j0; ++j) acc = mx(acc, load_v<V>(q + j * p.pix));
        }
        store_v(yr + ow * p.pix + e, acc);
      }
    }
  }
  Vi none = {}, bits;
  __builtin_memcpy(&bits, &bad, sizeof bits);
  return __builtin_memcmp(&bits, &none, sizeof bits) != 0;
}

template <int B, class T>
__attribute__((always_inline)) inline void max_pool_rows_b(const PoolGeometry& p, const T* x, T* y,
                                                           float* row, int64_t r0, int64_t r1) {
  if (max_pool_rows_fast<B>(p, x, y, row, r0, r1)) max_pool_rows_exact<B>(p, x, y, row, r0, r1);
}

// Overloads, not templates: clang does not clone function templates for targets.
__attribute__((target_clones("avx512f", "avx2", "default"))) void max_pool_rows16(
    const PoolGeometry& p, const float* x, float* y, float* row, int64_t r0, int64_t r1) {
  max_pool_rows_b<16>(p, x, y, row, r0, r1);
}
__attribute__((target_clones("avx512f", "avx2", "default"))) void max_pool_rows16(
    const PoolGeometry& p, const uint16_t* x, uint16_t* y, float* row, int64_t r0, int64_t r1) {
  max_pool_rows_b<16>(p, x, y, row, r0, r1);
}
__attribute__((target_clones("avx2", "default"))) void max_pool_rows8(
    const PoolGeometry& p, const float* x, float* y, float* row, int64_t r0, int64_t r1) {
  max_pool_rows_b<8>(p, x, y, row, r0, r1);
}
__attribute__((target_clones("avx2", "default"))) void max_pool_rows8(
    const PoolGeometry& p, const uint16_t* x, uint16_t* y, float* row, int64_t r0, int64_t r1) {
  max_pool_rows_b<8>(p, x, y, row, r0, r1);
}

template <class T>
void max_pool_rows(const PoolGeometry& p, const T* x, T* y, float* row, int64_t r0, int64_t r1) {
  if (p.block == 16) max_pool_rows16(p, x, y, row, r0, r1);
  else max_pool_rows8(p, x, y, row, r0, r1);
}

class MaxPoolKernel : public LibraryKernel {
 public:
  PoolGeometry p;
  int in = -1, out = -1;
  bool bf16 = false;        // bf16 storage, else float32
  bool par = false;         // big enough to split over the pool's threads
  std::vector<float> rows;  // the row buffer of a run on the calling thread

  void run(void* const* slots) override {
    if (bf16) run_as<uint16_t>(slots);
    else run_as<float>(slots);
  }

 private:
  template <class T>
  void run_as(void* const* slots) {
    const T* x = static_cast<const T*>(slots[in]);
    T* y = static_cast<T*>(slots[out]);
    const int64_t n = p.blocks * p.oh;
    if (!par) {
      max_pool_rows(p, x, y, rows.data(), 0, n);
      return;
    }
    const size_t need = size_t(p.w * p.pix);
    parallel_for(n, [&](int64_t lo, int64_t hi) {
      // One row buffer per thread, grown on a thread's first wider pool only.
      thread_local std::vector<float> buf;
      if (buf.size() < need) buf.resize(need);
      max_pool_rows(p, x, y, buf.data(), lo, hi);
    });
  }
};

}  // namespace

std::unique_ptr<LibraryKernel> make_cpu_pool(const Graph& g, const plan::Kernel& k,
                                             const Layouts& layouts) {
  const plan::PoolDesc* d = plan::desc_of<plan::PoolDesc>(k);
  if (!d || !d->max || !d->why.empty() || k.nodes.size() != 1 || k.outputs.size() != 1)
    return nullptr;
  int vx = d->x, vout = k.outputs[0];
  const bool blocked = is_blocked(layouts, vx) && is_blocked(layouts, vout);
  const bool nhwc = is_nhwc(layouts, vx) && is_nhwc(layouts, vout);
  if (!blocked && !nhwc) return nullptr;  // else oneDNN's
  const Value &xv = g.value(vx), &ov = g.value(vout);
  if (xv.dtype != ov.dtype || (xv.dtype != DType::f32 && xv.dtype != DType::bf16) ||
      xv.shape.size() != 4 || ov.shape.size() != 4 || d->storage_order != 0)
    return nullptr;
  const ops::Window& w = d->window;
  const std::vector<int64_t>& ks = w.k;
  if (w.out[0] != ov.shape[2] || w.out[1] != ov.shape[3] || w.d[0] != 1 || w.d[1] != 1)
    return nullptr;
  auto kern = std::make_unique<MaxPoolKernel>();
  PoolGeometry& p = kern->p;
  p.block = channel_block();
  if (blocked) {
    // Padding channels are 0 in the input and come out 0 (max of zeros).
    p.pix = p.block;
    p.blocks = xv.shape[0] * ((xv.shape[1] + p.block - 1) / p.block);
  } else {
    if (xv.shape[1] % p.block != 0) return nullptr;  // whole registers a pixel only
    p.pix = xv.shape[1];
    p.blocks = xv.shape[0];
  }
  p.h = xv.shape[2], p.w = xv.shape[3], p.oh = ov.shape[2], p.ow = ov.shape[3];
  p.kh = ks[0], p.kw = ks[1], p.sh = w.s[0], p.sw = w.s[1], p.ph = w.pb[0], p.pw = w.pb[1];
  kern->in = vx, kern->out = vout;
  kern->bf16 = xv.dtype == DType::bf16;
  kern->par = shape_numel(xv.shape) >= kParallelPoolElems && p.blocks * p.oh > 1;
  kern->rows.assign(size_t(p.w * p.pix), 0.f);
  return kern;
}

}  // namespace brrr::cpu
