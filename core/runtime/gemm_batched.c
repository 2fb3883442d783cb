/*
 * gemm_batched.c — the runtime table's gemm_batched (version 6, ABI 1.11):
 * a batched DOT kernel's whole product, c = a @ b over views of one rank
 * r >= 3, a [B..., m, k], b [B..., k, n], c [B..., m, n], the batch
 * extents c's in all three (stride 0 broadcasts an operand).
 *
 * The plan, made once per call (a core's strides are the same at every
 * batch index):
 *   - batch axes of extent 1 are dropped; the innermost batch axis is
 *     folded into m while b does not move along it (stride 0) and a's and
 *     c's rows continue across it (stride m * row stride), for m > 1:
 *     attention's query heads sharing one KV head become one taller
 *     product in prefill, and a [B, m, k] @ [k, n] one gemm (m = 1 stays
 *     a loop of matrix-vector products: decode);
 *   - each core is handed to BLAS in place when it can read it: a unit
 *     stride on one axis and a leading dimension (the other stride) at
 *     least the extent, maybe transposed (c never transposed); otherwise
 *     it is packed into (c: computed in and copied out of) this thread's
 *     scratch buffer (kiln_runtime_scratch: grown once, no malloc per
 *     call);
 *   - per remaining batch index one dgemm_rt / sgemm_rt of this table,
 *     so a product with m = 1 or n = 1 keeps the matrix-vector policy
 *     (core/runtime/gemv.c);
 *   - k = 0 writes zeros (an empty sum).
 */
#include "runtime.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* A 2-D core: rows x cols, element (i, j) at i*s0 + j*s1 (elements); for
 * BLAS, trans and ld; pack: 1 when it goes through scratch. */
typedef struct gb_mat {
    int64_t rows, cols, s0, s1;
    int trans, pack;
    int64_t ld;
} gb_mat;

/* Whether BLAS reads m in place (row-major, maybe transposed), and how. */
static int gb_blas(gb_mat *m, int allow_trans)
{
    int64_t c1 = m->cols > 1 ? m->cols : 1, r1 = m->rows > 1 ? m->rows : 1;
    if ((m->cols <= 1 || m->s1 == 1) && (m->rows <= 1 || m->s0 >= c1)) {
        m->trans = 0;
        m->ld = m->rows <= 1 ? c1 : m->s0;
        return m->ld <= INT_MAX;
    }
    if (allow_trans && (m->rows <= 1 || m->s0 == 1) &&
        (m->cols <= 1 || m->s1 >= r1)) {
        m->trans = 1;
        m->ld = m->cols <= 1 ? r1 : m->s1;
        return m->ld <= INT_MAX;
    }
    return 0;
}

/* m's layout in scratch: row-major, ld = cols. */
static void gb_packed(gb_mat *m)
{
    m->pack = 1;
    m->trans = 0;
    m->ld = m->cols > 1 ? m->cols : 1;
}

#define GB_COPY(T, to_scratch)                                                \
    do {                                                                      \
        T *x = base, *y = scratch;                                            \
        for (int64_t i = 0; i < m->rows; i++)                                 \
            for (int64_t j = 0; j < m->cols; j++) {                           \
                if (to_scratch)                                               \
                    y[i * m->cols + j] = x[i * m->s0 + j * m->s1];            \
                else                                                          \
                    x[i * m->s0 + j * m->s1] = y[i * m->cols + j];            \
            }                                                                 \
    } while (0)

/* Copy core m at base into scratch (to_scratch) or back. */
static void gb_copy(int f64, const gb_mat *m, void *base, void *scratch,
                    int to_scratch)
{
    if (f64)
        GB_COPY(double, to_scratch);
    else
        GB_COPY(float, to_scratch);
}

/* The shapes in one line: "[2,3,4] @ [2,4,5] -> [2,3,5]". */
static void gb_shapes(const kiln_view *a, const kiln_view *b,
                      const kiln_view *c, char *buf, size_t size)
{
    const kiln_view *v[3] = {a, b, c};
    static const char *const sep[3] = {" @ ", " -> ", ""};
    size_t at = 0;
    for (int i = 0; i < 3 && at < size; i++) {
        at += (size_t)snprintf(buf + at, size - at, "[");
        for (int d = 0; d < v[i]->rank && d < KILN_MAX_RANK && at < size; d++)
            at += (size_t)snprintf(buf + at, size - at, "%s%lld",
                                   d ? "," : "", (long long)v[i]->shape[d]);
        if (at < size)
            at += (size_t)snprintf(buf + at, size - at, "]%s", sep[i]);
    }
}

