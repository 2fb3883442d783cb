#!/usr/bin/python3
"""Cases for tests/test_lpdf.c: each composite op of core/ir/composite.c at
many points (tails included) with a reference value from scipy.stats
(scipy.special where a stats parameterisation loses digits, said there).

Output, one item per line:
  case LABEL OP MODE RTOL      MODE: sum (a density: one scalar) or elem
  arg DTYPE RANK N v1 .. vN    DTYPE f64 or i64; RANK 0 (N = 1) or 1
  ref M r1 .. rM
  scale M s1 .. sM             a value passes when
                               |kiln - ref| <= RTOL * max(|ref|, scale)
"SKIP reason" alone when scipy is missing.

Tolerances: RTOL is 1e-12 (about 4500 ulps: libm and kiln's gammaln are
within a few ulps, sums of up to ~50 terms add a few more).  `scale` is
the sum of the absolute values of the formula's terms, because a sum of
terms that cancel is only accurate to eps * sum|terms| however each term
is computed (student_t at nu = 1e6: lgamma(nu/2 + 1/2) - lgamma(nu/2);
poisson at large n: n log lambda - lgamma(n + 1); neg_binomial_2 at huge
phi); where there is no cancellation scale is 0 (a pure relative test).
"""
import sys

try:
    import numpy as np
    from scipy import special as sp
    from scipy import stats as st
except ImportError as e:  # pragma: no cover
    print("SKIP scipy not available (%s)" % e)
    sys.exit(0)

out = []


def emit(label, op, mode, rtol, args, ref, scale=None):
    out.append("case %s %s %s %r" % (label.replace(" ", ""), op, mode, rtol))
    for a in args:
        dt = "i64" if np.asarray(a).dtype.kind in "iu" else "f64"
        v = np.atleast_1d(np.asarray(a))
        rank = 0 if np.ndim(a) == 0 else 1
        out.append("arg %s %d %d %s" % (dt, rank, v.size,
                                        " ".join(repr(x.item()) for x in v)))
    ref = np.atleast_1d(np.asarray(ref, dtype=float))
    out.append("ref %d %s" % (ref.size, " ".join(repr(float(x)) for x in ref)))
    if scale is None:
        scale = np.zeros_like(ref)
    scale = np.broadcast_to(np.asarray(scale, dtype=float), ref.shape)
    out.append("scale %d %s" % (scale.size,
                                " ".join(repr(float(x)) for x in scale)))


R = 1e-12
A = np.array
f = lambda *v: A(v, dtype=float)


def dens(label, op, args, logp, scale_terms=None):
    """A density: ref = the sum of scipy's logpdf over the broadcast args."""
    lp = np.sum(logp)
    sc = 0.0 if scale_terms is None else float(
        sum(np.sum(np.abs(t)) for t in scale_terms))
    emit(label, op, "sum", R, args, lp, sc)


# ---- continuous ----
y = f(-30, -5, -1, -1e-3, 0, 0.5, 2, 7, 30)
for mu, s in ((0.0, 1.0), (1.5, 0.1), (-2.0, 40.0)):
    z = (y - mu) / s
    dens("normal(mu=%g,s=%g)" % (mu, s), "normal_lpdf", (y, mu, s),
         st.norm.logpdf(y, mu, s), (0.5 * z * z, np.log(s) + 0.919))
yy = f(-3, 0.2, 4)
mm = f(0, -1, 2)
ss = f(1, 2, 0.5)
dens("normal(vectors)", "normal_lpdf", (yy, mm, ss),
     st.norm.logpdf(yy, mm, ss), (0.5 * ((yy - mm) / ss) ** 2, np.log(ss), 0.92))
# lcdf/lccdf: log of erfc near 1 loses relative (not absolute) precision
zt = f(-37, -20, -5, -1, 0, 1, 5, 8, 20, 37)
emit("normal_lcdf", "normal_lcdf", "sum", R, (zt, 0.0, 1.0),
     np.sum(st.norm.logcdf(zt)), np.sum(np.abs(st.norm.logcdf(zt))) + 1)
