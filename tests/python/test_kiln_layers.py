"""Issue 29's layer composites through the Python builder: attributes of
every kind (an int axis, a float eps, a string spec/approximate, a list
of reps) reach kiln_graph_op, f32 stays f32, and the values match NumPy /
SciPy on every backend built.  The C test (tests/test_layers_ops.c)
covers every composite, gradients and errors; this one the package."""

import numpy as np
import pytest

import kiln
from kiln_testutil import backends

RNG = np.random.default_rng(29)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("backend", backends())
def test_attention_block_f32(backend, tmp_path):
    g = kiln.Graph()
    q = g.input("q", "f32", (2, 3, 4))
    k = g.input("k", "f32", (2, 5, 4))
    w = g.input("w", "f32", (4,))
    s = g.op("einsum", g.op("rms_norm", q, w, eps=1e-5), k,
             spec="hqd,hkd->hqk")
    p = g.op("softmax", s, axis=-1)
    g.output("p", p)
    g.output("a", g.op("argmax", s, axis=2))
    g.output("t", g.op("tile", g.op("gelu", w, approximate="tanh"),
                       reps=[2, 1]))
    f = kiln.compile(g, backend=backend, cache=str(tmp_path), tiers=False)
    qv = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    kv = RNG.normal(size=(2, 5, 4)).astype(np.float32)
    wv = RNG.normal(size=4).astype(np.float32)
    pv, av, tv = f(qv, kv, wv)
    assert pv.dtype == np.float32 and tv.dtype == np.float32
    assert av.dtype == np.int64
    q64, k64, w64 = (a.astype(np.float64) for a in (qv, kv, wv))
    qn = q64 / np.sqrt((q64 ** 2).mean(-1, keepdims=True) + 1e-5) * w64
    sref = np.einsum("hqd,hkd->hqk", qn, k64)
    np.testing.assert_allclose(pv, _softmax(sref, -1), rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(av, np.argmax(sref, axis=2))
    c = np.sqrt(2 / np.pi)
    gl = 0.5 * w64 * (1 + np.tanh(c * (w64 + 0.044715 * w64 ** 3)))
    np.testing.assert_allclose(tv, np.tile(gl, (2, 1)), rtol=2e-6, atol=1e-7)


def test_bad_spec_names_position():
    g = kiln.Graph()
    a = g.input("a", "f64", (3, 4))
    with pytest.raises(kiln.KilnError, match="position 6: expected a letter"):
        g.op("einsum", a, a, spec="ij,kj-?ik")
    with pytest.raises(kiln.KilnError, match="unknown attribute 'axes'"):
        g.op("softmax", a, axes=1)
