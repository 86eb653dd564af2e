// Emits plain C++ loops that GCC vectorizes: rows or chunks split over brrr's thread pool (through
// the brrr_par table the caller passes; the module links no OpenMP), `omp simd` over the
// contiguous inner loop. libm functions are declared `omp declare simd`, so vectorized
// calls go to SLEEF's GNU-ABI vector functions (_ZGVdN8v_expf...) instead of scalar libm.
#include "backend/cpu/codegen_cpp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>
#include <map>

#include "backend/embedded_headers.hpp"

namespace brrr::cpu {

using plan::Expr;
using plan::Kernel;
using plan::KernelKind;
using plan::ReduceKind;

namespace {

// scalar_ops.h (embedded at build time) is pasted into each source so the generated file stands
// alone and its hash covers the scalar math it uses.
std::string scalar_ops_text() { return embedded_header("brrr/scalar_ops.h"); }

const char* kVectorMath[] = {"expf",  "logf",  "cosf",  "sinf",  "tanhf", "erff",
                             "exp2f", "log2f", "tanf",  "atanf", "expm1f", "log1pf"};

using plan::float_lit;

// Emits one kernel as a function body over local buffers b0, b1, ... (numbered in order of
// first use; slots[a[j]] is bj), so kernels that differ only in which buffers they touch have the
// same text and share one function.
class KernelEmitter {
 public:
  KernelEmitter(const Graph& g, const Kernel& k, bool row_cache = true)
      : g_(g), k_(k), row_cache_(row_cache) {
    for (const Expr& e : k_.exprs)
      if (e.kind == Expr::Load || (e.kind == Expr::Const && e.value >= 0)) local(e.value);
    num_inputs_ = args_.size();
    for (const auto& st : k_.stores) local(st.value);
  }

  // The kernel's text with @FN@ for its name, the same for kernels that may share the function:
  // a range function over units (blocks of a flat map, or rows) and an entry point that hands
  // the units to brrr's thread pool (brrr_par) or runs them all on the caller.
  std::string emit() {
    const bool is_flat = flat();
    int64_t units = 0;
    bool parallel = false;
    if (is_flat) {
      int64_t n = shape_numel(k_.space);
      units = (n + kChunk - 1) / kChunk;
      // Sizes are known here: a small kernel runs on the caller, with no fork-join at all.
      parallel = n > kChunk * 2;
    } else {
      tail_ = row_tail();
      units = rows();
      parallel = rows() * cols() > 32768 && rows() > 1;
    }
    out_ = "static void @FN@_part(void* arg, int64_t u0, int64_t u1) {\n";
    out_ += "  void* const* slots = ((const brrr_args*)arg)->slots;\n";
    out_ += "  const int32_t* a = ((const brrr_args*)arg)->a;\n";
    for (size_t j = 0; j < args_.size(); ++j) {
      const char* t = ctype(args_[j]);
      out_ += j < num_inputs_
                  ? fmt::format("  const {1}* __restrict b{0} = (const {1}*)slots[a[{0}]];\n", j, t)
                  : fmt::format("  {1}* __restrict b{0} = ({1}*)slots[a[{0}]];\n", j, t);
    }
    if (is_flat) emit_flat();
    else emit_rows();
    out_ += "}\n";
    out_ += "extern \"C\" void @FN@(void* const* slots, const int32_t* a, const brrr_par* par) {\n";
    out_ += "  brrr_args args = {slots, a};\n";
    if (parallel)
      out_ += fmt::format("  par->run(par->pool, {}, @FN@_part, &args);\n", units);
    else
      out_ += fmt::format("  (void)par;\n  @FN@_part(&args, 0, {});\n", units);
    out_ += "}\n\n";
    return out_;
  }
  // Slot ids of b0, b1, ...: inputs (loads and tensor constants), then outputs.
  const std::vector<int32_t>& args() const { return args_; }

 private:
  const Graph& g_;
  const Kernel& k_;
  std::string out_;
  std::map<int, int> local_;  // graph value id -> j of bj
  std::vector<int32_t> args_;
  size_t num_inputs_ = 0;
  bool row_cache_ = true;
  size_t tail_ = 0;  // row kernels: the first space dim of a row (row_tail)
  // Row kernels: element expressions a reduction's loop computes and stores in a per-row scratch
  // array (scN[c]) that later loops of the row read instead of computing them again (softmax's
  // exp(x - max): once, not twice).
  std::set<int> cached_;

