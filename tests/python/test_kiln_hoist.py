"""Hoisting from Python (docs/architecture.md, "Data-only values are
computed when the data are bound"): the data kiln.Model binds and the
values Graph.shared gives reach the hoist pass — fewer kernels per call —
and the results equal passes="-hoist" bit for bit."""

import numpy as np
import pytest

import kiln
from kiln_testutil import backends

RNG = np.random.default_rng(27)

MODEL = """kiln 1
graph centred
  shared y: f64[N]
  shared X: f64[N, K]
  param b: f64[3]
  param sigma: f64 lower=0
  X1 = X[:, 1:]
  Xc = sub(X1, mean(X1, axis=0))
  output logp = add(normal_lpdf(b, 0, 1), normal_lpdf(y, dot(Xc, b), sigma))
end
"""


@pytest.mark.parametrize("backend", backends())
def test_model_data_is_hoisted(backend, tmp_path):
    X = RNG.normal(size=(50, 4))
    data = {"N": 50, "K": 4, "y": RNG.normal(size=50), "X": X}
    on = kiln.Model(MODEL, data=data, backend=backend, cache=str(tmp_path))
    off = kiln.Model(MODEL, data=data, backend=backend, cache=str(tmp_path),
                     passes="-hoist")
    assert on.tier_count()[1] < off.tier_count()[1]
    u = RNG.normal(size=on.n_unc)
    lp1, g1 = on.log_density_gradient(u)
    lp2, g2 = off.log_density_gradient(u)
    assert lp1 == lp2 and np.array_equal(g1, g2)


@pytest.mark.parametrize("backend", backends())
def test_graph_shared_value_is_hoisted(backend, tmp_path):
    g = kiln.Graph("h")
    x = g.input("x", "f64", (4,))
    s = g.shared("s", "f64", (4,), value=RNG.normal(size=4))
    g.output("y", g.op("mul", x, g.op("sum", g.op("exp", s))))
    fs = [kiln.compile(g, backend=backend, cache=str(tmp_path), tiers=False,
                       passes=p) for p in (None, "-hoist")]
    xv = RNG.normal(size=4)
    outs = [np.asarray(f(xv)[0]) for f in fs]
    assert np.array_equal(outs[0], outs[1])
    assert len(fs[0].kernel_backends) < len(fs[1].kernel_backends)
