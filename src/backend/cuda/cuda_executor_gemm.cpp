// GEMM steps: MatMul / Gemm library kernels on cuBLASLt (16-bit casts, bias and activation
// epilogues, helper kernels for what cuBLASLt cannot fuse), and runs of small-batch GEMMs as one
// thread-block-cluster kernel (gemm_chain.hpp), and 16-bit GEMMs of few rows on brrr's split-K
// cluster kernel (gemm_small_m.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "backend/cuda/cuda_executor_impl.hpp"
#include "backend/cuda/driver_api.hpp"
#include "backend/cuda/gemm_small_m.hpp"
#include "backend/cuda/nvrtc_compiler.hpp"
#include "core/env.hpp"
#include "core/parallel.hpp"

namespace brrr::cuda {

// Host copy of a float32 tensor in the GEMM's element type (optionally transposed, [K,N] <- [N,K]).
Tensor host_cast(const Tensor& src, DType to, bool transpose) {
  Tensor c = src.contiguous();
  // Already the type and layout the GEMM reads (a 16-bit model's MatMul weights): uploaded as
  // they are, not copied element by element (Llama-1B's 1.2 billion weights took seconds so).
  if (c.dtype() == to && !transpose) return c;
  const Shape& s = c.shape();
  Shape os = s;
  if (transpose) std::swap(os[os.size() - 2], os[os.size() - 1]);
  Tensor out = Tensor::empty(to, os);
  int64_t n = c.numel(), cols = s.empty() ? 1 : s.back(), rows = s.size() < 2 ? 1 : s[s.size() - 2];
  const DType from = c.dtype();
  if (from != DType::f32 && from != DType::bf16 && from != DType::f16)
    fail("GEMM operand of type {} cannot be cast", dtype_name(from));
  BRRR_ASSERT(to == DType::f32 || to == DType::bf16 || to == DType::f16, "bad cast target");
  const void* in = c.raw();
  void* o = out.raw();
  auto read = [&](int64_t i) -> float {
    return from == DType::f32 ? static_cast<const float*>(in)[i]
           : from == DType::bf16 ? float(static_cast<const bf16*>(in)[i])
                                 : float(static_cast<const f16*>(in)[i]);
  };
  auto write = [&](int64_t j, float v) {
    if (to == DType::f32) static_cast<float*>(o)[j] = v;
    else if (to == DType::bf16) static_cast<bf16*>(o)[j] = bf16(v);
    else static_cast<f16*>(o)[j] = f16(v);
  };
  // By bands on several threads: a large model's transposed or cast weights take seconds on one
  // (the dynamo export's tied lm_head of Llama-1B: 262 M elements, transposed here).
  const size_t bytes = c.nbytes() + out.nbytes();
  if (!transpose) {
    for_bands(n, bytes, size_t(8) << 20, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) write(i, read(i));
    });
    return out;
  }
  // out[b, q, r] = in[b, r, q], by 64 x 64 tiles so that reads and writes both stay in a few
  // cache lines; the bands are runs of 64 input rows. The same type is moved as raw bits (a
  // 16-bit model's tied lm_head: 262 M elements of Llama-1B, 2.9 s on 2 threads through floats
  // with 4 KiB pages faulted in, 0.42 s as bits in a page-faulted buffer, in a stand-alone test).
  constexpr int64_t T = 64;
  const int64_t batches = rows * cols != 0 ? n / (rows * cols) : 0, row_tiles = (rows + T - 1) / T;
  auto tiles = [&](auto move) {
    for_bands(batches * row_tiles, bytes, size_t(8) << 20, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t b = t / row_tiles, r0 = t % row_tiles * T, r1 = std::min(rows, r0 + T);
        const int64_t base = b * rows * cols;
        for (int64_t q0 = 0; q0 < cols; q0 += T)
          for (int64_t r = r0; r < r1; ++r)
            for (int64_t q = q0; q < std::min(cols, q0 + T); ++q)
              move(base + q * rows + r, base + r * cols + q);
      }
    });
  };
  if (from == to && dtype_size(to) == 2)
    tiles([u = static_cast<const uint16_t*>(in), w = static_cast<uint16_t*>(o)](int64_t j, int64_t i) {
      w[j] = u[i];
    });
  else if (from == to)
    tiles([u = static_cast<const uint32_t*>(in), w = static_cast<uint32_t*>(o)](int64_t j, int64_t i) {
      w[j] = u[i];
    });
  else
    tiles([&](int64_t j, int64_t i) { write(j, read(i)); });
  return out;
}

