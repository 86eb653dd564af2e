#!/usr/bin/env bash
# One device call: configure + build (full tree if its packages are there, else the CUDA backend
# standalone), the CUDA unit tests, brrr_gpu_probe, then the PyTorch side-by-side; tables last.
# Usage there: set -o pipefail; cd .gpu_stage && bash scripts/gpu_run.sh 2>&1 | tee $OUT/log
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export XDG_CACHE_HOME=/tmp/brrr_xdg   # the NVRTC cache starts empty on a fresh machine anyway
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv,noheader || true

B=/tmp/brrr_build
if cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1; then
  echo "== full build"
  ninja -C $B -j16 brrr_tests brrr_gpu_probe >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
  TESTS="$B/tests/brrr_tests --gtest_filter=*Cuda*"
  PROBE=$B/tools/gpu_bench/brrr_gpu_probe
else
  echo "== full configure failed ($(grep -m1 -i 'could not find\|error' "$OUT/cmake.log")); standalone CUDA build"
  B=/tmp/brrr_build_sa
  cmake -S scripts/gpu_standalone -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake_sa.log" 2>&1 ||
    { tail -30 "$OUT/cmake_sa.log"; exit 1; }
  ninja -C $B -j16 >"$OUT/build.log" 2>&1 || { grep -m20 -B2 -A8 'error' "$OUT/build.log"; exit 1; }
  TESTS=$B/brrr_cuda_tests
  PROBE=$B/brrr_gpu_probe
fi
echo "== built in $(( $(date +%s) - T0 )) s"

$TESTS 2>&1 | tee "$OUT/tests.log" | grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|error|Expected|Which is|actual' | head -60
timeout 180 $PROBE 2>&1 | tee "$OUT/probe.log" | grep -v '^|'
echo "== probe done at $(( $(date +%s) - T0 )) s"
PYTHONUNBUFFERED=1 BRRR_TORCH_BUDGET_S=${BRRR_TORCH_BUDGET_S:-240} timeout 330 \
  python3 scripts/gpu_side_by_side.py 2>&1 | tee "$OUT/torch.log" | grep -v '^|' | grep -v Warning | tail -40
echo
grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests? ran' "$OUT/tests.log"
sed -n '/==== brrr_gpu_probe table/,$p' "$OUT/probe.log"
sed -n '/==== PyTorch side-by-side/,$p' "$OUT/torch.log"
echo "== total $(( $(date +%s) - T0 )) s"
