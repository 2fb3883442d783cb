"""PyMC model zoo for `make bench-pytensor` and the Python tests (issue 25).

Every builder returns a fresh ``pm.Model``; none samples or compiles
anything.  Data are either the classic published values (eight schools),
the Minnesota radon survey read at call time from the shared data folder
(radon), or simulated with a fixed seed (everything else), so the same call
gives the same model in every process.

The seed-scale models (pooled, additive, hierarchical) are written the way a
front end that emits one PyMC variable per coefficient writes them: many
*scalar* random variables, each its own node in the PyTensor graph.  That is
what makes their graphs large and their PyTensor rewrites and backend
compiles slow, which is the point of the benchmark.

Where the shared data folder is: ``KILN_SHARED`` if set, else ``../shared``
beside the source tree (the layout of /work: ``<repo>/../shared``).
``shared_dir()`` returns ``None`` when neither exists; ``radon()`` then
raises ``FileNotFoundError`` naming the path it looked for.

A note on sums: PyMC canonicalises a model's graph before it takes the
logp, which flattens a Python sum of many terms into one ``Add`` with one
input per term, and PyTensor's Python linker (the reference every test
compares with, and the benchmark's floor) cannot run an elementwise op with
more than 32 operands.  So a linear combination of many scalar parameters is
written here as ``dot(constant, stack(scalars))``: the same numbers, every
parameter still its own scalar variable, and a graph the reference can run.

``ZOO`` maps the benchmark's model names to builders with their arguments;
``build(name)`` builds one.
"""

import csv
import os

import numpy as np
import pymc as pm
import pytensor.tensor as pt

_HERE = os.path.dirname(os.path.abspath(__file__))


def shared_dir():
    """Path of the shared folder (``KILN_SHARED``, else ``<src>/../shared``),
    or None when it does not exist."""
    d = os.environ.get("KILN_SHARED")
    if not d:
        d = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "shared")
    return d if os.path.isdir(d) else None


def eight_schools():
    """Eight schools (Rubin 1981; Gelman et al., BDA3 ch. 5), non-centred.

    mu ~ Normal(0, 5); tau ~ HalfCauchy(5); theta_t[8] ~ Normal(0, 1);
    y_j ~ Normal(mu + tau * theta_t_j, sigma_j) with the classic
    y = (28, 8, -3, 7, -1, 1, 18, 12), sigma = (15, 10, 16, 11, 9, 11, 10, 18).
    Free: mu, tau (log-transformed), theta_t (vector of 8): 10 unconstrained.
    """
    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    sigma = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta_t = pm.Normal("theta_t", 0.0, 1.0, shape=8)
        theta = mu + tau * theta_t
        pm.Normal("y", theta, sigma, observed=y)
    return model


def _read_radon(path):
    county, floor, log_radon = [], [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            county.append(int(row["county_code"]))
            floor.append(float(row["floor"]))
            log_radon.append(float(row["log_radon"]))
    return (np.array(county, dtype=np.int64), np.array(floor),
            np.array(log_radon))


def radon(path=None):
    """Radon, varying intercepts by county (Gelman & Hill 2007 ch. 12),
    non-centred: the Minnesota survey, 919 houses in 85 counties, read from
    ``<shared>/data/radon.csv`` (columns county_code, floor, log_radon) when
    called, or from ``path``.

    mu_a ~ Normal(0, 10); sigma_a ~ HalfNormal(5); a_t[85] ~ Normal(0, 1);
    b ~ Normal(0, 10); sigma_y ~ HalfNormal(5);
    log_radon_i ~ Normal(mu_a + sigma_a * a_t[county_i] + b * floor_i, sigma_y).
    Free: 89 unconstrained (two log-transformed scales).  The same model as
    examples/radon.kg.
    """
    if path is None:
        sd = shared_dir()
        path = os.path.join(sd if sd else os.path.join(
            os.path.dirname(os.path.dirname(_HERE)), "shared"),
            "data", "radon.csv")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"radon: data file {path} not found "
                                "(set KILN_SHARED to the shared folder)")
    county, floor, log_radon = _read_radon(path)
    n_county = int(county.max()) + 1
    with pm.Model() as model:
        mu_a = pm.Normal("mu_a", 0.0, 10.0)
        sigma_a = pm.HalfNormal("sigma_a", 5.0)
        a_t = pm.Normal("a_t", 0.0, 1.0, shape=n_county)
        b = pm.Normal("b", 0.0, 10.0)
        sigma_y = pm.HalfNormal("sigma_y", 5.0)
        a = mu_a + sigma_a * a_t
        y_hat = a[county] + b * floor
        pm.Normal("log_radon", y_hat, sigma_y, observed=log_radon)
    return model


