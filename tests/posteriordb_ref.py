#!/usr/bin/env python3
"""Independent log densities of the posteriordb corpus, in NumPy.

Written from the Stan programs (../shared/posteriordb/models), not from the
.kg files: each model is its parameters (Stan's order and bounds) and a
log density with every constant kept.  For each posterior named on the
command line this writes DIR/NAME.json in the form of Stan's references
(examples/posteriordb/references/, made with rstan):

  {"points": [{"unc": [...], "lp": x, "grad": [...],
               "constrained": {"sigma": x, "alpha[1]": x, ...}}, ...],
   "propto": 0, "source": "tests/posteriordb_ref.py"}

at three points; lp includes the log-Jacobian and every constant
("propto": 0, so the test compares it as it is, not only differences),
and the gradient with
respect to the unconstrained values is the complex-step derivative
(Im f(u + i h e_j) / h, h = 1e-30: exact to rounding, no cancellation), so
tests/test_posteriordb can hold kiln to the same tolerances as against
Stan.  Usage: posteriordb_ref.py SRCDIR OUTDIR NAME...  (prints the names
it wrote; a name whose model is not here or whose data is missing is
reported and left out).
"""
import json
import math
import os
import sys

import numpy as np

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def normal(y, mu, s):
    y, mu, s = np.broadcast_arrays(np.asarray(y), np.asarray(mu),
                                   np.asarray(s))
    z = (y - mu) / s
    return np.sum(-0.5 * z * z - np.log(s) - LOG_SQRT_2PI)


def cauchy(y, mu, s):
    y, mu, s = np.broadcast_arrays(np.asarray(y), np.asarray(mu),
                                   np.asarray(s))
    z = (y - mu) / s
    return np.sum(-math.log(math.pi) - np.log(s) - np.log1p(z * z))


def student_t(y, nu, mu, s):
    z = (y - mu) / s
    return (math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2)
            - 0.5 * math.log(nu * math.pi) - np.log(s)
            - (nu + 1) / 2 * np.log1p(z * z / nu))


def A(d, k):
    return np.asarray(d[k], dtype=float)


# ---- the models: (parameters [(name, size, lower)], log density) ---------
# size: None for a scalar, an int, or a data variable's name (J, D).

def radon(model):
    def m(p, d):
        c = np.asarray(d["county_idx"]) - 1
        y = A(d, "log_radon")
        fl = A(d, "floor_measure") if "floor_measure" in d else None
        if model == "radon_pooled":
            return (normal(p["sigma_y"], 0, 1) + normal(p["alpha"], 0, 10)
                    + normal(p["beta"], 0, 10)
                    + normal(y, p["alpha"] + p["beta"] * fl, p["sigma_y"]))
        if model == "radon_county_intercept":
            return (normal(p["sigma_y"], 0, 1) + normal(p["alpha"], 0, 10)
                    + normal(p["beta"], 0, 10)
                    + normal(y, p["alpha"][c] + p["beta"] * fl, p["sigma_y"]))
        nc = model.endswith("_noncentered")
        lp = normal(p["sigma_y"], 0, 1)
        if "partially_pooled" in model or "intercept" in model:
            lp += normal(p["sigma_alpha"], 0, 1) + normal(p["mu_alpha"], 0, 10)
            if nc:
                lp += normal(p["alpha_raw"], 0, 1)
                p["alpha"] = p["mu_alpha"] + p["sigma_alpha"] * p["alpha_raw"]
            else:
                lp += normal(p["alpha"], p["mu_alpha"], p["sigma_alpha"])
        if "slope" in model:
            lp += normal(p["sigma_beta"], 0, 1) + normal(p["mu_beta"], 0, 10)
            if nc:
                lp += normal(p["beta_raw"], 0, 1)
                p["beta"] = p["mu_beta"] + p["sigma_beta"] * p["beta_raw"]
            else:
                lp += normal(p["beta"], p["mu_beta"], p["sigma_beta"])
        if "variable_slope" in model:
            lp += normal(p["alpha"], 0, 10)
            mu = p["alpha"] + fl * p["beta"][c]
        elif "intercept_slope" in model:
            mu = p["alpha"][c] + fl * p["beta"][c]
        elif "hierarchical" in model:
            lp += normal(p["beta"], 0, 10)
            mu = p["alpha"][c] + A(d, "log_uppm") * p["beta"][0] \
                + fl * p["beta"][1]
        elif "variable_intercept" in model:
            lp += normal(p["beta"], 0, 10)
            mu = p["alpha"][c] + fl * p["beta"]
        else:   # partially pooled
            mu = p["alpha"][c]
        return lp + normal(y, mu, p["sigma_y"])
    return m


RADON_PARAMS = {
    "radon_county_intercept": [("alpha", "J", None), ("beta", None, None),
                               ("sigma_y", None, 0)],
    "radon_hierarchical_intercept_centered": [
        ("alpha", "J", None), ("beta", 2, None), ("mu_alpha", None, None),
        ("sigma_alpha", None, 0), ("sigma_y", None, 0)],
    "radon_partially_pooled_centered": [
        ("alpha", "J", None), ("mu_alpha", None, None),
        ("sigma_alpha", None, 0), ("sigma_y", None, 0)],
    "radon_pooled": [("alpha", None, None), ("beta", None, None),
                     ("sigma_y", None, 0)],
    "radon_variable_intercept_centered": [
        ("alpha", "J", None), ("beta", None, None), ("mu_alpha", None, None),
        ("sigma_alpha", None, 0), ("sigma_y", None, 0)],
    "radon_variable_intercept_slope_centered": [
        ("sigma_y", None, 0), ("sigma_alpha", None, 0),
        ("sigma_beta", None, 0), ("alpha", "J", None), ("beta", "J", None),
        ("mu_alpha", None, None), ("mu_beta", None, None)],
    "radon_variable_slope_centered": [
        ("alpha", None, None), ("beta", "J", None), ("mu_beta", None, None),
        ("sigma_beta", None, 0), ("sigma_y", None, 0)],
}
for _k in list(RADON_PARAMS):
    if _k.endswith("_centered"):
        nc = _k.replace("_centered", "_noncentered")
        RADON_PARAMS[nc] = [
            (n + "_raw", s, b) if s == "J" else (n, s, b)
            for (n, s, b) in RADON_PARAMS[_k]]


