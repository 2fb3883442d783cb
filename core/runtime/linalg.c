/*
 * linalg.c — the runtime table's lapack_run (version 5, ABI 1.9): the
 * LINALG kernels' operations (kiln_linalg_op, include/kiln/backend.h)
 * over strided f64 views with leading batch axes.
 *
 * Library: LAPACK through its Fortran symbols (dpotrf_, dtrtrs_,
 * dgetrf_, dgetrs_, dgetri_), prototyped here (no LAPACKE: it would only
 * add row-major transpose copies).  configure links OpenBLAS's own LAPACK
 * when the BLAS is OpenBLAS (blocked, tuned potrf/getrf sharing the
 * BLAS's threads), else Debian's -llapack (reference LAPACK);
 * docs/backends.md "LAPACK".  Character arguments get their hidden
 * Fortran length (1) appended, which gfortran's reference LAPACK reads
 * and OpenBLAS's C interface ignores.
 *
 * Layout, generic path: each batch element is copied from its
 * (row-major, any stride) view into a column-major scratch matrix, which
 * LAPACK overwrites anyway, and the result copied back; views of any
 * strides (a transpose read in place) work.
 *
 * Fast paths (la_fast), for a row-major contiguous matrix A (unit last
 * stride, rows n apart) whose output is contiguous too and is A's own
 * memory or disjoint from it: a row-major matrix read column-major is
 * its transpose, so
 *   POTRF: A copied into the output, dpotrf("U") in place (A^T's upper
 *     triangle is A's lower; U = L^T read row-major is L), then the
 *     row-major strict upper triangle zeroed;
 *   TRSM with a vector b: A passed as it is (dtrtrs does not write it)
 *     with L<->U and N<->T swapped, b copied into the output and solved
 *     there;
 *   GESV with a vector b: A copied (memcpy) into scratch, LU of A^T,
 *     dgetrs("T") on b in the output;
 *   GETRI: A copied into the output, (A^T)^-1 in place, which read
 *     row-major is A^-1;
 *   LOGDET, SIGNDET, DET: A copied (memcpy) into scratch (det A^T =
 *     det A).
 * Matrix right-hand sides, POTRF_BWD and strided views take the generic
 * path.
 *
 * Scratch: on the stack when it fits LA_STACK_WORDS doubles and
 * LA_STACK_PIV pivots (n <= 22 for every op), else a per-thread buffer
 * that only grows, freed by a pthread key's destructor when the thread
 * exits: no malloc per call after a thread's first large one.
 *
 * Gradient of the Cholesky factor (KILN_LINALG_POTRF_BWD): I. Murray,
 * "Differentiation of the Cholesky decomposition", arXiv:1602.07527
 * (2016), eq. 10: with P = Phi(L^T Lbar) (lower triangle, diagonal
 * halved) and S = L^-T P L^-1, the derivative with respect to A's lower
 * triangle (the only part the factorisation reads) is
 * tril(S + S^T) - diag(S) (as PyTensor's Cholesky.L_op).
 */
#include "runtime.h"
#include "gemv.h"

#include <kiln/kiln.h>

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#if KILN_HAVE_LAPACK
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda,
             int *info, size_t uplo_len);
void dtrtrs_(const char *uplo, const char *trans, const char *diag,
             const int *n, const int *nrhs, const double *a, const int *lda,
             double *b, const int *ldb, int *info, size_t l1, size_t l2,
             size_t l3);
void dgetrf_(const int *m, const int *n, double *a, const int *lda,
             int *ipiv, int *info);
void dgetrs_(const char *trans, const int *n, const int *nrhs,
             const double *a, const int *lda, const int *ipiv, double *b,
             const int *ldb, int *info, size_t trans_len);
void dgetri_(const int *n, double *a, const int *lda, const int *ipiv,
             double *work, const int *lwork, int *info);
#endif

