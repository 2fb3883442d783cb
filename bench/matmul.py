#!/usr/bin/python3
"""bench/matmul.py — batched matmul at attention shapes (issue 29), kiln
against numpy.matmul on the same OpenBLAS, one thread (make bench-matmul).

Usage: /usr/bin/python3 bench/matmul.py BUILDDIR [--reps N] [--backend B]

SmolLM2-135M's attention (9 query heads in 3 KV groups, head dim 64) as
the decoder writes it: q [T, 576] viewed as [3, 3, T, 64]
(reshape + transpose), the KV cache [t, 3, 64] viewed as [3, 1, 64, t]
and [3, 1, t, 64] (transpose + expand_dims), scores = q @ k and values =
p @ v, for prefill (T = t = 32, 256) and decode (T = 1, t = 256); plus a
plain f64 batch [16, 64, 64] @ [16, 64, 64].  Each figure is the median
of N calls (default 200) through the Python package (kiln) or one
np.matmul of the same views (numpy); both include Python's call overhead
(a few microseconds).  numpy is run on OpenBLAS's libblas.so.3
(LD_LIBRARY_PATH, when Debian's alternative points at the reference BLAS),
so both use one BLAS; the libraries mapped are printed.  Pin it yourself (taskset -c 1) on a quiet machine.
"""
import os
import sys
import time


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    build = os.path.abspath(args[0])
    reps, backend = 200, None
    if "--reps" in args:
        reps = int(args[args.index("--reps") + 1])
    if "--backend" in args:
        backend = args[args.index("--backend") + 1]
    os.environ.setdefault("KILN_LIBRARY", build + "/.libs/libkiln.so")
    os.environ.setdefault("KILN_PLUGIN_PATH", ":".join(
        build + "/backends/%s/.libs" % b for b in ("interp", "tcc", "llvm")))
    for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[v] = "1"
    # numpy links libblas.so.3, which Debian's alternatives may point at
    # the reference BLAS; kiln links OpenBLAS.  Same BLAS for both: put
    # OpenBLAS's libblas.so.3 first (once, by re-executing).
    ob = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
    if os.path.isdir(ob) and "KILN_BENCH_MATMUL_LD" not in os.environ:
        os.environ["KILN_BENCH_MATMUL_LD"] = "1"
        os.environ["LD_LIBRARY_PATH"] = ob + (
            ":" + os.environ["LD_LIBRARY_PATH"]
            if os.environ.get("LD_LIBRARY_PATH") else "")
        os.execv(sys.executable, [sys.executable] + sys.argv)
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, src + "/python")
    import numpy as np
    import kiln

    rng = np.random.default_rng(29)

    def median_us(fn):
        fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        ts.sort()
        return 1e6 * ts[len(ts) // 2]

    rows = []

    def attention(T, t):
        g = kiln.Graph()
        q = g.input("q", "f32", (T, 576))
        k = g.input("k", "f32", (t, 3, 64))
        v = g.input("v", "f32", (t, 3, 64))
        p = g.input("p", "f32", (3, 3, T, t))
        qh = g.op("transpose", g.op("reshape", q, shape=[T, 3, 3, 64]),
                  axes=[1, 2, 0, 3])
        kh = g.op("expand_dims", g.op("transpose", k, axes=[1, 2, 0]),
                  axis=1)
        vh = g.op("expand_dims", g.op("transpose", v, axes=[1, 0, 2]),
                  axis=1)
        g.output("s", g.op("matmul", qh, kh))
        g.output("o", g.op("matmul", p, vh))
        f = kiln.compile(g, backend=backend)
        Q = rng.standard_normal((T, 576)).astype(np.float32)
        K = rng.standard_normal((t, 3, 64)).astype(np.float32)
        V = rng.standard_normal((t, 3, 64)).astype(np.float32)
        P = rng.standard_normal((3, 3, T, t)).astype(np.float32)
        s, o = f(Q, K, V, P)
        qn = Q.reshape(T, 3, 3, 64).transpose(1, 2, 0, 3)
        kn = K.transpose(1, 2, 0)[:, None]
        vn = V.transpose(1, 0, 2)[:, None]
        err = max(float(np.abs(s - np.matmul(qn, kn)).max()),
                  float(np.abs(o - np.matmul(P, vn)).max()))
        tk = median_us(lambda: f(Q, K, V, P))
        tn = median_us(lambda: (np.matmul(qn, kn), np.matmul(P, vn)))
        rows.append(("attention T=%d t=%d: q@k + p@v (f32)" % (T, t),
                     tk, tn, err))

    for T, t in ((32, 32), (256, 256), (1, 256)):
        attention(T, t)
    g = kiln.Graph()
    a = g.input("a", "f64", (16, 64, 64))
    b = g.input("b", "f64", (16, 64, 64))
    g.output("c", g.op("matmul", a, b))
    f = kiln.compile(g, backend=backend)
    A = rng.standard_normal((16, 64, 64))
    B = rng.standard_normal((16, 64, 64))
    c = f(A, B)
    c = c[0] if isinstance(c, (list, tuple)) else c
    err = float(np.abs(c - np.matmul(A, B)).max())
    rows.append(("batch [16,64,64] @ [16,64,64] (f64)",
                 median_us(lambda: f(A, B)),
                 median_us(lambda: np.matmul(A, B)), err))
    np.matmul(np.ones((4, 4)), np.ones((4, 4)))
    with open("/proc/self/maps") as m:
        libs = sorted({ln.split()[-1] for ln in m if "blas" in ln.lower()})
    print("BLAS libraries mapped (numpy and kiln): " + ", ".join(libs))
    print("| case | kiln us | numpy us | kiln/numpy | max abs diff |")
    print("|---|---|---|---|---|")
    for name, tk, tn, err in rows:
        print("| %s | %.1f | %.1f | %.2f | %.2g |" % (name, tk, tn, tk / tn,
                                                      err))


if __name__ == "__main__":
    main()