def regression(cols, prior=None):
    """y ~ normal(beta[1] + sum beta[k] * col_k, sigma), optional prior."""
    def m(p, d):
        y = cols[0](d)
        mu = p["beta"][0]
        for k, f in enumerate(cols[1:]):
            mu = mu + p["beta"][k + 1] * f(d)
        lp = normal(y, mu, p["sigma"])
        if prior:
            lp += prior(p)
        return lp
    return [("beta", len(cols), None), ("sigma", None, 0)], m


def col(name, fn=None):
    return lambda d: fn(A(d, name)) if fn else A(d, name)


def prod(*names):
    def f(d):
        r = np.ones_like(A(d, names[0]))
        for n in names:
            r = r * A(d, n)
        return r
    return f


lg = np.log
kid_prior = lambda p: cauchy(p["sigma"], 0, 2.5)   # noqa: E731

MODELS = {k: (v, radon(k)) for k, v in RADON_PARAMS.items()}
MODELS.update({
    "earn_height": regression([col("earn"), col("height")]),
    "log10earn_height": regression([col("earn", np.log10), col("height")]),
    "logearn_height": regression([col("earn", lg), col("height")]),
    "logearn_height_male": regression([col("earn", lg), col("height"),
                                       col("male")]),
    "logearn_interaction": regression([col("earn", lg), col("height"),
                                       col("male"), prod("height", "male")]),
    "logearn_logheight_male": regression([col("earn", lg), col("height", lg),
                                          col("male")]),
    "kidscore_momhs": regression([col("kid_score"), col("mom_hs")],
                                 kid_prior),
    "kidscore_momiq": regression([col("kid_score"), col("mom_iq")],
                                 kid_prior),
    "kidscore_momhsiq": regression([col("kid_score"), col("mom_hs"),
                                    col("mom_iq")], kid_prior),
    "kidscore_interaction": regression([col("kid_score"), col("mom_hs"),
                                        col("mom_iq"),
                                        prod("mom_hs", "mom_iq")], kid_prior),
    "mesquite": regression([col(n) for n in (
        "weight", "diam1", "diam2", "canopy_height", "total_height",
        "density", "group")]),
    "logmesquite": regression([col(n, lg) for n in (
        "weight", "diam1", "diam2", "canopy_height", "total_height",
        "density")] + [col("group")]),
    "logmesquite_logvolume": regression([
        col("weight", lg),
        lambda d: lg(prod("diam1", "diam2", "canopy_height")(d))]),
    "logmesquite_logva": regression([
        col("weight", lg),
        lambda d: lg(prod("diam1", "diam2", "canopy_height")(d)),
        lambda d: lg(prod("diam1", "diam2")(d)), col("group")]),
    "logmesquite_logvas": regression([
        col("weight", lg),
        lambda d: lg(prod("diam1", "diam2", "canopy_height")(d)),
        lambda d: lg(prod("diam1", "diam2")(d)),
        lambda d: lg(A(d, "diam1") / A(d, "diam2")),
        col("total_height", lg), col("density", lg), col("group")]),
    "nes": regression([col("partyid7"), col("real_ideo"), col("race_adj")]
                      + [(lambda k: lambda d: (np.asarray(d["age_discrete"])
                                               == k).astype(float))(k)
                         for k in (2, 3, 4)]
                      + [col("educ1"), col("gender"), col("income")]),
})


def kilpisjarvi(p, d):
    return (normal(p["alpha"], d["pmualpha"], d["psalpha"])
            + normal(p["beta"], d["pmubeta"], d["psbeta"])
            + normal(A(d, "y"), p["alpha"] + p["beta"] * A(d, "x"),
                     p["sigma"]))


def blr(p, d):
    return (normal(p["beta"], 0, 10) + normal(p["sigma"], 0, 10)
            + normal(A(d, "y"), A(d, "X") @ p["beta"], p["sigma"]))


def eight_schools(p, d):
    p["theta"] = p["theta_trans"] * p["tau"] + p["mu"]
    return (normal(p["theta_trans"], 0, 1)
            + normal(A(d, "y"), p["theta"], A(d, "sigma"))
            + normal(p["mu"], 0, 5) + cauchy(p["tau"], 0, 5))


def diamonds(p, d):
    X = A(d, "X")[:, 1:]
    Xc = X - X.mean(axis=0)
    return (normal(p["b"], 0, 1) + student_t(p["Intercept"], 3, 8, 10)
            + student_t(p["sigma"], 3, 0, 10) - math.log(0.5)
            + normal(A(d, "Y"), p["Intercept"] + Xc @ p["b"], p["sigma"]))


def inv_gamma(y, a, b):
    return a * math.log(b) - math.lgamma(a) - (a + 1) * np.log(y) - b / y


