/*
 * runtime.c — the runtime function table handed to every kernel call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "ode.h"
#include "runtime.h"
#include "special.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

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

/* A table of ours and the choice its dgemm_rt / sgemm_rt make between
 * BLAS and kiln's loop; rt first, so the table pointer handed to kernels
 * is the struct's. */
typedef struct kiln_runtime_own {
    kiln_runtime rt;
    kiln_gemv_conf gemv;
    struct kiln_runtime_own *next;  /* the interned tables */
} kiln_runtime_own;

/* A product with one row or one column of C and k > 0 as one matrix-
 * vector product: kiln's loop when conf picks it for the shape, else one
 * gemv call (BLAS's gemm with n = 1 is several times slower than its gemv
 * on the same data).  Arguments already passed kiln_runtime_gemm_ok.
 * Returns 0 when the product is no matrix-vector one.  k = 0 stays with
 * gemm: gemv returns at once for an empty matrix, leaving y unscaled.
 * In gemv form (core/runtime/gemv.h): C's column (n = 1) is op(A) times
 * B's column; C's row (m = 1) is op(B)^T times A's row. */
#define KILN_RUNTIME_GEMV(gemv, loop)                                         \
    do {                                                                      \
        if (k <= 0 || (m != 1 && n != 1))                                     \
            return 0;                                                         \
        int tg = n == 1 ? transa : !transb;                                   \
        int64_t rows = n == 1 ? (transa ? k : m) : (transb ? n : k);          \
        int64_t cols = n == 1 ? (transa ? m : k) : (transb ? k : n);          \
        const void *ga = n == 1 ? (const void *)a : (const void *)b;          \
        const void *gx = n == 1 ? (const void *)b : (const void *)a;          \
        int64_t glda = n == 1 ? lda : ldb;                                    \
        int64_t incx = n == 1 ? (transb ? 1 : ldb) : (transa ? lda : 1);      \
        int64_t incy = n == 1 ? ldc : 1;                                      \
        const kiln_blas_info *bi = kiln_blas_get();                           \
        kiln_gemv_conf envc = { bi->gemv_env, { -1, -1 } };                   \
        if (kiln_gemv_use_loop(bi->gemv_env >= 0 ? &envc : conf,              \
                               bi->openblas, tg, rows, cols))                 \
            loop(tg, rows, cols, alpha, ga, glda, gx, incx, beta, c, incy);   \
        else                                                                  \
            gemv(CblasRowMajor, tg ? CblasTrans : CblasNoTrans, (int)rows,    \
                 (int)cols, alpha, ga, (int)glda, gx, (int)incx, beta, c,     \
                 (int)incy);                                                  \
        return 1;                                                             \
    } while (0)

static int kiln_runtime_dgemv(const kiln_gemv_conf *conf, int transa,
                              int transb, int64_t m, int64_t n, int64_t k,
                              double alpha, const double *a, int64_t lda,
                              const double *b, int64_t ldb, double beta,
                              double *c, int64_t ldc)
{
    KILN_RUNTIME_GEMV(cblas_dgemv, kiln_gemv_loop_d);
}

static int kiln_runtime_sgemv(const kiln_gemv_conf *conf, int transa,
                              int transb, int64_t m, int64_t n, int64_t k,
                              float alpha, const float *a, int64_t lda,
                              const float *b, int64_t ldb, float beta,
                              float *c, int64_t ldc)
{
    KILN_RUNTIME_GEMV(cblas_sgemv, kiln_gemv_loop_s);
}

/* gemm under a choice for its matrix-vector products (conf NULL: the
 * built-in one): the gemv path, else CBLAS when it can read the operands
 * (OpenBLAS's threads set before its first call), else the loop. */
#define KILN_RUNTIME_GEMM_CONF(T, gemv, cblas_gemm)                           \
    if (m <= 0 || n <= 0 || k < 0)                                            \
        return;                                                               \
    if (kiln_runtime_gemm_ok(transa, transb, m, n, k, lda, ldb, ldc)) {       \
        if (gemv(conf, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta,  \
                 c, ldc))                                                     \
            return;                                                           \
        (void)kiln_blas_get();                                                \
        cblas_gemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans,         \
                   transb ? CblasTrans : CblasNoTrans, (int)m, (int)n,        \
                   (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c,          \
                   (int)ldc);                                                 \
        return;                                                               \
    }                                                                         \
    KILN_RUNTIME_GEMM_LOOP(T)

static void kiln_runtime_dgemm_conf(const kiln_gemv_conf *conf, int transa,
                                    int transb, int64_t m, int64_t n,
                                    int64_t k, double alpha, const double *a,
                                    int64_t lda, const double *b, int64_t ldb,
                                    double beta, double *c, int64_t ldc)
{
    KILN_RUNTIME_GEMM_CONF(double, kiln_runtime_dgemv, cblas_dgemm)
}