static int la_err(char *buf, size_t n, int code, const char *fmt, ...)
{
    if (buf && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, n, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ---- scratch ---------------------------------------------------------- */

enum { LA_STACK_WORDS = 2048, LA_STACK_PIV = 256 };

typedef struct la_tls {
    void *w;        /* nw doubles */
    void *ipiv;     /* npiv ints */
    size_t nw, npiv;
} la_tls;

static pthread_key_t la_key;
static pthread_once_t la_once = PTHREAD_ONCE_INIT;
static int la_key_ok;

static void la_tls_free(void *p)
{
    la_tls *t = p;
    free(t->w);
    free(t->ipiv);
    free(t);
}

static void la_key_make(void)
{
    la_key_ok = pthread_key_create(&la_key, la_tls_free) == 0;
}

/* *p (of *cap elements of size elt) grown to at least want elements;
 * nonzero when out of memory (*p kept). */
static int la_grow(void **p, size_t *cap, size_t want, size_t elt)
{
    if (*cap >= want)
        return 0;
    void *q = realloc(*p, want * elt);
    if (!q)
        return 1;
    *p = q;
    *cap = want;
    return 0;
}

/* This thread's buffers, grown to at least nw doubles and npiv ints;
 * NULL when out of memory. */
static la_tls *la_tls_get(size_t nw, size_t npiv)
{
    pthread_once(&la_once, la_key_make);
    if (!la_key_ok)
        return NULL;
    la_tls *t = pthread_getspecific(la_key);
    if (!t) {
        if (!(t = calloc(1, sizeof *t)))
            return NULL;
        if (pthread_setspecific(la_key, t)) {
            free(t);
            return NULL;
        }
    }
    if (la_grow(&t->w, &t->nw, nw, sizeof(double)) ||
        la_grow(&t->ipiv, &t->npiv, npiv, sizeof(int)))
        return NULL;
    return t;
}

void *kiln_runtime_scratch(size_t n_doubles)
{
    la_tls *t = la_tls_get(n_doubles ? n_doubles : 1, 0);
    return t ? t->w : NULL;
}

/* Element (i, j) of the matrix of batch offset `off` of view v (the
 * last two axes; a rank-1 core reads j = 0 as element i). */
static double *la_at(const kiln_view *v, int64_t off, int core, int64_t i,
                     int64_t j)
{
    double *d = (double *)v->data + off;
    if (core == 1)
        return d + i * v->strides[v->rank - 1];
    return d + i * v->strides[v->rank - 2] + j * v->strides[v->rank - 1];
}

static void la_load(double *dst, const kiln_view *v, int64_t off, int core,
                    int64_t m, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++)
            dst[i + j * m] = *la_at(v, off, core, i, j);
}

static void la_store(const kiln_view *v, int64_t off, int core,
                     const double *src, int64_t m, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++)
            *la_at(v, off, core, i, j) = src[i + j * m];
}

/* The core (matrix / vector) rank of each argument of op. */
static int la_core_in(uint32_t op, uint32_t i, const kiln_view *in,
                      uint32_t n_in)
{
    switch (op) {
    case KILN_LINALG_DIAG:
        return 1;
    case KILN_LINALG_TRSM_LN: case KILN_LINALG_TRSM_LT:
    case KILN_LINALG_TRSM_UN: case KILN_LINALG_TRSM_UT:
    case KILN_LINALG_GESV:
        /* B a vector when its rank is one less than A's */
        if (i == 1 && n_in == 2 && in[1].rank == in[0].rank - 1)
            return 1;
        return 2;
    default:
        return 2;
    }
}

static int la_core_out(uint32_t op, const kiln_view *in, uint32_t n_in)
{
    switch (op) {
    case KILN_LINALG_LOGDET: case KILN_LINALG_SIGNDET: case KILN_LINALG_DET:
        return 0;
    case KILN_LINALG_DIAGONAL: return 1;
    default: return la_core_in(op, 1, in, n_in) == 1 && n_in == 2 &&
                    op != KILN_LINALG_POTRF_BWD ? 1 : 2;
    }
}