def accel_gp(p, d):
    def gpa(X, sdgp, lscale, z, slambda):
        D = slambda.shape[1]
        spd = (sdgp ** 2 * (math.sqrt(2 * math.pi) * lscale) ** D
               * np.exp(-0.5 * lscale ** 2 * np.sum(slambda ** 2, axis=1)))
        return X @ (np.sqrt(spd) * z)
    mu = p["Intercept"] + gpa(A(d, "Xgp_1"), p["sdgp_1"], p["lscale_1"],
                              p["zgp_1"], A(d, "slambda_1"))
    sigma = np.exp(p["Intercept_sigma"]
                   + gpa(A(d, "Xgp_sigma_1"), p["sdgp_sigma_1"],
                         p["lscale_sigma_1"], p["zgp_sigma_1"],
                         A(d, "slambda_sigma_1")))
    p["vsdgp_1"] = np.array([p["sdgp_1"]])
    p["vlscale_1"] = np.array([[p["lscale_1"]]])
    p["vsdgp_sigma_1"] = np.array([p["sdgp_sigma_1"]])
    p["vlscale_sigma_1"] = np.array([[p["lscale_sigma_1"]]])
    lccdf0 = math.log(0.5)
    return (student_t(p["Intercept"], 3, -13, 36)
            + student_t(p["sdgp_1"], 3, 0, 36) - lccdf0
            + normal(p["zgp_1"], 0, 1)
            + inv_gamma(p["lscale_1"], 1.124909, 0.0177)
            + student_t(p["Intercept_sigma"], 3, 0, 10)
            + student_t(p["sdgp_sigma_1"], 3, 0, 36) - lccdf0
            + normal(p["zgp_sigma_1"], 0, 1)
            + inv_gamma(p["lscale_sigma_1"], 1.124909, 0.0177)
            + normal(A(d, "Y"), mu, sigma))


MODELS.update({
    "accel_gp": ([("Intercept", None, None), ("sdgp_1", None, 0),
                  ("lscale_1", None, 0), ("zgp_1", "NBgp_1", None),
                  ("Intercept_sigma", None, None), ("sdgp_sigma_1", None, 0),
                  ("lscale_sigma_1", None, 0),
                  ("zgp_sigma_1", "NBgp_sigma_1", None)], accel_gp),
    "kilpisjarvi": ([("alpha", None, None), ("beta", None, None),
                     ("sigma", None, 0)], kilpisjarvi),
    "blr": ([("beta", "D", None), ("sigma", None, 0)], blr),
    "eight_schools_noncentered": ([("theta_trans", "J", None),
                                   ("mu", None, None), ("tau", None, 0)],
                                  eight_schools),
    "diamonds": ([("b", "Kc", None), ("Intercept", None, None),
                  ("sigma", None, 0)], diamonds),
})

# ---- the nine models of issue 28: recursions, HMMs, GPs, ODEs -----------

def lognormal(y, mu, s):
    y, mu, s = np.broadcast_arrays(np.asarray(y), np.asarray(mu),
                                   np.asarray(s))
    z = (np.log(y) - mu) / s
    return np.sum(-0.5 * z * z - np.log(s) - np.log(y) - LOG_SQRT_2PI)


def gamma_lpdf(y, a, b):
    return a * math.log(b) - math.lgamma(a) + (a - 1) * np.log(y) - b * y


def exponential(y, beta):
    return np.log(beta) - beta * y


def dirichlet(theta, alpha):
    alpha = np.asarray(alpha, dtype=float)
    return (math.lgamma(alpha.sum()) - sum(math.lgamma(a) for a in alpha)
            + np.sum((alpha - 1) * np.log(theta)))


def log_sum_exp(a, axis=None):
    """Complex-safe: the shift is the real part's maximum (analytic)."""
    m = np.max(np.real(a), axis=axis, keepdims=True)
    r = m + np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True))
    return np.squeeze(r, axis=axis) if axis is not None else r.reshape(())


def arma11(p, d):
    y = A(d, "y")
    mu, phi, theta = p["mu"], p["phi"], p["theta"]
    err = []
    nu = mu + phi * mu               # err[0] == 0
    err.append(y[0] - nu)
    for t in range(1, len(y)):
        nu = mu + phi * y[t - 1] + theta * err[t - 1]
        err.append(y[t] - nu)
    return (normal(mu, 0, 10) + normal(phi, 0, 2) + normal(theta, 0, 2)
            + cauchy(p["sigma"], 0, 2.5) + normal(np.array(err), 0,
                                                    p["sigma"]))


def garch11(p, d):
    y = A(d, "y")
    sig = [d["sigma1"] + 0 * p["mu"]]
    for t in range(1, len(y)):
        sig.append(np.sqrt(p["alpha0"] + p["alpha1"] * (y[t - 1] - p["mu"])
                           ** 2 + p["beta1"] * sig[t - 1] ** 2))
    return normal(y, p["mu"], np.array(sig))


def hmm_forward(log_theta, em):
    """log p(y) by the forward algorithm: em[t, k] the emission log
    density of y[t] in state k, log_theta[j, k] of moving from j to k."""
    g = em[0]
    for t in range(1, em.shape[0]):
        g = log_sum_exp(g[:, None] + log_theta, axis=0) + em[t]
    return log_sum_exp(g)


def hmm_example(p, d):
    y = A(d, "y")
    p["theta"] = np.array([p["theta1"], p["theta2"]])
    em = np.array([[normal(y[t], p["mu"][k], 1) for k in range(d["K"])]
                   for t in range(d["N"])])
    return (normal(p["mu"][0], 3, 1) + normal(p["mu"][1], 10, 1)
            + hmm_forward(np.log(p["theta"]), em))