emit("normal_lccdf", "normal_lccdf", "sum", R, (zt, 0.5, 2.0),
     np.sum(st.norm.logsf(zt, 0.5, 2.0)),
     np.sum(np.abs(st.norm.logsf(zt, 0.5, 2.0))) + 1)
for k in (-37.0, -8.0, 8.0, 37.0):
    emit("normal_lcdf(z=%g)" % k, "normal_lcdf", "sum", R, (k, 0.0, 1.0),
         st.norm.logcdf(k), 1.0)

yt = f(-1e3, -30, -2, 0, 0.3, 5, 1e4)
for nu in (0.5, 1.0, 3.0, 30.0, 1e6):
    lp = st.t.logpdf(yt, nu, 0.25, 1.5)
    dens("student_t(nu=%g)" % nu, "student_t_lpdf", (yt, nu, 0.25, 1.5), lp,
         (sp.gammaln((nu + 1) / 2) + 0 * yt, sp.gammaln(nu / 2),
          (nu + 1) / 2 * np.log1p(((yt - 0.25) / 1.5) ** 2 / nu), lp))
for mu, s in ((0.0, 1.0), (3.0, 1e-3), (-1.0, 1e3)):
    dens("cauchy(s=%g)" % s, "cauchy_lpdf", (yt, mu, s),
         st.cauchy.logpdf(yt, mu, s),
         (np.log1p(((yt - mu) / s) ** 2), np.log(s) + 1.2 + 0 * yt))
    dens("double_exponential(s=%g)" % s, "double_exponential_lpdf",
         (yt, mu, s), st.laplace.logpdf(yt, mu, s),
         (np.abs(yt - mu) / s, np.log(s) + 0.7 + 0 * yt))
    dens("logistic(s=%g)" % s, "logistic_lpdf", (yt, mu, s),
         st.logistic.logpdf(yt, mu, s),
         (np.abs(yt - mu) / s * 3, np.log(s) + 0 * yt))
yp = f(1e-300, 1e-30, 1e-5, 0.3, 1, 2.5, 40, 1e5, 1e30)
for mu, s in ((0.0, 1.0), (2.0, 0.3), (-1.0, 10.0)):
    z = (np.log(yp) - mu) / s
    dens("lognormal(mu=%g,s=%g)" % (mu, s), "lognormal_lpdf", (yp, mu, s),
         st.lognorm.logpdf(yp, s, scale=np.exp(mu)),
         (0.5 * z * z, np.log(yp), np.log(s) + 1 + 0 * yp))
for a, b in ((1e-3, 1.0), (0.5, 2.0), (1.0, 0.5), (7.5, 3.0), (1e4, 1e3)):
    yg = yp[2:8] if a < 100 else f(8, 9.5, 10, 10.5, 12)
    dens("gamma(a=%g,b=%g)" % (a, b), "gamma_lpdf", (yg, a, b),
         st.gamma.logpdf(yg, a, scale=1 / b),
         (a * np.log(b) + 0 * yg, sp.gammaln(a), (a - 1) * np.log(yg), b * yg))
    dens("inv_gamma(a=%g,b=%g)" % (a, b), "inv_gamma_lpdf", (yg, a, b),
         st.invgamma.logpdf(yg, a, scale=b),
         (a * np.log(b) + 0 * yg, sp.gammaln(a), (a + 1) * np.log(yg), b / yg))
for b in (1e-3, 1.0, 50.0):
    dens("exponential(b=%g)" % b, "exponential_lpdf", (yp[1:8], b),
         st.expon.logpdf(yp[1:8], scale=1 / b),
         (np.log(b) + 0 * yp[1:8], b * yp[1:8]))
