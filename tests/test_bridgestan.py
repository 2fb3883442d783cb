"""test_bridgestan.py — kiln's BridgeStan model libraries through the real
BridgeStan Python client (2.7.0, ../shared/clients), TAP output.
Run by tests/test_bridgestan.sh: argv = KILN SRCDIR TMPDIR.

Eight schools (non-centred) and radon (varying intercept, non-centred),
posteriordb's models and data (examples/*.kg, examples/data/posteriordb):
names and sizes; log densities against values computed here without kiln
(numpy, and scipy.stats when present); gradients against central finite
differences of those; constrain/unconstrain round trips; jacobian on and
off; the Hessian against finite differences of the gradient and the
Hessian-vector product against H @ v; errors carrying kiln's message; four
threads on one model; a second process with the same cache.
"""
import ctypes
import json
import math
import os
import re
import subprocess
import sys
import threading
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bridgestan_common import (EIGHT_SIGMA, EIGHT_Y, eight_logp,  # noqa: E402
                               fd_gradient, main_guard, make_library,
                               normal_lpdf, paths)

import bridgestan  # noqa: E402

KILN, SRC, TMP = sys.argv[1], sys.argv[2], sys.argv[3]
P = paths(SRC)


def names(prefix, n):
    return ["%s.%d" % (prefix, i) for i in range(1, n + 1)]


def check_scipy(tap, u):
    """The hand-written density agrees with scipy.stats (when installed)."""
    try:
        from scipy import stats
    except ImportError:
        tap.ok(True, "# SKIP scipy is not installed")
        return
    tt, mu, tau = u[:8], u[8], math.exp(u[9])
    theta = tt * tau + mu
    want = (stats.norm.logpdf(tt).sum() +
            stats.norm.logpdf(EIGHT_Y, theta, EIGHT_SIGMA).sum() +
            stats.norm.logpdf(mu, 0, 5) + stats.cauchy.logpdf(tau, 0, 5) +
            u[9])
    tap.close(eight_logp(u), want, 1e-13, 0, "eight schools: the test's "
              "own density equals scipy.stats' (norm, cauchy, + log tau)")


