#!/usr/bin/env bash
# One device call: builds brrr (Release, -O3 plus -g) and runs a gtest filter of the CUDA tests
# REPEAT times in a row, each run with a fault handler preloaded (scripts/gpu_tools/
# segv_backtrace.c) and core dumps on; any crash's backtrace is resolved with addr2line and, where
# a core was written, cuda-gdb prints every thread's stack. Prints one line per run and a summary.
#   FILTER (default 'Cuda*:DoctorCuda*')  REPEAT (default 10)  then optionally FILTER2/REPEAT2
#   COLD=1      empty brrr's kernel cache before every run (every module freshly compiled)
#   PRELOAD=0   no fault handler (an ASan build: its runtime must come first)
#   ENV2        shell code run before the FILTER2 loop (e.g. a variant's environment)
#   TIMEOUT     seconds per run (default 400)   B, EXTRA_CMAKE: as for scripts/gpu_build.sh
#   VARIANTS    instead of the FILTER loops: run FILTER once per listed variant, in order, e.g.
#               VARIANTS="plain mcheck perturb apilog plain"; a variant is one environment:
#                 plain    nothing added
#                 mcheck   glibc's checking allocator (libc_malloc_debug, malloc.check=3): a
#                          damaged heap chunk aborts at the free that finds it
#                 perturb  MALLOC_PERTURB_: freed memory is overwritten (a use after free reads junk)
#                 apilog   cuDNN and cuBLASLt API logs; their last lines are shown on a crash
#                 nokeydel  pthread_key_delete does nothing (gpu_tools/lib_shim.c): no key reused
#                 nodlclose dlclose does nothing: no library is ever unloaded
#                 libtrace  log every pthread key create/delete and dlclose with its caller
#                 K=V,K2=V2  those environment variables
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export XDG_CACHE_HOME=/tmp/brrr_xdg
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
EXTRA_CMAKE="-DCMAKE_CXX_FLAGS=-g ${EXTRA_CMAKE:-}" source scripts/gpu_build.sh
echo "== built in $(( $(date +%s) - T0 )) s"
gcc -O1 -g -shared -fPIC -o /tmp/segv_backtrace.so scripts/gpu_tools/segv_backtrace.c || exit 1
gcc -O1 -g -shared -fPIC -o /tmp/lib_shim.so scripts/gpu_tools/lib_shim.c -ldl || exit 1
ulimit -c unlimited 2>/dev/null
mkdir -p /tmp/cores && (echo '/tmp/cores/core.%p' > /proc/sys/kernel/core_pattern) 2>/dev/null
echo "core_pattern: $(cat /proc/sys/kernel/core_pattern 2>/dev/null)"

mkdir -p /tmp/brrr_runs
MDEBUG=$(ls /usr/lib/x86_64-linux-gnu/libc_malloc_debug.so* /lib/x86_64-linux-gnu/libc_malloc_debug.so* 2>/dev/null | head -1)
loop() {  # loop FILTER REPEAT TAG [VARIANT]
  local filter=$1 reps=$2 tag=$3 variant=${4:-plain} pass=0 fail=0
  for i in $(seq 1 "$reps"); do
    local log="/tmp/brrr_runs/${tag}_$i.log" t=$(date +%s) pre=/tmp/segv_backtrace.so
    [ "${COLD:-0}" = 1 ] && rm -rf "$XDG_CACHE_HOME"
    [ "${PRELOAD:-1}" = 0 ] && pre=
    local -a venv=()
    case $variant in
      mcheck) pre="$pre $MDEBUG"; venv=(GLIBC_TUNABLES=glibc.malloc.check=3) ;;
      perturb) venv=(MALLOC_PERTURB_=165) ;;
      nokeydel) pre="$pre /tmp/lib_shim.so"; venv=(SHIM_NO_KEY_DELETE=1) ;;
      nodlclose) pre="$pre /tmp/lib_shim.so"; venv=(SHIM_NO_DLCLOSE=1) ;;
      libtrace) pre="$pre /tmp/lib_shim.so"; venv=(SHIM_TRACE=1) ;;
      apilog) venv=(CUDNN_LOGLEVEL_DBG=3 "CUDNN_LOGDEST_DBG=$log.cudnn" CUBLASLT_LOG_LEVEL=5
                    "CUBLASLT_LOG_FILE=$log.lt") ;;
      *=*) IFS=, read -ra venv <<<"$variant" ;;
    esac
    env "${venv[@]}" LD_PRELOAD="$pre" timeout "${TIMEOUT:-400}" "$B/tests/brrr_tests" \
      --gtest_filter="$filter" >"$log" 2>&1
    local rc=$?
    local summary
    summary=$(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]+|^\[  SKIPPED \] [0-9]+' "$log" | tr '\n' ' ')
    echo "$tag run $i: rc $rc, $(( $(date +%s) - t )) s; $summary"
    if [ $rc -eq 0 ]; then pass=$((pass + 1)); else
      fail=$((fail + 1))
      [ $fail -le 3 ] && cp "$log" "$OUT/"
      grep -E '^\[ RUN      \]' "$log" | tail -1
      for api in "$log.cudnn" "$log.lt"; do
        [ -f "$api" ] && { echo "-- last lines of $api"; tail -25 "$api"; cp "$api" "$OUT/"; }
      done
      grep -E -B2 -A30 'malloc|free\(\)|corrupted|double free' "$log" | head -60
      grep -E 'Failure|FAILED' "$log" | head -5
      grep -E -A40 '^(==[0-9]+==ERROR|SUMMARY: |.*runtime error:)' "$log" | head -80
      if grep -q 'segv_backtrace' "$log"; then
        sed -n '/=== brrr segv_backtrace/,/=== end of backtrace/p' "$log" | head -60
        # Resolve frames inside brrr_tests (PIE offsets) to functions and lines.
        grep -oE 'brrr_tests\(\+0x[0-9a-f]+\)' "$log" | grep -oE '0x[0-9a-f]+' |
          xargs -r addr2line -f -C -i -e "$B/tests/brrr_tests" | paste - - | head -40
      fi
      for c in /tmp/cores/core.*; do
        [ -f "$c" ] || continue
        echo "-- core $c"
        timeout 120 cuda-gdb -batch -ex 'info threads' -ex 'thread apply all bt 25' \
          "$B/tests/brrr_tests" "$c" 2>&1 | grep -v '^\[New' | head -150
        rm -f "$c"
      done
    fi
  done
  echo "== $tag: $pass of $reps runs passed, $fail failed"
}
if [ -n "${VARIANTS:-}" ]; then
  echo "malloc debug library: ${MDEBUG:-none}"
  n=0
  for v in $VARIANTS; do
    n=$((n + 1))
    loop "${FILTER:-Cuda*:DoctorCuda*}" 1 "${n}_${v//[^A-Za-z0-9_]/_}" "$v"
  done
else
  loop "${FILTER:-Cuda*:DoctorCuda*}" "${REPEAT:-10}" main
fi
[ -n "${ENV2:-}" ] && eval "$ENV2"
[ -n "${FILTER2:-}" ] && loop "$FILTER2" "${REPEAT2:-10}" second
echo "== total $(( $(date +%s) - T0 )) s"