static void kiln_runtime_sgemm_conf(const kiln_gemv_conf *conf, int transa,
                                    int transb, int64_t m, int64_t n,
                                    int64_t k, float alpha, const float *a,
                                    int64_t lda, const float *b, int64_t ldb,
                                    float beta, float *c, int64_t ldc)
{
    KILN_RUNTIME_GEMM_CONF(float, kiln_runtime_sgemv, cblas_sgemm)
}

static void kiln_runtime_dgemm(int transa, int transb, int64_t m, int64_t n,
                               int64_t k, double alpha, const double *a,
                               int64_t lda, const double *b, int64_t ldb,
                               double beta, double *c, int64_t ldc)
{
    kiln_runtime_dgemm_conf(NULL, transa, transb, m, n, k, alpha, a, lda, b,
                            ldb, beta, c, ldc);
}

static void kiln_runtime_sgemm(int transa, int transb, int64_t m, int64_t n,
                               int64_t k, float alpha, const float *a,
                               int64_t lda, const float *b, int64_t ldb,
                               float beta, float *c, int64_t ldc)
{
    kiln_runtime_sgemm_conf(NULL, transa, transb, m, n, k, alpha, a, lda, b,
                            ldb, beta, c, ldc);
}

static kiln_runtime_own *kiln_runtime_interned;

/* The choice of the table rt: the static table's, an interned one's, or
 * for a table that is none of ours (a caller's copy, against the contract
 * of dgemm_rt) the built-in one, without reading past its kiln_runtime.
 * The interned list only grows and its nodes are never freed, so it is
 * read without the lock (the head is published with release order). */
static const kiln_gemv_conf *kiln_runtime_conf(const kiln_runtime *rt)
{
    for (const kiln_runtime_own *t = __atomic_load_n(&kiln_runtime_interned,
                                                     __ATOMIC_ACQUIRE);
         t; t = t->next)
        if (&t->rt == rt)
            return &t->gemv;
    return NULL;
}

/* The table's own choice (the contract of dgemm_rt: rt is the table the
 * entry was read from). */
static void kiln_runtime_dgemm_rt(const kiln_runtime *rt, int transa,
                                  int transb, int64_t m, int64_t n, int64_t k,
                                  double alpha, const double *a, int64_t lda,
                                  const double *b, int64_t ldb, double beta,
                                  double *c, int64_t ldc)
{
    kiln_runtime_dgemm_conf(kiln_runtime_conf(rt), transa, transb, m, n, k,
                            alpha, a, lda, b, ldb, beta, c, ldc);
}

static void kiln_runtime_sgemm_rt(const kiln_runtime *rt, int transa,
                                  int transb, int64_t m, int64_t n, int64_t k,
                                  float alpha, const float *a, int64_t lda,
                                  const float *b, int64_t ldb, float beta,
                                  float *c, int64_t ldc)
{
    kiln_runtime_sgemm_conf(kiln_runtime_conf(rt), transa, transb, m, n, k,
                            alpha, a, lda, b, ldb, beta, c, ldc);
}

static const kiln_runtime_own kiln_runtime_table = { .rt = {
    .struct_size = sizeof(kiln_runtime),
    .version = 6,
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
    /* version 4 */
    .dgemm_rt = kiln_runtime_dgemm_rt,
    .sgemm_rt = kiln_runtime_sgemm_rt,
    /* version 5: the LAPACK entries, the Bessel functions, then the ODE
     * solver */
    .lapack_run = kiln_runtime_lapack_run,
    .i0e = kiln_i0e,
    .i1e = kiln_i1e,
    .ode_solve = kiln_ode_solve,
    /* version 6 */
    .gemm_batched = kiln_runtime_gemm_batched,
}, .gemv = { KILN_GEMV_AUTO, { -1, -1 } } };

const kiln_runtime *kiln_runtime_get(void)
{
    return &kiln_runtime_table.rt;
}

static pthread_mutex_t kiln_runtime_lock = PTHREAD_MUTEX_INITIALIZER;

static int kiln_runtime_same(const kiln_gemv_conf *x, const kiln_gemv_conf *y)
{
    return x->mode == y->mode && x->max_cols[0] == y->max_cols[0]
        && x->max_cols[1] == y->max_cols[1];
}

const kiln_runtime *kiln_runtime_for(const kiln_gemv_conf *conf)
{
    if (!conf || kiln_runtime_same(conf, &kiln_runtime_table.gemv))
        return &kiln_runtime_table.rt;
    pthread_mutex_lock(&kiln_runtime_lock);
    kiln_runtime_own *t = kiln_runtime_interned;
    while (t && !kiln_runtime_same(conf, &t->gemv))
        t = t->next;
    if (!t && (t = malloc(sizeof *t)) != NULL) {
        *t = kiln_runtime_table;
        t->gemv = *conf;
        t->next = kiln_runtime_interned;
        __atomic_store_n(&kiln_runtime_interned, t, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&kiln_runtime_lock);
    return t ? &t->rt : NULL;
}
