/*
 * composite.c — composite ops: Stan's log densities (*_lpdf, *_lpmf,
 * normal_lcdf/lccdf, summed over their broadcast arguments) and the
 * elementwise helpers they use, each expanded by kiln_graph_op into
 * ordinary nodes; and kiln_graph_op itself, the builder's entry by op
 * name, which finds a primitive (ir.c, kiln_ir_graph_op) or expands a
 * composite here (prefix kiln_composite_).  Gradients, fusion and caching see
 * only primitives; the canonical text has no composite calls.  Formulas and
 * sources: docs/ops.md, "Composite ops".
 */
#include "composite.h"

#include "ir.h"
#include "suggest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A builder that stops at the first error: every helper returns -1 when
 * an input is -1 (the error is already in *err). */
typedef struct cb {
    kiln_graph *g;
    kiln_err *err;
} cb;

static kiln_value op1(cb *c, const char *op, kiln_value x)
{
    if (x < 0)
        return -1;
    return kiln_graph_op(c->g, op, 1, &x, NULL, 0, c->err);
}

static kiln_value op2(cb *c, const char *op, kiln_value x, kiln_value y)
{
    if (x < 0 || y < 0)
        return -1;
    kiln_value in[2] = { x, y };
    return kiln_graph_op(c->g, op, 2, in, NULL, 0, c->err);
}

static kiln_value op3(cb *c, const char *op, kiln_value x, kiln_value y,
                      kiln_value z)
{
    if (x < 0 || y < 0 || z < 0)
        return -1;
    kiln_value in[3] = { x, y, z };
    return kiln_graph_op(c->g, op, 3, in, NULL, 0, c->err);
}

static kiln_value lit(cb *c, double v)
{
    return kiln_graph_literal(c->g, v, KILN_LIT_FLOAT, c->err);
}

#define ADD(a, b) op2(c, "add", a, b)
#define SUB(a, b) op2(c, "sub", a, b)
#define MUL(a, b) op2(c, "mul", a, b)
#define DIV(a, b) op2(c, "true_div", a, b)
#define NEG(a) op1(c, "neg", a)
#define LOG(a) op1(c, "log", a)
#define L(v) lit(c, v)

static const double LOG_PI = 1.1447298858494002;      /* log(pi) */
static const double HALF_LOG_2PI = 0.91893853320467274; /* log(2 pi)/2 */
static const double LOG_2 = 0.69314718055994531;
static const double SQRT1_2 = 0.70710678118654752; /* 1/sqrt(2) */

static kiln_value where3(cb *c, kiln_value k, kiln_value a, kiln_value b)
{
    return op3(c, "where", k, a, b);
}

/* log(erfc(x)) without underflow: log(erfcx(x)) - x^2 for x > 0 (erfcx
 * = e^{x^2} erfc(x), finite up to +inf), log(erfc(x)) otherwise.  Each
 * branch reads x only where it is taken (the other sees 0), so neither
 * makes a NaN that `where`'s zero adjoint would multiply. */
static kiln_value log_erfc(cb *c, kiln_value x)
{
    kiln_value pos = op2(c, "gt", x, L(0));
    kiln_value xp = where3(c, pos, x, L(0));
    kiln_value xn = where3(c, pos, L(0), x);
    return where3(c, pos,
                  SUB(LOG(op1(c, "erfcx", xp)), op1(c, "square", xp)),
                  LOG(op1(c, "erfc", xn)));
}

/* where(x == 0, 0, x * log(y)): Stan's multiply_log (0 log 0 = 0). */
static kiln_value xlogy(cb *c, kiln_value x, kiln_value y)
{
    return where3(c, op2(c, "eq", x, L(0)), L(0), MUL(x, LOG(y)));
}

/* where(x == 0, 0, x * log1p(-y)) */
static kiln_value xlog1my(cb *c, kiln_value x, kiln_value y)
{
    return where3(c, op2(c, "eq", x, L(0)), L(0),
                  MUL(x, op1(c, "log1p", NEG(y))));
}

static kiln_value lbeta(cb *c, kiln_value a, kiln_value b)
{
    return SUB(ADD(op1(c, "gammaln", a), op1(c, "gammaln", b)),
               op1(c, "gammaln", ADD(a, b)));
}

/* log C(n, k) = lgamma(n+1) - lgamma(k+1) - lgamma(n-k+1) */
static kiln_value lchoose(cb *c, kiln_value n, kiln_value k)
{
    return SUB(SUB(op1(c, "gammaln", ADD(n, L(1))),
                   op1(c, "gammaln", ADD(k, L(1)))),
               op1(c, "gammaln", ADD(SUB(n, k), L(1))));
}

/* log(exp(a) + exp(b)) = m + log1p(exp(r - m)), m = max(a, b),
 * r = a + b - m (the other one: at a tie each gets half the gradient);
 * -inf when both are -inf. */
static kiln_value lse2(cb *c, kiln_value a, kiln_value b)
{
    kiln_value m = op2(c, "maximum", a, b);
    kiln_value r = SUB(ADD(a, b), m);
    kiln_value v = ADD(m, op1(c, "log1p", op1(c, "exp", SUB(r, m))));
    return where3(c, op2(c, "eq", m, L(-INFINITY)), m, v);
}

static kiln_value log_inv_logit(cb *c, kiln_value x)
{
    return NEG(op1(c, "softplus", NEG(x)));
}

static kiln_value log1m_inv_logit(cb *c, kiln_value x)
{
    return NEG(op1(c, "softplus", x));
}

/* ---- expansions: a[] are the arguments, in Stan's order ------------- */

#define X(name) static kiln_value x_##name(cb *c, const kiln_value *a)

