#!/usr/bin/env bash
# One device call: the few-row GEMM kernels alone (gemm_rows_micro.cu: the cluster-multicast kernel
# of device/gemm_rows.cuh in every configuration, the split-K cluster kernel, cuBLASLt), no brrr
# build needed. SHAPES: "M N K ACT" groups separated by ';' (default: BERT-base's four GEMMs at 128
# rows, ViT-B/16's Q/K/V at 197, ResNet-50's classifier at 1). The last lines compare the best.
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 1
SHAPES=${SHAPES:-"128 2304 768 0;128 768 768 0;128 3072 768 3;128 768 3072 0;197 2304 768 0;1 1000 2048 0"}
nvcc -O3 -std=c++17 -arch=sm_90a -Isrc -Iinclude -Xptxas -v scripts/gpu_tools/gemm_rows_micro.cu \
  -o /tmp/gemm_rows_micro -lcublasLt -lcuda 2>"$OUT/ptxas.txt" || { tail -30 "$OUT/ptxas.txt"; exit 1; }
grep -E "spill stores" "$OUT/ptxas.txt" | sort | uniq -c
# shellcheck disable=SC2046
timeout "${LIMIT:-300}" /tmp/gemm_rows_micro $(echo "$SHAPES" | tr ';' ' ') 2>&1 | tee "$OUT/gemm_rows_micro.txt"
echo "rc ${PIPESTATUS[0]}"
grep '^best' "$OUT/gemm_rows_micro.txt"