for al, s in ((0.5, 1.0), (1.0, 2.0), (3.5, 0.7), (20.0, 5.0)):
    yw = yp[2:8]
    dens("weibull(a=%g,s=%g)" % (al, s), "weibull_lpdf", (yw, al, s),
         st.weibull_min.logpdf(yw, al, scale=s),
         (np.log(al / s) + 0 * yw, (al - 1) * np.log(yw / s), (yw / s) ** al))
th = f(1e-300, 1e-12, 1e-3, 0.2, 0.5, 0.9, 1 - 1e-9, 1 - 1e-15)
for a, b in ((0.5, 0.5), (1.0, 1.0), (2.0, 5.0), (0.1, 30.0), (300.0, 200.0)):
    dens("beta(a=%g,b=%g)" % (a, b), "beta_lpdf", (th, a, b),
         st.beta.logpdf(th, a, b),
         ((a - 1) * np.log(th), (b - 1) * np.log1p(-th), sp.gammaln(a) +
          sp.gammaln(b) + sp.gammaln(a + b) + 0 * th))
yu = f(-0.5, -0.25, 0, 1.5, 3.75)
dens("uniform(in)", "uniform_lpdf", (yu, -0.5, 3.75),
     st.uniform.logpdf(yu, -0.5, 4.25))
dens("uniform(out)", "uniform_lpdf", (f(-0.5, 4.0), -0.5, 3.75),
     st.uniform.logpdf(f(-0.5, 4.0), -0.5, 4.25))

# ---- discrete: integer outcomes as i64 and as f64 ----
nb = A([0, 1, 1, 0, 1])
for t in (1e-12, 0.3, 0.5, 0.99):
    dens("bernoulli(t=%g)" % t, "bernoulli_lpmf", (nb, t),
         st.bernoulli.logpmf(nb, t))
al = f(-30, -2, 0, 0.7, 35)
nb5 = A([1, 0, 1, 1, 0])
# log_expit keeps digits where 1 - expit(35) would not (scipy.special)
dens("bernoulli_logit", "bernoulli_logit_lpmf", (nb5, al),
     np.where(nb5 == 1, sp.log_expit(al), sp.log_expit(-al)))
dens("bernoulli_logit(moderate, stats)", "bernoulli_logit_lpmf",
     (nb5[1:4], al[1:4]), st.bernoulli.logpmf(nb5[1:4], sp.expit(al[1:4])))
n = A([0, 3, 10, 50, 100])
N = A([10, 10, 10, 100, 100])
for t in (1e-3, 0.25, 0.5, 0.97):
    lp = st.binom.logpmf(n, N, t)
    dens("binomial(t=%g)" % t, "binomial_lpmf", (n, N, t), lp,
         (sp.gammaln(N + 1), sp.gammaln(n + 1), sp.gammaln(N - n + 1),
          n * np.log(t), (N - n) * np.log1p(-t)))
    dens("binomial(t=%g, f64 n)" % t, "binomial_lpmf",
         (n.astype(float), N.astype(float), t), lp,
         (sp.gammaln(N + 1), sp.gammaln(n + 1), sp.gammaln(N - n + 1),
          n * np.log(t), (N - n) * np.log1p(-t)))
for a in (-5.0, 0.0, 2.0):
    t = sp.expit(a)
    dens("binomial_logit(a=%g)" % a, "binomial_logit_lpmf", (n, N, a),
         st.binom.logpmf(n, N, t),
         (sp.gammaln(N + 1), sp.gammaln(n + 1), sp.gammaln(N - n + 1),
          n * sp.log_expit(a), (N - n) * sp.log_expit(-a)))
npo = A([0, 1, 5, 30, 1000, 10**6])
for lam in (1e-3, 1.0, 25.0, 1e6):
    dens("poisson(l=%g)" % lam, "poisson_lpmf", (npo, lam),
         st.poisson.logpmf(npo, lam),
         (npo * np.log(lam), lam + 0 * npo, sp.gammaln(npo + 1.0)))
    dens("poisson_log(l=%g)" % lam, "poisson_log_lpmf", (npo, np.log(lam)),
         st.poisson.logpmf(npo, lam),
         (npo * np.log(lam), lam + 0 * npo, sp.gammaln(npo + 1.0)))
