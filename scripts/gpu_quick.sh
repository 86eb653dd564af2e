#!/usr/bin/env bash
# One short device call for a session's last minutes: builds, then runs each listed check with its
# own time limit so the call ends in time, and prints one table (check, rc, seconds, last line).
#   STEP_S (default 30): limit per check.   B, EXTRA_CMAKE: as for scripts/gpu_build.sh
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
T0=$(date +%s)
source scripts/gpu_build.sh || exit 1
echo "== built in $(( $(date +%s) - T0 )) s"
export XDG_CACHE_HOME=/tmp/brrr_xdg_quick
rows=()
step() {  # step NAME COMMAND...
  local name=$1 t=$(date +%s) log="$OUT/$1.log"
  shift
  timeout "${STEP_S:-30}" "$@" >"$log" 2>&1
  local rc=$?
  rows+=("$(printf '%-28s rc %-4s %4ss  %s' "$name" "$rc" "$(( $(date +%s) - t ))" \
    "$(grep -E 'PASSED|FAILED|PASS|FAIL|median|error' "$log" | tail -1 | cut -c1-90)")")
}
# Every driver entry point's ABI against cuda.h's prototype (a DIFF other than cuCtxSynchronize,
# which brrr loads at ABI 2000 on purpose, is a bug: docs/CUDA.md).
g++ -std=c++17 -O1 -Isrc -I/usr/local/cuda/include scripts/gpu_tools/proc_abi.cpp -ldl \
  -o /tmp/proc_abi && step proc_abi /tmp/proc_abi && grep -E "^DIFF|differ" "$OUT/proc_abi.log"
for m in mlp_tiny bert_tiny squeezenet1_1 mobilenet_v3_small; do
  step "check_$m" "$B/brrr" run "examples/$m/model.onnx" --backend cuda \
    --data "examples/$m/test_data_set_0" --check
done
step bench_bert_tiny "$B/brrr" bench examples/bert_tiny/model.onnx --backend cuda --iterations 200
step run_device "$B/tests/brrr_tests" --gtest_filter='SessionRunDevice*'
step cuda_plan_nvrtc "$B/tests/brrr_tests" --gtest_filter='CudaPlan.*:CudaNvrtc.*:CudaRuntime.*'
STEP_S=${SWEEP_S:-300} step sweep "$B/tests/brrr_tests" --gtest_filter='Sweep/BackendOps.*'
grep -h "runs on the host\|host fallback" "$OUT"/*.log | sort | uniq -c | sort -rn | head -15
echo "== table (total $(( $(date +%s) - T0 )) s)"
printf '%s\n' "${rows[@]}"
