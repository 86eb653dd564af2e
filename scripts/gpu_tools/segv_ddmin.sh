#!/usr/bin/env bash
# Issue 14 item 1: which earlier tests does the cuModuleLoadData SIGSEGV need? Runs the full CUDA
# filter until a run crashes (a stall past TIMEOUT counts as a crash: the first run on a fresh
# machine stalls where later ones crash), takes the tests that ran before the crashing one, and
# drops chunks of them (halves, then quarters, ...) while the crash stays. Prints the smallest
# sequence found. Needs $B built (scripts/gpu_repeat.sh or gpu_build.sh first).
set -u
B=${B:-/tmp/brrr_build}
cd "$(dirname "$0")/../.."
source scripts/gpu_build.sh >/dev/null 2>&1 || { echo "build setup failed"; exit 1; }
export XDG_CACHE_HOME=/tmp/brrr_xdg_ddmin
T=${TIMEOUT:-20}
runs=0
bad() {  # bad FILTER: 0 when the run crashes or stalls
  runs=$((runs + 1))
  rm -rf "$XDG_CACHE_HOME"
  timeout "$T" "$B/tests/brrr_tests" --gtest_filter="$1" >/tmp/ddmin.log 2>&1
  local rc=$?
  echo "  run $runs: rc $rc, $(grep -cE '^\[       OK' /tmp/ddmin.log) ok" >&2
  [ $rc -eq 139 ] || [ $rc -eq 124 ] || [ $rc -eq 134 ]
}
target=
for i in 1 2 3; do
  if bad "${FILTER:-Cuda*:DoctorCuda*}"; then
    target=$(grep -E '^\[ RUN' /tmp/ddmin.log | tail -1 | awk '{print $4}')
    mapfile -t before < <(grep -E '^\[ RUN' /tmp/ddmin.log | awk '{print $4}' | head -n -1)
    [ "$i" -gt 1 ] && break  # the first run may be the fresh machine's stall: take a crash
  fi
done
[ -z "$target" ] && { echo "no crash in 3 full runs"; exit 0; }
echo "crash at $target after ${#before[@]} tests"
join() { local IFS=:; echo "$*"; }
cur=("${before[@]}")
chunk=$(( (${#cur[@]} + 1) / 2 ))
while [ "$chunk" -ge "${MIN_CHUNK:-2}" ] && [ $runs -lt "${MAX_RUNS:-24}" ]; do
  i=0
  while [ $i -lt ${#cur[@]} ] && [ $runs -lt "${MAX_RUNS:-24}" ]; do
    try=("${cur[@]:0:$i}" "${cur[@]:$((i + chunk))}")
    if bad "$(join "${try[@]}" "$target")"; then cur=("${try[@]}"); else i=$((i + chunk)); fi
  done
  chunk=$((chunk / 2))
done
echo "still crashing with ${#cur[@]} tests before $target (${runs} runs):"
printf '  %s\n' "${cur[@]}"
bad "$target" && echo "$target alone: crashes" || echo "$target alone: passes"
