"""Weights used in place from Python (issue 29; docs/architecture.md
"Weights are borrowed"): Graph.shared(copy=False), Function.bind_shared(
copy=False), Graph.bind_safetensors and `kiln run --weights`.  Expected
values come from numpy; the safetensors files are written here with
struct and json (not with kiln)."""

import gc
import json
import os
import struct
import subprocess

import numpy as np
import pytest

import kiln
from kiln_testutil import BUILD, backends

RNG = np.random.default_rng(2929)


def write_safetensors(path, tensors):
    """tensors: {name: array (f32/f64/i64/i32/bool) or ("BF16", f32
    array whose low 16 bits are zero)} -> a safetensors file."""
    header, data = {}, b""
    for name, a in tensors.items():
        if isinstance(a, tuple):
            dt, a = a
            raw = (a.astype(np.float32).view(np.uint32) >> 16) \
                .astype("<u2").tobytes()
        else:
            dt = {"float32": "F32", "float64": "F64", "int64": "I64",
                  "int32": "I32", "bool": "BOOL"}[a.dtype.name]
            raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def matvec_graph(W, copy):
    g = kiln.Graph("m")
    Wv = g.shared("W", "f32", W.shape, W, copy=copy)
    x = g.input("x", "f32", (W.shape[1],))
    g.output("y", g.op("matmul", Wv, x))
    return g


@pytest.mark.parametrize("backend", backends())
def test_shared_borrowed_in_place(backend, tmp_path):
    W = RNG.normal(size=(5, 3)).astype(np.float32)
    x = RNG.normal(size=3).astype(np.float32)
    g = matvec_graph(W, copy=False)
    f = kiln.compile(g, backend=backend, cache=str(tmp_path))
    del g
    gc.collect()
    y, = f(x)
    np.testing.assert_allclose(y, W.astype(float) @ x, rtol=1e-5)
    W[2, 1] += 3.0          # in place: the next call reads it
    y, = f(x)
    np.testing.assert_allclose(y, W.astype(float) @ x, rtol=1e-5)
    # the Function keeps the array alive without the caller's reference
    want = W.astype(float) @ x
    del W
    gc.collect()
    y, = f(x)
    np.testing.assert_allclose(y, want, rtol=1e-5)


@pytest.mark.parametrize("backend", backends())
def test_shared_copied_by_default(backend, tmp_path):
    W = RNG.normal(size=(4, 2)).astype(np.float32)
    x = RNG.normal(size=2).astype(np.float32)
    f = kiln.compile(matvec_graph(W, copy=True), backend=backend,
                     cache=str(tmp_path))
    want = W.astype(float) @ x
    W[0, 0] = 100.0          # a copy: not seen
    np.testing.assert_allclose(f(x)[0], want, rtol=1e-5)


@pytest.mark.parametrize("backend", backends())
def test_bind_shared_borrowed(backend, tmp_path):
    W = RNG.normal(size=(4, 2)).astype(np.float32)
    x = RNG.normal(size=2).astype(np.float32)
    f = kiln.compile(matvec_graph(W, copy=True), backend=backend,
                     cache=str(tmp_path))
    W2 = RNG.normal(size=(4, 2)).astype(np.float32)
    f.bind_shared("W", W2, copy=False)
    W2[3, 1] = -7.0
    np.testing.assert_allclose(f(x)[0], W2.astype(float) @ x, rtol=1e-5)
    # a copying bind afterwards leaves W2 alone and owns its bytes
    before = W2.copy()
    W3 = RNG.normal(size=(4, 2)).astype(np.float32)
    f.bind_shared("W", W3)
    assert np.array_equal(W2, before)
    want = W3.astype(float) @ x
    W3[:] = 0
    np.testing.assert_allclose(f(x)[0], want, rtol=1e-5)
    with pytest.raises(kiln.KilnError, match=r"\(4, 2\).*\(2, 4\)"):
        f.bind_shared("W", np.zeros((2, 4), np.float32), copy=False)


MODEL = """kiln 1
graph lin
  shared model_layers_0_proj_weight: f32[4, 6]
  shared model_bias: f32[4]
  shared steps: i64[2]
  input x: f32[6]
  output y = add(matmul(model_layers_0_proj_weight, x), model_bias)
  output s = sum(steps)
end
"""


def lin_file(path):
    W = RNG.normal(size=(4, 6)).astype(np.float32)
    b = (RNG.normal(size=4).astype(np.float32).view(np.uint32)
         & np.uint32(0xFFFF0000)).view(np.float32)      # exactly bf16
    steps = np.array([3, 4], np.int64)
    write_safetensors(path, {"model.layers.0.proj.weight": W,
                             "model.bias": ("BF16", b), "steps": steps,
                             "unused": np.zeros(3, np.float64)})
    return W, b, steps


@pytest.mark.parametrize("backend", backends())
def test_bind_safetensors(backend, tmp_path):
    path = tmp_path / "w.safetensors"
    W, b, steps = lin_file(path)
    x = RNG.normal(size=6).astype(np.float32)
    g = kiln.Graph.parse(MODEL)
    g.bind_safetensors(path)
    f = kiln.compile(g, backend=backend, cache=str(tmp_path))
    del g
    gc.collect()
    y, s = f(x)
    np.testing.assert_allclose(y, W.astype(float) @ x + b, rtol=1e-5)
    assert int(s) == 7


def test_bind_safetensors_errors(tmp_path):
    path = tmp_path / "w.safetensors"
    lin_file(path)
    g = kiln.Graph.parse(MODEL.replace("model_bias", "model_bais"))
    with pytest.raises(kiln.KilnError, match="shared value 'model_bais' has "
                       "no tensor in .*did you mean 'model_bias'"):
        g.bind_safetensors(path)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 2) + b"{}" + b"\0")
    g = kiln.Graph.parse(MODEL)
    with pytest.raises(kiln.KilnError, match="has no tensor"):
        g.bind_safetensors(bad)
    with pytest.raises(kiln.KilnError, match="cannot open"):
        g.bind_safetensors(tmp_path / "missing.safetensors")


def test_cli_weights(tmp_path):
    exe = os.path.join(BUILD or ".", "tools", "kiln")
    if not os.path.exists(exe):
        pytest.skip("no kiln binary")
    path = tmp_path / "w.safetensors"
    W, b, steps = lin_file(path)
    kg = tmp_path / "lin.kg"
    kg.write_text(MODEL)
    x = RNG.normal(size=6).astype(np.float32)
    arg = "x=[" + ",".join(repr(float(v)) for v in x) + "]"
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([exe, "run", str(kg), "--weights", str(path), "-i",
                        arg, "--json", "--backend", "interp"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)["outputs"]
    np.testing.assert_allclose(out["y"]["value"], W.astype(float) @ x + b,
                               rtol=1e-5)
    assert out["s"]["value"] == 7
    r = subprocess.run([exe, "run", str(kg), "--weights",
                        str(tmp_path / "nope.safetensors"), "-i", arg],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "kiln: --weights: " in r.stderr \
        and "cannot open" in r.stderr
