#!/usr/bin/env bash
# Temp: brrr doctor --compare on the fp32 exports at batch 1; the checks table of each.
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/doctor_compare.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
S=/tmp/brrr_suite
MODELS=${MODELS:-bert_base,gpt2,vit_b_16,resnet50}
PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models "$MODELS" --dtypes fp32 \
  --exporters ${EXPORTERS:-torchscript} --no-verify --threads 8 >"$OUT/export.log" 2>&1 &
EXPORT=$!
if [ -n "${EXTRA_EXPORT:-}" ]; then  # models:dtypes:exporters
  IFS=: read -r em ed ee <<<"$EXTRA_EXPORT"
  PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models $em --dtypes $ed \
    --exporters $ee --no-verify --threads 8 >"$OUT/export2.log" 2>&1 &
  EXPORT2=$!
fi
EXTRA_CMAKE="-DCMAKE_CXX_FLAGS=-g1" source scripts/gpu_build.sh || exit 1
gcc -O1 -g -shared -fPIC -o /tmp/segv_backtrace.so scripts/gpu_tools/segv_backtrace.c
if [ -n "${TESTS:-}" ]; then
  timeout 200 $B/tests/brrr_tests --gtest_filter="$TESTS" >$OUT/tests.log 2>&1
  echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/tests.log | tr '\n' ' ')"
  grep -E "^\[  FAILED" $OUT/tests.log | head
fi
echo "== built at $(el) s"; wait $EXPORT; echo "== exported at $(el) s rc $?"; [ -n "${EXPORT2:-}" ] && wait $EXPORT2
export XDG_CACHE_HOME=/tmp/brrr_xdg
$B/brrr probe --backend cuda --refresh 2>&1 | grep -E "launch|graph|dispatch"
if [ -n "${PLAIN:-}" ]; then
  f=$(ls $S/$PLAIN/*.onnx | head -1)
  timeout 200 $B/brrr doctor $f --backend cuda --shape input_ids:1x128 2>&1 | grep -A8 "^remedies" | cut -c1-400
  echo "== plain at $(el) s"
fi
for d in $S/*_fp32_${EXPORTERS:-torchscript}; do
  m=$(basename $d)
  [ "$(el)" -gt "${DEADLINE:-500}" ] && { echo "-- deadline: $m"; continue; }
  case $m in resnet*|vit*) sh=pixel_values:1x3x224x224;; llama*) sh=input_ids:1x128;; *) sh=input_ids:1x128;; esac
  f=$(ls $d/*.onnx | head -1)
  echo "== $m"
  LD_PRELOAD=/tmp/segv_backtrace.so timeout 300 $B/brrr doctor $f --backend cuda --shape $sh --compare >$OUT/$m.compare.txt 2>&1
  echo "rc $?"; grep -A3 -E "^  (fusion|static_plan|faster_units) +[0-9.]+ +[0-9.]+ +[0-9.]+ +[-0-9.]+%" $OUT/$m.compare.txt | cut -c1-300
  grep -i "error\|not checked\|fail" $OUT/$m.compare.txt | head -5 | cut -c1-300
  if grep -q "segv_backtrace" $OUT/$m.compare.txt; then
    grep -B3 "segv_backtrace" $OUT/$m.compare.txt | cut -c1-200
    sed -n '/segv_backtrace/,/end of backtrace/p' $OUT/$m.compare.txt | while read -r line; do
      off=$(echo "$line" | grep -o "brrr(+0x[0-9a-f]*)" | grep -o "0x[0-9a-f]*")
      if [ -n "$off" ]; then echo "  $(addr2line -f -C -e $B/brrr $off | head -1 | cut -c1-150)"
      else echo "  ${line:0:150}"; fi
    done | head -40
  fi
  rm -f $OUT/$m.compare.txt
  echo "== $m at $(el) s"
done
for spec in ${EXTRA_DOCTOR:-}; do  # export:shape, plain doctor, the top of the report
  m=${spec%%:*}; sh=${spec#*:}; f=$(ls $S/$m/*.onnx | head -1)
  echo "== doctor $m $sh"
  timeout 200 $B/brrr doctor $f --backend cuda --shape $sh --top 25 >$OUT/$m.doctor.txt 2>&1; echo "rc $?"
  sed -n '/^wall/,/^remedies/p' $OUT/$m.doctor.txt | cut -c1-200 | head -60
done