  void local(int v) {
    if (local_.try_emplace(v, int(args_.size())).second) args_.push_back(v);
  }
  std::string buf(int v) const { return fmt::format("b{}", local_.at(v)); }
  // Bool buffers hold one byte per element; the kernel computes on them as float32 0 or 1 (a
  // load converts) and stores v != 0, as the CUDA emitter does. bfloat16 and float16 buffers
  // hold the 16 bits, converted to float32 by each load and rounded (nearest even) by each store
  // (the preamble's brrr_from_* / brrr_to_*, which round as Tensor::cast does).
  bool is_bool(int v) const { return g_.value(v).dtype == DType::boolean; }
  const char* ctype(int v) const {
    switch (g_.value(v).dtype) {
      case DType::boolean: return "unsigned char";
      case DType::bf16: case DType::f16: return "uint16_t";
      default: return "float";
    }
  }
  std::string loaded(int v, const std::string& elem) const {
    switch (g_.value(v).dtype) {
      case DType::bf16: return fmt::format("brrr_from_bf16({})", elem);
      case DType::f16: return fmt::format("brrr_from_f16({})", elem);
      default: return elem;
    }
  }
  std::string stored(int v, int expr) const {
    switch (g_.value(v).dtype) {
      case DType::boolean: return fmt::format("(unsigned char)(e{} != 0.0f)", expr);
      case DType::bf16: return fmt::format("brrr_to_bf16(e{})", expr);
      case DType::f16: return fmt::format("brrr_to_f16(e{})", expr);
      default: return fmt::format("e{}", expr);
    }
  }

  // The first space dim of a row: the last one, or where a kernel without reductions whose
  // every load runs contiguously across dims [d, rank) (or not at all) and whose stores all cover
  // the space, from the first such d: one row of H * W for a per-channel scale on NCHW, not H
  // rows of W (DenseNet's BatchNorm+ReLU on bf16 56 x 56 planes: rows of 56 ran at 7% of the
  // memory roof).
  size_t row_tail() const {
    const Shape& S = k_.space;
    size_t d = S.empty() ? 0 : S.size() - 1;
    if (k_.has_reduction()) return d;
    for (const auto& st : k_.stores)
      if (g_.value(st.value).shape != S) return d;
    auto joins = [&](size_t j) {  // dim j runs on into dim j + 1 for every load
      return std::all_of(k_.exprs.begin(), k_.exprs.end(), [&](const Expr& e) {
        return e.kind != Expr::Load || e.strides[j] == e.strides[j + 1] * S[j + 1];
      });
    };
    while (d > 0 && joins(d - 1)) --d;
    return d;
  }
  int64_t cols() const {
    int64_t c = 1;
    for (size_t d = tail_; d < k_.space.size(); ++d) c *= k_.space[d];
    return k_.space.empty() ? 1 : c;
  }
  int64_t rows() const {
    int64_t r = 1;
    for (size_t d = 0; d < tail_ && d < k_.space.size(); ++d) r *= k_.space[d];
    return r;
  }

  bool flat() const {
    if (k_.has_reduction()) return false;
    Shape cs = contiguous_strides(k_.space);
    for (const Expr& e : k_.exprs) {
      if (e.kind != Expr::Load) continue;
      bool zero = std::all_of(e.strides.begin(), e.strides.end(), [](int64_t s) { return s == 0; });
      bool contig = true;
      for (size_t d = 0; d < cs.size(); ++d)
        if (k_.space[d] != 1 && e.strides[d] != cs[d]) contig = false;
      if (!zero && !contig) return false;
    }
    return true;
  }

  // The element expressions `targets` need, in id order; a cached one is read from its
  // scratch array, so what only it needs is not computed again.
  std::vector<int> closure(const std::vector<int>& targets) const {
    std::set<int> need;
    std::vector<int> stack = targets;
    while (!stack.empty()) {
      int id = stack.back();
      stack.pop_back();
      const Expr& e = k_.exprs[size_t(id)];
      if (e.level != 0 || !need.insert(id).second || cached_.count(id)) continue;
      if (e.kind != Expr::Reduce)
        for (int a : e.args)
          if (a >= 0) stack.push_back(a);
    }
    return {need.begin(), need.end()};
  }
  // Scratch arrays live on the stack: rows up to this many floats (64 KB).
  static constexpr int64_t kRowCacheMax = 16384;