def hmm_drive(kind):
    def m(p, d):
        u, v, al = A(d, "u"), A(d, "v"), A(d, "alpha")
        p["theta"] = np.array([p["theta1"], p["theta2"]])
        lp = sum(dirichlet(p["theta"][k], al[k]) for k in range(d["K"]))
        lp = lp + (normal(p["phi"][0], 0, 1) + normal(p["phi"][1], 3, 1)
                   + normal(p["lambda"][0], 0, 1)
                   + normal(p["lambda"][1], 3, 1))
        ph, la = p["phi"][None, :], p["lambda"][None, :]
        if kind == 0:
            em = exponential(u[:, None], ph) + exponential(v[:, None], la)
        else:
            em = (-0.5 * ((u[:, None] - ph) / d["tau"]) ** 2
                  - math.log(d["tau"]) - LOG_SQRT_2PI
                  - 0.5 * ((v[:, None] - la) / d["rho"]) ** 2
                  - math.log(d["rho"]) - LOG_SQRT_2PI)
        return lp + hmm_forward(np.log(p["theta"]), em)
    return m


def cholesky(a):
    """Lower Cholesky factor by the textbook loop (Cholesky-Banachiewicz),
    with no complex conjugation, so that it is analytic and the
    complex-step derivative passes through it."""
    n = a.shape[0]
    L = np.zeros_like(a)
    for i in range(n):
        for j in range(i + 1):
            s = a[i, j] - np.sum(L[i, :j] * L[j, :j])
            L[i, j] = np.sqrt(s) if i == j else s / L[j, j]
    return L


def gp_exp_quad_cov(x, alpha, rho):
    x = np.asarray(x, dtype=float)
    return alpha ** 2 * np.exp(-(x[:, None] - x[None, :]) ** 2
                               / (2 * rho ** 2))


def gp_regr(p, d):
    n = d["N"]
    cov = gp_exp_quad_cov(d["x"], p["alpha"], p["rho"]) \
        + np.eye(n) * p["sigma"]
    L = cholesky(cov)
    z = np.zeros(n, dtype=L.dtype)     # L z = y, forward substitution
    y = A(d, "y")
    for i in range(n):
        z[i] = (y[i] - np.sum(L[i, :i] * z[:i])) / L[i, i]
    mvn = (-n * LOG_SQRT_2PI - np.sum(np.log(np.diagonal(L)))
           - 0.5 * np.sum(z * z))
    return (gamma_lpdf(p["rho"], 25, 4) + normal(p["alpha"], 0, 2)
            + normal(p["sigma"], 0, 1) + mvn)


def gp_pois_regr(p, d):
    n = d["N"]
    cov = gp_exp_quad_cov(d["x"], p["alpha"], p["rho"]) + np.eye(n) * 1e-10
    p["f"] = cholesky(cov) @ p["f_tilde"]
    k = A(d, "k")
    return (gamma_lpdf(p["rho"], 25, 4) + normal(p["alpha"], 0, 2)
            + normal(p["f_tilde"], 0, 1)
            + np.sum(k * p["f"] - np.exp(p["f"])
                     - np.array([math.lgamma(q + 1) for q in k])))


# ODEs: SciPy's solve_ivp at a tight tolerance on the system augmented with
# its forward sensitivities (dS/dt = J_y S + df/dtheta, S(t0) = dy0/dtheta),
# so the solution's derivative is the ODE's own, not the solver's; the
# complex step enters as y + i S Im(theta): exact to first order, which is
# all the complex step keeps.
ODE_RTOL = 1e-12
ODE_ATOL = 1e-12


def ode_with_sens(rhs, jac_y, jac_p, y0, s0, t0, ts, pr, method):
    from scipy.integrate import solve_ivp
    n, q = len(y0), s0.shape[1]

    def f(t, w):
        y, S = w[:n], w[n:].reshape(n, q)
        return np.concatenate([rhs(t, y, pr),
                               (jac_y(t, y, pr) @ S
                                + jac_p(t, y, pr)).ravel()])
    r = solve_ivp(f, (t0, ts[-1]), np.concatenate([y0, s0.ravel()]),
                  method=method, t_eval=ts, rtol=ODE_RTOL, atol=ODE_ATOL)
    if not r.success:
        raise RuntimeError("solve_ivp: " + r.message)
    return r.y[:n].T, r.y[n:].T.reshape(len(ts), n, q)


def lv_rhs(t, z, th):
    a, b, g, dl = th
    return np.array([(a - b * z[1]) * z[0], (-g + dl * z[0]) * z[1]])


def lotka_volterra(p, d, z=None):
    """z: the ODE's solution given instead of solved for (ode_tolerances
    differentiates lp with respect to it)."""
    ts = A(d, "ts")
    prm = np.concatenate([p["theta"], p["z_init"]])   # theta, then z0
    pr = prm.real

    def jy(t, z, q):
        a, b, g, dl = q[:4]
        return np.array([[a - b * z[1], -b * z[0]],
                         [dl * z[1], -g + dl * z[0]]])

    def jp(t, z, q):
        return np.array([[z[0], -z[0] * z[1], 0, 0, 0, 0],
                         [0, 0, -z[1], z[0] * z[1], 0, 0]])
    s0 = np.zeros((2, 6))
    s0[0, 4] = s0[1, 5] = 1
    if z is None:
        z, S = ode_with_sens(lambda t, y, q: lv_rhs(t, y, q[:4]), jy, jp,
                             pr[4:], s0, 0.0, ts, pr, "DOP853")
        p["_S"], p["_prm"] = S, prm
        z = z + 1j * (S @ np.imag(prm)) if np.iscomplexobj(prm) else z
    p["z"] = z
    th, si = p["theta"], p["sigma"]
    y, yi = A(d, "y"), A(d, "y_init")
    lp = (normal(th[[0, 2]], 1, 0.5) + normal(th[[1, 3]], 0.05, 0.05)
          + lognormal(si, -1, 1) + lognormal(p["z_init"], math.log(10), 1))
    for k in range(2):
        lp = lp + lognormal(yi[k], np.log(p["z_init"][k]), si[k])
        lp = lp + lognormal(y[:, k], np.log(z[:, k]), si[k])
    return lp


