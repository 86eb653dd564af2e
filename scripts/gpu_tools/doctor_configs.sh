#!/usr/bin/env bash
# One device call: build brrr_cli (incrementally where a build is there), export BERT-base and ResNet-50
# (bf16, TorchScript), the doctor on each under its configurations (files doctor_<model>_<name>.txt
# in $OUT: the wall, the idle gaps, the per-kernel table), then one bench of BERT-base under each.
#   BE (NAME=ENV,ENV ...: BERT-base's configurations)  R (ResNet-50's; empty: no ResNet)
#   EXPORT_MODELS (bert_base,resnet50)
# E.g. the seventeenth session's: R= EXPORT_MODELS=bert_base BE="base=BRRR_SMALL_M_GEMM=0
#   b32s2=BRRR_SMALL_M_GEMM=1,BRRR_SMALL_M_BN=32,BRRR_SMALL_M_SPLITS=2" bash scripts/gpu_tools/doctor_configs.sh
export OUT=${OUT:-/tmp/o}; T0=$(date +%s)
S=/tmp/brrr_suite
(PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models ${EXPORT_MODELS:-bert_base,resnet50} --dtypes bf16 \
  --exporters torchscript --no-verify --threads 8 >$OUT/export.log 2>&1) &
TARGETS=brrr_cli source scripts/gpu_build.sh || exit 1
echo "built at $(( $(date +%s) - T0 )) s"; wait
export XDG_CACHE_HOME=/tmp/brrr_xdg_doctor_configs
R=${R-"base=BRRR_SMALL_M_GEMM=0 sm3=BRRR_SMALL_M_GEMM=3"}
BE=${BE:-"base=BRRR_SMALL_M_GEMM=0 bn32=BRRR_SMALL_M_GEMM=1,BRRR_SMALL_M_BN=32 bn32e=BRRR_SMALL_M_GEMM=1,BRRR_SMALL_M_BN=32,BRRR_CUDA_PDL=2"}
JOBS="bert_base|input_ids:1x128|$BE"
[ -z "$R" ] || JOBS="resnet50|pixel_values:1x3x224x224|$R;$JOBS"
IFS=';' read -r -a JOBL <<<"$JOBS"
for job in "${JOBL[@]}"; do
  IFS='|' read -r m shp cfgs <<<"$job"
  for c in $cfgs; do
    f=$OUT/doctor_${m}_${c%%=*}.txt
    env $(echo "${c#*=}" | tr , ' ') timeout 100 $B/brrr doctor $S/${m}_bf16_torchscript/model.onnx --backend cuda \
      --shape $shp --top 90 >$f 2>&1
    echo "== $m ${c%%=*} at $(( $(date +%s) - T0 )) s: $(grep -m1 '^wall' $f | cut -c1-100)"
    grep -E '^idle between' $f | cut -c1-300
  done
done
for m in bert_base; do for c in $BE; do
  echo "bench $m ${c%%=*}: $(env $(echo "${c#*=}" | tr , ' ') timeout 60 $B/brrr bench $S/${m}_bf16_torchscript/model.onnx \
    --backend cuda --iterations 200 --shape input_ids:1x128 2>&1 | grep -oE 'median [0-9.]+ [um]s' )"
done; done
echo "== end at $(( $(date +%s) - T0 )) s"