X(inv_logit) { return op1(c, "sigmoid", a[0]); }
X(log_inv_logit) { return log_inv_logit(c, a[0]); }
X(log1m_inv_logit) { return log1m_inv_logit(c, a[0]); }
X(log1p_exp) { return op1(c, "softplus", a[0]); }
X(log_sum_exp) { return lse2(c, a[0], a[1]); }
X(lbeta) { return lbeta(c, a[0], a[1]); }
X(lchoose) { return lchoose(c, a[0], a[1]); }

/* SciPy's i0, i1 (PyTensor's): the scaled forms times e^{|x|}; +inf
 * beyond |x| ~ 713 as theirs */
X(i0) { return MUL(op1(c, "i0e", a[0]), op1(c, "exp", op1(c, "abs", a[0]))); }
X(i1) { return MUL(op1(c, "i1e", a[0]), op1(c, "exp", op1(c, "abs", a[0]))); }

/* log_mix(theta, lp1, lp2) = log(theta e^lp1 + (1 - theta) e^lp2) */
X(log_mix)
{
    return lse2(c, ADD(LOG(a[0]), a[1]),
                ADD(op1(c, "log1p", NEG(a[0])), a[2]));
}

static kiln_value sum(cb *c, kiln_value x) { return op1(c, "sum", x); }

/* z = (y - mu) / sigma */
static kiln_value zscore(cb *c, const kiln_value *a)
{
    return DIV(SUB(a[0], a[1]), a[2]);
}

X(normal_lpdf)
{
    kiln_value z = zscore(c, a);
    return sum(c, SUB(SUB(MUL(L(-0.5), op1(c, "square", z)), LOG(a[2])),
                      L(HALF_LOG_2PI)));
}

/* log Phi(z) = log(erfc(-z / sqrt 2) / 2), elementwise */
static kiln_value log_Phi(cb *c, kiln_value z)
{
    return SUB(log_erfc(c, MUL(z, L(-SQRT1_2))), L(LOG_2));
}

X(normal_lcdf) { return sum(c, log_Phi(c, zscore(c, a))); }
X(normal_lccdf) { return sum(c, log_Phi(c, NEG(zscore(c, a)))); }

/* student_t(y | nu, mu, sigma) */
X(student_t_lpdf)
{
    kiln_value nu = a[1];
    kiln_value b[3] = { a[0], a[2], a[3] };
    kiln_value z = zscore(c, b);
    kiln_value h = MUL(L(0.5), nu);
    kiln_value t = SUB(op1(c, "gammaln", ADD(h, L(0.5))),
                       op1(c, "gammaln", h));
    t = SUB(t, MUL(L(0.5), ADD(LOG(nu), L(LOG_PI))));
    t = SUB(t, LOG(a[3]));
    t = SUB(t, MUL(ADD(h, L(0.5)),
                   op1(c, "log1p", DIV(op1(c, "square", z), nu))));
    return sum(c, t);
}

X(cauchy_lpdf)
{
    kiln_value z = zscore(c, a);
    return sum(c, SUB(SUB(NEG(op1(c, "log1p", op1(c, "square", z))),
                          LOG(a[2])), L(LOG_PI)));
}

X(double_exponential_lpdf)
{
    kiln_value z = DIV(op1(c, "abs", SUB(a[0], a[1])), a[2]);
    return sum(c, SUB(SUB(NEG(z), LOG(a[2])), L(LOG_2)));
}

/* -z - log sigma - 2 log1p(exp(-z)) */
X(logistic_lpdf)
{
    kiln_value z = zscore(c, a);
    return sum(c, SUB(SUB(NEG(z), LOG(a[2])),
                      MUL(L(2), op1(c, "softplus", NEG(z)))));
}

X(lognormal_lpdf)
{
    kiln_value ly = LOG(a[0]);
    kiln_value b[3] = { ly, a[1], a[2] };
    kiln_value z = zscore(c, b);
    return sum(c, SUB(SUB(SUB(MUL(L(-0.5), op1(c, "square", z)), LOG(a[2])),
                          L(HALF_LOG_2PI)), ly));
}

/* gamma(y | alpha, beta), beta a rate */
X(gamma_lpdf)
{
    kiln_value t = SUB(MUL(a[1], LOG(a[2])), op1(c, "gammaln", a[1]));
    t = ADD(t, MUL(SUB(a[1], L(1)), LOG(a[0])));
    return sum(c, SUB(t, MUL(a[2], a[0])));
}

/* inv_gamma(y | alpha, beta), beta a scale */
X(inv_gamma_lpdf)
{
    kiln_value t = SUB(MUL(a[1], LOG(a[2])), op1(c, "gammaln", a[1]));
    t = SUB(t, MUL(ADD(a[1], L(1)), LOG(a[0])));
    return sum(c, SUB(t, DIV(a[2], a[0])));
}

/* exponential(y | beta), beta a rate */
X(exponential_lpdf)
{
    return sum(c, SUB(LOG(a[1]), MUL(a[1], a[0])));
}

/* weibull(y | alpha, sigma) */
X(weibull_lpdf)
{
    kiln_value lr = SUB(LOG(a[0]), LOG(a[2]));   /* log(y / sigma) */
    kiln_value t = SUB(LOG(a[1]), LOG(a[2]));
    t = ADD(t, MUL(SUB(a[1], L(1)), lr));
    return sum(c, SUB(t, op1(c, "exp", MUL(a[1], lr))));
}

X(beta_lpdf)
{
    kiln_value t = MUL(SUB(a[1], L(1)), LOG(a[0]));
    t = ADD(t, MUL(SUB(a[2], L(1)), op1(c, "log1p", NEG(a[0]))));
    return sum(c, SUB(t, lbeta(c, a[1], a[2])));
}

/* -log(beta - alpha) inside [alpha, beta], -inf outside */
X(uniform_lpdf)
{
    kiln_value in = op2(c, "and", op2(c, "ge", a[0], a[1]),
                        op2(c, "le", a[0], a[2]));
    return sum(c, where3(c, in, NEG(LOG(SUB(a[2], a[1]))), L(-INFINITY)));
}

