#!/usr/bin/python3
"""Cases for tests/test_elemwise.c: the elementwise ops of issue 25 at
many points, tails and edge values included, with reference values from
NumPy / scipy.special computed here at test time.  Output format: see
tests/lpdf_cases.py (plus "dtype NAME", the output dtype NumPy gives or
PyTensor's rule where kiln follows it); "SKIP reason" without scipy.

Tolerances (RTOL; a value passes when |kiln - ref| <= RTOL *
max(|ref|, scale)):
  - exact ops (floor, ceil, trunc, rounding, sign, mod, clip, isnan,
    isinf) and f64 log1mexp: 0 / 1e-15 (log1mexp: libm's log1p, expm1);
  - f32: 1.2e-7 (computed in double and rounded once: half an ulp, plus
    the reference's own rounding);
  - erfcx 1e-13: SciPy's erfcx(x < 0) = 2 exp(x*x) - erfcx(-x) rounds
    x*x, an error up to x^2 eps = 6e-14 at x = -24 that kiln (x^2 split
    exactly) does not make; measured against mpmath kiln is within 2e-16;
  - erfinv, erfcinv 1e-13 (measured 4e-16 for erfinv; erfcinv at q >=
    1e-300);
  - gammainc, gammaincc 2e-11 over a in [1e-3, 1e4]: kiln and SciPy
    mostly agree to ~1e-13, but SciPy's own error is up to 1.1e-11 (Q at
    a ~ 7000, against mpmath, where kiln's is 4e-14); values below 1e-280
    are compared absolutely (SciPy flushes some to 0);
  - betainc 5e-11: kiln's prefactor exp(a log x + b log1p(-x) - lbeta)
    and its 1 - I_{1-x}(b, a) branch lose up to ~1.3e-11 for b ~ 0.01,
    a ~ 150, x near 1 (mpmath), elsewhere ~1e-13.
  - i0e, i1e (issue 28) 2e-15: series and asymptotic expansion, both
    measured within 7e-16 of SciPy's Cephes values over 1e-300 .. 1e300.
"""
import sys

try:
    import numpy as np
    from scipy import special as sp
except ImportError as e:  # pragma: no cover
    print("SKIP scipy not available (%s)" % e)
    sys.exit(0)

out = []


def emit(label, op, rtol, args, ref, dtype=None, scale=None):
    out.append("case %s %s elem %r" % (label, op, rtol))
    for a in args:
        a = np.asarray(a)
        dt = {"f": "f64", "i": "i64", "b": "bool"}[a.dtype.kind]
        if a.dtype == np.float32:
            dt = "f32"
        if a.dtype == np.int32:
            dt = "i32"
        v = np.atleast_1d(a)
        rank = 0 if a.ndim == 0 else 1
        out.append("arg %s %d %d %s" % (dt, rank, v.size,
                                        " ".join(repr(float(x)) for x in v)))
    if dtype:
        out.append("dtype %s" % dtype)
    ref = np.atleast_1d(np.asarray(ref, dtype=float))
    out.append("ref %d %s" % (ref.size, " ".join(repr(float(x)) for x in ref)))
    scale = np.broadcast_to(np.asarray(0.0 if scale is None else scale,
                                       dtype=float), ref.shape)
    out.append("scale %d %s" % (scale.size,
                                " ".join(repr(float(x)) for x in scale)))


rng = np.random.default_rng(20251206)
f32 = np.float32
nan, inf = np.nan, np.inf
np.seterr(all="ignore")

# ---- log1mexp: PyTensor's definition (Maechler 2012) ----
x = np.concatenate([-10.0 ** np.linspace(-300, 2.85, 300),
                    [-0.6931471805599453, -0.6931471805599454, -0.0, 0.0,
                     1e-300, 1.0, -inf, inf, nan]])
ref = np.where(x < np.log(0.5), np.log1p(-np.exp(x)), np.log(-np.expm1(x)))
emit("log1mexp", "log1mexp", 1e-15, (x,), ref, "f64")
xs = x.astype(f32)
ref = np.where(xs < np.log(0.5), np.log1p(-np.exp(xs.astype(float))),
               np.log(-np.expm1(xs.astype(float)))).astype(f32)
