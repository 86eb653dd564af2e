#!/usr/bin/env bash
# The first device call of the next session (carry [".devdeps"]). The twenty-third session's one
# call traced the persistent encoder (persist_layer.cu): 145-190 us a layer against brrr's ~32 us
# (BERT-base bf16 b1, H100), its LayerNorm and tile-finishing steps serialized on L2 round trips.
# Fixed after that call and not yet run: loads before stores in those steps, release / acq_rel
# atomics instead of fence.sc pairs, Q loaded with K and V, and a fold mode (no LayerNorm
# phases: five hops a layer).
#   1. scripts/gpu_tools/persist_check.sh (no brrr build): every mode and K split, checked, timed
#      and traced per phase; the old fences once; a red-mode configuration twice; Nsight
#      Compute's stall reasons for one layer; first, while brrr builds in the background;
#   2. brrr's BERT-base bf16 b1 on the same machine (`brrr bench`, and the doctor's per-kernel
#      times of a layer), for the per-layer comparison.
# Part 2 is skipped past DEADLINE (s, default 470) with a line saying so.
export OUT=${OUT:-/tmp/o}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
late() { [ "$(el)" -ge "${DEADLINE:-470}" ] && echo "== skipped from here at $(el) s: $1" && exit 0; return 0; }
S=/tmp/brrr_suite
(python3 scripts/models/export.py --out $S --models bert_base --dtypes bf16 --exporters torchscript \
  --no-verify --threads 8 >"$OUT/export.log" 2>&1) &
(TARGETS="brrr_cli" source scripts/gpu_build.sh >"$OUT/build_out.log" 2>&1; echo "build rc $?" >>"$OUT/build_out.log") &
echo "== persist_check"
bash scripts/gpu_tools/persist_check.sh 2>&1
echo "== persist_check done at $(el) s"
wait
tail -3 "$OUT/build_out.log"
source scripts/gpu_env.sh >/dev/null 2>&1
B=${B:-/tmp/brrr_build}
export XDG_CACHE_HOME=/tmp/brrr_xdg_23
M=$S/bert_base_bf16_torchscript/model.onnx
late "brrr's BERT-base b1"
for r in 1 2; do
  echo "round $r bert b1: $(timeout 90 $B/brrr bench $M --backend cuda --iterations 200 2>&1 | grep -E '^latency' | cut -c1-120)"
done
timeout 120 $B/brrr doctor $M --backend cuda --top 100 >"$OUT/doctor_bert_b1.txt" 2>&1
grep -E '^wall|^idle' "$OUT/doctor_bert_b1.txt" | cut -c1-300
# Layer 5's kernels: the per-kernel times a layer of the persistent kernel replaces.
grep -E '^\s+k(3[5-9]|4[0-3])_' "$OUT/doctor_bert_b1.txt" | cut -c1-120
echo "== end at $(el) s"
