#!/usr/bin/env python3
"""Export the model suite to ONNX: BERT-base, GPT-2 small, ResNet-50, ViT-B/16 and a Llama-3.2-1B
shaped decoder, random seeded weights (scripts/models/suite.py), each in fp32 and bf16, with the
TorchScript exporter (opset 17) and the dynamo exporter (opset 18).

Every export has a dynamic batch dim (named "batch") and model-zoo reference data at --batch:
OUT/<model>_<dtype>_<exporter>/model.onnx (weights over 2 GB in model.onnx.data next to it),
test_data_set_0/input_0.pb and output_0.pb (with --large-batch also test_data_set_1 at the
model's large batch, suite.BIG_BATCH, other seeded inputs), and manifest.json (what was built, for the drivers
that rebuild the same PyTorch model). The reference output is PyTorch's fp32 result, also for the
bf16 exports, so that `brrr run --check` compares 16-bit results with fp32 truth; a bf16 model's
float input is the fp32 input rounded to bf16, and the fp32 reference is computed on that rounded
input, so the only difference left is the arithmetic. onnx.checker checks every file, and with
--verify (default for fp32) ONNX Runtime runs each export at --batch against the reference and at
batch 2 for the dynamic batch dim.

An export an exporter cannot do is skipped with a line; a table closes the run. OUT/READY lists
what is finished (one line per export, rewritten as each finishes), for others who read OUT.

Needs torch, torchvision, transformers, onnx, onnxscript (dynamo), onnxruntime (--verify):
    python3 -m venv /work/venv-models
    /work/venv-models/bin/pip install torch torchvision transformers onnx onnxruntime onnxscript
    /work/venv-models/bin/python scripts/models/export.py --out /work/models [--small]
"""
import argparse
import contextlib
import copy
import gc
import io
import json
import os
import shutil
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite  # noqa: E402

TWO_GB = 2 ** 31 - 1  # protobuf's limit on one file: larger models store weights outside it
OPSETS = {"torchscript": 17, "dynamo": 18}


def log(msg):
    print(msg, flush=True)


def first_line(e):
    s = f"{type(e).__name__}: {e}".strip().splitlines()
    return s[0][:160] if s else type(e).__name__


def tensor_pb(arr, name):
    """A TensorProto for a torch tensor. bf16 has no numpy dtype: its bits go in raw_data."""
    import onnx
    from onnx import numpy_helper
    if arr.dtype == suite.torch.bfloat16:
        bits = arr.contiguous().view(suite.torch.int16).numpy().tobytes()
        return onnx.helper.make_tensor(name, onnx.TensorProto.BFLOAT16, list(arr.shape), bits,
                                       raw=True)
    return numpy_helper.from_array(arr.numpy(), name)


def write_pb(path, arr, name):
    with open(path, "wb") as f:
        f.write(tensor_pb(arr, name).SerializeToString())


def param_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters()) + \
        sum(b.numel() * b.element_size() for b in model.buffers())


def attention_for(spec, exporter, dtype):
    """The transformers attention a text model is exported with: its default (SDPA), except
    under the TorchScript exporter in bf16, whose SDPA symbolic writes its scale as a complex128
    constant that ONNX cannot hold ("ScalarType ComplexDouble is an unexpected tensor scalar
    type"); there "eager" attention, the same weights and math as plain MatMul/Softmax/MatMul."""
    if spec.kind != "text":
        return None
    return "eager" if exporter == "torchscript" and dtype == "bf16" else "sdpa"


@contextlib.contextmanager
def attention(model, attn):
    # transformers' attention layers read config._attn_implementation at every forward.
    cfg = getattr(getattr(model, "inner", None), "config", None)
    old = cfg._attn_implementation if cfg is not None else None
    if cfg is not None and attn:
        cfg._attn_implementation = attn
    try:
        yield
    finally:
        if cfg is not None:
            cfg._attn_implementation = old


