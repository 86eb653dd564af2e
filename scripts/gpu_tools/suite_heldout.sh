#!/usr/bin/env bash
# One device call: the model suite against torch.compile (scripts/gpu_models.sh, its variables
# apply; BUDGET_S default 330 here), then the held-out models (scripts/models/export_heldout.py,
# exported in the background meanwhile) on the GPU: `brrr run --check --backend cuda` at fp32 and
# at --precision bf16, each line with its check result, time and any host kernel, until DEADLINE
# seconds from the start (default 550); then, time allowing, the doctor's top kernels of BERT-base
# bf16 at batch 1.
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
H=/tmp/brrr_heldout
(PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4 python3 scripts/models/export_heldout.py --out $H \
   >"$OUT/heldout_export.log" 2>&1) &
EXPORT=$!
BUDGET_S=${BUDGET_S:-330} bash scripts/gpu_models.sh
B=${B:-/tmp/brrr_build}
# gpu_models.sh ran in a child shell: its library paths did not come back.
# shellcheck source=scripts/gpu_env.sh
source scripts/gpu_env.sh
export XDG_CACHE_HOME=/tmp/brrr_xdg
wait $EXPORT
echo "== heldout exported at $(( $(date +%s) - T0 )) s: $(grep -c ' ok ' "$OUT/heldout_export.log") ok"
for d in $H/*/; do
  n=$(basename "$d")
  for p in fp32 bf16; do
    [ $(( $(date +%s) - T0 )) -gt "${DEADLINE:-550}" ] && echo "-- deadline: skipping $n $p" && continue
    pa=""; [ $p = bf16 ] && pa="--precision bf16"
    # shellcheck disable=SC2086
    r=$(timeout 90 "$B/brrr" run "$d/model.onnx" --data "$d/test_data_set_0" --check --backend cuda \
        --reps 5 $pa 2>&1 | grep -E '^time|^check|host|rror' | tr '\n' ' ' | cut -c1-420)
    echo "$n $p: $r"
  done
done | tee "$OUT/heldout.log"
D=${SUITE:-/tmp/brrr_suite}/bert_base_bf16_torchscript
if [ -f "$D/model.onnx" ] && [ $(( $(date +%s) - T0 )) -lt "${DEADLINE:-550}" ]; then
  timeout 60 "$B/brrr" doctor "$D/model.onnx" --backend cuda --top 6 >"$OUT/doctor_bert_bf16.txt" 2>&1
  sed -n '/^top /,/^class table/p' "$OUT/doctor_bert_bf16.txt"
fi
echo "== done at $(( $(date +%s) - T0 )) s"