def pooled(groups, shared, likelihood, obs=20, seed=1):
    """Seed-scale pooled model: ``groups`` groups that all share a pool of
    ``shared`` scalar parameters (the model of docs/models.md section 1,
    written as PyMC scalars).

    s_k ~ Normal(0, 1), k = 1..shared, each its own scalar variable;
    log_cv_g ~ Normal(-1, 0.5), g = 1..groups, each its own scalar (the
    per-group scale: cv_g = exp(log_cv_g));
    mu_g = exp(sum_k w_gk s_k) with fixed weights w_gk (multiples of 0.001,
    uniform in [-1/sqrt(shared), 1/sqrt(shared)]), so every shared
    parameter enters every group's mean; the sum is written
    ``dot(w_g, stack(s_1..s_P))`` (see the note on sums below);
    y_g[obs] ~ Gamma(mu=mu_g, sigma=mu_g cv_g) (``likelihood="gamma"``) or
    LogNormal with the same mean and coefficient of variation
    (``"lognormal"``: sigma_ln = sqrt(log1p(cv^2)), m = log mu_g - sigma_ln^2/2).
    Data: a draw of the model's own generative process (s and log_cv from
    their priors, y lognormal with each group's mean and cv), numpy
    ``default_rng(seed)``.  Free: groups + shared unconstrained scalars.
    """
    if likelihood not in ("gamma", "lognormal"):
        raise ValueError(f"pooled: likelihood {likelihood!r} is not "
                         "'gamma' or 'lognormal'")
    rng = np.random.default_rng(seed)
    lim = 1.0 / np.sqrt(shared)
    w = np.round(rng.uniform(-lim, lim, size=(groups, shared)), 3)
    s_true = rng.normal(0.0, 1.0, size=shared)
    cv_true = np.exp(rng.normal(-1.0, 0.5, size=groups))
    mu_true = np.exp(w @ s_true)
    sl_true = np.sqrt(np.log1p(cv_true ** 2))
    m_true = np.log(mu_true) - sl_true ** 2 / 2
    y = np.exp(m_true[:, None] + sl_true[:, None]
               * rng.normal(size=(groups, obs)))
    with pm.Model() as model:
        s = pt.stack([pm.Normal(f"s_{k + 1}", 0.0, 1.0)
                      for k in range(shared)])
        for g in range(groups):
            log_cv = pm.Normal(f"log_cv_{g + 1}", -1.0, 0.5)
            cv = pt.exp(log_cv)
            mu = pt.exp(pt.dot(w[g], s))
            if likelihood == "gamma":
                pm.Gamma(f"y_{g + 1}", mu=mu, sigma=mu * cv, observed=y[g])
            else:
                sigma_ln = pt.sqrt(pt.log1p(cv * cv))
                m = pt.log(mu) - sigma_ln * sigma_ln / 2
                pm.LogNormal(f"y_{g + 1}", mu=m, sigma=sigma_ln,
                             observed=y[g])
    return model


def additive(components=80, obs=200, seed=1):
    """Additive model of ``components`` separate terms (docs/models.md
    section 2, written as PyMC scalars).

    beta_k ~ Normal(0, 1), k = 1..components, each its own scalar variable;
    sigma ~ HalfNormal(5); mu = sum_k beta_k sin(k x), written
    ``dot(basis, stack(beta_1..beta_N))`` with the constant basis
    sin(k x) (see the note on sums in the module docstring);
    y_i ~ Normal(mu_i, sigma), ``obs`` observations.
    Data: x uniform in [-pi, pi], beta_k ~ Normal(0, 1)/sqrt(k), sigma 0.3,
    numpy ``default_rng(seed)``.  Free: components + 1 unconstrained.
    """
    rng = np.random.default_rng(seed)
    x = np.round(rng.uniform(-np.pi, np.pi, size=obs), 4)
    k = np.arange(1, components + 1)
    beta_true = rng.normal(size=components) / np.sqrt(k)
    y = np.sin(np.outer(x, k)) @ beta_true + 0.3 * rng.normal(size=obs)
    basis = np.sin(np.outer(x, k))          # column k-1 is sin(k x)
    with pm.Model() as model:
        beta = pt.stack([pm.Normal(f"beta_{j + 1}", 0.0, 1.0)
                         for j in range(components)])
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.Normal("y", pt.dot(basis, beta), sigma, observed=y)
    return model