nnb = A([0, 1, 4, 20, 300])
for mu, phi in ((0.5, 0.1), (3.0, 1.0), (20.0, 7.5), (300.0, 1e3)):
    p = phi / (mu + phi)
    lp = st.nbinom.logpmf(nnb, phi, p)
    sc = (sp.gammaln(nnb + phi), sp.gammaln(phi) + 0 * nnb,
          sp.gammaln(nnb + 1.0), nnb * np.log(mu / (mu + phi)),
          phi * np.log1p(mu / phi) + 0 * nnb)
    dens("neg_binomial_2(mu=%g,phi=%g)" % (mu, phi), "neg_binomial_2_lpmf",
         (nnb, mu, phi), lp, sc)
    dens("neg_binomial_2_log(mu=%g,phi=%g)" % (mu, phi),
         "neg_binomial_2_log_lpmf", (nnb, np.log(mu), phi), lp, sc)
# huge phi: scipy.stats' p = phi/(mu+phi) is 1 - 5e-8 and loses 8 digits,
# so the reference is scipy.special in a stable form (lchoose through
# betaln, which is accurate for huge arguments, and log1p(mu/phi))
nh = A([1, 4, 20])
for phi in (1e8, 1e12):
    mu = 5.0
    ref = (-np.log(nh) - sp.betaln(nh, phi) + nh * (np.log(mu) - np.log(phi)
           - np.log1p(mu / phi)) - phi * np.log1p(mu / phi))
    sc = (sp.gammaln(nh + phi), sp.gammaln(phi) + 0 * nh, nh * np.log(phi),
          phi * np.log1p(mu / phi) + 0 * nh)
    dens("neg_binomial_2(phi=%g)" % phi, "neg_binomial_2_lpmf",
         (nh, mu, phi), ref, sc)
    dens("neg_binomial_2_log(phi=%g)" % phi, "neg_binomial_2_log_lpmf",
         (nh, np.log(mu), phi), ref, sc)
beta = f(-2.0, 0.5, 3.0, -40.0)
yc = A([0, 2, 2, 3, 1])
lsm = beta - sp.logsumexp(beta)
emit("categorical_logit(0-based)", "categorical_logit_lpmf", "sum", R,
     (yc, beta), np.sum(lsm[yc]), np.sum(np.abs(beta[yc])) + 3 * 5)
emit("categorical_logit(scalar y)", "categorical_logit_lpmf", "sum", R,
     (np.int64(1), beta), lsm[1], 3.5)

# ---- helpers (elementwise) ----
x = f(-745, -40, -20, -1, -1e-8, 0, 1e-8, 0.5, 20, 40, 710)
# scipy's expit is 0 below -709 (exp overflows in 1 / (1 + exp(-x)));
# the true value there is exp(x), which kiln keeps: test from -700
xi = np.where(x < -700, -700.0, x)
emit("inv_logit", "inv_logit", "elem", R, (xi,), sp.expit(xi))
emit("log_inv_logit", "log_inv_logit", "elem", R, (x,), sp.log_expit(x))
emit("log1m_inv_logit", "log1m_inv_logit", "elem", R, (x,), sp.log_expit(-x))
emit("log1p_exp", "log1p_exp", "elem", R, (x,), -sp.log_expit(-x))
a = f(-np.inf, -np.inf, -800, 0, 3, 700, 1e-3, -1e300)
b = f(-np.inf, 2.0, -801, 0, -40, 710, 2e-3, 1.0)
emit("log_sum_exp", "log_sum_exp", "elem", R, (a, b),
     sp.logsumexp(np.stack([a, b]), axis=0))
