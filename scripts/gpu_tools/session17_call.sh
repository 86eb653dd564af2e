#!/usr/bin/env bash
# One device call of the seventeenth session: build, small_m_check.sh under CONFIGS, then the
# small-M tests with the time left.
export OUT=${OUT:-/tmp/o}; T0=$(date +%s)
S=/tmp/brrr_suite
(PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models bert_base --dtypes bf16 --exporters torchscript --no-verify --threads 8 >$OUT/export0.log 2>&1) &
source scripts/gpu_build.sh || exit 1
echo "built at $(( $(date +%s) - T0 )) s"
wait
export B
MODELS=bert_base DOCTOR=bert_base ROUNDS=${ROUNDS:-1} CONFIGS=${CONFIGS:-"base=BRRR_SMALL_M_GEMM=0 sm1=BRRR_SMALL_M_GEMM=1 deep=BRRR_SMALL_M_GEMM=1,BRRR_SMALL_M_STAGES=6,BRRR_SMALL_M_ONE_PER_SM=1 kw2=BRRR_SMALL_M_GEMM=1,BRRR_SMALL_M_KWARPS=2 deepkw=BRRR_SMALL_M_GEMM=1,BRRR_SMALL_M_STAGES=6,BRRR_SMALL_M_ONE_PER_SM=1,BRRR_SMALL_M_KWARPS=2"} \
  timeout $((${SCRIPT_END:-470} - $(date +%s) + T0)) bash scripts/gpu_tools/small_m_check.sh 2>&1 | tail -150
echo "== tests at $(( $(date +%s) - T0 )) s"
timeout $((585 - $(date +%s) + T0)) $B/tests/brrr_tests --gtest_filter="${TESTS:-CudaSession.SmallM*:CudaCodegen.SmallM*}" 2>&1 |
  grep -E '^\[  (PASSED|FAILED|  OK) |Failure|Expected|Which is|actual' | head -30
echo "== end at $(( $(date +%s) - T0 )) s"
