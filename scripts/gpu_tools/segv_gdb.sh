#!/usr/bin/env bash
# Temp: the doctor --compare crash on GPT-2 fp32 under cuda-gdb, backtrace.
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}; mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 1
S=/tmp/brrr_suite
PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models gpt2 --dtypes fp32 \
  --exporters torchscript --no-verify --threads 8 >"$OUT/export.log" 2>&1 &
EXPORT=$!
EXTRA_CMAKE="-DCMAKE_CXX_FLAGS=-g1" source scripts/gpu_build.sh || exit 1
wait $EXPORT
export XDG_CACHE_HOME=/tmp/brrr_xdg
f=$(ls $S/gpt2_fp32_torchscript/*.onnx | head -1)
$B/brrr probe --backend cuda >/dev/null 2>&1
timeout 300 cuda-gdb -batch -ex run -ex bt -ex "info threads" --args $B/brrr doctor $f --backend cuda --shape input_ids:1x128 --compare 2>&1 | grep -v "^\[New Thread\|^\[Thread" | tail -60