th = f(1e-10, 0.3, 0.5, 0.999)
l1 = f(-3, -700, 2, 0)
l2 = f(-1, -690, 2, -50)
emit("log_mix", "log_mix", "elem", R, (th, l1, l2),
     sp.logsumexp(np.stack([l1, l2]), axis=0, b=np.stack([th, 1 - th])),
     np.abs(l1) + np.abs(l2))
aa = f(1e-3, 0.5, 1, 2.5, 30, 1e3)
bb = f(1e-3, 2, 1, 7.5, 40, 2e3)
emit("lbeta", "lbeta", "elem", R, (aa, bb), sp.betaln(aa, bb),
     sp.gammaln(aa) + sp.gammaln(bb) + sp.gammaln(aa + bb))
nn = f(0, 5, 10, 50, 1000, 1e6)
kk = f(0, 2, 10, 25, 3, 5e5)
emit("lchoose", "lchoose", "elem", R, (nn, kk),
     np.log(sp.comb(nn[:5], kk[:5])).tolist() +
     [-np.log1p(nn[5]) - sp.betaln(nn[5] - kk[5] + 1, kk[5] + 1)],
     sp.gammaln(nn + 1) + sp.gammaln(kk + 1) + sp.gammaln(nn - kk + 1))

# ---- issue 28: more densities ----
th = f(0.2, 0.05, 0.75)
for al in (f(1, 1, 1), f(0.5, 2, 7.5), f(1e-3, 30, 1e3)):
    dens("dirichlet(a=%s)" % ",".join("%g" % v for v in al), "dirichlet_lpdf",
         (th, al), st.dirichlet.logpdf(th, al),
         (sp.gammaln(al.sum()), sp.gammaln(al), (al - 1) * np.log(th)))
thd = f(1e-300, 0.5, 0.5)
dens("dirichlet(edge theta)", "dirichlet_lpdf", (thd, f(2, 1, 3)),
     sp.gammaln(6) - sp.gammaln(2) - sp.gammaln(3) + np.log(thd[0]) +
     2 * np.log(0.5), (np.log(thd[0]), 5))
# ordered_logistic (0-based y): P(y = k) = expit(eta - c[k-1]) -
# expit(eta - c[k]) with c[-1] = -inf, c[K-1] = inf, from scipy.special
cut = f(-1.5, 0.2, 3.0)
cx = np.concatenate([[-np.inf], cut, [np.inf]])


def olog(y, eta):
    # expit(a) - expit(b) = expit(a) expit(-b) (1 - e^(b-a)), each factor
    # on the log scale: no cancellation where both are near 1 (eta >> c)
    a, b = eta - cx[y], eta - cx[y + 1]
    with np.errstate(invalid="ignore"):
        mid = sp.log_expit(a) + sp.log_expit(-b) + np.log(-np.expm1(b - a))
    return np.where(np.isinf(cx[y]), sp.log_expit(-b),
                    np.where(np.isinf(cx[y + 1]), sp.log_expit(a), mid))


yo = A([0, 1, 2, 3, 3, 0, 1])
for eta in (0.0, -4.0, 2.5, 30.0):
    dens("ordered_logistic(eta=%g)" % eta, "ordered_logistic_lpmf",
         (yo, eta, cut), olog(yo, eta), (np.abs(olog(yo, eta)) + 1,))
etav = f(-3, 0.5, 1, 2, 10, -1, 0)
dens("ordered_logistic(eta vector)", "ordered_logistic_lpmf",
     (yo, etav, cut), olog(yo, etav), (np.abs(olog(yo, etav)) + 1,))
dens("ordered_logistic(K=2)", "ordered_logistic_lpmf",
     (A([0, 1, 1]), f(0.3, -2, 4), f(0.5)),
     [sp.log_expit(-(0.3 - 0.5)), sp.log_expit(-2 - 0.5), sp.log_expit(3.5)])
emit("ordered_logistic(y out of range)", "ordered_logistic_lpmf", "sum", R,
     (A([1, 4]), 0.0, cut), -np.inf)