X(bernoulli_lpmf)
{
    return sum(c, where3(c, op2(c, "ne", a[0], L(0)), LOG(a[1]),
                         op1(c, "log1p", NEG(a[1]))));
}

X(bernoulli_logit_lpmf)
{
    return sum(c, where3(c, op2(c, "ne", a[0], L(0)),
                         log_inv_logit(c, a[1]),
                         log1m_inv_logit(c, a[1])));
}

/* binomial(n | N, theta) */
X(binomial_lpmf)
{
    kiln_value t = ADD(lchoose(c, a[1], a[0]), xlogy(c, a[0], a[2]));
    return sum(c, ADD(t, xlog1my(c, SUB(a[1], a[0]), a[2])));
}

X(binomial_logit_lpmf)
{
    kiln_value t = ADD(lchoose(c, a[1], a[0]),
                       MUL(a[0], log_inv_logit(c, a[2])));
    return sum(c, ADD(t, MUL(SUB(a[1], a[0]), log1m_inv_logit(c, a[2]))));
}

X(poisson_lpmf)
{
    kiln_value t = SUB(xlogy(c, a[0], a[1]), a[1]);
    return sum(c, SUB(t, op1(c, "gammaln", ADD(a[0], L(1)))));
}

X(poisson_log_lpmf)
{
    kiln_value t = SUB(MUL(a[0], a[1]), op1(c, "exp", a[1]));
    return sum(c, SUB(t, op1(c, "gammaln", ADD(a[0], L(1)))));
}

/* neg_binomial_2 on the log scale, eta = log mu, s = log1p(mu / phi):
 * lchoose(n + phi - 1, n) + n (eta - log phi - s) - phi s */
static kiln_value nb2(cb *c, kiln_value n, kiln_value eta, kiln_value phi,
                      kiln_value s)
{
    kiln_value t = lchoose(c, SUB(ADD(n, phi), L(1)), n);
    t = ADD(t, MUL(n, SUB(SUB(eta, LOG(phi)), s)));
    return sum(c, SUB(t, MUL(phi, s)));
}

X(neg_binomial_2_lpmf)
{
    return nb2(c, a[0], LOG(a[1]), a[2], op1(c, "log1p", DIV(a[1], a[2])));
}

X(neg_binomial_2_log_lpmf)
{
    return nb2(c, a[0], a[1], a[2],
               op1(c, "softplus", SUB(a[1], LOG(a[2]))));
}

/* categorical_logit(y | beta) = sum_i beta[y_i] - logsumexp(beta), with
 * 0-based y (kiln's indices are 0-based everywhere; Stan's are 1-based) */
X(categorical_logit_lpmf)
{
    return sum(c, SUB(op2(c, "take", a[1], a[0]),
                      op1(c, "logsumexp", a[1])));
}

/* ---- linear algebra (issue 28) --------------------------------------
 * Matrices are the last two axes (docs/ops.md "Linear algebra"). */

/* op(x, KEY=v) for one integer attribute (axis) or bool (lower). */
static kiln_value opk(cb *c, const char *op, kiln_value x, const char *key,
                      kiln_attr_kind kind, int64_t v)
{
    if (x < 0)
        return -1;
    kiln_attr at = {.key = key, .kind = kind, .i = v};
    return kiln_graph_op(c->g, op, 1, &x, &at, 1, c->err);
}

static const kiln_type *ty(cb *c, kiln_value x)
{
    return &c->g->nodes[x].type;
}

static int need_rank(cb *c, kiln_value x, const char *what, int lo, int hi)
{
    int r = ty(c, x)->rank;
    if (r < lo || r > hi) {
        kiln_seterr(c->err, KILN_ERR_SHAPE, "%s must have rank %d%s%d, got "
                    "rank %d", what, lo, hi > lo ? " to " : "", hi, r);
        return -1;
    }
    return 0;
}

/* trace(A) = sum of diagonal(A) over its last axis (batch kept) */
X(trace)
{
    if (need_rank(c, a[0], "A", 2, KILN_MAX_RANK))
        return -1;
    kiln_value d = op1(c, "diagonal", a[0]);
    return opk(c, "sum", d, "axis", KILN_ATTR_INT, ty(c, a[0])->rank - 2);
}

/* outer(a, b)[i, j] = a[i] b[j] for vectors a, b */
X(outer)
{
    if (need_rank(c, a[0], "a", 1, 1) || need_rank(c, a[1], "b", 1, 1))
        return -1;
    return MUL(opk(c, "expand_dims", a[0], "axis", KILN_ATTR_INT, 1), a[1]);
}

/* Stan's multi_normal_cholesky: y and mu are [N] or [M, N] (M rows, each
 * one observation, broadcast against each other), L [N, N] lower:
 * -MN/2 log 2pi - M sum log diag L - 1/2 sum |L^-1 (y - mu)|^2 */
static kiln_value mvn_chol(cb *c, kiln_value y, kiln_value mu, kiln_value lf)
{
    if (need_rank(c, y, "y", 1, 2) || need_rank(c, mu, "mu", 1, 2) ||
        need_rank(c, lf, "L", 2, 2))
        return -1;
    kiln_value d = SUB(y, mu);
    if (d < 0)
        return -1;
    int two = ty(c, d)->rank == 2;
    kiln_value rhs = two ? op1(c, "transpose", d) : d;
    kiln_value in[2] = {lf, rhs};
    kiln_value z = -1;
    if (rhs >= 0) {
        kiln_attr at = {.key = "lower", .kind = KILN_ATTR_BOOL, .i = 1};
        z = kiln_graph_op(c->g, "solve_triangular", 2, in, &at, 1, c->err);
    }
    kiln_value ones = op2(c, "fill", d, L(1));
    kiln_value logdet = sum(c, MUL(ones, LOG(op1(c, "diagonal", lf))));
    kiln_value cst = MUL(sum(c, ones), L(HALF_LOG_2PI));
    return SUB(SUB(NEG(cst), logdet),
               MUL(L(0.5), sum(c, op1(c, "square", z))));
}

