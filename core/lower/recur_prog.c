/*
 * recur_prog.c — the pass `recur`: a scan whose body computes small
 * static values only becomes one RECUR loop kernel with the body fused in
 * as its scalar program (include/kiln/backend.h, KILN_KERNEL_RECUR, ABI
 * 1.10).  Other bodies keep the host path (core/runtime/recur.c: one
 * call of the body's compiled function per step).
 *
 * The body is cloned and rewritten with the caller's passes first, as
 * the host path's compile of the body rewrites it (core/compile/driver.c
 * attach_recur), so both paths compute the same graph.  Its live nodes
 * then become instructions in order.  Every value has a static shape
 * with at most 64 elements and is an array of instructions, one per
 * element (row-major; a scalar is one): an INPUT's elements are LOADs of
 * the kernel's inputs that are its element views (below), a CONST's
 * CONSTs, an elementwise node's the instructions lower.c gives it per
 * element with its operands' broadcast elements
 * (kiln_lower_emit_scalar_node), so promotion, compute dtypes and the
 * lowered ops (isnan, sign, clip, n-ary add/mul) stay in one place;
 * reductions (sum, prod, max, min, mean, logsumexp as lower.c computes
 * it) fold elements, dot/matmul of vectors and matrices adds the
 * products in order, and reshape, expand_dims, squeeze, transpose,
 * broadcast_to, join, stack and static subtensor pick elements.
 * Literals are inlined by that emission as everywhere.
 *
 * A step with tensor carries, args, sequences or outputs is then
 * exploded: each element of a carry or arg becomes a rank-0 SUBTENSOR
 * view of its own, each element of a sequence's or stacked output's
 * step value a strided rank-1 view x[:, i, j], so the kernel is the
 * rank-0/rank-1 RECUR kernel every backend runs (the ABI is unchanged).
 */
#include "lower.h"
#include "rewrite/rewrite.h"

#include <math.h>
#include "lower.h"
#include "rewrite/rewrite.h"

#include <stdlib.h>
#include <string.h>

/* More instructions than this: the host path (a program this long is no
 * scalar recurrence, and llvm segments programs above 512). */
#define RECUR_MAX_INSTRS 4096

static int oom(kiln_err *err)
{
    kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    return -1;
}

/* Element k of a CONST node as an instruction immediate; 0 when it has
 * no exact double (an i64 beyond 2^53). */
static int const_imm(const kiln_node *n, int64_t k, double *out)
{
    size_t es = kiln_dtype_size(n->type.dtype);
    if (!n->data || n->nbytes < es * (size_t)(k + 1))
        return 0;
    const unsigned char *d = (const unsigned char *)n->data + es * (size_t)k;
    switch (n->type.dtype) {
    case KILN_F64: { double x; memcpy(&x, d, sizeof x); *out = x;
                     return 1; }
    case KILN_F32: { float x; memcpy(&x, d, sizeof x); *out = x;
                     return 1; }
    case KILN_I32: { int32_t x; memcpy(&x, d, sizeof x); *out = x;
                     return 1; }
    case KILN_I64: {
        int64_t x;
        memcpy(&x, d, sizeof x);
        *out = (double)x;
        return x >= -(INT64_C(1) << 53) && x <= (INT64_C(1) << 53);
    }
    case KILN_BOOL: { *out = d[0] != 0; return 1; }
    default:
        return 0;
    }
}

/* ---- static tensors as element arrays -------------------------------
 *
 * A body value of static shape with at most RECUR_MAX_ELEMS elements is
 * an array of instructions, one per element in row-major order; a
 * scalar is an array of one.  The step's tensor arguments are exploded
 * to match (explode() below): each element of a carry or arg is a rank-0
 * view of its own, each element of a sequence's or stacked output's
 * step value a strided rank-1 view, so the kernel is the rank-0/rank-1
 * RECUR kernel of ABI 1.10 every backend runs. */

#define RECUR_MAX_ELEMS 64

typedef struct sc_ctx {
    prog_builder *pb;
    kiln_graph *b;
    int *off;          /* node -> offset of its elements in pool, -1 */
    int *pool;
    int n_pool, cap_pool;
    int *fixed;        /* per node: the operand element being emitted */
    kiln_err *err;
} sc_ctx;