  std::string value_of(int id, const std::string& idx) const {
    const Expr& e = k_.exprs[size_t(id)];
    switch (e.kind) {
      // A constant taken from an initializer is read through its pointer, so kernels that differ
      // only in such constants share code; attributes and derived constants stay literals.
      case Expr::Const: return e.value >= 0 ? buf(e.value) + "[0]" : float_lit(e.constant);
      case Expr::Load: return loaded(e.value, fmt::format("{}[{}]", buf(e.value), idx));
      case Expr::Pointwise: return render_pointwise(c_code_for_op(), e);
      case Expr::Reduce: break;
    }
    BRRR_ASSERT(false, "reduce has no inline value");
    return "";
  }

  static constexpr int64_t kStreamMinElems = int64_t(1) << 21;  // 8 MB of float32 output
  static constexpr int64_t kChunk = 16384;                      // elements per unit of a flat map

  void emit_flat() {
    int64_t n = shape_numel(k_.space);
    const int64_t chunk = kChunk;
    out_ += fmt::format("  const int64_t n = {};\n", n);
    out_ += "  for (int64_t blk = u0; blk < u1; ++blk) {\n";
    out_ += fmt::format("    const int64_t lo = blk * {0}, hi = lo + {0} < n ? lo + {0} : n;\n", chunk);
    // Outputs far larger than the caches are written with streaming stores: an ordinary store
    // first reads the line it writes (write-allocate), 1.5x the compulsory traffic of a x -> y map.
    // Each group of 16 is computed into a 16-float tile the compiler keeps in one vector register,
    // then streamed (a larger tile goes through memory: 9.4 vs 7.9 ms on (x+1)*2 over 2^25).
    // (float32 outputs only: the tiles and brrr_stream16 are float.)
    const bool stream = n >= kStreamMinElems &&
                        std::all_of(k_.stores.begin(), k_.stores.end(), [&](const auto& st) {
                          return g_.value(st.value).dtype == DType::f32;
                        });
    auto body = [&](const std::string& ind, bool tile) {
      std::string b;
      for (size_t id = 0; id < k_.exprs.size(); ++id) {
        const Expr& e = k_.exprs[id];
        std::string idx;
        if (e.kind == Expr::Load) {
          bool zero = std::all_of(e.strides.begin(), e.strides.end(), [](int64_t s) { return s == 0; });
          idx = zero ? fmt::format("{}", e.offset) : fmt::format("i + {}", e.offset);
        }
        b += fmt::format("{}  const float e{} = {};\n", ind, id, value_of(int(id), idx));
      }
      for (size_t j = 0; j < k_.stores.size(); ++j) {
        const auto& st = k_.stores[j];
        b += tile ? fmt::format("{}  t{}[i - s0] = e{};\n", ind, j, st.expr)
                  : fmt::format("{}  {}[i] = {};\n", ind, buf(st.value), stored(st.value, st.expr));
      }
      return b;
    };
    std::string from = "lo";
    if (stream) {
      std::string aligned;
      for (const auto& st : k_.stores)
        aligned +=
            fmt::format("{}brrr_stream_ok({} + lo)", aligned.empty() ? "" : " && ", buf(st.value));
      out_ += "    int64_t s0 = lo;\n";
      out_ += fmt::format("    if ({}) {{\n", aligned);
      out_ += "      for (; s0 + 16 <= hi; s0 += 16) {\n";
      for (size_t j = 0; j < k_.stores.size(); ++j)
        out_ += fmt::format("        float t{}[16] __attribute__((aligned(64)));\n", j);
      out_ += "#pragma omp simd\n        for (int64_t i = s0; i < s0 + 16; ++i) {\n";
      out_ += body("        ", true) + "        }\n";
      for (size_t j = 0; j < k_.stores.size(); ++j)
        out_ += fmt::format("        brrr_stream16({} + s0, t{});\n", buf(k_.stores[j].value), j);
      out_ += "      }\n    }\n";
      from = "s0";  // the rest (a tail, or a block whose output is not aligned): plain stores
    }
    out_ += "#pragma omp simd\n";
    out_ += fmt::format("    for (int64_t i = {}; i < hi; ++i) {{\n", from);
    out_ += body("    ", false) + "    }\n";
    if (stream) out_ += "    brrr_stream_fence();\n";
    out_ += "  }\n";
  }

