"""brrr.doctor: the `brrr doctor --json` report as a dict, and the HTML page. The ceilings come
from a fixed cache file (as in the C++ doctor tests), so no test probes the machine."""
import json
import os
import socket

import pytest

import brrr
from util import EXAMPLES, example_data

MLP = f"{EXAMPLES}/mlp_tiny/model.onnx"
REPORT_KEYS = {"model", "backend", "conventions", "wall_ms", "attribution", "shares", "kernels",
               "ceilings", "class_table", "remedies", "verdict"}


@pytest.fixture(scope="module")
def xdg(tmp_path_factory):
    """One $XDG_CACHE_HOME for the module, so the kernels compile once."""
    return tmp_path_factory.mktemp("xdg")


@pytest.fixture
def fixed_ceilings(xdg, monkeypatch):
    """A cached ceilings file where the doctor looks ($XDG_CACHE_HOME/brrr)."""
    cache = xdg / "brrr"
    cache.mkdir(parents=True, exist_ok=True)
    ceilings = {"probe_method": 4, "backend": "cpu", "threads": 2, "bandwidth_gbs": 20,
                "memcpy_gbs": 10,
                "peak_gflops": {"fp32": 500}, "special_gops": {"exp": 5}, "dispatch_us": 1,
                "fork_join_us": 2, "kernel_call_us": 0.01}
    (cache / f"ceilings-{socket.gethostname()}-cpu.json").write_text(json.dumps(ceilings))
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    return ceilings


def test_doctor_returns_the_json_report(fixed_ceilings):
    r = brrr.doctor(MLP, reps=2)
    assert REPORT_KEYS <= set(r)
    assert r["model"] == MLP and r["backend"] == "cpu"
    assert r["ceilings"]["bandwidth_gbs"] == fixed_ceilings["bandwidth_gbs"]
    assert r["kernels"] and r["wall_ms"] > 0
    assert set(r["shares"]) == {"compute", "memory", "overhead"}
    assert abs(sum(r["shares"].values()) - 1.0) < 1e-6  # the shares add up to the wall time


def test_doctor_on_a_session_with_given_inputs(fixed_ceilings):
    inputs, _ = example_data("mlp_tiny")
    s = brrr.Session(MLP, "reference")
    r = brrr.doctor(s, inputs=inputs, reps=1, top=3)
    assert r["backend"] == "reference"
    assert all(k["kind"] == "reference" for k in r["kernels"])


def test_doctor_writes_the_html_page(fixed_ceilings, tmp_path):
    page = tmp_path / "report.html"
    brrr.doctor(MLP, reps=1, html=page)
    text = page.read_text()
    assert text.lstrip().lower().startswith("<!doctype html") and "<svg" in text


def test_doctor_checks_the_html_path_first(fixed_ceilings, tmp_path):
    bad = os.path.join(str(tmp_path), "no_such_dir", "r.html")
    with pytest.raises(brrr.Error, match="no_such_dir"):
        brrr.doctor(MLP, reps=1, html=bad)
