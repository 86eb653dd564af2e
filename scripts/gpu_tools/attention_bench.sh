#!/usr/bin/env bash
# One device call: the fused attention kernel alone at BERT-base's shapes (batch 1 and 32, 12
# heads of 64, seq 128, additive mask, bf16) and GPT-2's causal one at batch 1, through
# `brrr bench --backend cuda` (median CUDA-event time of the one-kernel plan, CUDA graphs on,
# after warm-up), with the fused attention on and off in interleaved rounds; off is the unfused
# chain it replaces. Then the plan summaries (which kernel path, grid) and the attention tests.
#   B=an existing build folder to skip the build  ROUNDS (default 3)  REPS (default 500)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/attention_bench.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
if [ -z "${B:-}" ] || [ ! -x "$B/brrr" ]; then
  source scripts/gpu_build.sh || exit 1
  echo "== built in $(( $(date +%s) - T0 )) s"
fi
export XDG_CACHE_HOME=/tmp/brrr_xdg_attn_bench
W="attn_bert_b1 attn_bert_b32 attn_gpt2_b1"
for r in $(seq "${ROUNDS:-3}"); do for v in 0 1; do
  BRRR_FUSED_ATTENTION=$v timeout 120 "$B/brrr" bench --backend cuda $W --reps "${REPS:-500}" 2>&1 |
    grep -E '^attn_|error' | sed "s/^/round $r attn=$v: /"
done; done
BRRR_FUSED_ATTENTION=1 BRRR_DEBUG=1 timeout 60 "$B/brrr" bench --backend cuda $W --reps 3 2>&1 |
  grep -E 'attention (tensor|cuda)' | sort -u
timeout 200 "$B/tests/brrr_tests" --gtest_filter='FusedAttention*' >"$OUT/attn_tests.log" 2>&1
echo "attention tests rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/attn_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [A-Z]|Failure|rel_l2' "$OUT/attn_tests.log" | head -20
echo "== total $(( $(date +%s) - T0 )) s"