namespace {

// The multicast small-M GEMM's view of A [m, k] (16-bit, row-major at `a`): a 2D tensor map of
// boxes of 64 columns x `box_rows` rows, 128-byte swizzled, zeros past the edges
// (device/gemm_rows.cuh reads the tiles with that swizzle).
brrr_gmc_tmap encode_rows_a_map(DevPtr a, bool bf16, std::int64_t m, std::int64_t k, unsigned box_rows,
                                const std::string& what) {
  static_assert(sizeof(brrr_gmc_tmap) == sizeof(CUtensorMap), "brrr_gmc_tmap holds a CUtensorMap");
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(m)}, strides[1] = {cuuint64_t(k) * 2};
  const cuuint32_t box[2] = {BRRR_GMC_BK, box_rows}, elem[2] = {1, 1};
  BRRR_CU(driver().cuTensorMapEncodeTiled(&map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                                          2, reinterpret_cast<void*>(a), dims, strides, box, elem,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
          what + " (A's tensor map)");
  brrr_gmc_tmap t;
  std::memcpy(&t, &map, sizeof map);
  return t;
}

// Phase j of a row-phase GEMM (GemmStep::phases): rows j, j + p, ... of C from the first column
// whose address is 16-byte aligned in row j (all rows of the phase share it: their pitch p * n
// is a multiple of p), A's rows at pitch p * k, B read [N, K] from that column's row; offsets in
// elements. Empty when the phase has no rows or no columns.
struct PhaseGemm {
  GemmShape shape;
  int64_t a_off = 0, b_off = 0, c_off = 0;
};
std::optional<PhaseGemm> phase_gemm(const GemmStep& gm, int64_t j) {
  const int64_t p = gm.phases, m = gm.shape.m, n = gm.shape.n, k = gm.shape.k;
  const int64_t rows = (m - j + p - 1) / p, c0 = (p - j * n % p) % p;
  if (rows <= 0 || c0 >= n) return std::nullopt;
  PhaseGemm r;
  r.shape.m = rows, r.shape.n = n - c0, r.shape.k = k;
  r.shape.lda = p * k, r.shape.ldc = p * n, r.shape.b_nk = true, r.shape.align = 16;
  r.a_off = j * k, r.b_off = c0 * k, r.c_off = j * n + c0;
  return r;
}

// [rows, cols] -> [rows, cols_pad], the new columns zero (any element type).
Tensor pad_columns(const Tensor& t, int64_t cols_pad) {
  const Shape& s = t.shape();
  const int64_t cols = s.empty() ? 1 : s.back(), rows = cols ? t.numel() / cols : 0;
  Tensor out = Tensor::zeros(t.dtype(), {rows, cols_pad});
  const size_t eb = dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(out.raw());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + size_t(r * cols_pad) * eb, src + size_t(r * cols) * eb, size_t(cols) * eb);
  return out;
}

}  // namespace

