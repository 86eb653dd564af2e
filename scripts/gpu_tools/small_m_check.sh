#!/usr/bin/env bash
# One device call on the small-M GEMM (BRRR_SMALL_M_GEMM, device/gemm_small_m.cuh): build (unless
# B names a build), the bf16 TorchScript exports of MODELS, Nsight Compute on the first NCU_COUNT
# small-M kernels of BERT-base at batch 1 (no CUDA graph; one report, its key metrics printed),
# the doctor's wall and the GEMM and mean rows of each model in DOCTOR under every configuration,
# then `brrr bench --iterations 200` of each model at batch 1 under every configuration in
# interleaved rounds. The third small-M kernel (the FFN up-projection) also gets a full profile
# and its top SASS stall samples (ncu_sass_top.py).
#   MODELS (bert_base,resnet50,vit_b_16)  CONFIGS (NAME=ENV,ENV ...; default base and smallm)
# Before the benches, BERT-base's plan summary lines of its small-M GEMMs under each configuration
# (tile, stages, how many clusters fit at once).
#   NCU_COUNT (4; 0: no profile)  NCU_FULL (1; 0: no full profile)  NCU_ENV (BRRR_SMALL_M_GEMM=1: the profiled configuration, ENV,ENV)
#   DOCTOR (resnet50)  DOCTOR_CONFIGS (CONFIGS)  ROUNDS (2)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/small_m_check.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
S=/tmp/brrr_suite
MODELS=${MODELS:-bert_base,resnet50,vit_b_16}
missing=0
for m in ${MODELS//,/ }; do [ -f "$S/${m}_bf16_torchscript/model.onnx" ] || missing=1; done
if [ $missing = 1 ]; then  # exports already there (an earlier step of the call) are kept
  PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models "$MODELS" --dtypes bf16 \
    --exporters torchscript --no-verify --threads 8 >"$OUT/export.log" 2>&1 &
  EXPORT=$!
else
  : >"$OUT/export.log"
  EXPORT=
fi
if [ -z "${B:-}" ] || [ ! -x "$B/brrr" ]; then
  source scripts/gpu_build.sh || exit 1
  echo "== built at $(el) s"
else
  source scripts/gpu_env.sh
fi
[ -z "$EXPORT" ] || wait "$EXPORT"  # a bare wait would also wait for the tee above
echo "== exported at $(el) s: $(grep -E ' ok | fail' "$OUT/export.log" | awk '{print $1, $4}' | tr '\n' ' ')"
export XDG_CACHE_HOME=/tmp/brrr_xdg_small_m
CONFIGS=${CONFIGS:-"base=BRRR_SMALL_M_GEMM=0 smallm=BRRR_SMALL_M_GEMM=1"}
shape() { case $1 in resnet*|vit*) echo pixel_values:1x3x224x224 ;; *) echo input_ids:1x128 ;; esac; }
D=$S/bert_base_bf16_torchscript
if [ "${NCU_COUNT:-4}" -gt 0 ] && [ -f "$D/model.onnx" ]; then
  # `brrr run` on the warm kernel cache (the bench's cold compile forks NVRTC children), every
  # process profiled.
  export BRRR_DISABLE_GRAPHS=1 $(echo "${NCU_ENV:-BRRR_SMALL_M_GEMM=1}" | tr , ' ')
  timeout 60 "$B/brrr" run "$D/model.onnx" --backend cuda --data "$D/test_data_set_0" --reps 3 >/dev/null 2>&1
  timeout 150 ncu --target-processes all --kernel-name regex:brrr_gemm_sk \
    --launch-count "${NCU_COUNT:-4}" --section SpeedOfLight --section LaunchStats --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis -f -o /tmp/ncu_small_m \
    "$B/brrr" run "$D/model.onnx" --backend cuda --data "$D/test_data_set_0" --reps 3 >"$OUT/ncu_small_m.log" 2>&1
  echo "ncu rc $? at $(el) s"
  ncu -i /tmp/ncu_small_m.ncu-rep --print-details all >"$OUT/ncu_small_m.txt" 2>&1
  grep -E '^  brrr_gemm_sk|Duration|Elapsed Cycles|SM Active Cycles|Grid Size|Cluster Size|Dynamic Shared|Registers Per|Theoretical Occupancy|Achieved Occupancy|Block Limit|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Issued Ipc|No Eligible|Eligible Warps|Warp Cycles Per Issued|Max Active Clusters|Waves Per SM' \
    "$OUT/ncu_small_m.txt" | cut -c1-120 | head -120
  # The third (BERT's FFN up-projection) with every section and its SASS stall samples (NCU_FULL=0: not).
  [ "${NCU_FULL:-1}" = 0 ] || timeout 150 ncu --target-processes all --kernel-name regex:brrr_gemm_sk \
    --launch-skip 2 --launch-count 1 --set full --import-source no -f -o /tmp/ncu_small_m_full \
    "$B/brrr" run "$D/model.onnx" --backend cuda --data "$D/test_data_set_0" --reps 3 >"$OUT/ncu_small_m_full.log" 2>&1
  echo "ncu full rc $? at $(el) s"
  if [ "${NCU_FULL:-1}" != 0 ]; then
    ncu -i /tmp/ncu_small_m_full.ncu-rep --page source --print-source sass --csv >"$OUT/ncu_small_m_sass.csv" 2>&1
    python3 scripts/gpu_tools/ncu_sass_top.py "$OUT/ncu_small_m_sass.csv" 25
  fi
  unset BRRR_DISABLE_GRAPHS $(echo "${NCU_ENV:-BRRR_SMALL_M_GEMM=1}" | tr , '\n' | cut -d= -f1)
fi
for m in ${DOCTOR-resnet50}; do
  for c in ${DOCTOR_CONFIGS:-$CONFIGS}; do
    f=$OUT/doctor_${m}_${c%%=*}.txt
    env $(echo "${c#*=}" | tr , ' ') timeout 120 "$B/brrr" doctor "$S/${m}_bf16_torchscript/model.onnx" --backend cuda \
      --shape "$(shape "$m")" --top 80 >"$f" 2>&1
    echo "== doctor $m ${c%%=*}: $(grep -m1 '^wall' "$f" | cut -c1-120)"
    grep -E 'gemm|matmul|mean|Gemm|MatMul|GlobalAverage' "$f" | grep -v '^ *small grid' | head -8 | cut -c1-170
    grep -E '^ *idle between' "$f" | cut -c1-400
  done
done
if [ -f "$D/model.onnx" ]; then
  for c in $CONFIGS; do
    echo "== plan bert_base ${c%%=*}:"
    env BRRR_DEBUG=1 $(echo "${c#*=}" | tr , ' ') timeout 90 "$B/brrr" bench "$D/model.onnx" --backend cuda \
      --iterations 3 --shape input_ids:1x128 2>&1 | grep 'small-M GEMM' | sort -u -k3 | head -5 | cut -c1-260
  done
fi
for r in $(seq "${ROUNDS:-2}"); do
  for m in ${MODELS//,/ }; do
    for c in $CONFIGS; do
      echo "round $r $m b1 ${c%%=*}: $(env $(echo "${c#*=}" | tr , ' ') timeout 90 "$B/brrr" bench "$S/${m}_bf16_torchscript/model.onnx" \
        --backend cuda --iterations 200 --shape "$(shape "$m")" 2>&1 | grep -oE 'kernels: [0-9]+|median [0-9.]+ [um]s|p90 [0-9.]+ [um]s|.*rror.*' | tr '\n' ' ')"
    done
  done
done
echo "== done at $(el) s"