def export_torchscript(model, example, path, spec, big):
    import torch
    # torchvision's ViT runs nn.MultiheadAttention, whose inference fast path
    # (_native_multi_head_attention) the TorchScript exporter cannot export.
    torch.backends.mha.set_fastpath_enabled(False)
    names = dict(input_names=[spec.input_name], output_names=[spec.output],
                 dynamic_axes={spec.input_name: {0: "batch"}, spec.output: {0: "batch"}})
    with contextlib.redirect_stderr(io.StringIO()):  # per-op deprecation warnings
        torch.onnx.export(model, (example,), path, dynamo=False, opset_version=17,
                          do_constant_folding=True, **names)
    if big or len(os.listdir(os.path.dirname(path))) > 1:
        consolidate(path)
        os.chmod(path + ".data", 0o644)  # saved owner-only; readable like model.onnx


def export_dynamo(model, example, path, spec, big):
    import torch
    batch = torch.export.Dim("batch", min=1, max=1024)
    with contextlib.redirect_stdout(io.StringIO()):  # its progress lines
        prog = torch.onnx.export(model, (example,), dynamo=True, opset_version=18,
                                 input_names=[spec.input_name], output_names=[spec.output],
                                 dynamic_shapes=({0: batch},), optimize=True)
    prog.save(path, external_data=big)
    if big:
        consolidate(path)
        os.chmod(path + ".data", 0o644)  # saved owner-only; readable like model.onnx


def consolidate(path):
    """Weights in one model.onnx.data file next to model.onnx (the TorchScript exporter writes one
    file per tensor once a model passes 2 GB; the dynamo one may name its own file)."""
    import onnx
    d = os.path.dirname(path)
    m = onnx.load(path, load_external_data=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx.data", size_threshold=1024)


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
               if os.path.isfile(os.path.join(d, f)))


def check_onnx(path, spec):
    """onnx.checker on the file (by path: it reads external data itself), and the batch dim is
    symbolic on the input and the output."""
    import onnx
    onnx.checker.check_model(path)
    m = onnx.load(path, load_external_data=False)
    for vi, what in ((m.graph.input[0], "input"), (m.graph.output[0], "output")):
        d0 = vi.type.tensor_type.shape.dim[0]
        if not d0.dim_param:
            raise RuntimeError(f"{what} '{vi.name}' has a fixed batch dim {d0.dim_value}")


def verify_ort(path, spec, x, ref, vocab):
    """ONNX Runtime at the reference batch (max abs error against PyTorch's fp32 output) and at
    batch 2 (the output's batch dim follows the input's)."""
    import numpy as np
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    got = s.run(None, {spec.input_name: x.numpy()})[0]
    err = float(np.max(np.abs(got.astype(np.float32) - ref.numpy())))
    scale = float(np.max(np.abs(ref.numpy())))
    x2 = spec.inputs(2, vocab, seed=2).numpy()
    if x.dtype != x2.dtype:
        x2 = x2.astype(x.numpy().dtype)
    shape2 = s.run(None, {spec.input_name: x2})[0].shape
    if shape2[0] != 2:
        raise RuntimeError(f"batch 2 gave output shape {list(shape2)}")
    return err, scale


class Ready:
    """OUT/READY: one line per finished export, merged with what an earlier run left."""

    def __init__(self, out):
        self.path = os.path.join(out, "READY")
        self.rows = {}
        if os.path.exists(self.path):
            for line in open(self.path):
                if line.strip() and not line.startswith("#"):
                    self.rows[line.split()[0]] = line.rstrip("\n")

    def add(self, name, line):
        self.rows[name] = f"{name}  {line}"
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write("# finished exports: name, status, size, reference batch (scripts/models/export.py)\n")
            for k in sorted(self.rows):
                f.write(self.rows[k] + "\n")
        os.replace(tmp, self.path)


