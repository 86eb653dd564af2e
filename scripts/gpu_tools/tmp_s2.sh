#!/usr/bin/env bash
# temporary (session): PDL across models, attention choice, Llama warm load
export OUT=${OUT:-/tmp/out}
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
S=/tmp/brrr_suite
python3 scripts/models/export.py --out $S --models bert_base,vit_b_16,llama_1b --dtypes bf16 --exporters torchscript \
  --no-verify --threads 8 > $OUT/export.log 2>&1 &
TARGETS=brrr_cli source scripts/gpu_build.sh || exit 1
wait
echo "== built+exported at $(( $(date +%s) - T0 )) s"
export XDG_CACHE_HOME=/tmp/brrr_xdg
bench() {  # model shape pdl
  local f=$OUT/b_${1}_$(echo $2 | tr ':x' '__')_p$3_r$r.txt
  BRRR_DEBUG=1 BRRR_CUDA_PDL=$3 timeout 90 $B/brrr bench $S/$1/model.onnx --backend cuda --shape $2 --iterations 200 > $f 2>&1
  echo "$1 $2 pdl=$3 r$r: $(grep -oE 'warm load [0-9.]+ [um]?s|median [0-9.]+ [um]s' $f | tr '\n' ' ') | $(grep -m1 ' attention ' $f | cut -c1-170)"
}
for r in 1 2; do for p in 0 1; do
  bench bert_base_bf16_torchscript input_ids:1x128 $p
  bench bert_base_bf16_torchscript input_ids:32x128 $p
  bench vit_b_16_bf16_torchscript pixel_values:1x3x224x224 $p
  bench llama_1b_bf16_torchscript input_ids:1x128 $p
  bench llama_1b_bf16_torchscript input_ids:8x128 $p
done; done
echo "== benches at $(( $(date +%s) - T0 )) s"
for p in 0 1; do
  BRRR_CUDA_PDL=$p timeout 90 $B/brrr doctor $S/bert_base_bf16_torchscript/model.onnx --backend cuda --shape input_ids:1x128 --top 30 > $OUT/doctor_bert_p$p.txt 2>&1
  echo "-- doctor bert b1 pdl=$p: $(grep -m1 '^wall' $OUT/doctor_bert_p$p.txt)"
  sed -n '/^top/,/^$/p' $OUT/doctor_bert_p$p.txt | awk 'NR<=2 || /k[0-9]+_(attention|matmul_add|add_layer)/' | cut -c1-120 | head -12
  sed -n '/^class/,/^$/p' $OUT/doctor_bert_p$p.txt
done
echo "== done at $(( $(date +%s) - T0 )) s"
