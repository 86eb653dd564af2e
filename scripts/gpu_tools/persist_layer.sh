#!/usr/bin/env bash
# One device call, or a part of one: BERT-base's encoder at batch 1 (128 rows) as one persistent
# kernel (persist_layer.cu), checked against a float32 reference, then timed; no brrr build
# needed. RUNS: ';'-separated "LAYERS S_QKV S_OUT S_UP S_DOWN [red]" (the K slices of each GEMM;
# red: sums by red.add that the next phase reads, else partials summed by each tile's last item).
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 1
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xptxas -v scripts/gpu_tools/persist_layer.cu \
  -o /tmp/persist_layer 2>"$OUT/persist_layer_ptxas.txt" || { tail -30 "$OUT/persist_layer_ptxas.txt"; exit 1; }
grep -A2 encoder_kernel "$OUT/persist_layer_ptxas.txt" | grep -E "registers|spill"
IFS=';' read -r -a runs <<<"${RUNS:-1 4 12 3 12 red;12 4 12 3 12 red;12 3 6 2 8 red;12 2 4 1 4 red;12 4 12 3 12;12 3 6 2 8}"
for r in "${runs[@]}"; do
  # shellcheck disable=SC2086
  timeout "${LIMIT:-30}" /tmp/persist_layer $r 2>&1 | tee -a "$OUT/persist_layer.txt"
  echo "rc ${PIPESTATUS[0]}"
done
