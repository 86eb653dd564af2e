#!/usr/bin/env bash
# One device call (no brrr build): the persistent encoder (persist_layer.cu) in the K splits and
# modes of RUNS, each checked against the float32 reference, timed and traced per phase; one run
# again with the first form's fence.sc pairs (PL_FENCE=sc); red mode's failing configuration of the
# twenty-second session twice with a fence per thread after its reductions (the default now) and
# twice without (PL_RED_FENCE=0): does its result vary from run to run, and is that fence the cure?
# Then Nsight Compute's warp stall reasons for one layer.
export OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 1
RUNS=${RUNS:-"1 3 6 2 8;12 3 6 2 8;12 4 12 3 12;12 2 4 2 4;1 3 6 2 8 fold;12 3 6 2 8 fold;12 4 12 3 12 fold;12 2 4 2 4 fold;12 2 4 1 4 red;12 4 12 3 12 red;12 4 12 3 12 red"} \
  LIMIT=${LIMIT:-15} bash scripts/gpu_tools/persist_layer.sh 2>&1 | grep -vE '^ptxas info|bytes stack frame'
echo "== red mode without the per-thread fence, twice"
for i in 1 2; do PL_RED_FENCE=0 timeout 15 /tmp/persist_layer 12 4 12 3 12 red 2>&1 | grep -E 'check|persistent'; done
echo "== fence.sc pairs"
PL_FENCE=sc timeout 15 /tmp/persist_layer 12 3 6 2 8 2>&1 | grep -E 'check|persistent'
echo "== Nsight Compute, 1 layer"
timeout 120 ncu --section WarpStateStats --section SpeedOfLight \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
  /tmp/persist_layer 1 3 6 2 8 >"$OUT/ncu_pl.txt" 2>&1
grep -E 'Duration|Warp Cycles Per Issued' "$OUT/ncu_pl.txt" | head -4
grep -E 'issue_stalled' "$OUT/ncu_pl.txt" | sort -k3 -g -r | head -10
