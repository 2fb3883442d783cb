"""kiln.pymc: PyMC models as kiln models (docs/pymc.md).

Every log density and gradient is compared with PyMC's own
``model.logp_dlogp_function()`` run by PyTensor's Python mode
(``Mode(linker="py", optimizer=None)``, the reference), at several random
unconstrained points, on every backend of this build; constrained values
with PyMC's own backward transforms and deterministics, compiled in the
same mode.  Needs PyMC/PyTensor from ../shared/python (or
$KILN_SHARED_PYTHON); skips without them.  The BridgeStan tests need the
client in ../shared/clients (or $KILN_SHARED_CLIENTS).  The pm.sample
comparison runs with KILN_PYMC_SAMPLE=1 (make check-pymc-sample).
"""

import ctypes
import math
import os
import sys
import tempfile

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("KILN_SRCDIR", os.path.join(HERE, "..", ".."))
SHARED = os.path.join(SRC, "..", "shared")
PYDIR = os.environ.get("KILN_SHARED_PYTHON", os.path.join(SHARED, "python"))
CLIENTS = os.environ.get("KILN_SHARED_CLIENTS", os.path.join(SHARED, "clients"))
RADON = os.environ.get("KILN_RADON_CSV", os.path.join(SHARED, "data", "radon.csv"))

if not os.path.isdir(os.path.join(PYDIR, "site", "pymc")):
    pytest.skip("no PyMC in %s (../shared/python)" % PYDIR, allow_module_level=True)
for p in (os.path.join(PYDIR, "site"), os.path.join(PYDIR, "pytensor-2.27.1")):
    if p not in sys.path:
        sys.path.insert(0, p)
# no g++ compiles, and PyTensor's cache outside $HOME
os.environ.setdefault("PYTENSOR_FLAGS", "cxx=,base_compiledir="
                      + os.path.join(tempfile.gettempdir(), "kiln-pt-pymc-tests"))

pm = pytest.importorskip("pymc")
import pytensor  # noqa: E402
from pytensor.compile.mode import Mode  # noqa: E402

import kiln  # noqa: E402
import kiln.pymc as kp  # noqa: E402
import kiln.pytensor  # noqa: E402
from kiln_testutil import backends  # noqa: E402

REF = Mode(linker="py", optimizer=None)
RTOL = 1e-9


# ---- the models --------------------------------------------------------

def eight_schools():
    y = np.array([28., 8, -3, 7, -1, 1, 18, 12])
    s = np.array([15., 10, 16, 11, 9, 11, 10, 18])
    with pm.Model() as m:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        th = pm.Normal("theta_t", 0, 1, shape=8)
        theta = pm.Deterministic("theta", mu + tau * th)
        pm.Normal("y", theta, s, observed=y)
    return m


def radon():
    import csv
    with open(RADON) as f:
        rows = list(csv.DictReader(f))
    county = np.array([int(r["county_code"]) for r in rows])
    floor = np.array([float(r["floor"]) for r in rows])
    logr = np.array([float(r["log_radon"]) for r in rows])
    n = int(county.max()) + 1
    with pm.Model() as m:
        mu_a = pm.Normal("mu_a", 0, 10)
        sigma_a = pm.HalfNormal("sigma_a", 5)
        a_t = pm.Normal("a_t", 0, 1, shape=n)
        a = pm.Deterministic("a", mu_a + sigma_a * a_t)
        b = pm.Normal("b", 0, 10)
        sigma_y = pm.Exponential("sigma_y", 1)
        pm.Normal("y", a[county] + b * floor, sigma_y, observed=logr)
    return m


def simplex():
    with pm.Model() as m:
        p = pm.Dirichlet("p", a=np.array([1., 2., 3.]))
        pm.Multinomial("k", n=5, p=p, observed=np.array([1, 1, 3]))
        s = pm.Gamma("s", 2.0, 1.0)
        pm.Deterministic("ps", p * s)
    return m