X(multi_normal_cholesky_lpdf) { return mvn_chol(c, a[0], a[1], a[2]); }

/* Stan's multi_normal through the Cholesky factor of Sigma (cholesky
 * reads Sigma's lower triangle; a non-positive-definite Sigma fails the
 * call, as Stan's check rejects it) */
X(multi_normal_lpdf)
{
    if (need_rank(c, a[2], "Sigma", 2, 2))
        return -1;
    return mvn_chol(c, a[0], a[1], op1(c, "cholesky", a[2]));
}

/* Stan 2.21's do_lkj_constant (lkj_corr_lpdf.hpp; Lewandowski, Kurowicka
 * and Joe 2009, theorem 5) for a static K: its eta == 1 branch as a
 * number, its general branch as nodes, chosen by eta == 1 as Stan does. */
static kiln_value lkj_constant(cb *c, kiln_value eta, int64_t K)
{
    int64_t km1 = K - 1;
    double one = 0;
    for (int64_t k = 1; k <= km1 / 2; k++)
        one -= lgamma(2.0 * (double)k);
    double Kd = (double)K, km1d = (double)km1;
    if (K % 2 == 1)
        one -= 0.25 * (Kd * Kd - 1) * LOG_PI - 0.25 * km1d * km1d * LOG_2 -
               km1d * lgamma(0.5 * (Kd + 1));
    else
        one -= 0.25 * Kd * (Kd - 2) * LOG_PI +
               0.25 * (3 * Kd * Kd - 4 * Kd) * LOG_2 + Kd * lgamma(0.5 * Kd) -
               km1d * lgamma(Kd);
    kiln_value gen = MUL(L(km1d),
                         op1(c, "gammaln", ADD(eta, L(0.5 * km1d))));
    for (int64_t k = 1; k <= km1; k++)
        gen = SUB(gen, ADD(L(0.5 * (double)k * LOG_PI),
                           op1(c, "gammaln",
                               ADD(eta, L(0.5 * (double)(km1 - k))))));
    return where3(c, op2(c, "eq", eta, L(1)), L(one), gen);
}

/* Stan's lkj_corr_cholesky_lpdf(L, eta), L [K, K] with K static:
 * do_lkj_constant(eta, K) + sum_{i=1}^{K-1} (K - i - 1 + 2 eta - 2)
 * log L[i, i] */
X(lkj_corr_cholesky_lpdf)
{
    if (need_rank(c, a[0], "L", 2, 2) || need_rank(c, a[1], "eta", 0, 0))
        return -1;
    int64_t K = ty(c, a[0])->dims[0];
    if (K < 0 || ty(c, a[0])->dims[1] != K) {
        kiln_seterr(c->err, KILN_ERR_SHAPE, "L must be a square matrix of "
                    "static size (its normalising constant depends on K)");
        return -1;
    }
    if (K == 0)
        return L(0);
    kiln_value cst = lkj_constant(c, a[1], K);
    if (K == 1)
        return cst;
    kiln_index tail = {.kind = KILN_INDEX_SLICE, .start = 1, .has_start = 1};
    kiln_value ld = LOG(op1(c, "diagonal", a[0]));
    ld = ld < 0 ? -1 : kiln_graph_subtensor(c->g, ld, 1, &tail, c->err);
    /* K - i - 1 for i = 1 .. K-1: K - 1 - cumsum(ones) */
    kiln_attr sh = {.key = "shape", .kind = KILN_ATTR_INTS, .n = 1,
                    .ints = &(int64_t){K - 1}};
    kiln_value ones = kiln_graph_op(c->g, "ones", 0, NULL, &sh, 1, c->err);
    kiln_value w = SUB(L((double)(K - 1)),
                       opk(c, "cumsum", ones, "axis", KILN_ATTR_INT, 0));
    w = ADD(w, SUB(MUL(L(2), a[1]), L(2)));
    return ADD(cst, sum(c, MUL(w, ld)));
}

/* Stan's gp_exp_quad_cov(x, alpha, rho): x [N] (reals) or [N, D] (N
 * points): K[i, j] = alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2)) */
X(gp_exp_quad_cov)
{
    if (need_rank(c, a[0], "x", 1, 2) || need_rank(c, a[1], "alpha", 0, 0) ||
        need_rank(c, a[2], "rho", 0, 0))
        return -1;
    int two = ty(c, a[0])->rank == 2;
    kiln_value xi = opk(c, "expand_dims", a[0], "axis", KILN_ATTR_INT, 1);
    kiln_value xj = two ? opk(c, "expand_dims", a[0], "axis", KILN_ATTR_INT, 0)
                        : a[0];
    kiln_value d2 = op1(c, "square", SUB(xi, xj));
    if (two)
        d2 = opk(c, "sum", d2, "axis", KILN_ATTR_INT, 2);
    kiln_value s = DIV(d2, MUL(L(2), op1(c, "square", a[2])));
    return MUL(op1(c, "square", a[1]), op1(c, "exp", NEG(s)));
}

/* ---- issue 28 --------------------------------------------------------- */

/* dirichlet(theta | alpha), both vectors:
 * lgamma(sum alpha) - sum lgamma(alpha) + sum (alpha - 1) log theta */
X(dirichlet_lpdf)
{
    kiln_value t = SUB(op1(c, "gammaln", sum(c, a[1])),
                       sum(c, op1(c, "gammaln", a[1])));
    return ADD(t, sum(c, MUL(SUB(a[1], L(1)), LOG(a[0]))));
}

