#!/usr/bin/env bash
# A device call of the twenty-fourth session (carry [".devdeps"]).
#   1. The persistent encoder (persist_layer.cu, no brrr build): its tile-finishing step split
#      into the partials' loads, the epilogue's stores and the release (trace words 6 and 7), at
#      the full weight ring and at 8 and 4 stages (PL_STAGES): do the bytes the ring keeps in
#      flight slow the L2 round trips the finishing step waits on? And PL_FIN=rows: the
#      out-projection's and FFN down's finish with whole rows per warp (coalesced partials). And
#      PL_L2_AHEAD: weights prefetched into L2 items ahead, with a short ring copying from L2.
#   2. The yardstick: brrr against torch.compile (reduce-overhead) with PyTorch timed both ways
#      (gpu_bench.py --torch-timer both): events around each call as brrr bench times brrr, and
#      triton's do_bench (L2 flushed before each call, the host's launch hidden behind the flush).
#      BERT-base bf16 at b1 and b32, ResNet-50 bf16 at b1. Before it, brrr bench's new queued
#      line (runs enqueued back to back) for BERT-base b1 and b32, and its test.
export OUT=${OUT:-/tmp/o}; T0=$(date +%s)
mkdir -p "$OUT"
exec > >(tee "$OUT/log") 2>&1  # what ran comes back in $OUT/log even if the call is cut short
el() { echo $(( $(date +%s) - T0 )); }
S=/tmp/brrr_suite
(python3 scripts/models/export.py --out $S --models bert_base,resnet50 --dtypes bf16 --exporters torchscript \
  --no-verify --threads 8 >"$OUT/export.log" 2>&1; echo "export rc $?" >>"$OUT/export.log") &
(TARGETS="brrr_cli brrr_tests" source scripts/gpu_build.sh >"$OUT/build_out.log" 2>&1; echo "build rc $?" >>"$OUT/build_out.log") &
echo "== persist_layer"
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xptxas -v scripts/gpu_tools/persist_layer.cu \
  -o /tmp/persist_layer 2>"$OUT/persist_layer_ptxas.txt" || tail -20 "$OUT/persist_layer_ptxas.txt"
for cfg in "PL_STAGES=23:12 3 6 2 8" "PL_STAGES=8:12 3 6 2 8" "PL_STAGES=4:12 3 6 2 8" "PL_FIN=rows:12 3 6 2 8" \
  "PL_STAGES=4 PL_L2_AHEAD=6:12 3 6 2 8" "PL_STAGES=8 PL_L2_AHEAD=6:12 3 6 2 8" "PL_STAGES=23:12 2 4 2 4" \
  "PL_STAGES=4 PL_L2_AHEAD=6 PL_FIN=rows:12 2 4 2 4"; do
  echo "-- ${cfg%%:*} ${cfg#*:}"
  # shellcheck disable=SC2086
  env ${cfg%%:*} timeout 20 /tmp/persist_layer ${cfg#*:} 2>&1 | grep -vE '^NVIDIA|^  (LN1|attention|LN2) '
done
echo "== persist_layer done at $(el) s"
wait
tail -2 "$OUT/build_out.log"; tail -2 "$OUT/export.log"
source scripts/gpu_env.sh >/dev/null 2>&1
B=${B:-/tmp/brrr_build}
export XDG_CACHE_HOME=/tmp/brrr_xdg_24
$B/tests/brrr_tests --gtest_filter='CudaSession.TimeQueued*:CudaSession.TimeRuns*' 2>&1 | grep -E '^\[  (PASSED|FAILED|SKIPPED)|Failure' | head
for bt in 1 32; do
  timeout 120 $B/brrr bench $S/bert_base_bf16_torchscript/model.onnx --backend cuda --shape input_ids:${bt}x128 \
    --iterations 200 2>&1 | grep -E '^(latency|queued)' | cut -c1-200
done
LEFT=$(( ${BUDGET_S:-430} - $(el) ))
PYTHONUNBUFFERED=1 timeout $(( LEFT + 30 )) python3 scripts/models/gpu_bench.py --suite $S --brrr $B/brrr \
  --backend cuda --models bert_base,resnet50 --dtypes bf16 --exporters torchscript --batches "bert_base=1,32;resnet50=1" \
  --torch-modes reduce-overhead --torch-timer both --rounds 3 --reps 100 --no-check --budget "$LEFT" \
  --json "$OUT/models.json" 2>&1 | grep -v -i warn | tail -25
echo "== end at $(el) s"