/* One batch element: the matrices at the given offsets. */
typedef struct la_job {
    uint32_t op;
    const kiln_view *in, *out;
    uint32_t n_in;
    int64_t in_off[2], out_off;
    int core_in[2], core_out;
    int64_t batch;          /* flat batch index, for messages */
    int batched;
    double *w;              /* scratch, sized by la_scratch */
    int *ipiv;
    char *errbuf;
    size_t errbuf_size;
} la_job;

static void la_batch_note(const la_job *j, char *note, size_t n)
{
    if (j->batched)
        snprintf(note, n, ", batch element %lld", (long long)j->batch);
    else
        note[0] = 0;
}

#if KILN_HAVE_LAPACK
/* Abar from L and Lbar (n x n, column-major in w[0], w[nn]); result in
 * w[0]. */
static int la_potrf_bwd(double *L, double *G, double *M, int n)
{
    /* M = L^T G */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int k = i; k < n; k++)   /* L[k, i] = 0 for k < i */
                s += L[k + i * n] * G[k + j * n];
            M[i + j * n] = s;
        }
    /* P = Phi(M): lower triangle, diagonal halved */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
            M[i + j * n] = i > j ? M[i + j * n]
                         : i == j ? 0.5 * M[i + j * n] : 0.0;
    /* Y = L^-T P (in M) */
    int info = 0;
    dtrtrs_("L", "T", "N", &n, &n, L, &n, M, &n, &info, 1, 1, 1);
    if (info)
        return info;
    /* S = Y L^-1, i.e. S^T = L^-T Y^T: transpose into G, solve, S^T in G */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
            G[i + j * n] = M[j + i * n];
    dtrtrs_("L", "T", "N", &n, &n, L, &n, G, &n, &info, 1, 1, 1);
    if (info)
        return info;
    /* Abar = tril(S + S^T) - diag(S); S[i, j] = G[j + i n] */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            double sij = G[j + i * n], sji = G[i + j * n];
            L[i + j * n] = i > j ? sij + sji : i == j ? sij : 0.0;
        }
    return 0;
}
#endif

#if KILN_HAVE_LAPACK
/* From the LU factors of A (dgetrf's a and ipiv, n x n, column-major),
 * det A = (-1)^(row swaps) prod U[i,i]: log|det A| (-inf when singular),
 * its sign (-1, +1; 0 when singular; NaN when a pivot is NaN) or det A
 * (0 when singular), as numpy.linalg.slogdet and det. */
static double la_det(uint32_t op, const double *a, const int *ipiv, int n)
{
    double s = 0, prod = 1;
    int swaps = 0, neg = 0;
    for (int i = 0; i < n; i++) {
        double u = a[i + (size_t)i * n];
        swaps ^= ipiv[i] != i + 1;
        neg ^= (ipiv[i] != i + 1) ^ (u < 0);
        s += log(fabs(u));
        prod *= u;
    }
    if (op == KILN_LINALG_LOGDET)
        return s;
    if (isnan(s))
        return NAN;
    if (op == KILN_LINALG_SIGNDET)
        return isinf(s) && s < 0 ? 0.0 : neg ? -1.0 : 1.0;
    if (isinf(s) && s < 0)
        return 0.0;
    return swaps ? -prod : prod;
}

/* LU of the n x n column-major a in place (pivots in j->ipiv); a zero
 * pivot is an error. */
static int la_getrf(la_job *j, double *a, int n, const char *note)
{
    int info = 0;
    dgetrf_(&n, &n, a, &n, j->ipiv, &info);
    if (info > 0)
        return la_err(j->errbuf, j->errbuf_size, KILN_ERR_RUNTIME,
                      "singular matrix (U[%d,%d] of its LU factorisation is "
                      "zero%s)", info - 1, info - 1, note);
    return 0;
}
#endif

#if KILN_HAVE_LAPACK
/* After dpotrf of the column-major m (n x n) with its info: the error,
 * or every element NaN (POTRF_NAN, as PyTensor's on_error="nan"), or the
 * other triangle zeroed (upper: the factor is in m's upper triangle). */