def eight_schools(tap, lib, rng):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = bridgestan.StanModel(lib, P["eight_json"])
    tap.ok(not any("version" in str(w.message) for w in caught),
           "eight schools: the client does not warn about the version "
           "(2.7.0)")
    tap.ok(m.model_version() == (2, 7, 0), "bs_*_version is 2.7.0")
    tap.ok(m.name() == "eight_schools_noncentered",
           "name() is the graph's name (%r)" % m.name())
    tap.ok("kiln" in m.model_info(), "model_info() names kiln")
    tap.diag(m.model_info())

    par = names("theta_trans", 8) + ["mu", "tau"]
    tap.ok(m.param_names() == par, "param_names(): Stan's dotted 1-based "
           "names in declaration order")
    tap.ok(m.param_names(include_tp=True) == par + names("theta", 8),
           "param_names(include_tp): the transformed parameter theta after")
    tap.ok(m.param_names(include_gq=True) == par,
           "param_names(include_gq): no generated quantities")
    tap.ok(m.param_unc_names() == par,
           "param_unc_names(): the parameters' names, as Stan's")
    tap.ok((m.param_num(), m.param_num(include_tp=True),
            m.param_num(include_tp=True, include_gq=True),
            m.param_unc_num()) == (10, 18, 18, 10),
           "sizes: 10 parameters, 18 with tp, 10 unconstrained")

    pts = [rng.normal(size=10) for _ in range(5)]
    u = pts[0]
    check_scipy(tap, u)
    lps = [m.log_density(p) for p in pts]
    tap.close(lps, [eight_logp(p) for p in pts], 1e-12, 1e-12,
              "log_density (jacobian=True) equals the independent density "
              "at 5 points")
    lp0 = [m.log_density(p, jacobian=False) for p in pts]
    tap.close(lp0, [eight_logp(p, jacobian=False) for p in pts], 1e-12,
              1e-12, "log_density(jacobian=False) equals it without log tau")
    tap.close(np.subtract(lps, lp0), [p[9] for p in pts], 0, 1e-12,
              "jacobian on minus off is exactly the log-Jacobian log tau")
    tap.ok(all(m.log_density(p, propto=True) == m.log_density(p, propto=False)
               for p in pts), "propto is accepted and ignored")
    for k, p in enumerate(pts[:3]):
        lp, g = m.log_density_gradient(p)
        tap.close(lp, eight_logp(p), 1e-12, 1e-12,
                  "log_density_gradient's value, point %d" % k)
        tap.close(g, fd_gradient(eight_logp, p), 1e-6, 1e-6,
                  "gradient = central differences of the independent "
                  "density, point %d" % k)
        _, g0 = m.log_density_gradient(p, jacobian=False)
        tap.close(g - g0, np.r_[np.zeros(9), 1.0], 0, 1e-12,
                  "the Jacobian's gradient is d(log tau)/du = e_tau, point %d"
                  % k)

    # transforms
    c = m.param_constrain(u)
    tap.close(c, np.r_[u[:9], math.exp(u[9])], 1e-15, 0,
              "param_constrain: theta_trans, mu as they are, tau = exp(u)")
    ctp = m.param_constrain(u, include_tp=True)
    theta = u[:8] * math.exp(u[9]) + u[8]
    tap.close(ctp, np.r_[c, theta], 1e-14, 1e-14,
              "param_constrain(include_tp): theta = theta_trans * tau + mu")
    cgq = m.param_constrain(u, include_tp=True, include_gq=True,
                            rng=m.new_rng(seed=7))
    tap.close(cgq, ctp, 0, 0, "include_gq with an rng: nothing more")
    back = [m.param_unconstrain(m.param_constrain(p)) for p in pts]
    tap.close(back, pts, 1e-13, 1e-13, "unconstrain(constrain(u)) == u at 5 "
              "points")
    uj = m.param_unconstrain_json({"theta_trans": list(c[:8]), "mu": c[8],
                                   "tau": c[9]})
    tap.close(uj, u, 1e-13, 1e-13, "param_unconstrain_json of the same "
              "values == u")

    # hessian, hessian-vector product
    lp, g, h = m.log_density_hessian(u)
    lpg, gg = m.log_density_gradient(u)
    tap.close([lp] + list(g), [lpg] + list(gg), 1e-14, 1e-14,
              "log_density_hessian's value and gradient are the gradient "
              "call's")
    hfd = np.array([fd_gradient(lambda x, i=i: m.log_density_gradient(x)[1][i],
                                u, h=1e-5) for i in range(10)])
    tap.close(h, hfd, 1e-5, 1e-6, "hessian against central differences of "
              "the client's gradient")
    tap.close(h, h.T, 0, 1e-9, "hessian is symmetric")
    v = rng.normal(size=10)
    lpv, hv = m.log_density_hessian_vector_product(u, v)
    tap.close(lpv, lpg, 1e-14, 0, "hessian_vector_product's value")
    tap.close(hv, h @ v, 1e-6, 1e-6 * float(np.max(np.abs(h @ v))),
              "hessian_vector_product == hessian @ v")
    return m, pts


def errors(tap, lib, m, u):
    data = json.load(open(P["eight_json"]))
    tap.raises(lambda: bridgestan.StanModel(lib, '{"J": 8, "y": [28, 8',
                                            warn=False),
               ["bs_model_construct: "], "bad JSON data raises")
    try:
        bridgestan.StanModel(lib, '{"J": 8, "y": [28, 8', warn=False)
    except RuntimeError as e:
        tap.ok(re.search(r":\d+:\d+: ", str(e)) is not None,
               "... with kiln's FILE:LINE:COL message (%s)" % e)
    missing = dict(data)
    del missing["sigma"]
    tap.raises(lambda: bridgestan.StanModel(lib, missing, warn=False),
               ["bs_model_construct: ", "no variable 'sigma'"],
               "a missing data variable raises, naming it")
    bad = dict(data, y=[[1, 2], [3, 4]])
    tap.raises(lambda: bridgestan.StanModel(lib, bad, warn=False),
               ["bs_model_construct: ", "'y'"],
               "a data variable of the wrong shape raises, naming it")
    c = m.param_constrain(u)
    c[9] = -1.0
    tap.raises(lambda: m.param_unconstrain(c),
               ["bs_param_unconstrain: ", "tau", "lower bound"],
               "unconstrain of tau = -1 raises (below its lower bound 0)")
    tap.raises(lambda: m.param_unconstrain_json({"theta_trans": [0] * 8,
                                                 "mu": 1.0}),
               ["bs_param_unconstrain_json: ", "tau"],
               "unconstrain_json without tau raises, naming it")
    # the C function itself, as a client that passes no rng would call it
    err = ctypes.c_char_p()
    out = np.zeros(18)
    rc = m._param_constrain(m.model, True, True, u, out, None,
                            ctypes.byref(err))
    msg = ctypes.string_at(err).decode() if err else ""
    if err:
        m._free_error(err)
    tap.ok(rc == -1 and "include_gq=true but rng=nullptr" in msg,
           "bs_param_constrain(include_gq, rng=NULL) fails as BridgeStan's "
           "does (%s)" % msg)
    template = os.path.join(os.path.dirname(KILN), ".libs", "bridgestan.so")
    if os.path.exists(template):
        tap.raises(lambda: bridgestan.StanModel(template, warn=False),
                   ["this is kiln's BridgeStan template; make a model library "
                    "with kiln bridgestan MODEL.kg -o LIB.so"],
                   "the template itself says how to make a model library")
    else:
        tap.ok(True, "# SKIP no template at %s" % template)


