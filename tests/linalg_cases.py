#!/usr/bin/python3
"""Cases for tests/test_linalg.c: kiln's linear-algebra ops and the
densities built on them (docs/ops.md "Linear algebra") against NumPy,
scipy.linalg and scipy.stats.multivariate_normal, on seeded random
symmetric positive-definite matrices of size n = 1, 2, 7, 64 and batched;
det / sign_det against numpy.linalg.det / slogdet, batched matmul against
numpy.matmul.

Output, one item per line:
  case LABEL RTOL
  graph                   then the lines of a .kg graph body (inputs of
  ...                     static shape and outputs, in order), then
  end
  in NAME RANK d1 .. dR v1 .. vN     the inputs, in declaration order
  out N v1 .. vN                     the outputs, in order (C order)
A value passes when |kiln - ref| <= RTOL * max(1, max|ref|) over the
output.  "SKIP reason" alone when scipy is missing.

lkj_corr_cholesky_lpdf's reference is Stan 2.21's formula written out
here (stan/math/prim/mat/prob/lkj_corr_cholesky_lpdf.hpp and
do_lkj_constant in lkj_corr_lpdf.hpp; Lewandowski, Kurowicka and Joe
2009), with math.lgamma; gp_exp_quad_cov's is its definition in the Stan
Functions Reference.
"""
import math
import sys

try:
    import numpy as np
    from scipy import linalg as sl
    from scipy import stats as st
except ImportError as e:  # pragma: no cover
    print("SKIP scipy not available (%s)" % e)
    sys.exit(0)

rng = np.random.default_rng(20261206)
out = []


def fmt(a):
    return " ".join(repr(float(x)) for x in np.ravel(a))


def shape_kg(a):
    return "f64" if np.ndim(a) == 0 else "f64[%s]" % ", ".join(
        str(d) for d in np.shape(a))


def emit(label, rtol, inputs, body, refs):
    out.append("case %s %r" % (label, rtol))
    out.append("graph")
    for name, a in inputs:
        out.append("  input %s: %s" % (name, shape_kg(a)))
    out.extend("  " + line for line in body)
    out.append("end")
    for name, a in inputs:
        a = np.asarray(a, dtype=float)
        out.append("in %s %d %s %s" % (name, a.ndim,
                                       " ".join(str(d) for d in a.shape),
                                       fmt(a)))
    for r in refs:
        r = np.asarray(r, dtype=float)
        out.append("out %d %s" % (r.size, fmt(r)))


def spd(n, batch=()):
    m = rng.standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def tri_solve(a, b, lower, trans):
    """scipy.linalg.solve_triangular over leading batch axes."""
    if a.ndim == 2:
        return sl.solve_triangular(a, b, lower=lower, trans=trans)
    return np.stack([tri_solve(a[i], b[i], lower, trans)
                     for i in range(a.shape[0])])


OPS = [
    "output l = cholesky(a)",
    "output x = solve_triangular(l, b, lower=true)",
    "output xt = solve_triangular(l, v, lower=true, trans=true)",
    "output xu = solve_triangular(triu(a), b)",
    "output xs = solve(a, b)",
    "output ai = inverse(a)",
    "output ld = log_det(a)",
    "output d = diag(v)",
    "output dg = diagonal(a)",
    "output tl = tril(a)",
    "output tr = trace(a)",
]


def op_refs(a, b, v):
    lo = np.linalg.cholesky(a)
    return [lo, tri_solve(lo, b, True, 0),
            tri_solve(lo, v[..., None], True, 1)[..., 0],
            tri_solve(np.triu(a), b, False, 0), np.linalg.solve(a, b),
            np.linalg.inv(a), np.linalg.slogdet(a)[1],
            v[..., :, None] * np.eye(v.shape[-1]),
            np.diagonal(a, axis1=-2, axis2=-1), np.tril(a),
            np.trace(a, axis1=-2, axis2=-1)]


for n in (1, 2, 7, 64):
    a, b, v = spd(n), rng.standard_normal((n, 3)), rng.standard_normal(n)
    emit("ops_n%d" % n, 1e-9, [("a", a), ("b", b), ("v", v)], OPS,
         op_refs(a, b, v))
for batch in ((3,), (2, 2)):
    a = spd(4, batch)
    b = rng.standard_normal(batch + (4, 2))
    v = rng.standard_normal(batch + (4,))
    emit("ops_batch%s" % "x".join(map(str, batch)), 1e-10,
         [("a", a), ("b", b), ("v", v)], OPS, op_refs(a, b, v))

# a non-square tril / diagonal, outer
m = rng.standard_normal((3, 5))
p, q = rng.standard_normal(3), rng.standard_normal(4)
emit("rect", 1e-14, [("m", m), ("p", p), ("q", q)],
     ["output t = tril(m)", "output u = triu(m)", "output dg = diagonal(m)",
      "output o = outer(p, q)"],
     [np.tril(m), np.triu(m), np.diagonal(m), np.outer(p, q)])