/* The element count of a static type, or -1 (a symbolic or unknown dim,
 * or more than RECUR_MAX_ELEMS elements). */
static int64_t small_elems(const kiln_type *t)
{
    int64_t e = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0)
            return -1;
        e *= t->dims[i];
        if (e > RECUR_MAX_ELEMS)
            return -1;
    }
    return e;
}

static void unravel(int64_t e, int rank, const int64_t *dims, int64_t *ix)
{
    for (int i = rank; i-- > 0;) {
        ix[i] = dims[i] ? e % dims[i] : 0;
        e = dims[i] ? e / dims[i] : 0;
    }
}

static int64_t ravel(int rank, const int64_t *dims, const int64_t *ix)
{
    int64_t e = 0;
    for (int i = 0; i < rank; i++)
        e = e * dims[i] + ix[i];
    return e;
}

/* Room for n more elements; returns the offset of the first, -1. */
static int sc_alloc(sc_ctx *c, int n)
{
    if (c->n_pool + n > c->cap_pool) {
        int cap = c->cap_pool ? 2 * c->cap_pool : 256;
        while (cap < c->n_pool + n)
            cap *= 2;
        int *q = realloc(c->pool, sizeof(int) * (size_t)cap);
        if (!q)
            return -1;
        c->pool = q;
        c->cap_pool = cap;
    }
    int o = c->n_pool;
    c->n_pool += n;
    return o;
}

/* Element k of node u (a literal's CONST is made when first read). */
static int sc_elem(sc_ctx *c, int u, int64_t k)
{
    if (c->off[u] < 0) {
        const kiln_node *n = &c->b->nodes[u];
        if (n->op != KILN_OP_LITERAL)
            return -1;
        int o = sc_alloc(c, 1);
        int r = o < 0 ? -1 : kiln_lower_emit(c->pb, KILN_I_CONST,
                                             n->type.dtype, -1, -1, -1,
                                             n->value);
        if (r < 0)
            return -1;
        c->pool[o] = r;
        c->off[u] = o;
    }
    return c->pool[c->off[u] + k];
}

/* Element k of u converted to dtype dt. */
static int sc_elem_as(sc_ctx *c, int u, int64_t k, kiln_dtype dt)
{
    int r = sc_elem(c, u, k);
    if (r < 0 || c->b->nodes[u].type.dtype == dt)
        return r;
    return kiln_lower_emit(c->pb, KILN_I_CAST, dt, r, -1, -1, 0);
}

/* The reduced axes of reduction node n over an input of rank r. */
static void sc_mask(const kiln_node *n, int r, int *mask)
{
    for (int i = 0; i < r; i++)
        mask[i] = !n->attrs->has_axes;
    for (int i = 0; n->attrs->has_axes && i < n->attrs->naxes; i++) {
        int64_t a = n->attrs->axes[i];
        mask[a < 0 ? a + r : a] = 1;
    }
}

/* The output element that input element e of x (type xt) reduces into:
 * its index with the reduced axes (mask) at 0, in the keepdims shape kd
 * (whose row-major order is the output's). */
static int64_t reduced_index(const kiln_type *xt, const int *mask,
                             const int64_t *kd, int64_t e)
{
    int64_t ix[KILN_MAX_RANK];
    unravel(e, xt->rank, xt->dims, ix);
    for (int i = 0; i < xt->rank; i++)
        if (mask[i])
            ix[i] = 0;
    return ravel(xt->rank, kd, ix);
}