def one_comp_mm_elim_abs(p, d, z=None):
    D, V = float(d["D"]), float(d["V"])
    ts = A(d, "times")
    prm = np.array([p["k_a"], p["K_m"], p["V_m"]])
    pr = prm.real

    def rhs(t, y, q):
        ka, km, vm = q
        dose = math.exp(-ka * t) * D * ka / V if t > 0 else 0.0
        return np.array([dose - vm / V * y[0] / (km + y[0])])

    def jy(t, y, q):
        ka, km, vm = q
        return np.array([[-vm / V * km / (km + y[0]) ** 2]])

    def jp(t, y, q):
        ka, km, vm = q
        dd = math.exp(-ka * t) * D / V * (1 - ka * t) if t > 0 else 0.0
        return np.array([[dd, vm / V * y[0] / (km + y[0]) ** 2,
                          -y[0] / (V * (km + y[0]))]])
    C = z
    if C is None:
        C, S = ode_with_sens(rhs, jy, jp, np.array([0.0]), np.zeros((1, 3)),
                             float(d["t0"]), ts, pr, "Radau")
        p["_S"], p["_prm"] = S, prm
        C = C + 1j * (S @ np.imag(prm)) if np.iscomplexobj(prm) else C
    p["C"] = C
    return (cauchy(p["k_a"], 0, 1) + cauchy(p["K_m"], 0, 1)
            + cauchy(p["V_m"], 0, 1) + cauchy(p["sigma"], 0, 1)
            + lognormal(A(d, "C_hat"), np.log(C[:, 0]), p["sigma"]))


MODELS.update({
    "arma11": ([("mu", None, None), ("phi", None, None),
                ("theta", None, None), ("sigma", None, 0)], arma11),
    "garch11": ([("mu", None, None), ("alpha0", None, 0),
                 ("alpha1", None, ("lub", 0, 1)),
                 ("beta1", None, ("lub", 0, lambda p: 1 - p["alpha1"]))],
                garch11),
    "hmm_example": ([("theta1", "K", "simplex"), ("theta2", "K", "simplex"),
                     ("mu", "K", "positive_ordered")], hmm_example),
    "hmm_drive_0": ([("theta1", "K", "simplex"), ("theta2", "K", "simplex"),
                     ("phi", "K", "positive_ordered"),
                     ("lambda", "K", "positive_ordered")], hmm_drive(0)),
    "hmm_drive_1": ([("theta1", "K", "simplex"), ("theta2", "K", "simplex"),
                     ("phi", "K", "ordered"), ("lambda", "K", "ordered")],
                    hmm_drive(1)),
    "gp_regr": ([("rho", None, 0), ("alpha", None, 0), ("sigma", None, 0)],
                gp_regr),
    "gp_pois_regr": ([("rho", None, 0), ("alpha", None, 0),
                      ("f_tilde", "N", None)], gp_pois_regr),
    "lotka_volterra": ([("theta", 4, 0), ("z_init", 2, 0), ("sigma", 2, 0)],
                       lotka_volterra),
    "one_comp_mm_elim_abs": ([("k_a", None, 0), ("K_m", None, 0),
                              ("V_m", None, 0), ("sigma", None, 0)],
                             one_comp_mm_elim_abs),
})

TPS = {"eight_schools_noncentered": ["theta"],
       "hmm_example": ["theta"], "hmm_drive_0": ["theta"],
       "hmm_drive_1": ["theta"], "gp_pois_regr": ["f"],
       "lotka_volterra": ["z"], "one_comp_mm_elim_abs": ["C"],
       "accel_gp": ["vsdgp_1", "vlscale_1", "vsdgp_sigma_1",
                    "vlscale_sigma_1"]}
for _k in RADON_PARAMS:
    if _k.endswith("_noncentered"):
        TPS[_k] = [n for n in ("alpha", "beta")
                   if (n + "_raw") in [q[0] for q in RADON_PARAMS[_k]]]


def size(s, d):
    if s is None:
        return None
    if isinstance(s, int):
        return s
    if s == "Kc":
        return d["K"] - 1
    return d[s]


def n_unc(s, tr, d):
    """How many unconstrained values a parameter of size s has."""
    n = size(s, d)
    k = 1 if n is None else n
    return k - 1 if tr == "simplex" else k


def constrain(tr, v, p):
    """Stan's constraining transform tr of the unconstrained values v
    (Stan Reference Manual, "Constraint transforms"; StanHeaders 2.21
    prim/*/fun/*_constrain.hpp): (constrained, log |Jacobian|).  tr is
    None, a number (lower bound), ("lub", L, U) with U a number or a
    function of the parameters constrained so far, "simplex" (K - 1
    values, stick-breaking), "ordered" or "positive_ordered"."""
    if tr is None:
        return v, 0
    if tr == "simplex":
        K1 = len(v)
        x, stick, jac = [], 1.0, 0
        for k in range(K1):
            a = v[k] - math.log(K1 - k)
            z = 1 / (1 + np.exp(-a))
            x.append(stick * z)
            jac = jac + np.log(stick) + np.log(z) + np.log(1 - z)
            stick = stick - x[-1]
        return np.array(x + [stick]), jac
    if tr in ("ordered", "positive_ordered"):
        e = np.exp(v)
        first = e[:1] if tr == "positive_ordered" else v[:1]
        x = np.cumsum(np.concatenate([first, e[1:]]))
        return x, np.sum(v) if tr == "positive_ordered" else np.sum(v[1:])
    if isinstance(tr, tuple) and tr[0] == "lub":
        lo, hi = (b(p) if callable(b) else b for b in tr[1:])
        z = 1 / (1 + np.exp(-v))
        return lo + (hi - lo) * z, np.sum(np.log(hi - lo) + np.log(z)
                                          + np.log(1 - z))
    return tr + np.exp(v), np.sum(v)