def ordered():
    with pm.Model() as m:
        c = pm.Normal("c", 0, 3, shape=3,
                      transform=pm.distributions.transforms.ordered,
                      initval=np.array([-1., 0., 1.]))
        pm.Normal("z", c, 1, observed=np.array([-2., 0.5, 1.5]))
    return m


def with_data():
    rng = np.random.default_rng(3)
    x = rng.normal(size=30)
    y = 1.5 * x - 0.5 + rng.normal(size=30) * 0.7
    with pm.Model() as m:
        xd = pm.Data("x", x)
        yd = pm.Data("y_obs", y)
        a = pm.Normal("a", 0, 5)
        b = pm.Normal("b", 0, 5)
        s = pm.HalfNormal("s", 2)
        pm.Normal("y", a + b * xd, s, observed=yd)
    return m


def bounded():
    with pm.Model() as m:
        u = pm.Uniform("u", -2, 3)
        q = pm.Beta("q", 2, 5)
        # a bound that is a parameter: not a Stan bound, stays PyMC's
        w = pm.Uniform("w", 0, u + 3)
        pm.Normal("obs", u + q + w, 1.0, observed=np.array([0.3, 1.1]))
    return m


MODELS = {"eight_schools": eight_schools, "radon": radon,
          "simplex": simplex, "ordered": ordered, "data": with_data,
          "bounded": bounded}

_cache = {}


def or_skip(fn, *args, **kw):
    """fn(...), skipping the test while this libkiln lacks an op of issue 25
    (check, all, ... from other branches)."""
    try:
        return fn(*args, **kw)
    except kiln.pytensor.Unsupported as e:
        if "this libkiln has no op" in str(e):
            pytest.skip(str(e))
        raise


def converted(name):
    """(pymc model, layout, reference logp_dlogp function), once."""
    if name not in _cache:
        if name == "radon" and not os.path.exists(RADON):
            pytest.skip("no " + RADON)
        m = MODELS[name]()
        text, layout = or_skip(kp.model_to_kg, m)
        f = m.logp_dlogp_function(ravel_inputs=True, mode=REF)
        f.set_extra_values({})
        _cache[name] = (m, layout, f)
    return _cache[name]


def points(m, n=4, seed=7):
    ip = m.initial_point()
    size = sum(np.size(v) for v in ip.values())
    rng = np.random.default_rng(seed)
    return [rng.normal(scale=1.0, size=size) for _ in range(n)]


def close(a, b, rtol=RTOL):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.allclose(a, b, rtol=rtol, atol=rtol * max(1.0, float(np.max(np.abs(b)))))


# ---- log density and gradient, every model, every backend ---------------

@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("name", sorted(MODELS))
def test_logp_dlogp(name, backend):
    m, layout, f = converted(name)
    km = kp.PymcModel(layout, backend=backend)
    assert "kernels: %s x" % backend in km.info, km.info
    assert km.n_unc == sum(np.size(v) for v in m.initial_point().values())
    assert km.value_names == [v.name for v in m.value_vars]
    for x in points(m):
        lp_ref, g_ref = f(x)
        lp, g = km.log_density_gradient(x)
        assert close(lp, lp_ref), (lp, lp_ref)
        assert close(g, g_ref), np.max(np.abs(g - g_ref))
        assert close(km.log_density(x), lp_ref)
    # the initial point, through PyMC's own raveling
    x0 = km.array(m.initial_point())
    from pymc.blocking import DictToArrayBijection
    np.testing.assert_array_equal(x0, DictToArrayBijection.map(m.initial_point()).data)
    assert close(km.log_density_gradient(x0)[0], f(x0)[0])


