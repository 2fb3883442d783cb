"""bridgestan_common.py — shared by tests/test_bridgestan.py and
tests/test_bridgestan_emcee.py: TAP output, making model libraries with
`kiln bridgestan`, and the eight schools log density computed without
kiln (from posteriordb's Stan program, examples/eight_schools_noncentered.kg).
"""
import math
import os
import subprocess
import sys

import numpy as np


class Tap:
    """TAP producer: ok(cond, what), diag(text), done() -> exit status."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, what):
        self.n += 1
        if not cond:
            self.failed += 1
        print("%sok %d - %s" % ("" if cond else "not ", self.n, what),
              flush=True)
        return cond

    def diag(self, text):
        for line in str(text).splitlines() or [""]:
            print("# " + line, flush=True)

    def close(self, got, want, rtol, atol, what):
        """ok when every |got - want| <= atol + rtol * |want|."""
        got = np.asarray(got, dtype=float)
        want = np.asarray(want, dtype=float)
        err = np.abs(got - want)
        bound = atol + rtol * np.abs(want)
        good = got.shape == want.shape and bool(np.all(err <= bound))
        if not self.ok(good, what):
            self.diag("got  %r" % (got,))
            self.diag("want %r" % (want,))
        return good

    def raises(self, fn, needles, what):
        """ok when fn() raises an exception whose text contains every
        string of needles."""
        try:
            fn()
        except Exception as e:  # noqa: BLE001 -- any exception is the point
            text = str(e)
            good = all(s in text for s in needles)
            self.ok(good, what)
            self.diag("message: %s" % text)
            if not good:
                self.diag("wanted: %r" % (needles,))
            return text
        self.ok(False, what + " (nothing raised)")
        return None

    def done(self):
        print("1..%d" % self.n, flush=True)
        return 1 if self.failed else 0


def make_library(kiln, model, out, *args):
    """kiln bridgestan MODEL -o OUT [ARGS]: the library's path; raises
    RuntimeError with the CLI's output when it fails."""
    r = subprocess.run([kiln, "bridgestan", model, "-o", out, *args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if r.returncode != 0:
        raise RuntimeError("kiln bridgestan %s failed: %s" % (model, r.stdout))
    return out


def paths(src):
    """The models and data of the tests."""
    ex = os.path.join(src, "examples")
    pdb = os.path.join(ex, "data", "posteriordb")
    return {
        "eight_kg": os.path.join(ex, "eight_schools_noncentered.kg"),
        "eight_json": os.path.join(pdb, "eight_schools.json"),
        "radon_kg": os.path.join(ex, "radon_variable_intercept_noncentered.kg"),
        "radon_json": os.path.join(pdb, "radon_mn.json"),
        "eight_ref": os.path.join(
            pdb, "eight_schools-eight_schools_noncentered.reference.json"),
    }


EIGHT_Y = np.array([28, 8, -3, 7, -1, 1, 18, 12], dtype=float)
EIGHT_SIGMA = np.array([15, 10, 16, 11, 9, 11, 10, 18], dtype=float)
LOG_2PI_2 = 0.5 * math.log(2 * math.pi)


def normal_lpdf(x, m, s):
    """Stan's normal_lpdf with its constants, summed."""
    x = np.asarray(x, dtype=float)
    z = (x - m) / s
    return float(np.sum(-0.5 * z * z - np.log(s) - LOG_2PI_2))


def eight_logp(u, jacobian=True):
    """The eight schools (non-centred) log density at unconstrained
    u = (theta_trans[8], mu, log tau), every constant kept; plus the
    log-Jacobian log tau = u[9] when jacobian."""
    tt, mu, tau = u[:8], u[8], math.exp(u[9])
    theta = tt * tau + mu
    lp = (normal_lpdf(tt, 0, 1) + normal_lpdf(EIGHT_Y, theta, EIGHT_SIGMA) +
          normal_lpdf(mu, 0, 5) +
          (-math.log(math.pi) - math.log(5) - math.log1p((tau / 5) ** 2)))
    return lp + (u[9] if jacobian else 0.0)


def fd_gradient(f, u, h=1e-6):
    """Central finite differences of f at u (step h * max(1, |u_i|))."""
    u = np.asarray(u, dtype=float)
    g = np.empty_like(u)
    for i in range(u.size):
        hi = h * max(1.0, abs(u[i]))
        up, dn = u.copy(), u.copy()
        up[i] += hi
        dn[i] -= hi
        g[i] = (f(up) - f(dn)) / (2 * hi)
    return g


def main_guard(run):
    """Run run() -> exit status, turning an unexpected exception into a
    failed test (and the plan) instead of a TAP stream cut short."""
    tap = Tap()
    try:
        run(tap)
    except Exception as e:  # noqa: BLE001
        import traceback
        tap.ok(False, "unexpected %s: %s" % (type(e).__name__, e))
        tap.diag(traceback.format_exc())
    sys.exit(tap.done())
