"""Sample examples/logistic.kg from Python (docs/tutorial.md, section 9).

    python3 examples/logistic_sample.py logistic.so examples/data/radon.csv

LIB is the BridgeStan library made by `kiln bridgestan examples/logistic.kg
-o logistic.so`; CSV is the data the model reads.  Needs numpy, emcee and
the BridgeStan client (pip install bridgestan numpy emcee).

1. An independent fit, with numpy only: the posterior mode (MAP) by
   Newton's method, the Laplace approximation N(MAP, -H^-1) around it, and
   the exact posterior mean by importance sampling from that approximation.
2. emcee samples the kiln model through BridgeStan.
3. The posterior means of the two must agree within Monte Carlo error:
   z = (emcee - importance) / sqrt(se_emcee^2 + se_importance^2), with
   se_emcee = sd / sqrt(effective sample size).  Everything is seeded, so
   the numbers are the same at every run; exit status 1 when some |z| >= 5.
   The bound is not tuned to these draws: for a correct density each z is
   about standard normal, so a machine whose rounding sends the chain
   elsewhere fails one of the 3 comparisons with probability about 2e-6,
   while a wrong density (a lost term, a sign) moves a mean by many
   standard errors (tests/test_tutorial.sh runs this script).
"""
import sys

import bridgestan
import emcee
import numpy as np

LIB, CSV = sys.argv[1], sys.argv[2]
SEED = 24
PRIOR_SD = 2.5

# --- the data, as the model computes it ---------------------------------
d = np.genfromtxt(CSV, delimiter=",", names=True, dtype=None, encoding="utf-8")
y = (d["log_radon"] >= np.log(4.0)).astype(float)           # high radon
X = np.column_stack([np.ones(len(y)), d["floor"], np.log(d["uppm"])])
names = ["alpha", "beta.1", "beta.2"]


def log_post(theta):
    """log density of (alpha, beta) with every constant, rows of theta"""
    theta = np.atleast_2d(theta)
    eta = theta @ X.T
    lik = np.sum(np.where(y == 1, -np.logaddexp(0, -eta),
                          -np.logaddexp(0, eta)), axis=1)
    prior = np.sum(-0.5 * (theta / PRIOR_SD) ** 2 - np.log(PRIOR_SD)
                   - 0.5 * np.log(2 * np.pi), axis=1)
    return lik + prior


# --- 1. the independent fit: Newton's method, Laplace, importance --------
theta = np.zeros(3)
for _ in range(50):
    p = 1 / (1 + np.exp(-X @ theta))
    grad = X.T @ (y - p) - theta / PRIOR_SD ** 2
    hess = -(X.T * (p * (1 - p))) @ X - np.eye(3) / PRIOR_SD ** 2
    step = np.linalg.solve(hess, grad)
    theta = theta - step
    if np.max(np.abs(step)) < 1e-12:
        break
cov = np.linalg.inv(-hess)
rng = np.random.default_rng(SEED)
L = np.linalg.cholesky(1.5 * cov)             # a wider proposal
z = rng.standard_normal((40000, 3))
draws = theta + z @ L.T
log_q = -0.5 * np.sum(z ** 2, axis=1)          # up to a constant
log_w = log_post(draws) - log_q
w = np.exp(log_w - np.max(log_w))
w /= w.sum()
is_mean = w @ draws
is_se = np.sqrt(w ** 2 @ (draws - is_mean) ** 2)

# --- 2. sample the kiln model with emcee through BridgeStan --------------
model = bridgestan.StanModel(LIB)      # the model reads its CSV itself
u = np.array([0.3, -0.2, 0.5])
if abs(model.log_density(u) - log_post(u)[0]) > 1e-9 * abs(log_post(u)[0]):
    sys.exit("the library's log density %r is not numpy's %r"
             % (model.log_density(u), log_post(u)[0]))


def log_prob(u):
    return model.log_density(u, jacobian=True)


walkers, steps, burn = 16, 1200, 200
start = theta + 0.1 * rng.standard_normal((walkers, 3))
sampler = emcee.EnsembleSampler(walkers, 3, log_prob, moves=emcee.moves.DEMove())
sampler.random_state = np.random.RandomState(SEED).get_state()
sampler.run_mcmc(start, steps, progress=False)
chain = sampler.get_chain(discard=burn)
ess = chain.shape[0] * chain.shape[1] / np.max(
    emcee.autocorr.integrated_time(chain, quiet=True))
# every parameter is unconstrained here; param_constrain maps draws of
# bounded parameters back to their constrained values
post = np.array([model.param_constrain(u) for u in chain.reshape(-1, 3)])
mean, sd = post.mean(axis=0), post.std(axis=0)

# --- 3. compare ----------------------------------------------------------
zs = (mean - is_mean) / np.sqrt(sd ** 2 / ess + is_se ** 2)
print("%-7s %9s %9s %9s %9s %6s" % ("", "MAP", "Laplace", "mean",
                                    "emcee", "z"))
print("%-7s %9s %9s %9s %9s" % ("", "", "sd", "(import.)", "mean"))
for k, name in enumerate(names):
    print("%-7s %9.4f %9.4f %9.4f %9.4f %6.2f" % (
        name, theta[k], np.sqrt(cov[k, k]), is_mean[k], mean[k], zs[k]))
print("emcee: %d draws, effective sample size %.0f" % (len(post), ess))
ok = bool(np.all(np.abs(zs) < 5))
print("posterior means %s within Monte Carlo error (max |z| = %.2f)"
      % ("agree" if ok else "DISAGREE", np.max(np.abs(zs))))
sys.exit(0 if ok else 1)
