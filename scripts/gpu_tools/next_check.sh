#!/usr/bin/env bash
# One device call left for the next session by the nineteenth and twentieth (with carry
# [".devdeps"]; the twentieth had no device time):
#   0. the direct conv kernel (BRRR_CONV_DIRECT, written without a GPU): its tests, ResNet-50
#      bf16 `--check` with it forced (2), the stem's plan line when timed (1), and `brrr bench`
#      at batch 1 and 64 with 0, 1 and 2, interleaved, 2 rounds;
#   1. the tests of the padded-output path (run() now copies a padded output's real columns into
#      its dense buffer on the device before the host copy: not run on a GPU yet);
#   2. GPT-2 bf16 b16 `brrr run --reps 10` (run()'s own time, host copy included) with
#      BRRR_GEMM_PAD_OUT=1 and 0, alternating, 2 rounds;
#   3. the doctor on BERT-base bf16 b32: the names of the FFN up-projection's two GPU activities
#      (the idle-gaps line and the JSON's gpu_activity_names) and the LayerNorm times.
export OUT=${OUT:-/tmp/o}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
S=/tmp/brrr_suite
(python3 scripts/models/export.py --out $S --models bert_base,gpt2,resnet50 --dtypes bf16 --exporters torchscript \
  --no-verify --threads 8 >"$OUT/export.log" 2>&1) &
TARGETS="brrr_cli brrr_tests" source scripts/gpu_build.sh || exit 1
echo "== built at $(el) s"
timeout 200 $B/tests/brrr_tests --gtest_filter="CudaConvDirect.*:CudaCodegen.DirectConv*:CudaNhwc.*:CudaSession.PaddedGemm*:SessionRunDevice.*" >"$OUT/tests.log" 2>&1
echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')"
grep -E 'Failure|Expected|Which is|exception' "$OUT/tests.log" | head -20
wait
export XDG_CACHE_HOME=/tmp/brrr_xdg_next
G=$S/gpt2_bf16_torchscript/model.onnx M=$S/bert_base_bf16_torchscript/model.onnx
R=$S/resnet50_bf16_torchscript
line() { tr '\n' ' ' | cut -c1-"${1:-170}"; echo; }
echo -n "resnet50 bf16 b1 BRRR_CONV_DIRECT=2 check: "
BRRR_CONV_DIRECT=2 timeout 60 $B/brrr run $R/model.onnx --data $R/test_data_set_0 --check --backend cuda \
  --reps 3 2>&1 | grep -E '^check|rror|host' | head -2 | line
for b in 1 64; do
  BRRR_CONV_DIRECT=1 BRRR_DEBUG=1 timeout 90 $B/brrr bench $R/model.onnx --backend cuda --iterations 5 \
    --shape pixel_values:${b}x3x224x224 2>&1 | grep -E 'k[0-9]+_conv' | head -2 | cut -c1-330
done
for r in 1 2; do
  for b in 1 64; do
    for v in 0 1 2; do
      echo -n "round $r resnet50 bf16 b$b BRRR_CONV_DIRECT=$v: "
      BRRR_CONV_DIRECT=$v timeout 90 $B/brrr bench $R/model.onnx --backend cuda --iterations 200 \
        --shape pixel_values:${b}x3x224x224 2>&1 | grep -E '^latency|^kernels' | line
    done
  done
done
# The run stops short of the call's 600 s: what is left is skipped with a line saying so.
late() { [ "$(el)" -ge "${DEADLINE:-500}" ] && echo "== skipped from here at $(el) s: $1" && exit 0; return 0; }
late "run() A/B and the doctor"
for c in 1 0 1 0; do
  echo "run() gpt2 b16 BRRR_GEMM_PAD_OUT=$c: $(BRRR_GEMM_PAD_OUT=$c timeout 60 $B/brrr run $G --backend cuda \
    --shape input_ids:16x128 --reps 10 2>&1 | grep -E '^time' | cut -c1-160)"
done
late "the doctor on BERT-base b32"
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
