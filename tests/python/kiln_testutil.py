"""Helpers shared by kiln's Python tests (not a test module)."""

import math
import os

import numpy as np

SRC = os.environ.get("KILN_SRCDIR",
                     os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("KILN_BUILDDIR")

Y = np.array([28, 8, -3, 7, -1, 1, 18, 12], dtype=float)
SIGMA = np.array([15, 10, 16, 11, 9, 11, 10, 18], dtype=float)


def example(name):
    with open(os.path.join(SRC, "examples", name)) as f:
        return f.read()


def eight_schools_logp(mu, log_tau, theta_t):
    """examples/eight_schools.kg's density, written from its comment's
    formulas with numpy (not from kiln)."""
    def normal(x, m, s):
        return -0.5 * ((x - m) / s) ** 2 - np.log(s) - 0.5 * math.log(2 * math.pi)
    tau = math.exp(log_tau)
    theta = mu + tau * np.asarray(theta_t)
    half_cauchy = math.log(2) - math.log(math.pi) - math.log(5) \
        - math.log1p((tau / 5) ** 2)
    return (normal(mu, 0, 5) + half_cauchy + log_tau
            + np.sum(normal(np.asarray(theta_t), 0, 1))
            + np.sum(normal(Y, theta, SIGMA)))


def fd_grad(f, x, h=1e-6):
    """Central finite differences of scalar f at vector x."""
    x = np.asarray(x, dtype=float)
    g = np.empty_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        hi = h * max(1.0, abs(x[i]))
        e[i] = hi
        g[i] = (f(x + e) - f(x - e)) / (2 * hi)
    return g


def backends():
    """The backends this build has: interp, and tcc / llvm when their
    plugin was built (then a fallback to interp is a failure)."""
    out = ["interp"]
    for b in ("tcc", "llvm"):
        if BUILD and os.path.exists(os.path.join(BUILD, "backends", b,
                                                 ".libs", b + ".so")):
            out.append(b)
    return out
