"""Checks issue 19's doctor targets on models a user brings: for each model, `brrr doctor --compare
--json`, then (1) the class table's total against the wall, (2) efficiencies above 100% without a
stated reason, (3) each applied remedy's predicted against measured time.

  python3 scripts/doctor_check.py [--brrr build/brrr] [--threads 2] [--reps 20] MODEL.onnx...
  python3 scripts/doctor_check.py --backend cuda [--precision bf16] [--shape x:16x128] MODEL.onnx...
"""
import argparse, json, os, subprocess, sys, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("models", nargs="+")
ap.add_argument("--brrr", default=os.path.join(os.path.dirname(__file__), "..", "build", "brrr"))
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--no-compare", action="store_true")
ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
ap.add_argument("--precision", help="passed to doctor (default: its own, fp32)")
ap.add_argument("--shape", help="passed to doctor, e.g. input_ids:16x128")
ap.add_argument("--keep", help="folder: keep each doctor's report there as NAME.txt and NAME.json")
a = ap.parse_args()

rows = []
for m in a.models:
    name = os.path.basename(os.path.dirname(m)) or m
    with tempfile.TemporaryDirectory() as t:
        js = os.path.join(t, "d.json")
        cmd = [a.brrr, "doctor", m, "--backend", a.backend, "--reps", str(a.reps), "--json", js]
        cmd += ["--threads", str(a.threads)] if a.backend == "cpu" else []
        cmd += ["--precision", a.precision] if a.precision else []
        cmd += ["--shape", a.shape] if a.shape else []
        if not a.no_compare:
            cmd.append("--compare")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(js):
            print(f"{name}: doctor failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}", flush=True)
            continue
        d = json.load(open(js))
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            with open(os.path.join(a.keep, name + ".txt"), "w") as f:
                f.write(r.stdout + r.stderr)
            with open(os.path.join(a.keep, name + ".json"), "w") as f:
                json.dump(d, f)
    total = sum(c["time_ms"] for c in d["class_table"])
    off = 100 * (total / d["wall_ms"] - 1)
    bad = [k["name"] for k in d["kernels"] if k["efficiency"] > 1.0 and not k.get("over_roof_reason")]
    checks = [(c["remedy"], c["predicted_ms"], c["measured_ms"], 100 * c["error"],
               c.get("unreliable") or "") for c in d.get("checks", [])]
    rel = d["reliability"]["reliable"]
    line = f"{name:20s} wall {d['wall_ms']:8.3f} classes {off:+6.2f}%  eff>100% unexplained {len(bad)}"
    for rem, p, me, e, why in checks:
        line += f"  {rem} {p:.3f}/{me:.3f} ({e:+.1f}%{', unreliable' if why else ''})"
    if not rel:
        line += "  [unreliable: " + "; ".join(d["reliability"]["reasons"])[:80] + "]"
    print(line, flush=True)
    rows.append((name, off, bad, checks))

fails = [r for r in rows if abs(r[1]) > 3 or r[2] or any(abs(c[3]) > 20 for c in r[3])]
print(f"\n{len(rows)} models, {len(fails)} outside the targets (class total within 3% of the wall, "
      f"no unexplained efficiency above 100%, predictions within 20%)")
for r in fails:
    print(" ", r[0], "classes %+.2f%%" % r[1], "unexplained:", r[2][:5], [c for c in r[3] if abs(c[3]) > 20])