static int la_potrf_done(la_job *j, double *m, int n, int info, int upper,
                         const char *note)
{
    if (info > 0 && j->op != KILN_LINALG_POTRF_NAN)
        return la_err(j->errbuf, j->errbuf_size, KILN_ERR_RUNTIME,
                      "not positive definite (leading minor %d of %d%s)",
                      info, n, note);
    for (int c = 0; c < n; c++)
        for (int r = 0; r < n; r++)
            if (info > 0)
                m[r + (size_t)c * n] = NAN;
            else if (upper ? r > c : r < c)
                m[r + (size_t)c * n] = 0.0;
    return 0;
}

/* The solve of a TRSM / GESV job (GESV: a holds dgetrf's LU, pivots in
 * j->ipiv) for the k columns of the column-major b (n x k) in place.
 * transposed: a holds A^T (a row-major A read column-major), so lower
 * and upper, N and T swap. */
static int la_trs(la_job *j, const double *a, double *b, int n, int k,
                  int transposed, const char *note)
{
    int info = 0;
    if (j->op == KILN_LINALG_GESV) {
        dgetrs_(transposed ? "T" : "N", &n, &k, a, &n, j->ipiv, b, &n, &info,
                1);
        return 0;
    }
    int lower = j->op <= KILN_LINALG_TRSM_LT;
    int tr = j->op == KILN_LINALG_TRSM_LT || j->op == KILN_LINALG_TRSM_UT;
    dtrtrs_(lower != transposed ? "L" : "U", tr != transposed ? "T" : "N",
            "N", &n, &k, a, &n, b, &n, &info, 1, 1, 1);
    if (info > 0)
        return la_err(j->errbuf, j->errbuf_size, KILN_ERR_RUNTIME,
                      "singular triangular matrix (diagonal element %d is "
                      "zero%s)", info - 1, note);
    return 0;
}

/* Whether the n x n matrix (core 2) or n-vector (core 1) of view v at
 * offset off is row-major contiguous. */
static int la_dense(const kiln_view *v, int core, int64_t n)
{
    return v->strides[v->rank - 1] == 1 &&
           (core == 1 || n == 1 || v->strides[v->rank - 2] == n);
}

/* Whether memory [p, p+np) and [q, q+nq) (doubles) are disjoint, or
 * (same = 1) start at the same place: an output then may be written
 * while the input is read (in place: the input is copied first). */
static int la_apart(const double *p, int64_t np, const double *q,
                    int64_t nq, int same)
{
    return (same && p == q) || p + np <= q || q + nq <= p;
}

/* The fast paths (file comment): -1 when this job does not qualify,
 * else what la_one returns. */