static int gb_fail(char *errbuf, size_t size, int code, const char *what,
                   const kiln_view *a, const kiln_view *b, const kiln_view *c)
{
    char s[512];
    if (a && b && c)
        gb_shapes(a, b, c, s, sizeof s);
    else
        s[0] = 0;
    if (errbuf && size)
        snprintf(errbuf, size, "gemm_batched: %s%s%s", what, s[0] ? ": " : "",
                 s);
    return code;
}

/* 0 when the views fit the contract. */
static int gb_check(const kiln_view *a, const kiln_view *b,
                    const kiln_view *c, char *errbuf, size_t size)
{
    if (!a || !b || !c)
        return gb_fail(errbuf, size, KILN_ERR_ARG, "NULL view", NULL, NULL,
                       NULL);
    int r = c->rank;
    if (r < 3 || r > KILN_MAX_RANK || a->rank != r || b->rank != r)
        return gb_fail(errbuf, size, KILN_ERR_SHAPE,
                       "the views need one rank >= 3", a, b, c);
    if ((c->dtype != KILN_F64 && c->dtype != KILN_F32) ||
        a->dtype != c->dtype || b->dtype != c->dtype)
        return gb_fail(errbuf, size, KILN_ERR_SHAPE,
                       "the views need one dtype, f32 or f64", a, b, c);
    int ok = a->shape[r - 1] == b->shape[r - 2] &&
             a->shape[r - 2] == c->shape[r - 2] &&
             b->shape[r - 1] == c->shape[r - 1];
    for (int d = 0; ok && d < r - 2; d++)
        ok = a->shape[d] == c->shape[d] && b->shape[d] == c->shape[d];
    for (int d = 0; ok && d < r; d++)
        ok = c->shape[d] >= 0 && a->shape[d] >= 0 && b->shape[d] >= 0;
    if (!ok)
        return gb_fail(errbuf, size, KILN_ERR_SHAPE,
                       "shapes do not fit (a [B..., m, k], b [B..., k, n], "
                       "c [B..., m, n])", a, b, c);
    return 0;
}

/* One product through the table's gemm (alpha 1, beta 0). */
static void gb_gemm(const kiln_runtime *rt, int f64, const gb_mat *A,
                    const gb_mat *B, const gb_mat *C, const void *a,
                    const void *b, void *c)
{
    if (f64)
        rt->dgemm_rt(rt, A->trans, B->trans, C->rows, C->cols, A->cols, 1.0,
                     a, A->ld, b, B->ld, 0.0, c, C->ld);
    else
        rt->sgemm_rt(rt, A->trans, B->trans, C->rows, C->cols, A->cols, 1.0f,
                     a, A->ld, b, B->ld, 0.0f, c, C->ld);
}

