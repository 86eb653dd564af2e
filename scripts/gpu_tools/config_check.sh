#!/usr/bin/env bash
# One device call that checks plan switches on real exports before they become defaults: build
# (the exports made beside it), the device tests, `brrr run --check` of every export under every
# configuration (and the fp32 exports at each of $PRECISIONS under the last one), then BERT-base bf16
# at batch 1 and 32 under each configuration in interleaved rounds, and the doctor's CUPTI table
# under the last. Every result goes to $OUT as it comes.
#   EXPORTS    model list for export.py (default bert_base,gpt2)   DTYPES (default fp32,bf16)
#   EXPORTERS  (default torchscript)
#   CONFIGS    space-separated NAME=ENV,ENV,... (default: merge, and merge with fused attention)
#   TESTS      gtest filter of the device tests to run first
#   BENCH      exports to time, space-separated (default bert_base_bf16_torchscript; empty: none);
#              BENCH_SHAPE (default pixel_values:BATCHx3x224x224 for resnet* / vit*, else
#              input_ids:BATCHx128; BATCH replaced by each of BENCH_BATCHES)
#              BENCH_BATCHES (default "1 32")   ROUNDS (default 2)
#   DEADLINE   seconds from the start after which no new check or bench starts (default 520)
#   CHECK_LAST_ONLY=1  check the exports under the last configuration only   DOCTOR=0  no doctor
#   CHECK_MATCH  glob of the export folders to check (default *)
#   PRECISIONS  --precision values the fp32 exports are also checked at (default bf16)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/config_check.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
late() { [ "$(el)" -gt "${DEADLINE:-520}" ] && echo "-- deadline: skipping $1" && return 0; return 1; }
S=/tmp/brrr_suite
PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models "${EXPORTS:-bert_base,gpt2}" \
  --dtypes "${DTYPES:-fp32,bf16}" --exporters "${EXPORTERS:-torchscript}" --no-verify --threads 8 \
  >"$OUT/export.log" 2>&1 &
EXPORT=$!
source scripts/gpu_build.sh || exit 1
echo "== built at $(el) s"
export XDG_CACHE_HOME=/tmp/brrr_xdg_config
CONFIGS=${CONFIGS:-"merge=BRRR_CUDA_MERGE_GEMMS=1 merge_attn=BRRR_CUDA_MERGE_GEMMS=1,BRRR_FUSED_ATTENTION=1"}
last=${CONFIGS##* }; LAST_ENV=${last#*=}
if [ -n "${TESTS:-}" ]; then
  env ${LAST_ENV//,/ } timeout -k 5 "${TESTS_TIMEOUT:-150}" "$B/tests/brrr_tests" \
    --gtest_filter="$TESTS" >"$OUT/tests.log" 2>&1
  echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/tests.log" | tr '\n' ' ') at $(el) s"
  grep -E '^\[  (FAILED|SKIPPED) \] [A-Z]' "$OUT/tests.log" | sort -u | head -20
fi
wait $EXPORT; echo "== exported at $(el) s: $(grep -v -i warn "$OUT/export.log" | tail -3 | tr '\n' ' ')"
check() {  # NAME ENV MODEL_DIR [brrr args...]
  local name=$1 envs=$2 dir=$3; shift 3
  late "check $name $(basename "$dir")" && return
  local r
  r=$(env ${envs//,/ } timeout 120 "$B/brrr" run "$dir/model.onnx" --backend cuda \
    --data "$dir/test_data_set_0" --check --reps 3 "$@" 2>&1)
  echo "check $name $(basename "$dir") $*: $(echo "$r" | grep -E 'PASS|FAIL|error|runs on the host' |
    head -3 | tr '\n' ' ' | cut -c1-260)"
}
for d in $S/*/; do
  [ -f "$d/model.onnx" ] || continue
  # shellcheck disable=SC2254
  case $(basename "$d") in ${CHECK_MATCH:-*}) ;; *) continue ;; esac
  for c in $CONFIGS; do
    [ "${CHECK_LAST_ONLY:-0}" = 1 ] && [ "$c" != "$last" ] && continue
    check "${c%%=*}" "${c#*=}" "${d%/}"
  done
  case $d in *_fp32_*) for p in ${PRECISIONS:-bf16}; do
    check "${last%%=*}" "$LAST_ENV" "${d%/}" --precision "$p"; done ;; esac
done
echo "== checks done at $(el) s"
BENCHES=${BENCH-bert_base_bf16_torchscript}
for name in $BENCHES; do
  M=$S/$name/model.onnx
  [ -f "$M" ] || { echo "-- no export $name"; continue; }
  for r in $(seq 1 "${ROUNDS:-2}"); do for bs in ${BENCH_BATCHES:-1 32}; do for c in $CONFIGS; do
    late "bench" && break 3
    envs=${c#*=}
    case $name in resnet*|vit*) shape=pixel_values:BATCHx3x224x224 ;; *) shape=input_ids:BATCHx128 ;; esac
    shape=${BENCH_SHAPE:-$shape}
    line=$(env ${envs//,/ } timeout 60 "$B/brrr" bench "$M" --backend cuda --shape "${shape//BATCH/$bs}" \
      --iterations 200 2>&1 | grep -oE 'kernels: [0-9]+|cold compile [0-9.]+ ms|median [0-9.]+ [um]s|p90 [0-9.]+ [um]s|.*error.*' |
      tr '\n' ' ' | cut -c1-300)
    echo "$name r$r b$bs ${c%%=*}: $line"
  done; done; done
done
M=$S/${BENCHES%% *}/model.onnx
if [ "${DOCTOR:-1}" = 1 ] && [ -f "$M" ]; then
  env ${LAST_ENV//,/ } timeout 60 "$B/brrr" doctor "$M" --backend cuda --shape input_ids:1x128 \
    --top 12 >"$OUT/doctor_b1.txt" 2>&1
  echo "doctor: $(grep -m1 '^wall' "$OUT/doctor_b1.txt")"
  sed -n '/^class/,/^$/p' "$OUT/doctor_b1.txt" | cut -c1-150
fi
echo "== done at $(el) s"