def export_model(spec, a, ready, rows):
    import torch
    kw = {"layers": a.llama_layers} if spec.name == "llama_1b" and a.llama_layers else {}
    t = time.time()
    base, vocab = spec.build(a.small, **kw)
    nparams = sum(p.numel() for p in base.parameters())
    log(f"== {spec.name}: {nparams / 1e6:.1f} M parameters, built in {time.time() - t:.1f} s"
        + (" (small)" if a.small else "") + (f" ({a.llama_layers} layers)" if kw else ""))
    # Reference sets: (batch, fp32 inputs); the large batch's inputs differ per batch element.
    sets = [(a.batch, spec.inputs(a.batch, vocab))]
    if a.large_batch and suite.BIG_BATCH.get(spec.name, a.batch) != a.batch:
        sets.append((suite.BIG_BATCH[spec.name], spec.inputs(suite.BIG_BATCH[spec.name], vocab,
                                                             seed=2)))
    refs = {}  # (set, reference input dtype) -> (input, fp32 output), computed once per input
    for dtype in a.dtypes:
        tdt = suite.DTYPES[dtype]
        data = []  # (batch, input, fp32 output) per set
        for i, (b, x32) in enumerate(sets):
            x = x32 if spec.kind == "text" else x32.to(tdt)
            key = (i, str(x.dtype))
            if key not in refs:
                t = time.time()
                with torch.no_grad():
                    refs[key] = (x, base(x if spec.kind == "text" else x.float()).float())
                if i:
                    log(f"   reference at batch {b} ({x.dtype}) in {time.time() - t:.1f} s")
            data.append((b, *refs[key]))
        x, ref = data[0][1], data[0][2]
        model = base if dtype == "fp32" else copy.deepcopy(base).to(tdt)
        big = param_bytes(model) > TWO_GB * 0.9
        ex = spec.inputs(2, vocab)  # export at batch 2: dynamo specializes a dim of size 1
        if spec.kind == "image":
            ex = ex.to(tdt)
        for exporter in a.exporters:
            name = suite.model_dir_name(spec.name, dtype, exporter)
            d = os.path.join(a.out, name)
            row = [spec.name, dtype, exporter, "", "", ""]
            t = time.time()
            try:
                shutil.rmtree(d, ignore_errors=True)
                os.makedirs(d)
                path = os.path.join(d, "model.onnx")
                attn = attention_for(spec, exporter, dtype)
                with torch.no_grad(), attention(model, attn):
                    (export_torchscript if exporter == "torchscript" else export_dynamo)(
                        model, ex, path, spec, big)
                secs = time.time() - t
                check_onnx(path, spec)
                check_sets = {}
                for i, (b, xi, ri) in enumerate(data):
                    td = os.path.join(d, f"test_data_set_{i}")
                    os.makedirs(td)
                    write_pb(os.path.join(td, "input_0.pb"), xi, spec.input_name)
                    write_pb(os.path.join(td, "output_0.pb"), ri, spec.output)
                    check_sets[f"test_data_set_{i}"] = b
                status = "ok"
                if a.verify and dtype == "fp32":
                    err, scale = verify_ort(path, spec, x, ref, vocab)
                    status = f"ok (ORT max err {err:.2g} of {scale:.3g})"
                manifest = dict(model=spec.name, dtype=dtype, exporter=exporter,
                                opset=OPSETS[exporter], small=a.small, seed=suite.SEED,
                                attention=attn,
                                layers=kw.get("layers"), params=nparams,
                                input=dict(name=spec.input_name, shape=spec.input_shape(a.batch),
                                           dtype=str(x.dtype).replace("torch.", ""),
                                           vocab=vocab),
                                output=dict(name=spec.output, shape=list(ref.shape),
                                            reference="pytorch fp32"),
                                batch_dim="batch", check_sets=check_sets,
                                export_s=round(secs, 1),
                                external_data=os.path.exists(path + ".data"))
                with open(os.path.join(d, "manifest.json"), "w") as f:
                    json.dump(manifest, f, indent=1)
                size = dir_bytes(d) / 1e6
                row[3:] = [status, f"{size:.1f} MB", f"{secs:.1f}"]
                ready.add(name, f"ok  {size:.1f}MB  batch={a.batch}" + ("  small" if a.small else "")
                          + (f"  layers={kw['layers']}" if kw else ""))
                log(f"   {name}: {status}, {size:.1f} MB, export {secs:.1f} s")
            except Exception as e:  # one export failing must not stop the others
                if a.debug:
                    traceback.print_exc()
                shutil.rmtree(d, ignore_errors=True)
                row[3:] = [f"failed: {first_line(e)}", "", f"{time.time() - t:.1f}"]
                log(f"   {name}: skipped, {exporter} cannot export it: {first_line(e)}")
            rows.append(row)
            gc.collect()
        if model is not base:
            del model
            gc.collect()
    del base, refs, sets
    gc.collect()


