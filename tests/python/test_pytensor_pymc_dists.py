#!/usr/bin/env python3
"""PyMC distributions of issue 28 through mode="KILN" against PyTensor's
Python mode (pytest).

For each distribution (Dirichlet, OrderedLogistic, BetaBinomial, VonMises,
SkewNormal, Categorical, Multinomial, ExGaussian, Gumbel, Pareto; PyMC
5.20 has no Rayleigh)
and for pm.Censored / pm.Truncated of Normal, LogNormal, Gamma,
Exponential and StudentT: the summed logp of a value (data) given
parameter inputs, and its gradient with respect to every float parameter
(and the value, for continuous ones), compiled with mode=KILN (first
backend) must equal Mode(linker="py", optimizer=None) to 1e-9 relative
at several points, on every backend of KILN_TEST_BACKENDS, and kiln must
run the whole graph (no fallback warning except PyMC's run-time checks
on a libkiln without them).  Then small PyMC models (a Censored and a
Truncated likelihood, a VonMises and an OrderedLogistic regression) are
compiled whole with compile_logp/compile_dlogp, transforms included.
The Dirichlet is tested on a fixed value (its simplex transform belongs
to another part of issue 28).  The points stay where PyTensor's own
graphs are finite: PyMC's SkewNormal logp underflows to -inf (log of
erfc) a few sigmas into the skewed-away tail and computes 1 + erf(u)
there, which cancels (at u = -5 the two modes' last-ulp differences in
erf grow to 1e-8 in the gradient), and its ExGaussian
gradient is NaN (a switch's discarded branch) 8 sigmas left of mu,
where kiln's composites (tests/test_lpdf.c) stay finite.  SKIPs without
PyMC.
"""
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kiln_pt_common import backends_available, rebind, setup_or_skip, skip_all  # noqa: E402

setup_or_skip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

try:
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt
except Exception as e:  # noqa: BLE001
    skip_all(f"PyMC does not import: {e}")

from pytensor.compile.mode import Mode  # noqa: E402

import kiln.pytensor as kp  # noqa: E402

REF = Mode(linker="py", optimizer=None)
BACKENDS = backends_available()


def close(a, b, rtol=1e-9):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    same_inf = np.isinf(a) & (a == b)
    if not np.allclose(np.where(same_inf, 0, a), np.where(same_inf, 0, b),
                       rtol=rtol, atol=1e-12, equal_nan=True):
        err = np.nanmax(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))
        return f"{a} vs {b}: max relative error {err:.3g}"
    return None


def no_fallback(caught):
    fell = [str(w.message) for w in caught
            if issubclass(w.category, kp.KilnFallbackWarning)]
    for msg in fell:
        items = msg.split("not kiln: ", 1)[1].split("; ")
        bad = [i for i in items if "this libkiln has no op" not in i]
        assert not bad, f"unexpected fallback: {bad}"


def f64(*v):
    return np.array(v, dtype=float)