// Why a Library kernel cannot run on cuBLASLt here ("" when it can); fills `gm` otherwise.
std::string CudaExecutor::Impl::gemm_plan(const plan::Kernel& k, GemmStep* gm) {
  const plan::GemmDesc* d = plan::desc_of<plan::GemmDesc>(k);
  if (!d) return g.nodes[size_t(k.nodes[0])].op + " has no CUDA library path";
  if (!d->why.empty()) return d->why;
  const int va = d->a, vb = d->b, vo = d->out;
  DType dt = g.value(va).dtype;
  if (g.value(vb).dtype != dt || g.value(vo).dtype != dt ||
      (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16))
    return "GEMM operand types are not all float32, bfloat16 or float16";
  if (d->trans_a) return "Gemm transA=1";
  gm->trans_b = d->trans_b;
  if (gm->trans_b && !g.value(vb).constant.defined()) return "Gemm transB=1 on a non-constant B";
  if (d->c >= 0 && !g.value(d->c).constant.defined()) return "Gemm C is not a constant bias row";
  gm->vbias = d->epi.bias;
  if (!d->strided_why.empty()) return d->strided_why;
  gm->shape = {d->M, d->N, d->K, d->batch};
  gm->data = dt;
  if (dt == DType::bf16) gm->prec = GemmPrecision::kBf16;
  else if (dt == DType::f16) gm->prec = GemmPrecision::kFp16;
  else if (d->tf32) gm->prec = GemmPrecision::kTf32;  // the plan's math (passes/precision.cpp)
  else if (d->math == DType::bf16) gm->prec = GemmPrecision::kBf16;
  else if (d->math == DType::f16) gm->prec = GemmPrecision::kFp16;
  else gm->prec = GemmPrecision::kFp32;
  const bool has_bias = gm->vbias >= 0;
  using Act = plan::Activation;
  const Act act = d->epi.act;
  if (act == Act::Relu) gm->epi = GemmEpilogue::kReluBias;
  else if (act == Act::GeluTanh) gm->epi = GemmEpilogue::kGeluBias;
  else if (act == Act::GeluErf || act == Act::None)
    gm->epi = has_bias ? GemmEpilogue::kBias : GemmEpilogue::kNone;
  else if ((act == Act::HardSwish || act == Act::HardSigmoid || act == Act::Clip) &&
           dt == DType::f32) {
    gm->epi = has_bias ? GemmEpilogue::kBias : GemmEpilogue::kNone;
    gm->post_act = act == Act::HardSwish ? 2 : act == Act::HardSigmoid ? 3 : 4;
    gm->post_alpha = d->epi.alpha;
    gm->post_beta = d->epi.beta;
  } else {
    return "activation " + d->epi.act_name;
  }
  gm->gelu_erf = act == Act::GeluErf;
  return "";
}

// Runs of two or more float32 GEMMs at batch <= 8 where each reads the previous one's output
// and multiplies by constant weights become one cluster kernel; returns their source.
std::string CudaExecutor::Impl::find_gemm_chains() {
  if (env::flag("BRRR_DISABLE_GEMM_CHAIN")) return "";
  if (dev.info().cc_major < 9) return "";  // thread-block clusters start with Hopper
  const int nk = int(plan.kernels.size());
  auto layer_ok = [&](int i) {
    if (steps[size_t(i)].type != Step::Library) return false;
    const GemmStep& gm = steps[size_t(i)].gemm();
    const plan::GemmDesc& d = *plan::desc_of<plan::GemmDesc>(plan.kernels[size_t(i)]);
    return gm.data == DType::f32 && gm.prec == GemmPrecision::kFp32 && gm.shape.batch == 1 &&
           !gm.gelu_erf && !gm.post_act && g.value(d.b).constant.defined() &&
           !g.value(d.a).constant.defined();
  };
  auto input_of = [&](int i) { return plan::desc_of<plan::GemmDesc>(plan.kernels[size_t(i)])->a; };
  auto gemm_at = [&](int i) -> const GemmStep& { return steps[size_t(i)].gemm(); };
  std::string text;
  for (int i = 0; i < nk;) {
    int j = i;
    while (layer_ok(i) && j + 1 < nk && layer_ok(j + 1) &&
           input_of(j + 1) == plan.kernels[size_t(j)].outputs.at(0) &&
           gemm_at(j + 1).shape.m == gemm_at(i).shape.m)
      ++j;
    if (j > i) {
      GemmChainSpec spec;
      spec.m = gemm_at(i).shape.m;
      for (int q = i; q <= j; ++q) {
        const GemmStep& gm = gemm_at(q);
        ChainLayer l;
        l.k = gm.shape.k;
        l.n = gm.shape.n;
        l.bias = gm.epi != GemmEpilogue::kNone;
        l.act = gm.epi == GemmEpilogue::kReluBias ? "relu" : gm.epi == GemmEpilogue::kGeluBias ? "gelu_tanh" : "";
        // An intermediate only the next layer reads stays in the cluster's shared memory.
        int y = plan.kernels[size_t(q)].outputs.at(0);
        l.store = q == j || std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end();
        for (int r = 0; r < nk && !l.store; ++r)
          if (r != q + 1)
            for (int v : plan.kernels[size_t(r)].inputs) l.store = l.store || v == y;
        spec.layers.push_back(l);
      }
      spec = gemm_chain_choose(spec);
      if (gemm_chain_unsupported(spec).empty()) {
        ChainRun c{i, j, fmt::format("brrr_chain{}", chains.size()), spec};
        text += gemm_chain_source(c.symbol, spec);
        steps[size_t(i)].type = Step::Chain;
        for (int q = i + 1; q <= j; ++q) steps[size_t(q)].type = Step::InChain;
        chains.push_back(c);
      }
    }
    i = j + 1;
  }
  return text;
}