  // Inner-loop statements computing `ids` at column c.
  std::string elem_stmts(const std::vector<int>& ids, const char* ind) const {
    std::string s;
    for (int id : ids) {
      const Expr& e = k_.exprs[size_t(id)];
      if (cached_.count(id)) {
        s += fmt::format("{}const float e{} = sc{}[c];\n", ind, id, id);
        continue;
      }
      std::string idx;
      if (e.kind == Expr::Load) {
        int64_t st = e.strides.back();
        idx = st == 1 ? fmt::format("o{} + c", id) : fmt::format("o{} + c * {}", id, st);
      }
      s += fmt::format("{}const float e{} = {};\n", ind, id, value_of(id, idx));
    }
    return s;
  }

  void emit_rows() {
    const Shape& S = k_.space;
    const int64_t R = rows(), C = cols();
    const int rank = int(tail_) + 1;  // the row's dims count as one, the last
    out_ += fmt::format("  const int64_t C = {};  // rows u0..u1 of {}\n", C, R);
    std::vector<int> elem_targets;
    for (const auto& s : k_.stores)
      if (g_.value(s.value).shape == S) elem_targets.push_back(s.expr);
    choose_row_cache(elem_targets, C);
    for (int id : caching_)
      out_ += fmt::format("  float sc{}[{}] __attribute__((aligned(64)));\n", id, C);
    out_ += "  for (int64_t r = u0; r < u1; ++r) {\n";
    // Unravel r over the leading dims once per row.
    out_ += "    int64_t rem = r;\n";
    for (int d = rank - 2; d >= 0; --d)
      out_ += fmt::format("    const int64_t i{0} = rem % {1}; rem /= {1};\n", d, S[size_t(d)]);
    out_ += "    (void)rem;\n";
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      const Expr& e = k_.exprs[id];
      if (e.kind != Expr::Load) continue;
      std::string base = fmt::format("{}", e.offset);
      for (int d = 0; d + 1 < rank; ++d)
        if (e.strides[size_t(d)] != 0) base += fmt::format(" + i{} * {}", d, e.strides[size_t(d)]);
      out_ += fmt::format("    const int64_t o{} = {};\n", id, base);
    }
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      const Expr& e = k_.exprs[id];
      if (e.level != 1) continue;
      if (e.kind == Expr::Reduce) {
        emit_reduce(int(id));
        continue;
      }
      std::string idx = e.kind == Expr::Load ? fmt::format("o{}", id) : "";
      out_ += fmt::format("    const float e{} = {};\n", id, value_of(int(id), idx));
    }
    if (!elem_targets.empty()) {
      out_ += "#pragma omp simd\n    for (int64_t c = 0; c < C; ++c) {\n";
      out_ += elem_stmts(closure(elem_targets), "      ");
      for (const auto& s : k_.stores)
        if (g_.value(s.value).shape == S)
          out_ += fmt::format("      {}[r * C + c] = {};\n", buf(s.value), stored(s.value, s.expr));
      out_ += "    }\n";
    }
    for (const auto& s : k_.stores)
      if (g_.value(s.value).shape != S) {
        BRRR_ASSERT(shape_numel(g_.value(s.value).shape) == R, "row store of a non-row value");
        out_ += fmt::format("    {}[r] = {};\n", buf(s.value), stored(s.value, s.expr));
      }
    out_ += "  }\n";
  }

  void emit_reduce(int id) {
    const Expr& e = k_.exprs[size_t(id)];
    bool mx = e.reduce == ReduceKind::Max;
    out_ += fmt::format("    float e{} = {};\n", id, mx ? "-INFINITY" : "0.0f");
    // A max propagates NaN (as ReduceMax and the reference do): SIMD max reductions drop it, so
    // NaNs are counted alongside and win afterwards.
    if (mx) out_ += fmt::format("    int nan{} = 0;\n", id);
    out_ += mx ? fmt::format("#pragma omp simd reduction(max:e{0}) reduction(|:nan{0})\n", id)
               : fmt::format("#pragma omp simd reduction(+:e{})\n", id);
    out_ += "    for (int64_t c = 0; c < C; ++c) {\n";
    out_ += elem_stmts(closure({e.args[0]}), "      ");
    int a = e.args[0];
    if (caching_.count(a)) out_ += fmt::format("      sc{0}[c] = e{0};\n", a);
    if (mx)
      out_ += fmt::format("      e{0} = e{1} > e{0} ? e{1} : e{0};\n      nan{0} |= e{1} != e{1};\n",
                          id, a);
    else out_ += fmt::format("      e{} += e{};\n", id, a);
    out_ += "    }\n";
    if (mx) out_ += fmt::format("    if (nan{0}) e{0} = NAN;\n", id);
    if (e.reduce == ReduceKind::Mean) out_ += fmt::format("    e{} /= (float)C;\n", id);
    if (caching_.count(a)) cached_.insert(a);  // later loops of the row read it
  }

