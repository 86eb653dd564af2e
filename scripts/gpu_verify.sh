#!/usr/bin/env bash
# One device call that checks everything GPU-side: scripts/gpu_full.sh (build, tests, bench, the
# PyTorch side-by-side table, the four example models on CUDA with --check), then brrr probe and
# brrr doctor on CUDA, and compute-sanitizer memcheck over the CUDA tests (MEMCHECK_FILTER, a gtest
# filter, narrows them to fit one device call; SKIP_TORCH=1 and SKIP_CPU_TESTS=1 pass through).
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
cd "$(dirname "$0")/.."
bash scripts/gpu_full.sh 2>&1 | tee "$OUT/full.log" | tail -45
L=/opt/deps/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-} LIBRARY_PATH=$L:${LIBRARY_PATH:-}
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0])" 2>/dev/null)
[ -n "$CUDNN_DIR" ] && export LD_LIBRARY_PATH=$CUDNN_DIR/lib:$LD_LIBRARY_PATH
export XDG_CACHE_HOME=/tmp/brrr_xdg
B=/tmp/brrr_build
echo "== probe"
timeout 120 $B/brrr probe --backend cuda 2>&1 | tail -22
echo "== doctor"
timeout 120 $B/brrr doctor examples/bert_tiny/model.onnx --backend cuda --json "$OUT/doctor_bert.json" 2>&1 | tail -32
echo "== A/B: GEMM chain (BRRR_DISABLE_GEMM_CHAIN=1: one cuBLASLt call per layer)"
for c in 1 0; do BRRR_DISABLE_GEMM_CHAIN=$c timeout 60 $B/brrr bench --backend cuda mlp_b1 --reps 50 2>&1 |
  grep -E "^mlp" | sed "s/^/no_chain=$c /"; done
echo "== GEMM chain depth (per-layer slope, fixed cost)"
python3 scripts/gpu_chain_depth.py $B/brrr /tmp 2>&1 | tail -11
echo "== doctor on a conv net (cuDNN convs)"
for m in squeezenet1_1 mobilenet_v3_small; do
  timeout 90 $B/brrr doctor examples/$m/model.onnx --backend cuda 2>&1 | grep -E "host|^wall|verdict|CUDA graph" | head -8
done
echo "== compute-sanitizer memcheck, CUDA tests"
timeout ${MEMCHECK_S:-240} compute-sanitizer --tool memcheck --report-api-errors no --print-limit 20 $B/tests/brrr_tests \
  --gtest_filter="${MEMCHECK_FILTER:-Cuda*:DoctorCuda*:-DoctorCuda.Probe*}" > "$OUT/memcheck.log" 2>&1
echo "memcheck exit $?"; grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED)" "$OUT/memcheck.log" | head