def test_mapping():
    """Which transform became which kiln parameter."""
    _, layout, _ = converted("bounded")
    kinds = {p["rv_name"]: (p["kind"], p["bounds"]) for p in layout.params}
    assert kinds["u"] == ("bounded", (-2.0, 3.0))
    assert kinds["q"] == ("bounded", (0.0, 1.0))
    assert kinds["w"][0] == "unconstrained"     # bound is a parameter
    assert "param u: f64 lower=-2.0 upper=3.0" in layout.text
    assert "param w_interval__: f64\n" in layout.text
    _, layout, _ = converted("ordered")
    assert [p["kind"] for p in layout.params] == ["unconstrained"]
    assert [t["name"] for t in layout.tps] == ["c"]
    assert "param c_ordered__: f64[3]\n" in layout.text
    _, layout, _ = converted("eight_schools")
    assert "param tau: f64 lower=0.0" in layout.text
    assert "output tp theta = " in layout.text


def test_jacobian_off():
    """jacobian=False drops the Jacobians of the bound-mapped parameters:
    PyMC's jacobian=False density when every transform is a Stan bound."""
    m, layout, _ = converted("eight_schools")
    km = kp.PymcModel(layout)
    lp0 = m.logp(jacobian=False)
    f = pytensor.function(m.value_vars, [lp0] + pytensor.grad(lp0, m.value_vars),
                          mode=REF)
    for x in points(m, 2):
        lp, g = km.log_density_gradient(x, jacobian=False)
        r = f(**km.unc_point(x))
        assert close(lp, r[0]) and close(g, np.concatenate([np.ravel(v) for v in r[1:]]))


# ---- constrained values --------------------------------------------------

def _pymc_constrained(m, names):
    """PyMC's constrained values of free variables / deterministics as a
    function of the value variables, compiled in the reference mode."""
    outs = m.replace_rvs_by_values([m[n] for n in names])
    return pytensor.function(m.value_vars, outs, mode=REF, on_unused_input="ignore")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_constrained(name):
    m, layout, _ = converted(name)
    km = kp.PymcModel(layout)
    names = [rv.name for rv in m.free_RVs] + [d.name for d in m.deterministics]
    fn = _pymc_constrained(m, names)
    for x in points(m, 2):
        ref = fn(**km.unc_point(x))
        got = km.point(x)
        assert sorted(got) == sorted(names)
        for n, r in zip(names, ref):
            assert got[n].shape == np.shape(r), n
            assert close(got[n], r, 1e-12), (n, got[n], r)
    pn = km.param_names(include_tp=True)
    assert len(pn) == km.n_params(include_tp=True)


def test_names():
    _, layout, _ = converted("ordered")
    km = kp.PymcModel(layout)
    assert km.param_unc_names() == ["c_ordered__.1", "c_ordered__.2", "c_ordered__.3"]
    assert km.param_names(include_tp=True) == km.param_unc_names() + ["c.1", "c.2", "c.3"]


def test_names_simplex():
    _, layout, _ = converted("simplex")
    km = kp.PymcModel(layout)
    assert km.param_unc_names() == ["p_simplex__.1", "p_simplex__.2", "s"]
    assert km.param_names(include_tp=True) == [
        "p_simplex__.1", "p_simplex__.2", "s", "p.1", "p.2", "p.3",
        "ps.1", "ps.2", "ps.3"]


# ---- what is refused ------------------------------------------------------

def test_discrete_refused():
    with pm.Model() as m:
        pm.Poisson("n", 3.0)
        pm.Normal("x", 0, 1)
    with pytest.raises(kp.UnsupportedModel) as e:
        kp.compile_model(m)
    assert "discrete free variable 'n'" in str(e.value)
    assert isinstance(e.value, kiln.KilnError)


def test_no_free_refused():
    with pm.Model() as m:
        pm.Normal("x", 0, 1, observed=1.0)
    with pytest.raises(kp.UnsupportedModel, match="no free random variables"):
        kp.compile_model(m)


# ---- the C sampler callback, called through ctypes -----------------------