/* A reduction: out (E elements) from x; 1 done, 0 not handled, -1. */
static int sc_reduce(sc_ctx *c, int v, int *out, int64_t E)
{
    const kiln_node *n = &c->b->nodes[v];
    int x = n->in[0];
    const kiln_type *xt = &c->b->nodes[x].type;
    kiln_dtype od = n->type.dtype;
    int64_t ex = small_elems(xt);
    int op = n->op, iop;
    switch (op) {
    case KILN_OP_SUM: case KILN_OP_MEAN: iop = KILN_I_ADD; break;
    case KILN_OP_PROD: iop = KILN_I_MUL; break;
    case KILN_OP_MAX: case KILN_OP_LOGSUMEXP: iop = KILN_I_MAXIMUM; break;
    case KILN_OP_MIN: iop = KILN_I_MINIMUM; break;
    default: return 0;
    }
    if (ex <= 0 || E <= 0 || (od != KILN_F64 && od != KILN_F32 &&
                              (op == KILN_OP_MEAN || op == KILN_OP_LOGSUMEXP)))
        return 0;
    int mask[KILN_MAX_RANK];
    int64_t kd[KILN_MAX_RANK];
    sc_mask(n, xt->rank, mask);
    for (int i = 0; i < xt->rank; i++)
        kd[i] = mask[i] ? 1 : xt->dims[i];
    int64_t count = ex / E;
    int first[RECUR_MAX_ELEMS];
    for (int64_t k = 0; k < E; k++)
        first[k] = 1;
    /* pass 1: sum, prod, max, min (logsumexp: the max m) */
    for (int64_t e = 0; e < ex; e++) {
        int64_t k = reduced_index(xt, mask, kd, e);
        int a = sc_elem_as(c, x, e, od);
        if (a < 0)
            return -1;
        out[k] = first[k] ? a : kiln_lower_emit(c->pb, iop, od, out[k], a,
                                                -1, 0);
        first[k] = 0;
        if (out[k] < 0)
            return -1;
    }
    if (op == KILN_OP_MEAN) {
        int cn = kiln_lower_emit(c->pb, KILN_I_CONST, od, -1, -1, -1,
                                 (double)count);
        for (int64_t k = 0; k < E && cn >= 0; k++)
            if ((out[k] = kiln_lower_emit(c->pb, KILN_I_TRUE_DIV, od, out[k],
                                          cn, -1, 0)) < 0)
                return -1;
        return cn < 0 ? -1 : 1;
    }
    if (op != KILN_OP_LOGSUMEXP)
        return 1;
    /* logsumexp as lower.c computes it: m' = m where m is finite, else
     * 0; log(sum(exp(x - m'))) + m' */
    int mm[RECUR_MAX_ELEMS], s[RECUR_MAX_ELEMS];
    int inf = kiln_lower_emit(c->pb, KILN_I_CONST, od, -1, -1, -1, INFINITY);
    int zero = kiln_lower_emit(c->pb, KILN_I_CONST, od, -1, -1, -1, 0);
    if (inf < 0 || zero < 0)
        return -1;
    for (int64_t k = 0; k < E; k++) {
        int am = kiln_lower_emit(c->pb, KILN_I_ABS, od, out[k], -1, -1, 0);
        int isinf = am < 0 ? -1 : kiln_lower_emit(c->pb, KILN_I_EQ, KILN_BOOL,
                                                  am, inf, -1, 0);
        mm[k] = isinf < 0 ? -1 : kiln_lower_emit(c->pb, KILN_I_WHERE, od,
                                                 isinf, zero, out[k], 0);
        if (mm[k] < 0)
            return -1;
        first[k] = 1;
    }
    for (int64_t e = 0; e < ex; e++) {
        int64_t k = reduced_index(xt, mask, kd, e);
        int a = sc_elem_as(c, x, e, od);
        int d = a < 0 ? -1 : kiln_lower_emit(c->pb, KILN_I_SUB, od, a, mm[k],
                                             -1, 0);
        int ex1 = d < 0 ? -1 : kiln_lower_emit(c->pb, KILN_I_EXP, od, d, -1,
                                               -1, 0);
        if (ex1 < 0)
            return -1;
        s[k] = first[k] ? ex1 : kiln_lower_emit(c->pb, KILN_I_ADD, od, s[k],
                                                ex1, -1, 0);
        first[k] = 0;
        if (s[k] < 0)
            return -1;
    }
    for (int64_t k = 0; k < E; k++) {
        int lg = kiln_lower_emit(c->pb, KILN_I_LOG, od, s[k], -1, -1, 0);
        if (lg < 0 || (out[k] = kiln_lower_emit(c->pb, KILN_I_ADD, od, lg,
                                                mm[k], -1, 0)) < 0)
            return -1;
    }
    return 1;
}

/* Node v's elements into out (E of them): 1 done, 0 not handled (the
 * host path keeps the body), -1 out of memory. */
