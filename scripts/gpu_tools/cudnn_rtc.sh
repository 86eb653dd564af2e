#!/usr/bin/env bash
# Temp: cuDNN SDPA without runtime-compiled engines: tests, bench at bf16 both ways, doctor --compare.
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/cudnn_rtc.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
S=/tmp/brrr_suite
PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models bert_base,gpt2 --dtypes fp32 \
  --exporters torchscript --no-verify --threads 8 >"$OUT/export.log" 2>&1 &
EXPORT=$!
source scripts/gpu_build.sh || exit 1
echo "== built at $(el) s"
timeout 120 $B/tests/brrr_tests --gtest_filter='FusedAttentionCuda.*:CudaAttention*' >$OUT/tests.log 2>&1
echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/tests.log | tr '\n' ' ')"; grep -E "^\[  FAILED|Failure" -A4 $OUT/tests.log | head -20
wait $EXPORT; echo "== exported at $(el) s"
export XDG_CACHE_HOME=/tmp/brrr_xdg
for m in bert_base; do
  f=$(ls $S/${m}_fp32_torchscript/*.onnx | head -1)
  case $m in vit*) sh=pixel_values:BATCHx3x224x224;; *) sh=input_ids:BATCHx128;; esac
  for b in 1 32; do
    for r in 1; do for rtc in 0 1; do
      BRRR_CUDNN_RUNTIME_COMPILED=$rtc timeout 100 $B/brrr bench $f --backend cuda --precision bf16 --shape ${sh/BATCH/$b} --duration 1 --json $OUT/b.json >/dev/null 2>$OUT/b.err || tail -2 $OUT/b.err
      echo "$m b$b rtc=$rtc: $(python3 -c "import json;j=json.load(open('$OUT/b.json'));r=j[0];print(r['latency_ms']['median'],'ms kernels',r['kernels'])" 2>&1 | cut -c1-200)"
    done; done
  done
  BRRR_DEBUG=0 $B/brrr run $f --backend cuda --precision bf16 --shape ${sh/BATCH/1} 2>&1 | grep -i "sdpa\|attention" | head -3 | cut -c1-200
done
for m in gpt2 bert_base vit_b_16; do
  [ "$(el)" -gt 230 ] && { echo "-- deadline $m"; continue; }
  f=$(ls $S/${m}_fp32_torchscript/*.onnx | head -1)
  case $m in vit*) sh=pixel_values:1x3x224x224;; *) sh=input_ids:1x128;; esac
  timeout 120 $B/brrr doctor $f --backend cuda --shape $sh --compare >$OUT/c.txt 2>&1; echo "$m compare rc $?"
  grep -E "^  (fusion|static_plan|faster_units) +[0-9.]+ +[0-9.]+ +[0-9.]+ +[-0-9.]+%" $OUT/c.txt | cut -c1-150
done
rm -f $OUT/b.json $OUT/b.err $OUT/c.txt
