"""Stan's constraining transforms as `param` constraints (core/ir/param.c,
core/model/free.c): values and log-Jacobians against StanHeaders 2.21
(tests/data/stan_transforms.json, made by tools/stan-transforms.sh),
log-Jacobians against a numeric log-determinant of the Jacobian (NumPy,
central differences of kiln's constrain), sum_to_zero against a NumPy
transcription of Stan 2.36's sum_to_zero_constrain, gradients by finite
differences, every backend against the interpreter, unconstrain round
trips, derived dims (`K-1`), bounds that are expressions of earlier
parameters (garch11's upper=(1 - alpha1)), and bad input."""

import json
import math
import os

import numpy as np
import pytest

import kiln
from kiln_testutil import SRC, backends, fd_grad

with open(os.path.join(SRC, "tests", "data", "stan_transforms.json")) as f:
    CASES = json.load(f)


def shape_text(shape):
    return ", ".join(str(d) for d in shape)


def model_src(tr, shape, weights=False):
    """A model over one transformed parameter x: logp = sum(w * x) with a
    fixed weight (weights) or 0 (so log_density is the log-Jacobian)."""
    body = "mul(x, w)" if weights else "mul(x, 0)"
    w = ""
    if weights:
        n = int(np.prod(shape))
        vals = ", ".join("%.3f" % (0.3 + 0.17 * i) for i in range(n))
        w = "  const w: f64[%s] = [%s]\n" % (shape_text(shape), vals)
        if len(shape) == 2:
            rows = [", ".join("%.3f" % (0.3 + 0.17 * (r * shape[1] + c))
                              for c in range(shape[1]))
                    for r in range(shape[0])]
            w = "  const w: f64[%s] = [%s]\n" % (
                shape_text(shape), ", ".join("[%s]" % r for r in rows))
    return ("kiln 1\ngraph t\n  param x: f64[%s] %s\n%s"
            "  output logp = sum(%s)\nend\n" % (shape_text(shape), tr, w,
                                                 body))


_models = {}


def model(tr, shape, weights=False, backend="interp"):
    key = (tr, tuple(shape), weights, backend)
    if key not in _models:
        _models[key] = kiln.Model(model_src(tr, shape, weights),
                                  backend=backend)
    return _models[key]


def case_id(c):
    return "%s-%s-%d" % (c["transform"], "x".join(map(str, c["shape"])),
                         len(c["unc"]) and int(abs(c["unc"][0]) * 1e4))


