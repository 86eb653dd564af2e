#!/usr/bin/env bash
# The first device call of the next session (carry [".devdeps", ".devbuild"]; .devbuild: see
# scripts/gpu_tools/devbuild.sh, optional).
#   1. The persistent encoder (persist_layer.cu, no brrr build), as the twenty-fourth session left
#      it: 4 weight stages and the row-coalesced finish of the out-projection and FFN down by
#      default (61.9 us a layer at 3 6 2 8 on an H100, from 96.5). New and not yet run: PL_FIN=all,
#      FFN up's finish writing whole 16-byte words of the packed A operand (finish_packed_up) and
#      Q/K/V's with coalesced loads and stores (finish_qkv); and PL_A=tma, A's chunks copied into
#      shared memory by a producer warp that waits for the inputs itself. And PL_CLUSTER (the
#      twenty-fifth session): clusters of CTAs that sum a GEMM's K slices through distributed
#      shared memory, no partials in L2 and no finishing item; and PL_DEPS=fine, attention,
#      out-projection and FFN down items waiting only for the pieces they read. The runs'
#      checks say whether they are right.
#   2. The yardstick: brrr against torch.compile (reduce-overhead) with PyTorch timed both ways
#      (gpu_bench.py --torch-timer both): CUDA events around each call as brrr bench times brrr,
#      and triton's do_bench (L2 flushed before each call, which hides the host's launch).
#      BERT-base bf16 at b1 and b32, ResNet-50 bf16 at b1. (brrr's own launch + wait, by bench's
#      queued line: 7.7 us of 403 at BERT b1, H100.)
#   3. The doctor's wall against brrr bench's latency (BERT-base b1), after the 50 ms warm-up.
# Everything also goes to $OUT/log, so a call cut short still brings back what ran.
export OUT=${OUT:-/tmp/o}; T0=$(date +%s)
mkdir -p "$OUT"
exec > >(tee "$OUT/log") 2>&1
el() { echo $(( $(date +%s) - T0 )); }
S=/tmp/brrr_suite
[ "${PERSIST_ONLY:-0}" = 1 ] || (python3 scripts/models/export.py --out $S --models bert_base,resnet50 --dtypes bf16 --exporters torchscript \
  --no-verify --threads 8 >"$OUT/export.log" 2>&1; echo "export rc $?" >>"$OUT/export.log") &
# brrr: the one carried in .devbuild when it was built from these sources and runs here
# (scripts/gpu_tools/devbuild.sh; carry [".devdeps", ".devbuild"]), else built here meanwhile.
if [ "${PERSIST_ONLY:-0}" != 1 ]; then
  if (source scripts/gpu_env.sh >/dev/null 2>&1 && source scripts/gpu_tools/devbuild.sh use) >"$OUT/build_out.log" 2>&1; then
    export B=$PWD/.devbuild
    echo "build rc 0 (carried)" >>"$OUT/build_out.log"
  else
    (TARGETS="brrr_cli" source scripts/gpu_build.sh >>"$OUT/build_out.log" 2>&1; echo "build rc $?" >>"$OUT/build_out.log") &
  fi
fi
echo "== persist_layer"
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xptxas -v scripts/gpu_tools/persist_layer.cu \
  -o /tmp/persist_layer 2>"$OUT/persist_layer_ptxas.txt" || tail -20 "$OUT/persist_layer_ptxas.txt"
# Most wanted first: a call cut short keeps what ran.
SUM=$OUT/persist_summary.txt
: >"$SUM"
for cfg in "PL_FIN=rows:12 3 6 2 8" "PL_CLUSTER=4:1 2 4 2 4" "PL_CLUSTER=4:12 2 4 2 4" "PL_CLUSTER=8:12 2 4 2 8" \
  "PL_DEPS=fine:12 3 6 2 8" "PL_CLUSTER=4 PL_DEPS=fine:12 2 4 2 4" "PL_FIN=all:12 3 6 2 8" \
  "PL_A=tma PL_FIN=all:12 3 6 2 8" "PL_CLUSTER=4 PL_A=tma:12 2 4 2 4" "PL_A=tma:12 3 6 2 8" \
  "PL_CLUSTER=2:12 2 2 2 2" "PL_A=tma PL_FIN=all:12 2 4 2 4" "PL_FIN=all:12 2 4 2 4"; do
  echo "-- ${cfg%%:*} ${cfg#*:}"
  # shellcheck disable=SC2086
  env ${cfg%%:*} timeout 20 /tmp/persist_layer ${cfg#*:} >/tmp/pl_run.txt 2>&1
  rc=$?
  grep -vE '^NVIDIA|^  (LN1|LN2) ' /tmp/pl_run.txt
  [ $rc -ne 0 ] && echo "   (exit $rc)" && FAILED="${FAILED:-$cfg}"
  # One line a configuration for the summary: us a layer (the timing's line) and the check.
  t=$(grep -o '[0-9.]* us a layer' /tmp/pl_run.txt | tail -1)
  c=$(grep -o 'rel L2 [0-9.e-]*.*' /tmp/pl_run.txt | head -1)
  printf '%-44s %-17s %s\n' "${cfg%%:*} ${cfg#*:}" "${t:--}" "${c:-no check printed} (exit $rc)" >>"$SUM"
done
# The first configuration that failed (wrong, faulted or hung), one layer under compute-sanitizer's
# memcheck, then its racecheck (shared memory, distributed shared memory included), so that the
# same call says where.
if [ -n "${FAILED:-}" ]; then
  set -- ${FAILED#*:}
  for tool in memcheck racecheck; do
    echo "-- compute-sanitizer --tool $tool: ${FAILED%%:*} 1 $2 $3 $4 $5 ${6:-}"
    # shellcheck disable=SC2086
    env ${FAILED%%:*} timeout 120 compute-sanitizer --tool $tool --print-limit 8 /tmp/persist_layer 1 $2 $3 $4 $5 ${6:-} 2>&1 |
      grep -vE '^NVIDIA|^  ' | head -40
  done
fi
echo "== persist_layer done at $(el) s; one line a configuration:"
cat "$SUM"
[ "${PERSIST_ONLY:-0}" = 1 ] && exit 0  # part 1 alone (a short call), without waiting for the build
wait
tail -1 "$OUT/build_out.log"; tail -1 "$OUT/export.log"
source scripts/gpu_env.sh >/dev/null 2>&1
B=${B:-/tmp/brrr_build}
export XDG_CACHE_HOME=/tmp/brrr_xdg_25
LEFT=$(( ${BUDGET_S:-420} - $(el) ))
PYTHONUNBUFFERED=1 timeout $(( LEFT + 30 )) python3 scripts/models/gpu_bench.py --suite $S --brrr $B/brrr \
  --backend cuda --models bert_base,resnet50 --dtypes bf16 --exporters torchscript --batches "bert_base=1,32;resnet50=1" \
  --torch-modes reduce-overhead --torch-timer both --rounds 3 --reps 100 --no-check --budget "$LEFT" \
  --json "$OUT/models.json" 2>&1 | grep -v -i warn | tail -25
# 3. The doctor's wall against brrr bench's latency on the same model (the twenty-third session:
#    0.436 against 0.403 ms at BERT-base b1); every whole-plan timing now warms up for 50 ms first.
M=$S/bert_base_bf16_torchscript/model.onnx
timeout 60 $B/brrr bench $M --backend cuda --iterations 200 2>&1 | grep -E '^(latency|queued)' | cut -c1-160
timeout 90 $B/brrr doctor $M --backend cuda --top 3 2>&1 | grep -E '^wall|^idle' | cut -c1-200
echo "== end at $(el) s"
