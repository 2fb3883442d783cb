#!/usr/bin/env python3
"""Reference solutions for tests/test_ode.c, computed by SciPy at test time.

For each case: the solution of y' = f(t, y, theta), y(t0) = y0 at the
output times by scipy.integrate.solve_ivp (rtol 1e-11, the method named:
DOP853 for the non-stiff systems, LSODA for Robertson's stiff one), and
its sensitivities d y(ts) / d (y0, theta) from the same solve of the
forward sensitivity system s_k' = J_y s_k + df/dz_k (analytic Jacobians
written below), s_k(t0) = e_k for the y0 columns, 0 for theta's.  Printed as

    case NAME SYSTEM n p nts
    t0 T
    y0 v...
    theta v...
    ts v...
    y v...          (nts*n, row-major [nts, n])
    sens v...       (nts*n*(n+p), row-major [nts, n, n+p])

The systems (the C test writes the same right-hand sides):
  decay      y' = -theta0 * y                         (n 1, p 1)
  lv         Lotka-Volterra, posteriordb's lotka_volterra.stan:
             u' = (a - b v) u, v' = (-c + d u) v      (n 2, p 4)
  robertson  Robertson's stiff chemical kinetics (Hairer & Wanner,
             "Solving ODEs II", sec. IV.1):
             y1' = -k1 y1 + k2 y2 y3, y2' = k1 y1 - k2 y2 y3 - k3 y2^2,
             y3' = k3 y2^2                            (n 3, p 3)
"""
import sys

RTOL = 1e-11

try:
    import numpy as np
    from scipy.integrate import solve_ivp
except ImportError:
    print("SKIP no scipy")
    sys.exit(0)


def decay(t, y, th):
    return [-th[0] * y[0]]


def lv(t, y, th):
    u, v = y
    a, b, c, d = th
    return [(a - b * v) * u, (-c + d * u) * v]


def robertson(t, y, th):
    k1, k2, k3 = th
    y1, y2, y3 = y
    return [-k1 * y1 + k2 * y2 * y3,
            k1 * y1 - k2 * y2 * y3 - k3 * y2 * y2,
            k3 * y2 * y2]


def decay_jac(t, y, th):
    return [[-th[0], -y[0]]]


def lv_jac(t, y, th):
    u, v = y
    a, b, c, d = th
    return [[a - b * v, -b * u, u, -u * v, 0.0, 0.0],
            [d * v, -c + d * u, 0.0, 0.0, -v, u * v]]


def robertson_jac(t, y, th):
    k1, k2, k3 = th
    y1, y2, y3 = y
    return [[-k1, k2 * y3, k2 * y2, -y1, y2 * y3, 0.0],
            [k1, -k2 * y3 - 2 * k3 * y2, -k2 * y2, y1, -y2 * y3, -y2 * y2],
            [0.0, 2 * k3 * y2, 0.0, 0.0, 0.0, y2 * y2]]


SYSTEMS = {"decay": (decay, decay_jac), "lv": (lv, lv_jac),
           "robertson": (robertson, robertson_jac)}

CASES = [
    ("decay", "decay", 0.0, [2.0], [0.7], [0.5, 1.0, 1.0, 2.0, 5.0],
     "DOP853"),
    ("lv", "lv", 0.0, [33.956, 5.933], [0.55, 0.028, 0.80, 0.024],
     [float(i) for i in range(1, 21)], "DOP853"),
    ("robertson", "robertson", 0.0, [1.0, 0.0, 0.0], [0.04, 1e4, 3e7],
     [0.4, 4.0, 40.0, 400.0, 4e3, 4e4], "LSODA"),
]


def solve(system, method, t0, y0, th, ts):
    """[nts, n] states and [nts, n, n+p] sensitivities."""
    f, jac = SYSTEMS[system]
    n, p = len(y0), len(th)
    m = n + p

    def aug(t, z):
        y = z[:n]
        S = z[n:].reshape(n, m)           # S[j, k] = d y_j / d z_k
        J = np.array(jac(t, y, th))       # [n, m]
        dS = J[:, :n] @ S
        dS[:, n:] += J[:, n:]
        return np.concatenate([f(t, y, th), dS.ravel()])

    S0 = np.zeros((n, m))
    S0[:, :n] = np.eye(n)
    tu, back = np.unique(ts, return_inverse=True)  # t_eval: no repeats
    r = solve_ivp(aug, (t0, ts[-1]), np.concatenate([y0, S0.ravel()]),
                  method=method, t_eval=tu, rtol=RTOL,
                  atol=1e-20 if system == "robertson" else 1e-14)
    if not r.success:
        sys.exit("ode_cases.py: solve_ivp failed: " + r.message)
    z = r.y.T[back]
    return z[:, :n], z[:, n:].reshape(len(ts), n, m)


def main():
    for name, system, t0, y0, th, ts, method in CASES:
        n, p = len(y0), len(th)
        y, sens = solve(system, method, t0, y0, th, ts)
        print("case", name, system, n, p, len(ts))
        print("t0", repr(t0))
        for key, v in (("y0", y0), ("theta", th), ("ts", ts),
                       ("y", y.ravel()), ("sens", sens.ravel())):
            print(key, " ".join(repr(float(x)) for x in v))


if __name__ == "__main__":
    main()