nb_ = A([0, 3, 10, 7])
Nb = A([10, 10, 10, 20])
for a, b in ((1.0, 1.0), (0.5, 2.5), (30.0, 4.0), (1e3, 2e3)):
    lp = st.betabinom.logpmf(nb_, Nb, a, b)
    dens("beta_binomial(a=%g,b=%g)" % (a, b), "beta_binomial_lpmf",
         (nb_, Nb, a, b), lp,
         (sp.gammaln(Nb + 1.0), sp.gammaln(nb_ + a), sp.gammaln(Nb - nb_ + b),
          sp.gammaln(Nb + a + b) + 0 * nb_, sp.gammaln(a) + sp.gammaln(b) +
          sp.gammaln(a + b) + 0 * nb_))
emit("beta_binomial(n out of support)", "beta_binomial_lpmf", "sum", R,
     (A([-1, 11]), A([10, 10]), 2.0, 3.0), -np.inf)
yvm = f(-np.pi, -2, -0.3, 0, 1, 3)
for mu, k in ((0.0, 1e-8), (0.5, 0.5), (-1.0, 4.0), (2.0, 25.0),
              (0.0, 700.0), (1.0, 1e5)):
    # scipy's vonmises.logpdf is k cos(x - mu) - log(2 pi i0e(k)) - k
    lp = k * (np.cos(yvm - mu) - 1) - np.log(2 * np.pi * sp.i0e(k))
    dens("von_mises(mu=%g,k=%g)" % (mu, k), "von_mises_lpdf", (yvm, mu, k),
         lp, (k * np.abs(np.cos(yvm - mu) - 1), np.log(sp.i0e(k)) + 1.9))
dens("von_mises(stats)", "von_mises_lpdf", (yvm, 0.5, 2.0),
     st.vonmises.logpdf(yvm, 2.0, loc=0.5), (2 * np.abs(np.cos(yvm - .5)),
                                             2.0 + 1.9 + 0 * yvm))
ysn = f(-40, -6, -1, 0, 0.5, 3, 12, 50)
for xi, om, al in ((0.0, 1.0, 0.0), (1.0, 2.0, 3.0), (-0.5, 0.5, -8.0),
                   (0.0, 1.0, 40.0)):
    lp = st.skewnorm.logpdf(ysn, al, xi, om)
    z = (ysn - xi) / om
    dens("skew_normal(a=%g)" % al, "skew_normal_lpdf", (ysn, xi, om, al), lp,
         (0.5 * z * z, np.log(om) + 1, 0.5 * (al * z) ** 2))
thc = f(0.1, 0.6, 0.3)
yc2 = A([0, 1, 1, 2, 0])
dens("categorical(0-based)", "categorical_lpmf", (yc2, thc),
     np.log(thc[yc2]))
emit("categorical(scalar y)", "categorical_lpmf", "sum", R,
     (np.int64(2), thc), np.log(0.3))
for ym in (A([3, 0, 5]), A([0, 0, 1]), A([400, 100, 1000])):
    dens("multinomial(%s)" % ",".join(str(v) for v in ym), "multinomial_lpmf",
         (ym, thc), st.multinomial.logpmf(ym, ym.sum(), thc),
         (sp.gammaln(ym.sum() + 1.0), sp.gammaln(ym + 1.0), ym * np.log(thc)))
yem = f(-30, -3, -0.5, 0, 1, 4, 20, 200)
for mu, sg, lam in ((0.0, 1.0, 1.0), (1.0, 0.5, 3.0), (-2.0, 3.0, 0.1),
                    (0.0, 1.0, 40.0), (0.0, 2.0, 1e-3)):
    lp = st.exponnorm.logpdf(yem, 1 / (sg * lam), mu, sg)
    u = (mu + lam * sg * sg - yem) / (sg * np.sqrt(2))
    dens("exp_mod_normal(s=%g,l=%g)" % (sg, lam), "exp_mod_normal_lpdf",
         (yem, mu, sg, lam), lp,
         (np.abs(np.log(lam)) + 0.7 + lam * np.abs(mu - yem),
          0.5 * (lam * sg) ** 2 + u * u))
