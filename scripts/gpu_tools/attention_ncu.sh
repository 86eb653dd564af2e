#!/usr/bin/env bash
# One device call: Nsight Compute on brrr's flash attention kernel alone (`brrr bench --backend
# cuda attn_*`, cuDNN off, no CUDA graph), a saved report per workload with the SASS-level stall
# samples exported as CSV (ncu --page source), so the instructions the warps wait on are named.
#   B=an existing build folder to skip the build  WORKLOADS (attn_* names)  ENVS (extra env
#   for every run, comma-separated)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/attention_ncu.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
if [ -z "${B:-}" ] || [ ! -x "$B/brrr" ]; then
  source scripts/gpu_build.sh || exit 1
  echo "== built at $(( $(date +%s) - T0 )) s"
else
  source scripts/gpu_env.sh  # the library paths brrr runs with
fi
export XDG_CACHE_HOME=/tmp/brrr_xdg_attn_ncu BRRR_ATTN_CUDNN=0 BRRR_DISABLE_GRAPHS=1
# shellcheck disable=SC2046
[ -n "${ENVS:-}" ] && export $(echo "$ENVS" | tr ',' ' ')
for w in ${WORKLOADS:-attn_vit_b1 attn_vit_b32}; do
  # Warm the kernel cache first: under ncu no NVRTC child is forked.
  timeout 60 "$B/brrr" bench --backend cuda "$w" --reps 3 >/dev/null 2>&1
  timeout 150 ncu --target-processes application-only --kernel-name regex:brrr_attention_flash \
    --launch-skip 2 --launch-count 1 --set full --import-source no -f -o "/tmp/ncu_$w" \
    "$B/brrr" bench --backend cuda "$w" --reps 5 >"$OUT/ncu_$w.log" 2>&1
  echo "ncu $w rc $?"
  ncu -i "/tmp/ncu_$w.ncu-rep" --print-details all >"$OUT/ncu_$w.txt" 2>&1
  ncu -i "/tmp/ncu_$w.ncu-rep" --page source --print-source sass --csv >"$OUT/ncu_${w}_sass.csv" 2>&1
  python3 scripts/gpu_tools/ncu_sass_top.py "$OUT/ncu_${w}_sass.csv" 40
  grep -E 'Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Memory Throughput|Compute \(SM\) Throughput|Issued Ipc|No Eligible|Stall|Warp Cycles Per|Active Warps Per|Eligible Warps' \
    "$OUT/ncu_$w.txt" | head -40
done
echo "== total $(( $(date +%s) - T0 )) s"