def threads(tap, m, rng):
    pts = [rng.normal(size=10) for _ in range(64)]
    serial = [m.log_density_gradient(p) for p in pts]
    got = [None] * len(pts)
    bad = []

    def work(k):
        for rep in range(25):
            for i in range(k, len(pts), 4):
                lp, g = m.log_density_gradient(pts[i])
                if rep == 0:
                    got[i] = (lp, g)
                elif lp != got[i][0] or not np.array_equal(g, got[i][1]):
                    bad.append(i)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    tap.ok(not bad, "4 threads x 400 calls: every repeat of a point is "
           "bitwise the same")
    tap.close([g[0] for g in got], [s[0] for s in serial], 1e-14, 0,
              "4 threads: values equal the serial calls'")
    tap.close([g[1] for g in got], [s[1] for s in serial], 1e-14, 1e-14,
              "4 threads: gradients equal the serial calls'")


def second_process(tap, lib, m):
    code = ("import sys, numpy as np, bridgestan\n"
            "m = bridgestan.StanModel(sys.argv[1], sys.argv[2])\n"
            "print(repr(m.log_density(np.zeros(10))))\n")
    r = subprocess.run([sys.executable, "-c", code, lib, P["eight_json"]],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    want = m.log_density(np.zeros(10))
    good = r.returncode == 0 and float(r.stdout.strip() or "nan") == want
    if not tap.ok(good, "a second process (same KILN_CACHE_DIR %s) constructs "
                  "and agrees" % os.environ.get("KILN_CACHE_DIR")):
        tap.diag(r.stdout + r.stderr)


def radon(tap, lib, rng):
    d = json.load(open(P["radon_json"]))
    J, N = d["J"], d["N"]
    idx = np.asarray(d["county_idx"]) - 1
    fm = np.asarray(d["floor_measure"], dtype=float)
    lr = np.asarray(d["log_radon"], dtype=float)

    def logp(u, jacobian=True):
        ar, beta, mu_a = u[:J], u[J], u[J + 1]
        sa, sy = math.exp(u[J + 2]), math.exp(u[J + 3])
        alpha = mu_a + sa * ar
        lp = (normal_lpdf(sy, 0, 1) + normal_lpdf(sa, 0, 1) +
              normal_lpdf(mu_a, 0, 10) + normal_lpdf(beta, 0, 10) +
              normal_lpdf(ar, 0, 1) + normal_lpdf(lr, alpha[idx] + fm * beta,
                                                  sy))
        return lp + (u[J + 2] + u[J + 3] if jacobian else 0.0)

    m = bridgestan.StanModel(lib, P["radon_json"])
    par = names("alpha_raw", J) + ["beta", "mu_alpha", "sigma_alpha",
                                   "sigma_y"]
    tap.ok(m.name() == "radon_variable_intercept_noncentered",
           "radon: name()")
    tap.ok(m.param_names() == par and m.param_unc_names() == par and
           m.param_names(include_tp=True) == par + names("alpha", J),
           "radon: names (alpha_raw.1..%d, beta, mu_alpha, sigma_alpha, "
           "sigma_y; tp alpha)" % J)
    tap.ok((m.param_unc_num(), m.param_num(include_tp=True)) ==
           (J + 4, 2 * J + 4), "radon: sizes %d and %d" % (J + 4, 2 * J + 4))
    tap.diag("radon: N = %d houses, J = %d counties" % (N, J))
    pts = [rng.normal(scale=0.5, size=J + 4) for _ in range(3)]
    tap.close([m.log_density(p) for p in pts], [logp(p) for p in pts],
              1e-11, 1e-9, "radon: log_density equals the independent "
              "density at 3 points")
    tap.close([m.log_density(p, jacobian=False) for p in pts],
              [logp(p, False) for p in pts], 1e-11, 1e-9,
              "radon: log_density(jacobian=False)")
    lp, g = m.log_density_gradient(pts[0])
    tap.close(g, fd_gradient(logp, pts[0]), 1e-6, 1e-5,
              "radon: gradient = central differences (89 coordinates)")
    c = m.param_constrain(pts[1], include_tp=True)
    alpha = pts[1][J + 1] + math.exp(pts[1][J + 2]) * pts[1][:J]
    tap.close(c[J + 4:], alpha, 1e-13, 1e-13,
              "radon: constrain(include_tp) appends alpha")
    tap.close(m.param_unconstrain(c[:J + 4]), pts[1], 1e-13, 1e-13,
              "radon: unconstrain(constrain(u)) == u")


TRANSFORMS_KG = """kiln 1
# Stan's transforms through BridgeStan (tests/test_bridgestan.py)
graph transforms
  shared alpha: f64[K]
  param theta: f64[K] simplex
  param L: f64[3, 3] cholesky_factor_corr
  param c: f64[4] ordered
  param a1: f64 lower=0 upper=1
  param b1: f64 lower=0 upper=(1 - a1)
  lp1 = sum(mul(sub(alpha, 1), log(theta)))
  output logp = add(add(lp1, sum(mul(L, 0.5))), add(sum(c), log(b1)))
end
"""


def transforms(tap, rng):
    """A simplex of K from data (K-1 unconstrained), a 3 x 3 Cholesky
    factor of a correlation matrix (3), an ordered vector and garch11's
    bound on an earlier parameter: sizes, names, round trips."""
    kg = os.path.join(TMP, "transforms.kg")
    with open(kg, "w") as f:
        f.write(TRANSFORMS_KG)
    lib = make_library(KILN, kg, os.path.join(TMP, "transforms.so"))
    m = bridgestan.StanModel(lib, json.dumps({"alpha": [1.5, 2, 0.5, 3]}),
                             warn=False)
    tap.ok((m.param_unc_num(), m.param_num()) == (3 + 3 + 4 + 2,
                                                  4 + 9 + 4 + 2),
           "transforms: 12 unconstrained, 19 constrained values")
    tap.ok(m.param_unc_names()[:3] == names("theta", 3) and
           m.param_names()[:4] == names("theta", 4),
           "transforms: theta.1..3 unconstrained, theta.1..4 constrained")
    u = rng.normal(size=12)
    c = m.param_constrain(u)
    tap.close(sum(c[:4]), 1.0, 1e-14, 0, "transforms: the simplex sums to 1")
    Lm = np.reshape(c[4:13], (3, 3))
    tap.close(np.sum(Lm * Lm, axis=1), np.ones(3), 1e-14, 0,
              "transforms: the Cholesky factor's rows have norm 1")
    tap.ok(bool(np.all(np.diff(c[13:17]) > 0)), "transforms: c is ordered")
    tap.ok(0 < c[18] < 1 - c[17], "transforms: 0 < b1 < 1 - a1")
    tap.close(m.param_unconstrain(c), u, 1e-9, 1e-9,
              "transforms: param_unconstrain(param_constrain(u)) == u")
    js = {"theta": list(c[:4]), "L": Lm.tolist(), "c": list(c[13:17]),
          "a1": c[17], "b1": c[18]}
    tap.close(m.param_unconstrain_json(json.dumps(js)), u, 1e-9, 1e-9,
              "transforms: param_unconstrain_json of the same values")
    lp, g = m.log_density_gradient(u)
    tap.close(g, fd_gradient(m.log_density, u), 1e-6, 1e-6,
              "transforms: gradient = central differences")
    bad = dict(js, theta=[0.5, 0.5])
    tap.raises(lambda: m.param_unconstrain_json(json.dumps(bad)),
               ["theta", "(2)", "f64[4]"],
               "transforms: a simplex of the wrong length names it and "
               "both shapes")


def run(tap):
    rng = np.random.default_rng(20261202)
    eight = make_library(KILN, P["eight_kg"], os.path.join(TMP, "eight.so"))
    radon_lib = make_library(KILN, P["radon_kg"],
                             os.path.join(TMP, "radon.so"))
    m, pts = eight_schools(tap, eight, rng)
    m2 = bridgestan.StanModel(eight, json.load(open(P["eight_json"])),
                              warn=False)
    tap.ok(m2.log_density(pts[1]) == m.log_density(pts[1]),
           "data as a dict (JSON text) = data as a .json path")
    errors(tap, eight, m, pts[0])
    threads(tap, m, rng)
    second_process(tap, eight, m)
    radon(tap, radon_lib, rng)
    transforms(tap, rng)


main_guard(run)
