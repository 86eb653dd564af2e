// The fused attention step (plan::AttentionDesc, found by plan/attention.cpp). 16-bit attention
// with an additive or causal mask (or none) runs on cuDNN's SDPA engines where cuDNN takes it
// (cudnn_attention.hpp) and times faster than the flash kernel below on the geometry
// (BRRR_ATTN_CUDNN: 0 never, 2 always). On the H200 (`brrr bench --backend cuda attn_*`, one
// graph replay each): BERT-base b32 43.4 -> 15.2 us, ViT-B/16 b32 85.8 -> 28.6 us, GPT-2 b16
// 17.4 -> 12.5 us. Otherwise one launch of
// device/attention.cuh's kernel, reading Q, K, V and the masks through the strides the
// descriptor gives and writing the merged heads in place: on Tensor Cores for 16-bit data with a
// head dim of 64 or 128, through the flash kernel (brrr_attention_flash<D>_<type>, 1 to 4 warps
// a block) where Q, K, V and out have contiguous rows at 16-byte aligned addresses (every
// export's layout), else through the strided one (brrr_attention_mma<D>_<type>); other types
// and dims on CUDA cores (brrr_attention_<type>; always with BRRR_ATTENTION_CUDA_CORES=1).
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "backend/cuda/cuda_executor_impl.hpp"
#include "backend/cuda/cuda_graph.hpp"
#include "core/env.hpp"