# name: (dist builder from parameter tensors, parameter points (a list
# of tuples), value, value is continuous)
CASES = {
    "Dirichlet": (lambda a: pm.Dirichlet.dist(a=a),
                  [(f64(1, 1, 1),), (f64(0.5, 2, 7.5),)],
                  f64(0.2, 0.05, 0.75), True),
    "OrderedLogistic": (lambda eta, c: pm.OrderedLogistic.dist(eta=eta, cutpoints=c),
                        [(f64(0.3, -2, 4, 1.0, 0), f64(-1.5, 0.2, 3.0)),
                         (f64(-1, 0.5, 2.5, 8, -4), f64(-2.0, -0.5, 1.0))],
                        np.array([0, 1, 2, 3, 3]), False),
    "BetaBinomial": (lambda a, b: pm.BetaBinomial.dist(alpha=a, beta=b, n=np.array([10, 10, 20])),
                     [(2.0, 3.0), (0.5, 30.0)], np.array([0, 3, 20]), False),
    "VonMises": (lambda mu, k: pm.VonMises.dist(mu=mu, kappa=k),
                 [(0.5, 2.0), (-1.0, 25.0), (0.0, 0.3)], f64(-3, -0.3, 0, 1, 3), True),
    "SkewNormal": (lambda mu, s, al: pm.SkewNormal.dist(mu=mu, sigma=s, alpha=al),
                   [(0.0, 1.0, 3.0), (1.0, 2.0, -8.0)], f64(-1, 0, 0.5, 1.2), True),
    "Categorical": (lambda p: pm.Categorical.dist(p=p),
                    [(f64(0.1, 0.6, 0.3),), (f64(0.5, 0.25, 0.25),)],
                    np.array([0, 1, 1, 2, 0]), False),
    "Multinomial": (lambda p: pm.Multinomial.dist(n=8, p=p),
                    [(f64(0.1, 0.6, 0.3),), (f64(0.5, 0.25, 0.25),)],
                    np.array([3, 0, 5]), False),
    "ExGaussian": (lambda mu, s, nu: pm.ExGaussian.dist(mu=mu, sigma=s, nu=nu),
                   [(0.0, 1.0, 1.0), (1.0, 0.5, 0.3)], f64(-0.5, 0, 1, 4, 20), True),
    "Gumbel": (lambda mu, b: pm.Gumbel.dist(mu=mu, beta=b),
               [(0.0, 1.0), (2.0, 0.3)], f64(-3, -0.5, 0, 1, 4), True),
    "Pareto": (lambda a, m: pm.Pareto.dist(alpha=a, m=m),
               [(3.5, 0.5), (1.0, 0.9)], f64(1, 3, 1e3), True),
}
BOUNDS = {"Normal": (lambda mu, s: pm.Normal.dist(mu, s), (0.3, 1.5), f64(-2, -1, 0.5, 2, 3)),
          "LogNormal": (lambda mu, s: pm.LogNormal.dist(mu, s), (0.2, 0.8), f64(0.3, 0.5, 1, 2.5, 4)),
          "Gamma": (lambda a, b: pm.Gamma.dist(alpha=a, beta=b), (2.5, 1.5), f64(0.3, 0.5, 1, 2.5, 4)),
          "Exponential": (lambda lam: pm.Exponential.dist(lam), (1.3,), f64(0.3, 0.5, 1, 2.5, 4)),
          "StudentT": (lambda nu, mu, s: pm.StudentT.dist(nu=nu, mu=mu, sigma=s), (4.0, 0.3, 1.5),
                       f64(-2, -1, 0.5, 2, 3))}
for _n, (_mk, _p, _v) in BOUNDS.items():
    lo, hi = (0.5, 2.5) if _n in ("LogNormal", "Gamma", "Exponential") else (-1.0, 2.0)
    _pts = [_p, tuple(x * 1.2 for x in _p)]
    CASES[f"Censored{_n}"] = (
        (lambda mk, lo, hi: lambda *a: pm.Censored.dist(mk(*a), lower=lo, upper=hi))(_mk, lo, hi),
        _pts, np.clip(_v, lo, hi), True)
    CASES[f"Truncated{_n}"] = (
        (lambda mk, lo, hi: lambda *a: pm.Truncated.dist(mk(*a), lower=lo, upper=hi))(_mk, lo, hi),
        _pts, _v[(_v > lo) & (_v < hi)], True)
    CASES[f"TruncatedLower{_n}"] = (
        (lambda mk, lo: lambda *a: pm.Truncated.dist(mk(*a), lower=lo))(_mk, lo),
        _pts, _v[_v > lo], True)


def build(name):
    mk, pts, value, cont = CASES[name]
    params = [pt.as_tensor_variable(np.asarray(p)).type() for p in pts[0]]
    val = pt.as_tensor_variable(value).type()
    lp = pm.logp(mk(*params), val).sum()
    wrt = [p for p in params if p.dtype.startswith("float")]
    if cont:
        wrt.append(val)
    grads = pytensor.grad(lp, wrt)
    ins = params + [val]
    return ins, [lp] + grads, pts, value