def logp(params, fn, u, d):
    """Log density with Jacobian at unconstrained u (real or complex)."""
    p, i, jac = {}, 0, 0
    for name, s, tr in params:
        n = size(s, d)
        k = n_unc(s, tr, d)
        v, j = constrain(tr, u[i:i + k], p)
        jac = jac + j
        p[name] = v[0] if n is None else v
        i += k
    return fn(p, d) + jac, p


def data_path(src, dname):
    for sub in ("examples/posteriordb/data", "examples/data/posteriordb",
                "../shared/posteriordb/data"):
        f = os.path.join(src, sub, dname + ".json")
        if os.path.exists(f):
            return f
    return None


def evaluate(params, fn, d, u, model):
    """A point in the form of the references: unc, lp, grad (complex
    step), constrained (parameters and the model's TPS)."""
    n = len(u)
    lp, p = logp(params, fn, u, d)
    g = np.empty(n)
    h = 1e-30
    for j in range(n):
        uc = u.astype(complex)
        uc[j] += 1j * h
        g[j] = logp(params, fn, uc, d)[0].imag / h
    con = {}
    for name_, _, _ in params + [(t, None, None)
                                  for t in TPS.get(model, [])]:
        v = np.asarray(p[name_]).real
        if not v.ndim:
            con[name_] = float(v)
            continue
        for ix in np.ndindex(v.shape):   # "alpha[3]", "z[2,1]"
            con["%s[%s]" % (name_, ",".join(str(q + 1) for q in ix))] \
                = float(v[ix])
    return {"unc": u.tolist(), "lp": float(np.real(lp)), "grad": g.tolist(),
            "constrained": con}


def load(src, name):
    """(params, fn, data, model) of a posterior, or a reason it is not
    here."""
    dname, model = name.split("-", 1)
    f = data_path(src, dname)
    if model not in MODELS or f is None:
        return "no data" if f else "no model"
    with open(f) as fh:
        d = json.load(fh)
    params, fn = MODELS[model]
    return params, fn, d, model


# ODE posteriors: Stan's solution is exact only to the Stan program's
# solver tolerances (integrate_ode_rk45(..., 1e-5, 1e-3, 500) in
# lotka_volterra; integrate_ode_bdf's defaults 1e-10, 1e-10 in
# one_comp_mm_elim_abs; tools/stan-references.R records them in each
# reference as ode_rtol, ode_atol), this file's to ODE_RTOL.  An adaptive
# solver keeps each step's error under rtol |y| + atol; its global error
# is that times the growth of perturbations along the trajectory, taken
# here as at most GLOBAL_FACTOR (these are short, non-chaotic solves).  So
# with e_z = GLOBAL_FACTOR (rtol |z| + atol) on the solution and e_S =
# GLOBAL_FACTOR (rtol |S| + atol) on its sensitivities S = dz/dtheta,
# pushed through the density (ode_bounds):
#   |d lp|  <= sum_i |dlp/dz_i| e_z,i
#   |d g_j| <= sum_i |dg_j/dz_i| e_z,i + sum_i |dlp/dz_i| sum_q e_S,iq
#              |dtheta_q/du_j|
# (g_j = dlp/du_j; dg_j/dz_i by central differences of the complex-step
# gradient with z given), and |d z_i| <= e_z,i.  These are the allowed
# differences from one solver at those tolerances; two such solvers (kiln
# against Stan) are allowed twice as much (tests/test_posteriordb.c reads
# them from references/NAME.tol.json, written by --tolerances).
ODE_TOL = {"lotka_volterra": (1e-5, 1e-3), "one_comp_mm_elim_abs": (1e-10,
                                                                    1e-10)}
GLOBAL_FACTOR = 100
ODE_STATE = {"lotka_volterra": "z", "one_comp_mm_elim_abs": "C"}


def ode_bounds(model, params, fn, d, u, rtol, atol):
    """(bound on |dg_j| per j, on |dlp|, on |dz| per element) at u from
    one solve at rtol, atol (see above), or None for a model without an
    ODE."""
    if model not in ODE_STATE:
        return None
    h = 1e-30
    _, p = logp(params, fn, u, d)
    z = np.asarray(p[ODE_STATE[model]]).real
    S = p["_S"]                       # [times, states, ODE parameters]
    ez = GLOBAL_FACTOR * (rtol * np.abs(z) + atol)
    eS = GLOBAL_FACTOR * (rtol * np.abs(S) + atol)
    dl = np.zeros(z.shape)            # |dlp/dz| by the complex step on z
    for ix in np.ndindex(z.shape):
        e = np.zeros(z.shape, dtype=complex)
        e[ix] = 1j * h
        dl[ix] = abs(fn(dict(p), d, z=z + e).imag / h)
    tol_g = np.zeros(len(u))
    for j in range(len(u)):
        uc = u.astype(complex)
        uc[j] += 1j * h
        _, pc = logp(params, fn, uc, d)
        dth = np.imag(pc["_prm"]) / h          # dtheta/du_j
        dz = S @ dth

        def gj(zr):
            return fn(dict(pc), d, z=zr + 1j * h * dz).imag / h
        t1 = 0.0
        for ix in np.ndindex(z.shape):
            st = 1e-5 * max(1.0, abs(z[ix]))
            zp, zm = z.copy(), z.copy()
            zp[ix] += st
            zm[ix] -= st
            t1 += abs((gj(zp) - gj(zm)) / (2 * st)) * ez[ix]
        tol_g[j] = t1 + float(np.sum(dl * (eS @ np.abs(dth))))
    return tol_g, float(np.sum(dl * ez)), ez