def test_callback():
    m, layout, f = converted("radon") if os.path.exists(RADON) else converted("eight_schools")
    km = kp.PymcModel(layout)
    fn, ud, dim = km.logp_callback()
    assert dim == km.n_unc
    # a plain C function pointer: call it by address, as a sampler would
    addr = ctypes.cast(fn, ctypes.c_void_p).value
    assert addr
    raw = kp.LOGP_FN(addr)
    D = ctypes.POINTER(ctypes.c_double)
    for x in points(m, 3):
        x = np.ascontiguousarray(x)
        g = np.empty(dim)
        lp = ctypes.c_double()
        rc = raw(dim, x.ctypes.data_as(D), g.ctypes.data_as(D), ctypes.byref(lp), ud)
        assert rc == 0
        lp_ref, g_ref = f(x)
        assert close(lp.value, lp_ref) and close(g, g_ref)
        assert km.callback_message(ud) == ""
        # grad may be NULL
        rc = raw(dim, x.ctypes.data_as(D), None, ctypes.byref(lp), ud)
        assert rc == 0 and close(lp.value, lp_ref)
    # the wrong dim: -1, nothing written, a message
    lp = ctypes.c_double(123.0)
    x = np.zeros(dim + 1)
    rc = raw(dim + 1, x.ctypes.data_as(D), None, ctypes.byref(lp), ud)
    assert rc == -1 and lp.value == 123.0
    assert "called with dim %d" % (dim + 1) in km.callback_message(ud)
    # without the Jacobian
    fn0, ud0, _ = km.logp_callback(jacobian=False)
    x = points(m, 1)[0]
    rc = kp.LOGP_FN(ctypes.cast(fn0, ctypes.c_void_p).value)(
        dim, x.ctypes.data_as(D), None, ctypes.byref(lp), ud0)
    assert rc == 0 and close(lp.value, km.log_density(x, jacobian=False))


def test_callback_nonfinite():
    """A point whose density is -inf: code 1 and the reason."""
    with pm.Model() as m:
        pm.Normal("mu", 0, 1)
    km = or_skip(kp.compile_model, m)
    fn, ud, dim = km.logp_callback()
    raw = kp.LOGP_FN(ctypes.cast(fn, ctypes.c_void_p).value)
    D = ctypes.POINTER(ctypes.c_double)
    x = np.array([1e200])         # -0.5 * mu^2 overflows: -inf
    lp = ctypes.c_double()
    rc = raw(1, x.ctypes.data_as(D), None, ctypes.byref(lp), ud)
    assert rc == 1 and not np.isfinite(lp.value)
    assert "logp is" in km.callback_message(ud)


# ---- BridgeStan ------------------------------------------------------------

def _bridgestan():
    if not os.path.isfile(os.path.join(CLIENTS, "bridgestan", "__init__.py")):
        pytest.skip("no BridgeStan client in " + CLIENTS)
    if CLIENTS not in sys.path:
        sys.path.insert(0, CLIENTS)
    try:
        return __import__("bridgestan")
    except ImportError as e:
        pytest.skip("bridgestan does not import: %s" % e)


def _kiln_bin():
    try:
        return kp.kiln_executable()
    except kiln.KilnError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("name", ["eight_schools", "ordered", "simplex"])
def test_bridgestan(name, tmp_path):
    bs = _bridgestan()
    _kiln_bin()
    m, layout, f = converted(name)
    km = kp.PymcModel(layout)
    lib = kp.to_bridgestan(km, str(tmp_path / (name + ".so")))
    sm = bs.StanModel(lib)
    assert sm.param_unc_num() == km.n_unc
    assert sm.param_unc_names() == km.param_unc_names()
    assert sm.param_names(include_tp=True) == km.param_names(include_tp=True)
    names = [rv.name for rv in m.free_RVs] + [d.name for d in m.deterministics]
    fn = _pymc_constrained(m, names)
    for x in points(m, 3):
        lp, g = sm.log_density_gradient(x, jacobian=True)
        lp_ref, g_ref = f(x)
        assert close(lp, lp_ref) and close(g, g_ref)
        c = sm.param_constrain(x, include_tp=True)
        np.testing.assert_allclose(c, km.constrain(x, include_tp=True), rtol=1e-13)
        ref = dict(zip(names, fn(**km.unc_point(x))))
        got = km.point(x)
        for n in names:
            assert close(got[n], ref[n], 1e-12)


