"""test_bridgestan_emcee.py — sample posteriordb's
eight_schools-eight_schools_noncentered through the BridgeStan Python
client with emcee (affine-invariant ensemble sampler) on kiln's
unconstrained space, and compare posterior means and standard deviations
of mu, tau and theta[1..8] with posteriordb's reference draws
(examples/data/posteriordb/*.reference.json).  TAP output.  Run by
tests/test_bridgestan_emcee.sh: argv = KILN SRCDIR TMPDIR.

Why it cannot flake.  The run is deterministic: emcee's generator is
seeded (SEED), the start is drawn from a seeded generator, and kiln's log
density is deterministic (every backend and tier gives bitwise the same
results), so a given build gives the same draws every time.  The
tolerance is not tuned to those draws: each comparison is a z-score,
  z = (estimate - reference) / sqrt(se_ours^2 + se_ref^2),
with Monte Carlo standard errors from effective sample sizes (ours:
draws / the largest integrated autocorrelation time over the ten
coordinates, emcee.autocorr.integrated_time, about 1800 for 32 walkers x
10000 steps; the reference's: posteriordb's bulk ESS, about 10000), for a
mean se = sd / sqrt(ESS) and for an sd se = sqrt((m4 - sd^4) /
(4 sd^2 ESS)) (the delta method; m4 the fourth central moment, which the
heavy-tailed tau needs).  The test passes when every |z| < Z_MAX = 5.
For a correct sampler each z is about standard normal, so another build
whose rounding sends the chain elsewhere fails one of the 20 comparisons
with probability below 20 * 6e-7 ~ 1e-5; a wrong density (a lost
constant factor, a missing Jacobian: tau's mean moves by several sd)
gives |z| in the tens.  The largest |z| is printed.
"""
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bridgestan_common import eight_logp, main_guard, make_library, paths  # noqa: E402

import bridgestan  # noqa: E402
import emcee  # noqa: E402

KILN, SRC, TMP = sys.argv[1], sys.argv[2], sys.argv[3]
P = paths(SRC)
SEED = 20261202
WALKERS, STEPS, BURN = 32, 10000, 2000
Z_MAX = 5.0


def se_sd(x, sd, ess):
    m4 = float(np.mean((x - x.mean()) ** 4))
    return math.sqrt(max(m4 - sd ** 4, 0.0) / (4 * sd * sd * ess))


def run(tap):
    lib = make_library(KILN, P["eight_kg"], os.path.join(TMP, "eight.so"))
    m = bridgestan.StanModel(lib, P["eight_json"])
    ref = json.load(open(P["eight_ref"]))["stats"]
    n = m.param_unc_num()
    tap.ok(n == 10, "10 unconstrained parameters")

    def log_prob(u):
        return m.log_density(u, jacobian=True)

    start = np.random.default_rng(SEED).normal(scale=0.5, size=(WALKERS, n))
    tap.ok(abs(log_prob(start[0]) - eight_logp(start[0])) <=
           1e-12 * abs(eight_logp(start[0])),
           "the sampled density is the model's (checked at the start)")
    sampler = emcee.EnsembleSampler(WALKERS, n, log_prob)
    sampler.random_state = np.random.RandomState(SEED).get_state()
    t0 = time.time()
    sampler.run_mcmc(start, STEPS, progress=False)
    tap.diag("%d walkers x %d steps in %.1f s" % (WALKERS, STEPS,
                                                  time.time() - t0))
    chain = sampler.get_chain(discard=BURN)          # (steps, walkers, n)
    act = emcee.autocorr.integrated_time(chain, quiet=True)
    draws = chain.reshape(-1, n)
    ess = draws.shape[0] / float(np.max(act))
    tap.diag("integrated autocorrelation times %s; ESS %.0f" %
             (np.round(act, 1), ess))
    tap.ok(chain.shape[0] > 50 * np.max(act),
           "chain longer than 50 autocorrelation times (emcee's advice)")
    acc = float(np.mean(sampler.acceptance_fraction))
    tap.ok(0.2 < acc < 0.7, "acceptance fraction %.2f" % acc)

    # constrained quantities: the client's own transform, walker by walker
    cons = np.array([m.param_constrain(u, include_tp=True)
                     for u in draws[::10]])
    names = m.param_names(include_tp=True)
    q = {"mu": draws[:, 8], "tau": np.exp(draws[:, 9])}
    for j in range(8):
        q["theta[%d]" % (j + 1)] = draws[:, 8] + np.exp(draws[:, 9]) * draws[:, j]
    col = {k: names.index(k.replace("[", ".").rstrip("]")) for k in q}
    tap.ok(all(np.allclose(cons[:, col[k]], q[k][::10], rtol=1e-13, atol=1e-13)
               for k in q), "param_constrain(include_tp) gives mu, tau, theta")

    worst = 0.0
    for k, x in q.items():
        r = ref[k]
        mean, sd = float(x.mean()), float(x.std(ddof=1))
        r_se_sd = math.sqrt(max(r["m4"] - r["sd"] ** 4, 0.0) /
                            (4 * r["sd"] ** 2 * r["ess_bulk"]))
        z_mean = (mean - r["mean"]) / math.sqrt(
            sd * sd / ess + r["sd"] ** 2 / r["ess_bulk"])
        z_sd = (sd - r["sd"]) / math.sqrt(se_sd(x, sd, ess) ** 2 +
                                          r_se_sd ** 2)
        worst = max(worst, abs(z_mean), abs(z_sd))
        tap.ok(abs(z_mean) < Z_MAX and abs(z_sd) < Z_MAX,
               "%-8s mean %7.3f (ref %7.3f, z %+.2f)  sd %6.3f (ref %6.3f, "
               "z %+.2f)" % (k, mean, r["mean"], z_mean, sd, r["sd"], z_sd))
    tap.diag("largest |z| %.2f (limit %.0f)" % (worst, Z_MAX))


main_guard(run)
