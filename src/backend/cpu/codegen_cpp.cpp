// Emits plain C++ loops that GCC vectorizes: rows or chunks split over brrr's thread pool (through
// the brrr_par table the caller passes; the module links no OpenMP), `omp simd` over the
// contiguous inner loop. libm functions are declared `omp declare simd`, so vectorized
// calls go to SLEEF's GNU-ABI vector functions (_ZGVdN8v_expf...) instead of scalar libm.
#include "backend/cpu/codegen_cpp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace brrr::cpu {

using plan::Expr;
using plan::Kernel;
using plan::KernelKind;
using plan::ReduceKind;

namespace {

// scalar_ops.h is pasted into each source so the generated file stands alone and its hash covers
// the scalar math it uses.
std::string scalar_ops_text() {
  static const std::string text = [] {
    std::ifstream f(BRRR_INCLUDE_DIR "/brrr/scalar_ops.h");
    BRRR_CHECK(f.good(), "cannot read {} (needed by the code generator)",
               BRRR_INCLUDE_DIR "/brrr/scalar_ops.h");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }();
  return text;
}

const char* kVectorMath[] = {"expf",  "logf",  "cosf",  "sinf",  "tanhf", "erff",
                             "exp2f", "log2f", "tanf",  "atanf", "expm1f", "log1pf"};

// C literals and {k} -> eN substitution are shared by both emitters (plan/kernel_ir.hpp).
using plan::float_lit;
using plan::subst;

class KernelEmitter {
 public:
  KernelEmitter(const Graph& g, const Kernel& k, std::string sym) : g_(g), k_(k), sym_(sym) {}

