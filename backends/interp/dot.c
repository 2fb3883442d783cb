/*
 * dot.c — DOT: the operands as matrices, BLAS (rt->dgemm/sgemm) when it
 * can read them, the triple loop otherwise.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

/* A matrix operand: rows x cols, element (i, j) at i*s0 + j*s1. */
typedef struct kiln_interp_mat {
    int64_t rows, cols, s0, s1;
    int trans;  /* for BLAS: stored transposed */
    int64_t ld; /* for BLAS: leading dimension */
} kiln_interp_mat;

/* Whether BLAS can read the matrix (row-major, maybe transposed, with a
 * non-negative leading dimension), and how. */
static int kiln_interp_mat_blas(kiln_interp_mat *m, int allow_trans)
{
    int64_t c1 = m->cols > 1 ? m->cols : 1, r1 = m->rows > 1 ? m->rows : 1;
    if ((m->cols <= 1 || m->s1 == 1) && (m->rows <= 1 || m->s0 >= c1)) {
        m->trans = 0;
        m->ld = m->rows <= 1 ? c1 : m->s0;
        return 1;
    }
    if (allow_trans && (m->rows <= 1 || m->s0 == 1)
        && (m->cols <= 1 || m->s1 >= r1)) {
        m->trans = 1;
        m->ld = m->cols <= 1 ? r1 : m->s1;
        return 1;
    }
    return 0;
}

#define KILN_INTERP_DOT_LOOP(T)                                               \
    do {                                                                      \
        const T *pa = a, *pb = b;                                             \
        T *pc = c;                                                            \
        for (int64_t i = 0; i < A->rows; i++)                                 \
            for (int64_t j = 0; j < B->cols; j++) {                           \
                double acc = 0.0;                                             \
                for (int64_t p = 0; p < A->cols; p++)                         \
                    acc += (double)pa[i * A->s0 + p * A->s1]                  \
                         * (double)pb[p * B->s0 + j * B->s1];                 \
                pc[i * C->s0 + j * C->s1] = (T)acc;                           \
            }                                                                 \
    } while (0)

/* Any strides (negative, broadcast): a plain triple loop. */
static void kiln_interp_dot_loop(unsigned dt, const kiln_interp_mat *A,
                                 const void *a, const kiln_interp_mat *B,
                                 const void *b, const kiln_interp_mat *C,
                                 void *c)
{
    if (dt == KILN_F64)
        KILN_INTERP_DOT_LOOP(double);
    else
        KILN_INTERP_DOT_LOOP(float);
}

/* DOT's operands as matrices (a vector is a 1 x k or k x 1 matrix);
 * 0, or a kiln_code with the message when the shapes do not fit. */
static int kiln_interp_dot_mats(const kiln_interp_run *r, kiln_interp_mat *pa,
                                kiln_interp_mat *pb, kiln_interp_mat *pc)
{
    const kiln_view *va = &r->call->inputs[0], *vb = &r->call->inputs[1];
    const kiln_view *vc = &r->call->outputs[0];
    kiln_interp_mat A = { 1, va->shape[0], 0, va->strides[0], 0, 0 };
    kiln_interp_mat B = { vb->shape[0], 1, vb->strides[0], 0, 0, 0 };
    kiln_interp_mat C = { 1, 1, 0, 0, 0, 0 };
    char b1[160], b2[160], b3[160];
    if (va->rank == 2) {
        A = (kiln_interp_mat){ va->shape[0], va->shape[1], va->strides[0],
                               va->strides[1], 0, 0 };
        C.rows = A.rows;
        C.s0 = vc->strides[0];
    }
    if (vb->rank == 2) {
        B = (kiln_interp_mat){ vb->shape[0], vb->shape[1], vb->strides[0],
                               vb->strides[1], 0, 0 };
        C.cols = B.cols;
        C.s1 = vc->strides[vc->rank - 1];
    }
    int shape_ok = A.cols == B.rows;
    if (vc->rank == 2)
        shape_ok = shape_ok && vc->shape[0] == C.rows && vc->shape[1] == C.cols;
    else if (vc->rank == 1)
        shape_ok = shape_ok && vc->shape[0] == (va->rank == 2 ? C.rows
                                                              : C.cols);
    if (!shape_ok)
        return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: shapes %s and %s do "
                                "not give %s", r->label,
                                kiln_interp_shape_str(b1, sizeof b1, va->rank,
                                                      va->shape),
                                kiln_interp_shape_str(b2, sizeof b2, vb->rank,
                                                      vb->shape),
                                kiln_interp_shape_str(b3, sizeof b3, vc->rank,
                                                      vc->shape));
    *pa = A;
    *pb = B;
    *pc = C;
    return 0;
}

/* Whether the product goes to BLAS: the runtime has the gemm of the
 * dtype and every operand is a (maybe transposed) row-major matrix;
 * sets the transpose flags and leading dimensions. */
