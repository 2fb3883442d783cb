/*
 * free.c — the inverses of Stan's constraining transforms, for
 * kiln_model_unconstrain (StanHeaders 2.21 stan/math/prim/mat/fun/
 * *_free.hpp, the Stan Reference Manual "Constraint transforms";
 * sum_to_zero: the inverse of Stan 2.36's isometric map, solved from the
 * end).  Each is the exact inverse of core/ir/param.c's transform:
 *
 *   simplex           y_k = logit(x_k / (x_k + ... + x_K)) + log(K-1-k)
 *   ordered           y_0 = x_0, y_k = log(x_k - x_{k-1})
 *   positive_ordered  y_0 = log x_0, then as ordered
 *   unit_vector       y = x
 *   sum_to_zero       w_N = -x_N / N, w_i = (sum_{m>i} w_m - x_i) / i,
 *                     y_{i-1} = w_i sqrt(i (i+1))
 *   cholesky_factor_corr / corr_matrix: the CPCs z_ij = x_ij / sqrt(1 -
 *                     sum_{m<j} x_im^2), y = atanh(z), row by row /
 *                     column by column (corr_matrix from the Cholesky
 *                     factor of x: Stan 2.21's corr_matrix_free goes
 *                     through a pivoted LDLT, which gives the same CPCs
 *                     when it does not pivot)
 *   cholesky_factor_cov / cov_matrix: the lower triangle row by row, log
 *                     on the diagonal (cov_matrix from its Cholesky
 *                     factor)
 *
 * The Cholesky factor here is the plain column algorithm (Golub & Van
 * Loan, "Matrix Computations", 4th ed., Alg. 4.2.1), run once per call
 * on one parameter; the density's linear algebra is not done here.
 */
#include "free.h"

#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-8

static int bad(kiln_err *err, const char *name, const char *what, double v)
{
    return kiln_seterr(err, KILN_ERR_ARG,
                       "unconstrain: parameter '%s' is not %s (%.17g)", name,
                       what, v);
}

/* Lower Cholesky factor of the symmetric K x K a into l (row-major);
 * -1 when a is not positive definite. */
static int cholesky(const double *a, int64_t K, double *l)
{
    memset(l, 0, sizeof *l * (size_t)(K * K));
    for (int64_t j = 0; j < K; j++) {
        double s = a[j * K + j];
        for (int64_t k = 0; k < j; k++)
            s -= l[j * K + k] * l[j * K + k];
        if (!(s > 0))
            return -1;
        double d = sqrt(s);
        l[j * K + j] = d;
        for (int64_t i = j + 1; i < K; i++) {
            double t = a[i * K + j];
            for (int64_t k = 0; k < j; k++)
                t -= l[i * K + k] * l[j * K + k];
            l[i * K + j] = t / d;
        }
    }
    return 0;
}

static int check_symmetric(const double *x, int64_t K, const char *name,
                           kiln_err *err)
{
    for (int64_t i = 0; i < K; i++)
        for (int64_t j = 0; j < i; j++)
            if (!(fabs(x[i * K + j] - x[j * K + i]) <= TOL))
                return bad(err, name, "symmetric: the difference of an "
                           "entry and its transpose is",
                           x[i * K + j] - x[j * K + i]);
    return 0;
}

/* The CPCs (atanh) of a Cholesky factor of a correlation matrix. */
static int cpcs(const double *L, int64_t K, int colmajor, const char *name,
                double *y, kiln_err *err)
{
    int64_t n = K * (K - 1) / 2;
    for (int64_t i = 0; i < K; i++) {
        double ss = 0;
        for (int64_t j = 0; j < K; j++) {
            double v = L[i * K + j];
            if (j > i && v != 0)
                return bad(err, name, "lower triangular: an entry above the "
                           "diagonal is", v);
            if (j == i && !(v > 0))
                return bad(err, name, "a Cholesky factor: a diagonal entry "
                           "is", v);
            if (j < i) {
                double z = v / sqrt(1 - ss);
                int64_t pos = colmajor ? j * (2 * K - j - 1) / 2 + (i - j - 1)
                                       : i * (i - 1) / 2 + j;
                if (!(fabs(z) < 1) || pos >= n)
                    return bad(err, name, "a Cholesky factor of a "
                               "correlation matrix: a partial correlation "
                               "is", z);
                y[pos] = atanh(z);
            }
            if (j <= i)
                ss += v * v;
        }
        if (!(fabs(ss - 1) <= TOL))
            return bad(err, name, "a Cholesky factor of a correlation "
                       "matrix: a row's squared norm is", ss);
    }
    return 0;
}

static int chol_pack(const double *L, int64_t M, int64_t N,
                     const char *name, double *y, kiln_err *err)
{
    int64_t p = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < N; k++) {
            double v = L[m * N + k];
            if (m < N && k > m) {
                if (v != 0)
                    return bad(err, name, "lower triangular: an entry above "
                               "the diagonal is", v);
                continue;
            }
            if (m < N && k == m) {
                if (!(v > 0))
                    return bad(err, name, "a Cholesky factor: a diagonal "
                               "entry is", v);
                v = log(v);
            }
            y[p++] = v;
        }
    return 0;
}

/* One vector (K values at x) of a vector transform. */
static int free_vector(int tr, const char *name, int64_t K, const double *x,
                       double *y, kiln_err *err);

