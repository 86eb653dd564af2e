#!/usr/bin/env bash
# One short device call after a round of GPU changes: build (BERT-base bf16 exported beside it),
# the new device tests, BERT-base bf16 at batch 1 and 32 with each new pass switched on in turn
# (interleaved rounds), the doctor's CUPTI table with all of them on, then as much of the CUDA
# suite as the time left allows.
#   TESTS (gtest filter of the new tests)  CONFIGS (space-separated NAME=ENV,ENV,... lists)
#   DEADLINE (s from the start by which the suite must stop; default 440)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/session.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
S=/tmp/brrr_suite
PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models bert_base --dtypes bf16 \
  --exporters torchscript --no-verify --threads 8 >"$OUT/export.log" 2>&1 &
EXPORT=$!
source scripts/gpu_build.sh || exit 1
echo "== built at $(el) s"
export XDG_CACHE_HOME=/tmp/brrr_xdg_session
timeout -k 5 "${TESTS_TIMEOUT:-120}" "$B/tests/brrr_tests" --gtest_filter="${TESTS:-FusedAttention*}" \
  >"$OUT/tests.log" 2>&1
echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/tests.log" | tr '\n' ' ') at $(el) s"
grep -E '^\[  (FAILED|SKIPPED) \] [A-Z]' "$OUT/tests.log" | sort -u | head -20
wait $EXPORT; echo "== exported at $(el) s"
M=$S/bert_base_bf16_torchscript/model.onnx
CONFIGS=${CONFIGS:-"base=BRRR_FUSED_ATTENTION=0"}
for r in 1 2; do for bs in 1 32; do for c in $CONFIGS; do
  name=${c%%=*}; envs=${c#*=}
  line=$(env ${envs//,/ } timeout 60 "$B/brrr" bench "$M" --backend cuda --shape input_ids:${bs}x128 \
    --iterations 200 2>&1 | grep -E 'median|error|kernels' | tr '\n' ' ' | cut -c1-200)
  echo "r$r b$bs $name: $line"
done; done; done
echo "== benches done at $(el) s"
last=${CONFIGS##* }; envs=${last#*=}
env ${envs//,/ } timeout 60 "$B/brrr" doctor "$M" --backend cuda --shape input_ids:1x128 --top 12 \
  >"$OUT/doctor_b1_all.txt" 2>&1
echo "doctor rc $?: $(grep -m1 '^wall' "$OUT/doctor_b1_all.txt")"
sed -n '/^top 12/,/^$/p' "$OUT/doctor_b1_all.txt" | cut -c1-150
env ${envs//,/ } BRRR_DEBUG=1 timeout 30 "$B/brrr" run "$M" --backend cuda --shape input_ids:1x128 \
  >"$OUT/plan_all.txt" 2>&1
grep -iE "cublaslt|attention|tuned|heuristic" "$OUT/plan_all.txt" | sort | uniq -c | sort -rn | head -12 | cut -c1-200
left=$(( ${DEADLINE:-440} - $(el) ))
echo "== suite with $left s left"
[ "$left" -gt 20 ] && timeout -k 5 "$left" "$B/tests/brrr_tests" \
  --gtest_filter="${SUITE_FILTER:-Cuda*:DoctorCuda*:Gpu/*}" >"$OUT/suite.log" 2>&1
echo "suite rc $?: $(grep -cE '^\[       OK \]' "$OUT/suite.log") passed," \
  "$(grep -E '^\[  FAILED  \] [A-Z]' "$OUT/suite.log" | sort -u | tr '\n' ' ')" \
  "last: $(grep -E '^\[ RUN' "$OUT/suite.log" | tail -1) at $(el) s"
