/*
 * runtime.c — the runtime function table handed to every kernel call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "runtime.h"
#include "special.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>

/* Row-major CBLAS constraints on a leading dimension: at least the row
 * length of the stored (possibly transposed) matrix, and at least 1. */
static int kiln_runtime_ld_ok(int64_t ld, int64_t row_len)
{
    return ld >= (row_len > 1 ? row_len : 1) && ld <= INT_MAX;
}

/* 1 when BLAS accepts the arguments as they are. */
static int kiln_runtime_gemm_ok(int transa, int transb, int64_t m, int64_t n,
                                int64_t k, int64_t lda, int64_t ldb,
                                int64_t ldc)
{
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return 0;
    return kiln_runtime_ld_ok(lda, transa ? m : k)
        && kiln_runtime_ld_ok(ldb, transb ? k : n)
        && kiln_runtime_ld_ok(ldc, n);
}

/* Element (i, j) of a row-major matrix stored with leading dimension ld,
 * read as its transpose when `trans`. */
static int64_t kiln_runtime_at(int trans, int64_t ld, int64_t i, int64_t j)
{
    return trans ? j * ld + i : i * ld + j;
}

/* gemm by loops, for arguments BLAS would refuse.  Same contract as BLAS:
 * when beta is 0, C is not read (it may hold NaN). */
#define KILN_RUNTIME_GEMM_LOOP(T)                                             \
    for (int64_t i = 0; i < m; i++) {                                         \
        for (int64_t j = 0; j < n; j++) {                                     \
            double acc = 0.0;                                                 \
            for (int64_t p = 0; p < k; p++)                                   \
                acc += (double)a[kiln_runtime_at(transa, lda, i, p)]          \
                     * (double)b[kiln_runtime_at(transb, ldb, p, j)];         \
            T *cij = &c[i * ldc + j];                                         \
            double prev = beta == 0 ? 0.0 : (double)beta * (double)*cij;      \
            *cij = (T)((double)alpha * acc + prev);                           \
        }                                                                     \
    }

/* A product with one row or one column of C and k > 0 as one gemv call
 * (BLAS's gemm with n = 1 is several times slower than its gemv on the
 * same data).  Arguments already passed kiln_runtime_gemm_ok.  Returns 0
 * when the product is no matrix-vector one.  k = 0 stays with gemm:
 * gemv returns at once for an empty matrix, leaving y unscaled. */
#define KILN_RUNTIME_GEMV(gemv)                                               \
    do {                                                                      \
        if (k <= 0 || (m != 1 && n != 1))                                     \
            return 0;                                                         \
        if (n == 1) /* y(m) = op(A) x, x = column 0 of op(B) */               \
            gemv(CblasRowMajor, transa ? CblasTrans : CblasNoTrans,           \
                 (int)(transa ? k : m), (int)(transa ? m : k), alpha, a,      \
                 (int)lda, b, transb ? 1 : (int)ldb, beta, c, (int)ldc);      \
        else /* y(n) = op(B)^T x, x = row 0 of op(A) */                       \
            gemv(CblasRowMajor, transb ? CblasNoTrans : CblasTrans,           \
                 (int)(transb ? n : k), (int)(transb ? k : n), alpha, b,      \
                 (int)ldb, a, transa ? (int)lda : 1, beta, c, 1);             \
        return 1;                                                             \
    } while (0)

static int kiln_runtime_dgemv(int transa, int transb, int64_t m, int64_t n,
                              int64_t k, double alpha, const double *a,
                              int64_t lda, const double *b, int64_t ldb,
                              double beta, double *c, int64_t ldc)
{
    KILN_RUNTIME_GEMV(cblas_dgemv);
}

static int kiln_runtime_sgemv(int transa, int transb, int64_t m, int64_t n,
                              int64_t k, float alpha, const float *a,
                              int64_t lda, const float *b, int64_t ldb,
                              float beta, float *c, int64_t ldc)
{
    KILN_RUNTIME_GEMV(cblas_sgemv);
}

static void kiln_runtime_dgemm(int transa, int transb, int64_t m, int64_t n,
                               int64_t k, double alpha, const double *a,
                               int64_t lda, const double *b, int64_t ldb,
                               double beta, double *c, int64_t ldc)
{
    if (m <= 0 || n <= 0 || k < 0)
        return;
    if (kiln_runtime_gemm_ok(transa, transb, m, n, k, lda, ldb, ldc)) {
        if (kiln_runtime_dgemv(transa, transb, m, n, k, alpha, a, lda, b,
                               ldb, beta, c, ldc))
            return;
        cblas_dgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans,
                    transb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                    (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c,
                    (int)ldc);
        return;
    }
    KILN_RUNTIME_GEMM_LOOP(double)
}

static void kiln_runtime_sgemm(int transa, int transb, int64_t m, int64_t n,
                               int64_t k, float alpha, const float *a,
                               int64_t lda, const float *b, int64_t ldb,
                               float beta, float *c, int64_t ldc)
{
    if (m <= 0 || n <= 0 || k < 0)
        return;
    if (kiln_runtime_gemm_ok(transa, transb, m, n, k, lda, ldb, ldc)) {
        if (kiln_runtime_sgemv(transa, transb, m, n, k, alpha, a, lda, b,
                               ldb, beta, c, ldc))
            return;
        cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans,
                    transb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                    (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c,
                    (int)ldc);
        return;
    }
    KILN_RUNTIME_GEMM_LOOP(float)
}

static const kiln_runtime kiln_runtime_table = {
    .struct_size = sizeof(kiln_runtime),
    .version = 3,
    .exp = exp,
    .expm1 = expm1,
    .log = log,
    .log1p = log1p,
    .sqrt = sqrt,
    .pow = pow,
    .tanh = tanh,
    .sin = sin,
    .cos = cos,
    .erf = erf,
    .erfc = erfc,
    .gammaln = kiln_gammaln,
    .digamma = kiln_digamma,
    .sigmoid = kiln_sigmoid,
    .softplus = kiln_softplus,
    .dgemm = kiln_runtime_dgemm,
    .sgemm = kiln_runtime_sgemm,
    .trigamma = kiln_trigamma,
    /* version 3 */
    .floor = floor,
    .ceil = ceil,
    .trunc = trunc,
    .rint = kiln_round_half_even,
    .round = round,
    .log1mexp = kiln_log1mexp,
    .erfcx = kiln_erfcx,
    .erfinv = kiln_erfinv,
    .erfcinv = kiln_erfcinv,
    .mod = kiln_mod,
    .gammainc = kiln_gammainc,
    .gammaincc = kiln_gammaincc,
    .betainc = kiln_betainc,
    .gammainc_da = kiln_gammainc_da,
    .betainc_da = kiln_betainc_da,
    .betainc_db = kiln_betainc_db,
};

const kiln_runtime *kiln_runtime_get(void)
{
    return &kiln_runtime_table;
}
