"""kiln.Model: eight schools (examples/eight_schools_noncentered.kg) against
a numpy implementation of its density, finite differences, data forms,
transforms; and CheckError for the run-time check op."""

import json
import math
import os
import threading

import numpy as np
import pytest

import kiln
from kiln_testutil import SIGMA, SRC, Y, example, fd_grad

RNG = np.random.default_rng(2025)
DATA = {"J": 8, "y": Y, "sigma": SIGMA}


def np_logp(u, jacobian=True):
    """The density over unconstrained (theta_trans[8], mu, log tau), from
    the Stan program in the example's comment (numpy, not kiln)."""
    tt, mu, lt = u[:8], u[8], u[9]
    tau = math.exp(lt)
    c = 0.5 * math.log(2 * math.pi)

    def normal(x, m, s):
        return -0.5 * ((x - m) / s) ** 2 - np.log(s) - c
    theta = tt * tau + mu
    lp = (np.sum(normal(tt, 0, 1)) + np.sum(normal(Y, theta, SIGMA))
          + normal(mu, 0, 5)
          - math.log(math.pi) - math.log(5) - math.log1p((tau / 5) ** 2))
    return lp + (lt if jacobian else 0.0)


@pytest.fixture(scope="module")
def model():
    return kiln.Model(example("eight_schools_noncentered.kg"), data=DATA,
                      backend="interp")


def test_names_and_sizes(model):
    assert model.n_unc == 10
    names = model.param_names()
    assert names == ["theta_trans.%d" % i for i in range(1, 9)] + ["mu",
                                                                    "tau"]
    tp = model.param_names(include_tp=True)
    assert tp[10:] == ["theta.%d" % i for i in range(1, 9)]
    assert len(model.param_unc_names()) == 10
    assert model.n_params() == 10 and model.n_params(True) == 18


@pytest.mark.parametrize("jacobian", [True, False])
def test_log_density_and_gradient(model, jacobian):
    for _ in range(4):
        u = RNG.normal(size=10)
        lp = model.log_density(u, jacobian=jacobian)
        assert lp == pytest.approx(np_logp(u, jacobian), rel=1e-12)
        lp2, g = model.log_density_gradient(u, jacobian=jacobian)
        assert lp2 == lp and g.shape == (10,)
        np.testing.assert_allclose(
            g, fd_grad(lambda v: np_logp(v, jacobian), u), rtol=1e-6,
            atol=1e-7)


def test_input_forms_and_fresh_gradients(model):
    """Any array-like of 10 numbers is taken (the fast path copies a float
    or integer ndarray into this thread's buffer); each gradient is a new
    array, never the buffer the next call overwrites."""
    u = RNG.normal(size=10)
    lp, g = model.log_density_gradient(u)
    for form in (list(u), tuple(u),
                 np.asfortranarray(u), u[::-1][::-1]):
        lp2, g2 = model.log_density_gradient(form)
        assert lp2 == lp and np.array_equal(g2, g)
    ui = np.arange(10)
    assert model.log_density(ui) == pytest.approx(
        np_logp(ui.astype(float)), rel=1e-12)
    assert model.log_density_gradient(u.astype(np.float32))[0] == \
        pytest.approx(np_logp(u.astype(np.float32).astype(float)), rel=1e-12)
    g_first = model.log_density_gradient(u)[1]
    keep = g_first.copy()
    model.log_density_gradient(RNG.normal(size=10))
    assert np.array_equal(g_first, keep)
    for bad in (np.zeros((2, 5)), np.zeros(11), 3.0):
        with pytest.raises(kiln.KilnError, match="expected 10 values"):
            model.log_density_gradient(bad)


def test_hessian_and_hvp(model):
    u = RNG.normal(size=10)
    lp, g, h = model.log_density_hessian(u)
    assert lp == pytest.approx(np_logp(u), rel=1e-12)
    assert h.shape == (10, 10)
    np.testing.assert_allclose(h, h.T, atol=1e-8)
    num = np.array([fd_grad(lambda v: fd_grad(np_logp, v, 1e-4)[i], u, 1e-4)
                    for i in range(10)])
    np.testing.assert_allclose(h, num, rtol=1e-4, atol=1e-4)
    v = RNG.normal(size=10)
    lp3, hv = model.log_density_hvp(u, v)
    assert lp3 == lp
    np.testing.assert_allclose(hv, h @ v, rtol=1e-6, atol=1e-6)


def test_constrain_unconstrain(model):
    u = RNG.normal(size=10)
    x = model.constrain(u)
    np.testing.assert_allclose(x[:9], u[:9])
    assert x[9] == pytest.approx(math.exp(u[9]), rel=1e-15)
    xt = model.constrain(u, include_tp=True)
    np.testing.assert_allclose(xt[10:], u[:8] * math.exp(u[9]) + u[8],
                               rtol=1e-14)
    np.testing.assert_allclose(model.unconstrain(x), u, rtol=1e-13,
                               atol=1e-15)
    d = {"theta_trans": x[:8], "mu": x[8], "tau": x[9]}
    np.testing.assert_allclose(model.unconstrain(d), u, rtol=1e-13,
                               atol=1e-15)
    bad = x.copy()
    bad[9] = -1.0
    with pytest.raises(kiln.KilnError, match="tau"):
        model.unconstrain(bad)


