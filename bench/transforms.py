#!/usr/bin/python3
"""bench/transforms.py — what Stan's constraining transforms cost per log
density + gradient call (issue 28; core/ir/param.c).

Usage: /usr/bin/python3 bench/transforms.py BUILDDIR [--repeat N]

For each transform at one size, a model whose density is sum(w * x) over
the constrained value x, through kiln.Model on llvm (tiers off): the
median time of one log_density_gradient call, against the same model
with a plain (unconstrained) parameter of the constrained size, and the
kernels the density has.  Prints a markdown table.  Wall-clock and noisy
on a shared machine; run it on a quiet one for the record.
"""
import os
import statistics
import sys
import time

import numpy as np

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("KILN_LIBRARY", os.path.join(BUILD, ".libs",
                                                   "libkiln.so"))
sys.path.insert(0, os.path.join(SRC, "python"))
import kiln  # noqa: E402

REPEAT = int(sys.argv[sys.argv.index("--repeat") + 1]) \
    if "--repeat" in sys.argv else 20000
CASES = [("simplex", [100]), ("ordered", [100]), ("unit_vector", [100]),
         ("sum_to_zero", [100]), ("simplex", [20, 20]),
         ("cholesky_factor_corr", [10, 10]), ("corr_matrix", [10, 10]),
         ("cov_matrix", [10, 10])]


def src(shape, tr):
    dims = ", ".join(map(str, shape))
    return ("kiln 1\ngraph b\n  param x: f64[%s]%s\n  shared w: f64[%s]\n"
            "  output logp = sum(mul(w, x))\nend\n"
            % (dims, " " + tr if tr else "", dims))


def per_call(m, u):
    for _ in range(200):
        m.log_density_gradient(u)
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(REPEAT // 5):
            m.log_density_gradient(u)
        ts.append((time.perf_counter() - t0) / (REPEAT // 5))
    return statistics.median(ts) * 1e9


def main():
    print("| transform | shape | unconstrained | ns per call | plain param "
          "ns | kernels |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(1)
    for tr, shape in CASES:
        w = {"w": rng.normal(size=shape)}
        m = kiln.Model(src(shape, tr), data=w, backend="llvm", tiers="off")
        p = kiln.Model(src(shape, None), data=w, backend="llvm", tiers="off")
        u = rng.normal(size=m.n_unc) * 0.5
        t = per_call(m, u)
        tp = per_call(p, rng.normal(size=p.n_unc))
        k = m.tier_count()[1]
        print("| %s | %s | %d | %.0f | %.0f | %d |"
              % (tr, "x".join(map(str, shape)), m.n_unc, t, tp, k))


main()