int kiln_runtime_gemm_batched(const kiln_runtime *rt, const kiln_view *a,
                              const kiln_view *b, const kiln_view *c,
                              char *errbuf, size_t errbuf_size)
{
    int rc = gb_check(a, b, c, errbuf, errbuf_size);
    if (rc)
        return rc;
    int r = c->rank, f64 = c->dtype == KILN_F64;
    size_t esz = f64 ? sizeof(double) : sizeof(float);
    for (int d = 0; d < r; d++)
        if (c->shape[d] == 0)
            return 0;
    int64_t m = c->shape[r - 2], n = c->shape[r - 1], k = a->shape[r - 1];
    /* the batch axes that are not 1: extent and the three strides */
    int64_t ext[KILN_MAX_RANK], sa[KILN_MAX_RANK], sb[KILN_MAX_RANK],
        sc[KILN_MAX_RANK];
    int nb = 0;
    for (int d = 0; d < r - 2; d++)
        if (c->shape[d] != 1) {
            ext[nb] = c->shape[d];
            sa[nb] = a->strides[d];
            sb[nb] = b->strides[d];
            sc[nb++] = c->strides[d];
        }
    gb_mat A = {m, k, a->strides[r - 2], a->strides[r - 1], 0, 0, 0};
    gb_mat B = {k, n, b->strides[r - 2], b->strides[r - 1], 0, 0, 0};
    gb_mat C = {m, n, c->strides[r - 2], c->strides[r - 1], 0, 0, 0};
    /* fold the innermost batch axis into m while b stays put on it and
     * a's and c's rows run on across it.  Not from m = 1: a few
     * matrix-vector products (the gemv policy) beat one gemm of a few
     * rows, which packs b first (OpenBLAS: 3 x 64 @ 64 x 256 is 1.5x
     * three gemvs) */
    while (m > 1 && nb > 0 && sb[nb - 1] == 0 &&
           sa[nb - 1] == A.rows * A.s0 && sc[nb - 1] == C.rows * C.s0 &&
           ext[nb - 1] <= INT64_MAX / A.rows) {
        A.rows *= ext[nb - 1];
        C.rows = A.rows;
        nb--;
    }
    if (k == 0) {   /* an empty sum */
        gb_mat Z = C;
        int64_t idx[KILN_MAX_RANK] = {0};
        char *pc = c->data;
        for (;;) {
            for (int64_t i = 0; i < Z.rows; i++)
                for (int64_t j = 0; j < Z.cols; j++) {
                    char *e = pc + (i * Z.s0 + j * Z.s1) * (int64_t)esz;
                    if (f64)
                        *(double *)e = 0.0;
                    else
                        *(float *)e = 0.0f;
                }
            int d = nb - 1;
            for (; d >= 0; d--) {
                pc += sc[d] * (int64_t)esz;
                if (++idx[d] < ext[d])
                    break;
                pc -= ext[d] * sc[d] * (int64_t)esz;
                idx[d] = 0;
            }
            if (d < 0)
                return 0;
        }
    }
    /* which cores go through scratch, and its size in elements */
    size_t need = 0, off[3] = {0, 0, 0};
    gb_mat *M[3] = {&A, &B, &C};
    for (int i = 0; i < 3; i++) {
        if (gb_blas(M[i], i < 2))
            continue;
        gb_packed(M[i]);
        size_t cells;
        if (__builtin_mul_overflow((size_t)M[i]->rows, (size_t)M[i]->cols,
                                   &cells) ||
            __builtin_add_overflow(need, cells, &need))
            return gb_fail(errbuf, errbuf_size, KILN_ERR_NOMEM,
                           "scratch too large", a, b, c);
        off[i] = need - cells;
    }
    char *scratch = NULL;
    if (need) {
        size_t words = f64 ? need : need / 2 + 1;
        if (!(scratch = kiln_runtime_scratch(words)))
            return gb_fail(errbuf, errbuf_size, KILN_ERR_NOMEM,
                           "out of memory for scratch", a, b, c);
    }
    char *pa = a->data, *pb = b->data, *pc = c->data;
    int64_t idx[KILN_MAX_RANK] = {0};
    for (;;) {
        const void *xa = pa, *xb = pb;
        void *xc = pc;
        if (A.pack) {
            gb_copy(f64, &A, pa, scratch + off[0] * esz, 1);
            xa = scratch + off[0] * esz;
        }
        if (B.pack) {
            gb_copy(f64, &B, pb, scratch + off[1] * esz, 1);
            xb = scratch + off[1] * esz;
        }
        if (C.pack)
            xc = scratch + off[2] * esz;
        gb_gemm(rt, f64, &A, &B, &C, xa, xb, xc);
        if (C.pack)
            gb_copy(f64, &C, pc, xc, 0);
        int d = nb - 1;
        for (; d >= 0; d--) {
            pa += sa[d] * (int64_t)esz;
            pb += sb[d] * (int64_t)esz;
            pc += sc[d] * (int64_t)esz;
            if (++idx[d] < ext[d])
                break;
            pa -= ext[d] * sa[d] * (int64_t)esz;
            pb -= ext[d] * sb[d] * (int64_t)esz;
            pc -= ext[d] * sc[d] * (int64_t)esz;
            idx[d] = 0;
        }
        if (d < 0)
            return 0;
    }
}