// 16-bit GEMMs of few rows whose cuBLASLt tiles would leave most SMs idle run on the split-K
// cluster kernel (device/gemm_small_m.cuh); returns the module part of the kernels they use.
std::string CudaExecutor::Impl::find_small_m_gemms() {
  if (dev.info().cc_major < 9) return "";  // thread-block clusters start with Hopper
  std::set<std::string> used;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].type != Step::Library) continue;
    GemmStep& gm = steps[i].gemm();
    const bool b16 = gm.data == DType::bf16 && gm.prec == GemmPrecision::kBf16;
    const bool f16 = gm.data == DType::f16 && gm.prec == GemmPrecision::kFp16;
    if ((!b16 && !f16) || gm.shape.batch != 1 || gm.post_act) continue;
    SmallMGemm c = small_m_gemm_choice(gm.shape.m, gm.shape.n, gm.shape.k, dev.info().sm_count);
    if (!c.splits) continue;
    const unsigned smem_max = unsigned(dev.info().max_shared_per_block_optin);
    const int min_stages = c.cluster ? 3 : 2;
    while (c.stages > min_stages && small_m_gemm_smem_bytes(c) > smem_max) --c.stages;  // BRRR_SMALL_M_STAGES past the SM
    if (small_m_gemm_smem_bytes(c) > smem_max) continue;
    const plan::GemmDesc* d = plan::desc_of<plan::GemmDesc>(plan.kernels[i]);
    gm.small = c;
    gm.small_smem = c.one_per_sm ? smem_max : small_m_gemm_smem_bytes(c);
    // An erf GELU (also the one the plan maps to cuBLASLt's tanh epilogue) runs exactly here.
    gm.small_act = gm.gelu_erf || (d && d->epi.act_name == "gelu_erf_as_tanh") ? 3
                   : gm.epi == GemmEpilogue::kReluBias                        ? 1
                   : gm.epi == GemmEpilogue::kGeluBias                        ? 2
                                                                              : 0;
    used.insert(small_m_gemm_instance(b16 ? "bf16" : "f16", c));
  }
  return small_m_gemm_source(used);
}

