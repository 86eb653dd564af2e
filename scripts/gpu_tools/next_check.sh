#!/usr/bin/env bash
# The first device call of the next session (carry [".devdeps"]). The twenty-second session ran
# the persistent encoder (persist_layer.cu) once, in its first form: correct after 1 and 12 layers
# (rel L2 0.0022 / 0.0055), but 151-164 us a layer on an H200, with attention reading K and V
# element by element from L2. The form here (attention through shared memory, a per-phase trace,
# K slices per GEMM from the command line, and a red.add mode with no finishing step) has not run.
#   1. scripts/gpu_tools/persist_layer.sh (no brrr build): every mode and K split of its RUNS,
#      each checked, timed and traced per phase; first, while brrr builds in the background;
#   1b. scripts/gpu_tools/wgmma_micro.sh: the wgmma GEMM with W multicast over clusters of 2
#      (written after the call that measured the first form at 0.45-0.73x cuBLASLt);
#   2. brrr's BERT-base bf16 b1 on the same machine (`brrr bench`, and the doctor's per-kernel
#      times of a layer), for the per-layer comparison;
#   3. Nsight Compute on the direct stem conv at b1 with its warp stall reasons (12.8 us for
#      about 1 us of loads and MMAs per CTA: where do the cycles go?).
# Each part after 1 is skipped past DEADLINE (s, default 470) with a line saying so.
export OUT=${OUT:-/tmp/o}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
late() { [ "$(el)" -ge "${DEADLINE:-470}" ] && echo "== skipped from here at $(el) s: $1" && exit 0; return 0; }
S=/tmp/brrr_suite
(python3 scripts/models/export.py --out $S --models bert_base,resnet50 --dtypes bf16 --exporters torchscript \
  --no-verify --threads 8 >"$OUT/export.log" 2>&1) &
(TARGETS="brrr_cli" source scripts/gpu_build.sh >"$OUT/build_out.log" 2>&1; echo "build rc $?" >>"$OUT/build_out.log") &
echo "== persist_layer"
LIMIT=15 bash scripts/gpu_tools/persist_layer.sh 2>&1 | grep -vE '^ptxas info|bytes stack frame'
echo "== persist_layer done at $(el) s"
echo "== wgmma_micro (the mc2 rows: W multicast over clusters of 2, not run before)"
LIMIT=25 bash scripts/gpu_tools/wgmma_micro.sh 2>&1 | grep -vE '^ptxas info|bytes stack frame'
wait
tail -3 "$OUT/build_out.log"
source scripts/gpu_env.sh >/dev/null 2>&1
B=${B:-/tmp/brrr_build}
export XDG_CACHE_HOME=/tmp/brrr_xdg_22
M=$S/bert_base_bf16_torchscript/model.onnx R=$S/resnet50_bf16_torchscript/model.onnx
late "brrr's BERT-base b1"
for r in 1 2; do
  echo "round $r bert b1: $(timeout 90 $B/brrr bench $M --backend cuda --iterations 200 2>&1 | grep -E '^latency' | cut -c1-120)"
done
timeout 120 $B/brrr doctor $M --backend cuda --top 100 >"$OUT/doctor_bert_b1.txt" 2>&1
grep -E '^wall|^idle' "$OUT/doctor_bert_b1.txt" | cut -c1-300
# Layer 5's kernels (k36..k42 or so): the per-kernel times a layer of the persistent kernel replaces.
grep -E '^\s+k(3[5-9]|4[0-3])_' "$OUT/doctor_bert_b1.txt" | cut -c1-120
late "Nsight Compute on the direct stem conv"
BRRR_CONV_DIRECT=2 timeout 90 ncu --target-processes all --kernel-name regex:conv_direct --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
  $B/brrr run $R --backend cuda --reps 1 >"$OUT/ncu_direct_b1.txt" 2>&1
grep -E 'Duration|Elapsed Cycles|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps' \
  "$OUT/ncu_direct_b1.txt" | head -12
grep -E 'issue_stalled' "$OUT/ncu_direct_b1.txt" | sort -k3 -n -r | head -8
echo "== end at $(el) s"
