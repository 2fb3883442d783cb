#!/usr/bin/python3
"""Cases for tests/test_matmul.c: batched matmul (issue 29; docs/ops.md
"Linear algebra") against numpy.matmul, in f64 and f32, on seeded random
operands: batch axes broadcast by NumPy's rules, 1-D operands, rank mixes,
grouped-query attention shapes ([3,3,T,64] @ [3,1,64,t], with t = 0),
operands that are views (transposes of the last two axes, slices with
steps, reshape + transpose + expand_dims of a KV cache), m = 1, n = 1 and
k = 0.

Output, one item per line:
  case LABEL RTOL
  graph                   then the lines of a .kg graph body (inputs of
  ...                     static shape and outputs, in order), then
  end
  in NAME DTYPE RANK d1 .. dR v1 .. vN   the inputs, in declaration order
                                         (f32 values are exactly f32)
  out N v1 .. vN                         the outputs, in order (C order)
A value passes when |kiln - ref| <= RTOL * max(1, max|ref|) over the
output.  The f32 references are NumPy's f64 product of the f32 inputs.
"SKIP reason" alone when NumPy is missing.
"""
import sys

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print("SKIP numpy not available (%s)" % e)
    sys.exit(0)

rng = np.random.default_rng(20261206)
out = []


def fmt(a):
    return " ".join(repr(float(x)) for x in np.ravel(a))


def emit(label, dt, inputs, body, refs):
    rtol = 1e-12 if dt == "f64" else 2e-6
    out.append("case %s_%s %r" % (label, dt, rtol))
    out.append("graph")
    for name, a in inputs:
        out.append("  input %s: %s[%s]" % (name, dt, ", ".join(
            str(d) for d in a.shape)))
    out.extend("  " + line for line in body)
    out.append("end")
    for name, a in inputs:
        out.append("in %s %s %d %s %s" % (name, dt, a.ndim, " ".join(
            str(d) for d in a.shape), fmt(a)))
    for r in refs:
        out.append("out %d %s" % (np.size(r), fmt(r)))


def rand(dt, *shape):
    a = rng.standard_normal(shape)
    return a.astype(np.float32).astype(np.float64) if dt == "f32" else a


# (label, shapes of a and b): output = matmul(a, b)
PLAIN = [
    ("batch", (2, 3, 4), (2, 4, 5)),
    ("broadcast", (1, 3, 2, 4), (4, 1, 4, 5)),
    ("gqa", (3, 3, 5, 64), (3, 1, 64, 7)),
    ("gqa_t0", (3, 3, 5, 64), (3, 1, 64, 0)),
    ("vec_a", (4,), (3, 4, 2)),
    ("vec_b", (2, 3, 4), (4,)),
    ("rank3_by_2", (3, 2, 4), (4, 5)),
    ("rank2_by_3", (4, 5), (3, 5, 2)),
    ("rank5", (2, 1, 2, 3, 4), (3, 1, 4, 2)),
    ("m1", (3, 1, 64), (3, 64, 5)),
    ("n1", (3, 6, 64), (3, 64, 1)),
    ("k0", (2, 3, 0), (2, 0, 4)),
    ("batch0", (0, 3, 4), (1, 4, 5)),
    ("fold", (2, 3, 4, 5), (2, 1, 5, 6)),
]

for dt in ("f64", "f32"):
    for label, sa, sb in PLAIN:
        a, b = rand(dt, *sa), rand(dt, *sb)
        emit(label, dt, [("a", a), ("b", b)],
             ["output c = matmul(a, b)"], [np.matmul(a, b)])
    # views: transposes of the last two axes, read in place
    a, b = rand(dt, 2, 4, 3), rand(dt, 2, 5, 4)
    emit("transposed", dt, [("a", a), ("b", b)],
         ["output c = matmul(transpose(a, axes=[0, 2, 1]), "
          "transpose(b, axes=[0, 2, 1]))"],
         [np.matmul(a.transpose(0, 2, 1), b.transpose(0, 2, 1))])
    # a 2-D transpose against a batch (a weight read transposed)
    a, w = rand(dt, 3, 6, 4), rand(dt, 5, 4)
    emit("weight_T", dt, [("a", a), ("w", w)],
         ["output c = matmul(a, transpose(w))"], [np.matmul(a, w.T)])
    # slices: a step on the rows, a reversed batch, a step on the last
    # axis (no unit stride: packed)
    a, b = rand(dt, 2, 6, 8), rand(dt, 3, 4, 5)
    emit("sliced", dt, [("a", a), ("b", b)],
         ["output c = matmul(a[:, 1:6:2, ::2], b[::-1][1:])",
          "output d = matmul(b[:2, :, 1:], a[:, :4, :3])"],
         [np.matmul(a[:, 1:6:2, ::2], b[::-1][1:]),
          np.matmul(b[:2, :, 1:], a[:, :4, :3])])
    # attention with grouped queries: q [T, 576] as [KVH=3, G=3, T, 64],
    # a KV cache [t, 3, 64] read in place through transpose + expand_dims
    for t in (6, 0):
        q, k, v = rand(dt, 4, 576), rand(dt, t, 3, 64), rand(dt, t, 3, 64)
        qh = q.reshape(4, 3, 3, 64).transpose(1, 2, 0, 3)
        kh = k.transpose(1, 2, 0)[:, None]
        vh = v.transpose(1, 0, 2)[:, None]
        s = np.matmul(qh, kh)
        emit("attention_t%d" % t, dt, [("q", q), ("k", k), ("v", v)],
             ["qh = transpose(reshape(q, shape=[4, 3, 3, 64]), "
              "axes=[1, 2, 0, 3])",
              "kh = expand_dims(transpose(k, axes=[1, 2, 0]), axis=1)",
              "vh = expand_dims(transpose(v, axes=[1, 0, 2]), axis=1)",
              "output s = matmul(qh, kh)",
              "output o = matmul(s, vh)"],
             [s, np.matmul(s, vh)])

print("\n".join(out))