// Device operands of one GEMM: activations in place (or cast per run), constants cast (and B
// transposed) once here, the bias, and the helper kernels it needs.
void CudaExecutor::Impl::setup_gemm(const plan::Kernel& k, GemmStep& gm) {
  const plan::GemmDesc& d = *plan::desc_of<plan::GemmDesc>(k);
  const Node& n = g.nodes[size_t(k.nodes[0])];
  const int va = d.a, vb = d.b, vo = k.outputs.at(0), vbias = gm.vbias;
  DType et = gm.prec == GemmPrecision::kBf16 ? DType::bf16
             : gm.prec == GemmPrecision::kFp16 ? DType::f16 : DType::f32;
  bool cast = et != gm.data;  // float32 graph, 16-bit GEMM
  gm.na = shape_numel(g.value(va).shape);
  gm.nb = shape_numel(g.value(vb).shape);
  gm.nc = shape_numel(g.value(vo).shape);
  const std::string who = n.name.empty() ? k.name : n.name;
  const Step& st = steps[size_t(&k - plan.kernels.data())];
  // Output rows that are no whole 16 bytes (BRRR_GEMM_PAD_N; a constant B, no cast, one batch):
  // 1 computes padded rows and copies the real columns out, 2 reads B at a padded pitch and
  // writes C in place at its own, 3 writes C in place in row phases (GemmStep::phases; no
  // epilogue, K a multiple of the phase count, else as 1; measured slower than 1 on GPT-2's
  // lm_head, 2048 x 50257 x 768 bf16 on an H100: the model 2.122 against 1.331 ms).
  const int64_t eb = int64_t(dtype_size(et)), align = 16 / eb;
  const int64_t pad_n = env::integer("BRRR_GEMM_PAD_N");
  int64_t b_pitch = 0;  // > 0: B's columns padded to this
  const bool odd_rows = pad_n >= 1 && st.type == Step::Library && !cast &&
                        g.value(vb).constant.defined() && gm.shape.batch == 1 &&
                        gm.shape.n % align != 0;
  if (odd_rows && pad_n == 3 && gm.epi == GemmEpilogue::kNone && gm.shape.k % align == 0) {
    gm.phases = align;
  } else if (odd_rows) {
    b_pitch = (gm.shape.n + align - 1) / align * align;
    if (pad_n != 2) {
      gm.n_real = gm.shape.n;
      gm.shape.n = b_pitch;
    } else {
      gm.shape.ldb = b_pitch;
    }
  }
  if (g.value(va).constant.defined()) gm.a = upload(host_cast(g.value(va).constant, et, false), who + " A");
  else if (cast) { gm.a_src = slot[size_t(va)]; gm.a = alloc(size_t(gm.na) * 2, who + " A cast"); }
  else gm.a = slot[size_t(va)];
  auto weight = [&](const Tensor& w, const std::string& what) {
    gm.w_bytes = w.nbytes();
    return upload(w, what);
  };
  if (gm.phases)
    gm.b = weight(host_cast(g.value(vb).constant, et, !gm.trans_b), who + " W ([N, K])");
  else if (g.value(vb).constant.defined() && b_pitch)
    gm.b = weight(pad_columns(host_cast(g.value(vb).constant, et, gm.trans_b), b_pitch), who + " W padded");
  else if (g.value(vb).constant.defined()) gm.b = weight(host_cast(g.value(vb).constant, et, gm.trans_b), who + " W");
  else if (cast) { gm.b_src = slot[size_t(vb)]; gm.b = alloc(size_t(gm.nb) * 2, who + " B cast"); }
  else gm.b = slot[size_t(vb)];
  if (cast) { gm.c_dst = slot[size_t(vo)]; gm.c = alloc(size_t(gm.nc) * 2, who + " C cast"); }
  else if (gm.n_real) {
    gm.c = alloc(size_t(gm.shape.m * gm.shape.n * eb), who + " C padded");
    // A model output that no kernel reads (and no helper kernel rewrites in place) is left
    // padded by the plan: the copy into its dense buffer runs when the output is taken.
    const bool read = std::any_of(plan.kernels.begin(), plan.kernels.end(), [&](const plan::Kernel& q) {
      return std::find(q.inputs.begin(), q.inputs.end(), vo) != q.inputs.end();
    });
    gm.pitched_out = env::integer("BRRR_GEMM_PAD_OUT") == 1 && !read && !gm.gelu_erf && !gm.post_act &&
                     std::find(g.outputs.begin(), g.outputs.end(), vo) != g.outputs.end();
    gm.c_out = slot[size_t(vo)];
    if (gm.pitched_out) padded_out[size_t(vo)] = int(&k - plan.kernels.data());
  } else gm.c = slot[size_t(vo)];
  if (gm.epi != GemmEpilogue::kNone) {
    Tensor bias = vbias >= 0 ? host_cast(g.value(vbias).constant, et, false)
                             : Tensor::zeros(et, {gm.shape.n});
    if (gm.n_real && vbias >= 0) bias = pad_columns(bias.reshape({1, gm.n_real}), gm.shape.n);
    gm.bias = upload(bias, who + (vbias >= 0 ? " bias" : " zero bias"));
  }
  if (gm.n_real) gm.unpad_fn = module->function(eb == 2 ? "brrr_unpad_rows_16" : "brrr_unpad_rows_32");
  if (gm.phases)
    gm.edge_fn = module->function(fmt::format(
        "brrr_gemm_edge_cols_{}", et == DType::bf16 ? "bf16" : et == DType::f16 ? "f16" : "f32"));
  if (gm.post_act) gm.post_fn = module->function("brrr_conv_epilogue");
  const char* t16 = et == DType::bf16 ? "bf16" : "f16";
  if (cast) {
    gm.cvt_in = module->function(fmt::format("brrr_cvt_f32_{}", t16));
    gm.cvt_out = module->function(fmt::format("brrr_cvt_{}_f32", t16));
  }
  if (gm.gelu_erf) {
    // In place on the graph's C (after the cast back, when there is one).
    DType gt = gm.data;
    gm.gelu_fn = module->function(fmt::format(
        "brrr_gelu_erf_{}", gt == DType::bf16 ? "bf16" : gt == DType::f16 ? "f16" : "f32"));
  }
  // The small-M kernel reads 16-byte chunks: operands off that alignment go to cuBLASLt.
  if (gm.small.splits &&
      ((gm.a | gm.b | gm.c) % 16 != 0 || gm.shape.ldb || gm.shape.ldc || gm.n_real || gm.phases))
    gm.small.splits = 0;
  if (gm.small.splits) {
    gm.gelu_erf = false;  // computed in the kernel
    const SmallMGemm& c = gm.small;
    gm.small_fn = module->function(small_m_gemm_symbol(et == DType::bf16 ? "bf16" : "f16", c));
    gm.small_fn.set_max_dynamic_shared(gm.small_smem);
    const std::array<unsigned, 3> grid = small_m_gemm_grid(c, gm.shape.m, gm.shape.n);
    gm.small_grid = {grid[0], grid[1], grid[2]};
    gm.small_max_clusters =
        gm.small_fn.max_active_clusters(gm.small_grid, {small_m_gemm_threads(c), 1, 1}, gm.small_smem);
    if (c.cluster) {
      brrr_gmc_args& r = gm.rows_args;
      r.a_map = encode_rows_a_map(gm.a, et == DType::bf16, gm.shape.m, gm.shape.k,
                                  unsigned(BRRR_GMC_BM / c.cluster), st.what);
      r.b = reinterpret_cast<const void*>(gm.b);
      r.c = reinterpret_cast<void*>(gm.c);
      r.bias = reinterpret_cast<const void*>(gm.bias);
      r.ws = c.splits > 1 ? reinterpret_cast<float*>(small_ws) : nullptr;
      r.counters = c.splits > 1 ? reinterpret_cast<unsigned*>(small_counters) : nullptr;
      r.m = gm.shape.m, r.n = gm.shape.n, r.k = gm.shape.k;
      r.act = gm.small_act;
      r.b_const = gm.w_bytes ? 1 : 0;
      gm.small_argp[0] = &gm.rows_args;
    } else {
      gm.small_args.a = reinterpret_cast<const void*>(gm.a);
      gm.small_args.b = reinterpret_cast<const void*>(gm.b);
      gm.small_args.c = reinterpret_cast<void*>(gm.c);
      gm.small_args.bias = reinterpret_cast<const void*>(gm.bias);
      gm.small_args.m = gm.shape.m;
      gm.small_args.n = gm.shape.n;
      gm.small_args.k = gm.shape.k;
      gm.small_args.act = gm.small_act;
      gm.small_args.b_const = gm.w_bytes ? 1 : 0;  // the weights uploaded for this GEMM
      gm.small_argp[0] = &gm.small_args;
    }
  }
  // cuBLASLt's algorithm is chosen (timed, or read from the tuning cache) here at build, on the
  // GEMM's own buffers, not at the first run. Chain layers never reach cuBLASLt.
  if (st.type == Step::Library && !gm.small.splits) {
    if (!lt.tuning())
      lt.enable_tuning(dev.info(), cache_dir());
    for (int64_t j = 0; j < gm.phases; ++j)
      if (std::optional<PhaseGemm> ph = phase_gemm(gm, j))
        lt.prepare(gm.prec, gm.epi, ph->shape, gm.a + ph->a_off * eb, gm.b + ph->b_off * eb,
                   gm.c + ph->c_off * eb, 0, stream, st.what);
    if (!gm.phases) lt.prepare(gm.prec, gm.epi, gm.shape, gm.a, gm.b, gm.c, gm.bias, stream, st.what);
  }
}