namespace brrr::cuda {

namespace {

constexpr int kRowsPerBlock = 8;      // BRRR_ATTN_BQ
constexpr int kThreads = 128;         // BRRR_ATTN_WARPS warps
constexpr int kMmaRowsPerBlock = 32;  // BRRR_ATTN_MMA_BQ
constexpr int kMmaThreads = 64;       // BRRR_ATTN_MMA_WARPS warps
constexpr int64_t kMaxHeadDim = 128;  // BRRR_ATTN_MAXD

void copy4(long long* to, const std::array<int64_t, 4>& from) {
  for (size_t i = 0; i < 4; ++i) to[i] = from[i];
}

// The flash kernel copies 16-byte pieces of Q, K and V rows and stores pairs of out's: every
// operand's innermost stride 1, the others whole 16-byte (out: 4-byte) multiples.
bool flash_strides(const brrr_attn_args& x) {
  auto rows = [](const long long* s, long long unit) {
    return s[3] == 1 && s[0] % unit == 0 && s[1] % unit == 0 && s[2] % unit == 0;
  };
  return rows(x.qs, 8) && rows(x.ks, 8) && rows(x.vs, 8) && rows(x.os, 2);
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Warps (16 query rows each) per flash block: 4 share each K/V tile when the grid still has two
// blocks per SM; fewer where it would not (BERT-base at batch 1: 12 heads x 128 rows are 96 warps,
// as 96 one-warp blocks rather than 24 four-warp ones on 132 SMs).
int flash_warps(const plan::AttentionDesc& d, int sms) {
  if (const int64_t w = env::integer("BRRR_ATTN_WARPS"); w > 0) {
    if (w == 3) fail("BRRR_ATTN_WARPS=3: the flash attention kernel takes 1, 2 or 4 warps a block");
    return int(w);
  }
  for (int w : {4, 2}) {
    const int64_t blocks = d.batch * d.heads * ((d.seq_q + 16 * w - 1) / (16 * w));
    if (blocks >= 2 * int64_t(sms)) return w;
  }
  return 1;
}

// Key splits per 16 query rows (BRRR_ATTN_KSPLIT=0 turns them off): 2 where one-warp blocks would
// not fill the SMs twice over and the keys span more than one tile, so two warps each take half
// of the tiles (device/attention.cuh); else 1.
int flash_ksplit(const plan::AttentionDesc& d, int warps, int sms) {
  if (warps != 1 || env::integer("BRRR_ATTN_KSPLIT") == 0) return 1;
  const int64_t tile = 32;  // the kernel's BK
  const int64_t blocks = d.batch * d.heads * ((d.seq_q + 15) / 16);
  return blocks < 2 * int64_t(sms) && d.seq_k > tile ? 2 : 1;
}

}  // namespace

std::string CudaExecutor::Impl::attention_plan(const plan::Kernel& k, AttentionStep* a) {
  const plan::AttentionDesc& d = *plan::desc_of<plan::AttentionDesc>(k);
  if (d.head_dim < 1 || d.head_dim > kMaxHeadDim)
    return fmt::format("attention head dim {} (the kernel takes 1 to {})", d.head_dim, kMaxHeadDim);
  if (d.heads < 1 || d.kv_heads < 1 || d.heads % d.kv_heads != 0)
    return fmt::format("{} heads over {} key/value heads", d.heads, d.kv_heads);
  if (d.batch > 65535 || d.heads > 65535)
    return fmt::format("attention grid of batch {} and {} heads (at most 65535 each)", d.batch, d.heads);
  if (d.dtype != DType::f32 && d.dtype != DType::bf16 && d.dtype != DType::f16)
    return fmt::format("attention on {}", dtype_name(d.dtype));
  a->vq = d.q, a->vk = d.k, a->vv = d.v, a->vmask = d.mask, a->vkeep = d.keep, a->vout = d.out;
  if (d.q_offset < 0 || d.k_offset < 0 || d.v_offset < 0)
    return fmt::format("attention operand offsets {}/{}/{}", d.q_offset, d.k_offset, d.v_offset);
  a->q_offset = d.q_offset, a->k_offset = d.k_offset, a->v_offset = d.v_offset;
  a->dt = d.dtype;
  brrr_attn_args& x = a->args;
  copy4(x.qs, d.q_strides);
  copy4(x.ks, d.k_strides);
  copy4(x.vs, d.v_strides);
  copy4(x.os, d.out_strides);
  copy4(x.ms, d.mask_strides);
  copy4(x.bs, d.keep_strides);
  x.heads = d.heads;
  x.group = d.heads / d.kv_heads;
  x.seq_q = d.seq_q;
  x.seq_k = d.seq_k;
  x.head_dim = d.head_dim;
  x.scale = d.scale;
  x.fill = d.fill;
  x.keep_when = d.keep_when ? 1 : 0;
  x.causal = d.causal ? 1 : 0;
  x.zero_empty_rows = d.zero_empty_rows ? 1 : 0;
  x.fast_tiles = env::integer("BRRR_ATTN_FAST_TILES") == 1 ? 1 : 0;
  x.full_tiles = env::integer("BRRR_ATTN_FULL_TILES") == 1 ? 1 : 0;
  a->mma =
      attention_on_tensor_cores(d.dtype, d.head_dim) && !env::flag("BRRR_ATTENTION_CUDA_CORES");
  // (cp.async and ldmatrix need sm_80; the buffers' alignment is checked again at setup)
  const DeviceInfo& info = dev.info();
  const int sms = info.sm_count > 0 ? info.sm_count : 132;
  a->flash_warps =
      a->mma && info.cc_major >= 8 && flash_strides(x) ? flash_warps(d, sms) : 0;
  x.ksplit = a->flash_warps ? flash_ksplit(d, a->flash_warps, sms) : 1;
  a->flash_warps *= x.ksplit;
  set_attention_grid(a, unsigned(d.batch));
  if ((d.dtype == DType::bf16 || d.dtype == DType::f16) && env::integer("BRRR_ATTN_CUDNN") >= 1 &&
      !env::flag("BRRR_ATTENTION_CUDA_CORES"))
    plan_cudnn_attention(d, a);
  return "";
}

// cuDNN's SDPA for a 16-bit attention with an additive or causal mask (or none), one graph per
// geometry. Left to the flash kernel (a->sdpa_why says why): bool masks, rows that may be wholly
// masked (the exporters' NaN-to-0 guard), causal with unequal lengths, and what cuDNN refuses.
void CudaExecutor::Impl::plan_cudnn_attention(const plan::AttentionDesc& d, AttentionStep* a) {
  if (d.keep >= 0) {
    a->sdpa_why = "a bool mask";
    return;
  }
  if (d.zero_empty_rows && d.mask >= 0) {
    a->sdpa_why = "masked rows set to 0";
    return;
  }
  if (!open_dnn()) {
    a->sdpa_why = dnn_why;
    return;
  }
  SdpaGeometry g;
  g.batch = d.batch, g.heads = d.heads, g.kv_heads = d.kv_heads;
  g.seq_q = d.seq_q, g.seq_k = d.seq_k, g.head_dim = d.head_dim;
  g.q = d.q_strides, g.k = d.k_strides, g.v = d.v_strides, g.out = d.out_strides;
  g.has_bias = d.mask >= 0;
  if (g.has_bias) g.bias = d.mask_strides;
  g.causal = d.causal;
  g.scale = d.scale;
  g.dt = d.dtype;
  g.sm_version = dev.info().cc_major * 10 + dev.info().cc_minor;
  g.sm_count = dev.info().sm_count;
  g.device = dev.info().ordinal;
  const std::string key = sdpa_geometry_key(g);
  auto it = sdpa_graphs.find(key);
  if (it == sdpa_graphs.end()) {
    std::string why;
    std::shared_ptr<CudnnSdpa> made = CudnnSdpa::make(*dnn, g, cache_dir(), &why);
    it = sdpa_graphs.emplace(key, std::move(made)).first;
    if (!it->second) sdpa_whys[key] = why;
  }
  a->sdpa = it->second;
  a->sdpa_key = key;
  if (!a->sdpa) a->sdpa_why = sdpa_whys[key];
}

// cuDNN's engine or the flash kernel, whichever runs this geometry faster here: each timed once
// at setup on the step's own buffers (3 rounds of 20 calls after a warm-up, alternating, the best
// round each), the choice shared by the steps of one geometry. The 20 calls are one CUDA graph,
// as the model runs them: timed as eager launches, the ~4 us host cost of each launch hid the
// difference (BERT-base b1 on an H200 timed cuDNN at 12.5 us against the flash kernel's 11.0 us,
// so the flash kernel ran, and the model took 465 us instead of 418 us with cuDNN's engine).
// cuDNN wins at BERT-base's, GPT-2's and ViT's shapes by 1.4-3x; the flash kernel won Llama-1B's
// grouped-query heads at batch 1 (1.745 against 1.680 ms for the model).
void CudaExecutor::Impl::choose_attention(AttentionStep& a) {
  auto it = attention_timings.find(a.sdpa_key);
  if (it == attention_timings.end()) {
    auto p = [](const void* ptr) { return DevPtr(reinterpret_cast<uintptr_t>(ptr)); };
    auto run = [&](bool dnn) {
      const brrr_attn_args& x = a.args;
      if (dnn)
        a.sdpa->run(p(x.q), p(x.k), p(x.v), p(x.mask), p(x.out), conv_ws);
      else
        launch_own(a.fn, a.grid, a.block, 0, a.argp.data());
    };
    constexpr int kReps = 20;
    auto reps = [&](bool dnn) {
      for (int i = 0; i < kReps; ++i) run(dnn);
    };
    run(true);  // once each outside the capture: a library's first call may set itself up
    run(false);
    std::optional<CudaGraph> g_dnn, g_own;  // none when capture fails: eager launches instead
    try {
      g_dnn.emplace(CudaGraph::capture(stream, [&] { reps(true); }, "cuDNN attention timing"));
      g_own.emplace(CudaGraph::capture(stream, [&] { reps(false); }, "flash attention timing"));
    } catch (const Error&) {
      g_dnn.reset();
      g_own.reset();
    }
    auto time_us = [&](bool dnn) {
      const std::optional<CudaGraph>& g = dnn ? g_dnn : g_own;
      Event e0, e1;
      if (g) g->replay(stream); else reps(dnn);  // warm-up
      e0.record(stream);
      if (g) g->replay(stream); else reps(dnn);
      e1.record(stream);
      e1.synchronize();
      return double(Event::elapsed_ms(e0, e1)) * 1e3 / kReps;
    };
    double dnn_us = 1e30, own_us = 1e30;
    for (int r = 0; r < 3; ++r) {
      dnn_us = std::min(dnn_us, time_us(true));
      own_us = std::min(own_us, time_us(false));
    }
    it = attention_timings.emplace(a.sdpa_key, std::make_pair(dnn_us, own_us)).first;
  }
  const auto [dnn_us, own_us] = it->second;
  if (own_us < dnn_us) {
    a.sdpa.reset();
    a.sdpa_why = fmt::format("timed {:.1f} us against the flash kernel's {:.1f} us", dnn_us, own_us);
  }
}

// One block per (query tile, head, batch); the tile's rows and the block's threads are the
// kernel's.
void CudaExecutor::Impl::set_attention_grid(AttentionStep* a, unsigned batch) {
  const brrr_attn_args& x = a->args;
  const int rows = a->flash_warps ? 16 * a->flash_warps / std::max(1, x.ksplit)
                   : a->mma      ? kMmaRowsPerBlock
                                 : kRowsPerBlock;
  const int threads = a->flash_warps ? 32 * a->flash_warps : a->mma ? kMmaThreads : kThreads;
  a->grid = Dim3{unsigned((x.seq_q + rows - 1) / rows), unsigned(x.heads), batch};
  a->block = Dim3{unsigned(threads), 1, 1};
}

void CudaExecutor::Impl::setup_attention(AttentionStep& a) {
  auto at = [&](int v, int64_t offset = 0) {
    return reinterpret_cast<void*>(slot_of(v, "attention operand") +
                                   uintptr_t(offset) * dtype_size(a.dt));
  };
  brrr_attn_args& x = a.args;
  x.q = at(a.vq, a.q_offset);  // Q, K and V may be parts of one merged product
  x.k = at(a.vk, a.k_offset);
  x.v = at(a.vv, a.v_offset);
  x.mask = a.vmask >= 0 ? at(a.vmask) : nullptr;
  x.keep = a.vkeep >= 0 ? at(a.vkeep) : nullptr;
  x.out = at(a.vout);
  if (a.sdpa && !(aligned(x.q, 16) && aligned(x.k, 16) && aligned(x.v, 16) &&
                  aligned(x.out, 16) && (!x.mask || aligned(x.mask, 16)))) {
    a.sdpa.reset();  // cuDNN takes 16-byte aligned operands
    a.sdpa_why = "an operand not 16-byte aligned";
  }
  if (a.flash_warps &&
      !(aligned(x.q, 16) && aligned(x.k, 16) && aligned(x.v, 16) && aligned(x.out, 4))) {
    a.flash_warps = 0;  // an operand at an offset inside its buffer: the strided kernel
    set_attention_grid(&a, a.grid.z);
  }
  const char* t = attention_type_suffix(a.dt);
  a.fn = module->function(
      a.flash_warps ? fmt::format("brrr_attention_flash{}_{}", x.head_dim, t)
      : a.mma       ? fmt::format("brrr_attention_mma{}_{}", x.head_dim, t)
                    : fmt::format("brrr_attention_{}", t));
  a.argp = {&a.args};
  if (a.sdpa && a.flash_warps && env::integer("BRRR_ATTN_CUDNN") == 1) choose_attention(a);
}

void CudaExecutor::Impl::exec_attention(AttentionStep& a) {
  if (a.grid.x == 0) return;  // no query rows
  if (a.sdpa) {
    const brrr_attn_args& x = a.args;
    auto p = [](const void* ptr) { return DevPtr(reinterpret_cast<uintptr_t>(ptr)); };
    a.sdpa->run(p(x.q), p(x.k), p(x.v), p(x.mask), p(x.out), conv_ws);
    return;
  }
  launch_own(a.fn, a.grid, a.block, 0, a.argp.data());
}

std::string CudaExecutor::Impl::attention_summary(size_t i) const {
  const AttentionStep& a = steps[i].attention();
  const brrr_attn_args& x = a.args;
  const std::string path = a.sdpa ? a.sdpa->describe()
                           : a.flash_warps ? fmt::format("tensor cores flash {}w{}", a.flash_warps,
                                                         x.ksplit == 2 ? " key split 2" : "")
                           : a.mma         ? std::string("tensor cores strided")
                                           : std::string("cuda cores");
  return fmt::format("  {:<24} attention {} {} b{} h{}/{} sq{} sk{} d{}{}{}{}{}{}\n",
                     plan.kernels[i].name, path, dtype_name(a.dt),
                     a.grid.z, x.heads, x.heads / x.group,
                     x.seq_q, x.seq_k, x.head_dim, x.mask ? " +mask" : "",
                     x.keep ? " bool-mask" : "", x.causal ? " causal" : "",
                     a.sdpa ? "" : fmt::format(" grid {}x{}x{}", a.grid.x, a.grid.y, a.grid.z),
                     a.sdpa_why.empty() ? "" : " (not cuDNN: " + a.sdpa_why + ")");
}

}  // namespace brrr::cuda
