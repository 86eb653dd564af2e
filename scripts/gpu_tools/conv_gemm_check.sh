#!/usr/bin/env bash
# Convs as GEMMs on the device (BRRR_CONV_GEMM), after a build (B, default /tmp/brrr_build, with
# scripts/gpu_env.sh sourced): ResNet-50 bf16 (TorchScript export in SUITE) checked against its
# reference at BRRR_CONV_GEMM=2 (timed) and 3 (every candidate a GEMM), then `brrr bench` at batch
# 1 with 1, 2 and 3 in interleaved rounds and the plan's conv lines at 2; ShuffleNetV2 at
# --precision bf16 (export_heldout.py's, in H) with 1 and 0, and its check at 1. Exports first
# when missing.
#   ROUNDS (2)  SUITE (/tmp/brrr_suite)  H (/tmp/h)
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
for r in $(seq "${ROUNDS:-2}"); do
  for v in 1 2 3; do
    echo -n "round $r resnet50 bf16 b1 BRRR_CONV_GEMM=$v: "
    BRRR_CONV_GEMM=$v timeout 60 "$B/brrr" bench $R/model.onnx --backend cuda --iterations 200 2>&1 |
      grep -E '^latency|^kernels' | line
  done
done
BRRR_CONV_GEMM=2 BRRR_DEBUG=1 timeout 60 "$B/brrr" bench $R/model.onnx --backend cuda \
  --iterations 5 2>&1 | grep -E "conv" | cut -c1-220 > "$OUT/resnet_plan_gemm2.txt"
grep -c "as a cuBLASLt GEMM" "$OUT/resnet_plan_gemm2.txt" | sed 's/^/resnet50 convs kept as GEMMs at 2: /'
for r in $(seq "${ROUNDS:-2}"); do
  for v in 1 0; do
    echo -n "round $r shufflenet_v2 --precision bf16 BRRR_CONV_GEMM=$v: "
    BRRR_CONV_GEMM=$v timeout 60 "$B/brrr" bench $M/model.onnx --backend cuda --precision bf16 \
      --iterations 200 2>&1 | grep -E '^latency|^kernels' | line
  done
done
BRRR_DEBUG=1 timeout 60 "$B/brrr" bench $M/model.onnx --backend cuda --precision bf16 \
  --iterations 5 2>&1 | grep -E "conv" | cut -c1-220 > "$OUT/shufflenet_plan.txt"
echo "shufflenet_v2 convs as GEMMs at 1: $(grep -c 'as a cuBLASLt GEMM' "$OUT/shufflenet_plan.txt")," \
  "NHWC $(grep -c 'NHWC' "$OUT/shufflenet_plan.txt"), on cuDNN $(grep -c 'cuDNN conv' "$OUT/shufflenet_plan.txt")"
echo -n "shufflenet_v2 bf16 BRRR_CONV_GEMM=1: "
timeout 60 "$B/brrr" run $M/model.onnx --data $M/test_data_set_0 --check --backend cuda \
  --precision bf16 --reps 3 2>&1 | grep -E '^check|rror|host' | head -2 | line
