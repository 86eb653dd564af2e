#!/usr/bin/env bash
# Temp: eager vs graphed CUPTI profiles of the fp32 exports at batch 1 (data for the static_plan model).
set -u -o pipefail
OUT=${OUT:-/tmp/brrr_gpu_out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/doctor_graphs.log") 2>&1
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
S=/tmp/brrr_suite
MODELS=${MODELS:-bert_base,gpt2,vit_b_16,resnet50}
PYTHONUNBUFFERED=1 python3 scripts/models/export.py --out $S --models "$MODELS" --dtypes fp32 \
  --exporters torchscript --no-verify --threads 8 >"$OUT/export.log" 2>&1 &
EXPORT=$!
source scripts/gpu_build.sh || exit 1
echo "== built at $(el) s"; wait $EXPORT; echo "== exported at $(el) s rc $?"
export XDG_CACHE_HOME=/tmp/brrr_xdg
$B/brrr probe --backend cuda --refresh 2>&1 | tail -30
for d in $S/*_fp32_torchscript; do
  m=$(basename $d)
  case $m in resnet*|vit*) sh=pixel_values:1x3x224x224;; *) sh=input_ids:1x128;; esac
  f=$(ls $d/*.onnx | head -1)
  timeout 200 $B/brrr doctor $f --backend cuda --shape $sh --json $OUT/$m.graph.json >/dev/null 2>$OUT/$m.graph.err || tail -3 $OUT/$m.graph.err
  BRRR_DISABLE_GRAPHS=1 timeout 200 $B/brrr doctor $f --backend cuda --shape $sh --json $OUT/$m.eager.json >/dev/null 2>$OUT/$m.eager.err || tail -3 $OUT/$m.eager.err
  echo "== $m at $(el) s"
  ${DOCTOR_COMPARE:-false} && timeout 300 $B/brrr doctor $f --backend cuda --shape $sh --compare --json $OUT/$m.compare.json 2>&1 | grep -A12 -i "predicted" | head -30
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os, statistics as st
out = sys.argv[1]
for g in sorted(glob.glob(out + "/*.graph.json")):
    m = os.path.basename(g)[:-11]
    e = g.replace(".graph.", ".eager.")
    if not os.path.exists(e): continue
    G, E = json.load(open(g)), json.load(open(e))
    def summ(J):
        ks = J["kernels"]; a = J["attribution"]
        kms = sum(k["time_ms"] for k in ks)
        return len(ks), kms, a["gap_ms"], J["wall_ms"]
    ng, kg, gg, wg = summ(G); ne, ke, ge, we = summ(E)
    c = G["ceilings"]
    print(f"{m}: eager n={ne} kern={ke:.3f} gap={ge:.3f} wall={we:.3f} | graph n={ng} kern={kg:.3f} gap={gg:.3f} wall={wg:.3f} "
          f"| gap/kernel graph={gg/ng*1e3:.2f}us eager={ge/ne*1e3:.2f}us | launch_us={c.get('launch_us')} node_us={c.get('graph_node_us')}")
    # per-kernel duration ratio graph/eager
    rs = [kg_["time_ms"]/ke_["time_ms"] for kg_, ke_ in zip(G["kernels"], E["kernels"]) if ke_["time_ms"] > 0 and kg_["name"] == ke_["name"]]
    if rs: print(f"   per-kernel time graph/eager median {st.median(rs):.3f} p10 {sorted(rs)[len(rs)//10]:.3f} p90 {sorted(rs)[9*len(rs)//10]:.3f}")
    for rm in G["remedies"] + E["remedies"]:
        if rm["name"] == "static_plan": print("   ", rm["predicted_ms"], rm["detail"][:200])
PY