def hierarchical(groups=51, obs=10, seed=1):
    """Two-level hierarchical regression written group by group, sized by
    ``groups``: the benchmark's "3000-node" model.  Its logp+dlogp graph
    has 58 PyTensor nodes a group plus 50 after ``fast_run`` rewrites
    without fusion (``graph_nodes``), so the default 51 groups give about
    3000 (``bench/pytensor_bench.py --count-nodes`` prints the count).

    mu_a, mu_b ~ Normal(0, 2); tau_a, tau_b ~ HalfNormal(1);
    per group g, each its own scalar variable: a_t_g, b_t_g ~ Normal(0, 1),
    sigma_g ~ HalfNormal(1) (log-transformed);
    a_g = mu_a + tau_a a_t_g, b_g = mu_b + tau_b b_t_g (non-centred);
    y_g[obs] ~ Normal(a_g + b_g x_g, sigma_g) with x_g ~ Normal(0, 1).
    Data: a draw of the generative process, numpy ``default_rng(seed)``.
    Free: 4 + 3 * groups unconstrained scalars.
    """
    rng = np.random.default_rng(seed)
    a = 1.0 + 0.5 * rng.normal(size=groups)
    b = -0.5 + 0.3 * rng.normal(size=groups)
    sig = np.abs(0.5 + 0.2 * rng.normal(size=groups)) + 0.05
    x = rng.normal(size=(groups, obs))
    y = a[:, None] + b[:, None] * x + sig[:, None] * rng.normal(
        size=(groups, obs))
    with pm.Model() as model:
        mu_a = pm.Normal("mu_a", 0.0, 2.0)
        mu_b = pm.Normal("mu_b", 0.0, 2.0)
        tau_a = pm.HalfNormal("tau_a", 1.0)
        tau_b = pm.HalfNormal("tau_b", 1.0)
        for g in range(groups):
            a_t = pm.Normal(f"a_t_{g + 1}", 0.0, 1.0)
            b_t = pm.Normal(f"b_t_{g + 1}", 0.0, 1.0)
            sigma = pm.HalfNormal(f"sigma_{g + 1}", 1.0)
            mean = (mu_a + tau_a * a_t) + (mu_b + tau_b * b_t) * x[g]
            pm.Normal(f"y_{g + 1}", mean, sigma, observed=y[g])
    return model


# name -> (builder, kwargs), in the benchmark's table order
ZOO = {
    "eight_schools": (eight_schools, {}),
    "radon": (radon, {}),
    "pooled_6_8_gamma": (pooled, dict(groups=6, shared=8, likelihood="gamma")),
    "pooled_6_8_lognormal": (pooled, dict(groups=6, shared=8,
                                          likelihood="lognormal")),
    "pooled_18_24_gamma": (pooled, dict(groups=18, shared=24,
                                        likelihood="gamma")),
    "pooled_18_24_lognormal": (pooled, dict(groups=18, shared=24,
                                            likelihood="lognormal")),
    "pooled_48_64_gamma": (pooled, dict(groups=48, shared=64,
                                        likelihood="gamma")),
    "pooled_48_64_lognormal": (pooled, dict(groups=48, shared=64,
                                            likelihood="lognormal")),
    "additive_80": (additive, dict(components=80)),
    "hierarchical_3000": (hierarchical, {}),
}


# ---- distributions of issue 28 (item 6), small models one each -----------
# Checked in the KILN mode against PyTensor's Python mode by
# tests/test_pymc_zoo.sh (logp and PyTensor's dlogp with no node left to
# PyTensor's VM; kiln.pymc.compile_model's log density and gradient), not
# part of the benchmark's ZOO.  Data simulated with a fixed seed.

def gaussian_random_walk(steps=50, seed=4):
    """GaussianRandomWalk (PyMC's logp: init + cumsum of innovations,
    inverted with a diff; no Scan).

    sigma ~ HalfNormal(1); x ~ GaussianRandomWalk(sigma, init
    Normal(0, 5), steps - 1 steps); y_t ~ Normal(x_t, 0.5), y a random walk.
    Free: sigma (log), x (steps): steps + 1 unconstrained.
    """
    rng = np.random.default_rng(seed)
    y = np.cumsum(rng.normal(size=steps))
    with pm.Model() as model:
        sigma = pm.HalfNormal("sigma", 1.0)
        x = pm.GaussianRandomWalk("x", sigma=sigma,
                                  init_dist=pm.Normal.dist(0.0, 5.0),
                                  steps=steps - 1)
        pm.Normal("y", x, 0.5, observed=y)
    return model


