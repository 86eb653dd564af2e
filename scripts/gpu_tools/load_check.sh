#!/usr/bin/env bash
# Warm load (issue 16: <= 1 s) of the largest suite model on the device, after a build (B, default
# /tmp/brrr_build, with scripts/gpu_env.sh sourced): Llama-1B's exports (EXPORTER, exported into
# SUITE first when missing), the fp32 one at --precision fp16 and the bf16 one as it is, each
# `brrr bench` twice (cold compile and warm load on a fresh cache folder) and once more with
# BRRR_DEBUG=1 for the warm load's build steps (the second Session's `brrr: build` lines).
#   SUITE (/tmp/brrr_suite)  DTYPES (fp32,bf16)  EXPORTER (torchscript)
#   FP32_PRECISION (fp16; empty: the fp32 export runs in float32)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
B=${B:-/tmp/brrr_build}
S=${SUITE:-/tmp/brrr_suite}
cd "$(dirname "$0")/../.." || exit 1
DTYPES=${DTYPES:-fp32,bf16}
E=${EXPORTER:-torchscript}
for d in ${DTYPES//,/ }; do
  M=$S/llama_1b_${d}_$E/model.onnx
  [ -f "$M" ] || python3 scripts/models/export.py --out "$S" --models llama_1b --dtypes "$d" \
    --exporters "$E" --no-verify --threads 8 > "$OUT/llama_export_${d}_$E.log" 2>&1 ||
    { tail -3 "$OUT/llama_export_${d}_$E.log"; continue; }
  P=(); [ "$d" = fp32 ] && [ -n "${FP32_PRECISION-fp16}" ] && P=(--precision "${FP32_PRECISION-fp16}")
  export XDG_CACHE_HOME=/tmp/brrr_xdg_load_${d}_$E
  rm -rf "$XDG_CACHE_HOME"
  for r in 1 2; do
    echo -n "llama_1b $d ${P[*]} bench $r: "
    timeout 120 "$B/brrr" bench "$M" --backend cuda "${P[@]}" --shape input_ids:1x128 \
      --iterations 10 2>&1 | grep -E '^load:' | tr '\n' ' ' | cut -c1-200; echo
  done
  BRRR_DEBUG=1 timeout 120 "$B/brrr" bench "$M" --backend cuda "${P[@]}" \
    --shape input_ids:1x128 --iterations 3 > "$OUT/load_${d}_$E.log" 2>&1
  echo "  build steps of 20 ms or more, both sessions on the warm cache (the second is bench's warm load):"
  grep -E '^brrr: build ' "$OUT/load_${d}_$E.log" |
    awk '{for (i = 3; i < NF; i++) if ($(i + 1) == "ms" && $i + 0 >= 20) print "   ", $0}'
done