@pytest.mark.parametrize("name", sorted(CASES))
def test_logp_grad(name):
    if not BACKENDS:
        pytest.skip("no backend")
    ins, outs, pts, value = build(name)
    mode = kp.mode(backend=BACKENDS[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = pytensor.function(ins, outs, mode=mode)
    no_fallback(caught)
    fr = pytensor.function(ins, outs, mode=REF)
    for be in BACKENDS:
        assert rebind(f, be) >= 1
        for p in pts:
            args = [np.asarray(x) for x in p] + [value]
            got, ref = f(*args), fr(*args)
            assert np.isfinite(ref[0]), f"reference logp {ref[0]}"
            for i, (a, b) in enumerate(zip(got, ref)):
                err = close(a, b)
                assert err is None, f"{be} at {p}, output {i}: {err}"


def models():
    rng = np.random.default_rng(3)
    out = {}
    with pm.Model() as m:
        mu = pm.Normal("mu", 0, 2)
        s = pm.HalfNormal("s", 2)
        pm.Censored("y", pm.Normal.dist(mu, s), lower=-1.0, upper=2.0,
                    observed=np.clip(rng.normal(0.5, 1.5, 30), -1.0, 2.0))
    out["censored_normal"] = m
    with pm.Model() as m:
        nu = pm.Gamma("nu", 2, 0.2)
        s = pm.HalfNormal("s", 2)
        y = rng.standard_t(4, 40)
        pm.Truncated("y", pm.StudentT.dist(nu=nu, mu=0.2, sigma=s), lower=-2.0,
                     upper=3.0, observed=y[(y > -2) & (y < 3)])
    out["truncated_student_t"] = m
    with pm.Model() as m:
        a = pm.Gamma("a", 2, 1)
        b = pm.Exponential("b", 1)
        y = rng.gamma(2.0, 1.0, 40)
        pm.Truncated("y", pm.Gamma.dist(alpha=a, beta=b), upper=4.0,
                     observed=y[y < 4])
    out["truncated_gamma"] = m
    with pm.Model() as m:
        mu = pm.Normal("mu", 0, 1)   # a VonMises prior's circular
        k = pm.Gamma("k", 2, 0.5)      # transform needs arctan2 (not in kiln)
        pm.VonMises("y", mu, k, observed=rng.vonmises(0.4, 3.0, 25))
    out["von_mises"] = m
    with pm.Model() as m:
        beta = pm.Normal("beta", 0, 2)
        c = pm.Normal("c", np.array([-1.0, 0.0, 1.0]), 1, shape=3,
                      transform=pm.distributions.transforms.ordered,
                      initval=np.array([-1.0, 0.0, 1.0]))
        x = rng.normal(size=30)
        pm.OrderedLogistic("y", eta=beta * x, cutpoints=c,
                           observed=rng.integers(0, 4, 30))
    out["ordered_logistic"] = m
    return out


_models = {}


@pytest.mark.parametrize("name", ["censored_normal", "truncated_student_t",
                                  "truncated_gamma", "von_mises",
                                  "ordered_logistic"])
def test_model(name):
    if not BACKENDS:
        pytest.skip("no backend")
    if not _models:
        _models.update(models())
    m = _models[name]
    mode = kp.mode(backend=BACKENDS[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = m.compile_logp(mode=mode)
        df = m.compile_dlogp(mode=mode)
    no_fallback(caught)
    fr = m.compile_logp(mode=REF)
    dfr = m.compile_dlogp(mode=REF)
    rng = np.random.default_rng(11)
    ip = m.initial_point()
    pts = [ip] + [{k: v + rng.normal(0, 0.3, size=np.shape(v)) for k, v in ip.items()}
                  for _ in range(3)]
    for be in BACKENDS:
        assert rebind(f, be) >= 1 and rebind(df, be) >= 1
        for p in pts:
            err = close(f(p), fr(p)) or close(df(p), dfr(p))
            assert err is None, f"{be}: {err}"
