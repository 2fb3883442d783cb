#!/usr/bin/python3
"""Cases for tests/test_layers_ops.c: issue 29's layer composites
(docs/ops.md "Layers (issue 29)") against NumPy and SciPy, each in f64
and f32 (the f32 reference is computed in f64 from the f32-rounded
inputs: kiln must compute in f32 and stay within f32 rounding).

References: scipy.special.softmax / log_softmax / erf; numpy.var,
argmax, argmin, tril, triu, repeat, tile, einsum, arange; layer_norm,
rms_norm, gelu (erf and tanh forms, Hendrycks and Gimpel 2016) and silu
written out from their definitions (PyTorch's documentation).

Output, one item per line:
  case LABEL RTOL
  graph                   then the lines of a .kg graph body, then
  ...
  end
  in NAME DTYPE RANK d1 .. dR v1 .. vN   the inputs, in declaration order
  out N v1 .. vN                         the outputs, in order (C order)
A value passes when |kiln - ref| <= RTOL * max(1, max|ref|) over the
output (NaN matches NaN).  "SKIP reason" alone when scipy is missing.
"""
import sys

try:
    import numpy as np
    from scipy import special as sp
except ImportError as e:  # pragma: no cover
    print("SKIP scipy not available (%s)" % e)
    sys.exit(0)

rng = np.random.default_rng(20261207)
out = []
TOL = {"f64": 1e-12, "f32": 3e-6}
NP = {"f64": np.float64, "f32": np.float32, "i64": np.int64}


def fmt(a):
    return " ".join(repr(float(x)) for x in np.ravel(a))


def kg_type(dt, a, dims=None):
    if np.ndim(a) == 0:
        return dt
    return "%s[%s]" % (dt, ", ".join(dims or [str(d) for d in np.shape(a)]))


def emit(label, dt, inputs, body, refs, rtol=None):
    """inputs: (name, dtype, array[, dims]); refs computed in f64."""
    out.append("case %s %r" % (label.replace(" ", "_"),
                               rtol if rtol else TOL.get(dt, 1e-12)))
    out.append("graph")
    for it in inputs:
        name, idt, a = it[:3]
        out.append("  input %s: %s" % (name, kg_type(idt, a,
                                                     it[3] if len(it) > 3
                                                     else None)))
    out.extend("  " + line for line in body)
    out.append("end")
    for it in inputs:
        name, idt, a = it[:3]
        a = np.asarray(a)
        out.append("in %s %s %d %s %s" % (name, idt, a.ndim,
                                          " ".join(str(d) for d in a.shape),
                                          fmt(a)))
    for r in refs:
        r = np.asarray(r, dtype=float)
        out.append("out %d %s" % (r.size, fmt(r)))


def rnd(dt, *shape, lo=-2.0, hi=2.0):
    """values rounded to dt, returned as f64 for the reference"""
    return rng.uniform(lo, hi, size=shape).astype(NP[dt]).astype(np.float64)