emit("log1mexp(f32)", "log1mexp", 1.2e-7, (xs,), ref, "f32")
k = np.array([-3, -1, 0, 1], dtype=np.int64)
emit("log1mexp(i64)", "log1mexp", 1e-15, (k,),
     np.log1p(-np.exp(k.astype(float))), "f64")

# ---- isnan, isinf: bool; false for integers ----
x = np.array([nan, inf, -inf, 0.0, -0.0, 1.0, -1e308, 5e-324, -nan])
for op, fn in (("isnan", np.isnan), ("isinf", np.isinf)):
    emit(op, op, 0.0, (x,), fn(x), "bool")
    emit(op + "(f32)", op, 0.0, (x.astype(f32),), fn(x.astype(f32)), "bool")
    emit(op + "(i64)", op, 0.0, (np.array([0, 7, -9]),), [0, 0, 0], "bool")

# ---- rounding: floor ceil trunc round (half to even) and half away ----
x = np.concatenate([np.arange(-5, 5.5, 0.5), [0.49999999999999994,
                    -0.49999999999999994, 2.0 ** 52 + 1, 2.0 ** 52 - 0.5,
                    -(2.0 ** 52) + 0.5, 1e300, -1e300, 5e-324, -0.0, inf,
                    -inf, nan], rng.normal(0, 30, 100)])
t = np.trunc(x)
away = np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)
cases = (("floor", np.floor(x)), ("ceil", np.ceil(x)), ("trunc", t),
         ("round", np.round(x)), ("round_half_to_even", np.round(x)),
         ("round_half_away_from_zero", away))
for op, ref in cases:
    emit(op, op, 0.0, (x,), ref, "f64")
xs = x.astype(f32)
ts = np.trunc(xs)
aways = np.where(np.abs(xs - ts) >= 0.5, ts + np.sign(xs), ts)
for op, ref in (("floor", np.floor(xs)), ("ceil", np.ceil(xs)),
                ("round_half_to_even", np.round(xs)),
                ("round_half_away_from_zero", aways)):
    emit(op + "(f32)", op, 0.0, (xs,), ref, "f32")
k = np.array([-7, 0, 3], dtype=np.int64)
emit("floor(i64)", "floor", 0.0, (k,), np.floor(k), "f64")
emit("round(i32)", "round", 0.0, (k.astype(np.int32),), k, "f64")

# ---- sign: the input's dtype; NaN stays NaN ----
x = np.array([-2.5, -0.0, 0.0, 3.0, 1e-320, -inf, inf, nan])
emit("sign", "sign", 0.0, (x,), np.sign(x), "f64")
emit("sign(f32)", "sign", 0.0, (x.astype(f32),), np.sign(x.astype(f32)),
     "f32")
k = np.array([-9, 0, 4, -(2 ** 62)], dtype=np.int64)
emit("sign(i64)", "sign", 0.0, (k,), np.sign(k), "i64")
emit("sign(i32)", "sign", 0.0, (k[:3].astype(np.int32),),
     np.sign(k[:3]), "i32")

# ---- mod: NumPy's remainder, the sign of the divisor ----
a = np.array([5.0, -5.0, 5.0, -5.0, 0.0, -0.0, 3.5, -7.25, 1e300, -1e-300,
              1.0, -1.0, inf, 2.0, 7.5, 6.0, -6.0])
b = np.array([3.0, 3.0, -3.0, -3.0, 3.0, -3.0, 0.0, 2.0, 7.0, 5.0, inf,
              inf, 2.0, nan, 2.5, -3.0, 3.0])
a = np.concatenate([a, rng.normal(0, 100, 100)])
b = np.concatenate([b, rng.normal(0, 10, 100)])
emit("mod", "mod", 0.0, (a, b), np.mod(a, b), "f64")
emit("mod(f32)", "mod", 0.0, (a.astype(f32), b.astype(f32)),
     np.mod(a.astype(f32), b.astype(f32)), "f32")
