#!/usr/bin/env bash
# Weights into L2 ahead of their steps (BRRR_L2_PREFETCH) on the device, after a build (B,
# default /tmp/brrr_build, with scripts/gpu_env.sh sourced): for each suite export named in
# MODELS (bf16 TorchScript, exported into SUITE first when missing) at batch 1, `--check` with
# each mode of CHECK_MODES and the plan's prefetch line, then `brrr bench --iterations 200` with
# every mode of MODES in interleaved rounds, then the doctor's wall and top kernels for each model
# of DOCTOR at the first mode that is not 0 (its CUPTI timeline must still map the plan's steps).
#   MODELS (bert_base,resnet50,gpt2)  MODES (0,1,2,3)  CHECK_MODES (1; "" for none)  ROUNDS (2)
#   SUITE (/tmp/brrr_suite)  DOCTOR (bert_base; "" for none)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
B=${B:-/tmp/brrr_build}
S=${SUITE:-/tmp/brrr_suite}
cd "$(dirname "$0")/../.." || exit 1
export XDG_CACHE_HOME=/tmp/brrr_xdg
MODELS=${MODELS:-bert_base,resnet50,gpt2}
MODES=${MODES:-0,1,2,3}
line() { tr '\n' ' ' | cut -c1-"${1:-160}"; echo; }
shape() { case $1 in resnet50|vit_b_16) echo pixel_values:1x3x224x224 ;; *) echo input_ids:1x128 ;; esac; }
for m in ${MODELS//,/ }; do
  d=$S/${m}_bf16_torchscript
  [ -f $d/model.onnx ] || python3 scripts/models/export.py --out "$S" --models "$m" --dtypes bf16 \
    --exporters torchscript --no-verify --threads 8 > "$OUT/export_$m.log" 2>&1 || { tail -3 "$OUT/export_$m.log"; continue; }
  for v in ${CHECK_MODES-1}; do
    echo -n "$m bf16 b1 BRRR_L2_PREFETCH=$v: "
    BRRR_DEBUG=1 BRRR_L2_PREFETCH=$v timeout 90 "$B/brrr" run $d/model.onnx --data $d/test_data_set_0 \
      --check --backend cuda --reps 3 2>&1 | grep -E '^check|rror|host|L2 prefetch' | head -3 | line 260
  done
done
for r in $(seq "${ROUNDS:-2}"); do
  for m in ${MODELS//,/ }; do
    for v in ${MODES//,/ }; do
      echo -n "round $r $m bf16 b1 BRRR_L2_PREFETCH=$v: "
      BRRR_L2_PREFETCH=$v timeout 90 "$B/brrr" bench $S/${m}_bf16_torchscript/model.onnx --backend cuda \
        --iterations 200 --shape "$(shape $m)" 2>&1 | grep -E '^latency' | line
    done
  done
done
v=$(echo "${MODES//,/ }" | tr ' ' '\n' | grep -v '^0$' | head -1)
D=${DOCTOR-bert_base}
for m in ${D//,/ }; do
  f=$OUT/doctor_prefetch_$m.txt
  BRRR_L2_PREFETCH=$v timeout 150 "$B/brrr" doctor $S/${m}_bf16_torchscript/model.onnx --backend cuda \
    --shape "$(shape $m)" --top 8 > "$f" 2>&1
  echo "== doctor $m BRRR_L2_PREFETCH=$v"; grep -E '^wall|^timing' "$f" | cut -c1-200
  sed -n '/^top /,/^class table/p' "$f" | grep -v 'small grid' | head -10 | cut -c1-150
done