# gp_pois_regr: its covariance has 1e-10 on the diagonal of a nearly
# singular matrix, so every double-precision gradient (Stan's, this
# file's, kiln's) carries rounding errors near 1e-8 relative.  The bound
# is measured: ROUND_FACTOR times the larger distance of Stan's and this
# file's gradient from a 60-digit evaluation (mpmath: the same Cholesky,
# central differences with h = 1e-20), per element and point.
ROUND_FACTOR = 10
ILL_CONDITIONED = {"gp_pois_regr"}


def gp_pois_regr_exact(d, u, digits=60):
    """(lp, gradient) of gp_pois_regr at u to about 40 digits (mpmath)."""
    import mpmath as mp
    mp.mp.dps = digits
    x = [mp.mpf(v) for v in d["x"]]
    k = [int(v) for v in d["k"]]
    n = len(x)

    def lp(v):
        rho, alpha, ft = mp.e ** v[0], mp.e ** v[1], v[2:]
        K = mp.matrix(n, n)
        for i in range(n):
            for j in range(n):
                K[i, j] = alpha ** 2 * mp.e ** (-(x[i] - x[j]) ** 2
                                                / (2 * rho ** 2))
            K[i, i] += mp.mpf("1e-10")
        L = mp.cholesky(K)
        f = [sum(L[i, j] * ft[j] for j in range(i + 1)) for i in range(n)]
        r = (25 * mp.log(4) - mp.loggamma(25) + 24 * mp.log(rho) - 4 * rho
             - alpha ** 2 / 8 - mp.log(2) - mp.log(2 * mp.pi) / 2
             + sum(-t ** 2 / 2 - mp.log(2 * mp.pi) / 2 for t in ft)
             + sum(k[i] * f[i] - mp.e ** f[i] - mp.loggamma(k[i] + 1)
                   for i in range(n)))
        return r + v[0] + v[1]
    v = [mp.mpf(float(t)) for t in u]
    g = []
    for j in range(len(v)):
        a, b = list(v), list(v)
        a[j] += mp.mpf("1e-20")
        b[j] -= mp.mpf("1e-20")
        g.append(float((lp(a) - lp(b)) / mp.mpf("2e-20")))
    return float(lp(v)), np.array(g)


def ref_tolerances(model, ref):
    """The ODE solver tolerances of a reference: its own record
    (tools/stan-references.R), else ODE_TOL; (None, None) without ODE."""
    rtol, atol = ref.get("ode_rtol"), ref.get("ode_atol")
    if rtol is None and model in ODE_TOL:
        rtol, atol = ODE_TOL[model]
    return rtol, atol


def con_bounds(model, p_bound, con):
    """The ODE bound e_z per constrained name ("z[3,2]"), 0 elsewhere."""
    out = dict.fromkeys(con, 0.0)
    if p_bound is not None:
        ez = p_bound[2]
        for ix in np.ndindex(ez.shape):
            k = "%s[%s]" % (ODE_STATE[model], ",".join(str(q + 1) for q in ix))
            out[k] = float(ez[ix])
    return out


def check(src, names):
    """TAP: this file's densities against Stan's references at Stan's own
    points (examples/posteriordb/references/NAME.json): the gradient to
    1e-8 relative (against max(1, |g|)), lp differences between points to
    1e-9 of max(1, |lp|), constrained values to 1e-10 relative; for ODE
    posteriors, plus the bounds ode_bounds derives from the Stan program's
    solver tolerances.  Reports the largest error as a fraction of what
    is allowed."""
    tests = []
    for name in names:
        got = load(src, name)
        rp = os.path.join(src, "examples/posteriordb/references",
                          name + ".json")
        if isinstance(got, str) or not os.path.exists(rp):
            tests.append((True, "%s # SKIP %s" % (
                name, got if isinstance(got, str) else "no reference")))
            continue
        params, fn, d, model = got
        with open(rp) as fh:
            ref = json.load(fh)
        rtol, atol = ref_tolerances(model, ref)
        tp_ = rp[:-5] + ".tol.json"
        tolf = None
        if model in ILL_CONDITIONED and os.path.exists(tp_):
            with open(tp_) as fh:
                tolf = json.load(fh)
        seen = []
        wg = wlp = wc = 0.0
        first = None
        for pt in ref["points"]:
            u = np.array(pt["unc"], dtype=float)
            me = evaluate(params, fn, d, u, model)
            ob = ode_bounds(model, params, fn, d, u, rtol, atol)
            if tolf is not None:       # NAME.tol.json, as test_posteriordb
                tp = tolf["points"][len(seen)]
                ez = np.zeros(0)
                ob = (np.array(tp["tol_grad"]), tp["tol_lp"], ez)
            seen.append(1)
            sg = np.array(pt["grad"])
            allow = 1e-8 * np.maximum(1, np.abs(sg)) + (ob[0] if ob else 0)
            wg = max(wg, float(np.max(np.abs(np.array(me["grad"]) - sg)
                                      / allow)))
            tl = ob[1] if ob else 0.0
            if first is None:
                first = (me["lp"], pt["lp"], tl)
            else:
                dd = abs((me["lp"] - first[0]) - (pt["lp"] - first[1]))
                sc = max(1, abs(first[1]), abs(pt["lp"]))
                wlp = max(wlp, dd / (1e-9 * sc + first[2] + tl))
            cb = con_bounds(model, ob, me["constrained"])
            for k, v in me["constrained"].items():
                s_ = pt["constrained"].get(k)
                if s_ is not None:
                    wc = max(wc, abs(v - s_) / (1e-10 * max(1, abs(s_))
                                                + cb[k]))
        how = (" (ODE: bounds from rtol %g, atol %g)" % (rtol, atol)
               if rtol else "")
        tests.append((wg <= 1, "%s: gradient agrees with Stan at %d points "
                      "(largest error %.2g of the allowed)%s"
                      % (name, len(ref["points"]), wg, how)))
        tests.append((wlp <= 1, "%s: log density differences agree with "
                      "Stan (largest error %.2g of the allowed)"
                      % (name, wlp)))
        tests.append((wc <= 1, "%s: constrained values agree with Stan "
                      "(largest error %.2g of the allowed)" % (name, wc)))
    print("1..%d" % len(tests))
    for i, (good, what) in enumerate(tests):
        print("%s %d - %s" % ("ok" if good else "not ok", i + 1, what))
    return all(t[0] for t in tests)