def ar2(steps=100, seed=5):
    """AR(2) (PyMC's logp: slices times the coefficients, no Scan).

    rho[2] ~ Normal(0, 1); sigma ~ HalfNormal(1); y ~ AR(rho, sigma, init
    Normal(0, 5) of 2 values), y simulated with rho = (0.5, -0.2).
    Free: rho, sigma (log): 3 unconstrained.
    """
    rng = np.random.default_rng(seed)
    y = np.zeros(steps)
    for t in range(2, steps):
        y[t] = 0.5 * y[t - 1] - 0.2 * y[t - 2] + rng.normal()
    with pm.Model() as model:
        rho = pm.Normal("rho", 0.0, 1.0, shape=2)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.AR("y", rho=rho, sigma=sigma,
              init_dist=pm.Normal.dist(0.0, 5.0, shape=2), observed=y)
    return model


def dirichlet_multinomial(k=4, obs=20, trials=30, seed=7):
    """Dirichlet (PyMC's simplex transform kept in the graph).

    p ~ Dirichlet(ones(k)); counts_i ~ Multinomial(trials, p), obs rows.
    Free: p (simplex): k - 1 unconstrained.
    """
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(trials, np.arange(1, k + 1) / (k * (k + 1) / 2),
                             size=obs)
    with pm.Model() as model:
        p = pm.Dirichlet("p", a=np.ones(k))
        pm.Multinomial("y", n=trials, p=p, observed=counts)
    return model


