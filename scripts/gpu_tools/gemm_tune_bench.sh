#!/usr/bin/env bash
# One device call for cuBLASLt GEMM tuning (issue 17 item 5): build, the tuning tests, then the
# GEMM workload of gemm_tune_model.py (BERT-base's 768x768, 768x3072 and 3072x768 GEMMs at M=128,
# bf16) and, with BERT=1 (default), BERT-base bf16 at batch 1 and 32, each with BRRR_GEMM_TUNE=0
# and 1 in interleaved rounds. `brrr bench` runs a cold session on an empty cache (its time
# includes the tuning) and then a warm one on that cache (the tuned choices read back), whose
# runs are timed. The doctor's CUPTI table shows the per-GEMM times.
#   OUT (default /tmp/brrr_gpu_out)  ROUNDS (default 5)  BERT (default 1)
#   FILTER=the tests run first  PREBUILT=build folder with brrr and tests/brrr_tests already built
#   (skips the build; DEPS: the folder of runtime .debs, default .devdeps)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gemm_tune.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
S=/tmp/brrr_suite
BERT=${BERT:-1}
if [ "$BERT" = 1 ]; then
  PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models bert_base --dtypes bf16 \
    --exporters torchscript --no-verify --threads 8 >"$OUT/export.log" 2>&1 &
  EXPORT=$!
fi
if [ -n "${PREBUILT:-}" ]; then  # a build folder carried from elsewhere: only its libraries
  B=$PREBUILT
  P=/opt/deps
  if [ ! -d $P/usr ]; then mkdir -p $P && for f in "${DEPS:-.devdeps}"/*.deb; do dpkg -x "$f" $P; done; fi
  export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  ldd "$B/tests/brrr_tests" | grep 'not found' && exit 1
else
  source scripts/gpu_build.sh || exit 1
fi
echo "== built in $(( $(date +%s) - T0 )) s"
export XDG_CACHE_HOME=/tmp/brrr_xdg_gemmtune
rm -rf "$XDG_CACHE_HOME"
timeout 240 "$B/tests/brrr_tests" --gtest_filter="${FILTER:-GemmTune*:CudaGemmTune*:CudaGemm*:CudaSession*}" \
  >"$OUT/tests.log" 2>&1
echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [A-Z]' "$OUT/tests.log" | sort -u | head
grep -E '^  (bf16|fp32) epilogue' "$OUT/tests.log" | head -8
G=/tmp/gemm_tune_m128.onnx
python3 scripts/gpu_tools/gemm_tune_model.py --out $G --m 128 || exit 1
bench() {  # bench MODEL TUNE SHAPE...
  local m=$1 v=$2; shift 2
  BRRR_GEMM_TUNE=$v timeout 120 "$B/brrr" bench "$m" --backend cuda --precision bf16 "$@" \
    --iterations 2000 2>&1 | grep -E '^(load|latency)|rror' |
    sed -E 's/^load: model file [^,]*, //; s/\(an empty kernel cache[^)]*\)//; s/\(a second session[^)]*\)//; s/ \(percentiles.*//'
}
echo "== GEMM workload: 12 x (768x768, 768x3072, 3072x768) bf16 at M=128, ${ROUNDS:-5} rounds"
for r in $(seq "${ROUNDS:-5}"); do for v in 0 1; do
  echo "round $r tune=$v: $(bench $G $v | tr '\n' ' ')"
done; done
# The chosen algorithm per GEMM (plan summary under BRRR_DEBUG=1) and the per-kernel times.
BRRR_DEBUG=1 timeout 60 "$B/brrr" bench $G --backend cuda --precision bf16 --iterations 10 \
  >/dev/null 2>"$OUT/debug_tune1.txt"
echo "tuning lines (BRRR_DEBUG=1, cold session):"; grep -m6 'tuned GEMM' "$OUT/debug_tune1.txt"
echo "plan summary GEMM lines:"; grep -m6 'cuBLASLt' "$OUT/debug_tune1.txt"
for v in 0 1; do
  BRRR_GEMM_TUNE=$v timeout 90 "$B/brrr" doctor $G --backend cuda --precision bf16 --top 8 \
    >"$OUT/doctor_gemm_tune$v.txt" 2>&1
  echo "doctor tune=$v rc $?:"; grep -E -m12 'MatMul|wall' "$OUT/doctor_gemm_tune$v.txt"
done
if [ "$BERT" = 1 ]; then
  wait $EXPORT; echo "== exported at $(( $(date +%s) - T0 )) s"
  M=$S/bert_base_bf16_torchscript/model.onnx
  for bs in 1 32; do for r in 1 2 3; do for v in 0 1; do
    echo "bert_base bf16 b$bs round $r tune=$v: $(bench "$M" $v --shape input_ids:${bs}x128 | tr '\n' ' ')"
  done; done; done
  for v in 0 1; do
    BRRR_GEMM_TUNE=$v timeout 90 "$B/brrr" doctor "$M" --backend cuda --shape input_ids:1x128 \
      --top 12 >"$OUT/doctor_bert_b1_tune$v.txt" 2>&1
    echo "doctor bert b1 tune=$v rc $?: $(grep -m1 '^wall' "$OUT/doctor_bert_b1_tune$v.txt")"
  done
fi
echo "== done in $(( $(date +%s) - T0 )) s"