static int sc_node(sc_ctx *c, int v, int *out, int64_t E)
{
    kiln_graph *b = c->b;
    const kiln_node *n = &b->nodes[v];
    const kiln_type *t = &n->type;
    kiln_dtype od = t->dtype;
    const kiln_op_info *info = kiln_ir_op_info(n->op);
    int64_t ix[KILN_MAX_RANK], jx[KILN_MAX_RANK];
    if (n->op == KILN_OP_CONST) {
        for (int64_t k = 0; k < E; k++) {
            double imm;
            if (!const_imm(n, k, &imm))
                return 0;
            if ((out[k] = kiln_lower_emit(c->pb, KILN_I_CONST, od, -1, -1,
                                          -1, imm)) < 0)
                return -1;
        }
        return 1;
    }
    if (info->category == KILN_CAT_ELEMWISE) {
        if (n->op == KILN_OP_TAKE)
            return 0;
        for (int i = 0; i < n->n_in; i++) {
            const kiln_node *m = &b->nodes[n->in[i]];
            if (m->op != KILN_OP_LITERAL && c->off[n->in[i]] < 0)
                return 0;
        }
        for (int64_t k = 0; k < E; k++) {
            unravel(k, t->rank, t->dims, ix);
            for (int i = 0; i < n->n_in; i++) {
                int u = n->in[i];
                const kiln_type *ut = &b->nodes[u].type;
                if (b->nodes[u].op == KILN_OP_LITERAL)
                    continue;
                int lead = t->rank - ut->rank;
                for (int j = 0; j < ut->rank; j++)
                    jx[j] = ut->dims[j] == 1 ? 0 : ix[lead + j];
                c->fixed[u] = sc_elem(c, u, ravel(ut->rank, ut->dims, jx));
            }
            out[k] = kiln_lower_emit_scalar_node(c->pb, b, v, c->fixed,
                                                 c->err);
            if (out[k] < 0)
                return -1;
        }
        return 1;
    }
    for (int i = 0; i < n->n_in; i++)
        if (b->nodes[n->in[i]].op != KILN_OP_LITERAL &&
            c->off[n->in[i]] < 0)
            return 0;
    if (info->category == KILN_CAT_REDUCE)
        return sc_reduce(c, v, out, E);
    int x = n->n_in > 0 ? n->in[0] : -1;
    const kiln_type *xt = x >= 0 ? &b->nodes[x].type : NULL;
    switch (n->op) {
    case KILN_OP_RESHAPE: case KILN_OP_EXPAND_DIMS: case KILN_OP_SQUEEZE:
        /* row-major order is kept */
        if (small_elems(xt) != E)
            return 0;
        for (int64_t k = 0; k < E; k++)
            if ((out[k] = sc_elem_as(c, x, k, od)) < 0)
                return -1;
        return 1;
    case KILN_OP_TRANSPOSE: {
        int64_t perm[KILN_MAX_RANK];
        for (int i = 0; i < t->rank; i++) {
            int64_t p = n->attrs->has_axes ? n->attrs->axes[i]
                                           : t->rank - 1 - i;
            perm[i] = p < 0 ? p + t->rank : p;
        }
        for (int64_t k = 0; k < E; k++) {
            unravel(k, t->rank, t->dims, ix);
            for (int i = 0; i < t->rank; i++)
                jx[perm[i]] = ix[i];
            if ((out[k] = sc_elem_as(c, x, ravel(xt->rank, xt->dims, jx),
                                     od)) < 0)
                return -1;
        }
        return 1;
    }
    case KILN_OP_BROADCAST_TO:
        for (int64_t k = 0; k < E; k++) {
            unravel(k, t->rank, t->dims, ix);
            int lead = t->rank - xt->rank;
            for (int j = 0; j < xt->rank; j++)
                jx[j] = xt->dims[j] == 1 ? 0 : ix[lead + j];
            if ((out[k] = sc_elem_as(c, x, ravel(xt->rank, xt->dims, jx),
                                     od)) < 0)
                return -1;
        }
        return 1;
    case KILN_OP_JOIN: case KILN_OP_STACK: {
        int stack = n->op == KILN_OP_STACK;
        int64_t ax = n->attrs->has_axes ? n->attrs->axes[0] : 0;
        if (ax < 0)
            ax += t->rank;
        for (int64_t k = 0; k < E; k++) {
            unravel(k, t->rank, t->dims, ix);
            int64_t p = ix[ax];
            int which = -1;
            for (int i = 0; i < n->n_in && which < 0; i++) {
                int64_t len = stack ? 1 : b->nodes[n->in[i]].type.dims[ax];
                if (p < len)
                    which = i;
                else
                    p -= len;
            }
            if (which < 0)
                return 0;
            int u = n->in[which];
            const kiln_type *ut = &b->nodes[u].type;
            int r = 0;
            for (int i = 0; i < t->rank; i++)
                if (i == ax) {
                    if (!stack)
                        jx[r++] = p;
                } else {
                    jx[r++] = ix[i];
                }
            if (r != ut->rank && b->nodes[u].op != KILN_OP_LITERAL)
                return 0;
            if ((out[k] = sc_elem_as(c, u, b->nodes[u].op == KILN_OP_LITERAL
                                               ? 0
                                               : ravel(ut->rank, ut->dims,
                                                       jx),
                                     od)) < 0)
                return -1;
        }
        return 1;
    }
    case KILN_OP_SUBTENSOR: {
        /* each axis of x: an integer (dropped) or a slice */
        int64_t st[KILN_MAX_RANK], sp[KILN_MAX_RANK];
        int keep[KILN_MAX_RANK];
        const kiln_attrs *at = n->attrs;
        for (int i = 0; i < xt->rank; i++) {
            keep[i] = 1;
            st[i] = 0;
            sp[i] = 1;
            if (i >= at->nidx)
                continue;
            const kiln_index *q = &at->idx[i];
            if (q->kind == KILN_INDEX_INT) {
                keep[i] = 0;
                st[i] = q->start < 0 ? q->start + xt->dims[i] : q->start;
                if (st[i] < 0 || st[i] >= xt->dims[i])
                    return 0;
            } else {
                int64_t len;
                st[i] = kiln_ir_slice_start(xt->dims[i], q, &len);
                sp[i] = q->has_step ? q->step : 1;
            }
        }
        for (int64_t k = 0; k < E; k++) {
            unravel(k, t->rank, t->dims, ix);
            int r = 0;
            for (int i = 0; i < xt->rank; i++)
                jx[i] = keep[i] ? st[i] + sp[i] * ix[r++] : st[i];
            if (r != t->rank)
                return 0;
            if ((out[k] = sc_elem_as(c, x, ravel(xt->rank, xt->dims, jx),
                                     od)) < 0)
                return -1;
        }
        return 1;
    }
    case KILN_OP_DOT: case KILN_OP_MATMUL: {
        /* vector or matrix operands: out[i, j] = sum_q a[i, q] b[q, j],
         * the products added in q's order */
        int y = n->in[1];
        const kiln_type *yt = &b->nodes[y].type;
        if (xt->rank < 1 || xt->rank > 2 || yt->rank < 1 || yt->rank > 2 ||
            t->rank != xt->rank + yt->rank - 2 ||
            xt->dims[xt->rank - 1] < 1)
            return 0;
        int64_t K = xt->dims[xt->rank - 1];
        for (int64_t k = 0; k < E; k++) {
            unravel(k, t->rank, t->dims, ix);
            int64_t i = xt->rank == 2 ? ix[0] : 0;
            int64_t j = yt->rank == 2 ? ix[t->rank - 1] : 0;
            int acc = -1;
            for (int64_t q = 0; q < K; q++) {
                int pa = sc_elem_as(c, x, xt->rank == 2 ? i * K + q : q, od);
                int pb = pa < 0 ? -1
                                : sc_elem_as(c, y, yt->rank == 2
                                                       ? q * yt->dims[1] + j
                                                       : q, od);
                int m = pb < 0 ? -1 : kiln_lower_emit(c->pb, KILN_I_MUL, od,
                                                      pa, pb, -1, 0);
                acc = m < 0 ? -1
                      : q == 0 ? m
                               : kiln_lower_emit(c->pb, KILN_I_ADD, od, acc,
                                                 m, -1, 0);
                if (acc < 0)
                    return -1;
            }
            out[k] = acc;
        }
        return 1;
    }
    default:
        return 0;   /* take, check, alloc, nested scans, ODEs, linalg... */
    }
}