def ordered_logistic(obs=60, k=4, seed=8):
    """OrderedLogistic with ordered cutpoints (PyMC's ordered transform).

    beta ~ Normal(0, 2); cut[k-1] ~ Normal(0..k-2, 2), ordered;
    y_i ~ OrderedLogistic(beta x_i, cut), k categories.
    Free: beta, cut: k unconstrained.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=obs)
    y = np.clip(np.round(1.5 + x + rng.logistic(size=obs)), 0,
                k - 1).astype(int)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 2.0)
        cut = pm.Normal("cut", mu=np.arange(k - 1, dtype=float), sigma=2.0,
                        transform=pm.distributions.transforms.ordered,
                        initval=np.arange(k - 1, dtype=float))
        pm.OrderedLogistic("y", eta=beta * x, cutpoints=cut, observed=y)
    return model


def mvnormal_lkj(dim=3, obs=40, seed=9):
    """MvNormal with an LKJCholeskyCov Cholesky factor (PyMC's logp:
    the factor's diagonal, a triangular solve; the LKJ prior's packed
    factor behind PyMC's CholeskyCovPacked transform).

    mu[dim] ~ Normal(0, 2); chol ~ LKJCholeskyCov(eta 2, sd Exponential(1));
    y_i ~ MvNormal(mu, chol=chol), obs rows of dim.
    Free: mu, chol (packed): dim + dim (dim + 1) / 2 unconstrained.
    """
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(dim, dim))
    y = rng.multivariate_normal(np.arange(dim, dtype=float),
                                a @ a.T + np.eye(dim), size=obs)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0, shape=dim)
        chol, _, _ = pm.LKJCholeskyCov("chol", n=dim, eta=2.0,
                                       sd_dist=pm.Exponential.dist(1.0),
                                       compute_corr=True)
        pm.MvNormal("y", mu=mu, chol=chol, observed=y)
    return model


def garch11(steps=100, seed=10):
    """GARCH11 (PyMC's logp: a Scan over the volatility).

    omega ~ HalfNormal(1); alpha_1 ~ Uniform(0, 0.5); beta_1 ~ Uniform(0,
    0.5); y ~ GARCH11(omega, alpha_1, beta_1, initial_vol 1), y simulated
    with (0.2, 0.3, 0.4).
    Free: omega (log), alpha_1, beta_1 (interval): 3 unconstrained.
    """
    rng = np.random.default_rng(seed)
    y = np.zeros(steps)
    vol = 1.0
    for t in range(steps):
        if t:
            vol = np.sqrt(0.2 + 0.3 * y[t - 1] ** 2 + 0.4 * vol ** 2)
        y[t] = vol * rng.normal()
    with pm.Model() as model:
        omega = pm.HalfNormal("omega", 1.0)
        a1 = pm.Uniform("alpha_1", 0.0, 0.5)
        b1 = pm.Uniform("beta_1", 0.0, 0.5)
        pm.GARCH11("y", omega=omega, alpha_1=a1, beta_1=b1, initial_vol=1.0,
                   observed=y)
    return model


def gp_marginal(obs=30, seed=11):
    """A GP regression, pm.gp.Marginal with an ExpQuad kernel (PyMC's logp:
    an MvNormal whose covariance, K + sigma^2 I, depends on parameters, so a
    Cholesky of it and that Cholesky's gradient).

    ls ~ Gamma(2, 1); eta ~ HalfNormal(1); sigma ~ HalfNormal(1);
    y ~ Marginal(ExpQuad(ls) eta^2).marginal_likelihood(x, sigma), obs
    points of sin(x) plus noise.
    Free: ls, eta, sigma (log): 3 unconstrained.
    """
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 10, size=obs))
    y = np.sin(x) + 0.3 * rng.normal(size=obs)
    with pm.Model() as model:
        ls = pm.Gamma("ls", 2.0, 1.0)
        eta = pm.HalfNormal("eta", 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        gp = pm.gp.Marginal(cov_func=eta ** 2 * pm.gp.cov.ExpQuad(1, ls=ls))
        gp.marginal_likelihood("y", X=x[:, None], y=y, sigma=sigma)
    return model


def gp_latent(obs=10, seed=12):
    """A latent GP, pm.gp.Latent with an ExpQuad kernel (PyMC's
    non-centred prior: f = cholesky(K + jitter) v, v ~ Normal(0, 1)).

    ls ~ Gamma(2, 1); eta ~ HalfNormal(1); f ~ Latent(ExpQuad(ls)
    eta^2).prior(x); y_i ~ Poisson(exp(f_i)), obs points.
    Free: ls, eta (log), f's rotated v (obs): obs + 2 unconstrained.
    10 points, not more: K + 1e-6 I of 20 such points is so ill-conditioned
    that the two modes' Cholesky gradients differ by 9e-11 relative (LAPACK
    either way, different rounding), at the zoo test's 1e-10 bound.
    """
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 10, obs)
    y = rng.poisson(np.exp(np.sin(x)))
    with pm.Model() as model:
        ls = pm.Gamma("ls", 2.0, 1.0)
        eta = pm.HalfNormal("eta", 1.0)
        gp = pm.gp.Latent(cov_func=eta ** 2 * pm.gp.cov.ExpQuad(1, ls=ls))
        f = gp.prior("f", X=x[:, None])
        pm.Poisson("y", pm.math.exp(f), observed=y)
    return model


# name -> builder; (unconstrained size, observations) in test_pymc_zoo.sh
DISTRIBUTIONS = {
    "ar2": ar2,
    "gaussian_random_walk": gaussian_random_walk,
    "dirichlet_multinomial": dirichlet_multinomial,
    "ordered_logistic": ordered_logistic,
    "gp_latent": gp_latent,
    "gp_marginal": gp_marginal,
    "mvnormal_lkj": mvnormal_lkj,
    "garch11": garch11,
}
# Distributions whose PyTensor gradient graph kiln.pytensor does not
# convert yet (the reason by each): test_pymc_zoo.sh compiles only their
# logp in the KILN mode; kiln.pymc.compile_model (kiln's own gradient)
# is checked in full.
KILN_MODE_LOGP_ONLY = {}

def build(name):
    """Build the zoo model ``name`` (a key of ``ZOO``)."""
    try:
        fn, kw = ZOO[name]
    except KeyError:
        raise KeyError(f"no zoo model {name!r} (have: {', '.join(ZOO)})") \
            from None
    return fn(**kw)


def graph_nodes(model, exclude=("fusion",)):
    """Number of PyTensor Apply nodes in ``model``'s logp+dlogp function
    (``model.logp_dlogp_function``, raveled inputs) after PyTensor's
    ``fast_run`` rewrites less ``exclude`` (default: without ``fusion``, so
    the count is that of the primitive ops a backend that fuses by itself
    receives, and does not depend on whether a C compiler is configured).
    Runs the rewrites (seconds to minutes for the large models) but
    compiles nothing: the function is built with the Python linker."""
    from pytensor.compile.mode import Mode
    mode = Mode(linker="py", optimizer="fast_run").excluding(*exclude)
    f = model.logp_dlogp_function(ravel_inputs=True, mode=mode)
    return len(f._pytensor_function.maker.fgraph.apply_nodes)
