#!/usr/bin/env python3
"""brrr against PyTorch on the model suite (the exports of scripts/models/export.py).

Two phases, each timed:
1. check: `brrr run MODEL --data test_data_set_N --check --backend B` on every selected export
   and each of its reference sets (batch 1, and the large batch for exports made with
   --large-batch): PASS/FAIL, the check lines, the kernels that ran on the host (the CUDA
   executor's "runs on the host" notes) and the compile time; --check-jobs runs several at once.
2. time: for every model, dtype and batch, rounds in which brrr (one run per export) and PyTorch
   eager, torch.compile and torch.compile(mode="reduce-overhead") (the same seeded model rebuilt
   from the export's manifest) take turns, so that clocks and the power cap move all of them
   alike. brrr's time is `brrr bench MODEL --backend B --json` when bench takes a model on that
   backend (latency median), else `brrr doctor MODEL --backend B --json` (wall_ms, a CUDA graph
   replay on the GPU); PyTorch's is timed the way `brrr bench` times brrr (--torch-timer events,
   the default): CUDA events around each call, synchronized after each, no L2 flush, median of
   --reps calls after 3 warm-up calls; so the host's launch of each call is inside both numbers.
   --torch-timer do_bench takes triton's do_bench median instead, which flushes L2 before each
   call and so hides the host's launch behind the flush (the yardstick before the twenty-fourth
   session); `both` times each mode both ways, the do_bench one as the mode "MODE@do_bench".
   On the CPU, a perf_counter median. Ratios are medians of the rounds' own ratios.
One table with ratios is printed last, with brrr bench's cold compile and warm (cached) load
times per row (seconds, medians over the rounds); --json writes every row.

Runs on the CPU too, for a dry run: --backend cpu with --small exports.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite  # noqa: E402

BIG_BATCH = suite.BIG_BATCH  # the large batch of each model; batch 1 is always timed too
T0 = time.time()


def log(msg):
    print(msg, flush=True)


def since():
    return f"{time.time() - T0:.0f} s"


def csv(s):
    return [x.strip() for x in s.split(",") if x.strip()]


def parse_batches(s, models):
    """"bert_base=1,32;gpt2=1" -> {model: [batches]}; models not named get 1 and BIG_BATCH."""
    out = {m: [1, BIG_BATCH.get(m, 1)] for m in models}
    for part in filter(None, (p.strip() for p in (s or "").split(";"))):
        m, _, bs = part.partition("=")
        if m.strip() not in out:
            sys.exit(f"gpu_bench.py: --batches names '{m.strip()}', not a selected model")
        out[m.strip()] = [int(b) for b in csv(bs)]
    return {m: sorted(set(b)) for m, b in out.items()}


def find_exports(root, models, dtypes, exporters, precisions):
    """(model, label, exporter, folder, manifest, precision) per selected export; each fp32 export
    also once per --precisions entry (label fp32@P: `--precision P` on the fp32 model)."""
    found = []
    for m in models:
        for d in dtypes:
            for e in exporters:
                p = os.path.join(root, suite.model_dir_name(m, d, e))
                if not os.path.exists(os.path.join(p, "model.onnx")):
                    log(f"skip {m} {d} {e}: no export in {p}")
                    continue
                with open(os.path.join(p, "manifest.json")) as f:
                    man = json.load(f)
                found.append((m, d, e, p, man, None))
                if d == "fp32":
                    found += [(m, f"fp32@{q}", e, p, man, q) for q in precisions]
    return found


def torch_dtype(label):
    import torch
    name = label.split("@")[-1]
    return {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
            "fp16": torch.float16}[name]


def shape_arg(man, batch):
    s = [batch] + man["input"]["shape"][1:]
    return f"{man['input']['name']}:{'x'.join(map(str, s))}"


def brrr_env(extra=None):
    return dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"),
                **(extra or {}))


def parse_variants(s):
    """--variants "rtc2:BRRR_CUDNN_RUNTIME_COMPILED=2;own:BRRR_ATTN_CUDNN=0,X=1" -> {name: env}:
    each export is checked and timed once more per variant, with that environment, its rows
    labelled exporter+name, in the same rounds as the plain run and PyTorch."""
    out = {}
    for part in filter(None, (x.strip() for x in s.split(";"))):
        name, _, envs = part.partition(":")
        env = dict(kv.split("=", 1) for kv in envs.split(",") if "=" in kv)
        if not name or not env or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            sys.exit(f"gpu_bench.py: bad --variants entry '{part}' (want NAME:VAR=VALUE[,...])")
        out[name] = env
    return out


VARIANT_ENV = {}  # exporter label ("torchscript+rtc2") -> that variant's environment


def run_cmd(cmd, timeout, label=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=brrr_env(VARIANT_ENV.get(label)))
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout} s"


def last_error(err):
    lines = [x for x in err.splitlines() if "error" in x.lower()]
    return (lines[-1] if lines else (err.strip().splitlines() or ["?"])[-1])[:200]


def precision_args(prec):
    return ["--precision", prec] if prec else []


def check_sets(path, man):
    """{reference set folder: its batch} of one export (older exports: test_data_set_0 alone)."""
    sets = man.get("check_sets") or {"test_data_set_0": man["input"]["shape"][0]}
    return {k: b for k, b in sets.items() if os.path.isdir(os.path.join(path, k))}


def brrr_check(a, path, prec, td, label=None):
    """`brrr run --check` on one reference set: result, error summary, host kernels, compile ms."""
    td = os.path.join(path, td)
    cmd = [a.brrr, "run", os.path.join(path, "model.onnx"), "--data", td, "--check",
           "--backend", a.backend, "--reps", "3"] + precision_args(prec) + \
        (["--threads", str(a.threads)] if a.backend == "cpu" else [])
    rc, out, err = run_cmd(cmd, a.check_timeout, label)
    host = [x for x in err.splitlines() if "runs on the host" in x]
    checks = [x.strip() for x in out.splitlines() if x.startswith("check ")]
    m = re.search(r"compile ([0-9.e+]+) ms", out)
    result = "PASS" if rc == 0 else "FAIL" if rc == 1 else f"error: {last_error(err)}"
    return dict(result=result, check=" | ".join(checks)[:300], host_kernels=len(host),
                host_ops=sorted({h.split("[", 1)[-1].split("]")[0] for h in host})[:8],
                compile_ms=float(m.group(1)) if m else None)


def bench_takes_models(a):
    """Does `brrr bench` time an ONNX model on this backend (the trtexec-style bench)? The old
    bench takes only built-in workloads on cuda and has no --iterations."""
    rc, out, err = run_cmd([a.brrr, "bench", "--help"], 30)
    return rc == 0 and "--iterations" in out + err


def median_from_bench_json(j):
    """The latency median of a bench --json record, whatever its layout: {latency_ms: {median}},
    {median_ms}, or the old [{variant: fused, ms}] list."""
    recs = j if isinstance(j, list) else [j]
    for r in recs:
        if not isinstance(r, dict):
            continue
        for k in ("latency_ms", "latency"):
            if isinstance(r.get(k), dict):
                for mk in ("median", "median_ms", "p50"):
                    if mk in r[k]:
                        return float(r[k][mk])
        if "median_ms" in r:
            return float(r["median_ms"])
    for r in recs:
        if isinstance(r, dict) and r.get("variant", "fused") == "fused" and "ms" in r:
            return float(r["ms"])
    raise ValueError(f"no latency median in bench JSON keys {list(recs[0]) if recs else []}")


def brrr_time(a, path, man, batch, use_bench, prec, starts=None, label=None, queued=None):
    """One brrr measurement: (ms, None) or (None, error). doctor takes no --precision: a
    --precisions row is timed only through bench. With bench, the run's cold compile and warm
    (cached) load times are appended to `starts` as (cold_ms, warm_ms), and on the GPU its
    queued time per run (runs back to back, one wait: the launch hidden, as do_bench hides
    PyTorch's) to `queued`."""
    model = os.path.join(path, "model.onnx")
    fd, jpath = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        thr = ["--threads", str(a.threads)] if a.backend == "cpu" else []
        if use_bench:
            cmd = [a.brrr, "bench", model, "--backend", a.backend, "--shape", shape_arg(man, batch),
                   "--iterations", str(a.reps), "--json", jpath] + thr + precision_args(prec)
        elif prec:
            return None, "doctor has no --precision and bench takes no model here"
        else:
            cmd = [a.brrr, "doctor", model, "--backend", a.backend, "--shape",
                   shape_arg(man, batch), "--reps", str(a.reps), "--json", jpath] + thr
        rc, out, err = run_cmd(cmd, a.time_timeout, label)
        if rc != 0:
            return None, last_error(err)
        with open(jpath) as f:
            j = json.load(f)
        rec = j[0] if isinstance(j, list) and j else j  # bench --json: a list of one record
        if use_bench and starts is not None and isinstance(rec, dict) and "cold_compile_ms" in rec:
            starts.append((float(rec["cold_compile_ms"]), float(rec.get("warm_load_ms", 0))))
        q = rec.get("queued_ms_per_run") if isinstance(rec, dict) else None
        if use_bench and queued is not None and isinstance(q, dict) and "median" in q:
            queued.append(float(q["median"]))
        return (median_from_bench_json(j) if use_bench else float(j["wall_ms"])), None
    except (OSError, ValueError, KeyError) as e:
        return None, f"{type(e).__name__}: {e}"
    finally:
        os.unlink(jpath)


class Torch:
    """The same seeded model in PyTorch, its inputs at each batch, and a timer per mode."""

    def __init__(self, a, model, label, man):
        import torch
        self.torch, self.a = torch, a
        self.dev = "cuda" if a.backend == "cuda" else "cpu"
        spec = suite.SPECS[model]
        kw = {"layers": man["layers"]} if man.get("layers") else {}
        m, self.vocab = spec.build(man["small"], **kw)
        self.dtype = torch_dtype(label)
        torch.backends.cuda.matmul.allow_tf32 = label.endswith("tf32")
        torch.backends.cudnn.allow_tf32 = label.endswith("tf32")
        self.model = m.to(self.dtype).to(self.dev)
        self.spec = spec
        self.fns = {}

    def inputs(self, batch):
        x = self.spec.inputs(batch, self.vocab)
        if self.spec.kind == "image":
            x = x.to(self.dtype)
        return x.to(self.dev)

    def fn(self, mode, batch):
        key = (mode, batch)
        if key not in self.fns:
            torch = self.torch
            x = self.inputs(batch)
            m = self.model
            # "<mode>-dense": the outputs made contiguous, as an ONNX output is (inductor may
            # return a strided view: GPT-2's logits rows padded to 50264, stride (6433792,
            # 50264, 1) at batch 16), so that the copy brrr makes is timed on both sides.
            dense = mode.endswith("-dense")
            base = mode[:-len("-dense")] if dense else mode
            if base == "compile":
                m = torch.compile(self.model, dynamic=False)
            elif base == "reduce-overhead":
                m = torch.compile(self.model, mode="reduce-overhead", dynamic=False)

            def call():
                with torch.no_grad():
                    out = m(x)
                    if not dense:
                        return out
                    if isinstance(out, (tuple, list)):
                        return type(out)(o.contiguous() for o in out)
                    return out.contiguous()
            t = time.time()
            for _ in range(3):  # compile, capture and warm up outside the timed region
                call()
            self.sync()
            log(f"    torch {mode} batch {batch}: ready in {time.time() - t:.1f} s")
            self.fns[key] = call
        return self.fns[key]

    def sync(self):
        if self.dev == "cuda":
            self.torch.cuda.synchronize()

    def time(self, mode, batch):
        mode, _, timer = mode.partition("@")
        f = self.fn(mode, batch)
        if self.dev == "cuda" and timer == "do_bench":
            from triton.testing import do_bench
            return do_bench(f, warmup=25, rep=100, return_mode="median")
        if self.dev == "cuda":  # as brrr's time_runs: events around each call, then a sync
            torch = self.torch
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(3):
                f()
            torch.cuda.synchronize()
            t = []
            for _ in range(self.a.reps):
                e0.record()
                f()
                e1.record()
                e1.synchronize()
                t.append(e0.elapsed_time(e1))
            return statistics.median(t)
        t = []
        for _ in range(self.a.reps):
            t0 = time.perf_counter()
            f()
            t.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(t)


def time_group(a, model, dtype, exps, batches, use_bench, rows, checks):
    """Rounds over brrr (each export) and the torch modes at each batch of one model and dtype."""
    tm = None
    if a.torch_modes:
        try:
            tm = Torch(a, model, dtype, exps[0][4])
        except Exception as e:  # no torch, transformers or torchvision: brrr alone
            log(f"  {model} {dtype}: PyTorch skipped: {type(e).__name__}: {e}")
    for batch in batches:
        if time.time() - T0 > a.budget:
            log(f"  skip {model} {dtype} batch {batch}: budget {a.budget:.0f} s spent")
            continue
        bt = {e[2]: [] for e in exps}
        bstart = {e[2]: [] for e in exps}
        bqueued = {e[2]: [] for e in exps}
        berr = {}
        tt = {mode: [] for mode in timed_modes(a)} if tm else {}
        for r in range(a.rounds):
            if r and time.time() - T0 > a.budget:
                log(f"  {model} {dtype} batch {batch}: {r} rounds (budget spent)")
                break
            for (_, _, exporter, path, man, prec) in exps:
                if exporter in berr:
                    continue
                ms, err = brrr_time(a, path, man, batch, use_bench, prec, bstart[exporter],
                                    exporter, bqueued[exporter])
                if ms is None:
                    berr[exporter] = err
                else:
                    bt[exporter].append(ms)
            for mode in list(tt):
                try:
                    tt[mode].append(tm.time(mode, batch))
                except Exception as e:  # report and go on without this mode
                    log(f"  torch {mode} {model} {dtype} b{batch}: {type(e).__name__}: "
                        f"{str(e).splitlines()[0][:160] if str(e) else ''}")
                    del tt[mode]
        tmed = {m: statistics.median(v) for m, v in tt.items() if v}
        for (_, _, exporter, path, man, prec) in exps:
            b = bt[exporter]
            row = dict(model=model, dtype=dtype, exporter=exporter, batch=batch,
                       brrr_ms=statistics.median(b) if b else None,
                       brrr_error=berr.get(exporter), brrr_runs=b, torch_ms=tmed,
                       torch_runs=tt, **(checks.get((model, dtype, exporter, batch)) or {}))
            st = bstart[exporter]
            row["cold_compile_ms"] = statistics.median([c for c, _ in st]) if st else None
            bq = bqueued[exporter]
            row["brrr_queued_ms"] = statistics.median(bq) if bq else None
            row["warm_load_ms"] = statistics.median([w for _, w in st]) if st else None
            # Ratio per round: brrr's round r against each torch mode's round r.
            row["ratios"] = {m: statistics.median([x / y for x, y in zip(b, v)])
                             for m, v in tt.items() if b and v}
            rows.append(row)
            log(f"  {model} {dtype} {exporter} b{batch}: brrr "
                f"{[round(x, 3) for x in b] or berr.get(exporter)} torch "
                f"{ {m: round(v, 3) for m, v in tmed.items()} } ({since()})")
    if tm is not None:
        del tm
        try:
            import torch
            torch._dynamo.reset()
            if a.backend == "cuda":
                torch.cuda.empty_cache()
        except Exception:
            pass


def timed_modes(a):
    """The torch modes as timed: each mode, and with --torch-timer both also MODE@do_bench."""
    if a.backend != "cuda" or a.torch_timer == "events":
        return list(a.torch_modes)
    if a.torch_timer == "do_bench":
        return [f"{m}@do_bench" for m in a.torch_modes]
    return [x for m in a.torch_modes for x in (m, f"{m}@do_bench")]


def fmt(x, p=3):
    return "-" if x is None else f"{x:.{p}f}"


def print_table(rows, modes, backend):
    queued = any(r.get("brrr_queued_ms") is not None for r in rows)
    head = ["model", "dtype", "exporter", "batch", "check", "host", "cold s", "warm s",
            "brrr ms"] + (["queued ms"] if queued else []) + [f"{m} ms" for m in modes] + \
        [f"/{m}" for m in modes]
    table = []
    for r in rows:
        res = r.get("result", "-")
        if res.startswith("error"):
            res = "error"
        table.append([r["model"], r["dtype"], r["exporter"], str(r["batch"]), res,
                      str(r.get("host_kernels", "-")),
                      fmt(r.get("cold_compile_ms") and r["cold_compile_ms"] / 1e3, 2),
                      fmt(r.get("warm_load_ms") and r["warm_load_ms"] / 1e3, 2),
                      fmt(r["brrr_ms"]) if r["brrr_ms"] is not None else "failed"] +
                     ([fmt(r.get("brrr_queued_ms"))] if queued else []) +
                     [fmt(r["torch_ms"].get(m)) for m in modes] +
                     [fmt(r["ratios"].get(m), 2) for m in modes])
    w = [max(len(x[i]) for x in table + [head]) for i in range(len(head))]
    log(f"\n==== brrr vs PyTorch on the model suite ({backend}); /mode = brrr / that mode, "
        f"median of the rounds' ratios" + ("; queued ms: brrr bench's time per run with runs "
                                           "back to back (launch hidden, as do_bench hides "
                                           "PyTorch's)" if queued else ""))
    for x in [head] + table:
        log("  ".join(c.rjust(w[i]) if i >= 3 else c.ljust(w[i]) for i, c in enumerate(x)))
    for r in rows:
        if r.get("brrr_error"):
            log(f"  {r['model']} {r['dtype']} {r['exporter']} b{r['batch']}: brrr: "
                f"{r['brrr_error']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--suite", required=True, help="folder of export.py's exports")
    ap.add_argument("--brrr", required=True, help="the brrr binary")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--models", type=csv, default=list(suite.SPECS))
    ap.add_argument("--dtypes", type=csv, default=list(suite.DTYPES))
    ap.add_argument("--exporters", type=csv, default=suite.EXPORTERS)
    ap.add_argument("--precisions", type=csv, default=[],
                    help="also run each fp32 export with brrr --precision P (and PyTorch in P), "
                         "e.g. bf16,fp16")
    ap.add_argument("--batches", default="",
                    help='per model, e.g. "bert_base=1,32;gpt2=1" (default: 1 and '
                         + ", ".join(f"{m} {b}" for m, b in BIG_BATCH.items()) + ")")
    ap.add_argument("--torch-modes", type=csv, default=["eager", "compile", "reduce-overhead"],
                    help="PyTorch modes to time; empty for none; MODE-dense makes the "
                         "outputs contiguous")
    ap.add_argument("--torch-timer", default="events", choices=["events", "do_bench", "both"],
                    help="how PyTorch is timed on the GPU (see the module's docstring)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=50, help="timed runs per brrr measurement")
    ap.add_argument("--threads", type=int, default=2, help="CPU backend threads")
    ap.add_argument("--budget", type=float, default=1e9, help="seconds; later work is skipped")
    ap.add_argument("--check-timeout", type=int, default=300)
    ap.add_argument("--time-timeout", type=int, default=300)
    ap.add_argument("--check-jobs", type=int, default=1,
                    help="brrr --check runs at a time (their compile times then overlap)")
    ap.add_argument("--no-check", action="store_true", help="skip the --check phase")
    ap.add_argument("--no-time", action="store_true", help="skip the timing phase")
    ap.add_argument("--variants", default="",
                    help='brrr run again per variant with extra environment, e.g. '
                         '"rtc2:BRRR_CUDNN_RUNTIME_COMPILED=2" (rows labelled exporter+name)')
    ap.add_argument("--json", help="write every row here")
    a = ap.parse_args()
    for m in a.models:
        if m not in suite.SPECS:
            sys.exit(f"gpu_bench.py: unknown model '{m}'; choose from {','.join(suite.SPECS)}")
    if a.backend == "cpu":
        try:
            import torch
            torch.set_num_threads(a.threads)
        except ImportError:
            pass
    batches = parse_batches(a.batches, a.models)
    exps = find_exports(a.suite, a.models, a.dtypes, a.exporters, a.precisions)
    if not exps:
        sys.exit(f"gpu_bench.py: no exports under {a.suite} for the selection")
    for name, env in parse_variants(a.variants).items():
        for x in list(exps):
            if "+" not in x[2]:
                VARIANT_ENV[f"{x[2]}+{name}"] = env
                exps.append(x[:2] + (f"{x[2]}+{name}",) + x[3:])
    checks = {}  # (model, label, exporter, batch) -> check result
    if not a.no_check:
        work = [(m, d, e, path, prec, td, b) for (m, d, e, path, man, prec) in exps
                for td, b in check_sets(path, man).items()]
        log(f"== check phase: {len(work)} reference sets of {len(exps)} exports, brrr run --check "
            f"--backend {a.backend}, {a.check_jobs} at a time")

        def one(w):
            (m, d, e, path, prec, td, b) = w
            return w, brrr_check(a, path, prec, td, e)
        with ThreadPoolExecutor(max_workers=max(1, a.check_jobs)) as pool:
            for (m, d, e, path, prec, td, b), c in pool.map(one, work):
                checks[(m, d, e, b)] = c
                log(f"  {m} {d} {e} b{b}: {c['result']} {c['check']} host kernels "
                    f"{c['host_kernels']}{' ' + ','.join(c['host_ops']) if c['host_ops'] else ''}"
                    f" compile {fmt(c['compile_ms'], 0)} ms ({since()})")
        log(f"== check phase done at {since()}")
    rows = []
    if not a.no_time:
        use_bench = bench_takes_models(a)
        if not use_bench and a.backend == "cuda":
            # doctor reads the probed ceilings; the first call on a machine measures them.
            t = time.time()
            rc, _, err = run_cmd([a.brrr, "probe", "--backend", "cuda"], 300)
            log(f"  brrr probe --backend cuda: {'ok' if rc == 0 else last_error(err)} in "
                f"{time.time() - t:.0f} s")
        log(f"== time phase: brrr {'bench' if use_bench else 'doctor'} --backend {a.backend}, "
            f"torch {','.join(timed_modes(a)) or 'none'} (timer: {a.torch_timer}), {a.rounds} rounds")
        labels = list(dict.fromkeys(x[1] for x in exps))
        for m in a.models:
            for d in labels:
                group = [x for x in exps if x[0] == m and x[1] == d]
                if group:
                    time_group(a, m, d, group, batches[m], use_bench, rows, checks)
        log(f"== time phase done at {since()}")
    else:
        rows = [dict(model=m, dtype=d, exporter=e, batch=b, brrr_ms=None, torch_ms={}, ratios={},
                     **c) for (m, d, e, b), c in checks.items()]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    print_table(rows, timed_modes(a), a.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