static kiln_value cast_i64(cb *c, kiln_value x)
{
    if (x < 0)
        return -1;
    kiln_attr at = { "dtype", KILN_ATTR_DTYPE, KILN_I64, 0, 0, NULL, NULL };
    return kiln_graph_op(c->g, "cast", 1, &x, &at, 1, c->err);
}

/* ordered_logistic(y | eta, c), y 0-based in 0 .. K-1, c the K-1
 * increasing cutpoints (a vector).  With a = eta - c[y-1], b = eta - c[y]:
 * y = 0: log1m_inv_logit(b); y = K-1: log_inv_logit(a); otherwise
 * log(inv_logit(a) - inv_logit(b)) = a - sp(a) + log1mexp(b - a) - sp(b)
 * (Stan's log_inv_logit_diff).  The indices are clamped into c and each
 * branch sees its own arguments only where it is taken (as log_erfc);
 * y outside 0 .. K-1 gives -inf. */
X(ordered_logistic_lpmf)
{
    kiln_value y = a[0], eta = a[1], cut = a[2];
    kiln_value k1 = cast_i64(c, sum(c, op2(c, "fill", cut, L(1))));
    kiln_value one = kiln_graph_literal(c->g, 1, KILN_LIT_INT, c->err);
    kiln_value zero = kiln_graph_literal(c->g, 0, KILN_LIT_INT, c->err);
    kiln_value top = SUB(k1, one);
    kiln_value lo = op2(c, "maximum", op2(c, "minimum", SUB(y, one), top),
                        zero);
    kiln_value hi = op2(c, "maximum", op2(c, "minimum", y, top), zero);
    kiln_value av = SUB(eta, op2(c, "take", cut, lo));
    kiln_value bv = SUB(eta, op2(c, "take", cut, hi));
    kiln_value first = op2(c, "le", y, zero);
    kiln_value last = op2(c, "ge", y, k1);
    kiln_value mid = op1(c, "not", op2(c, "or", first, last));
    kiln_value am = where3(c, mid, av, L(1));
    kiln_value bm = where3(c, mid, bv, L(0));
    kiln_value vmid = SUB(am, op1(c, "softplus", am));
    vmid = ADD(vmid, op1(c, "log1mexp", SUB(bm, am)));
    vmid = SUB(vmid, op1(c, "softplus", bm));
    kiln_value v = where3(c, first, log1m_inv_logit(c, bv),
                          where3(c, last, log_inv_logit(c, av), vmid));
    kiln_value out = op2(c, "or", op2(c, "lt", y, zero), op2(c, "gt", y, k1));
    return sum(c, where3(c, out, L(-INFINITY), v));
}

/* beta_binomial(n | N, alpha, beta) = lchoose(N, n)
 * + lbeta(n + alpha, N - n + beta) - lbeta(alpha, beta); -inf for n < 0
 * or n > N (Stan's LOG_ZERO) */
X(beta_binomial_lpmf)
{
    kiln_value n = a[0], N = a[1];
    kiln_value t = ADD(lchoose(c, N, n),
                       lbeta(c, ADD(n, a[2]), ADD(SUB(N, n), a[3])));
    t = SUB(t, lbeta(c, a[2], a[3]));
    kiln_value out = op2(c, "or", op2(c, "lt", n, L(0)), op2(c, "gt", n, N));
    return sum(c, where3(c, out, L(-INFINITY), t));
}

/* skew_normal(y | xi, omega, alpha) =
 * -log(2 pi)/2 - log omega - z^2/2 + log(erfc(-alpha z / sqrt 2)) */
X(skew_normal_lpdf)
{
    kiln_value z = zscore(c, a);
    kiln_value t = SUB(MUL(L(-0.5), op1(c, "square", z)), LOG(a[2]));
    t = ADD(t, log_erfc(c, MUL(MUL(a[3], z), L(-SQRT1_2))));
    return sum(c, SUB(t, L(HALF_LOG_2PI)));
}

/* categorical(y | theta), theta a probability vector, y 0-based */
X(categorical_lpmf)
{
    return sum(c, LOG(op2(c, "take", a[1], a[0])));
}

/* multinomial(y | theta), y a count vector, theta a probability vector:
 * lgamma(sum y + 1) - sum lgamma(y + 1) + sum xlogy(y, theta) */
X(multinomial_lpmf)
{
    kiln_value t = SUB(op1(c, "gammaln", ADD(sum(c, a[0]), L(1))),
                       sum(c, op1(c, "gammaln", ADD(a[0], L(1)))));
    return ADD(t, sum(c, xlogy(c, a[0], a[1])));
}

/* exp_mod_normal(y | mu, sigma, lambda) = log lambda - log 2
 * + lambda (mu - y) + (lambda sigma)^2 / 2 + log(erfc(u)),
 * u = (mu + lambda sigma^2 - y) / (sigma sqrt 2) */
X(exp_mod_normal_lpdf)
{
    kiln_value ls = MUL(a[3], a[2]);
    kiln_value u = DIV(SUB(ADD(a[1], MUL(ls, a[2])), a[0]),
                       MUL(a[2], L(1 / SQRT1_2)));
    kiln_value t = SUB(LOG(a[3]), L(LOG_2));
    t = ADD(t, MUL(a[3], SUB(a[1], a[0])));
    t = ADD(t, MUL(L(0.5), op1(c, "square", ls)));
    return sum(c, ADD(t, log_erfc(c, u)));
}

/* gumbel(y | mu, beta) = -log beta - z - exp(-z) */
X(gumbel_lpdf)
{
    kiln_value z = zscore(c, a);
    return sum(c, SUB(SUB(NEG(LOG(a[2])), z), op1(c, "exp", NEG(z))));
}

/* pareto(y | y_min, alpha) = log alpha + alpha log y_min
 * - (alpha + 1) log y for y >= y_min, -inf below (Stan's LOG_ZERO) */