def write_tolerances(src, names):
    """references/NAME.tol.json for the ODE posteriors among names: per
    point of Stan's reference, ode_bounds at the reference's solver
    tolerances (one solver's error): {"points": [{"tol_grad": [P],
    "tol_lp": x, "tol_con": {"z[1,1]": x, ...}}, ...]}."""
    for name in names:
        got = load(src, name)
        rp = os.path.join(src, "examples/posteriordb/references",
                          name + ".json")
        if isinstance(got, str) or not os.path.exists(rp):
            continue
        params, fn, d, model = got
        with open(rp) as fh:
            ref = json.load(fh)
        rtol, atol = ref_tolerances(model, ref)
        if model in ILL_CONDITIONED:
            pts = []
            for pt in ref["points"]:
                u = np.array(pt["unc"], dtype=float)
                elp, eg = gp_pois_regr_exact(d, u)
                me = evaluate(params, fn, d, u, model)
                dg = np.maximum(np.abs(np.array(pt["grad"]) - eg),
                                np.abs(np.array(me["grad"]) - eg))
                pts.append({"tol_grad": (ROUND_FACTOR * dg).tolist(),
                            "tol_lp": ROUND_FACTOR * abs(me["lp"] - elp),
                            "tol_con": {}})
            out = os.path.join(src, "examples/posteriordb/references",
                               name + ".tol.json")
            with open(out, "w") as fh:
                json.dump({"posterior": name, "round_factor": ROUND_FACTOR,
                           "source": "tests/posteriordb_ref.py --tolerances "
                           "(rounding: ROUND_FACTOR times the larger "
                           "distance of Stan's and posteriordb_ref.py's "
                           "gradient from a 60-digit evaluation)",
                           "points": pts}, fh)
            print(out)
        if rtol is not None:
            print(tolerance_file(os.path.join(
                src, "examples/posteriordb/references", name + ".tol.json"),
                name, params, fn, d, model, ref["points"], rtol, atol))


def tolerance_file(out, name, params, fn, d, model, points, rtol, atol):
    """Write OUT: ode_bounds at each of points (with "unc" and
    "constrained"); returns OUT."""
    pts = []
    for pt in points:
        u = np.array(pt["unc"], dtype=float)
        ob = ode_bounds(model, params, fn, d, u, rtol, atol)
        cb = con_bounds(model, ob, pt["constrained"])
        pts.append({"tol_grad": ob[0].tolist(), "tol_lp": ob[1],
                    "tol_con": {k: v for k, v in cb.items() if v}})
    with open(out, "w") as fh:
        json.dump({"posterior": name, "ode_rtol": rtol, "ode_atol": atol,
                   "global_factor": GLOBAL_FACTOR,
                   "source": "tests/posteriordb_ref.py --tolerances "
                   "(ode_bounds: what one solve at ode_rtol, ode_atol may "
                   "change; see the comment above it)", "points": pts}, fh)
    return out


def main():
    if sys.argv[1] == "--check":
        sys.exit(0 if check(sys.argv[2], sys.argv[3:]) else 1)
    if sys.argv[1] == "--tolerances":
        write_tolerances(sys.argv[2], sys.argv[3:])
        return
    src, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out, exist_ok=True)
    for name in names:
        got = load(src, name)
        if isinstance(got, str):
            print("skip %s: %s" % (name, got), file=sys.stderr)
            continue
        params, fn, d, model = got
        n = sum(n_unc(s, tr, d) for _, s, tr in params)
        points = []
        for k in range(3):
            u = np.array([0.3 * math.sin(1.7 * i + 0.5) + 0.2 * k
                          * math.cos(0.9 * i + k) for i in range(n)])
            points.append(evaluate(params, fn, d, u, model))
        with open(os.path.join(out, name + ".json"), "w") as fh:
            json.dump({"points": points, "propto": 0,
                       "source": "tests/posteriordb_ref.py"}, fh)
        if model in ODE_TOL:    # kiln solves at the program's tolerances
            tolerance_file(os.path.join(out, name + ".tol.json"), name,
                           params, fn, d, model, points, *ODE_TOL[model])
        print(name)


if __name__ == "__main__":
    main()