ka = np.array([7, -7, 7, -7, 0, 5, -9, 2 ** 62, -(2 ** 63), 13])
kb = np.array([3, 3, -3, -3, 4, 0, -1, -5, -1, 1])
emit("mod(i64)", "mod", 0.0, (ka, kb), np.mod(ka, kb), "i64")
emit("mod(i32)", "mod", 0.0, (ka[:7].astype(np.int32),
                              kb[:7].astype(np.int32)),
     np.mod(ka[:7].astype(np.int32), kb[:7].astype(np.int32)), "i32")
emit("mod(i64,f64)", "mod", 0.0, (ka[:6], b[:6]),
     np.mod(ka[:6].astype(float), b[:6]), "f64")

# ---- clip(x, lo, hi): PyTensor's x < lo ? lo : x > hi ? hi : x ----
x = np.concatenate([np.linspace(-3, 3, 25), [nan, inf, -inf]])
emit("clip", "clip", 0.0, (x, -1.5, 2.0), np.clip(x, -1.5, 2.0), "f64")
lo = rng.normal(-1, 1, x.size)
hi = lo + rng.uniform(0, 2, x.size)
emit("clip(vectors)", "clip", 0.0, (x, lo, hi), np.clip(x, lo, hi), "f64")
k = np.arange(-5, 6)
emit("clip(i64)", "clip", 0.0, (k, np.int64(-2), np.int64(3)),
     np.clip(k, -2, 3), "i64")

# ---- erfcx, erfinv, erfcinv ----
x = np.concatenate([np.linspace(-26, 30, 561), 10.0 ** np.linspace(-300, 300, 121),
                    -(10.0 ** np.linspace(-300, 1.4, 61)), [0.0, inf, -inf, nan,
                                                           -27.0, 1e9]])
emit("erfcx", "erfcx", 1e-13, (x,), sp.erfcx(x), "f64")
xs = x[(x > -9) & (x < 1e30)].astype(f32)
emit("erfcx(f32)", "erfcx", 1.2e-7, (xs,),
     sp.erfcx(xs.astype(float)).astype(f32), "f32")
x = np.concatenate([np.linspace(-1, 1, 401), 1 - 10.0 ** np.linspace(-16, -0.3, 60),
                    -1 + 10.0 ** np.linspace(-16, -0.3, 60),
                    10.0 ** np.linspace(-300, -1, 60), [1.5, -1.0000001, nan]])
emit("erfinv", "erfinv", 1e-13, (x,), sp.erfinv(x), "f64")
emit("erfinv(f32)", "erfinv", 1.2e-7, (x.astype(f32),),
     sp.erfinv(x.astype(f32).astype(float)).astype(f32), "f32")
q = np.concatenate([np.linspace(0, 2, 401), 10.0 ** np.linspace(-300, -0.3, 100),
                    2 - 10.0 ** np.linspace(-16, -0.3, 60), [-0.1, 2.1, nan]])
emit("erfcinv", "erfcinv", 1e-13, (q,), sp.erfcinv(q), "f64")

# ---- incomplete gamma P, Q (SciPy's order: a, x) ----
n = 400
a = 10.0 ** rng.uniform(-3, 4, n)
x = a * 10.0 ** rng.uniform(-2, 1, n)
a2 = 10.0 ** rng.uniform(-3, 1, n)
x2 = 10.0 ** rng.uniform(-3, 2, n)
ea = np.array([0.0, 0.0, 1.0, 1.0, inf, inf, 2.0, -1.0, 1.0, nan, 3.0, 0.5])
ex = np.array([0.0, 2.0, 0.0, inf, 1.0, inf, -1.0, 1.0, nan, 1.0, 3.0, 1e-300])
for op, fn in (("gammainc", sp.gammainc), ("gammaincc", sp.gammaincc)):
    emit(op, op, 2e-11, (a, x), fn(a, x), "f64", 1e-280)
    emit(op + "(small_a)", op, 2e-11, (a2, x2), fn(a2, x2), "f64", 1e-280)
    emit(op + "(edges)", op, 1e-15, (ea, ex), fn(ea, ex), "f64")
    emit(op + "(f32)", op, 1.2e-7, (a2[:50].astype(f32), x2[:50].astype(f32)),
         fn(a2[:50].astype(f32).astype(float),
            x2[:50].astype(f32).astype(float)).astype(f32), "f32", 1e-30)
    emit(op + "(i64)", op, 1e-14, (np.array([1, 2, 5]), np.array([1, 3, 2])),
         fn([1.0, 2.0, 5.0], [1.0, 3.0, 2.0]), "f64")

