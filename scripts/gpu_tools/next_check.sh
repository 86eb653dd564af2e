#!/usr/bin/env bash
# One device call left for the twentieth session by the nineteenth (with carry [".devdeps"]):
#   1. the tests of the padded-output path (run() now copies a padded output's real columns into
#      its dense buffer on the device before the host copy: not run on a GPU yet);
#   2. GPT-2 bf16 b16 `brrr run --reps 10` (run()'s own time, host copy included) with
#      BRRR_GEMM_PAD_OUT=1 and 0, alternating, 2 rounds;
#   3. the doctor on BERT-base bf16 b32: the names of the FFN up-projection's two GPU activities
#      (the idle-gaps line and the JSON's gpu_activity_names) and the LayerNorm times.
export OUT=${OUT:-/tmp/o}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
S=/tmp/brrr_suite
(python3 scripts/models/export.py --out $S --models bert_base,gpt2 --dtypes bf16 --exporters torchscript \
  --no-verify --threads 8 >"$OUT/export.log" 2>&1) &
TARGETS="brrr_cli brrr_tests" source scripts/gpu_build.sh || exit 1
echo "== built at $(el) s"
timeout 150 $B/tests/brrr_tests --gtest_filter="CudaSession.PaddedGemm*:SessionRunDevice.*" >"$OUT/tests.log" 2>&1
echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')"
grep -E 'Failure|Expected|Which is|exception' "$OUT/tests.log" | head -20
wait
export XDG_CACHE_HOME=/tmp/brrr_xdg_next
G=$S/gpt2_bf16_torchscript/model.onnx M=$S/bert_base_bf16_torchscript/model.onnx
for c in 1 0 1 0; do
  echo "run() gpt2 b16 BRRR_GEMM_PAD_OUT=$c: $(BRRR_GEMM_PAD_OUT=$c timeout 60 $B/brrr run $G --backend cuda \
    --shape input_ids:16x128 --reps 10 2>&1 | grep -E '^time' | cut -c1-160)"
done
timeout 150 $B/brrr doctor $M --backend cuda --shape input_ids:32x128 --top 5 --json "$OUT/doctor_b32.json" \
  >"$OUT/doctor_b32.txt" 2>&1
grep -E '^wall|^idle' "$OUT/doctor_b32.txt" | cut -c1-800
python3 - "$OUT/doctor_b32.json" <<'PY'
import json, statistics, sys
ks = json.load(open(sys.argv[1]))["kernels"]
ln = [k["time_ms"] * 1e3 for k in ks if "layernorm" in k["name"]]
print("LayerNorm: median %.2f us over %d kernels" % (statistics.median(ln), len(ln)))
for k in ks:
    if k.get("gpu_activity_names"):
        print(k["name"], "->", k["gpu_activity_names"])
        break
PY
echo "== end at $(el) s"