  // The element arguments of reductions worth keeping per row: a computed expression (not a
  // plain load) that a later loop of the same row needs again. Fills caching_; cached_ grows as
  // the reductions that store them are emitted.
  void choose_row_cache(const std::vector<int>& elem_targets, int64_t C) {
    if (!row_cache_ || C > kRowCacheMax) return;
    std::vector<int> reduces;
    for (size_t id = 0; id < k_.exprs.size(); ++id)
      if (k_.exprs[id].level == 1 && k_.exprs[id].kind == Expr::Reduce) reduces.push_back(int(id));
    for (size_t i = 0; i < reduces.size(); ++i) {
      const int a = k_.exprs[size_t(reduces[i])].args[0];
      if (a < 0 || k_.exprs[size_t(a)].level != 0 || k_.exprs[size_t(a)].kind != Expr::Pointwise)
        continue;
      std::vector<int> later = elem_targets;
      for (size_t j = i + 1; j < reduces.size(); ++j)
        later.push_back(k_.exprs[size_t(reduces[j])].args[0]);
      std::vector<int> need = plan::level0_closure(k_, later);
      if (std::find(need.begin(), need.end(), a) != need.end()) caching_.insert(a);
    }
  }
  std::set<int> caching_;  // chosen by choose_row_cache
};

// What every translation unit starts with: includes, streaming-store helpers, vector math
// declarations and the scalar ops.
std::string preamble(const CodegenOptions& opts) {
  std::string t;
  t += "// Generated by brrr: one function per distinct fused kernel. Do not edit.\n";
  t += "#include <math.h>\n#include <stdint.h>\n#include <immintrin.h>\n\n";
  // Mirrors backend/cpu/thread_pool.hpp: run(pool, n, fn, arg) covers [0, n) with fn(arg, lo, hi).
  t += "typedef void (*brrr_chunk_fn)(void* arg, int64_t lo, int64_t hi);\n";
  t += "struct brrr_par {\n  void (*run)(void* pool, int64_t n, brrr_chunk_fn fn, void* arg);\n"
       "  void* pool;\n};\n\n";
  t += "typedef struct {\n  void* const* slots;\n  const int32_t* a;\n} brrr_args;\n\n";
  // Streaming (non-temporal) store of one 16-float tile; the caller checks alignment once per
  // block (brrr_stream_ok) and uses plain stores where the target has no vector stream.
  t += R"(static inline int brrr_stream_ok(const float* dst) {
#if defined(__AVX512F__)
  return ((uintptr_t)dst & 63) == 0;
#elif defined(__AVX__)
  return ((uintptr_t)dst & 31) == 0;
#else
  return 0;
#endif
}
static inline void brrr_stream16(float* dst, const float* src) {
#if defined(__AVX512F__)
  _mm512_stream_ps(dst, _mm512_load_ps(src));
#elif defined(__AVX__)
  _mm256_stream_ps(dst, _mm256_load_ps(src));
  _mm256_stream_ps(dst + 8, _mm256_load_ps(src + 8));
#else
  for (int j = 0; j < 16; ++j) dst[j] = src[j];
#endif
}
static inline void brrr_stream_fence(void) {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}
// bfloat16 and float16 storage: float32 math, rounded to nearest even on store (NaN stays NaN),
// bit for bit as brrr::bf16 and brrr::f16 (include/brrr/dtype.hpp) convert.
static inline float brrr_from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t brrr_to_bf16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float brrr_from_f16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  float f;
  if (e == 0) {  // zero or subnormal: m * 2^-24
    f = (float)m * 5.9604644775390625e-8f;
    __builtin_memcpy(&u, &f, 4);
    u |= sign;
  } else {
    u = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112) << 23) | (m << 13);
  }
  __builtin_memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t brrr_to_f16(float f) {
  uint32_t x;
  __builtin_memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (absx < 0x38800000u) {
    float a;
    __builtin_memcpy(&a, &absx, 4);
    return (uint16_t)(sign | (uint32_t)rintf(a * 16777216.0f));
  }
  return (uint16_t)(sign | ((absx + 0xc8000fffu + ((absx >> 13) & 1u)) >> 13));
}

)";
  if (opts.vector_math) {
    t += "// Vector variants come from SLEEF's GNU-ABI library (libsleefgnuabi).\n";
    t += "extern \"C\" {\n";
    for (const char* f : kVectorMath)
      t += fmt::format("#pragma omp declare simd notinbranch\nfloat {}(float);\n", f);
    t += "#pragma omp declare simd notinbranch\nfloat powf(float, float);\n";
    t += "}\n\n";
  }
  t += scalar_ops_text();
  t += "\n";
  return t;
}

}  // namespace

