#!/usr/bin/env bash
# Convs as GEMMs on the device (BRRR_CONV_GEMM), after a build (B, default /tmp/brrr_build, with
# scripts/gpu_env.sh sourced). ResNet-50 bf16 (the suite's TorchScript export in SUITE): checked
# against its reference at 2 (each candidate timed against cuDNN at build) and 3 (every candidate
# a GEMM), the plan's conv lines at 2, `brrr bench` at batch 1 (and 64 with R64=1) with 1, 2 and 3
# in interleaved rounds. ShuffleNetV2 (export_heldout.py's, in H) at --precision bf16: how many of
# its convs run as GEMMs and in which layout at 1, its check at 1, `brrr bench` with 1 and 0.
# Exports first when missing.
#   ROUNDS (2)  SUITE (/tmp/brrr_suite)  H (/tmp/h)  R64 (0)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
B=${B:-/tmp/brrr_build}
S=${SUITE:-/tmp/brrr_suite}
H=${H:-/tmp/h}
cd "$(dirname "$0")/../.." || exit 1
export XDG_CACHE_HOME=/tmp/brrr_xdg
R=$S/resnet50_bf16_torchscript
[ -f $R/model.onnx ] || python3 scripts/models/export.py --out "$S" --models resnet50 --dtypes bf16 \
  --exporters torchscript --no-verify --threads 4 > "$OUT/resnet_export.log" 2>&1
M=$H/shufflenet_v2_x1_0
[ -f $M/model.onnx ] || OMP_NUM_THREADS=4 python3 scripts/models/export_heldout.py --out "$H" \
  shufflenet_v2_x1_0 > "$OUT/heldout_export.log" 2>&1
line() { tr '\n' ' ' | cut -c1-"${1:-160}"; echo; }
for v in 2 3; do
  echo -n "resnet50 bf16 b1 BRRR_CONV_GEMM=$v: "
  BRRR_CONV_GEMM=$v timeout 60 "$B/brrr" run $R/model.onnx --data $R/test_data_set_0 --check \
    --backend cuda --reps 3 2>&1 | grep -E '^check|rror|host' | head -2 | line
done
BRRR_CONV_GEMM=2 BRRR_DEBUG=1 timeout 60 "$B/brrr" bench $R/model.onnx --backend cuda \
  --iterations 5 2>&1 | grep -E "conv" | cut -c1-240 > "$OUT/resnet_plan_gemm2.txt"
echo "resnet50 b1 at 2: $(grep -c 'as a cuBLASLt GEMM' "$OUT/resnet_plan_gemm2.txt") of" \
  "$(grep -c 'timed: ' "$OUT/resnet_plan_gemm2.txt") timed convs kept as GEMMs"
grep 'as a cuBLASLt GEMM' "$OUT/resnet_plan_gemm2.txt" | head -8 | cut -c1-200
BATCH_LIST=1
[ "${R64:-0}" = 1 ] && BATCH_LIST="1 64"
for r in $(seq "${ROUNDS:-2}"); do
  for b in $BATCH_LIST; do
    for v in 1 2 3; do
      echo -n "round $r resnet50 bf16 b$b BRRR_CONV_GEMM=$v: "
      BRRR_CONV_GEMM=$v timeout 90 "$B/brrr" bench $R/model.onnx --backend cuda --iterations 200 \
        --shape "pixel_values:${b}x3x224x224" 2>&1 | grep -E '^latency|^kernels' | line
    done
  done
done
BRRR_DEBUG=1 timeout 60 "$B/brrr" bench $M/model.onnx --backend cuda --precision bf16 \
  --iterations 5 2>&1 | grep -E "conv" | cut -c1-220 > "$OUT/shufflenet_plan.txt"
P=$OUT/shufflenet_plan.txt
echo "shufflenet_v2 at 1: $(grep -c 'as a cuBLASLt GEMM' $P) convs as GEMMs ($(grep -c 'NCHW, one' $P)" \
  "NCHW), $(grep -c 'cuDNN conv' $P) on cuDNN ($(grep 'cuDNN conv' $P | grep -c NHWC) NHWC)"
echo -n "shufflenet_v2 bf16 BRRR_CONV_GEMM=1: "
timeout 60 "$B/brrr" run $M/model.onnx --data $M/test_data_set_0 --check --backend cuda \
  --precision bf16 --reps 3 2>&1 | grep -E '^check|rror|host' | head -2 | line
for r in $(seq "${ROUNDS:-2}"); do
  for v in 1 0; do
    echo -n "round $r shufflenet_v2 --precision bf16 BRRR_CONV_GEMM=$v: "
    BRRR_CONV_GEMM=$v timeout 60 "$B/brrr" bench $M/model.onnx --backend cuda --precision bf16 \
      --iterations 200 2>&1 | grep -E '^latency|^kernels' | line
  done
done
