#!/usr/bin/env bash
# One device call: brrr's flash attention kernel alone (attn_micro.cu, no brrr build needed),
# compiled once per variant (VARIANTS: space-separated NAME=NVCC_FLAGS, flags comma-separated),
# each timed on the suite's attention shapes in interleaved rounds and checked against float64;
# then Nsight Compute on one variant and shape (NCU_VARIANT, NCU_SHAPE: "BATCH SEQ CAUSAL MASK
# WARPS KSPLIT"), its stall reasons and the instructions the warps wait on (ncu_sass_top.py).
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 1
VARIANTS=${VARIANTS:-base=}
SHAPES=${SHAPES:-"32 197 0 0 4 1;16 128 1 0 4 1;32 128 0 1 4 1;1 197 0 0 2 2;1 128 0 1 2 2;1 128 1 0 2 2"}
for vv in $VARIANTS; do
  name=${vv%%=*}; flags=${vv#*=}
  # shellcheck disable=SC2046
  nvcc -O3 -std=c++17 -arch=sm_90 -Isrc -Iinclude $(echo "$flags" | tr ',' ' ') -Xptxas -v \
    scripts/gpu_tools/attn_micro.cu -o "/tmp/attn_micro_$name" 2>"/tmp/ptxas_$name.txt" ||
    { cat "/tmp/ptxas_$name.txt"; exit 1; }
  echo "$name: $(grep -A2 'flash64_bf16' "/tmp/ptxas_$name.txt" | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill stores' | tr '\n' ' ')"
done
for r in $(seq "${ROUNDS:-2}"); do
  IFS=';' read -ra SH <<<"$SHAPES"
  for s in "${SH[@]}"; do
    for vv in $VARIANTS; do
      name=${vv%%=*}
      # shellcheck disable=SC2086
      echo "round $r $name: $(timeout 60 "/tmp/attn_micro_$name" $s 300 2>&1 | tail -1)"
    done
  done
done
if [ -n "${NCU_SHAPE:-}" ] && command -v ncu >/dev/null; then
  v=${NCU_VARIANT:-base}
  # shellcheck disable=SC2086
  timeout 200 ncu --set full --import-source no -k regex:brrr_attention_flash -s 3 -c 1 -f \
    -o /tmp/ncu_micro "/tmp/attn_micro_$v" $NCU_SHAPE 20 >"$OUT/ncu_micro.log" 2>&1
  echo "ncu rc $?"
  ncu -i /tmp/ncu_micro.ncu-rep --print-details all >"$OUT/ncu_micro.txt" 2>&1
  ncu -i /tmp/ncu_micro.ncu-rep --page source --print-source sass --csv >/tmp/ncu_micro_sass.csv 2>&1
  python3 scripts/gpu_tools/ncu_sass_top.py /tmp/ncu_micro_sass.csv 45
  grep -E 'Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Memory Throughput|Compute \(SM\) Throughput|Issued Ipc|No Eligible|Warp Cycles Per|Active Warps Per|Eligible Warps|L1/TEX Hit|L2 Hit|Bank' \
    "$OUT/ncu_micro.txt" | head -40
fi
