"""Writes the ONNX backend node tests (model.onnx + test_data_set_N/{input,output}_K.pb) to a folder.

The onnx wheel no longer ships this data and `cmd_tools generate-data` only writes model tests, so
we collect the node cases ourselves, in the same layout. Only tensor-typed cases are written
(sequence/map/optional inputs are outside brrr's scope). A stamp file records the onnx version so
the data is generated once per build folder.
"""
import os
import shutil
import sys
import warnings

import onnx
from onnx import numpy_helper
from onnx.backend.test.case import node as node_cases


def is_tensor_only(model):
    vis = list(model.graph.input) + list(model.graph.output)
    return all(v.type.HasField("tensor_type") for v in vis)


def write_case(out, case):
    d = os.path.join(out, case.name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    g = case.model.graph
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = os.path.join(d, f"test_data_set_{i}")
        os.makedirs(ds)
        for kind, vals, vis in (("input", inputs, g.input), ("output", outputs, g.output)):
            for j, v in enumerate(vals):
                t = v if isinstance(v, onnx.TensorProto) else numpy_helper.from_array(v, vis[j].name)
                with open(os.path.join(ds, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(t.SerializeToString())


def main():
    out = sys.argv[1]
    stamp = os.path.join(out, ".stamp")
    if os.path.exists(stamp) and open(stamp).read().strip() == onnx.__version__:
        return
    os.makedirs(out, exist_ok=True)
    warnings.simplefilter("ignore")
    n = skipped = 0
    for case in node_cases.collect_testcases():
        if not case.model or not case.data_sets or not is_tensor_only(case.model):
            skipped += 1
            continue
        try:
            write_case(out, case)
            n += 1
        except Exception as e:  # a case numpy_helper cannot serialize (exotic dtypes)
            print(f"note: not written: {case.name}: {e}", file=sys.stderr)
            skipped += 1
    with open(stamp, "w") as f:
        f.write(onnx.__version__ + "\n")
    print(f"wrote {n} ONNX node tests to {out} ({skipped} non-tensor cases left out)")


if __name__ == "__main__":
    main()
