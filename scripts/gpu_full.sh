#!/usr/bin/env bash
# One device call for the CUDA backend: extract the dev packages, configure + build the full tree,
# brrr_tests (CUDA tests first; they must pass, not skip), brrr bench --backend cuda, the PyTorch
# side-by-side, and one combined table last.
# Usage there: cd .gpu_stage && bash scripts/gpu_full.sh   (writes logs to $OUT; SKIP_CUDA_TESTS,
# SKIP_CPU_TESTS and SKIP_TORCH set to 1 skip those parts, BENCH_ITEMS picks workloads)
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export XDG_CACHE_HOME=/tmp/brrr_xdg
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
P=/opt/deps
if [ ! -d $P/usr ]; then mkdir -p $P && for f in .devdeps/*.deb; do dpkg -x "$f" $P; done; fi
L=$P/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-} LIBRARY_PATH=$L:${LIBRARY_PATH:-} CPATH=$P/usr/include/x86_64-linux-gnu:$P/usr/include
# cuDNN from pip (nvidia-cudnn-cu13) when the toolkit has none: headers for the build, the
# library for dlopen at run time.
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0])" 2>/dev/null)
if [ -n "$CUDNN_DIR" ] && [ -f "$CUDNN_DIR/include/cudnn.h" ]; then
  export CUDNN_INCLUDE_DIR=$CUDNN_DIR/include LD_LIBRARY_PATH=$CUDNN_DIR/lib:$LD_LIBRARY_PATH
fi
B=/tmp/brrr_build
GT=$(dirname "$(find $P -name GTestConfig.cmake | head -1)")
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$P/usr \
  -DCMAKE_LIBRARY_PATH=$L -DCMAKE_INCLUDE_PATH="$P/usr/include;$P/usr/include/x86_64-linux-gnu" \
  -DProtobuf_INCLUDE_DIR=$P/usr/include -DProtobuf_LIBRARY=$L/libprotobuf.so \
  -DGTest_DIR=$GT $([ -d /usr/local/cuda ] && echo -DCUDAToolkit_ROOT=/usr/local/cuda) >"$OUT/cmake.log" 2>&1 ||
  { tail -40 "$OUT/cmake.log"; exit 1; }
grep -E "brrr: (CUDA|cuDNN|no cudnn)" "$OUT/cmake.log"
ninja -C $B -j16 brrr_cli brrr_tests >"$OUT/build.log" 2>&1 || { grep -B2 -A10 -m10 'error' "$OUT/build.log"; exit 1; }
echo "== built in $(( $(date +%s) - T0 )) s"
# CPU tests in the background (they use no GPU) while the CUDA tests and the bench run.
if [ "${SKIP_CPU_TESTS:-0}" != 1 ]; then
  (timeout 300 $B/tests/brrr_tests --gtest_filter='-Cuda*' > "$OUT/tests_rest.log" 2>&1) &
  REST=$!
fi
if [ "${SKIP_CUDA_TESTS:-0}" != 1 ]; then
  timeout ${CUDA_TESTS_S:-240} $B/tests/brrr_tests --gtest_filter='Cuda*' 2>&1 | tee "$OUT/tests_cuda.log" |
    grep -E '^\[  (FAILED|SKIPPED) |^\[==========\]|^\[  PASSED|Failure|Expected|Which is|error|output' | head -60
fi
echo "== tests done at $(( $(date +%s) - T0 )) s"
timeout 170 $B/brrr bench --backend cuda --reps ${BENCH_REPS:-20} --json "$OUT/brrr_bench.json" ${BENCH_ITEMS:-} 2>&1 | tee "$OUT/bench.log"
echo "== bench done at $(( $(date +%s) - T0 )) s"
if [ "${SKIP_TORCH:-0}" != 1 ]; then
  PYTHONUNBUFFERED=1 BRRR_TORCH_JSON="$OUT/torch.json" BRRR_TORCH_BUDGET_S=${BRRR_TORCH_BUDGET_S:-140} \
    timeout 180 python3 scripts/gpu_side_by_side.py 2>&1 | tee "$OUT/torch.log" | grep -v Warning | tail -30
fi
[ -n "${REST:-}" ] && wait $REST
echo "CPU tests:"; grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]' "$OUT/tests_rest.log" | tail -8
grep -E -A4 'Failure|exception' "$OUT/tests_rest.log" | head -40
grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/tests_cuda.log" "$OUT/tests_rest.log" 2>/dev/null
python3 scripts/gpu_table.py "$OUT/brrr_bench.json" "$OUT/torch.json"
echo "== total $(( $(date +%s) - T0 )) s"