X(pareto_lpdf)
{
    kiln_value t = ADD(LOG(a[2]), MUL(a[2], LOG(a[1])));
    t = SUB(t, MUL(ADD(a[2], L(1)), LOG(a[0])));
    return sum(c, where3(c, op2(c, "lt", a[0], a[1]), L(-INFINITY), t));
}

/* rayleigh(y | sigma) = log y - 2 log sigma - y^2 / (2 sigma^2) */
X(rayleigh_lpdf)
{
    kiln_value t = SUB(LOG(a[0]), MUL(L(2), LOG(a[1])));
    return sum(c, SUB(t, MUL(L(0.5),
                             op1(c, "square", DIV(a[0], a[1])))));
}

/* von_mises(y | mu, kappa) = kappa cos(y - mu) - log(2 pi) - log I0(kappa)
 * with log I0(kappa) = log(i0e(kappa)) + kappa (kappa >= 0) */
X(von_mises_lpdf)
{
    kiln_value t = MUL(a[2], SUB(op1(c, "cos", SUB(a[0], a[1])), L(1)));
    t = SUB(t, LOG(op1(c, "i0e", a[2])));
    return sum(c, SUB(t, L(2 * HALF_LOG_2PI)));
}

/* ---- log CDFs and CCDFs --------------------------------------------- */

X(lognormal_lcdf)
{
    kiln_value b[3] = { LOG(a[0]), a[1], a[2] };
    return sum(c, log_Phi(c, zscore(c, b)));
}

X(lognormal_lccdf)
{
    kiln_value b[3] = { LOG(a[0]), a[1], a[2] };
    return sum(c, log_Phi(c, NEG(zscore(c, b))));
}

/* exponential(y | beta): log(1 - e^{-beta y}), -beta y */
X(exponential_lcdf)
{
    return sum(c, op1(c, "log1mexp", NEG(MUL(a[1], a[0]))));
}

X(exponential_lccdf) { return sum(c, NEG(MUL(a[1], a[0]))); }

/* gamma(y | alpha, beta): log P(alpha, beta y), log Q(alpha, beta y) */
X(gamma_lcdf)
{
    return sum(c, LOG(op2(c, "gammainc", a[1], MUL(a[2], a[0]))));
}

X(gamma_lccdf)
{
    return sum(c, LOG(op2(c, "gammaincc", a[1], MUL(a[2], a[0]))));
}

/* beta(theta | alpha, beta): log I_theta(alpha, beta) and
 * log I_{1-theta}(beta, alpha) */
X(beta_lcdf)
{
    return sum(c, LOG(op3(c, "betainc", a[1], a[2], a[0])));
}

X(beta_lccdf)
{
    return sum(c, LOG(op3(c, "betainc", a[2], a[1], SUB(L(1), a[0]))));
}

/* student_t(y | nu, mu, sigma) at t = (y - mu)/sigma: the tail beyond |t|
 * is h = I_x(nu/2, 1/2) / 2, x = nu / (nu + t^2) (A&S 26.7.1, 26.5.27);
 * log F(t) = log h for t < 0, log1p(-h) for t >= 0.  sgn = -1 gives the
 * CCDF (F(-t)). */
static kiln_value student_t_lcdf_(cb *c, const kiln_value *a, double sgn)
{
    kiln_value nu = a[1];
    kiln_value b[3] = { a[0], a[2], a[3] };
    kiln_value t = MUL(zscore(c, b), L(sgn));
    kiln_value x = DIV(nu, ADD(nu, op1(c, "square", t)));
    kiln_value h = MUL(L(0.5), op3(c, "betainc", MUL(L(0.5), nu), L(0.5), x));
    return sum(c, where3(c, op2(c, "lt", t, L(0)), LOG(h),
                         op1(c, "log1p", NEG(h))));
}

X(student_t_lcdf) { return student_t_lcdf_(c, a, 1); }
X(student_t_lccdf) { return student_t_lcdf_(c, a, -1); }

#undef X

/* ---- the table ------------------------------------------------------ */

enum { ANY = 0, INT = 1 };   /* argument kinds: a number / an integer */

typedef struct composite {
    const char *name;
    int arity;
    const char *args;       /* for messages: "y, mu, sigma" */
    unsigned int_args;      /* bit i: argument i must be an integer */
    unsigned vec_args;      /* bit i: argument i must be a vector */
    kiln_value (*expand)(cb *, const kiln_value *);
    /* layer composites (composite_nn.c): the builder, the attribute keys
     * they take ("axis, eps") and the largest arity (0: = arity) */
    kiln_value (*nn)(const kiln_nn_call *);
    const char *keys;
    int max_arity;
} composite;