def test_to_bridgestan_from_pymc(tmp_path):
    """to_bridgestan takes the PyMC model itself."""
    bs = _bridgestan()
    _kiln_bin()
    m, _, f = converted("data")
    lib = or_skip(kp.to_bridgestan, m, str(tmp_path / "data.so"))
    sm = bs.StanModel(lib)
    assert sm.param_names() == ["a", "b", "s"]
    x = np.array([0.1, 0.2, -0.3])
    assert close(sm.log_density(x), f(x)[0])


def test_bridgestan_sample(tmp_path):
    """Random-walk Metropolis through the BridgeStan client on a model whose
    posterior PyMC defines and conjugacy gives exactly: p ~ Beta(2, 3) with
    7 of 20 successes (posterior Beta(9, 16)) and mu ~ Normal(0, 10) with
    five N(mu, 1) observations (posterior normal).  Means of the constrained
    draws (param_constrain) against the exact ones, |z| < 5 with batch-means
    Monte Carlo errors; the run is seeded, so it is deterministic."""
    bs = _bridgestan()
    _kiln_bin()
    yobs = np.array([1.2, 0.4, 2.1, 1.7, 0.9])
    with pm.Model() as m:
        p = pm.Beta("p", 2, 3)
        pm.Binomial("k", n=20, p=p, observed=7)
        mu = pm.Normal("mu", 0, 10)
        pm.Normal("y", mu, 1, observed=yobs)
    sm = bs.StanModel(or_skip(kp.to_bridgestan, m, str(tmp_path / "conj.so")))
    rng = np.random.default_rng(20261206)
    x = np.zeros(2)
    lp = sm.log_density(x)
    steps, burn = 40000, 2000
    draws = np.empty((steps, 2))
    step = np.array([1.0, 0.8])
    for i in range(steps):
        xp = x + step * rng.normal(size=2)
        lpp = sm.log_density(xp)
        if math.log(rng.uniform()) < lpp - lp:
            x, lp = xp, lpp
        draws[i] = sm.param_constrain(x)
    draws = draws[burn:]
    prec = 1 / 100 + len(yobs)
    exact = np.array([9 / 25, yobs.sum() / prec])
    nb = 40
    batches = draws[: len(draws) // nb * nb].reshape(nb, -1, 2).mean(axis=1)
    se = batches.std(axis=0, ddof=1) / math.sqrt(nb)
    z = (draws.mean(axis=0) - exact) / se
    assert np.all(np.abs(z) < 5), (draws.mean(axis=0), exact, se)


# ---- pm.sample through the KILN mode --------------------------------------

@pytest.mark.skipif(os.environ.get("KILN_PYMC_SAMPLE") != "1",
                    reason="pm.sample comparison: set KILN_PYMC_SAMPLE=1 "
                    "(make check-pymc-sample)")
def test_sample_kiln_mode():
    """pm.sample on eight schools in the KILN mode against PyTensor's
    default mode (seeded; both NUTS): posterior means of mu, tau, theta
    within 5 Monte Carlo standard errors (sd / sqrt(ess) of both runs)."""
    import kiln.pytensor  # noqa: F401  registers the KILN mode
    import arviz as az
    m = eight_schools()
    kw = dict(tune=500, draws=500, chains=1, cores=1, random_seed=20261206,
              progressbar=False, compute_convergence_checks=False)
    with m:
        a = pm.sample(compile_kwargs={"mode": "KILN"}, **kw)
        b = pm.sample(**kw)
    for v in ("mu", "tau", "theta"):
        xa = a.posterior[v].values.reshape(500, -1)
        xb = b.posterior[v].values.reshape(500, -1)
        ea = np.asarray(az.ess(a, var_names=[v])[v]).reshape(-1)
        eb = np.asarray(az.ess(b, var_names=[v])[v]).reshape(-1)
        se = np.sqrt(xa.var(0) / ea + xb.var(0) / eb)
        z = (xa.mean(0) - xb.mean(0)) / se
        print("pm.sample %s: KILN %s, default %s, |z| max %.2f"
              % (v, xa.mean(0).round(2), xb.mean(0).round(2), np.max(np.abs(z))))
        assert np.all(np.abs(z) < 5), (v, z)


@pytest.mark.parametrize("check_bounds", [True, False])
def test_invalid_parameter_is_minus_inf_as_pymc(check_bounds):
    """A parameter value outside its support (sigma = -1 here) is a log
    density of -inf, as PyMC's compiled logp gives it (pm.compile turns
    CheckParameterValue into a switch), so a sampler rejects the point
    instead of failing; with check_bounds=False the check is removed as
    PyMC removes it.  The callback reports a rejection (1), not an error."""
    with pm.Model(check_bounds=check_bounds) as m:
        s = pm.Normal("s", 0, 1)
        pm.Normal("y", 0, s, observed=[1.0])
    # the reference needs PyTensor's rewrites here: pm.compile adds the
    # check rewrite to the mode's optimizer (REF has none), and reads
    # check_bounds from the model in context (as pm.sample runs it)
    with m:
        f = m.logp_dlogp_function(ravel_inputs=True,
                                  mode=Mode(linker="py", optimizer="fast_run"))
    f.set_extra_values({})
    want_lp, want_g = f(np.array([-1.0]))
    km = kp.compile_model(m, backend="interp")
    lp, g = km.log_density_gradient(np.array([-1.0]))
    if check_bounds:
        assert lp == -np.inf and float(want_lp) == -np.inf
    else:
        np.testing.assert_allclose(lp, want_lp, rtol=RTOL, equal_nan=True)
    np.testing.assert_allclose(g, want_g, rtol=RTOL, equal_nan=True)
    if check_bounds:
        fn, ud, dim = km.logp_callback()
        x = (ctypes.c_double * 1)(-1.0)
        gr = (ctypes.c_double * 1)()
        out = ctypes.c_double()
        assert fn(dim, x, gr, ctypes.byref(out), ud) == 1


def test_unsupported_op_names_node_and_variable():
    """An op kiln lacks (ArcTan2, in the circular transform of VonMises)
    raises kiln.pytensor.Unsupported naming the op and the free variable
    whose transform brought it."""
    with pm.Model() as m:
        pm.VonMises("vm", mu=0.0, kappa=2.0)
    with pytest.raises(kiln.pytensor.Unsupported) as e:
        kp.compile_model(m)
    msg = str(e.value)
    assert "ArcTan2" in msg and "'vm'" in msg and "CircularTransform" in msg, msg


def test_point_dict_layout_and_vector_size():
    """PyMC's point (a dict) is taken where the vector is; the layout
    prints each mapping; a vector of the wrong size names both sizes."""
    m = eight_schools()
    km = kp.compile_model(m, backend="interp")
    ip = m.initial_point()
    lp1, g1 = km.log_density_gradient(ip)
    lp2, g2 = km.log_density_gradient(km.array(ip))
    assert lp1 == lp2 and np.array_equal(g1, g2)
    assert km.log_density(ip) == lp1
    text = repr(km.layout)
    for v in m.value_vars:
        assert v.name in text, text
    assert "lower=0" in text
    with pytest.raises(ValueError, match="has 10 values"):
        km.unc_point(np.zeros(5))
    with pytest.raises(kiln.KilnError):
        kp.model_to_kg(pm.Model())