// Each chain's cluster kernel, at its first step. Arguments: x, then packed W, bias, y per layer.
void CudaExecutor::Impl::setup_chains() {
  for (const ChainRun& c : chains) {
    GemmStep& head = steps[size_t(c.first)].gemm();
    LaunchStep& s = head.chain;
    s.fn = module->function(c.symbol);
    s.grid = {unsigned(c.spec.ctas), 1, 1};
    if (c.spec.ctas > 8) s.fn.allow_large_clusters();
    s.block = {unsigned(gemm_chain_threads(c.spec)), 1, 1};
    s.argv.push_back(head.a);
    for (int j = c.first; j <= c.last; ++j) {
      const plan::Kernel& k = plan.kernels[size_t(j)];
      const GemmStep& gm = steps[size_t(j)].gemm();
      const int vb = plan::desc_of<plan::GemmDesc>(k)->b;
      Tensor w = host_cast(g.value(vb).constant, DType::f32, gm.trans_b);
      std::vector<float> packed = gemm_chain_pack(c.spec, size_t(j - c.first), w.data<float>());
      Tensor pt = Tensor::empty(DType::f32, {int64_t(packed.size())});
      std::copy(packed.begin(), packed.end(), pt.data<float>());
      s.argv.insert(s.argv.end(), {upload(pt, k.name + " W (chain layout)"), gm.bias, gm.c});
    }
    for (DevPtr& p : s.argv) s.argp.push_back(&p);
  }
}