/* The static body types of step s's arguments fit the fused kernel:
 * carries and args have the body input's type, sequences one more
 * (leading) axis, final carries and stacked outputs likewise; every
 * step value has at most RECUR_MAX_ELEMS elements; every argument is its
 * buffer as it is (perhaps through a chain of views); no output shares
 * a buffer (or a storage slot) with an input. */
static int step_fits(const kiln_program *p, const kiln_step *s,
                     const kiln_type *in_t, const kiln_type *out_t)
{
    uint32_t nc = s->kernel.n_carry, ns = s->kernel.n_seq;
    if ((uint64_t)nc + ns > (uint64_t)s->n_in || (int)nc > s->n_out)
        return 0;
    for (int i = 0; i < s->n_in; i++) {
        unsigned seq = (uint32_t)i >= nc && (uint32_t)i < nc + ns;
        if (s->in_desc[i].rank != in_t[i].rank + seq ||
            s->in_desc[i].dtype != (uint8_t)in_t[i].dtype ||
            small_elems(&in_t[i]) < 1 || s->in[i].recipe != KILN_VIEW_FULL)
            return 0;
    }
    for (int k = 0; k < s->n_out; k++) {
        unsigned stk = (uint32_t)k >= nc;
        if (s->out_desc[k].rank != out_t[k].rank + stk ||
            s->out_desc[k].dtype != (uint8_t)out_t[k].dtype ||
            small_elems(&out_t[k]) < 1 ||
            s->out[k].recipe != KILN_VIEW_FULL || s->out[k].chain)
            return 0;
        const kiln_buf *ob = &p->bufs[s->out[k].buf];
        for (int i = 0; i < s->n_in; i++) {
            const kiln_buf *ib = &p->bufs[s->in[i].buf];
            if (s->in[i].buf == s->out[k].buf ||
                (ob->kind == KILN_BUF_TEMP && ib->kind == KILN_BUF_TEMP &&
                 ob->slot >= 0 && ob->slot == ib->slot))
                return 0;
        }
    }
    return 1;
}