yg_ = f(-20, -3, -0.5, 0, 1, 4, 30)
for mu, b in ((0.0, 1.0), (2.0, 0.3), (-1.0, 10.0)):
    z = (yg_ - mu) / b
    dens("gumbel(mu=%g,b=%g)" % (mu, b), "gumbel_lpdf", (yg_, mu, b),
         st.gumbel_r.logpdf(yg_, mu, b),
         (np.abs(z), np.exp(-z), np.log(b) + 0 * z))
ypa = f(0.5, 0.5000001, 1, 3, 1e3, 1e200)
for al in (0.1, 1.0, 3.5, 100.0):
    dens("pareto(a=%g)" % al, "pareto_lpdf", (ypa, 0.5, al),
         st.pareto.logpdf(ypa, al, scale=0.5),
         (np.log(al) + 0 * ypa, al * np.log(0.5) + 0 * ypa,
          (al + 1) * np.log(ypa)))
emit("pareto(y < y_min)", "pareto_lpdf", "sum", R, (f(0.49, 2.0), 0.5, 2.0),
     -np.inf)
yra = f(1e-300, 1e-5, 0.3, 1, 2.5, 9, 40)
for sg in (1e-3, 1.0, 7.5):
    dens("rayleigh(s=%g)" % sg, "rayleigh_lpdf", (yra, sg),
         st.rayleigh.logpdf(yra, scale=sg),
         (np.log(yra), 2 * np.log(sg) + 0 * yra, 0.5 * (yra / sg) ** 2))

# ---- issue 28: log CDFs and CCDFs ----
# normal in the far tails (the lcdf now follows log(erfcx(u)) - u^2 where
# erfc would underflow: finite at z = -40 .. -1e5)
zf = f(-1e5, -300, -40, -38.5)
emit("normal_lcdf(far tail)", "normal_lcdf", "sum", R,
     (zf, 0.0, 1.0), np.sum(st.norm.logcdf(zf)))
emit("normal_lccdf(far tail)", "normal_lccdf", "sum", R,
     (-zf, 0.0, 1.0), np.sum(st.norm.logsf(-zf)))
yln = f(1e-300, 1e-20, 1e-3, 0.3, 1, 2.5, 40, 1e5, 1e30)
for mu, s in ((0.0, 1.0), (2.0, 0.3), (-1.0, 10.0)):
    lc = st.lognorm.logcdf(yln, s, scale=np.exp(mu))
    ls = st.lognorm.logsf(yln, s, scale=np.exp(mu))
    ok_ = np.isfinite(lc) & np.isfinite(ls)
    emit("lognormal_lcdf(mu=%g,s=%g)" % (mu, s), "lognormal_lcdf", "sum", R,
         (yln[ok_], mu, s), np.sum(lc[ok_]), np.sum(np.abs(lc[ok_])) + 1)
    emit("lognormal_lccdf(mu=%g,s=%g)" % (mu, s), "lognormal_lccdf", "sum",
         R, (yln[ok_], mu, s), np.sum(ls[ok_]), np.sum(np.abs(ls[ok_])) + 1)
emit("lognormal_lcdf(y=0)", "lognormal_lcdf", "sum", R, (0.0, 0.0, 1.0),
     -np.inf)
emit("lognormal_lccdf(y=0)", "lognormal_lccdf", "sum", R, (0.0, 0.0, 1.0),
     0.0)
ye = f(1e-300, 1e-10, 1e-3, 0.5, 2, 30, 700)
for b in (1e-3, 1.0, 50.0):
    emit("exponential_lcdf(b=%g)" % b, "exponential_lcdf", "sum", R, (ye[ye * b < 700], b),
         np.sum(st.expon.logcdf(ye[ye * b < 700], scale=1 / b)))
    emit("exponential_lccdf(b=%g)" % b, "exponential_lccdf", "sum", R,
         (ye, b), np.sum(st.expon.logsf(ye, scale=1 / b)))