const CodeForOp& c_code_for_op() {
  static const CodeForOp table = [] {
    using O = ScalarOp;
    const std::pair<O, const char*> forms[] = {
        {O::Identity, "({0})"},
        {O::Add, "({0} + {1})"},
        {O::Sub, "({0} - {1})"},
        {O::Mul, "({0} * {1})"},
        {O::Div, "({0} / {1})"},
        {O::Pow, "powf({0}, {1})"},
        {O::ModNumpy, "brrr_mod_0({0}, {1})"},
        {O::ModFmod, "brrr_mod_1({0}, {1})"},
        {O::Where, "({0} ? {1} : {2})"},
        {O::Equal, "({0} == {1})"},
        {O::Less, "({0} < {1})"},
        {O::LessOrEqual, "({0} <= {1})"},
        {O::Greater, "({0} > {1})"},
        {O::GreaterOrEqual, "({0} >= {1})"},
        {O::And, "({0} && {1})"},
        {O::Or, "({0} || {1})"},
        {O::Xor, "({0} != {1})"},
        {O::Not, "(!{0})"},
        {O::Min, "brrr_min({0}, {1})"},
        {O::Max, "brrr_max({0}, {1})"},
        {O::Sqrt, "sqrtf({0})"},
        {O::Reciprocal, "(1.0f / {0})"},
        {O::Exp, "expf({0})"},
        {O::Log, "logf({0})"},
        {O::Tanh, "tanhf({0})"},
        {O::Erf, "erff({0})"},
        {O::Cos, "cosf({0})"},
        {O::Sin, "sinf({0})"},
        {O::Tan, "tanf({0})"},
        {O::Acos, "acosf({0})"},
        {O::Asin, "asinf({0})"},
        {O::Atan, "atanf({0})"},
        {O::Sinh, "sinhf({0})"},
        {O::Cosh, "coshf({0})"},
        {O::Floor, "floorf({0})"},
        {O::Ceil, "ceilf({0})"},
        {O::Round, "brrr_round({0})"},
        {O::Neg, "(-{0})"},
        {O::Abs, "fabsf({0})"},
        {O::Sign, "brrr_sign({0})"},
        {O::Relu, "brrr_relu({0})"},
        {O::Sigmoid, "brrr_sigmoid({0})"},
        {O::LeakyRelu, "brrr_leaky_relu({0}, {1})"},
        {O::Elu, "brrr_elu({0}, {1})"},
        {O::Selu, "brrr_selu({0}, {1}, {2})"},
        {O::Celu, "brrr_celu({0}, {1})"},
        {O::ThresholdedRelu, "brrr_thresholded_relu({0}, {1})"},
        {O::HardSigmoid, "brrr_hardsigmoid({0}, {1}, {2})"},
        {O::HardSwish, "brrr_hardswish({0})"},
        {O::Softplus, "brrr_softplus({0})"},
        {O::Softsign, "brrr_softsign({0})"},
        {O::Mish, "brrr_mish({0})"},
        {O::GeluErf, "brrr_gelu_erf({0})"},
        {O::GeluTanh, "brrr_gelu_tanh({0})"},
        {O::IsNaN, "({0} != {0})"},
        {O::IsInf, "brrr_isinf({0}, {1}, {2})"},
        {O::Clip, "brrr_clip({0}, {1}, {2})"},
        {O::PRelu, "brrr_prelu({0}, {1})"},
        {O::CosUnit, "brrr_cos_unit({0})"},
        {O::SinUnit, "brrr_sin_unit({0})"},
    };
    CodeForOp t;
    for (const auto& [op, form] : forms) t[size_t(op)] = form;
    for (size_t i = 0; i < t.size(); ++i)
      BRRR_ASSERT(!t[i].empty(), "a scalar op without a C form");
    return t;
  }();
  return table;
}

