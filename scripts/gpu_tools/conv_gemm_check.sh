#!/usr/bin/env bash
# BRRR_CONV_GEMM (16-bit 1x1 convs with channel counts that are not multiples of 8 as cuBLASLt
# GEMMs) on the device, after a build (B, default /tmp/brrr_build, with scripts/gpu_env.sh
# sourced): ShuffleNetV2 (export_heldout.py's, in H; exported first when missing) at --precision
# bf16, how many of its convs the plan runs as GEMMs and in which layout, its check against the
# reference with 1, and `brrr bench` with 1 and 0 in interleaved rounds.
#   ROUNDS (2)  H (/tmp/h)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
B=${B:-/tmp/brrr_build}
H=${H:-/tmp/h}
cd "$(dirname "$0")/../.." || exit 1
export XDG_CACHE_HOME=/tmp/brrr_xdg
M=$H/shufflenet_v2_x1_0
[ -f $M/model.onnx ] || OMP_NUM_THREADS=4 python3 scripts/models/export_heldout.py --out "$H" \
  shufflenet_v2_x1_0 > "$OUT/heldout_export.log" 2>&1
line() { tr '\n' ' ' | cut -c1-"${1:-160}"; echo; }
BRRR_CONV_GEMM=1 BRRR_DEBUG=1 timeout 60 "$B/brrr" bench $M/model.onnx --backend cuda \
  --precision bf16 --iterations 5 2>&1 | grep -E "conv" | cut -c1-220 > "$OUT/shufflenet_plan.txt"
P=$OUT/shufflenet_plan.txt
echo "shufflenet_v2 at 1: $(grep -c 'as a cuBLASLt GEMM' $P) convs as GEMMs ($(grep -c 'NCHW, one' $P)" \
  "NCHW), $(grep -c 'cuDNN conv' $P) on cuDNN ($(grep 'cuDNN conv' $P | grep -c NHWC) NHWC)"
echo -n "shufflenet_v2 bf16 BRRR_CONV_GEMM=1: "
BRRR_CONV_GEMM=1 timeout 60 "$B/brrr" run $M/model.onnx --data $M/test_data_set_0 --check \
  --backend cuda --precision bf16 --reps 3 2>&1 | grep -E '^check|rror|host' | head -2 | line
for r in $(seq "${ROUNDS:-2}"); do
  for v in 1 0; do
    echo -n "round $r shufflenet_v2 --precision bf16 BRRR_CONV_GEMM=$v: "
    BRRR_CONV_GEMM=$v timeout 60 "$B/brrr" bench $M/model.onnx --backend cuda --precision bf16 \
      --iterations 200 2>&1 | grep -E '^latency|^kernels' | line
  done
done