#define C(n, k, s, ints, v) { #n, k, s, ints, v, x_##n, NULL, NULL, 0 }
#define NN(n, lo, hi, s, keys) { #n, lo, s, 0, 0, NULL, kiln_nn_##n, keys, hi }
static const composite table[] = {
    C(normal_lpdf, 3, "y, mu, sigma", 0, 0),
    C(normal_lcdf, 3, "y, mu, sigma", 0, 0),
    C(normal_lccdf, 3, "y, mu, sigma", 0, 0),
    C(student_t_lpdf, 4, "y, nu, mu, sigma", 0, 0),
    C(cauchy_lpdf, 3, "y, mu, sigma", 0, 0),
    C(double_exponential_lpdf, 3, "y, mu, sigma", 0, 0),
    C(logistic_lpdf, 3, "y, mu, sigma", 0, 0),
    C(lognormal_lpdf, 3, "y, mu, sigma", 0, 0),
    C(gamma_lpdf, 3, "y, alpha, beta", 0, 0),
    C(inv_gamma_lpdf, 3, "y, alpha, beta", 0, 0),
    C(exponential_lpdf, 2, "y, beta", 0, 0),
    C(weibull_lpdf, 3, "y, alpha, sigma", 0, 0),
    C(beta_lpdf, 3, "theta, alpha, beta", 0, 0),
    C(uniform_lpdf, 3, "y, alpha, beta", 0, 0),
    C(bernoulli_lpmf, 2, "n, theta", 0, 0),
    C(bernoulli_logit_lpmf, 2, "n, alpha", 0, 0),
    C(binomial_lpmf, 3, "n, N, theta", 0, 0),
    C(binomial_logit_lpmf, 3, "n, N, alpha", 0, 0),
    C(poisson_lpmf, 2, "n, lambda", 0, 0),
    C(poisson_log_lpmf, 2, "n, alpha", 0, 0),
    C(neg_binomial_2_lpmf, 3, "n, mu, phi", 0, 0),
    C(neg_binomial_2_log_lpmf, 3, "n, eta, phi", 0, 0),
    C(categorical_logit_lpmf, 2, "y, beta", 1u, 2u),
    C(dirichlet_lpdf, 2, "theta, alpha", 0, 3u),
    C(ordered_logistic_lpmf, 3, "y, eta, c", 1u, 4u),
    C(beta_binomial_lpmf, 4, "n, N, alpha, beta", 0, 0),
    C(von_mises_lpdf, 3, "y, mu, kappa", 0, 0),
    C(skew_normal_lpdf, 4, "y, xi, omega, alpha", 0, 0),
    C(categorical_lpmf, 2, "y, theta", 1u, 2u),
    C(multinomial_lpmf, 2, "y, theta", 1u, 3u),
    C(exp_mod_normal_lpdf, 4, "y, mu, sigma, lambda", 0, 0),
    C(gumbel_lpdf, 3, "y, mu, beta", 0, 0),
    C(pareto_lpdf, 3, "y, y_min, alpha", 0, 0),
    C(rayleigh_lpdf, 2, "y, sigma", 0, 0),
    C(lognormal_lcdf, 3, "y, mu, sigma", 0, 0),
    C(lognormal_lccdf, 3, "y, mu, sigma", 0, 0),
    C(exponential_lcdf, 2, "y, beta", 0, 0),
    C(exponential_lccdf, 2, "y, beta", 0, 0),
    C(gamma_lcdf, 3, "y, alpha, beta", 0, 0),
    C(gamma_lccdf, 3, "y, alpha, beta", 0, 0),
    C(beta_lcdf, 3, "theta, alpha, beta", 0, 0),
    C(beta_lccdf, 3, "theta, alpha, beta", 0, 0),
    C(student_t_lcdf, 4, "y, nu, mu, sigma", 0, 0),
    C(student_t_lccdf, 4, "y, nu, mu, sigma", 0, 0),
    C(inv_logit, 1, "x", 0, 0),
    C(log_inv_logit, 1, "x", 0, 0),
    C(log1m_inv_logit, 1, "x", 0, 0),
    C(log1p_exp, 1, "x", 0, 0),
    C(log_sum_exp, 2, "a, b", 0, 0),
    C(log_mix, 3, "theta, lp1, lp2", 0, 0),
    C(lbeta, 2, "a, b", 0, 0),
    C(lchoose, 2, "n, k", 0, 0),
    C(trace, 1, "A", 0, 0),
    C(outer, 2, "a, b", 0, 0),
    C(multi_normal_cholesky_lpdf, 3, "y, mu, L", 0, 0),
    C(multi_normal_lpdf, 3, "y, mu, Sigma", 0, 0),
    C(lkj_corr_cholesky_lpdf, 2, "L, eta", 0, 0),
    C(gp_exp_quad_cov, 3, "x, alpha, rho", 0, 0),
    C(i0, 1, "x", 0, 0),
    C(i1, 1, "x", 0, 0),
    /* issue 29: layers */
    NN(softmax, 1, 1, "x", "axis"),
    NN(log_softmax, 1, 1, "x", "axis"),
    NN(layer_norm, 3, 3, "x, w, b", "axis, eps"),
    NN(rms_norm, 2, 2, "x, w", "axis, eps"),
    NN(gelu, 1, 1, "x", "approximate"),
    NN(silu, 1, 1, "x", ""),
    NN(rsqrt, 1, 1, "x", ""),
    NN(var, 1, 1, "x", "axis, ddof, keepdims"),
    NN(arange, 0, 2, "start, n", "shape"),
    NN(argmax, 1, 1, "x", "axis"),
    NN(argmin, 1, 1, "x", "axis"),
    NN(repeat, 1, 1, "x", "repeats, axis"),
    NN(tile, 1, 1, "x", "reps"),
    NN(einsum, 2, 2, "a, b", "spec"),
};
#undef C
#undef NN

#define N_COMPOSITES ((int)(sizeof table / sizeof table[0]))

int kiln_composite_count(void) { return N_COMPOSITES; }

const char *kiln_composite_name(int i)
{
    return i >= 0 && i < N_COMPOSITES ? table[i].name : NULL;
}

int kiln_composite_lookup(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < N_COMPOSITES; i++)
        if (strcmp(table[i].name, name) == 0)
            return i;
    return -1;
}

/* Argument k's name in "y, mu, sigma" into buf. */
static const char *arg_name(const char *args, int k, char *buf, size_t n)
{
    const char *p = args;
    for (int i = 0; i < k && p; i++)
        if ((p = strchr(p, ',')) != NULL)
            p += 2;
    if (!p)
        return "?";
    size_t len = strcspn(p, ",");
    if (len >= n)
        len = n - 1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    return buf;
}

/* Whether `key` is one of the comma-separated words of `keys`. */
static int key_in(const char *keys, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = keys; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, key, n) == 0)
            return 1;
        p += len;
        p += strspn(p, ", ");
    }
    return 0;
}

