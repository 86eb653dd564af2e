#!/usr/bin/env bash
# One device call for the issue-5 targets only: scripts/gpu_full.sh without PyTorch or CPU tests
# on the target workloads, the GEMM chain A/B and depth runs, then Nsight Compute on the fused
# kernels (speed of light, occupancy, warp states) to see what bounds each one.
# Usage there: bash scripts/gpu_focus.sh   (NCU=1 adds Nsight Compute; on the H200 image of
# 2026-11-30, ncu ended `brrr bench` with exit code 11 before profiling, so it is off by default)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
SKIP_TORCH=1 SKIP_CPU_TESTS=1 BENCH_REPS=${BENCH_REPS:-30} \
  BENCH_ITEMS="${BENCH_ITEMS:-cos_cos layernorm softmax gelu_bias ln_x_half mlp_b1 mlp_b64 mlp_b4096}" \
  bash scripts/gpu_full.sh 2>&1 | grep -v "^CPU tests" | tee "$OUT/full.log" | tail -40
L=/opt/deps/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-} XDG_CACHE_HOME=/tmp/brrr_xdg
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0])" 2>/dev/null)
[ -n "$CUDNN_DIR" ] && export LD_LIBRARY_PATH=$CUDNN_DIR/lib:$LD_LIBRARY_PATH
B=/tmp/brrr_build
echo "== A/B: GEMM chain (BRRR_DISABLE_GEMM_CHAIN=1: one cuBLASLt call per layer)"
for c in 1 0 1 0; do BRRR_DISABLE_GEMM_CHAIN=$c timeout 60 $B/brrr bench --backend cuda mlp_b1 --reps 50 2>&1 |
  grep -E "^mlp" | sed "s/^/no_chain=$c /"; done
echo "== GEMM chain depth (per-layer slope, fixed cost)"
timeout 120 python3 scripts/gpu_chain_depth.py $B/brrr /tmp 2>&1 | tail -11
echo "== models on cuda (--check against the PyTorch fp32 outputs), and what still runs on the host"
for m in mlp_tiny bert_tiny squeezenet1_1 mobilenet_v3_small; do
  r=$(timeout 120 $B/brrr run examples/$m/model.onnx --data examples/$m/test_data_set_0 --check \
      --backend cuda 2>&1 | grep -E "check 0|error|runs on the host" | head -3 | tr '\n' ' ')
  echo "$m: $r"
done
timeout 60 $B/brrr doctor examples/bert_tiny/model.onnx --backend cuda 2>&1 | grep -E "host|^wall|CUDA graph" | head -5
[ "${NCU:-0}" = 0 ] && exit 0
NCU_BIN=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for w in cos_cos layernorm softmax gelu_bias mlp_b1; do
  k='regex:brrr_(k|chain)'
  echo "== ncu $w"
  timeout 120 $NCU_BIN --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section ComputeWorkloadAnalysis --section SchedulerStats \
    -k "$k" -s 2 -c 1 $B/brrr bench --backend cuda $w --reps 3 > "$OUT/ncu_$w.log" 2>&1
  grep -E "brrr_|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Executed Ipc Active|Block Size|Grid Size|Eligible Warps" "$OUT/ncu_$w.log" | head -24
done