# d/da P(a, x) (gammainc_da, the gradient of gammainc in a) against
# mpmath's numerical derivative of P (x < a) or -Q (the smaller one, so
# the difference keeps its digits); 1e-10
# covers mpmath's differencing, kiln measured within 3e-13
try:
    import mpmath as mp
    mp.mp.dps = 40
    m = 60
    a = 10.0 ** rng.uniform(-2, 3, m)
    x = a * 10.0 ** rng.uniform(-1.5, 0.7, m)
    ref = [float(mp.diff(lambda t: mp.gammainc(t, 0, xi, regularized=True),
                         ai)) if xi < ai else
           -float(mp.diff(lambda t: mp.gammainc(t, xi, mp.inf,
                                                 regularized=True), ai))
           for ai, xi in zip(a, x)]
    emit("gammainc_da", "gammainc_da", 1e-10, (a, x), ref, "f64", 1e-290)
except ImportError:
    pass

# ---- incomplete beta I_x(a, b) (SciPy's order: a, b, x) ----
a = 10.0 ** rng.uniform(-2, 3, n)
b = 10.0 ** rng.uniform(-2, 3, n)
x = rng.uniform(0, 1, n)
emit("betainc", "betainc", 5e-11, (a, b, x), sp.betainc(a, b, x), "f64",
     1e-280)
ea = np.array([1.0, 1.0, 2.0, 2.0, -1.0, 1.0, nan, 0.5, 3.0, 2.0])
eb = np.array([1.0, 1.0, 3.0, 3.0, 1.0, 2.0, 1.0, 0.5, 3.0, 5.0])
ex = np.array([0.0, 1.0, -0.1, 1.1, 0.5, 0.5, 0.5, 0.25, 0.5, nan])
emit("betainc(edges)", "betainc", 1e-14, (ea, eb, ex), sp.betainc(ea, eb, ex),
     "f64")
emit("betainc(f32)", "betainc", 1.2e-7,
     (a[:50].astype(f32), b[:50].astype(f32), x[:50].astype(f32)),
     sp.betainc(a[:50].astype(f32).astype(float),
                b[:50].astype(f32).astype(float),
                x[:50].astype(f32).astype(float)).astype(f32), "f32", 1e-30)

