#!/usr/bin/env bash
# One device call for the CUDA backend: extract the dev packages, configure + build the full tree,
# brrr_tests (CUDA tests first; they must pass, not skip), brrr bench --backend cuda, the PyTorch
# side-by-side, and one combined table last.
# Usage there: cd .gpu_stage && bash scripts/gpu_full.sh   (writes logs to $OUT; SKIP_CUDA_TESTS,
# SKIP_CPU_TESTS and SKIP_TORCH set to 1 skip those parts, BENCH_ITEMS picks workloads,
# REST_FILTER narrows the background tests (default: every test but the Cuda* ones) and REST_S
# limits them (default 300 s; the backend sweep alone, with its CUDA modes, takes longer))
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export XDG_CACHE_HOME=/tmp/brrr_xdg
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
source scripts/gpu_build.sh
echo "== built in $(( $(date +%s) - T0 )) s"
# CPU tests in the background (they use no GPU) while the CUDA tests and the bench run.
if [ "${SKIP_CPU_TESTS:-0}" != 1 ]; then
  (timeout ${REST_S:-300} $B/tests/brrr_tests --gtest_filter="${REST_FILTER:--Cuda*}" > "$OUT/tests_rest.log" 2>&1) &
  REST=$!
fi
if [ "${SKIP_CUDA_TESTS:-0}" != 1 ]; then
  timeout ${CUDA_TESTS_S:-240} $B/tests/brrr_tests --gtest_filter='Cuda*' 2>&1 | tee "$OUT/tests_cuda.log" |
    grep -E '^\[  (FAILED|SKIPPED) |^\[==========\]|^\[  PASSED|Failure|Expected|Which is|error|output' | head -60
fi
echo "== tests done at $(( $(date +%s) - T0 )) s"
echo "== example models on cuda, --check against the PyTorch fp32 outputs"
for m in mlp_tiny bert_tiny squeezenet1_1 mobilenet_v3_small; do
  r=$(timeout 120 $B/brrr run examples/$m/model.onnx --data examples/$m/test_data_set_0 --check \
      --backend cuda 2>&1 | grep -E "^check:|^time:|error" | tr '\n' ' ')
  echo "$m: $r"
done
timeout 170 $B/brrr bench --backend cuda --reps ${BENCH_REPS:-20} --json "$OUT/brrr_bench.json" ${BENCH_ITEMS:-} 2>&1 | tee "$OUT/bench.log"
echo "== bench done at $(( $(date +%s) - T0 )) s"
if [ "${SKIP_TORCH:-0}" != 1 ]; then
  PYTHONUNBUFFERED=1 BRRR_TORCH_JSON="$OUT/torch.json" BRRR_TORCH_BUDGET_S=${BRRR_TORCH_BUDGET_S:-140} \
    timeout 180 python3 scripts/gpu_side_by_side.py 2>&1 | tee "$OUT/torch.log" | grep -v Warning | tail -30
fi
[ -n "${REST:-}" ] && wait $REST
echo "CPU tests:"; grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]' "$OUT/tests_rest.log" | tail -8
grep -E -A4 'Failure|exception' "$OUT/tests_rest.log" | head -40
grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/tests_cuda.log" "$OUT/tests_rest.log" 2>/dev/null
python3 scripts/gpu_table.py "$OUT/brrr_bench.json" "$OUT/torch.json"
echo "== total $(( $(date +%s) - T0 )) s"