# densities
for n in (1, 3, 7):
    s = spd(n)
    lo = np.linalg.cholesky(s)
    mu = rng.standard_normal(n)
    y = rng.standard_normal(n)
    ys = rng.standard_normal((5, n))
    mvn = st.multivariate_normal(mu, s)
    emit("mvn_n%d" % n, 1e-11,
         [("y", y), ("ys", ys), ("mu", mu), ("l", lo), ("s", s)],
         ["output c1 = multi_normal_cholesky_lpdf(y, mu, l)",
          "output c5 = multi_normal_cholesky_lpdf(ys, mu, l)",
          "output m1 = multi_normal_lpdf(y, mu, s)",
          "output m5 = multi_normal_lpdf(ys, mu, s)"],
         [mvn.logpdf(y), mvn.logpdf(ys).sum(), mvn.logpdf(y),
          mvn.logpdf(ys).sum()])


def do_lkj_constant(eta, k):
    km1 = k - 1
    if eta == 1.0:
        c = -sum(math.lgamma(2.0 * i) for i in range(1, km1 // 2 + 1))
        if k % 2 == 1:
            c -= (0.25 * (k * k - 1) * math.log(math.pi)
                  - 0.25 * km1 * km1 * math.log(2)
                  - km1 * math.lgamma(0.5 * (k + 1)))
        else:
            c -= (0.25 * k * (k - 2) * math.log(math.pi)
                  + 0.25 * (3 * k * k - 4 * k) * math.log(2)
                  + k * math.lgamma(0.5 * k) - km1 * math.lgamma(k))
        return c
    c = km1 * math.lgamma(eta + 0.5 * km1)
    for i in range(1, km1 + 1):
        c -= 0.5 * i * math.log(math.pi) + math.lgamma(eta + 0.5 * (km1 - i))
    return c


def lkj_chol(lo, eta):
    k = lo.shape[0]
    lp = do_lkj_constant(eta, k)
    ld = np.log(np.diagonal(lo)[1:])
    vals = np.array([(k - 1 - i - 1) * ld[i] for i in range(k - 1)])
    return lp + np.sum(vals + (2.0 * eta - 2.0) * ld)


for k in (1, 2, 3, 4, 6):
    z = rng.standard_normal((k, k))
    c = z @ z.T + k * np.eye(k)
    dinv = 1 / np.sqrt(np.diag(c))
    lo = np.linalg.cholesky(c * dinv[:, None] * dinv[None, :])
    for eta in (1.0, 0.7, 2.5):
        emit("lkj_k%d_eta%g" % (k, eta), 1e-12, [("l", lo), ("eta", eta)],
             ["output c = lkj_corr_cholesky_lpdf(l, eta)"],
             [lkj_chol(lo, eta)])

for x in (rng.standard_normal(6), rng.standard_normal((5, 2))):
    alpha, rho = 1.3, 0.8
    pts = x if x.ndim == 2 else x[:, None]
    d2 = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
    emit("gp_rank%d" % x.ndim, 1e-14,
         [("x", x), ("alpha", alpha), ("rho", rho)],
         ["output k = gp_exp_quad_cov(x, alpha, rho)"],
         [alpha ** 2 * np.exp(-d2 / (2 * rho ** 2))])

# det and sign_det (issue 28, second half) against numpy.linalg.det and
# slogdet's sign: nonsymmetric matrices (negative determinants), an
# exactly singular one (det 0, sign 0), n = 1, 7, 64, batches (3) and (2, 2)
for n in (1, 7, 64):
    a = rng.standard_normal((n, n)) + (2.0 if n == 64 else 0.0) * np.eye(n)
    if n == 1:
        a = -a if a[0, 0] > 0 else a
    emit("det_n%d" % n, 1e-11, [("a", a)],
         ["output d = det(a)", "output s = sign_det(a)",
          "output l = log_det(a)"],
         [np.linalg.det(a), np.linalg.slogdet(a)[0],
          np.linalg.slogdet(a)[1]])
sing = np.array([[1.0, 2, 3], [2, 4, 6], [0, 1, 1]])
b3 = np.stack([sing, rng.standard_normal((3, 3)), -np.eye(3)])
b22 = rng.standard_normal((2, 2, 4, 4))
for label, a in (("det_batch3", b3), ("det_batch2x2", b22)):
    emit(label, 1e-12, [("a", a)],
         ["output d = det(a)", "output s = sign_det(a)"],
         [np.linalg.det(a), np.linalg.slogdet(a)[0]])

# batched matmul: NumPy's broadcasting of the leading axes and 1-D
# operands (numpy.matmul)
MM = [((1, 3, 2, 4), (4, 1, 4, 5)), ((3, 2, 4), (4, 5)), ((4,), (3, 4, 2)),
      ((2, 3, 4), (4,)), ((2, 1, 1, 3), (5, 3, 2)), ((2, 2, 3, 3), (3, 3))]
for i, (sa, sb) in enumerate(MM):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    emit("matmul_%d" % i, 1e-13, [("a", a), ("b", b)],
         ["output c = matmul(a, b)"], [np.matmul(a, b)])

print("\n".join(out))