static int la_fast(la_job *j, int n, const char *note)
{
    const kiln_view *A = &j->in[0], *O = j->out;
    if (!la_dense(A, 2, n))
        return -1;
    const double *a = (const double *)A->data + j->in_off[0];
    double *o = (double *)O->data + j->out_off;
    int64_t nn = (int64_t)n * n;
    int info = 0;
    switch (j->op) {
    case KILN_LINALG_POTRF:
    case KILN_LINALG_POTRF_NAN:
        if (!la_dense(O, 2, n) || !la_apart(o, nn, a, nn, 1))
            return -1;
        memmove(o, a, (size_t)nn * sizeof *o);
        dpotrf_("U", &n, o, &n, &info, 1);
        return la_potrf_done(j, o, n, info, 1, note);
    case KILN_LINALG_TRSM_LN: case KILN_LINALG_TRSM_LT:
    case KILN_LINALG_TRSM_UN: case KILN_LINALG_TRSM_UT:
    case KILN_LINALG_GESV: {
        const kiln_view *B = &j->in[1];
        if (j->core_in[1] != 1 || !la_dense(O, 1, n))
            return -1;
        const double *b = (const double *)B->data + j->in_off[1];
        int64_t sb = B->strides[B->rank - 1];
        /* o is written from b (safe in place: o[i] = b[i sb] never
         * overwrites what a later i reads), then solved while A is read
         * (GESV reads A's copy) */
        if (!la_apart(o, n, a, nn, j->op == KILN_LINALG_GESV) ||
            (o != b && !la_apart(o, n, sb < 0 ? b + sb * (n - 1) : b,
                                 1 + (sb < 0 ? -sb : sb) * (n - 1), 0)))
            return -1;
        if (j->op == KILN_LINALG_GESV) {
            double *lu = j->w;
            memcpy(lu, a, (size_t)nn * sizeof *lu);
            if ((info = la_getrf(j, lu, n, note)))
                return info;
            a = lu;
        }
        if (o != b || sb != 1)
            for (int i = 0; i < n; i++)
                o[i] = b[i * sb];
        return la_trs(j, a, o, n, 1, 1, note);
    }
    case KILN_LINALG_GETRI: {
        if (!la_dense(O, 2, n) || !la_apart(o, nn, a, nn, 1))
            return -1;
        memmove(o, a, (size_t)nn * sizeof *o);
        if ((info = la_getrf(j, o, n, note)))
            return info;
        int lwork = n * n;
        dgetri_(&n, o, &n, j->ipiv, j->w, &lwork, &info);
        return 0;
    }
    case KILN_LINALG_LOGDET:
    case KILN_LINALG_SIGNDET:
    case KILN_LINALG_DET:
        memcpy(j->w, a, (size_t)nn * sizeof *j->w);
        dgetrf_(&n, &n, j->w, &n, j->ipiv, &info);
        *o = la_det(j->op, j->w, j->ipiv, n);
        return 0;
    default:
        return -1;
    }
}
#endif

static int la_one(la_job *j)
{
    const kiln_view *A = &j->in[0], *O = j->out;
    char note[64];
    la_batch_note(j, note, sizeof note);
    switch (j->op) {
    case KILN_LINALG_TRIL:
    case KILN_LINALG_TRIU: {
        int64_t m = A->shape[A->rank - 2], n = A->shape[A->rank - 1];
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < n; c++) {
                int keep = j->op == KILN_LINALG_TRIL ? c <= r : c >= r;
                *la_at(O, j->out_off, 2, r, c) =
                    keep ? *la_at(A, j->in_off[0], 2, r, c) : 0.0;
            }
        return 0;
    }
    case KILN_LINALG_DIAG: {
        int64_t n = A->shape[A->rank - 1];
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++)
                *la_at(O, j->out_off, 2, r, c) =
                    r == c ? *la_at(A, j->in_off[0], 1, r, 0) : 0.0;
        return 0;
    }
    case KILN_LINALG_DIAGONAL: {
        int64_t m = A->shape[A->rank - 2], n = A->shape[A->rank - 1];
        for (int64_t r = 0; r < m && r < n; r++)
            *la_at(O, j->out_off, 1, r, 0) = *la_at(A, j->in_off[0], 2, r, r);
        return 0;
    }
    default:
        break;
    }
#if !KILN_HAVE_LAPACK
    return la_err(j->errbuf, j->errbuf_size, KILN_ERR_RUNTIME,
                  "built without LAPACK (configure found no dpotrf_: "
                  "install libopenblas-dev or liblapack-dev and rebuild)");