def test_data_forms():
    text = example("eight_schools_noncentered.kg")
    path = os.path.join(SRC, "tests", "data", "eight_schools.json")
    with open(path) as f:
        js = f.read()
    u = RNG.normal(size=10)
    want = np_logp(u)
    for data in (path, js, {"J": 8, "y": list(Y), "sigma": SIGMA}):
        m = kiln.Model(text, data=data, backend="interp")
        assert m.log_density(u) == pytest.approx(want, rel=1e-12)
    g = kiln.Graph.parse(text)
    m = kiln.Model(g, logp_output="logp", data=json.loads(js),
                   backend="interp")
    assert m.log_density(u) == pytest.approx(want, rel=1e-12)


def test_model_errors(model):
    text = example("eight_schools_noncentered.kg")
    with pytest.raises(kiln.KilnError) as e:
        kiln.Model(text, data={"J": 8, "sigma": SIGMA}, backend="interp")
    assert "'y'" in str(e.value)
    with pytest.raises(kiln.KilnError, match="no output named 'lp'"):
        kiln.Model(text, logp_output="lp", data=DATA, backend="interp")
    with pytest.raises(kiln.KilnError, match="expected 10 values"):
        model.log_density(np.zeros(9))


def test_model_threads(model):
    us = [RNG.normal(size=10) for _ in range(8)]
    want = [model.log_density_gradient(u) for u in us]
    bad = []

    def run(k):
        for i in range(200):
            j = (i * 3 + k) % 8
            lp, g = model.log_density_gradient(us[j])
            if lp != want[j][0] or not np.array_equal(g, want[j][1]):
                bad.append((k, i))
    ts = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert bad == []
    assert model.tier_wait(10.0)
    tiered, kernels = model.tier_count()
    assert kernels >= 1 and 0 <= tiered <= kernels


def test_check_op_raises_check_error():
    if not kiln._lib.string_attrs():
        pytest.skip("this libkiln has no check op (issue 25, opscheck)")
    g = kiln.Graph.parse('kiln 1\ngraph c\n  input x: f64\n'
                         '  output y = check(x, gt(x, 0.0), msg="x must be '
                         'positive")\nend\n')
    f = kiln.compile(g, backend="interp")
    assert f(2.0)[0] == 2.0
    with pytest.raises(kiln.CheckError) as e:
        f(-1.0)
    assert e.value.check_message == "x must be positive"
    assert isinstance(e.value, kiln.KilnError)
    # the builder's string attribute
    b = kiln.Graph()
    x = b.input("x", "f64", (3,))
    b.output("y", b.op("check", x, b.op("all", b.op("ge", x, 0.0)),
                       msg="nonneg"))
    f = kiln.compile(b, backend="interp")
    with pytest.raises(kiln.CheckError, match="nonneg"):
        f(np.array([1.0, -2.0, 3.0]))


def test_builder_model_with_param_and_shared():
    # y ~ normal(mu, sigma), sigma > 0 (lower=0), mu free; data y by name
    g = kiln.Graph("normal")
    y = g.shared("y", "f64", ("N",))
    mu = g.param("mu")
    sigma = g.param("sigma", lower=0.0)
    z = g.op("true_div", g.op("sub", y, mu), sigma)
    lp = g.op("sum", g.op("sub", g.op("mul", -0.5, g.op("square", z)),
                          g.op("log", sigma)))
    g.output("logp", lp)
    yv = RNG.normal(1.0, 2.0, size=7)
    m = kiln.Model(g, data={"y": yv}, backend="interp")
    assert m.n_unc == 2 and m.param_names() == ["mu", "sigma"]
    u = np.array([0.3, -0.2])
    s = math.exp(u[1])
    want = np.sum(-0.5 * ((yv - u[0]) / s) ** 2 - math.log(s)) + u[1]
    assert m.log_density(u) == pytest.approx(want, rel=1e-13)
    # the same graph as a function: the shared value bound, then rebound
    g2 = kiln.Graph("f")
    w = g2.shared("w", "f64", (3,), value=np.array([1.0, 2.0, 3.0]))
    x = g2.input("x", "f64", (3,))
    g2.output("d", g2.op("sum", g2.op("mul", w, x)))
    f = kiln.compile(g2, backend="interp")
    assert f.shared_names == ("w",)
    assert f(np.ones(3))[0] == 6.0
    f.bind_shared("w", np.array([0.5, 0.5, 0.5]))
    assert f(np.ones(3))[0] == 1.5
    with pytest.raises(kiln.KilnError, match="w"):
        f.bind_shared("w", np.zeros(4))


def test_check_error_message_parsing():
    # the message form of KILN_ERR_CHECK (kiln.h): "check failed: MSG (NODE)"
    e = kiln.CheckError("check failed: sigma > 0 (and finite) "
                        "(node 'lp' (check, .kg line 7))")
    assert e.check_message == "sigma > 0 (and finite)"
    assert e.code == kiln._lib.ERR_CHECK and isinstance(e, kiln.KilnError)
    assert kiln.CheckError("check failed (node 'lp' (check, .kg line 7))"
                           ).check_message == ""
    err = kiln._lib.kiln_err()
    err.code = kiln._lib.ERR_CHECK
    err.message = b"check failed: m (node 'y' (check, .kg line 2))"
    assert type(kiln._error(err)) is kiln.CheckError
    err.code = kiln._lib.ERR_RUNTIME
    assert type(kiln._error(err)) is kiln.KilnError
