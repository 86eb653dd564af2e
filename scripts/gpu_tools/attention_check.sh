#!/usr/bin/env bash
# One device call for the fused attention (issue 17 item 2) and the SIGSEGV fix (issue 14 item 1):
# builds (the suite exports beside it), runs the attention tests, `--check` on bert_tiny and on
# BERT-base / GPT-2 exports (their own bf16 and fp32 with --precision bf16|fp16), benches BERT-base
# bf16 with the fused attention on and off (interleaved). MODELS (default bert_base,gpt2).
# Then, in the next call while the machine is warm: scripts/gpu_parallel.sh (the build is kept).
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
# Everything printed is also kept under $OUT as it comes, so a call cut short still returns it.
exec > >(tee -a "$OUT/attention.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
S=/tmp/brrr_suite
PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models "${MODELS:-bert_base,gpt2}" \
  --dtypes fp32,bf16 --exporters torchscript --no-verify --threads 8 >"$OUT/export.log" 2>&1 &
EXPORT=$!
source scripts/gpu_build.sh || exit 1
echo "== built in $(( $(date +%s) - T0 )) s"
export XDG_CACHE_HOME=/tmp/brrr_xdg_attn
timeout 200 "$B/tests/brrr_tests" --gtest_filter='FusedAttention*:CudaSession.CopyKernelsAliasTheirInput:CudaSession.HostFallbackIsReported:CudaSession.LibraryGemmPrecisions*' \
  >"$OUT/attn_tests.log" 2>&1; echo "attention tests rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/attn_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [A-Z]' "$OUT/attn_tests.log" | sort -u
for p in fp32 bf16 fp16; do
  echo "bert_tiny $p: $("$B/brrr" run examples/bert_tiny/model.onnx --backend cuda --precision $p \
    --data examples/bert_tiny/test_data_set_0 --check 2>&1 | grep -E '^check:|error' | tail -1)"
done
wait $EXPORT; echo "== exported at $(( $(date +%s) - T0 )) s"; tail -12 "$OUT/export.log"
chk() {  # chk LABEL MODEL_DIR ARGS...
  local d=$2 l=$1; shift 2
  timeout 120 "$B/brrr" run "$d/model.onnx" --backend cuda --data "$d/test_data_set_0" --check "$@" \
    >"$OUT/chk_$l.log" 2>&1
  echo "check $l rc $?: $(grep -E '^check [0-9]|^check:|error' "$OUT/chk_$l.log" | head -2 | cut -c1-150 | tr '\n' ' ')"
}
for m in $(echo "${MODELS:-bert_base,gpt2}" | tr , ' '); do
  chk "${m}_bf16" "$S/${m}_bf16_torchscript"
  chk "${m}_fp32_as_bf16" "$S/${m}_fp32_torchscript" --precision bf16
  chk "${m}_fp32_as_fp16" "$S/${m}_fp32_torchscript" --precision fp16
done
grep -h "attention\|alias" "$OUT"/chk_bert_base_bf16.log | head -4
M=$S/bert_base_bf16_torchscript/model.onnx
for bs in 1 32; do for r in 1 2; do for v in 0 1; do
  echo "bert_base bf16 b$bs attn=$v: $(BRRR_FUSED_ATTENTION=$v timeout 60 "$B/brrr" bench "$M" \
    --backend cuda --shape input_ids:${bs}x128 --iterations 300 2>&1 | grep -E 'median|kernels|error' | tr '\n' ' ' | cut -c1-200)"
done; done; done
echo "== total $(( $(date +%s) - T0 )) s"