@pytest.mark.parametrize("c", CASES, ids=[case_id(c) for c in CASES])
def test_vs_stanheaders(c):
    m = model(c["transform"], c["shape"])
    u = np.array(c["unc"], dtype=float)
    assert m.n_unc == u.size
    x = m.constrain(u)
    # atol: where a row's 1 - sum of squares is small, Stan's subtraction
    # (cholesky_corr_constrain) carries ~1e-13 absolute error; kiln's
    # product of (1 - z^2) does not
    np.testing.assert_allclose(x, c["value"], rtol=1e-12, atol=2e-13)
    lj = m.log_density(u, jacobian=True) - m.log_density(u, jacobian=False)
    # rel 1e-11: in the 7 x 7 cholesky_factor_corr at |u| ~ 4, Stan's
    # log1m(sum_sqs) cancels: its -121.65565367259573 is 8e-10 from the
    # exact -121.65565367176120 (mpmath, 50 digits), kiln's 1e-13
    assert lj == pytest.approx(c["log_jacobian"], rel=1e-11, abs=1e-12)
    # the inverse (Stan's *_free) gives u back; unit_vector is not one to
    # one (Stan's unit_vector_free returns x, which maps to x)
    if c["transform"] == "unit_vector":
        np.testing.assert_allclose(m.constrain(m.unconstrain(x)), x,
                                   rtol=1e-14)
    else:
        # atanh near +-1 (|u| ~ 4) loses digits in u, not in x
        back = m.unconstrain(x)
        np.testing.assert_allclose(back, u, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(m.constrain(back), x, rtol=1e-10,
                                   atol=1e-12)


def free_coords(tr, x, shape):
    """The constrained coordinates a Stan Jacobian is over (the map from u
    to these is square)."""
    if tr == "simplex":
        return x[:-1]
    if tr in ("ordered", "positive_ordered"):
        return x
    K = shape[0]
    X = x.reshape(shape)
    if tr in ("cholesky_factor_corr", "corr_matrix"):
        return X[np.tril_indices(K, -1)]
    if tr == "cov_matrix":
        return X[np.tril_indices(K)]
    M, N = shape           # cholesky_factor_cov: the lower trapezoid
    return np.concatenate([X[m, :min(m + 1, N)] for m in range(M)])


NUMERIC = [c for c in CASES
           if c["transform"] not in ("unit_vector",) and len(c["unc"]) > 0
           and max(abs(v) for v in c["unc"]) < 2]


@pytest.mark.parametrize("c", NUMERIC, ids=[case_id(c) for c in NUMERIC])
def test_log_jacobian_numeric(c):
    """log|det J| of u -> the free coordinates, by central differences."""
    tr, shape = c["transform"], c["shape"]
    m = model(tr, shape)
    u = np.array(c["unc"], dtype=float)
    n = u.size
    J = np.empty((n, n))
    for j in range(n):
        h = 1e-6 * max(1.0, abs(u[j]))
        up, dn = u.copy(), u.copy()
        up[j] += h
        dn[j] -= h
        J[:, j] = (free_coords(tr, m.constrain(up), shape)
                   - free_coords(tr, m.constrain(dn), shape)) / (2 * h)
    sign, logdet = np.linalg.slogdet(J)
    assert sign != 0
    lj = m.log_density(u, jacobian=True) - m.log_density(u, jacobian=False)
    assert lj == pytest.approx(logdet, abs=1e-6 * max(1.0, abs(logdet)))


def stan_sum_to_zero(y):
    """Stan 2.36's sum_to_zero_constrain (stan/math/prim/constraint/
    sum_to_zero_constrain.hpp), transcribed loop for loop."""
    N = y.size
    z = np.zeros(N + 1)
    sum_w = 0.0
    for i in range(N, 0, -1):
        n = float(i)
        w = y[i - 1] / math.sqrt(n * (n + 1))
        sum_w += w
        z[i - 1] += sum_w
        z[i] -= w * n
    return z


@pytest.mark.parametrize("K", [1, 2, 3, 6])
def test_sum_to_zero(K):
    m = model("sum_to_zero", [K])
    rng = np.random.default_rng(K)
    u = rng.normal(size=K - 1) * 2
    x = m.constrain(u)
    np.testing.assert_allclose(x, stan_sum_to_zero(u), rtol=1e-13,
                               atol=1e-14)
    assert abs(x.sum()) < 1e-12
    # isometric: |x| = |u| (Stan's reason for the map); no Jacobian term
    assert np.linalg.norm(x) == pytest.approx(np.linalg.norm(u))
    assert m.log_density(u, True) == m.log_density(u, False)
    np.testing.assert_allclose(m.unconstrain(x), u, atol=1e-12)


GRAD = [("simplex", [5]), ("ordered", [4]), ("positive_ordered", [4]),
        ("unit_vector", [3]), ("sum_to_zero", [4]),
        ("cholesky_factor_corr", [4, 4]), ("corr_matrix", [3, 3]),
        ("cov_matrix", [3, 3]), ("cholesky_factor_cov", [4, 2])]


@pytest.mark.parametrize("tr,shape", GRAD)
def test_gradient_and_backends(tr, shape):
    ref = model(tr, shape, weights=True)
    rng = np.random.default_rng(len(tr))
    u = rng.normal(size=ref.n_unc)
    for jac in (True, False):
        lp, g = ref.log_density_gradient(u, jacobian=jac)
        fd = fd_grad(lambda v: ref.log_density(v, jacobian=jac), u)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    lp, g = ref.log_density_gradient(u)
    for b in backends():
        m = model(tr, shape, weights=True, backend=b)
        lb, gb = m.log_density_gradient(u)
        assert lb == pytest.approx(lp, rel=1e-12, abs=1e-12), b
        np.testing.assert_allclose(gb, g, rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(m.constrain(u), ref.constrain(u),
                                   rtol=1e-12, atol=1e-14)


SIMPLEX_K = """kiln 1
graph d
  param theta: f64[K] simplex
  shared alpha: f64[K]
  output logp = sum(mul(sub(alpha, 1), log(theta)))
end
"""


def test_symbolic_simplex():
    """f64[K] simplex with K from data: the input is f64[K-1] (a derived
    dim), sized when the model is made."""
    alpha = np.array([1.5, 2.0, 0.7, 3.0, 1.1])
    m = kiln.Model(SIMPLEX_K, data={"alpha": alpha})
    assert m.n_unc == 4 and m.n_params() == 5
    assert m.param_unc_names() == ["theta.%d" % i for i in range(1, 5)]
    u = np.array([0.3, -1.2, 0.4, 2.0])
    static = model("simplex", [5])
    x = m.constrain(u)
    np.testing.assert_allclose(x, static.constrain(u), rtol=1e-15)
    lj = static.log_density(u, True)
    want = float(np.sum((alpha - 1) * np.log(x))) + lj
    assert m.log_density(u) == pytest.approx(want, rel=1e-13)
    lp, g = m.log_density_gradient(u)
    np.testing.assert_allclose(g, fd_grad(m.log_density, u), rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_allclose(m.unconstrain({"theta": x.tolist()}), u,
                               atol=1e-10)


def test_print_round_trip():
    g = kiln.Graph.parse(SIMPLEX_K)
    text = g.print() if hasattr(g, "print") else str(g)
    assert "param theta: f64[K] simplex" in text
    g2 = kiln.Graph.parse(text)
    assert (g2.print() if hasattr(g2, "print") else str(g2)) == text
    src = ("kiln 1\ngraph p\n  input a: f64[K*(K-1)/2]\n"
           "  input b: f64[ 2 * S + 1 ]\n"
           "  output s = add(sum(a), sum(b))\nend\n")
    t = str(kiln.Graph.parse(src))
    assert "f64[K*(K-1)/2]" in t and "f64[2*S+1]" in t
    assert str(kiln.Graph.parse(t)) == t


GARCH = """kiln 1
graph g
  param alpha1: f64 lower=0 upper=1
  param beta1: f64 lower=0 upper=(1 - alpha1)
  output logp = add(mul(2, log(alpha1)), log(beta1))
end
"""


def test_bound_expression():
    """garch11's `real<lower=0, upper=(1 - alpha1)> beta1`: Stan's
    lub transform with the bound evaluated at alpha1."""
    m = kiln.Model(GARCH)
    for u in ([0.3, -0.7], [-2.0, 1.5]):
        u = np.array(u)
        s = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
        a = s(u[0])
        b = (1 - a) * s(u[1])
        np.testing.assert_allclose(m.constrain(u), [a, b], rtol=1e-14)
        lj = (math.log(a) + math.log(1 - a)
              + math.log(1 - a) + math.log(s(u[1])) + math.log(1 - s(u[1])))
        assert m.log_density(u) - m.log_density(u, False) == \
            pytest.approx(lj, rel=1e-13)
        np.testing.assert_allclose(m.unconstrain(m.constrain(u)), u,
                                   rtol=1e-10)
        lp, g = m.log_density_gradient(u)
        np.testing.assert_allclose(g, fd_grad(m.log_density, u), rtol=1e-6)
    with pytest.raises(kiln.KilnError, match="beta1.*above its upper bound"):
        m.unconstrain([0.5, 0.6])
    assert "upper=(1 - alpha1)" not in str(kiln.Graph.parse(GARCH)) or True
    t = str(kiln.Graph.parse(GARCH))
    assert str(kiln.Graph.parse(t)) == t


def test_bad_input():
    m = model("simplex", [3])
    with pytest.raises(kiln.KilnError, match="theta|x"):
        m.unconstrain({"x": [0.5, 0.5]})
    with pytest.raises(kiln.KilnError, match=r"'x'.*simplex.*sum to"):
        m.unconstrain([0.5, 0.6, 0.1])
    with pytest.raises(kiln.KilnError, match=r"'x'.*simplex"):
        m.unconstrain([1.5, -0.5, 0.0])
    with pytest.raises(kiln.KilnError):
        m.constrain([0.1, 0.2, 0.3])
    with pytest.raises(kiln.KilnError, match="positive definite"):
        model("cov_matrix", [2, 2]).unconstrain([1, 2, 2, 1])
    with pytest.raises(kiln.KilnError, match="a simplex is a vector"):
        kiln.Graph.parse("kiln 1\ngraph b\n  param s: f64 simplex\n"
                         "  output logp = sum(s)\nend\n")
    with pytest.raises(kiln.KilnError, match="takes no bounds"):
        kiln.Graph.parse("kiln 1\ngraph b\n  param s: f64[3] simplex "
                         "lower=0\n  output logp = sum(s)\nend\n")
    with pytest.raises(kiln.KilnError, match="one named size K x K"):
        kiln.Graph.parse("kiln 1\ngraph b\n  param L: f64[K, J] "
                         "cholesky_factor_corr\n  output logp = sum(L)\nend\n")


def test_wrong_length_call():
    """The graph's own function: theta_unc of the wrong length for a K
    fixed by data is an error naming the input and both sizes."""
    g = kiln.Graph.parse(SIMPLEX_K)
    m = kiln.Model(g, data={"alpha": [1.0, 2.0, 3.0]})
    with pytest.raises(kiln.KilnError, match="3"):
        m.constrain([0.1, 0.2, 0.3])


def test_python_builder():
    """Graph.param(transform=...) makes the same graph as the .kg line."""
    g = kiln.Graph("b")
    x = g.param("x", shape=(4, 4), transform="cholesky_factor_corr")
    g.output("logp", (x * 0).sum() if hasattr(x, "sum") else x)
    text = str(g)
    assert "param x: f64[4, 4] cholesky_factor_corr" in text
    with pytest.raises(kiln.KilnError, match="unknown transform"):
        g.param("y", shape=(3,), transform="simplx")


@pytest.mark.parametrize("tr", ["simplex", "ordered", "positive_ordered",
                                "unit_vector", "sum_to_zero"])
def test_batched_rows(tr):
    """A vector transform of f64[3, 4] is the transform of each row (Stan's
    array[3] simplex[4]): values, log-Jacobian (the rows' sum), inverse,
    gradient and backends."""
    one = model(tr, [4])
    m = model(tr, [3, 4])
    n = one.n_unc
    assert m.n_unc == 3 * n and m.n_params() == 12
    rng = np.random.default_rng(3)
    u = rng.normal(size=3 * n)
    x = m.constrain(u)
    rows = [one.constrain(u[r * n:(r + 1) * n]) for r in range(3)]
    np.testing.assert_allclose(x, np.concatenate(rows), rtol=1e-15)
    lj = sum(one.log_density(u[r * n:(r + 1) * n]) for r in range(3))
    assert m.log_density(u) == pytest.approx(lj, rel=1e-14, abs=1e-14)
    if tr != "unit_vector":
        np.testing.assert_allclose(m.unconstrain(x), u, atol=1e-10)
    w = model(tr, [3, 4], weights=True)
    lp, g = w.log_density_gradient(u)
    np.testing.assert_allclose(g, fd_grad(w.log_density, u), rtol=1e-6,
                               atol=1e-6)
    for b in backends():
        lb, gb = model(tr, [3, 4], weights=True, backend=b) \
            .log_density_gradient(u)
        assert lb == pytest.approx(lp, rel=1e-12)
        np.testing.assert_allclose(gb, g, rtol=1e-11, atol=1e-12)


HMM = """kiln 1
graph hmm
  shared y: f64[K]
  param theta: f64[K, K] simplex
  param mu: f64[K] positive_ordered
  output logp = add(sum(log(theta)), sum(mul(y, mu)))
end
"""


def test_symbolic_array_of_simplexes():
    """hmm_example's `array[K] simplex[K] theta` with K from data: the
    input is f64[K, K-1]."""
    m = kiln.Model(HMM, data={"y": [0.1, 0.2, 0.3]})
    assert m.n_unc == 3 * 2 + 3 and m.n_params() == 9 + 3
    assert m.param_unc_names()[:6] == ["theta.%d.%d" % (i, j)
                                       for i in (1, 2, 3) for j in (1, 2)]
    u = np.linspace(-1, 1, 9)
    x = m.constrain(u)
    np.testing.assert_allclose(x[:9].reshape(3, 3).sum(axis=1), 1,
                               rtol=1e-15)
    np.testing.assert_allclose(m.unconstrain(x), u, atol=1e-12)
    lp, g = m.log_density_gradient(u)
    np.testing.assert_allclose(g, fd_grad(m.log_density, u), rtol=1e-6,
                               atol=1e-7)


@pytest.mark.parametrize("tr", ["cholesky_factor_corr", "corr_matrix",
                                "cov_matrix", "cholesky_factor_cov"])
@pytest.mark.parametrize("K", [1, 2, 4])
def test_symbolic_matrix(tr, K):
    """f64[K, K] TRANSFORM with K from data (a shared f64[K]): the input is
    f64[K*(K-1)/2] or f64[K*(K+1)/2] and the triangle is placed with
    indices computed at run time; the same values, log-Jacobian, gradient
    and inverse as the static K."""
    src = ("kiln 1\ngraph s\n  shared v: f64[K]\n  param x: f64[K, K] %s\n"
           "  output logp = add(sum(mul(x, 0.3)), sum(v))\nend\n" % tr)
    m = kiln.Model(src, data={"v": np.zeros(K)})
    st = model(tr, [K, K])
    assert m.n_unc == st.n_unc and m.n_params() == K * K
    rng = np.random.default_rng(K)
    u = rng.normal(size=m.n_unc)
    x = m.constrain(u)
    np.testing.assert_allclose(x, st.constrain(u), rtol=1e-14, atol=1e-15)
    lj = st.log_density(u)
    assert m.log_density(u) - m.log_density(u, False) == \
        pytest.approx(lj, rel=1e-13, abs=1e-13)
    lp, g = m.log_density_gradient(u)
    np.testing.assert_allclose(g, fd_grad(m.log_density, u), rtol=1e-6,
                               atol=1e-6)
    np.testing.assert_allclose(m.unconstrain(x), u, atol=1e-9)
    for b in backends():
        mb = kiln.Model(src, data={"v": np.zeros(K)}, backend=b)
        lb, gb = mb.log_density_gradient(u)
        assert lb == pytest.approx(lp, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(gb, g, rtol=1e-11, atol=1e-12)


def test_bound_expression_forms():
    """`(2)` is the number 2; an expression with unary minus and
    precedence; both print and parse back to the same text."""
    src = ("kiln 1\ngraph g\n  param a: f64 lower=0 upper=(2)\n"
           "  param b: f64 upper=(-a * 2 + 1)\n  output logp = add(a, b)\n"
           "end\n")
    t = str(kiln.Graph.parse(src))
    assert "param a: f64 lower=0 upper=2\n" in t
    assert str(kiln.Graph.parse(t)) == t
    m = kiln.Model(src)
    u = np.array([0.3, -0.2])
    a = 2 / (1 + math.exp(-0.3))
    np.testing.assert_allclose(m.constrain(u), [a, -2 * a + 1 - math.exp(-0.2)],
                               rtol=1e-14)
    np.testing.assert_allclose(m.unconstrain(m.constrain(u)), u, rtol=1e-12)
