#!/usr/bin/python3
"""bench/elementwise.py — f32 and f64 elementwise transcendentals per backend
against NumPy (issue 29: softmax exp, SiLU sigmoid, GELU erf/tanh, norms).

Usage: /usr/bin/python3 bench/elementwise.py BUILDDIR [--n N] [--repeat R]
       [--backends interp,tcc,llvm]

One graph per (function, dtype): y = f(x) over x of N elements (default
393,216 = 256 x 1536, an MLP activation of SmolLM2-135M at 256 tokens),
compiled with tiers off; the best of R calls (default 30) in ms, after
two warm-up calls (the minimum: the least disturbed by other load).  NumPy is the same function on the same array (sigmoid
= 1/(1+exp(-x)), erf from scipy.special).  Wall-clock and noisy on a
shared machine: pin it (`taskset -c 1`) and run it on a quiet one for the
record.
"""
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    n, repeat = 393216, 30
    if "--n" in sys.argv:
        n = int(sys.argv[sys.argv.index("--n") + 1])
    if "--repeat" in sys.argv:
        repeat = int(sys.argv[sys.argv.index("--repeat") + 1])
    backends = ["interp", "tcc", "llvm"]
    if "--backends" in sys.argv:
        backends = sys.argv[sys.argv.index("--backends") + 1].split(",")
    os.environ.setdefault("KILN_LIBRARY", os.path.join(build, ".libs", "libkiln.so"))
    os.environ.setdefault("KILN_PLUGIN_PATH", ":".join(
        os.path.join(build, "backends", b, ".libs") for b in ("interp", "tcc", "llvm")))
    sys.path.insert(0, os.path.join(HERE, "python"))
    import numpy as np
    import kiln
    try:
        from scipy.special import erf as np_erf
    except ImportError:
        np_erf = None
    refs = {
        "exp": np.exp,
        "log": np.log,
        "tanh": np.tanh,
        "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "erf": np_erf,
        "sqrt": np.sqrt,
    }
    have = []
    for b in backends:
        try:
            g = kiln.Graph("probe")
            x = g.input("x", "f64", (2,))
            g.output("y", g.op("exp", x))
            kiln.compile(g, backend=b, tiers=False)
            have.append(b)
        except kiln.KilnError:
            print("# backend %s: not available" % b)

    def timeit(fn):
        fn()
        fn()
        ts = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return min(ts) * 1e3

    rng = np.random.default_rng(29)
    cache = tempfile.mkdtemp(prefix="kiln-ew-")
    print("n = %d elements, best of %d calls, ms (noisy unless the machine is quiet)" % (n, repeat))
    print("| function | dtype | " + " | ".join(have) + " | numpy |")
    print("|---|---|" + "---|" * (len(have) + 1))
    for name, ref in refs.items():
        for dt in ("f32", "f64"):
            npdt = np.float32 if dt == "f32" else np.float64
            if name in ("log", "sqrt"):
                a = rng.uniform(0.01, 10, n).astype(npdt)
            else:
                a = rng.normal(0, 3, n).astype(npdt)
            row = []
            for b in have:
                g = kiln.Graph("ew")
                x = g.input("x", dt, (n,))
                g.output("y", g.op(name, x))
                f = kiln.compile(g, backend=b, tiers=False, cache=cache)
                row.append("%.3f" % timeit(lambda: f(a)))
            row.append("%.3f" % timeit(lambda: ref(a)) if ref else "-")
            print("| %s | %s | %s |" % (name, dt, " | ".join(row)))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