std::string render_op(const CodeForOp& table, ScalarOp op, const std::vector<std::string>& operands) {
  const std::string& form = table[size_t(op)];
  std::string out;
  for (size_t i = 0; i < form.size(); ++i) {
    if (form[i] != '{') {
      out += form[i];
      continue;
    }
    size_t j = form.find('}', i);
    size_t k = size_t(std::stoi(form.substr(i + 1, j - i - 1)));
    BRRR_CHECK(k < operands.size(), "scalar op {} takes operand {}, but has {}", scalar_op_name(op),
               k, operands.size());
    out += operands[k];
    i = j;
  }
  return out;
}

std::string render_pointwise(const CodeForOp& table, const plan::Expr& e) {
  std::vector<std::string> operands;
  for (size_t k = 0; k < e.args.size(); ++k)
    operands.push_back(e.args[k] >= 0 ? fmt::format("(e{})", e.args[k]) : plan::imm_lit(e.attrs.at(k)));
  return render_op(table, e.op, operands);
}

CppSource generate_cpp(const Graph& g, const plan::Plan& p, const CodegenOptions& opts) {
  CppSource src;
  src.symbols.assign(p.kernels.size(), "");
  src.args.assign(p.kernels.size(), {});
  src.part.assign(p.kernels.size(), -1);
  // Kernels with the same body (same structure, shapes and attributes; other buffers) share one
  // function: a 100k-op chain is a few functions called many times, not 100k to compile.
  std::unordered_map<std::string, size_t> by_body;
  std::vector<std::string> funcs;
  std::vector<std::vector<size_t>> users;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const Kernel& k = p.kernels[i];
    if (k.kind != KernelKind::Fused) continue;
    KernelEmitter em(g, k, opts.row_cache);
    auto [it, fresh] = by_body.try_emplace(em.emit(), funcs.size());
    if (fresh) {
      std::string f = it->first, name = fmt::format("brrr_f{}", funcs.size());
      for (size_t at = f.find("@FN@"); at != std::string::npos; at = f.find("@FN@", at))
        f.replace(at, 4, name);
      funcs.push_back(std::move(f));
      users.emplace_back();
    }
    users[it->second].push_back(i);
    src.symbols[i] = fmt::format("brrr_f{}", it->second);
    src.args[i] = em.args();
  }
  src.num_functions = funcs.size();
  if (funcs.empty()) return src;
  // A large module becomes several translation units compiled in parallel (each also pays for
  // the preamble, about 1 s with immintrin.h): one per part_bytes of functions, at most
  // max_parts, of about equal size.
  const std::string pre = preamble(opts);
  size_t total = 0;
  for (const auto& f : funcs) total += f.size();
  size_t parts = std::clamp<size_t>((total + opts.part_bytes - 1) / std::max<size_t>(opts.part_bytes, 1),
                                    1, size_t(std::max(opts.max_parts, 1)));
  // Function f goes to the part its midpoint falls in (whole functions; empty parts vanish).
  std::string part;
  std::vector<int> part_of(funcs.size());
  size_t before = 0, last = 0;
  for (size_t f = 0; f < funcs.size(); ++f) {
    size_t want = std::min(parts - 1, (before + funcs[f].size() / 2) * parts / std::max<size_t>(total, 1));
    before += funcs[f].size();
    if (!part.empty() && want != last) {
      src.parts.push_back(std::move(part));
      part.clear();
    }
    last = want;
    if (part.empty()) part = pre;
    part_of[f] = int(src.parts.size());
    part += funcs[f];  // no kernel names: models with the same functions share cache entries
  }
  src.parts.push_back(std::move(part));
  for (size_t f = 0; f < funcs.size(); ++f)
    for (size_t i : users[f]) src.part[i] = part_of[f];
  return src;
}

}  // namespace brrr::cpu