for dt in ("f64", "f32"):
    # softmax / log_softmax
    x = rnd(dt, 3, 5)
    for ax in (-1, 0):
        emit("softmax axis=%d %s" % (ax, dt), dt, [("x", dt, x)],
             ["output y = softmax(x, axis=%d)" % ax,
              "output z = log_softmax(x, axis=%d)" % ax],
             [sp.softmax(x, axis=ax), sp.log_softmax(x, axis=ax)])
    big = rnd(dt, 2, 4) * 500.0   # exp would overflow without the shift
    big = big.astype(NP[dt]).astype(np.float64)
    emit("softmax large %s" % dt, dt, [("x", dt, big)],
         ["output y = softmax(x)", "output z = log_softmax(x)"],
         [sp.softmax(big, axis=-1), sp.log_softmax(big, axis=-1)])
    inf = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    with np.errstate(invalid="ignore"):
        emit("softmax -inf %s" % dt, dt, [("x", dt, inf)],
             ["output y = softmax(x)", "output z = log_softmax(x)"],
             [sp.softmax(inf, axis=-1), sp.log_softmax(inf, axis=-1)])
    # a 3-D attention-score shape along the last axis
    s = rnd(dt, 2, 3, 4, 4)
    emit("softmax rank4 %s" % dt, dt, [("s", dt, s)],
         ["output y = softmax(s, axis=3)"], [sp.softmax(s, axis=3)])

    # layer_norm (biased variance), rms_norm
    x = rnd(dt, 4, 6)
    w = rnd(dt, 6)
    b = rnd(dt, 6)
    for eps, kw in ((1e-5, ""), (1e-3, ", eps=1e-3")):
        mu = x.mean(-1, keepdims=True)
        v = ((x - mu) ** 2).mean(-1, keepdims=True)
        emit("layer_norm eps=%g %s" % (eps, dt), dt,
             [("x", dt, x), ("w", dt, w), ("b", dt, b)],
             ["output y = layer_norm(x, w, b%s)" % kw],
             [(x - mu) / np.sqrt(v + eps) * w + b])
    x3 = rnd(dt, 2, 3, 8)
    w8 = rnd(dt, 8)
    for eps, kw in ((1e-6, ""), (1e-5, ", eps=1e-5")):
        ms = (x3 ** 2).mean(-1, keepdims=True)
        emit("rms_norm eps=%g %s" % (eps, dt), dt,
             [("x", dt, x3), ("w", dt, w8)],
             ["output y = rms_norm(x, w%s)" % kw],
             [x3 / np.sqrt(ms + eps) * w8])
    w3 = rnd(dt, 3, 1)
    ms = (x3 ** 2).mean(1, keepdims=True)
    emit("rms_norm axis=1 %s" % dt, dt, [("x", dt, x3), ("w", dt, w3)],
         ["output y = rms_norm(x, w, axis=1)"], [x3 / np.sqrt(ms + 1e-6) * w3])

    # activations
    x = rnd(dt, 7, lo=-5, hi=5)
    c = np.sqrt(2 / np.pi)
    emit("gelu silu %s" % dt, dt, [("x", dt, x)],
         ["output g = gelu(x)", "output t = gelu(x, approximate=\"tanh\")",
          "output s = silu(x)"],
         [0.5 * x * (1 + sp.erf(x / np.sqrt(2))),
          0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x ** 3))),
          x / (1 + np.exp(-x))])
    # large finite inputs stay finite: x * (0.5 (1 + ...)), not 0.5 x (...)
    xb = np.array([3e38, 2e38, -3e38, 1e30, -1e30]).astype(NP[dt]).astype(
        np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        tb = np.tanh(c * (xb + 0.044715 * xb ** 3))
    emit("gelu large %s" % dt, dt, [("x", dt, xb)],
         ["output g = gelu(x)", "output t = gelu(x, approximate=\"tanh\")"],
         [xb * (0.5 * (1 + sp.erf(xb / np.sqrt(2)))), xb * (0.5 * (1 + tb))])
    p = rnd(dt, 5, lo=0.1, hi=10)
    emit("rsqrt %s" % dt, dt, [("x", dt, p)], ["output y = rsqrt(x)"],
         [1 / np.sqrt(p)])

    # var
    x = rnd(dt, 3, 4, 5)
    emit("var %s" % dt, dt, [("x", dt, x)],
         ["output a = var(x)", "output b = var(x, axis=0)",
          "output c = var(x, axis=[0, 2], ddof=1)",
          "output d = var(x, axis=-1, keepdims=true)"],
         [np.var(x), np.var(x, axis=0), np.var(x, axis=(0, 2), ddof=1),
          np.var(x, axis=-1, keepdims=True)])

    # argmax / argmin: ties go to the first index
    x = rng.integers(-2, 3, size=(4, 5)).astype(float)
    emit("argmax argmin ties %s" % dt, dt, [("x", dt, x)],
         ["output a = argmax(x)", "output b = argmin(x, axis=0)",
          "output c = argmax(x, axis=0)"],
         [np.argmax(x, -1), np.argmin(x, 0), np.argmax(x, 0)])
    xn = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, -1.0]])
    emit("argmax nan %s" % dt, dt, [("x", dt, xn)],
         ["output a = argmax(x)", "output b = argmin(x)"],
         [np.argmax(xn, -1), np.argmin(xn, -1)])

    # tril / triu with k, batched
    a = rnd(dt, 2, 3, 4)
    for k in (-1, 0, 1, 2):
        emit("tril triu k=%d %s" % (k, dt), dt, [("a", dt, a)],
             ["output l = tril(a, k=%d)" % k, "output u = triu(a, k=%d)" % k],
             [np.tril(a, k), np.triu(a, k)])

    # repeat / tile
    x = rnd(dt, 2, 3)
    emit("repeat tile %s" % dt, dt, [("x", dt, x)],
         ["output a = repeat(x, repeats=3, axis=1)",
          "output b = repeat(x, repeats=2)",
          "output c = repeat(x, repeats=2, axis=-2)",
          "output d = tile(x, reps=[2, 1, 3])",
          "output e = tile(x, reps=[2])"],
         [np.repeat(x, 3, axis=1), np.repeat(x, 2), np.repeat(x, 2, axis=-2),
          np.tile(x, (2, 1, 3)), np.tile(x, 2)])
    # grouped KV heads: [b, kvh, t, d] repeated along the head axis
    kv = rnd(dt, 1, 2, 3, 4)
    emit("repeat kv heads %s" % dt, dt, [("k", dt, kv)],
         ["output y = repeat(k, repeats=3, axis=1)"], [np.repeat(kv, 3, 1)])

    # einsum
    for spec, sa, sb in (("ij,jk->ik", (3, 4), (4, 5)),
                         ("ij,jk", (3, 4), (4, 2)),
                         ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
                         ("bhqd,bhkd->bhqk", (1, 2, 3, 4), (1, 2, 5, 4)),
                         ("bhqk,bhkd->bhqd", (1, 2, 3, 5), (1, 2, 5, 4)),
                         ("bhqd,bkd->bhqk", (2, 3, 2, 4), (2, 5, 4)),
                         ("i,j->ij", (3,), (4,)),
                         ("ij,ij->", (3, 4), (3, 4)),
                         ("abc,cd->abd", (2, 3, 4), (4, 5)),
                         ("ijk,jl->li", (3, 4, 2), (4, 5)),
                         ("qd,kd->kq", (3, 4), (5, 4))):
        a = rnd(dt, *sa)
        b = rnd(dt, *sb)
        emit("einsum %s %s" % (spec.replace(",", "_").replace(">", ""), dt),
             dt, [("a", dt, a), ("b", dt, b)],
             ["output y = einsum(a, b, spec=\"%s\")" % spec],
             [np.einsum(spec, a, b)], rtol=TOL[dt] * 4)

# arange: literal n, a start input, a symbolic length
emit("arange", "i64", [("s", "i64", np.array(3))],
     ["output a = arange(5)", "output b = arange(s, 4)",
      "output c = arange(0)"],
     [np.arange(5), 3 + np.arange(4), np.arange(0)], rtol=0)
x = rnd("f64", 6)
emit("arange symbolic", "f64", [("x", "f64", x, ["T"]),
                                ("p", "i64", np.array(7))],
     ["output a = add(x, cast(arange(shape=[T]), dtype=f64))",
      "output b = arange(p, shape=[T])"],
     [x + np.arange(6), 7 + np.arange(6)], rtol=0)

print("\n".join(out))