static int kiln_interp_dot_blas(const kiln_runtime *rt, unsigned dt,
                                kiln_interp_mat *A, kiln_interp_mat *B,
                                kiln_interp_mat *C)
{
    int have_rt = rt && rt->struct_size >= offsetof(kiln_runtime, sgemm)
                                               + sizeof(rt->sgemm)
               && (dt == KILN_F64 ? rt->dgemm != NULL : rt->sgemm != NULL);
    return have_rt && kiln_interp_mat_blas(A, 1) && kiln_interp_mat_blas(B, 1)
           && kiln_interp_mat_blas(C, 0);
}

/* One product through the runtime's gemm, st {transa, transb, m, n, k,
 * lda, ldb, ldc} (alpha 1, beta 0): dgemm_rt / sgemm_rt when the table has
 * them (ABI 1.8: the function's choice between BLAS and the host's
 * matrix-vector loop), else dgemm / sgemm.  Shared with the llvm
 * backend's DOT plan. */
static void kiln_interp_gemm(const kiln_runtime *rt, unsigned dt,
                             const int64_t st[8], const void *a,
                             const void *b, void *c)
{
    int has_rt = rt->struct_size >= offsetof(kiln_runtime, sgemm_rt)
                                        + sizeof(rt->sgemm_rt);
    int ta = (int)st[0], tb = (int)st[1];
    if (dt == KILN_F64 && has_rt && rt->dgemm_rt)
        rt->dgemm_rt(rt, ta, tb, st[2], st[3], st[4], 1.0, a, st[5], b, st[6],
                     0.0, c, st[7]);
    else if (dt == KILN_F64)
        rt->dgemm(ta, tb, st[2], st[3], st[4], 1.0, a, st[5], b, st[6], 0.0,
                  c, st[7]);
    else if (has_rt && rt->sgemm_rt)
        rt->sgemm_rt(rt, ta, tb, st[2], st[3], st[4], 1.0f, a, st[5], b,
                     st[6], 0.0f, c, st[7]);
    else
        rt->sgemm(ta, tb, st[2], st[3], st[4], 1.0f, a, st[5], b, st[6],
                  0.0f, c, st[7]);
}

/* ABI 1.11: a batched DOT (views of one rank >= 3) is one call of the
 * runtime table's gemm_batched (version 6), which makes the BLAS
 * decisions; 0, or a kiln_code with the message in call's errbuf.
 * Shared with the llvm backend's DOT plan (run time: no kiln_interp_run). */
static int kiln_interp_dot_batched(const kiln_runtime *rt,
                                   const kiln_call *call, const char *label)
{
    char why[400] = "batched matmul needs the runtime table's gemm_batched "
                    "(version 6, ABI 1.11)";
    int rc = KILN_ERR_BACKEND;
    if (rt && rt->struct_size >= offsetof(kiln_runtime, gemm_batched)
                                     + sizeof(rt->gemm_batched)
        && rt->gemm_batched)
        rc = rt->gemm_batched(rt, &call->inputs[0], &call->inputs[1],
                              &call->outputs[0], why, sizeof why);
    size_t need = offsetof(kiln_call, errbuf_size) + sizeof(size_t);
    if (rc && call->struct_size >= need && call->errbuf && call->errbuf_size)
        snprintf(call->errbuf, call->errbuf_size, "%s: %s",
                 label ? label : "dot", why);
    return rc;
}

/* DOT: every rank combination as one gemm, through the runtime's CBLAS
 * wrappers (or a loop for strides BLAS cannot take). */
static int kiln_interp_dot(const kiln_interp_run *r)
{
    const kiln_view *va = &r->call->inputs[0], *vb = &r->call->inputs[1];
    const kiln_view *vc = &r->call->outputs[0];
    if (vc->rank > 2)
        return kiln_interp_dot_batched(r->rt, r->call, r->label);
    kiln_interp_mat A = {0}, B = {0}, C = {0};  /* (set by dot_mats; gcc cannot tell) */
    int rc = kiln_interp_dot_mats(r, &A, &B, &C);
    if (rc)
        return rc;
    if (C.rows == 0 || C.cols == 0)
        return 0;
    const kiln_runtime *rt = r->rt;
    unsigned dt = (unsigned)vc->dtype;
    if (kiln_interp_dot_blas(rt, dt, &A, &B, &C)) {
        int64_t st[8] = {A.trans, B.trans, C.rows, C.cols, A.cols, A.ld, B.ld,
                         C.ld};
        kiln_interp_gemm(rt, dt, st, va->data, vb->data, vc->data);
        return 0;
    }
    kiln_interp_dot_loop(dt, &A, va->data, &B, vb->data, &C, vc->data);
    return 0;
}