#else
    int n = (int)A->shape[A->rank - 1], info = 0;
    double *a = j->w;
    double *b = a + (size_t)n * n;
    if (n == 0)
        return 0;
    if ((info = la_fast(j, n, note)) >= 0)
        return info;
    la_load(a, A, j->in_off[0], 2, n, n);
    switch (j->op) {
    case KILN_LINALG_POTRF:
    case KILN_LINALG_POTRF_NAN:
        dpotrf_("L", &n, a, &n, &info, 1);
        if ((info = la_potrf_done(j, a, n, info, 0, note)))
            return info;
        la_store(O, j->out_off, 2, a, n, n);
        return 0;
    case KILN_LINALG_POTRF_BWD:
        la_load(b, &j->in[1], j->in_off[1], 2, n, n);
        info = la_potrf_bwd(a, b, b + (size_t)n * n, n);
        if (info)
            return la_err(j->errbuf, j->errbuf_size, KILN_ERR_RUNTIME,
                          "cholesky gradient: singular factor (L[%d,%d] is "
                          "zero%s)", info - 1, info - 1, note);
        la_store(O, j->out_off, 2, a, n, n);
        return 0;
    case KILN_LINALG_TRSM_LN: case KILN_LINALG_TRSM_LT:
    case KILN_LINALG_TRSM_UN: case KILN_LINALG_TRSM_UT:
    case KILN_LINALG_GESV: {
        const kiln_view *B = &j->in[1];
        int k = j->core_in[1] == 1 ? 1 : (int)B->shape[B->rank - 1];
        if (k == 0)
            return 0;
        la_load(b, B, j->in_off[1], j->core_in[1], n, k);
        if (j->op == KILN_LINALG_GESV && (info = la_getrf(j, a, n, note)))
            return info;
        if ((info = la_trs(j, a, b, n, k, 0, note)))
            return info;
        la_store(O, j->out_off, j->core_out, b, n, k);
        return 0;
    }
    case KILN_LINALG_GETRI: {
        if ((info = la_getrf(j, a, n, note)))
            return info;
        int lwork = n * n;
        dgetri_(&n, a, &n, j->ipiv, b, &lwork, &info);
        la_store(O, j->out_off, 2, a, n, n);
        return 0;
    }
    case KILN_LINALG_LOGDET:
    case KILN_LINALG_SIGNDET:
    case KILN_LINALG_DET:
        dgetrf_(&n, &n, a, &n, j->ipiv, &info);
        *((double *)O->data + j->out_off) = la_det(j->op, a, j->ipiv, n);
        return 0;
    default:
        return la_err(j->errbuf, j->errbuf_size, KILN_ERR_ARG,
                      "unknown linalg op %u", j->op);
    }
#endif
}

/* Whether the views' run-time shapes fit op (nonzero: they do not). */
static int la_shapes(uint32_t op, uint32_t n_in, const kiln_view *in,
                     const kiln_view *out, const la_job *j, int brank)
{
    const kiln_view *a = &in[0];
    int64_t m = a->shape[a->rank - 1], rows = j->core_in[0] == 2 ?
                                                  a->shape[a->rank - 2] : m;
    int square = op != KILN_LINALG_TRIL && op != KILN_LINALG_TRIU &&
                 op != KILN_LINALG_DIAG && op != KILN_LINALG_DIAGONAL;
    if (square && m != rows)
        return 1;
    int64_t want[KILN_MAX_RANK];
    for (int d = 0; d < brank; d++)
        want[d] = a->shape[d];
    for (uint32_t i = 1; i < n_in; i++) {
        if (in[i].rank - j->core_in[i] != brank)
            return 1;
        for (int d = 0; d < brank; d++)
            if (in[i].shape[d] != want[d])
                return 1;
        if (in[i].shape[brank] != m ||
            (op == KILN_LINALG_POTRF_BWD && in[i].shape[brank + 1] != m))
            return 1;
    }
    int r = brank;
    switch (op) {
    case KILN_LINALG_LOGDET: case KILN_LINALG_SIGNDET: case KILN_LINALG_DET:
        break;
    case KILN_LINALG_DIAGONAL: want[r++] = rows < m ? rows : m; break;
    case KILN_LINALG_DIAG: want[r++] = m; want[r++] = m; break;
    case KILN_LINALG_TRSM_LN: case KILN_LINALG_TRSM_LT:
    case KILN_LINALG_TRSM_UN: case KILN_LINALG_TRSM_UT:
    case KILN_LINALG_GESV:
        for (int d = brank; d < in[1].rank; d++)
            want[r++] = in[1].shape[d];
        break;
    default: want[r++] = rows; want[r++] = m; break;
    }
    if (out->rank != r)
        return 1;
    for (int d = 0; d < r; d++)
        if (out->shape[d] != want[d])
            return 1;
    return 0;
}

