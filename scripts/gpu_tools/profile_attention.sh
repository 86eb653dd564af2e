#!/usr/bin/env bash
# One device call: build, export BERT-base bf16, the doctor's CUPTI kernel table for it at batch 1
# and 32 with the fused attention off and on (what each attention kernel costs against the
# unfused chain), then the CUDA suite N times at once with cold caches (scripts/gpu_parallel.sh).
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/profile.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
S=/tmp/brrr_suite
PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models bert_base --dtypes bf16 \
  --exporters torchscript --no-verify --threads 8 >"$OUT/export.log" 2>&1 &
EXPORT=$!
source scripts/gpu_build.sh || exit 1
echo "== built in $(( $(date +%s) - T0 )) s"
wait $EXPORT; echo "== exported at $(( $(date +%s) - T0 )) s"
export XDG_CACHE_HOME=/tmp/brrr_xdg_profile
M=$S/bert_base_bf16_torchscript/model.onnx
for bs in 1 32; do for v in 0 1; do
  f="$OUT/doctor_b${bs}_attn$v.txt"
  BRRR_FUSED_ATTENTION=$v timeout 90 "$B/brrr" doctor "$M" --backend cuda --shape input_ids:${bs}x128 \
    --top 40 --json "$OUT/doctor_b${bs}_attn$v.json" >"$f" 2>&1
  echo "doctor b$bs attn=$v rc $?: $(grep -m1 '^wall' "$f")"
done; done
echo "== before the suite: $(( $(date +%s) - T0 )) s"
FILTER=${FILTER:-'Cuda*:DoctorCuda*:FusedAttention*:Gpu/*'} N=${N:-10} TIMEOUT=${TIMEOUT:-300} \
  bash scripts/gpu_parallel.sh 2>&1 | grep -v '^-- '
