// Where the small-M split-K cluster GEMM (device/gemm_small_m.cuh) runs instead of cuBLASLt, and
// the module source of the kernels a plan uses. Header free of CUDA includes.
//
// By default only GEMMs of at most 16 rows take it (BRRR_SMALL_M_GEMM=3): ResNet-50 bf16's
// one-row classifier at batch 1 on an H100, 332 -> 311 us for the model (ViT-B/16's, 500 -> 505).
// At a transformer's 128 rows it is correct (CudaSession.SmallMGemm*) but slower than cuBLASLt
// (BERT-base bf16 batch 1: 403 -> 630 us on an H100, 458 -> 620 on an H200). Nsight
// Compute on BERT's GEMMs (docs/CUDA.md, session of 2026-12-03, second) shows why: the SMs are
// active only 39-45% of the kernel's span (clusters of 5-8 CTAs of 110-143 KB of shared memory
// do not all fit at once, so part of the grid runs as a second wave), and each CTA issues an
// instruction every 5-10 cycles with 0.25 eligible warps per scheduler (2 warps per scheduler).
// (That profile is of the 4-stage version; the 3-stage one here fits two CTAs per SM.)
// Since (docs/CUDA.md, session of 2026-12-07, seventeenth): every cluster of the 3-stage version
// fits at once (the plan summary says so), and its time is a fixed part plus one per K step. On an
// H100 at BERT's shapes the fixed part is about 2 us without a K split and 5-9 us with the
// cluster's split-K sum, and a K step takes 0.2-0.3 us at 32 columns, 0.7-0.8 at 64. Unsplit
// 32-column tiles match cuBLASLt (Q/K/V 5.6 against 5.7 us); the split GEMMs lose (FFN down 12.4
// against 7.4). More stages, one CTA per SM and twice the warps were each slower.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

namespace brrr::cuda {

// How a 16-bit C[m,n] = A[m,k] @ B[k,n] runs on the kernel: K split over a cluster of `splits`
// CTAs (1-8; 0: the kernel does not apply or is not expected to beat cuBLASLt), each with `bn`
// output columns (32, 64 or 128). BRRR_SMALL_M_GEMM: 0 never, 1 where the library's
// tiles would leave most SMs idle (m <= 256 rows, at most half the SMs' worth of output tiles, a
// weight of at most 2^22 elements), 2 wherever it can run (K and N multiples of 8: tests), 3
// (default) as 1 for GEMMs of at most 16 rows (classifier heads at batch 1).
// BRRR_SMALL_M_BN (experimental) fixes bn (0: 128 for n >= 2048, else 64); the split count then
// gives about one CTA per SM. BRRR_SMALL_M_STAGES (experimental, 0-8; 0: the kernel's own, 3)
// sets the pipeline's stages of 64-wide K steps; BRRR_SMALL_M_ONE_PER_SM (experimental) asks each CTA for an SM's
// whole shared memory, so no two CTAs share an SM; BRRR_SMALL_M_SPLITS (experimental) caps the
// split count.
//
// BRRR_SMALL_M_KERNEL=multicast (experimental) takes the cluster-multicast kernel instead
// (device/gemm_rows.cuh; K a multiple of 64): `cluster` (BRRR_SMALL_M_CLUSTER, 1, 2, 4 or 8; 4) CTAs of
// neighbouring column tiles share each copy of A, and the K split (up to 16) is summed through a
// float32 workspace by each tile's last CTA. bn defaults to 32 there, stages to 4. Measured
// slower than cuBLASLt at BERT's 128 rows (a fixed 7-10 us a GEMM; device/gemm_rows.cuh).
struct SmallMGemm {
  int splits = 0;
  int bn = 64;
  int stages = 3;
  bool one_per_sm = false;
  int cluster = 0;  // > 0: the multicast kernel, clusters of this many CTAs along N
};
SmallMGemm small_m_gemm_choice(std::int64_t m, std::int64_t n, std::int64_t k, int sm_count);

// Kernel name for type "bf16" or "f16", and the dynamic shared memory it needs (the executor
// asks for an SM's whole shared memory when c.one_per_sm).
std::string small_m_gemm_symbol(const std::string& type, const SmallMGemm& c);
unsigned small_m_gemm_smem_bytes(const SmallMGemm& c);
unsigned small_m_gemm_threads(const SmallMGemm& c);
// The launch grid for an m x n output.
std::array<unsigned, 3> small_m_gemm_grid(const SmallMGemm& c, std::int64_t m, std::int64_t n);
// The multicast kernel's split-K workspace: float32 partials and one counter per tile (both 0
// without a split). The kernel leaves the counters at zero, so GEMMs that run one after another
// share one workspace (zeroed once).
std::size_t small_m_gemm_workspace_bytes(const SmallMGemm& c, std::int64_t m, std::int64_t n);
std::size_t small_m_gemm_counters(const SmallMGemm& c, std::int64_t m, std::int64_t n);

// The module line that instantiates the kernel small_m_gemm_symbol(type, c) names, and a module
// part made of such lines ("" for none).
std::string small_m_gemm_instance(const std::string& type, const SmallMGemm& c);
std::string small_m_gemm_source(const std::set<std::string>& instances);

}  // namespace brrr::cuda
