#!/usr/bin/env bash
# temporary (session): attention choice in graphs, RO table, fp32/fp16 checks
export OUT=${OUT:-/tmp/out}
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
S=/tmp/brrr_suite
python3 scripts/models/export.py --out /tmp/brrr_suite32 --models bert_base,vit_b_16 --dtypes fp32 --exporters torchscript \
  --no-verify --threads 4 > $OUT/export32.log 2>&1 &
python3 scripts/models/export.py --out $S --models bert_base,gpt2,vit_b_16 --dtypes bf16 --exporters torchscript \
  --no-verify --threads 8 > $OUT/export.log 2>&1 &
python3 scripts/models/export.py --out /tmp/brrr_suite_llama --models llama_1b --dtypes bf16 --exporters torchscript \
  --no-verify --threads 4 > $OUT/export_llama.log 2>&1 &
source scripts/gpu_build.sh || exit 1
export XDG_CACHE_HOME=/tmp/brrr_xdg
timeout 80 $B/tests/brrr_tests --gtest_filter='CudaSession.*:FusedAttentionCuda.*' > $OUT/tests.log 2>&1
echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/tests.log | tr '\n' ' ')"; grep -E '^\[  FAILED  \] [A-Z]' $OUT/tests.log | head
wait
echo "== built+tested+exported at $(( $(date +%s) - T0 )) s"
for r in 1 2; do
  f=$OUT/bert_b1_r$r.txt
  BRRR_DEBUG=1 timeout 60 $B/brrr bench $S/bert_base_bf16_torchscript/model.onnx --backend cuda --shape input_ids:1x128 --iterations 200 > $f 2>&1
  echo "bert b1 r$r: $(grep -oE 'median [0-9.]+ [um]s' $f) | $(grep -m1 ' attention ' $f | cut -c1-170)"
done
python3 scripts/models/gpu_bench.py --suite /tmp/brrr_suite32 --brrr $B/brrr --models bert_base,vit_b_16 --dtypes fp32 \
  --exporters torchscript --precisions fp16 --no-time --check-timeout 60 2>&1 | grep -v -i warn | tail -20
echo "== checks at $(( $(date +%s) - T0 )) s"
python3 scripts/models/gpu_bench.py --suite $S --brrr $B/brrr --models bert_base,gpt2,vit_b_16 --dtypes bf16 \
  --exporters torchscript --batches "bert_base=1,32;gpt2=1,16;vit_b_16=1" --torch-modes reduce-overhead --rounds 2 --no-check \
  --budget $(( 290 - ($(date +%s) - T0) )) 2>&1 | grep -v -i warn | tail -14
L=/tmp/brrr_suite_llama/llama_1b_bf16_torchscript/model.onnx
for r in 1 2; do
  [ $(( $(date +%s) - T0 )) -gt 340 ] && break
  f=$OUT/llama_b1_r$r.txt
  BRRR_DEBUG=1 timeout 60 $B/brrr bench $L --backend cuda --shape input_ids:1x128 --iterations 100 > $f 2>&1
  echo "llama b1 r$r: $(grep -oE 'warm load [0-9.]+ [um]?s|median [0-9.]+ [um]s' $f | tr '\n' ' ') merge: $(grep -m2 'merge_gemms' $f | tr '\n' ' ')"
done
echo "== done at $(( $(date +%s) - T0 )) s"
