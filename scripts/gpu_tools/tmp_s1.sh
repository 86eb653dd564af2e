#!/usr/bin/env bash
# temporary (session): PDL + unpad check
export OUT=${OUT:-/tmp/out}
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
EXPORTS=bert_base,gpt2,vit_b_16,llama_1b DTYPES=bf16 CONFIGS="nopdl=BRRR_CUDA_PDL=0 pdl=BRRR_CUDA_PDL=1" \
  TESTS='CudaSession.*:CudaGraph.*:CudaNvrtc.*:CuptiTimeline.*:CudaConv.*' TESTS_TIMEOUT=120 \
  BENCH="bert_base_bf16_torchscript gpt2_bf16_torchscript" BENCH_BATCHES="1 16" ROUNDS=2 CHECK_LAST_ONLY=1 DEADLINE=330 \
  bash scripts/gpu_tools/config_check.sh
B=/tmp/brrr_build; S=/tmp/brrr_suite
export XDG_CACHE_HOME=/tmp/brrr_xdg_config
for r in 1 2; do for c in 0 1; do for m in llama_1b_bf16_torchscript vit_b_16_bf16_torchscript; do
  case $m in vit*) sh=pixel_values:1x3x224x224 ;; *) sh=input_ids:1x128 ;; esac
  line=$(BRRR_CUDA_PDL=$c timeout 60 $B/brrr bench $S/$m/model.onnx --backend cuda --shape $sh --iterations 200 2>&1 |
    grep -oE 'warm load [0-9.]+ [um]?s|median [0-9.]+ [um]s' | tr '\n' ' ')
  echo "$m r$r pdl=$c: $line"
done; done; done
echo "== at $(( $(date +%s) - T0 )) s"
timeout $(( 585 - ($(date +%s) - T0) )) python3 scripts/models/gpu_bench.py --suite $S --brrr $B/brrr --models bert_base,gpt2 \
  --dtypes bf16 --exporters torchscript --batches "bert_base=1;gpt2=1,16" --torch-modes reduce-overhead --rounds 2 --no-check 2>&1 | tail -12