# d/da I_x(a, b), d/db I_x(a, b) (betainc_da, betainc_db: the gradient
# of betainc in a and b) against mpmath's numerical derivative of the
# lower tail I_x(a, b) or, where that is >= 1/2, of minus the upper tail
# I_{1-x}(b, a) (1 - x exact in mpmath), so the difference keeps its
# digits; a, b in [1e-3, 1e3], x in the bulk and within 1e-12 of 0 and 1.
# 1e-12: kiln measured within 2.6e-13 of mpmath over 640 such points
# (mostly eps times the exponent of the prefactor x^a (1-x)^b / B(a, b),
# the inputs' own conditioning); the f32 case rounds once (1.2e-7).
try:
    import mpmath as mp
    mp.mp.dps = 40

    def betainc_dab(ai, bi, xi):
        ai, bi, xi = mp.mpf(ai), mp.mpf(bi), mp.mpf(xi)
        if mp.betainc(ai, bi, 0, xi, regularized=True) < 0.5:
            return (mp.diff(lambda t: mp.betainc(t, bi, 0, xi,
                                                 regularized=True), ai),
                    mp.diff(lambda t: mp.betainc(ai, t, 0, xi,
                                                 regularized=True), bi))
        y = 1 - xi
        return (-mp.diff(lambda t: mp.betainc(bi, t, 0, y,
                                              regularized=True), ai),
                -mp.diff(lambda t: mp.betainc(t, ai, 0, y,
                                              regularized=True), bi))

    m = 60
    a = 10.0 ** rng.uniform(-3, 3, m)
    b = 10.0 ** rng.uniform(-3, 3, m)
    u = rng.uniform(0, 1, m)
    x = np.where(u < 0.2, 10.0 ** rng.uniform(-12, -1, m),
                 np.where(u > 0.8, 1 - 10.0 ** rng.uniform(-12, -1, m),
                          rng.uniform(0, 1, m)))
    # fixed hard points: a large and b small near x = 1 (psi(a+b) - psi(a)
    # ~ b/a against log x), tiny a and b, both large at the mean
    a = np.concatenate([a, [504.4, 45.72, 1e-3, 1e3, 1e3, 0.5, 2.0]])
    b = np.concatenate([b, [1.1e-3, 1.08e-3, 1e-3, 1e3, 1e-3, 1e3, 3.0]])
    x = np.concatenate([x, [1 - 3e-7, 0.995842, 0.5, 0.5, 0.999, 4e-4,
                            0.25]])
    ref = np.array([[float(v) for v in betainc_dab(*t)]
                    for t in zip(a, b, x)])
    emit("betainc_da", "betainc_da", 1e-12, (a, b, x), ref[:, 0], "f64",
         1e-290)
    emit("betainc_db", "betainc_db", 1e-12, (a, b, x), ref[:, 1], "f64",
         1e-290)
    a32, b32, x32 = a[:12].astype(f32), b[:12].astype(f32), x[:12].astype(f32)
    ref32 = np.array([[float(v) for v in betainc_dab(float(p), float(q),
                                                     float(r))]
                      for p, q, r in zip(a32, b32, x32)])
    emit("betainc_da(f32)", "betainc_da", 1.2e-7, (a32, b32, x32),
         ref32[:, 0].astype(f32), "f32", 1e-30)
    emit("betainc_db(f32)", "betainc_db", 1.2e-7, (a32, b32, x32),
         ref32[:, 1].astype(f32), "f32", 1e-30)
except ImportError:
    pass
# edges (as betainc: NaN for a, b <= 0, x outside [0, 1], NaN inputs;
# 0 at x = 0 and x = 1, where I_x is constant in a and b)
ea = np.array([1.0, 2.0, 0.5, -1.0, 0.0, 2.0, 2.0, 2.0, nan, 2.0, 2.0])
eb = np.array([1.0, 3.0, 0.5, 1.0, 2.0, 0.0, 3.0, 3.0, 2.0, nan, 3.0])
ex = np.array([0.0, 1.0, 0.0, 0.5, 0.5, 0.5, -0.1, 1.1, 0.5, 0.5, nan])
edge = np.where(ex == 0, 0.0, np.where(ex == 1, 0.0, nan))
emit("betainc_da(edges)", "betainc_da", 0, (ea, eb, ex), edge, "f64")
emit("betainc_db(edges)", "betainc_db", 0, (ea, eb, ex), edge, "f64")

# ---- i0e, i1e (issue 28): both sides of the series / asymptotic switch
# at |x| = 20, tiny and huge arguments, the odd i1e, the edges ----
x = np.concatenate([np.linspace(-40, 40, 321), [19.999999, 20.0, 20.000001],
                    10.0 ** np.linspace(-300, 300, 61),
                    -(10.0 ** np.linspace(-300, 5, 31)), [0.0, -0.0]])
emit("i0e", "i0e", 2e-15, (x,), sp.i0e(x), "f64")
emit("i1e", "i1e", 2e-15, (x,), sp.i1e(x), "f64", 1e-300)
emit("i0e(edges)", "i0e", 0, (np.array([inf, -inf, nan]),),
     np.array([0.0, 0.0, nan]), "f64")
emit("i1e(edges)", "i1e", 0, (np.array([inf, -inf, nan]),),
     np.array([0.0, 0.0, nan]), "f64")
xs = np.linspace(-30, 30, 61).astype(f32)
emit("i0e(f32)", "i0e", 1.2e-7, (xs,), sp.i0e(xs.astype(float)).astype(f32),
     "f32")
emit("i0e(i64)", "i0e", 2e-15, (np.arange(-3, 4),),
     sp.i0e(np.arange(-3, 4).astype(float)), "f64")

print("\n".join(out))