  // The kernel is a range function over units (blocks of a flat map, or rows) and an entry point
  // that hands the units to brrr's thread pool (brrr_par) or runs them all on the caller.
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
      units = k_.rows();
      parallel = k_.rows() * k_.cols() > 32768 && k_.rows() > 1;
    }
    out_ += fmt::format("static void {}_part(void* arg, int64_t u0, int64_t u1) {{\n", sym_);
    out_ += "  void* const* slots = (void* const*)arg;\n";
    for (int v : k_.inputs)
      out_ += fmt::format("  const float* __restrict b{0} = (const float*)slots[{0}];\n", v);
    for (int v : k_.outputs)
      out_ += fmt::format("  float* __restrict b{0} = (float*)slots[{0}];\n", v);
    if (is_flat)
      emit_flat();
    else emit_rows();
    out_ += "}\n\n";
    out_ += fmt::format("extern \"C\" void {}(void* const* slots, const brrr_par* par) {{\n", sym_);
    if (parallel)
      out_ += fmt::format("  par->run(par->pool, {}, {}_part, (void*)slots);\n", units, sym_);
    else
      out_ += fmt::format("  (void)par;\n  {}_part((void*)slots, 0, {});\n", sym_, units);
    out_ += "}\n\n";
    return out_;
  }

 private:
  const Graph& g_;
  const Kernel& k_;
  std::string sym_;
  std::string out_;

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

  std::vector<int> closure(const std::vector<int>& targets) const {
    return plan::level0_closure(k_, targets);
  }

  std::string value_of(int id, const std::string& idx) const {
    const Expr& e = k_.exprs[size_t(id)];
    switch (e.kind) {
      case Expr::Const: return float_lit(e.constant);
      case Expr::Load: return fmt::format("b{}[{}]", e.value, idx);
      case Expr::Pointwise: return subst(e.code, e.args);
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
    const bool stream = n >= kStreamMinElems;
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
                  : fmt::format("{}  b{}[i] = e{};\n", ind, st.value, st.expr);
      }
      return b;
    };
    std::string from = "lo";
    if (stream) {
      std::string aligned;
      for (const auto& st : k_.stores)
        aligned += fmt::format("{}brrr_stream_ok(b{} + lo)", aligned.empty() ? "" : " && ", st.value);
      out_ += "    int64_t s0 = lo;\n";
      out_ += fmt::format("    if ({}) {{\n", aligned);
      out_ += "      for (; s0 + 16 <= hi; s0 += 16) {\n";
      for (size_t j = 0; j < k_.stores.size(); ++j)
        out_ += fmt::format("        float t{}[16] __attribute__((aligned(64)));\n", j);
      out_ += "#pragma omp simd\n        for (int64_t i = s0; i < s0 + 16; ++i) {\n";
      out_ += body("        ", true) + "        }\n";
      for (size_t j = 0; j < k_.stores.size(); ++j)
        out_ += fmt::format("        brrr_stream16(b{} + s0, t{});\n", k_.stores[j].value, j);
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
    int64_t R = k_.rows(), C = k_.cols();
    int rank = int(S.size());
    out_ += fmt::format("  const int64_t C = {};  // rows u0..u1 of {}\n", C, R);
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
    std::vector<int> elem_targets;
    for (const auto& s : k_.stores)
      if (g_.value(s.value).shape == S) elem_targets.push_back(s.expr);
    if (!elem_targets.empty()) {
      out_ += "#pragma omp simd\n    for (int64_t c = 0; c < C; ++c) {\n";
      out_ += elem_stmts(closure(elem_targets), "      ");
      for (const auto& s : k_.stores)
        if (g_.value(s.value).shape == S)
          out_ += fmt::format("      b{}[r * C + c] = e{};\n", s.value, s.expr);
      out_ += "    }\n";
    }
    for (const auto& s : k_.stores)
      if (g_.value(s.value).shape != S) {
        BRRR_ASSERT(shape_numel(g_.value(s.value).shape) == R, "row store of a non-row value");
        out_ += fmt::format("    b{}[r] = e{};\n", s.value, s.expr);
      }
    out_ += "  }\n";
  }

  void emit_reduce(int id) {
    const Expr& e = k_.exprs[size_t(id)];
    bool mx = e.reduce == ReduceKind::Max;
    out_ += fmt::format("    float e{} = {};\n", id, mx ? "-INFINITY" : "0.0f");
    out_ += fmt::format("#pragma omp simd reduction({}:e{})\n", mx ? "max" : "+", id);
    out_ += "    for (int64_t c = 0; c < C; ++c) {\n";
    out_ += elem_stmts(closure({e.args[0]}), "      ");
    int a = e.args[0];
    if (mx) out_ += fmt::format("      e{0} = e{1} > e{0} ? e{1} : e{0};\n", id, a);
    else out_ += fmt::format("      e{} += e{};\n", id, a);
    out_ += "    }\n";
    if (e.reduce == ReduceKind::Mean) out_ += fmt::format("    e{} /= (float)C;\n", id);
  }
};

}  // namespace

CppSource generate_cpp(const Graph& g, const plan::Plan& p, const CodegenOptions& opts) {
  CppSource src;
  std::string& t = src.text;
  t += "// Generated by brrr: one function per fused kernel. Do not edit.\n";
  t += "#include <math.h>\n#include <stdint.h>\n#include <immintrin.h>\n\n";
  // Mirrors backend/cpu/thread_pool.hpp: run(pool, n, fn, arg) covers [0, n) with fn(arg, lo, hi).
  t += "typedef void (*brrr_chunk_fn)(void* arg, int64_t lo, int64_t hi);\n";
  t += "struct brrr_par {\n  void (*run)(void* pool, int64_t n, brrr_chunk_fn fn, void* arg);\n"
       "  void* pool;\n};\n\n";
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
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const Kernel& k = p.kernels[i];
    if (k.kind != KernelKind::Fused) {
      src.symbols.push_back("");
      continue;
    }
    std::string sym = fmt::format("brrr_k{}", i);
    t += KernelEmitter(g, k, sym).emit();
    src.symbols.push_back(sym);
  }
  return src;
}

}  // namespace brrr::cpu