/* The attributes of a call of d: known keys, none repeated. */
static int check_attrs(const composite *d, const kiln_attr *attrs,
                       int n_attrs, kiln_err *err)
{
    if (n_attrs == 0)
        return 0;
    if (!d->nn || !d->keys[0])
        return kiln_seterr(err, KILN_ERR_TYPE, "%s: takes no attributes",
                           d->name), -1;
    if (!attrs)
        return kiln_seterr(err, KILN_ERR_ARG, "%s: bad attribute list",
                           d->name), -1;
    for (int i = 0; i < n_attrs; i++) {
        if (!attrs[i].key || !key_in(d->keys, attrs[i].key))
            return kiln_seterr(err, KILN_ERR_TYPE, "%s: unknown attribute "
                               "'%.60s' (takes %s)", d->name,
                               attrs[i].key ? attrs[i].key : "(null)",
                               d->keys), -1;
        for (int j = 0; j < i; j++)
            if (strcmp(attrs[j].key, attrs[i].key) == 0)
                return kiln_seterr(err, KILN_ERR_TYPE, "%s: attribute '%s' "
                                   "given twice", d->name, attrs[i].key),
                       -1;
    }
    return 0;
}

kiln_value kiln_composite_build(kiln_graph *g, int ci, int n_in,
                                const kiln_value *in, const kiln_attr *attrs,
                                int n_attrs, kiln_err *err)
{
    if (ci < 0 || ci >= N_COMPOSITES)
        return kiln_seterr(err, KILN_ERR_ARG, "bad composite %d", ci), -1;
    const composite *d = &table[ci];
    if (check_attrs(d, attrs, n_attrs, err))
        return -1;
    int hi = d->max_arity ? d->max_arity : d->arity;
    if (n_in < d->arity || n_in > hi) {
        if (hi != d->arity)
            return kiln_seterr(err, KILN_ERR_TYPE, "%s: expected %d to %d "
                               "arguments (%s), got %d", d->name, d->arity,
                               hi, d->args, n_in), -1;
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "%s: expected %d argument%s (%s), got %d",
                           d->name, d->arity, d->arity == 1 ? "" : "s",
                           d->args, n_in), -1;
    }
    if (n_in > 0 && !in)
        return kiln_seterr(err, KILN_ERR_ARG, "%s: bad input list",
                           d->name), -1;
    for (int k = 0; k < n_in; k++) {
        char nm[32];
        if (in[k] < 0 || in[k] >= g->n_nodes)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "%s: input %d (id %d) is not a value of this "
                               "graph", d->name, k + 1, (int)in[k]), -1;
        const kiln_type *t = &g->nodes[in[k]].type;
        int is_int = t->dtype == KILN_I64 || t->dtype == KILN_I32;
        if (t->dtype == KILN_BOOL ||
            ((d->int_args >> k & 1u) && !is_int))
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "%s: argument %d (%s) has dtype %s; expected "
                               "%s", d->name, k + 1,
                               arg_name(d->args, k, nm, sizeof nm),
                               kiln_dtype_name(t->dtype),
                               (d->int_args >> k & 1u)
                                   ? "an integer (i64 or i32)"
                                   : "a number (f64, f32, i64 or i32)"), -1;
        if ((d->vec_args >> k & 1u) && t->rank != 1)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "%s: argument %d (%s) must be a vector, got "
                               "rank %d", d->name, k + 1,
                               arg_name(d->args, k, nm, sizeof nm), t->rank),
                   -1;
    }
    int mark = g->n_nodes;
    cb c = { g, err };
    kiln_nn_call nc = { g, err, n_in, in, attrs, n_attrs, kiln_graph_op };
    kiln_value v = d->nn ? d->nn(&nc) : d->expand(&c, in);
    if (v < 0) {
        /* prefix the inner op's message with the composite's name */
        char msg[sizeof err->message];
        if (err) {
            snprintf(msg, sizeof msg, "%s", err->message);
            snprintf(err->message, sizeof err->message, "%s: %.900s",
                     d->name, msg);
        }
        kiln_ir_truncate(g, mark);
        return -1;
    }
    return v;
}

/* ---- the builder's entry by name ------------------------------------ */

const char *kiln_ir_op_hint(const char *name, size_t len)
{
    static _Thread_local char text[96];
    kiln_suggestion sg;
    kiln_suggest_init(&sg, name, name ? len : 0);
    for (int i = KILN_OP_LITERAL + 1; i < KILN_OP_COUNT; i++)
        kiln_suggest_offer(&sg, kiln_ir_op_info(i)->name);
    for (int i = 0; i < kiln_composite_count(); i++)
        kiln_suggest_offer(&sg, kiln_composite_name(i));
    return kiln_suggest_text(&sg, text, sizeof text);
}

kiln_value kiln_graph_op(kiln_graph *g, const char *op, int n_in,
                         const kiln_value *in, const kiln_attr *attrs,
                         int n_attrs, kiln_err *err)
{
    if (!g || !op)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_graph_op: NULL "
                           "argument"), -1;
    int o = kiln_ir_op_lookup(op);
    kiln_value dv;   /* tril/triu with k= or f32: composite_nn.c */
    kiln_nn_call nc = { g, err, n_in, in, attrs, n_attrs, kiln_graph_op };
    if (kiln_composite_divert(&nc, o, &dv))
        return dv;
    if (o < 0 && kiln_composite_lookup(op) >= 0)
        return kiln_composite_build(g, kiln_composite_lookup(op), n_in, in,
                                    attrs, n_attrs, err);
    if (o < 0)
        return kiln_seterr(err, KILN_ERR_TYPE, "unknown op '%.200s'%s", op,
                           kiln_ir_op_hint(op, strlen(op))), -1;
    return kiln_ir_graph_op(g, o, op, n_in, in, attrs, n_attrs, err);
}
