#!/usr/bin/env bash
# One device call: the fused attention kernels against cuDNN's SDPA and PyTorch's on the bench
# shapes, an Nsight Compute report of brrr's flash kernel where it loses, then (time allowing)
# the held-out models on the GPU (`brrr run --check`, exported here in the background while the
# build runs) and the CUDA tests.
#   B=an existing build folder to skip the build  WORKLOADS (attn_* names)  NCU (0: skip it)
#   HELDOUT (names for scripts/models/export_heldout.py; empty: skip)  TESTS (gtest filter)
#   DEADLINE (s from the start by which the tests must stop; default 560)
#   CONFIGS (space-separated NAME=ENV,ENV,... lists for the bench rounds)
#   NCU_WORKLOADS (attn_* names the ncu report covers)  ROUNDS (bench rounds, default 2)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/attention_profile.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
H=/tmp/brrr_heldout
HELDOUT=${HELDOUT-densenet121 efficientnet_b0 convnext_tiny shufflenet_v2_x1_0 swin_t distilbert whisper_enc}
if [ -n "$HELDOUT" ]; then
  # shellcheck disable=SC2086
  (PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4 python3 scripts/models/export_heldout.py --out $H $HELDOUT \
     >"$OUT/heldout_export.log" 2>&1) &
  EXPORT=$!
fi
if [ -z "${B:-}" ] || [ ! -x "$B/brrr" ]; then
  source scripts/gpu_build.sh || exit 1
  echo "== built at $(el) s"
fi
export XDG_CACHE_HOME=/tmp/brrr_xdg_attn_profile
W=${WORKLOADS:-attn_bert_b1 attn_bert_b32 attn_gpt2_b1 attn_gpt2_b16 attn_vit_b1 attn_vit_b32}
# brrr's flash kernel (cuDNN off) with and without its branch-free plain tiles, against cuDNN's
# plan built in a child (BRRR_CUDNN_RUNTIME_COMPILED=2), in interleaved rounds; median
# CUDA-graph time of the one-kernel plan. The plan summaries follow (which path, or why not).
CONFIGS=${CONFIGS:-full=BRRR_ATTN_CUDNN=0 nofull=BRRR_ATTN_CUDNN=0,BRRR_ATTN_FULL_TILES=0 child=BRRR_ATTN_CUDNN=2,BRRR_CUDNN_RUNTIME_COMPILED=2}
for r in $(seq "${ROUNDS:-2}"); do
  for c in $CONFIGS; do
    name=${c%%=*}; envs=${c#*=}
    # shellcheck disable=SC2086,SC2046
    env $(echo "$envs" | tr ',' ' ') timeout 120 "$B/brrr" bench --backend cuda $W --reps 300 2>&1 |
      grep -E '^attn_|error|rror' | sed "s/^/round $r $name: /"
  done
done
for w in $W; do
  BRRR_ATTN_CUDNN=2 BRRR_CUDNN_RUNTIME_COMPILED=2 BRRR_DEBUG=1 timeout 60 "$B/brrr" bench \
    --backend cuda "$w" --reps 3 2>&1 | grep -E 'k0_attention +attention' | cut -c1-600 | head -1
done
echo "== bench at $(el) s"
PYTHONUNBUFFERED=1 timeout 90 python3 scripts/gpu_tools/sdpa_peer.py --rounds 5 2>&1 | grep -v Warning
echo "== sdpa peer at $(el) s"
if [ "${NCU:-1}" = 1 ] && command -v ncu >/dev/null; then
  # The flash kernel's SASS (cuobjdump), for the stall locations' instructions.
  printf '#include "backend/cuda/device/prelude.cuh"\n#include "backend/cuda/device/attention.cuh"\n' \
    >/tmp/brrr_att.cu
  nvcc -arch=sm_90 -cubin -Xptxas -v -Isrc -Iinclude /tmp/brrr_att.cu -o /tmp/brrr_att.cubin \
    2>"$OUT/flash_ptxas.txt" && cuobjdump -sass -fun brrr_attention_flash64_bf16 /tmp/brrr_att.cubin \
    >"$OUT/flash64_bf16.sass" 2>&1
  for w in ${NCU_WORKLOADS:-attn_bert_b32 attn_bert_b1 attn_vit_b32}; do
    BRRR_ATTN_CUDNN=0 BRRR_DISABLE_GRAPHS=1 timeout 120 ncu --kernel-name regex:brrr_attention_flash \
      --launch-skip 2 --launch-count 1 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats \
      --section SourceCounters \
      "$B/brrr" bench --backend cuda "$w" --reps 5 >"$OUT/ncu_$w.txt" 2>&1
    echo "ncu $w rc $?"
    grep -E 'Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|L1/TEX Hit|L2 Hit|Issued Ipc|No Eligible|Stall|Waves Per SM|Shared Memory Configuration Size|Dynamic Shared|Static Shared' \
      "$OUT/ncu_$w.txt" | head -40
  done
  echo "== ncu at $(el) s"
fi
if [ -n "$HELDOUT" ]; then
  wait $EXPORT
  echo "== heldout exported at $(el) s: $(grep -c ' ok ' "$OUT/heldout_export.log") ok"
  for d in $H/*/; do
    n=$(basename "$d")
    for p in fp32 bf16; do
      pa=""; [ $p = bf16 ] && pa="--precision bf16"
      # shellcheck disable=SC2086
      r=$(timeout 120 "$B/brrr" run "$d/model.onnx" --data "$d/test_data_set_0" --check --backend cuda $pa 2>&1 |
          grep -E '^check|^time|host|rror' | tr '\n' ' ' | cut -c1-300)
      # shellcheck disable=SC2086
      k=$(timeout 60 "$B/brrr" bench "$d/model.onnx" --backend cuda $pa --iterations 50 2>&1 |
          grep -E '^latency|^kernels|rror' | sed 's/(percentiles.*//' | tr '\n' ' ' | cut -c1-300)
      echo "$n $p: $r | $k"
    done
  done
  echo "== heldout at $(el) s"
fi
left=$(( ${DEADLINE:-560} - $(el) ))
if [ $left -gt 20 ]; then
  timeout -k 5 $left "$B/tests/brrr_tests" \
    --gtest_filter="${TESTS:-Cuda*:FusedAttention*:DoctorCuda*:GeluEpilogue*:Pipeline.*:MergeGemms.*}" \
    >"$OUT/tests.log" 2>&1
  echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/tests.log" | tr '\n' ' ')"
  grep -E '^\[  (FAILED|SKIPPED) \] [A-Z]|Failure' "$OUT/tests.log" | sort -u | head -20
  grep -E '^\[ RUN|^\[       OK' "$OUT/tests.log" | tail -2
fi
echo "== total $(el) s"