emit("exponential_lcdf(y=0)", "exponential_lcdf", "sum", R, (0.0, 2.0),
     -np.inf)
yga = f(1e-8, 1e-3, 0.3, 1, 2.5, 10, 40)
for a, b in ((1e-3, 1.0), (0.5, 2.0), (1.0, 0.5), (7.5, 3.0), (300.0, 10.0)):
    # log of scipy.special's P and Q (stats' logcdf is the same log(P))
    P, Q = sp.gammainc(a, b * yga), sp.gammaincc(a, b * yga)
    okp, okq = P > 1e-300, Q > 1e-300
    emit("gamma_lcdf(a=%g,b=%g)" % (a, b), "gamma_lcdf", "sum", 2e-11,
         (yga[okp], a, b), np.sum(np.log(P[okp])),
         np.sum(np.abs(np.log(P[okp]))) + 1)
    emit("gamma_lccdf(a=%g,b=%g)" % (a, b), "gamma_lccdf", "sum", 2e-11,
         (yga[okq], a, b), np.sum(np.log(Q[okq])),
         np.sum(np.abs(np.log(Q[okq]))) + 1)
emit("gamma_lcdf(y=0)", "gamma_lcdf", "sum", R, (0.0, 2.0, 1.0), -np.inf)
emit("gamma_lccdf(y=0)", "gamma_lccdf", "sum", R, (0.0, 2.0, 1.0), 0.0)
thb = f(1e-12, 1e-3, 0.2, 0.5, 0.9, 1 - 1e-9)
for a, b in ((0.5, 0.5), (1.0, 1.0), (2.0, 5.0), (0.1, 30.0), (30.0, 20.0)):
    with np.errstate(divide="ignore"):
        lc = np.log(sp.betainc(a, b, thb))
        ls = np.log(sp.betainc(b, a, 1 - thb))
    okc, oks = np.isfinite(lc), np.isfinite(ls)
    emit("beta_lcdf(a=%g,b=%g)" % (a, b), "beta_lcdf", "sum", 5e-11,
         (thb[okc], a, b), np.sum(lc[okc]), np.sum(np.abs(lc[okc])) + 1)
    emit("beta_lccdf(a=%g,b=%g)" % (a, b), "beta_lccdf", "sum", 5e-11,
         (thb[oks], a, b), np.sum(ls[oks]), np.sum(np.abs(ls[oks])) + 1)
emit("beta_lcdf(0)", "beta_lcdf", "sum", R, (0.0, 2.0, 3.0), -np.inf)
emit("beta_lccdf(1)", "beta_lccdf", "sum", R, (1.0, 2.0, 3.0), -np.inf)
ytl = f(-1e4, -30, -2, -0.1, 0, 0.3, 5, 1e3)
for nu in (0.5, 1.0, 3.0, 30.0, 1e4):
    lc = st.t.logcdf(ytl, nu, 0.25, 1.5)
    ls = st.t.logsf(ytl, nu, 0.25, 1.5)
    emit("student_t_lcdf(nu=%g)" % nu, "student_t_lcdf", "sum", 5e-11,
         (ytl, nu, 0.25, 1.5), np.sum(lc), np.sum(np.abs(lc)) + 1)
    emit("student_t_lccdf(nu=%g)" % nu, "student_t_lccdf", "sum", 5e-11,
         (ytl, nu, 0.25, 1.5), np.sum(ls), np.sum(np.abs(ls)) + 1)

# ---- issue 28 helpers: i0, i1 (elementwise) ----
xb = f(-30, -2, -1e-8, 0, 0.5, 3, 19.5, 20.5, 100, 700)
emit("i0", "i0", "elem", R, (xb,), sp.i0(xb))
emit("i1", "i1", "elem", R, (xb,), sp.i1(xb))

print("\n".join(out))
