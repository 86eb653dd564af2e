#!/usr/bin/env bash
# One device call, or a part of one: the building blocks of a persistent whole-block kernel
# (persist_micro.cu: weights streamed through shared memory by bulk copies at several pipeline
# depths against plain reads, a grid-wide barrier, an SM-to-SM readiness flag), no brrr build
# needed. MB: the weight buffer's size (default 1024, far past the L2).
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 1
nvcc -O3 -std=c++17 -arch=sm_90a -Xptxas -v scripts/gpu_tools/persist_micro.cu -o /tmp/persist_micro \
  2>"$OUT/persist_ptxas.txt" || { tail -30 "$OUT/persist_ptxas.txt"; exit 1; }
timeout "${LIMIT:-120}" /tmp/persist_micro "${MB:-1024}" 2>&1 | tee "$OUT/persist_micro.txt"
echo "rc ${PIPESTATUS[0]}"