/* Build the program of body b (rewritten) for step s into pb; outs gets
 * the out_refs (every element of every output, in the exploded order)
 * and base[i] the first exploded input of body input i.  1 when it
 * fits, 0 when the host path keeps it, -1 on an error. */
static int build(prog_builder *pb, kiln_graph *b, const int *base,
                 int *outs, kiln_err *err)
{
    int nn = b->n_nodes;
    char *live = calloc((size_t)(nn ? nn : 1), 1);
    sc_ctx c = {.pb = pb, .b = b, .err = err};
    c.off = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    c.fixed = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    int rc = 1, n_inputs = 0;
    if (!live || !c.off || !c.fixed) {
        rc = oom(err);
        goto done;
    }
    for (int k = 0; k < b->n_outputs; k++)
        live[b->outputs[k].value] = 1;
    for (int v = nn; v-- > 0;)
        if (live[v])
            for (int i = 0; i < b->nodes[v].n_in; i++)
                live[b->nodes[v].in[i]] = 1;
    for (int v = 0; v < nn; v++) {
        c.off[v] = -1;
        c.fixed[v] = -1;
    }
    for (int v = 0; v < nn && rc == 1; v++) {
        kiln_node *n = &b->nodes[v];
        int64_t E = small_elems(&n->type);
        if (n->op == KILN_OP_INPUT) {
            int i = n_inputs++;
            if (!live[v])
                continue;
            int o = sc_alloc(&c, (int)(E > 0 ? E : 0));
            if (o < 0) {
                rc = oom(err);
                break;
            }
            c.off[v] = o;
            for (int64_t k = 0; k < E && rc == 1; k++)
                if ((c.pool[o + k] = kiln_lower_emit(pb, KILN_I_LOAD,
                                                     n->type.dtype,
                                                     base[i] + (int)k, -1, -1,
                                                     0)) < 0)
                    rc = oom(err);
            continue;
        }
        if (!live[v] || n->op == KILN_OP_LITERAL)
            continue;   /* literals: inlined where they are read */
        if (E < 0) {
            rc = 0;
            break;
        }
        int o = sc_alloc(&c, (int)E);
        if (o < 0) {
            rc = oom(err);
            break;
        }
        int tmp[RECUR_MAX_ELEMS];
        rc = sc_node(&c, v, tmp, E);
        if (rc < 0 && !(err && err->code))
            oom(err);
        if (rc == 1) {
            memcpy(c.pool + o, tmp, sizeof(int) * (size_t)E);
            c.off[v] = o;
        }
        if (rc == 1 && pb->n > RECUR_MAX_INSTRS)
            rc = 0;
    }
    int j = 0;
    for (int k = 0; k < b->n_outputs && rc == 1; k++) {
        int v = b->outputs[k].value;
        int64_t E = small_elems(&b->nodes[v].type);
        for (int64_t e = 0; e < E && rc == 1; e++)
            if ((outs[j++] = sc_elem(&c, v, e)) < 0)
                rc = oom(err);
    }
done:
    free(live);
    free(c.off);
    free(c.fixed);
    free(c.pool);
    return rc;
}

