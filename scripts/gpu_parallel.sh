#!/usr/bin/env bash
# One device call: builds brrr, then runs a gtest filter N times at once, each process with its
# own empty kernel cache (every module compiled fresh, the harshest case for the intermittent
# SIGSEGV of issue 14 item 1), and prints one line per run and a count of crashes. Independent
# processes are independent trials; timing-based tests can fail under the shared load, so a
# run's failed tests are listed apart from crashes (signals).
#   FILTER (default 'Cuda*:DoctorCuda*')  N (default 10)  TIMEOUT (s per run, default 450)
#   B, EXTRA_CMAKE: as for scripts/gpu_build.sh
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
# Everything printed is also kept under $OUT as it comes, so a call cut short still returns it.
exec > >(tee -a "$OUT/parallel.log") 2>&1
cd "$(dirname "$0")/.." || exit 1
T0=$(date +%s)
source scripts/gpu_build.sh || exit 1
echo "== built in $(( $(date +%s) - T0 )) s"
N=${N:-10}
mkdir -p /tmp/brrr_par
PIDS=()
for i in $(seq 1 "$N"); do
  rm -rf "/tmp/brrr_par/cache_$i" "/tmp/brrr_par/rc_$i"
  # -k: a run that ignores SIGTERM (a handler stuck in clean-up) is killed 15 s later.
  ( XDG_CACHE_HOME=/tmp/brrr_par/cache_$i timeout -k 15 "${TIMEOUT:-450}" "$B/tests/brrr_tests" \
      --gtest_filter="${FILTER:-Cuda*:DoctorCuda*}" >"/tmp/brrr_par/run_$i.log" 2>&1
    echo $? >"/tmp/brrr_par/rc_$i" ) &
  PIDS+=($!)
done
# Progress every 30 s (a call cut short still shows how far each run got); waits on the runs'
# own pids, never on the tee that keeps this output.
while :; do
  done_n=$(ls /tmp/brrr_par/rc_* 2>/dev/null | wc -l)
  [ "$done_n" -ge "$N" ] && break
  sleep 30
  echo "  $(( $(date +%s) - T0 )) s: $done_n of $N done; tests passed so far:" \
    "$(for i in $(seq 1 "$N"); do grep -c '^\[       OK \]' /tmp/brrr_par/run_$i.log; done | tr '\n' ' ')"
done
wait "${PIDS[@]}"
crashes=0 clean=0
for i in $(seq 1 "$N"); do
  rc=$(cat "/tmp/brrr_par/rc_$i")
  log=/tmp/brrr_par/run_$i.log
  [ "$rc" = 0 ] && clean=$((clean + 1))
  [ "$rc" -gt 128 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] && crashes=$((crashes + 1)) && cp "$log" "$OUT/crash_$i.log"
  echo "run $i: rc $rc; $(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]+' "$log" | tr '\n' ' ')" \
    "$(grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sort -u | cut -c14- | tr '\n' ' ')"
  [ "$rc" -gt 128 ] && grep -E '^\[ RUN      \]' "$log" | tail -1
  [ "$rc" != 0 ] && cp "$log" "$OUT/run_$i.log"
done
echo "== $N runs of '${FILTER:-Cuda*:DoctorCuda*}' at once: $clean clean, $crashes crashed" \
  "(by a signal), total $(( $(date +%s) - T0 )) s"