int kiln_model_free_transform(int tr, const char *name, int crank,
                              const int64_t *cshape, const double *x,
                              double *y, kiln_err *err)
{
    int64_t ne = 1;
    for (int k = 0; k < crank; k++)
        ne *= cshape[k];
    for (int64_t e = 0; e < ne; e++)
        if (isnan(x[e]))
            return kiln_seterr(err, KILN_ERR_ARG,
                               "unconstrain: parameter '%s' has a NaN", name);
    if (tr >= KILN_TRANSFORM_SIMPLEX && tr <= KILN_TRANSFORM_SUM_TO_ZERO) {
        /* vectors along the last axis; the unconstrained ones one shorter
         * for simplex and sum_to_zero */
        int64_t K = cshape[crank - 1];
        int64_t Ku = K - (tr == KILN_TRANSFORM_SIMPLEX ||
                          tr == KILN_TRANSFORM_SUM_TO_ZERO);
        for (int64_t r = 0; K > 0 && r < ne / K; r++) {
            int rc = free_vector(tr, name, K, x + r * K, y + r * Ku, err);
            if (rc)
                return rc;
        }
        return 0;
    }
    int64_t K = cshape[0];
    switch (tr) {
    case KILN_TRANSFORM_CHOLESKY_FACTOR_CORR:
        return cpcs(x, K, 0, name, y, err);
    case KILN_TRANSFORM_CHOLESKY_FACTOR_COV:
        return chol_pack(x, K, cshape[1], name, y, err);
    case KILN_TRANSFORM_CORR_MATRIX:
    case KILN_TRANSFORM_COV_MATRIX: {
        if (check_symmetric(x, K, name, err))
            return err ? err->code : KILN_ERR_ARG;
        if (tr == KILN_TRANSFORM_CORR_MATRIX)
            for (int64_t k = 0; k < K; k++)
                if (!(fabs(x[k * K + k] - 1) <= TOL))
                    return bad(err, name, "a correlation matrix: a diagonal "
                               "entry is", x[k * K + k]);
        double *L = malloc(sizeof *L * (size_t)(K * K));
        if (!L)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        int rc = cholesky(x, K, L)
                     ? kiln_seterr(err, KILN_ERR_ARG,
                                   "unconstrain: parameter '%s' is not "
                                   "positive definite", name)
                 : tr == KILN_TRANSFORM_CORR_MATRIX
                     ? cpcs(L, K, 1, name, y, err)
                     : chol_pack(L, K, K, name, y, err);
        free(L);
        return rc;
    }
    default:
        return kiln_seterr(err, KILN_ERR_ARG,
                           "unconstrain: parameter '%s': unknown transform %d",
                           name, tr);
    }
}

static int free_vector(int tr, const char *name, int64_t K, const double *x,
                       double *y, kiln_err *err)
{
    switch (tr) {
    case KILN_TRANSFORM_SIMPLEX: {
        double s = 0;
        for (int64_t k = 0; k < K; k++) {
            if (!(x[k] >= 0))
                return bad(err, name, "a simplex: a value is", x[k]);
            s += x[k];
        }
        if (!(fabs(s - 1) <= TOL))
            return bad(err, name, "a simplex: its values sum to", s);
        double stick = x[K - 1];
        for (int64_t k = K - 2; k >= 0; k--) {
            stick += x[k];
            double z = x[k] / stick;
            y[k] = log(z) - log1p(-z) + log((double)(K - 1 - k));
        }
        return 0;
    }
    case KILN_TRANSFORM_ORDERED:
    case KILN_TRANSFORM_POSITIVE_ORDERED:
        if (tr == KILN_TRANSFORM_POSITIVE_ORDERED && !(x[0] > 0))
            return bad(err, name, "positive_ordered: its first value is",
                       x[0]);
        y[0] = tr == KILN_TRANSFORM_ORDERED ? x[0] : log(x[0]);
        for (int64_t k = 1; k < K; k++) {
            if (!(x[k] > x[k - 1]))
                return bad(err, name, "ordered: a value minus the one "
                           "before is", x[k] - x[k - 1]);
            y[k] = log(x[k] - x[k - 1]);
        }
        return 0;
    case KILN_TRANSFORM_UNIT_VECTOR: {
        double s = 0;
        for (int64_t k = 0; k < K; k++)
            s += x[k] * x[k];
        if (!(fabs(s - 1) <= TOL))
            return bad(err, name, "a unit vector: its squared norm is", s);
        memcpy(y, x, sizeof *y * (size_t)K);
        return 0;
    }
    case KILN_TRANSFORM_SUM_TO_ZERO: {
        double s = 0;
        for (int64_t k = 0; k < K; k++)
            s += x[k];
        if (!(fabs(s) <= TOL))
            return bad(err, name, "a sum-to-zero vector: its values sum to",
                       s);
        int64_t N = K - 1;
        double suffix = 0;     /* sum of w_m for m > i */
        for (int64_t i = N; i >= 1; i--) {
            double w = (suffix - x[i]) / (double)i;
            y[i - 1] = w * sqrt((double)i * (double)(i + 1));
            suffix += w;
        }
        return 0;
    }
    default:
        return kiln_seterr(err, KILN_ERR_ARG,
                           "unconstrain: parameter '%s': unknown transform %d",
                           name, tr);
    }
}