/* Replace step s's arguments by their elements' views: a rank-0 carry
 * or arg, a rank-1 sequence or stacked output stays itself; element e
 * of a larger one is the view x[ix(e)] (carry, arg, final carry) or
 * x[:, ix(e)] (sequence, stacked output) of the same buffer through the
 * same chain, whose index the step owns (view_attrs). */
static int explode(kiln_step *s, const kiln_type *in_t, const kiln_type *out_t,
                   int n_in, int n_out, kiln_err *err)
{
    uint32_t nc = s->kernel.n_carry, ns = s->kernel.n_seq;
    kiln_step old = *s;
    kiln_attrs *va = calloc((size_t)n_in + (size_t)n_out + 1, sizeof *va);
    if (!va || kiln_lower_step_args(s, n_in, n_out)) {
        free(va);
        return oom(err);
    }
    kiln_arg *in = s->in, *out = s->out;
    kiln_arg_desc *in_desc = s->in_desc, *out_desc = s->out_desc;
    int n_va = 0;
    uint32_t new_nc = 0, new_ns = 0;
    for (int side = 0; side < 2; side++) {
        int n = side ? old.n_out : old.n_in, j = 0;
        const kiln_type *ts = side ? out_t : in_t;
        for (int i = 0; i < n; i++) {
            const kiln_arg *a = side ? &old.out[i] : &old.in[i];
            const kiln_arg_desc *d = side ? &old.out_desc[i]
                                          : &old.in_desc[i];
            int lead = side ? (uint32_t)i >= nc
                            : (uint32_t)i >= nc && (uint32_t)i < nc + ns;
            int64_t E = small_elems(&ts[i]);
            for (int64_t e = 0; e < E; e++, j++) {
                kiln_arg *na = side ? &out[j] : &in[j];
                kiln_arg_desc *nd = side ? &out_desc[j] : &in_desc[j];
                *na = *a;
                *nd = *d;
                if (!side && (uint32_t)i < nc)
                    new_nc++;
                else if (!side && lead)
                    new_ns++;
                if (ts[i].rank == 0)
                    continue;
                int64_t ix[KILN_MAX_RANK];
                unravel(e, ts[i].rank, ts[i].dims, ix);
                kiln_attrs *at = &va[n_va++];
                at->nidx = ts[i].rank + lead;
                if (lead)
                    at->idx[0].kind = KILN_INDEX_SLICE;
                for (int q = 0; q < ts[i].rank; q++) {
                    at->idx[lead + q].kind = KILN_INDEX_INT;
                    at->idx[lead + q].start = ix[q];
                    at->idx[lead + q].has_start = 1;
                }
                na->recipe = KILN_VIEW_SUBTENSOR;
                na->attrs = at;
                nd->rank = (uint8_t)lead;
            }
        }
    }
    free(old.in);   /* with out, in_desc, out_desc, vin, vout */
    free(old.view_attrs);
    s->view_attrs = va;
    s->kernel.n_carry = new_nc;
    s->kernel.n_seq = new_ns;
    return 0;
}

