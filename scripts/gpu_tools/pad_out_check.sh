#!/usr/bin/env bash
# One device call for BRRR_GEMM_PAD_OUT (a padded GEMM output left padded, copied out with the
# outputs) and the multicast small-M kernel's B prefetch (nineteenth session; since removed): the few-row GEMM kernels alone
# against cuBLASLt (gemm_rows_micro.sh, beside the build), then the device tests TESTS, then
# GPT-2 bf16 at batch 1 and 16 (gpu_models.sh: --check, brrr with 1 and 0, torch.compile
# reduce-overhead as returned and with its logits made dense, interleaved rounds), then the
# doctor on GPT-2 b16 under both. With carry [".devdeps"].
export OUT=${OUT:-/tmp/o}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
(LIMIT=${LIMIT:-120} bash scripts/gpu_tools/gemm_rows_micro.sh >"$OUT/micro.log" 2>&1) &
MICRO=$!
TARGETS="brrr_cli brrr_tests" source scripts/gpu_build.sh || exit 1
echo "== built at $(el) s"
wait $MICRO
grep -E '^best|^rc' "$OUT/micro.log"
echo "== micro done at $(el) s"
TESTS=${TESTS:-"CudaSession.PaddedGemm*:SessionRunDevice.*:CudaSession.SmallM*:CudaCodegen.SmallM*"}
timeout 200 $B/tests/brrr_tests --gtest_filter="$TESTS" >"$OUT/tests.log" 2>&1
echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')"
grep -E 'Failure|Expected|Which is|FAILED  \]' "$OUT/tests.log" | head -30
echo "== tests done at $(el) s"
MODELS=gpt2 DTYPES=bf16 EXPORTERS=torchscript BATCHES="gpt2=1,16" \
  TORCH_MODES=reduce-overhead,reduce-overhead-dense VARIANTS="padplan:BRRR_GEMM_PAD_OUT=0" \
  ROUNDS=${ROUNDS:-2} BUDGET_S=${BUDGET_S:-300} bash scripts/gpu_models.sh >"$OUT/models.log" 2>&1
tail -25 "$OUT/models.log"
echo "== models done at $(el) s"
M=/tmp/brrr_suite/gpt2_bf16_torchscript/model.onnx
for c in 1 0; do
  BRRR_GEMM_PAD_OUT=$c timeout 90 $B/brrr doctor $M --backend cuda --shape input_ids:16x128 --top 12 \
    >"$OUT/doctor_gpt2_b16_out$c.txt" 2>&1
  echo "-- doctor BRRR_GEMM_PAD_OUT=$c: $(grep -m1 '^wall' "$OUT/doctor_gpt2_b16_out$c.txt" | cut -c1-120)"
  grep -E 'lm_head|padded|unpad' "$OUT/doctor_gpt2_b16_out$c.txt" | head -4 | cut -c1-200
done
echo "== end at $(el) s"
