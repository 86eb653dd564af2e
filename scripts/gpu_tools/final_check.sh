#!/usr/bin/env bash
# One device call at a session's end: build (BERT-base bf16 exported beside it), the attention,
# CUPTI and GEMM-precision tests, BERT-base bf16 with the fused attention on and off, the doctor's
# CUPTI timeline on bert_tiny, then the CUDA suite N times at once (scripts/gpu_parallel.sh).
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
# Everything printed is also kept under $OUT as it comes, so a call cut short still returns it.
exec > >(tee -a "$OUT/final.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
S=/tmp/brrr_suite
PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models bert_base --dtypes bf16 \
  --exporters torchscript --no-verify --threads 8 >"$OUT/export.log" 2>&1 &
EXPORT=$!
source scripts/gpu_build.sh || exit 1
echo "== built in $(( $(date +%s) - T0 )) s"
export XDG_CACHE_HOME=/tmp/brrr_xdg_final
timeout 150 "$B/tests/brrr_tests" --gtest_filter='FusedAttention*:Cupti*:Gpu/Cupti*:CudaSession.CopyKernelsAliasTheirInput:CudaSession.LibraryGemmPrecisions*' \
  >"$OUT/tests.log" 2>&1
echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/tests.log" | tr '\n' ' ')"
grep -E '^\[  (FAILED|SKIPPED) \] [A-Z]' "$OUT/tests.log" | sort -u | head; grep -m3 -i "fallback" "$OUT/tests.log"
timeout 60 "$B/brrr" doctor examples/bert_tiny/model.onnx --backend cuda >"$OUT/doctor_bert_tiny.txt" 2>&1
echo "doctor rc $?: $(grep -m1 -i 'timing:' "$OUT/doctor_bert_tiny.txt" | cut -c1-220)"
grep -i -m2 "between kernels\|total" "$OUT/doctor_bert_tiny.txt"
wait $EXPORT; echo "== exported at $(( $(date +%s) - T0 )) s"
M=$S/bert_base_bf16_torchscript/model.onnx
for bs in 1 32; do for v in 0 1 0 1; do
  echo "bert_base bf16 b$bs attn=$v: $(BRRR_FUSED_ATTENTION=$v timeout 60 "$B/brrr" bench "$M" \
    --backend cuda --shape input_ids:${bs}x128 --iterations 300 2>&1 | grep -E 'median|error' | cut -c1-120)"
done; done
echo "== before the suite: $(( $(date +%s) - T0 )) s"
FILTER='Cuda*:DoctorCuda*:FusedAttention*:Gpu/*' N=${N:-10} TIMEOUT=${TIMEOUT:-280} \
  bash scripts/gpu_parallel.sh 2>&1 | tail -$(( ${N:-10} * 2 + 2 ))
