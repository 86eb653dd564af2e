#!/usr/bin/env bash
# One device call, or a part of one: the warp-specialized wgmma GEMM alone against cuBLASLt
# (wgmma_micro.cu), no brrr build needed. SHAPES: "M N K ACT RES" groups separated by ';' (ACT 0
# bias, 3 bias + erf GELU; RES 1 adds a residual). Default: BERT-base's four layer GEMMs at batch
# 32 (4096 rows), GPT-2's Q/K/V at batch 16 (2048), ViT-B/16's at batch 32 (6304), and BERT's at
# batch 1 (128 rows).
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 1
SHAPES=${SHAPES:-"4096 768 768 0 0;4096 2304 768 0 0;4096 3072 768 3 0;4096 768 3072 0 0;4096 768 768 0 1;2048 2304 768 0 0;6304 2304 768 0 0;128 2304 768 0 0"}
python3 scripts/gpu_tools/wgmma_ops.py >/tmp/wgmma_ops.inc || exit 1
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I/tmp -Xptxas -v scripts/gpu_tools/wgmma_micro.cu \
  -o /tmp/wgmma_micro -lcublasLt -lcuda 2>"$OUT/wgmma_ptxas.txt" || { tail -30 "$OUT/wgmma_ptxas.txt"; exit 1; }
grep -E "registers|spill" "$OUT/wgmma_ptxas.txt" | grep -B1 -E "spill stores" | head -12
# One process per shape, each under LIMIT seconds, so that a configuration that hangs (the cluster
# kernels come last in each) costs one shape's remaining rows, not the rest of the run.
IFS=';' read -r -a shapes <<<"$SHAPES"
for sh in "${shapes[@]}"; do
  # shellcheck disable=SC2086
  timeout "${LIMIT:-25}" /tmp/wgmma_micro $sh 2>&1 | tee -a "$OUT/wgmma_micro.txt"
  rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && echo "rc $rc ($sh)"
done