void CudaExecutor::Impl::unpad(GemmStep& m, DevPtr dst, const Stream& s, bool dependent) {
  DevPtr src = m.c;
  int64_t rows = m.shape.m, width = m.n_real, pitch = m.shape.n;
  void* a[] = {&src, &dst, &rows, &width, &pitch};
  launch(m.unpad_fn, helper_grid(rows * width / 8, 256), {256, 1, 1}, 0, s, a, dependent);
}

void CudaExecutor::Impl::exec_gemm(GemmStep& m, const std::string& what) {
  if (m.a_src) launch_helper(m.cvt_in, {m.a_src, m.a}, m.na);
  if (m.b_src) launch_helper(m.cvt_in, {m.b_src, m.b}, m.nb);
  if (m.small.splits)
    launch_own(m.small_fn, m.small_grid, {small_m_gemm_threads(m.small), 1, 1},
               m.small_smem, m.small_argp);
  else if (m.phases) {  // the odd-pitch C in row phases, then the columns they leave
    const DevPtr eb = element_bytes(m.prec);
    for (int64_t j = 0; j < m.phases; ++j)
      if (std::optional<PhaseGemm> ph = phase_gemm(m, j))
        lt.run(m.prec, m.epi, ph->shape, m.a + ph->a_off * eb, m.b + ph->b_off * eb,
               m.c + ph->c_off * eb, 0, stream, what);
    int p = int(m.phases);
    void* a[] = {&m.a, &m.b, &m.c, &m.shape.m, &m.shape.n, &m.shape.k, &p};
    launch(m.edge_fn, {unsigned(m.shape.m), 1, 1}, {unsigned(32 * m.phases), 1, 1}, 0, stream, a);
  } else lt.run(m.prec, m.epi, m.shape, m.a, m.b, m.c, m.bias, stream, what);
  if (m.c_dst) launch_helper(m.cvt_out, {m.c, m.c_dst}, m.nc);
  if (m.n_real && !m.pitched_out) unpad(m, m.c_out, stream, pdl);
  const DevPtr out = m.c_dst ? m.c_dst : m.c_out ? m.c_out : m.c;
  if (m.gelu_erf) launch_helper(m.gelu_fn, {out}, m.nc);
  if (m.post_act) {  // brrr_conv_epilogue(y, bias, sum, hw, c, act, alpha, beta, n)
    DevPtr y = out, none = 0;
    int64_t one = 1, n = m.nc;
    void* a[] = {&y, &none, &none, &one, &one, &m.post_act, &m.post_alpha, &m.post_beta, &n};
    launch(m.post_fn, helper_grid(n, 256), {256, 1, 1}, 0, stream, a);
  }
}