def print_table(rows):
    w = [max(len(str(r[i])) for r in rows + [HEAD]) for i in range(len(HEAD))]
    for r in [HEAD] + rows:
        print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)).rstrip())


HEAD = ["model", "dtype", "exporter", "result", "size", "export s"]


def csv(choices):
    def parse(s):
        v = [x.strip() for x in s.split(",") if x.strip()]
        bad = [x for x in v if x not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {bad}; choose from {','.join(choices)}")
        return v
    return parse


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the exports (outside the repository)")
    ap.add_argument("--models", type=csv(list(suite.SPECS)), default=list(suite.SPECS),
                    help=f"comma-separated, default all: {','.join(suite.SPECS)}")
    ap.add_argument("--dtypes", type=csv(list(suite.DTYPES)), default=list(suite.DTYPES))
    ap.add_argument("--exporters", type=csv(suite.EXPORTERS), default=suite.EXPORTERS)
    ap.add_argument("--batch", type=int, default=1, help="batch of the reference data (default 1)")
    ap.add_argument("--large-batch", action="store_true",
                    help="also reference data at each model's large batch (test_data_set_1)")
    ap.add_argument("--small", action="store_true",
                    help="shrink every model (2 layers, hidden 128) for quick tests")
    ap.add_argument("--llama-layers", type=int, default=0,
                    help="Llama decoder layers (default: 16, Llama-3.2-1B's; fewer to fit memory)")
    ap.add_argument("--verify", dest="verify", action="store_true", default=True,
                    help="run fp32 exports in ONNX Runtime against the reference (default)")
    ap.add_argument("--no-verify", dest="verify", action="store_false")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument("--debug", action="store_true", help="print the traceback of a failed export")
    a = ap.parse_args()
    if a.batch < 1:
        ap.error("--batch must be at least 1")
    try:
        import onnx  # noqa: F401
        import torch
    except ImportError as e:
        sys.exit(f"export.py: {e}; install torch, torchvision, transformers, onnx, onnxscript "
                 f"(see --help)")
    if a.verify:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            log("export.py: onnxruntime is not installed: no --verify")
            a.verify = False
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    import transformers
    import torchvision
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, torchvision "
        f"{torchvision.__version__}, onnx {onnx.__version__}; out {a.out}")
    ready = Ready(a.out)
    rows = []
    t0 = time.time()
    for m in a.models:
        try:
            export_model(suite.SPECS[m], a, ready, rows)
        except Exception as e:  # building or the reference run failed: the whole model is out
            if a.debug:
                traceback.print_exc()
            log(f"== {m}: skipped: {first_line(e)}")
            rows.append([m, ",".join(a.dtypes), ",".join(a.exporters),
                         f"failed: {first_line(e)}", "", ""])
    print(f"\nexports in {time.time() - t0:.0f} s" + (" (--small)" if a.small else ""))
    print_table(rows)
    return 0 if all(r[3].startswith("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