/* Step s's program, when its body fits: 0 (with or without one), or an
 * error code. */
static int attach_one(kiln_program *p, const kiln_graph *g, kiln_step *s,
                      const kiln_rw_config *rwc, kiln_err *err)
{
    const kiln_node *n = &g->nodes[s->node];
    if (!n->attrs || !n->attrs->body)
        return 0;
    kiln_graph *b = kiln_ir_clone(n->attrs->body, err);
    if (!b)
        return err ? err->code : KILN_ERR_NOMEM;
    if (rwc && kiln_rw_run(&b, rwc, NULL, NULL, err)) {
        /* the host path compiles the body with the same passes and says
         * what failed */
        int code = err ? err->code : 0;
        kiln_graph_free(b);
        if (code == KILN_ERR_NOMEM)
            return code;
        if (err) {
            err->code = 0;
            err->message[0] = 0;
        }
        return 0;
    }
    /* the body's input and output types, and the exploded counts */
    int n_in = s->n_in, n_out = s->n_out, rc = 1;
    kiln_type *in_t = calloc((size_t)(n_in + n_out + 1), sizeof *in_t);
    kiln_type *out_t = in_t ? in_t + n_in : NULL;
    int *base = calloc((size_t)n_in + 1, sizeof *base);
    int xi = 0, xo = 0, n_inputs = 0, tensors = 0;
    if (!in_t || !base)
        rc = oom(err);
    for (int v = 0; v < b->n_nodes && rc == 1; v++)
        if (b->nodes[v].op == KILN_OP_INPUT) {
            if (n_inputs < n_in)
                in_t[n_inputs] = b->nodes[v].type;
            n_inputs++;
        }
    if (rc == 1 && (n_inputs != n_in || b->n_outputs != n_out))
        rc = 0;
    for (int k = 0; k < n_out && rc == 1; k++)
        out_t[k] = b->nodes[b->outputs[k].value].type;
    if (rc == 1 && !step_fits(p, s, in_t, out_t))
        rc = 0;
    for (int i = 0; i < n_in && rc == 1; i++) {
        base[i] = xi;
        xi += (int)small_elems(&in_t[i]);
        tensors |= in_t[i].rank > 0;
    }
    for (int k = 0; k < n_out && rc == 1; k++) {
        xo += (int)small_elems(&out_t[k]);
        tensors |= out_t[k].rank > 0;
    }
    prog_builder pb = {0};
    int *outs = rc == 1 ? malloc(sizeof(int) * (size_t)(xo ? xo : 1)) : NULL;
    if (rc == 1)
        rc = outs ? build(&pb, b, base, outs, err) : oom(err);
    kiln_graph_free(b);
    if (rc == 1 && pb.n > 0 && tensors)
        rc = explode(s, in_t, out_t, xi, xo, err) ? -1 : 1;
    if (rc == 1 && pb.n > 0) {
        s->out_refs = malloc(sizeof(int32_t) * (size_t)(xo ? xo : 1));
        if (!s->out_refs) {
            rc = oom(err);
        } else {
            for (int k = 0; k < xo; k++)
                s->out_refs[k] = outs[k];
            s->instrs = pb.ins;
            pb.ins = NULL;
            s->kernel.n_instrs = (uint32_t)pb.n;
            s->kernel.instrs = s->instrs;
            s->kernel.out_refs = s->out_refs;
        }
    }
    free(pb.ins);
    free(outs);
    free(in_t);
    free(base);
    return rc < 0 ? (err && err->code ? err->code : KILN_ERR_NOMEM) : 0;
}

int kiln_recur_attach_programs(kiln_program *prog, const kiln_graph *g,
                               const struct kiln_rw_config *rwc,
                               kiln_err *err)
{
    if (!rwc || !((rwc->passes >> KILN_PASS_RECUR) & 1))
        return 0;
    for (int i = 0; i < prog->n_steps; i++) {
        kiln_step *s = &prog->steps[i];
        if (s->kernel.kind != KILN_KERNEL_RECUR || s->kernel.n_instrs)
            continue;
        int rc = attach_one(prog, g, s, rwc, err);
        if (rc)
            return rc;
    }
    return 0;
}