std::string CudaExecutor::Impl::gemm_summary(size_t i) const {
  const Step& st = steps[i];
  const GemmStep& gm = st.gemm();
  if (st.type == Step::Chain || st.type == Step::InChain) {
    int ctas = 0, threads = 0;
    for (const auto& c : chains)
      if (c.first <= int(i) && int(i) <= c.last) ctas = c.spec.ctas, threads = gemm_chain_threads(c.spec);
    return fmt::format("  {:<24} GEMM chain{} (one cluster kernel: {} CTAs x {} threads) m{} n{} k{}{}\n",
                       plan.kernels[i].name, st.type == Step::Chain ? "" : " (cont.)", ctas, threads,
                       gm.shape.m, gm.shape.n, gm.shape.k,
                       gm.epi == GemmEpilogue::kReluBias   ? " +bias+ReLU"
                       : gm.epi == GemmEpilogue::kGeluBias ? " +bias+GELU"
                       : gm.epi == GemmEpilogue::kBias     ? " +bias"
                                                           : "");
  }
  if (gm.small.splits) {
    static const char* acts[] = {"", " +ReLU", " +GELU (tanh)", " +GELU (erf)"};
    if (gm.small.cluster) {
      const unsigned clusters = gm.small_grid.x / unsigned(gm.small.cluster) * gm.small_grid.y * gm.small_grid.z;
      return fmt::format("  {:<24} small-M GEMM {} m{} n{} k{}{}{}: A multicast over clusters of {} "
                         "{}-column tiles, K split {} way{}{}, {} stages (grid {}x{}x{}; {} clusters, "
                         "{} fit at once{})\n",
                         plan.kernels[i].name, to_string(gm.prec), gm.shape.m, gm.shape.n, gm.shape.k,
                         gm.bias ? " +bias" : "", acts[gm.small_act], gm.small.cluster, gm.small.bn,
                         gm.small.splits, gm.small.splits > 1 ? "s" : "",
                         gm.small.splits > 1 ? " (a workspace sum)" : "", gm.small.stages,
                         gm.small_grid.x, gm.small_grid.y, gm.small_grid.z, clusters,
                         gm.small_max_clusters,
                         int(clusters) > gm.small_max_clusters ? ": runs in waves" : "");
    }
    const unsigned clusters = gm.small_grid.y * gm.small_grid.z;
    return fmt::format("  {:<24} small-M GEMM {} m{} n{} k{}{}{}: split-K over a cluster of {}, "
                       "{}-column tiles, {} stages{} (grid {}x{}x{}; {} clusters, {} fit at once{})\n",
                       plan.kernels[i].name, to_string(gm.prec), gm.shape.m, gm.shape.n,
                       gm.shape.k, gm.bias ? " +bias" : "", acts[gm.small_act], gm.small.splits,
                       gm.small.bn, gm.small.stages, gm.small.one_per_sm ? ", one CTA per SM" : "",
                       gm.small_grid.x, gm.small_grid.y, gm.small_grid.z, clusters,
                       gm.small_max_clusters,
                       int(clusters) > gm.small_max_clusters ? ": runs in waves" : "");
  }
  const std::string algo = lt.describe(gm.prec, gm.epi, gm.shape);
  const plan::GemmDesc* d = plan::desc_of<plan::GemmDesc>(plan.kernels[i]);
  const bool erf_as_tanh = d && d->epi.act_name == "gelu_erf_as_tanh";
  return fmt::format("  {:<24} cuBLASLt {} {} m{} n{}{} k{} batch {}{}{}\n", plan.kernels[i].name,
                     to_string(gm.prec), to_string(gm.epi), gm.shape.m, gm.shape.n,
                     gm.phases     ? fmt::format(" (at its odd pitch in {} row phases)", gm.phases)
                     : gm.n_real   ? fmt::format(" (padded from {}{})", gm.n_real,
                                                     gm.pitched_out ? "; the real columns copied out with the outputs" : "")
                     : gm.shape.ldb ? fmt::format(" (B rows padded to {})", gm.shape.ldb)
                                    : "",
                     gm.shape.k,
                     gm.shape.batch,
                     gm.gelu_erf    ? " + erf GELU kernel"
                     : gm.post_act  ? " + activation kernel"
                     : erf_as_tanh  ? fmt::format(" (GELU (erf) as cuBLASLt's tanh-form epilogue at {})",
                                                  gm.data == DType::bf16 ? "bf16" : "fp16")
                                    : "",
                     algo.empty() ? "" : ": " + algo);
}

}  // namespace brrr::cuda
