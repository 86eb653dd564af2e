// Weights into L2 ahead of the step that reads them (BRRR_L2_PREFETCH). At batch 1 a
// transformer's GEMMs (BERT-base: 128 rows) and a CNN's late convs read megabytes of weights for
// little arithmetic, on grids that leave most SMs idle, and wait on DRAM latency: the doctor's
// "small grid ... waits on latency" (BERT-base bf16 b1 on an H100: the FFN down-projection at 7.4
// us for a 1.8 us memory floor). Their weights are constants, so nothing orders their loads
// after the steps before: a side stream forked at the previous weight-reading step runs
// brrr_l2_prefetch (device/kernels.cuh) on the next step's weights while that step and the ones
// between run, and joins the main stream after the last step. Inside the plan's CUDA graph the
// fork and join are edges: each prefetch is a node beside the main chain.
//
// Only steps whose weights outweigh their activations (2x or more, at least 256 KB, at most half
// the L2) are prefetched: at a large batch the activations are the traffic and nothing is.
//
// Measured slower, so off by default: BERT-base bf16 at batch 1 on an H100 ran 401-404 us
// without, 450-452 us with bulk prefetches, 425-426 us with line prefetches and 655-657 us with
// loads (docs/CUDA.md, the fifteenth session). Not looked into: whether the side branch's nodes
// cost the main chain its programmatic (PDL) overlap, or the prefetch's DRAM traffic the GEMM's.
#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/cuda_executor_impl.hpp"
#include "core/env.hpp"

namespace brrr::cuda {

namespace {

constexpr int64_t kMinBytes = int64_t(256) << 10;  // smaller weights: the launch costs more
constexpr int64_t kAnyWeight = int64_t(64) << 10;  // a step that reads this much is a fork point

}  // namespace

void CudaExecutor::Impl::plan_l2_prefetch() {
  prefetches.clear();
  prefetch_mode = int(env::integer("BRRR_L2_PREFETCH"));
  if (prefetch_mode == 0) return;
  const int64_t cap = int64_t(dev.info().l2_bytes) / 2;
  size_t last_weights = 0;  // the latest step that reads weights (the fork point)
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    DevPtr w = 0;
    int64_t wb = 0, act = 0;
    if (s.type == Step::Library && s.gemm().w_bytes && s.gemm().small.splits == 0) {
      const GemmStep& m = s.gemm();
      w = m.b;
      wb = int64_t(m.w_bytes);
      const int64_t e = int64_t(element_bytes(m.prec)), rows = m.shape.m * m.shape.batch;
      act = rows * (m.shape.k + m.shape.n) * e;
    } else if (s.type == Step::Conv) {
      const ConvStep& c = s.conv();
      w = c.direct ? c.wd : c.gemm ? c.wg : c.w;
      wb = c.direct ? int64_t(c.dk.geo.k) * c.dk.geo.ks * 32 : int64_t(g.value(c.vw).nbytes());
      act = int64_t(g.value(c.vx).nbytes() + g.value(c.vy).nbytes());
    }
    if (!w || wb < kAnyWeight) continue;
    if (wb >= kMinBytes && wb <= cap && wb >= 2 * act)
      prefetches.push_back({last_weights, i, w, wb});
    last_weights = i;
  }
  if (prefetches.empty()) return;
  prefetch_fn = module->function("brrr_l2_prefetch");
  side = std::make_unique<Stream>();
  fork_event = std::make_unique<Event>();
  join_event = std::make_unique<Event>();
}

void CudaExecutor::Impl::start_prefetches(size_t fork) {
  for (L2Prefetch& p : prefetches) {
    if (p.fork != fork) continue;
    fork_event->record(stream);
    side->wait(*fork_event);
    const int64_t unit = prefetch_mode == 1 ? 16384 : prefetch_mode == 2 ? 128 : 16;
    const int64_t threads = std::max<int64_t>(1, (p.bytes + unit - 1) / unit);
    const unsigned blocks = unsigned(std::clamp<int64_t>((threads + 127) / 128, 1, dev.info().sm_count));
    void* args[] = {&p.ptr, &p.bytes, &prefetch_mode};
    launch(prefetch_fn, {blocks, 1, 1}, {128, 1, 1}, 0, *side, args);
  }
}

void CudaExecutor::Impl::join_prefetches() {
  join_event->record(*side);
  stream.wait(*join_event);
}

std::string CudaExecutor::Impl::prefetch_summary() const {
  if (prefetch_mode == 0) return "";
  int64_t bytes = 0;
  for (const L2Prefetch& p : prefetches) bytes += p.bytes;
  if (prefetches.empty())
    return "  L2 prefetch: no step's weights outweigh its activations (BRRR_L2_PREFETCH)\n";
  return fmt::format("  L2 prefetch: the weights of {} steps ({:.1f} MB) on a side stream, "
                     "{} (BRRR_L2_PREFETCH={})\n",
                     prefetches.size(), double(bytes) / 1e6,
                     prefetch_mode == 1   ? "bulk prefetches"
                     : prefetch_mode == 2 ? "line prefetches"
                                          : "loads",
                     prefetch_mode);
}

}  // namespace brrr::cuda
