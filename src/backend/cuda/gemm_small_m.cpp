#include "backend/cuda/gemm_small_m.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/device/gemm_rows.cuh"
#include "backend/cuda/device/gemm_small_m.cuh"
#include "core/env.hpp"

namespace brrr::cuda {

namespace {
constexpr std::int64_t kBM = BRRR_GSK_BM, kBK = BRRR_GSK_BK;  // the tile's rows and K step
constexpr int kMaxSplits = 8;                // the portable cluster size
constexpr std::int64_t kMinStepsPerSplit = 2;
constexpr std::int64_t kFewRows = 16;        // BRRR_SMALL_M_GEMM=3's limit
constexpr int kMaxRowsSplits = 16;           // the multicast kernel's K split (a workspace sum)

// The multicast kernel (device/gemm_rows.cuh) for a GEMM small_m_gemm_choice took.
SmallMGemm multicast_choice(SmallMGemm c, std::int64_t m, std::int64_t n, std::int64_t k, int sm_count) {
  if (k % BRRR_GMC_BK) return {};
  const std::string bn = env::text("BRRR_SMALL_M_BN");
  c.bn = !bn.empty() ? std::stoi(bn) : 32;
  c.cluster = std::stoi(env::text("BRRR_SMALL_M_CLUSTER"));  // 1, 2, 4 or 8: whole 8-row swizzle blocks a box
  const int stages = int(env::integer("BRRR_SMALL_M_STAGES"));
  c.stages = stages == 0 ? 4 : std::max(3, stages);
  c.one_per_sm = false;
  c.splits = 1;
  const std::array<unsigned, 3> g = small_m_gemm_grid(c, m, n);
  if (g[0] > 65535 || g[2] > 65535) return {};
  // About one CTA per SM.
  const std::int64_t tiles = std::int64_t(g[0]) * g[2], steps = k / BRRR_GMC_BK;
  std::int64_t s = std::max<std::int64_t>(1, sm_count / tiles);
  s = std::min<std::int64_t>({s, kMaxRowsSplits, steps, env::integer("BRRR_SMALL_M_SPLITS")});
  c.splits = int(std::max<std::int64_t>(s, 1));
  return c;
}
}  // namespace

SmallMGemm small_m_gemm_choice(std::int64_t m, std::int64_t n, std::int64_t k, int sm_count) {
  const std::int64_t mode = env::integer("BRRR_SMALL_M_GEMM");
  if (mode == 0 || m <= 0 || n <= 0 || k <= 0 || k % 8 || n % 8) return {};
  SmallMGemm c;
  const std::string bn = env::text("BRRR_SMALL_M_BN");
  c.bn = !bn.empty() ? std::stoi(bn) : n >= 2048 ? 128 : 64;  // wide outputs: half the re-reads of A per column
  c.stages = int(env::integer("BRRR_SMALL_M_STAGES"));
  c.stages = c.stages == 0 ? 3 : std::max(2, c.stages);
  c.one_per_sm = env::flag("BRRR_SMALL_M_ONE_PER_SM");
  const std::int64_t tiles = (m + kBM - 1) / kBM * ((n + c.bn - 1) / c.bn);
  const std::int64_t steps = (k + kBK - 1) / kBK;
  // 3: as 1, at most kFewRows rows (where the kernel measured faster: its split-K sum over the
  // cluster reads a whole tile of partials per CTA, which grows with the rows and not the MMAs).
  if ((mode == 1 || mode == 3) &&
      (m > (mode == 3 ? kFewRows : 2 * kBM) || 2 * tiles > sm_count || k * n > (std::int64_t(1) << 22)))
    return {};
  if ((n + c.bn - 1) / c.bn > 65535 || (m + kBM - 1) / kBM > 65535) return {};  // grid y and z
  // About one CTA per SM, each with at least a few K steps.
  std::int64_t s = std::max<std::int64_t>(1, sm_count / std::max<std::int64_t>(tiles, 1));
  s = std::min<std::int64_t>({s, kMaxSplits, std::max<std::int64_t>(1, steps / kMinStepsPerSplit)});
  c.splits = int(std::min<std::int64_t>(s, env::integer("BRRR_SMALL_M_SPLITS")));
  if (env::text("BRRR_SMALL_M_KERNEL") == "multicast") return multicast_choice(c, m, n, k, sm_count);
  return c;
}

std::string small_m_gemm_symbol(const std::string& type, const SmallMGemm& c) {
  if (c.cluster) return fmt::format("brrr_gemm_mc_{}_n{}_c{}_st{}", type, c.bn, c.cluster, c.stages);
  return fmt::format("brrr_gemm_sk_{}_n{}_s{}_st{}", type, c.bn, c.splits, c.stages);
}

unsigned small_m_gemm_smem_bytes(const SmallMGemm& c) {
  if (c.cluster) return unsigned(BRRR_GMC_SMEM_BYTES(c.bn, c.stages));
  return unsigned(BRRR_GSK_SMEM_BYTES(c.bn, c.stages));
}

unsigned small_m_gemm_threads(const SmallMGemm& c) {
  return unsigned(c.cluster ? BRRR_GMC_THREADS(c.bn) : BRRR_GSK_THREADS(c.bn));
}

std::array<unsigned, 3> small_m_gemm_grid(const SmallMGemm& c, std::int64_t m, std::int64_t n) {
  const auto cols = unsigned((n + c.bn - 1) / c.bn), rows = unsigned((m + kBM - 1) / kBM);
  if (c.cluster)
    return {(cols + unsigned(c.cluster) - 1) / unsigned(c.cluster) * unsigned(c.cluster), unsigned(c.splits), rows};
  return {unsigned(c.splits), cols, rows};
}

std::size_t small_m_gemm_counters(const SmallMGemm& c, std::int64_t m, std::int64_t n) {
  if (!c.cluster || c.splits <= 1) return 0;
  const std::array<unsigned, 3> g = small_m_gemm_grid(c, m, n);
  return std::size_t(g[0]) * g[2];
}

std::size_t small_m_gemm_workspace_bytes(const SmallMGemm& c, std::int64_t m, std::int64_t n) {
  return small_m_gemm_counters(c, m, n) * std::size_t(c.splits) * kBM * std::size_t(c.bn) * sizeof(float);
}

std::string small_m_gemm_instance(const std::string& type, const SmallMGemm& c) {
  return fmt::format("{}({}, {}, {}, {}, {})\n", c.cluster ? "BRRR_GEMM_MC" : "BRRR_GEMM_SK", type,
                     type == "bf16" ? "brrr_bf16" : "brrr_f16", c.bn, c.cluster ? c.cluster : c.splits,
                     c.stages);
}

std::string small_m_gemm_source(const std::set<std::string>& instances) {
  if (instances.empty()) return "";
  auto uses = [&](const char* macro) {
    return std::any_of(instances.begin(), instances.end(),
                       [&](const std::string& line) { return line.rfind(macro, 0) == 0; });
  };
  std::string s;
  if (uses("BRRR_GEMM_SK(")) s += "#include \"backend/cuda/device/gemm_small_m.cuh\"\n";
  if (uses("BRRR_GEMM_MC(")) s += "#include \"backend/cuda/device/gemm_rows.cuh\"\n";
  for (const std::string& line : instances) s += line;
  return s;
}

}  // namespace brrr::cuda
