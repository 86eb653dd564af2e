#!/usr/bin/env bash
# One device call to look into models that miss their targets: the suite against torch.compile
# for the models and batches named (scripts/gpu_models.sh; its variables apply), then
#   - the held-out models named in HELDOUT (exported in the background meanwhile), each with
#     `brrr run --check --backend cuda --precision P` under every configuration of CONFIGS
#     (name=ENV=VALUE,...; "base=" for none), and the doctor's top kernels of the first;
#   - the doctor's top kernels for each DOCTOR entry "export_folder:batch:precision" of the suite;
#   - PyTorch's time for single convs (scripts/gpu_tools/conv_peer.py) when CONV_PEER=1.
# Stops starting new work DEADLINE seconds (default 560) after its start.
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
left() { [ $(( $(date +%s) - T0 )) -lt "${DEADLINE:-560}" ]; }
H=/tmp/brrr_heldout
HELDOUT=${HELDOUT:-}
PREC=${PREC:-bf16}
if [ -n "$HELDOUT" ]; then
  # shellcheck disable=SC2086
  (PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4 python3 scripts/models/export_heldout.py --out $H $HELDOUT \
     >"$OUT/heldout_export.log" 2>&1) &
fi
BUDGET_S=${BUDGET_S:-300} bash scripts/gpu_models.sh
B=${B:-/tmp/brrr_build}
# shellcheck source=scripts/gpu_env.sh
source scripts/gpu_env.sh
export XDG_CACHE_HOME=/tmp/brrr_xdg
wait
[ "${CONV_PEER:-0}" = 1 ] && left && { echo "== conv_peer"; timeout 120 python3 scripts/gpu_tools/conv_peer.py; }
for n in $HELDOUT; do
  d=$H/$n
  [ -f "$d/model.onnx" ] || { echo "$n: not exported"; tail -3 "$OUT/heldout_export.log"; continue; }
  first=1
  for cfg in ${CONFIGS:-base=}; do
    left || { echo "-- deadline: skipping $n $cfg"; continue; }
    name=${cfg%%=*}; envs=${cfg#*=}
    # shellcheck disable=SC2046
    r=$(env $(echo "$envs" | tr ',' ' ') timeout 120 "$B/brrr" run "$d/model.onnx" \
        --data "$d/test_data_set_0" --check --backend cuda --reps 20 --precision "$PREC" 2>&1 |
        grep -E '^time|^check|host|rror|plan' | tr '\n' ' ' | cut -c1-600)
    echo "$n $PREC [$name]: $r"
    if [ $first = 1 ]; then
      first=0
      timeout 90 "$B/brrr" doctor "$d/model.onnx" --backend cuda --precision "$PREC" --top "${TOP:-14}" \
        >"$OUT/doctor_$n.txt" 2>&1
      sed -n '1,/^top /p' "$OUT/doctor_$n.txt" | grep -iE 'wall|UNRELIABLE|verdict|trust' | head -8
      sed -n '/^top /,/^class table/p' "$OUT/doctor_$n.txt"
    fi
  done
done
for spec in ${DOCTOR:-}; do
  left || { echo "-- deadline: skipping doctor $spec"; continue; }
  IFS=: read -r ex batch prec <<<"$spec"
  m=${SUITE:-/tmp/brrr_suite}/$ex/model.onnx
  shp=$(python3 -c "import onnx,sys; m=onnx.load(sys.argv[1],load_external_data=False); i=m.graph.input[0]; \
print(i.name+':'+'x'.join([sys.argv[2]]+[str(d.dim_value) for d in i.type.tensor_type.shape.dim[1:]]))" "$m" "$batch")
  echo "== doctor $ex batch $batch $prec ($shp)"
  timeout 120 "$B/brrr" doctor "$m" --backend cuda --shape "$shp" --precision "$prec" --top "${TOP:-14}" \
    >"$OUT/doctor_${ex}_b$batch.txt" 2>&1
  grep -iE 'wall|UNRELIABLE|verdict' "$OUT/doctor_${ex}_b$batch.txt" | head -6
  sed -n '/^top /,$p' "$OUT/doctor_${ex}_b$batch.txt" | head -60
done
echo "== done at $(( $(date +%s) - T0 )) s"
