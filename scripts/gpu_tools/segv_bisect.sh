#!/usr/bin/env bash
# Issue 14 item 1: narrows the cuModuleLoadData SIGSEGV down once it reproduces. Runs after
# scripts/gpu_repeat.sh has built $B (so the libraries are set up the same way); each case is one
# brrr_tests run with a fresh or a kept kernel cache, two runs each; then loads every cached cubin
# in a bare process (load_cubin.c). Prints one line per run.
set -u
B=${B:-/tmp/brrr_build}
OUT=${OUT:-/tmp/brrr_gpu_out}
cd "$(dirname "$0")/../.."
source scripts/gpu_build.sh >/dev/null 2>&1 || { echo "build setup failed"; exit 1; }
export XDG_CACHE_HOME=/tmp/brrr_xdg_bisect
gcc -O1 -g -o /tmp/load_cubin scripts/gpu_tools/load_cubin.c -I/usr/local/cuda/include \
  -L/usr/local/nvidia/lib64 -lcuda || exit 1
one() {  # one TAG COLD ENV... -- FILTER
  local tag=$1 cold=$2; shift 2
  local -a e=()
  while [ "$1" != "--" ]; do e+=("$1"); shift; done
  shift
  [ "$cold" = 1 ] && rm -rf "$XDG_CACHE_HOME"
  local log=/tmp/bisect_$tag.log
  env "${e[@]}" LD_PRELOAD=/tmp/segv_backtrace.so timeout 120 "$B/tests/brrr_tests" \
    --gtest_filter="$1" >"$log" 2>&1
  local rc=$?
  echo "$tag: rc $rc, last test $(grep -E '^\[ RUN' "$log" | tail -1 | awk '{print $4}'), $(grep -cE '^\[       OK' "$log") ok"
}
for r in 1 2; do
  one "chain_alone_cold_$r" 1 -- 'CudaGemmChain.MatchesReference'
  one "chain_alone_warm_$r" 0 -- 'CudaGemmChain.MatchesReference'
  one "chain_suite_cold_$r" 1 -- 'CudaGemmChain.*'
  one "conv_then_chain_cold_$r" 1 -- 'CudaConv*:CudaGemmChain.MatchesReference'
  one "conv_then_chain_warm_$r" 0 -- 'CudaConv*:CudaGemmChain.MatchesReference'
  one "no_chain_kernel_cold_$r" 1 BRRR_DISABLE_GEMM_CHAIN=1 -- 'Cuda*:DoctorCuda*'
  one "full_cold_$r" 1 -- 'Cuda*:DoctorCuda*'
  one "full_warm_$r" 0 -- 'Cuda*:DoctorCuda*'
done
mkdir -p "$OUT/cubins"
ok=0
while IFS= read -r c; do
  cp "$c" "$OUT/cubins/"
  if timeout 60 env LD_PRELOAD=/tmp/segv_backtrace.so REPS=3 /tmp/load_cubin "$c" >/dev/null 2>/tmp/lc.err
  then ok=$((ok + 1)); else echo "bare load of $c ($(stat -c %s "$c") bytes) failed: $(head -3 /tmp/lc.err)"; fi
done < <(find "$XDG_CACHE_HOME" -name '*.cubin')
echo "bare loads: $ok cubins loaded 3 times each without a fault"
