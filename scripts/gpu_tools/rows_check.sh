#!/usr/bin/env bash
# One device call for the multicast small-M GEMM (device/gemm_rows.cuh): the kernel alone against
# cuBLASLt (gemm_rows_micro.sh, LIMIT seconds), then brrr built, the doctor and the bench on
# BERT-base bf16 b1 under the configurations BE (doctor_configs.sh), then the tests TESTS.
export OUT=${OUT:-/tmp/o}; T0=$(date +%s)
[ "${MICRO:-1}" = 1 ] && LIMIT=${LIMIT:-150} bash scripts/gpu_tools/gemm_rows_micro.sh 2>&1 | grep -vE '^ptxas' | tail -${MICRO_LINES:-120}
echo "== micro done at $(( $(date +%s) - T0 )) s"
export BE=${BE:-"base=BRRR_SMALL_M_GEMM=0 mc=BRRR_SMALL_M_GEMM=1,BRRR_SMALL_M_KERNEL=multicast"}
R= EXPORT_MODELS=bert_base bash scripts/gpu_tools/doctor_configs.sh
for c in $BE; do
  f=$OUT/doctor_bert_base_${c%%=*}.txt
  echo "-- $c"; grep -E '^(wall|idle)|gemm|small-M' "$f" | head -${DOCTOR_LINES:-14} | cut -c1-200
done
# CHECK: a configuration (ENV,ENV) whose BERT-base run is checked against the reference.
if [ -n "${CHECK:-}" ]; then
  echo "check ${CHECK}: $(env $(echo "$CHECK" | tr , ' ') timeout 120 ${B:-/tmp/brrr_build}/brrr run /tmp/brrr_suite/bert_base_bf16_torchscript/model.onnx \
    --backend cuda --shape input_ids:1x128 --check 2>&1 | grep -iE 'check|pass|fail|error' | head -3)"
fi
if [ -n "${TESTS:-}" ]; then
  TARGETS=brrr_tests source scripts/gpu_build.sh || exit 1
  timeout "${TEST_LIMIT:-200}" $B/tests/brrr_tests --gtest_filter="$TESTS" 2>&1 | grep -E '^\[  (FAILED|PASSED) |OK \]|Failure|Expected|Which is|error' | head -60
fi
echo "== end at $(( $(date +%s) - T0 )) s"
