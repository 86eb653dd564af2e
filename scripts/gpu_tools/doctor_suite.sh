#!/usr/bin/env bash
# One device call for issue 19's targets on the GPU suite: build brrr, export the suite (fp32 and
# bf16 TorchScript by default, scripts/models/export.py), then scripts/doctor_check.py --backend
# cuda on each export at batch 1: `brrr doctor --compare --json` (fusion, CUDA graphs and, on an
# fp32 model, the --precision that the faster-units remedy names, each predicted against
# measured), the class table's total against the wall, efficiencies above 100% without a reason.
#   MODELS (bert_base,gpt2,resnet50,vit_b_16)  DTYPES (fp32,bf16)  REPS (20)  DEADLINE (540 s)
# Here: bash scripts/gpu_devdeps.sh once; the call carries [".devdeps"].
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 1
export XDG_CACHE_HOME=/tmp/brrr_xdg
T0=$(date +%s)
MODELS=${MODELS:-bert_base,gpt2,resnet50,vit_b_16}
DTYPES=${DTYPES:-fp32,bf16}
SUITE=${SUITE:-/tmp/brrr_suite}
PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out "$SUITE" --models "$MODELS" \
  --dtypes "$DTYPES" --exporters torchscript --no-verify --threads 8 > "$OUT/export.log" 2>&1 &
EXPORT=$!
TARGETS=${TARGETS:-brrr_cli}
# shellcheck source=scripts/gpu_build.sh
source scripts/gpu_build.sh
wait $EXPORT || { tail -5 "$OUT/export.log"; exit 1; }
echo "== built and exported at $(( $(date +%s) - T0 )) s"
timeout 120 "$B/brrr" probe --backend cuda > "$OUT/probe.log" 2>&1 || tail -3 "$OUT/probe.log"
for m in ${MODELS//,/ }; do
  for d in ${DTYPES//,/ }; do
    [ $(( $(date +%s) - T0 )) -lt "${DEADLINE:-540}" ] || { echo "-- deadline: skipping $m $d"; continue; }
    f=$SUITE/${m}_${d}_torchscript/model.onnx
    [ -f "$f" ] || { echo "$m $d: not exported"; continue; }
    timeout 240 python3 scripts/doctor_check.py --brrr "$B/brrr" --backend cuda --reps "${REPS:-20}" \
      --keep "$OUT/doctor" "$f" 2>&1 | head -3
  done
done
echo "== done at $(( $(date +%s) - T0 )) s"
