#include "backend/cuda/gemm_small_m.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/device/gemm_small_m.cuh"
#include "core/env.hpp"

namespace brrr::cuda {

namespace {
constexpr std::int64_t kBM = BRRR_GSK_BM, kBK = BRRR_GSK_BK;  // the tile's rows and K step
constexpr int kMaxSplits = 8;                // the portable cluster size
constexpr std::int64_t kMinStepsPerSplit = 2;
constexpr std::int64_t kFewRows = 16;        // BRRR_SMALL_M_GEMM=3's limit
}  // namespace

SmallMGemm small_m_gemm_choice(std::int64_t m, std::int64_t n, std::int64_t k, int sm_count) {
  const std::int64_t mode = env::integer("BRRR_SMALL_M_GEMM");
  if (mode == 0 || m <= 0 || n <= 0 || k <= 0 || k % 8 || n % 8) return {};
  SmallMGemm c;
  const std::string bn = env::text("BRRR_SMALL_M_BN");
  c.bn = !bn.empty() ? std::stoi(bn) : n >= 2048 ? 128 : 64;  // wide outputs: half the re-reads of A per column
  c.stages = int(env::integer("BRRR_SMALL_M_STAGES"));
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
  return c;
}

std::string small_m_gemm_symbol(const std::string& type, const SmallMGemm& c) {
  return fmt::format("brrr_gemm_sk_{}_n{}_s{}_st{}", type, c.bn, c.splits, c.stages);
}

unsigned small_m_gemm_smem_bytes(const SmallMGemm& c) {
  return unsigned(BRRR_GSK_SMEM_BYTES(c.bn, c.stages));
}

unsigned small_m_gemm_threads(const SmallMGemm& c) { return unsigned(BRRR_GSK_THREADS(c.bn)); }

std::string small_m_gemm_instance(const std::string& type, const SmallMGemm& c) {
  return fmt::format("BRRR_GEMM_SK({}, {}, {}, {}, {})\n", type,
                     type == "bf16" ? "brrr_bf16" : "brrr_f16", c.bn, c.splits, c.stages);
}

std::string small_m_gemm_source(const std::set<std::string>& instances) {
  if (instances.empty()) return "";
  std::string s = "#include \"backend/cuda/device/gemm_small_m.cuh\"\n";
  for (const std::string& line : instances) s += line;
  return s;
}

}  // namespace brrr::cuda