int kiln_runtime_lapack_run(const kiln_runtime *rt, uint32_t op,
                            uint32_t n_in, const kiln_view *in,
                            uint32_t n_out, const kiln_view *out,
                            char *errbuf, size_t errbuf_size)
{
    (void)rt;
    /* OpenBLAS's LAPACK runs on its threads: held to one, as for gemm
     * (blas.c), before the first call, or a model with no gemm (gp_regr)
     * spends most of its time in OpenBLAS's idle threads' sched_yield */
    (void)kiln_blas_get();
    if (op > KILN_LINALG_LAST || n_in < 1 || n_in > 2 || n_out != 1 ||
        !in || !out)
        return la_err(errbuf, errbuf_size, KILN_ERR_ARG,
                      "linalg op %u: bad arguments", op);
    la_job j = {.op = op, .in = in, .out = out, .n_in = n_in,
                .errbuf = errbuf, .errbuf_size = errbuf_size};
    for (uint32_t i = 0; i < n_in; i++) {
        j.core_in[i] = la_core_in(op, i, in, n_in);
        if (in[i].dtype != KILN_F64 || in[i].rank < j.core_in[i])
            return la_err(errbuf, errbuf_size, KILN_ERR_ARG,
                          "linalg op %u: input %u must be f64 of rank >= %d",
                          op, i, j.core_in[i]);
    }
    j.core_out = la_core_out(op, in, n_in);
    int brank = in[0].rank - j.core_in[0];
    if (out[0].dtype != KILN_F64 || out[0].rank != brank + j.core_out)
        return la_err(errbuf, errbuf_size, KILN_ERR_ARG,
                      "linalg op %u: bad output view", op);
    if (la_shapes(op, n_in, in, out, &j, brank))
        return la_err(errbuf, errbuf_size, KILN_ERR_SHAPE, "shapes do not "
                      "match at run time (a square matrix, equal batch axes "
                      "and the right-hand side's rows its size are needed)");
    int64_t nb = 1;
    for (int d = 0; d < brank; d++)
        nb *= in[0].shape[d];
    int64_t n = in[0].shape[in[0].rank - 1];
    int64_t k = n_in == 2 && j.core_in[1] == 2 ? in[1].shape[in[1].rank - 1]
                                               : 1;
    size_t words = (size_t)n * n * 3 + (size_t)n * (k > n ? k : n);
    double w_stack[LA_STACK_WORDS];
    int piv_stack[LA_STACK_PIV];
    if (words <= LA_STACK_WORDS && n <= LA_STACK_PIV) {
        j.w = w_stack;
        j.ipiv = piv_stack;
    } else {
        la_tls *t = la_tls_get(words, (size_t)n);
        if (!t)
            return la_err(errbuf, errbuf_size, KILN_ERR_NOMEM,
                          "out of memory");
        j.w = t->w;
        j.ipiv = t->ipiv;
    }
    j.batched = brank > 0;
    int rc = 0;
    int64_t idx[KILN_MAX_RANK] = {0};
    for (int64_t b = 0; b < nb && !rc; b++) {
        j.batch = b;
        for (uint32_t i = 0; i < n_in; i++) {
            j.in_off[i] = 0;
            int bi = in[i].rank - j.core_in[i];
            for (int d = 0; d < brank && d < bi; d++)
                j.in_off[i] += idx[d] * in[i].strides[d];
        }
        j.out_off = 0;
        for (int d = 0; d < brank; d++)
            j.out_off += idx[d] * out[0].strides[d];
        rc = la_one(&j);
        for (int d = brank - 1; d >= 0; d--) {
            if (++idx[d] < in[0].shape[d])
                break;
            idx[d] = 0;
        }
    }
    return rc;
}
