// The PTX the device micro-benchmarks' persistent and TMA kernels share (persist_micro.cu,
// persist_layer.cu, wgmma_micro.cu): mbarriers, 1-D bulk copies and 2-D TMA copies into shared
// memory, the cluster (rank, an arrival on the peer's mbarrier, a barrier), and bf16 values; on
// the host, the 2-D tensor maps their TMA copies read (link with -lcuda where it is used).
#pragma once
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

// [rows, k] bf16 row-major, boxes of 64 columns x box_rows rows, 128-byte swizzle.
inline CUtensorMap tmap_bf16_2d(const void* p, long long rows, long long k, unsigned box_rows,
                                CUtensorMapL2promotion promote = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)k * 2};
  const cuuint32_t box[2] = {64, box_rows}, elem[2] = {1, 1};
  const CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(p), dims,
                                            strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                            CU_TENSOR_MAP_SWIZZLE_128B, promote, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", (int)r);
    std::exit(1);
  }
  return map;
}

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" ::"r"(bar),
               "r"(parity)
               : "memory");
}
// `bytes` from global memory into shared memory, completing them on the mbarrier.
__device__ __forceinline__ void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// The box of a 2-D tensor map at (c0, c1) into shared memory, completing on the mbarrier.
__device__ __forceinline__ void tma_2d(unsigned dst, const CUtensorMap* map, int c0, int c1, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// The same, multicast to the CTAs of the cluster in `mask` (same offset and mbarrier in each).
__device__ __forceinline__ void tma_2d_multicast(unsigned dst, const CUtensorMap* map, int c0, int c1, unsigned bar,
                                                 unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}
// A ring of st stages in dynamic shared memory: st "full" mbarriers (the producer's one arrival
// with the stage's bytes), st "empty" ones (one arrival per consumer warp), then the stages from
// the next 128 bytes. ring_offset: where the stages start; init_ring: thread 0 sets the barriers
// up, and every thread waits for it.
__host__ __device__ constexpr int ring_offset(int st) { return 128 * ((2 * st * 8 + 127) / 128); }
__device__ __forceinline__ void init_ring(unsigned long long* bars, int st, int consumers) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < st; ++s) {
      mbar_init(smem_u32(&bars[s]), 1);
      mbar_init(smem_u32(&bars[st + s]), consumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
}

__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// An arrival on the mbarrier at the same offset in CTA `rank` of the cluster.
__device__ __forceinline__ void mbar_arrive_peer(unsigned bar, unsigned rank) {
  asm volatile(
      "{ .reg .b32 ra; mapa.shared::cluster.u32 ra, %0, %1; mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra]; }" ::"r"(
          bar),
      "r"(rank)
      : "memory");
}
// The shared::cluster address of the location at `addr` (a shared::cta address) in CTA `rank`.
__device__ __forceinline__ unsigned mapa_u32(unsigned addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
// Loads from another CTA's shared memory (distributed shared memory), at a shared::cluster address.
__device__ __forceinline__ float4 ld_cluster_f4(unsigned addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr)
               : "memory");
  return v;
}
__device__ __forceinline__ float ld_cluster_f32(unsigned addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
// mbar_wait with acquire at cluster scope: what the peers released by their arrivals
// (mbar_arrive_peer) is visible after it.
__device__ __forceinline__ void mbar_wait_cluster(unsigned bar, unsigned parity) {
  asm volatile(
      "{ .reg .pred p; WC: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1; @!p bra WC; }" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// All threads of the cluster (.aligned: every thread of a warp executes it together).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ float bf(unsigned short h) { return __uint_as_float(unsigned(h) << 16); }
__device__ __forceinline__ unsigned short to_bf(float f) {  // round to nearest even (finite values)
  unsigned u = __float_as_uint(f);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}
