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

TPS = {"eight_schools_noncentered": ["theta"],
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


def logp(params, fn, u, d):
    """Log density with Jacobian at unconstrained u (real or complex)."""
    p, i, jac = {}, 0, 0
    for name, s, lower in params:
        n = size(s, d)
        k = 1 if n is None else n
        v = u[i:i + k]
        if lower is not None:
            jac = jac + np.sum(v)
            v = lower + np.exp(v)
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


def main():
    src, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out, exist_ok=True)
    for name in names:
        dname, model = name.split("-", 1)
        f = data_path(src, dname)
        if model not in MODELS or f is None:
            print("skip %s: %s" % (name, "no data" if f else "no model"),
                  file=sys.stderr)
            continue
        with open(f) as fh:
            d = json.load(fh)
        params, fn = MODELS[model]
        n = sum(1 if s is None else size(s, d) for _, s, _ in params)
        points = []
        for k in range(3):
            u = np.array([0.3 * math.sin(1.7 * i + 0.5) + 0.2 * k
                          * math.cos(0.9 * i + k) for i in range(n)])
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
            points.append({"unc": u.tolist(), "lp": float(np.real(lp)),
                           "grad": g.tolist(), "constrained": con})
        with open(os.path.join(out, name + ".json"), "w") as fh:
            json.dump({"points": points, "propto": 0,
                       "source": "tests/posteriordb_ref.py"}, fh)
        print(name)


if __name__ == "__main__":
    main()
