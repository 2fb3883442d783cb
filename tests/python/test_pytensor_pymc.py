#!/usr/bin/env python3
"""PyMC logp and dlogp through mode="KILN" against PyTensor's Python mode (pytest).

Eight schools (centred and non-centred), radon (hierarchical intercepts
and slopes, 919 observations from ../shared/data/radon.csv) and MvNormal
(issue 28: a covariance from parameters, and a fixed Cholesky factor): model.compile_logp
and compile_dlogp in the KILN mode equal Mode(linker="py", optimizer=None) to
1e-9 relative at several points, on every backend of KILN_TEST_BACKENDS, and
kiln runs the whole graph (no fallback warning).  SKIPs without PyMC.
"""
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kiln_pt_common import backends_available, rebind, setup_or_skip, shared_dir, skip_all  # noqa: E402

setup_or_skip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

try:
    import pymc as pm
except Exception as e:  # noqa: BLE001
    skip_all(f"PyMC does not import: {e}")

from pytensor.compile.mode import Mode  # noqa: E402

import kiln.pytensor as kp  # noqa: E402

REF = Mode(linker="py", optimizer=None)


def eight_schools(centered):
    y = np.array([28.0, 8, -3, 7, -1, 1, 18, 12])
    s = np.array([15.0, 10, 16, 11, 9, 11, 10, 18])
    with pm.Model() as m:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        if centered:
            theta = pm.Normal("theta", mu, tau, shape=8)
        else:
            z = pm.Normal("z", 0, 1, shape=8)
            theta = pm.Deterministic("theta", mu + tau * z)
        pm.Normal("y", theta, s, observed=y)
    return m


def radon():
    path = os.path.join(shared_dir(), "data", "radon.csv")
    if not os.path.exists(path):
        return None
    import csv
    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    county = np.array([int(r["county_code"]) for r in rows])
    floor = np.array([float(r["floor"]) for r in rows])
    logr = np.array([float(r["log_radon"]) for r in rows])
    nc = int(county.max()) + 1
    with pm.Model() as m:
        mu_a = pm.Normal("mu_a", 0, 10)
        sigma_a = pm.HalfNormal("sigma_a", 5)
        mu_b = pm.Normal("mu_b", 0, 10)
        sigma_b = pm.Exponential("sigma_b", 1)
        a = pm.Normal("a", mu_a, sigma_a, shape=nc)
        b = pm.Normal("b", mu_b, sigma_b, shape=nc)
        sigma = pm.Gamma("sigma", 2, 2)
        pm.Normal("y", a[county] + b[county] * floor, sigma, observed=logr)
    return m


def points(model, n, rng):
    ip = model.initial_point()
    out = [ip]
    for _ in range(n - 1):
        out.append({k: v + rng.normal(0, 0.7, size=np.shape(v)) for k, v in ip.items()})
    return out


def close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    if not np.allclose(a, b, rtol=1e-9, atol=1e-12):
        err = np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))
        return f"max relative error {err:.3g}"
    return None


def mvnormal():
    """issue 28: MvNormal with a covariance built from parameters (PyMC's
    logp: cholesky(on_error="nan"), solve_triangular, the diagonal's logs)
    and one with a fixed Cholesky factor"""
    rng = np.random.default_rng(3)
    obs = rng.normal(size=(6, 3))
    with pm.Model() as m:
        mu = pm.Normal("mu", 0, 1, shape=3)
        s = pm.HalfNormal("s", 1, shape=3)
        r = pm.Uniform("r", -0.4, 0.4)
        corr = r + (1 - r) * np.eye(3)   # equicorrelation, r in (-1/2, 1)
        cov = corr * s[:, None] * s[None, :]
        pm.MvNormal("y", mu, cov=cov, observed=obs)
        chol = np.linalg.cholesky(np.array([[2.0, 0.3, 0], [0.3, 1, 0.2],
                                            [0, 0.2, 1.5]]))
        pm.MvNormal("z", mu, chol=chol, observed=obs[:2])
    return m


MODELS = ["eight_schools", "eight_schools_noncentered", "radon", "mvnormal"]
_built = {}


def model(name):
    if name not in _built:
        _built[name] = {"eight_schools": lambda: eight_schools(True),
                        "eight_schools_noncentered": lambda: eight_schools(False),
                        "radon": radon, "mvnormal": mvnormal}[name]()
    return _built[name]


BACKENDS = backends_available()


@pytest.mark.parametrize("name", MODELS)
def test_logp_dlogp(name):
    """compile_logp/compile_dlogp with mode=KILN (first backend), then the
    same kiln graphs on every backend, at 4 points each."""
    m = model(name)
    if m is None:
        pytest.skip("no ../shared/data/radon.csv")
    if not BACKENDS:
        pytest.skip("no backend")
    mode = kp.mode(backend=BACKENDS[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = m.compile_logp(mode=mode)
        df = m.compile_dlogp(mode=mode)
    fell = [str(w.message) for w in caught if issubclass(w.category, kp.KilnFallbackWarning)]
    # PyMC's checks need kiln's all/check ops; nothing else may fall back
    for msg in fell:
        items = msg.split("not kiln: ", 1)[1].split("; ")
        bad = [i for i in items if "this libkiln has no op" not in i]
        assert not bad, f"unexpected fallback: {bad}"
    fr = m.compile_logp(mode=REF)
    dfr = m.compile_dlogp(mode=REF)
    rng = np.random.default_rng(7)
    pts = points(m, 4, rng)
    for be in BACKENDS:
        assert rebind(f, be) >= 1 and rebind(df, be) >= 1
        for p in pts:
            err = close(f(p), fr(p)) or close(df(p), dfr(p))
            assert err is None, f"{be}: {err}"
