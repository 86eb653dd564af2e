#!/usr/bin/env bash
# One device call for the model suite (issue 16): build brrr, export the suite (random seeded
# weights, both exporters, fp32 and bf16, dynamic batch, fp32 reference data at batch 1) into a
# folder outside the repository, then scripts/models/gpu_bench.py: `brrr run --check --backend
# cuda` on every export, and brrr, PyTorch eager, torch.compile and torch.compile(mode=
# "reduce-overhead") on every model, dtype and batch (1, and BERT 32, GPT-2 16, ResNet-50 64,
# ViT 32, Llama 8) in interleaved rounds; one table with ratios printed last.
#
# Here, once: bash scripts/gpu_devdeps.sh (brrr's Debian build dependencies into .devdeps/).
# Then the device call, with carry [".devdeps"]:
#   set -o pipefail; MODELS=bert_base,resnet50 bash scripts/gpu_models.sh 2>&1 | tee $OUT/log
# Selection (environment):
#   MODELS     bert_base,gpt2,resnet50,vit_b_16,llama_1b (default: all but llama_1b)
#   DTYPES     fp32,bf16 (default both)        EXPORTERS   torchscript,dynamo (default both)
#   PRECISIONS brrr --precision runs of the fp32 exports, e.g. bf16,fp16 (default none)
#   BATCHES    "bert_base=1,32;gpt2=1" (default: 1 and the large batch above)
#   TORCH_MODES eager,compile,reduce-overhead (default; empty for none)
#   VARIANTS   brrr again with extra environment per variant, in the same rounds, e.g.
#              "rtc2:BRRR_CUDNN_RUNTIME_COMPILED=2" (rows labelled exporter+rtc2)
#   TORCH_TIMER events (default: as brrr bench times brrr), do_bench or both (gpu_bench.py)
#   ROUNDS (3)  REPS (50, brrr runs per measurement)  SMALL=1 (shrunken models, a quick test)
#   LARGE_BATCH=1  reference data at each model's large batch too, so --check runs at both batches
#   CHECK_JOBS (1) --check runs at a time   NO_TIME=1  checks only (no timing phase)
#   BUDGET_S   seconds for the whole call (default 480); timing stops starting new work past it
#   SUITE      export folder (default /tmp/brrr_suite; kept when it already holds an export)
# Device time, full size: build ~1-2 min (export runs beside it), then per export a check
# (compile + 3 runs) and per model, dtype and batch the torch compiles (~10 s each mode).
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 1
export XDG_CACHE_HOME=/tmp/brrr_xdg
T0=$(date +%s)
phase() { echo "== $1 at $(( $(date +%s) - T0 )) s"; }
MODELS=${MODELS:-bert_base,gpt2,resnet50,vit_b_16}
DTYPES=${DTYPES:-fp32,bf16}
EXPORTERS=${EXPORTERS:-torchscript,dynamo}
PRECISIONS=${PRECISIONS:-}
BATCHES=${BATCHES:-}
TORCH_MODES=${TORCH_MODES-eager,compile,reduce-overhead}
SUITE=${SUITE:-/tmp/brrr_suite}
BUDGET_S=${BUDGET_S:-480}
EXPORT_ARGS=()
[ "${SMALL:-0}" = 1 ] && EXPORT_ARGS=(--small)
[ "${LARGE_BATCH:-0}" = 1 ] && EXPORT_ARGS+=(--large-batch)
TIME_ARG=()
[ "${NO_TIME:-0}" = 1 ] && TIME_ARG=(--no-time)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
python3 -c 'import torch, transformers, torchvision, onnx; print("torch", torch.__version__,
"transformers", transformers.__version__, "torchvision", torchvision.__version__, "onnx",
onnx.__version__, "cuda", torch.cuda.is_available())' || exit 1

# The export is CPU work, and so is the build: run them side by side.
PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out "$SUITE" --models "$MODELS" \
  --dtypes "$DTYPES" --exporters "$EXPORTERS" --no-verify --threads 8 "${EXPORT_ARGS[@]}" \
  > "$OUT/export.log" 2>&1 &
EXPORT=$!
TARGETS=${TARGETS:-brrr_cli}
# shellcheck source=scripts/gpu_build.sh
source scripts/gpu_build.sh  # sets B and the library paths brrr runs with
phase "built"
wait $EXPORT
echo "export exit $?"; grep -v -i warn "$OUT/export.log" | sed -n '/^exports in/,$p'
phase "exported"

LEFT=$(( BUDGET_S - ($(date +%s) - T0) ))
[ "$LEFT" -lt 60 ] && LEFT=60
PYTHONUNBUFFERED=1 timeout $(( LEFT + 60 )) python3 scripts/models/gpu_bench.py --suite "$SUITE" \
  --brrr "$B/brrr" --backend cuda --models "$MODELS" --dtypes "$DTYPES" --exporters "$EXPORTERS" \
  --precisions "$PRECISIONS" --batches "$BATCHES" --torch-modes "$TORCH_MODES" \
  --torch-timer "${TORCH_TIMER:-events}" --rounds "${ROUNDS:-3}" --reps "${REPS:-50}" --budget "$LEFT" --json "$OUT/models.json" \
  --variants "${VARIANTS:-}" \
  --check-jobs "${CHECK_JOBS:-1}" "${TIME_ARG[@]}" 2>&1 |
  grep -v -i warn | tee "$OUT/models.log"
phase "total"
