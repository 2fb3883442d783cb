/*
 * grad.c — reverse-mode differentiation (prefix kiln_grad_; public
 * kiln_graph_grad).
 *
 * The gradient is built as ordinary nodes appended to the same graph, so
 * it prints, rewrites, compiles and caches like anything else.  The
 * classic algorithm (Griewank & Walther, "Evaluating Derivatives", 2nd
 * ed., ch. 3; the same structure as PyTensor's `grad`): mark the nodes
 * that depend on a wrt and that the cost depends on; walk them from the
 * cost backwards in reverse topological order, seeding d cost / d cost =
 * 1; each node's rule (docs/ops.md) turns its output adjoint into
 * contributions to its inputs' adjoints, which are summed.
 *
 * Broadcasting is undone by summing each contribution over the axes its
 * input was broadcast along.  A symbolic dim that broadcast against
 * another size is taken as equal to it (the usual case); a symbolic dim
 * that is 1 at run time while the other side is not is not supported by
 * gradients (documented in docs/ops.md).
 *
 * Node pointers are re-fetched after every builder call: appending a
 * node may move the node array.
 */
#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The adjoint of output k >= 1 of a scan (result(s, index=k)). */
typedef struct radj {
    kiln_value scan, adj;
    int index;
} radj;

typedef struct gctx {
    kiln_graph *g;
    kiln_err *err;
    kiln_value *adj;        /* adjoint of each original node, or -1 */
    unsigned char *path;    /* depends on a wrt, and the cost on it */
    int n;                  /* nodes before differentiation */
    radj *radj;             /* scans' other outputs' adjoints */
    int n_radj, cap_radj;
} gctx;

#define NODE(c, v) (&(c)->g->nodes[(v)])
#define TRY(x)          \
    do {                \
        if ((x) < 0)    \
            return -1;  \
    } while (0)

static int is_float(kiln_dtype d) { return d == KILN_F64 || d == KILN_F32; }

/* ---- builder shorthands (return -1 on error, err set) ---------------- */

static kiln_value lit(gctx *c, double v)
{
    return kiln_graph_literal(c->g, v, KILN_LIT_FLOAT, c->err);
}

static kiln_value opn(gctx *c, const char *op, int n, const kiln_value *in,
                      const kiln_attr *at, int na)
{
    for (int i = 0; i < n; i++)
        if (in[i] < 0)
            return -1;
    return kiln_graph_op(c->g, op, n, in, at, na, c->err);
}

static kiln_value op1(gctx *c, const char *op, kiln_value a)
{
    return opn(c, op, 1, &a, NULL, 0);
}

static kiln_value op2(gctx *c, const char *op, kiln_value a, kiln_value b)
{
    kiln_value in[2] = {a, b};
    return opn(c, op, 2, in, NULL, 0);
}

static kiln_value op3(gctx *c, const char *op, kiln_value a, kiln_value b,
                      kiln_value d)
{
    kiln_value in[3] = {a, b, d};
    return opn(c, op, 3, in, NULL, 0);
}

static kiln_value op1_axes(gctx *c, const char *op, kiln_value a,
                           const char *key, int n, const int64_t *axes,
                           int keepdims)
{
    kiln_attr at[2];
    int na = 0;
    at[na++] = (kiln_attr){.key = key, .kind = KILN_ATTR_INTS, .n = n,
                           .ints = axes};
    if (keepdims >= 0)
        at[na++] = (kiln_attr){.key = "keepdims", .kind = KILN_ATTR_BOOL,
                               .i = keepdims};
    return opn(c, op, 1, &a, at, na);
}

static kiln_value cast_to(gctx *c, kiln_value v, kiln_dtype dt)
{
    if (v < 0 || NODE(c, v)->type.dtype == dt)
        return v;
    kiln_attr at = {.key = "dtype", .kind = KILN_ATTR_DTYPE, .i = dt};
    return opn(c, "cast", 1, &v, &at, 1);
}

/* ---- adjoints -------------------------------------------------------- */

/* Sum contribution `d` (the shape of the consumer's output) down to the
 * shape of input `x`, cast it to x's dtype, and add it to x's adjoint. */
static int contribute(gctx *c, kiln_value x, kiln_value d)
{
    if (d < 0)
        return -1;
    if (!c->path[x])
        return 0;
    kiln_type xt = NODE(c, x)->type, dt = NODE(c, d)->type;
    int64_t axes[KILN_MAX_RANK];
    int na = 0, lead = dt.rank - xt.rank;
    for (int i = 0; i < dt.rank; i++) {
        int j = i - lead;
        if (j < 0 || (xt.dims[j] == 1 && dt.dims[i] != 1))
            axes[na++] = i;
    }
    if (na > 0) {
        d = op1_axes(c, "sum", d, "axis", na, axes, 1);
        if (lead > 0) {
            int64_t sq[KILN_MAX_RANK];
            for (int i = 0; i < lead; i++)
                sq[i] = i;
            d = op1_axes(c, "squeeze", d, "axis", lead, sq, -1);
        }
    }
    d = cast_to(c, d, xt.dtype);
    TRY(d);
    if (c->adj[x] < 0)
        c->adj[x] = d;
    else
        c->adj[x] = op2(c, "add", c->adj[x], d);
    return c->adj[x] < 0 ? -1 : 0;
}

/* Normalised reduce axes of node v over its input's rank (all when the
 * node has none), sorted. */
static int reduce_axes(const kiln_node *n, int rank, int64_t *axes)
{
    int mask[KILN_MAX_RANK] = {0}, na = 0;
    if (!n->attrs->has_axes)
        for (int i = 0; i < rank; i++)
            mask[i] = 1;
    for (int i = 0; n->attrs->has_axes && i < n->attrs->naxes; i++) {
        int64_t a = n->attrs->axes[i];
        mask[a < 0 ? a + rank : a] = 1;
    }
    for (int i = 0; i < rank; i++)
        if (mask[i])
            axes[na++] = i;
    return na;
}

/* A reduction's output adjoint (or output) with the reduced axes put back
 * as size 1, so that it broadcasts against the input. */
static kiln_value keep_reduced(gctx *c, kiln_value v, kiln_value gv)
{
    const kiln_node *n = NODE(c, v);
    if (n->attrs->keepdims)
        return gv;
    int64_t axes[KILN_MAX_RANK];
    int na = reduce_axes(n, NODE(c, n->in[0])->type.rank, axes);
    if (na == 0)
        return gv;
    return op1_axes(c, "expand_dims", gv, "axis", na, axes, -1);
}

static int grad_reduce(gctx *c, kiln_value v, kiln_value gv)
{
    const kiln_node *n = NODE(c, v);
    int op = n->op;
    kiln_value x = n->in[0];
    kiln_value gb = keep_reduced(c, v, gv);
    TRY(gb);
    switch (op) {
    case KILN_OP_SUM:
        return contribute(c, x, op2(c, "fill", x, gb));
    case KILN_OP_MEAN: {
        int64_t axes[KILN_MAX_RANK];
        const kiln_type *xt = &NODE(c, x)->type;
        int na = reduce_axes(NODE(c, v), xt->rank, axes);
        int64_t count = 1;
        for (int i = 0; i < na && count > 0; i++)
            count = xt->dims[axes[i]] >= 0 ? count * xt->dims[axes[i]] : -1;
        kiln_value cnt;
        if (count >= 0)
            cnt = lit(c, (double)count);
        else  /* symbolic: count the elements at run time */
            cnt = op1_axes(c, "sum", op2(c, "fill", x, lit(c, 1.0)), "axis",
                           na, axes, 1);
        return contribute(c, x, op2(c, "true_div", op2(c, "fill", x, gb),
                                    cnt));
    }
    case KILN_OP_PROD: {
        kiln_value vb = keep_reduced(c, v, v);
        return contribute(c, x, op2(c, "mul", gb, op2(c, "true_div", vb, x)));
    }
    case KILN_OP_MAX:
    case KILN_OP_MIN: {
        /* every element equal to the extremum gets the whole adjoint, as
         * in PyTensor's Max grad */
        kiln_value vb = keep_reduced(c, v, v);
        return contribute(c, x, op2(c, "mul", gb, op2(c, "eq", x, vb)));
    }
    default: { /* logsumexp: softmax weights */
        kiln_value vb = keep_reduced(c, v, v);
        return contribute(c, x, op2(c, "mul", gb,
                                    op1(c, "exp", op2(c, "sub", x, vb))));
    }
    }
}

/* x[idx...] of basic index entries, as the builder takes them. */
static kiln_value sub_of(gctx *c, kiln_value x, const kiln_attrs *at)
{
    TRY(x);
    return kiln_graph_subtensor(c->g, x, at->nidx, at->idx, c->err);
}

static kiln_value zeros_like(gctx *c, kiln_value x)
{
    return op2(c, "fill", x, lit(c, 0.0));
}

static int grad_join(gctx *c, kiln_value v, kiln_value gv)
{
    kiln_node n = *NODE(c, v);
    int stack = n.op == KILN_OP_STACK;
    int r = n.type.rank;
    int64_t ax = n.attrs->has_axes ? n.attrs->axes[0] : 0;
    if (ax < 0)
        ax += r;
    /* one input may have a named symbolic size along the axis (a derived
     * dim, `K-1`): the inputs after it are sliced from the end, and its
     * own slice is reshaped to its declared dims (sized at run time) */
    int sym = -1;
    int64_t after = 0;
    for (int i = 0; !stack && i < n.n_in; i++) {
        const kiln_node *xn = NODE(c, NODE(c, v)->in[i]);
        int64_t len = xn->type.dims[ax];
        if (len >= 0) {
            if (sym >= 0)
                after += len;
            continue;
        }
        if (sym >= 0 || !KILN_DIM_IS_SYM(len) ||
            !c->g->symbols[KILN_SYM_INDEX(len)])
            return kiln_seterr(c->err, KILN_ERR_TYPE,
                               "grad: no gradient through join of "
                               "symbolic sizes along its axis");
        sym = i;
    }
    int64_t off = 0;
    for (int i = 0; i < n.n_in; i++) {
        kiln_value x = NODE(c, v)->in[i];
        kiln_index idx[KILN_MAX_RANK];
        memset(idx, 0, sizeof idx);
        for (int k = 0; k <= ax; k++)
            idx[k].kind = KILN_INDEX_SLICE;
        int64_t len = stack ? 1 : NODE(c, x)->type.dims[ax];
        if (stack) {
            idx[ax].kind = KILN_INDEX_INT;
            idx[ax].start = i;
        } else if (sym < 0 || i < sym) {
            idx[ax].start = off;
            idx[ax].stop = off + len;
            idx[ax].has_start = idx[ax].has_stop = 1;
        } else if (i == sym) {
            idx[ax].start = off;
            idx[ax].stop = -after;
            idx[ax].has_start = 1;
            idx[ax].has_stop = after > 0;
        } else {
            idx[ax].start = -after;
            idx[ax].stop = -after + len;
            idx[ax].has_start = 1;
            idx[ax].has_stop = -after + len < 0;
            after -= len;
        }
        if (len >= 0)
            off += len;
        if (!c->path[x])
            continue;
        kiln_value part = kiln_graph_subtensor(c->g, gv, (int)ax + 1, idx,
                                               c->err);
        if (i == sym && part >= 0) {
            const kiln_type *xt = &NODE(c, x)->type;
            kiln_attr a = {.key = "shape", .kind = KILN_ATTR_INTS,
                           .n = xt->rank, .ints = xt->dims};
            part = kiln_graph_op(c->g, "reshape", 1, &part, &a, 1, c->err);
        }
        TRY(contribute(c, x, part));
    }
    return 0;
}

/* x with its last two axes swapped (rank >= 2). */
static kiln_value swap_last2(gctx *c, kiln_value x)
{
    if (x < 0)
        return x;
    int r = NODE(c, x)->type.rank;
    int64_t perm[KILN_MAX_RANK];
    for (int i = 0; i < r; i++)
        perm[i] = i < r - 2 ? i : i == r - 2 ? r - 1 : r - 2;
    return op1_axes(c, "transpose", x, "axes", r, perm, -1);
}

/* x with a size-1 axis inserted (expand_dims) or removed (squeeze) at
 * axis ax of the result / of x. */
static kiln_value unit_axis(gctx *c, const char *op, kiln_value x, int64_t ax)
{
    return x < 0 ? x : op1_axes(c, op, x, "axis", 1, &ax, -1);
}

/* issue 29: matmul with an operand of rank > 2 (batch axes broadcast;
 * contribute sums them back to each operand's shape):
 *   a [..., m, k], b [..., k, n]: ga = g b^T, gb = a^T g;
 *   b a vector [k] (g [..., m]): ga = g[..., None] * b,
 *     gb = (a^T g[..., None])[..., 0];
 *   a a vector [k] (g [..., n]): ga = (g[..., None, :] b^T)[..., 0, :],
 *     gb = a[:, None] * g[..., None, :]. */
static void grad_batched_matmul(gctx *c, kiln_value a, kiln_value b,
                                kiln_value gv, kiln_value *ga,
                                kiln_value *gb)
{
    int ra = NODE(c, a)->type.rank, rb = NODE(c, b)->type.rank;
    int rg = NODE(c, gv)->type.rank;
    if (rb == 1) {
        kiln_value ge = unit_axis(c, "expand_dims", gv, rg);
        *ga = op2(c, "mul", ge, b);
        *gb = unit_axis(c, "squeeze",
                        op2(c, "matmul", swap_last2(c, a), ge), rg);
    } else if (ra == 1) {
        kiln_value ge = unit_axis(c, "expand_dims", gv, rg - 1);
        *ga = unit_axis(c, "squeeze",
                        op2(c, "matmul", ge, swap_last2(c, b)), rg - 1);
        *gb = op2(c, "mul", unit_axis(c, "expand_dims", a, 1), ge);
    } else {
        *ga = op2(c, "matmul", gv, swap_last2(c, b));
        *gb = op2(c, "matmul", swap_last2(c, a), gv);
    }
}

static int grad_dot(gctx *c, kiln_value v, kiln_value gv)
{
    kiln_node n = *NODE(c, v);
    kiln_value a = n.in[0], b = n.in[1];
    int ra = NODE(c, a)->type.rank, rb = NODE(c, b)->type.rank;
    int64_t one = 1;
    kiln_value ga, gb;
    if (ra > 2 || rb > 2) {
        grad_batched_matmul(c, a, b, gv, &ga, &gb);
    } else if (ra == 1 && rb == 1) {
        ga = op2(c, "mul", gv, b);
        gb = op2(c, "mul", gv, a);
    } else if (ra == 2 && rb == 1) {
        /* (m,k)(k) -> (m): ga = g[:, None] * b, gb = a^T g */
        ga = op2(c, "mul", op1_axes(c, "expand_dims", gv, "axis", 1, &one, -1),
                 b);
        gb = op2(c, "dot", op1(c, "transpose", a), gv);
    } else if (ra == 1 && rb == 2) {
        /* (k)(k,n) -> (n): ga = b g, gb = a[:, None] * g */
        ga = op2(c, "dot", b, gv);
        gb = op2(c, "mul", op1_axes(c, "expand_dims", a, "axis", 1, &one, -1),
                 gv);
    } else {
        ga = op2(c, "dot", gv, op1(c, "transpose", b));
        gb = op2(c, "dot", op1(c, "transpose", a), gv);
    }
    if (c->path[a])
        TRY(contribute(c, a, ga));
    if (c->path[b])
        TRY(contribute(c, b, gb));
    return 0;
}

static int grad_shape(gctx *c, kiln_value v, kiln_value gv)
{
    kiln_node n = *NODE(c, v);
    kiln_value x = n.in[0];
    kiln_type xt = NODE(c, x)->type;
    switch (n.op) {
    case KILN_OP_RESHAPE: {
        int64_t shape[KILN_MAX_RANK];
        /* x's dims: a named symbol (`K`, a derived `K-1`) stays, sized
         * at run time from the inputs; one anonymous dim is inferred
         * (-1); several stay as symbols too, each sized at run time when
         * the node that has it is computed (context.c bind_anonymous) */
        int n_anon = 0, anon = -1;
        for (int i = 0; i < xt.rank; i++) {
            int64_t d = xt.dims[i];
            int named = KILN_DIM_IS_SYM(d) &&
                        KILN_SYM_INDEX(d) < c->g->n_symbols &&
                        c->g->symbols[KILN_SYM_INDEX(d)];
            shape[i] = d;
            if (d < 0 && !named)
                n_anon++, anon = i;
        }
        if (n_anon == 1)
            shape[anon] = -1;
        return contribute(c, x, op1_axes(c, "reshape", gv, "shape", xt.rank,
                                         shape, -1));
    }
    case KILN_OP_TRANSPOSE: {
        int64_t inv[KILN_MAX_RANK];
        for (int i = 0; i < xt.rank; i++) {
            int64_t p = n.attrs->has_axes ? n.attrs->axes[i] : xt.rank - 1 - i;
            inv[p < 0 ? p + xt.rank : p] = i;
        }
        return contribute(c, x, op1_axes(c, "transpose", gv, "axes", xt.rank,
                                         inv, -1));
    }
    case KILN_OP_EXPAND_DIMS: {
        int64_t axes[KILN_MAX_RANK];
        int r = n.type.rank;
        for (int i = 0; i < n.attrs->naxes; i++)
            axes[i] = n.attrs->axes[i] < 0 ? n.attrs->axes[i] + r
                                          : n.attrs->axes[i];
        return contribute(c, x, op1_axes(c, "squeeze", gv, "axis",
                                         n.attrs->naxes, axes, -1));
    }
    case KILN_OP_SQUEEZE: {
        int64_t axes[KILN_MAX_RANK];
        int na = 0;
        if (n.attrs->has_axes) {
            for (int i = 0; i < n.attrs->naxes; i++)
                axes[na++] = n.attrs->axes[i] < 0 ? n.attrs->axes[i] + xt.rank
                                                 : n.attrs->axes[i];
        } else {
            for (int i = 0; i < xt.rank; i++)
                if (xt.dims[i] == 1)
                    axes[na++] = i;
        }
        /* expand_dims wants its axes in increasing order */
        for (int i = 1; i < na; i++)
            for (int j = i; j > 0 && axes[j - 1] > axes[j]; j--) {
                int64_t t = axes[j];
                axes[j] = axes[j - 1];
                axes[j - 1] = t;
            }
        if (na == 0)
            return contribute(c, x, gv);
        return contribute(c, x, op1_axes(c, "expand_dims", gv, "axis", na,
                                         axes, -1));
    }
    case KILN_OP_BROADCAST_TO:
    case KILN_OP_ALLOC:
        return contribute(c, x, gv);
    case KILN_OP_JOIN:
    case KILN_OP_STACK:
        return grad_join(c, v, gv);
    }
    return 0;  /* zeros, ones: no inputs */
}

static kiln_value take_axis(gctx *c, kiln_value x, kiln_value idx, int axis)
{
    kiln_attr a = {.key = "axis", .kind = KILN_ATTR_INT, .i = axis};
    kiln_value in[2] = {x, idx};
    return opn(c, "take", 2, in, &a, 1);
}

/* v with `n` size-1 axes appended (n >= 0). */
static kiln_value expand_trailing(gctx *c, kiln_value v, int n)
{
    if (v < 0 || n == 0)
        return v;
    int64_t axes[KILN_MAX_RANK];
    int r = NODE(c, v)->type.rank;
    for (int i = 0; i < n; i++)
        axes[i] = r + i;
    return op1_axes(c, "expand_dims", v, "axis", n, axes, -1);
}

/* A const of grad's own, under a name no node has. */
static kiln_value grad_const(gctx *c, const char *what, kiln_value v,
                             kiln_dtype dt, const kiln_type *shape,
                             const void *data)
{
    char name[64];
    snprintf(name, sizeof name, "_grad_%s%d", what, v);
    for (int k = 1; kiln_graph_lookup(c->g, name) >= 0; k++)
        snprintf(name, sizeof name, "_grad_%s%d_%d", what, v, k);
    return kiln_graph_const(c->g, name, dt, shape->rank, shape->dims, data,
                            c->err);
}

#define ALL_KEPT (-2)

typedef struct { int64_t entry, pos; } ent_pos;

static int cmp_ent_pos(const void *a, const void *b)
{
    const ent_pos *p = a, *q = b;
    if (p->entry != q->entry)
        return p->entry < q->entry ? -1 : 1;
    return (p->pos > q->pos) - (p->pos < q->pos);
}

/* For a constant index whose entries can be normalised now (no negative
 * entry, or a static axis length): the positions whose write survives,
 * as a bool const of idx's shape, or ALL_KEPT when no entry repeats.
 * -3 when the index cannot be resolved here; -1 on error. */
static kiln_value last_writers_const(gctx *c, kiln_value v)
{
    kiln_node n = *NODE(c, v);
    const kiln_node *in = NODE(c, n.in[1]);
    int64_t len = NODE(c, n.in[0])->type.dims[n.attrs->axes[0]];
    if (in->op != KILN_OP_CONST || !in->data)
        return -3;
    int64_t m = kiln_shape_numel(in->type.rank, in->type.dims);
    ent_pos *e = malloc(sizeof *e * (size_t)(m ? m : 1));
    unsigned char *keep = malloc((size_t)(m ? m : 1));
    if (!e || !keep) {
        free(e);
        free(keep);
        return kiln_seterr(c->err, KILN_ERR_NOMEM, "out of memory"), -1;
    }
    int resolved = 1, dup = 0;
    for (int64_t p = 0; p < m; p++) {
        int64_t k = in->type.dtype == KILN_I32 ? ((const int32_t *)in->data)[p]
                                               : ((const int64_t *)in->data)[p];
        if (k < 0 && len < 0)
            resolved = 0;
        e[p] = (ent_pos){k < 0 ? k + len : k, p};
        keep[p] = 1;
    }
    if (resolved) {
        qsort(e, (size_t)m, sizeof *e, cmp_ent_pos);
        for (int64_t i = 0; i + 1 < m; i++)
            if (e[i].entry == e[i + 1].entry) {
                keep[e[i].pos] = 0;
                dup = 1;
            }
    }
    kiln_value r = !resolved ? -3 : !dup ? ALL_KEPT
                 : grad_const(c, "kept", v, KILN_BOOL, &in->type, keep);
    free(e);
    free(keep);
    return r;
}

/* An i64 tensor of `value`s of shape (1, ..., n, ..., 1): x's length n
 * along `axis`, size 1 elsewhere (a slice of x, so that a symbolic n
 * stays x's). */
static kiln_value axis_vector(gctx *c, kiln_value x, int axis, int value)
{
    int r = NODE(c, x)->type.rank;
    kiln_index ix[KILN_MAX_RANK];
    memset(ix, 0, sizeof ix);
    for (int i = 0; i < r; i++) {
        ix[i].kind = KILN_INDEX_SLICE;
        ix[i].has_stop = i != axis;
        ix[i].stop = 1;
    }
    kiln_value s = r > 1 ? kiln_graph_subtensor(c->g, x, r, ix, c->err) : x;
    kiln_value lv = kiln_graph_literal(c->g, value, KILN_LIT_INT, c->err);
    return op2(c, "fill", cast_to(c, s, KILN_I64), lv);
}

/* advanced_set_subtensor node v keeps the last write of each entry of x
 * its index names (after negative entries count from the end).  Which
 * positions of the index write an entry that survives, as a bool tensor
 * that broadcasts against take(x, idx, axis), or ALL_KEPT when it is
 * known that no entry repeats.
 *
 * At run time: write each position's number at the entry it names, in a
 * vector along x's axis, and read it back through the same index (take
 * normalises negative entries as the write did): a position survives
 * when it reads its own number.  That needs the positions as a constant,
 * so a static index shape; with a symbolic one the survivors cannot be
 * told apart: the mask is then that of entries written once, and *fill
 * (the adjoint of the others, else 0) is NaN (docs/ops.md). */
static kiln_value last_writers(gctx *c, kiln_value v, double *fill)
{
    kiln_node n = *NODE(c, v);
    kiln_value x = n.in[0], idx = n.in[1];
    int axis = (int)n.attrs->axes[0];
    int trail = NODE(c, x)->type.rank - axis - 1;
    *fill = 0.0;
    kiln_value r = last_writers_const(c, v);
    if (r != -3)
        return r < 0 ? r : expand_trailing(c, r, trail);
    kiln_type it = NODE(c, idx)->type;
    int64_t m = kiln_shape_numel(it.rank, it.dims);
    if (m >= 0) {
        int64_t *pos = malloc(sizeof *pos * (size_t)(m ? m : 1));
        if (!pos)
            return kiln_seterr(c->err, KILN_ERR_NOMEM, "out of memory"), -1;
        for (int64_t p = 0; p < m; p++)
            pos[p] = p;
        kiln_value pv = grad_const(c, "pos", v, KILN_I64, &it, pos);
        free(pos);
        pv = expand_trailing(c, pv, trail);
        kiln_value w = axis_vector(c, x, axis, -1);
        TRY(pv);
        TRY(w);
        w = kiln_graph_advanced_set_subtensor(c->g, w, idx, axis, pv, 0,
                                              c->err);
        return op2(c, "eq", take_axis(c, w, idx, axis), pv);
    }
    /* symbolic index shape: count the writes of each entry */
    *fill = NAN;
    kiln_value one = kiln_graph_literal(c->g, 1, KILN_LIT_INT, c->err);
    kiln_value cnt = axis_vector(c, x, axis, 0);
    TRY(one);
    TRY(cnt);
    cnt = kiln_graph_advanced_set_subtensor(c->g, cnt, idx, axis, one, 1,
                                            c->err);
    return op2(c, "eq", take_axis(c, cnt, idx, axis), one);
}

static int grad_index(gctx *c, kiln_value v, kiln_value gv)
{
    kiln_node n = *NODE(c, v);
    kiln_attrs at = *n.attrs;
    kiln_value x = n.in[0];
    int axis = at.has_axes ? (int)at.axes[0] : 0;
    switch (n.op) {
    case KILN_OP_SUBTENSOR:
        return contribute(c, x, kiln_graph_set_subtensor(
                                    c->g, zeros_like(c, x), at.nidx, at.idx,
                                    gv, 1, c->err));
    case KILN_OP_TAKE: {
        kiln_value z = zeros_like(c, x);
        TRY(z);
        return contribute(c, x, kiln_graph_advanced_set_subtensor(
                                    c->g, z, n.in[1], axis, gv, 1, c->err));
    }
    case KILN_OP_SET_SUBTENSOR:
    case KILN_OP_INC_SUBTENSOR: {
        kiln_value val = n.in[1];
        if (c->path[x]) {
            kiln_value gx = gv;
            if (n.op == KILN_OP_SET_SUBTENSOR) {
                kiln_value z = lit(c, 0.0);
                TRY(z);
                gx = kiln_graph_set_subtensor(c->g, gv, at.nidx, at.idx, z, 0,
                                              c->err);
            }
            TRY(contribute(c, x, gx));
        }
        if (c->path[val])
            TRY(contribute(c, val, sub_of(c, gv, &at)));
        return 0;
    }
    default: { /* advanced set/inc: x, idx, value */
        kiln_value idx = n.in[1], val = n.in[2];
        if (c->path[x]) {
            kiln_value gx = gv;
            if (n.op == KILN_OP_ADVANCED_SET_SUBTENSOR) {
                kiln_value z = lit(c, 0.0);
                TRY(z);
                gx = kiln_graph_advanced_set_subtensor(c->g, gv, idx, axis, z,
                                                       0, c->err);
            }
            TRY(contribute(c, x, gx));
        }
        if (c->path[val]) {
            kiln_value gval = take_axis(c, gv, idx, axis);
            if (n.op == KILN_OP_ADVANCED_SET_SUBTENSOR) {
                /* only the last write of each entry survives: the others
                 * get no adjoint */
                double fill;
                kiln_value keep = last_writers(c, v, &fill);
                if (keep == -1)
                    return -1;
                if (keep != ALL_KEPT)
                    gval = op3(c, "where", keep, gval, lit(c, fill));
            }
            TRY(contribute(c, val, gval));
        }
        return 0;
    }
    }
}

/* 2/sqrt(pi), for erf' (A&S 7.1.19) */
#define TWO_OVER_SQRT_PI 1.1283791670955126

/* n-ary mul (made by core/rewrite): d/d x_i = g * prod_{j<i} x_j *
 * prod_{j>i} x_j, from prefix and suffix products: O(n) nodes. */
static int grad_mul_n(gctx *c, const kiln_node *n, kiln_value gv)
{
    int k = n->n_in;
    kiln_value *suf = malloc(sizeof *suf * (size_t)k);
    if (!suf) {
        kiln_seterr(c->err, KILN_ERR_NOMEM, "out of memory");
        return -1;
    }
    suf[k - 1] = -2;  /* empty product */
    for (int i = k - 2; i >= 0; i--)
        suf[i] = suf[i + 1] == -2 ? n->in[i + 1]
                                  : op2(c, "mul", n->in[i + 1], suf[i + 1]);
    kiln_value pre = -2;
    int rc = 0;
    for (int i = 0; i < k && !rc; i++) {
        if (suf[i] == -1 || pre == -1) {
            rc = -1;
            break;
        }
        if (c->path[n->in[i]]) {
            kiln_value d = gv;
            if (pre != -2)
                d = op2(c, "mul", d, pre);
            if (suf[i] != -2)
                d = op2(c, "mul", d, suf[i]);
            rc = contribute(c, n->in[i], d);
        }
        pre = pre == -2 ? n->in[i] : op2(c, "mul", pre, n->in[i]);
    }
    free(suf);
    return rc;
}

static int grad_elemwise(gctx *c, kiln_value v, kiln_value gv)
{
    kiln_node n = *NODE(c, v);
    kiln_value x = n.n_in > 0 ? n.in[0] : -1;
    kiln_value y = n.n_in > 1 ? n.in[1] : -1;
    switch (n.op) {
    case KILN_OP_ADD: /* n-ary (core/rewrite flattens): g to every term */
        for (int i = 0; i < n.n_in; i++)
            TRY(contribute(c, n.in[i], gv));
        return 0;
    case KILN_OP_SUB:
        TRY(contribute(c, x, gv));
        return c->path[y] ? contribute(c, y, op1(c, "neg", gv)) : 0;
    case KILN_OP_MUL:
        if (n.n_in > 2)
            return grad_mul_n(c, &n, gv);
        if (c->path[x])
            TRY(contribute(c, x, op2(c, "mul", gv, y)));
        return c->path[y] ? contribute(c, y, op2(c, "mul", gv, x)) : 0;
    case KILN_OP_TRUE_DIV:
        if (c->path[x])
            TRY(contribute(c, x, op2(c, "true_div", gv, y)));
        return c->path[y]
                   ? contribute(c, y, op1(c, "neg", op2(c, "mul", gv,
                                                        op2(c, "true_div", v,
                                                            y))))
                   : 0;
    case KILN_OP_NEG:
        return contribute(c, x, op1(c, "neg", gv));
    case KILN_OP_ABS: /* sign(x) = (x > 0) - (x < 0) */
        return contribute(c, x, op2(c, "mul", gv,
                                    op2(c, "sub", op2(c, "gt", x, lit(c, 0.0)),
                                        op2(c, "lt", x, lit(c, 0.0)))));
    case KILN_OP_EXP:
        return contribute(c, x, op2(c, "mul", gv, v));
    case KILN_OP_EXPM1:
        return contribute(c, x, op2(c, "mul", gv, op2(c, "add", v,
                                                      lit(c, 1.0))));
    case KILN_OP_LOG:
        return contribute(c, x, op2(c, "true_div", gv, x));
    case KILN_OP_LOG1P:
        return contribute(c, x, op2(c, "true_div", gv, op2(c, "add", x,
                                                           lit(c, 1.0))));
    case KILN_OP_SQRT:
        return contribute(c, x, op2(c, "true_div", gv, op2(c, "mul",
                                                           lit(c, 2.0), v)));
    case KILN_OP_SQUARE:
        return contribute(c, x, op2(c, "mul", gv, op2(c, "mul", lit(c, 2.0),
                                                      x)));
    case KILN_OP_POW:
        if (c->path[x])
            TRY(contribute(c, x, op2(c, "mul", gv,
                                     op2(c, "mul", y,
                                         op2(c, "pow", x,
                                             op2(c, "sub", y,
                                                 lit(c, 1.0)))))));
        /* d/dy x^y = x^y log x, taken as 0 where x == 0 (the limit for
         * y > 0) instead of 0 * -inf = nan */
        return c->path[y]
                   ? contribute(c, y,
                                op2(c, "mul", gv,
                                    op3(c, "where", op2(c, "eq", x, lit(c, 0.0)),
                                        lit(c, 0.0),
                                        op2(c, "mul", v, op1(c, "log", x)))))
                   : 0;
    case KILN_OP_SIGMOID:
        return contribute(c, x, op2(c, "mul", gv,
                                    op2(c, "mul", v, op2(c, "sub", lit(c, 1.0),
                                                         v))));
    case KILN_OP_SOFTPLUS:
        return contribute(c, x, op2(c, "mul", gv, op1(c, "sigmoid", x)));
    case KILN_OP_TANH:
        return contribute(c, x, op2(c, "mul", gv,
                                    op2(c, "sub", lit(c, 1.0),
                                        op1(c, "square", v))));
    case KILN_OP_SIN:
        return contribute(c, x, op2(c, "mul", gv, op1(c, "cos", x)));
    case KILN_OP_COS:
        return contribute(c, x, op1(c, "neg", op2(c, "mul", gv,
                                                  op1(c, "sin", x))));
    case KILN_OP_ERF:
    case KILN_OP_ERFC: {
        kiln_value d = op2(c, "mul", lit(c, TWO_OVER_SQRT_PI),
                           op1(c, "exp", op1(c, "neg", op1(c, "square", x))));
        if (n.op == KILN_OP_ERFC)
            d = op1(c, "neg", d);
        return contribute(c, x, op2(c, "mul", gv, d));
    }
    case KILN_OP_GAMMALN:
        return contribute(c, x, op2(c, "mul", gv, op1(c, "digamma", x)));
    case KILN_OP_DIGAMMA:
        return contribute(c, x, op2(c, "mul", gv, op1(c, "trigamma", x)));
    case KILN_OP_MAXIMUM:
    case KILN_OP_MINIMUM: {
        /* ties go to x, as in PyTensor */
        const char *cx = n.op == KILN_OP_MAXIMUM ? "ge" : "le";
        const char *cy = n.op == KILN_OP_MAXIMUM ? "lt" : "gt";
        if (c->path[x])
            TRY(contribute(c, x, op2(c, "mul", gv, op2(c, cx, x, y))));
        return c->path[y]
                   ? contribute(c, y, op2(c, "mul", gv, op2(c, cy, x, y)))
                   : 0;
    }
    case KILN_OP_WHERE: {
        kiln_value a = n.in[1], b = n.in[2];
        if (c->path[a])
            TRY(contribute(c, a, op3(c, "where", x, gv, lit(c, 0.0))));
        return c->path[b] ? contribute(c, b, op3(c, "where", x, lit(c, 0.0),
                                                  gv))
                          : 0;
    }
    case KILN_OP_CAST:
        return contribute(c, x, gv);  /* contribute casts back */
    case KILN_OP_FILL:
        return contribute(c, y, gv);  /* the model gives only a shape */
    /* ---- issue 25 (docs/ops.md gives each rule and its source) ---- */
    case KILN_OP_FLOOR: case KILN_OP_CEIL: case KILN_OP_TRUNC:
    case KILN_OP_ROUND_HALF_TO_EVEN: case KILN_OP_ROUND_HALF_AWAY_FROM_ZERO:
    case KILN_OP_ROUND: case KILN_OP_SIGN:
        return 0;   /* zero almost everywhere, as in PyTensor */
    case KILN_OP_LOG1MEXP: /* -1/expm1(-x); -inf at x = 0 (PyTensor) */
        return contribute(c, x, op2(c, "mul", gv,
                                    op3(c, "where", op2(c, "eq", x, lit(c, 0.0)),
                                        lit(c, -INFINITY),
                                        op2(c, "true_div", lit(c, -1.0),
                                            op1(c, "expm1", op1(c, "neg", x))))));
    case KILN_OP_MOD: /* x - y floor(x/y) */
        if (c->path[x])
            TRY(contribute(c, x, gv));
        return c->path[y]
                   ? contribute(c, y, op1(c, "neg",
                                          op2(c, "mul", gv,
                                              op1(c, "floor",
                                                  op2(c, "true_div", x, y)))))
                   : 0;
    case KILN_OP_CLIP: { /* PyTensor's Clip.L_op */
        kiln_value lo = n.in[1], hi = n.in[2];
        if (c->path[x])
            TRY(contribute(c, x, op3(c, "where",
                                     op2(c, "and", op2(c, "ge", x, lo),
                                         op2(c, "le", x, hi)),
                                     gv, lit(c, 0.0))));
        if (c->path[lo])
            TRY(contribute(c, lo, op3(c, "where", op2(c, "lt", x, lo), gv,
                                      lit(c, 0.0))));
        return c->path[hi] ? contribute(c, hi, op3(c, "where",
                                                   op2(c, "gt", x, hi), gv,
                                                   lit(c, 0.0)))
                           : 0;
    }
    case KILN_OP_ERFCX: /* 2 x erfcx(x) - 2/sqrt(pi) */
        return contribute(c, x, op2(c, "mul", gv,
                                    op2(c, "sub",
                                        op2(c, "mul", op2(c, "mul", lit(c, 2.0),
                                                          x), v),
                                        lit(c, TWO_OVER_SQRT_PI))));
    case KILN_OP_ERFINV:   /* sqrt(pi)/2 exp(erfinv(x)^2) */
    case KILN_OP_ERFCINV:  /* -sqrt(pi)/2 exp(erfcinv(x)^2) */
        return contribute(c, x, op2(c, "mul", gv,
                                    op2(c, "mul",
                                        lit(c, n.op == KILN_OP_ERFINV
                                                   ? 1 / TWO_OVER_SQRT_PI
                                                   : -1 / TWO_OVER_SQRT_PI),
                                        op1(c, "exp", op1(c, "square", v)))));
    case KILN_OP_GAMMAINC:
    case KILN_OP_GAMMAINCC: {
        /* d/dx P(a, x) = exp(-x + (a-1) log x - lgamma(a)) = -d/dx Q;
         * d/da P = gammainc_da(a, x) = -d/da Q */
        int q = n.op == KILN_OP_GAMMAINCC;
        if (c->path[x]) {
            kiln_value da = op2(c, "gammainc_da", x, y);
            TRY(contribute(c, x, op2(c, "mul", gv, q ? op1(c, "neg", da)
                                                     : da)));
        }
        if (!c->path[y])
            return 0;
        kiln_value d = op1(c, "exp",
                           op2(c, "sub",
                               op2(c, "sub",
                                   op2(c, "mul", op2(c, "sub", x, lit(c, 1.0)),
                                       op1(c, "log", y)),
                                   y),
                               op1(c, "gammaln", x)));
        if (q)
            d = op1(c, "neg", d);
        return contribute(c, y, op2(c, "mul", gv, d));
    }
    case KILN_OP_I0E: /* i1e(x) - sign(x) i0e(x) (I0' = I1, A&S 9.6.27) */
        return contribute(c, x, op2(c, "mul", gv,
                                    op2(c, "sub", op1(c, "i1e", x),
                                        op2(c, "mul", op1(c, "sign", x), v))));
    case KILN_OP_I1E: {
        /* i0e(x) - i1e(x)/x - sign(x) i1e(x) (I1' = I0 - I1/x, A&S
         * 9.6.26); 1/2 at x = 0, where i1e(x)/x -> 1/2 */
        kiln_value z = op2(c, "eq", x, lit(c, 0.0));
        kiln_value xs = op3(c, "where", z, lit(c, 1.0), x);
        kiln_value d = op2(c, "sub",
                           op2(c, "sub", op1(c, "i0e", x),
                               op2(c, "true_div", v, xs)),
                           op2(c, "mul", op1(c, "sign", x), v));
        return contribute(c, x, op2(c, "mul", gv,
                                    op3(c, "where", z, lit(c, 0.5), d)));
    }
    case KILN_OP_BETAINC: {
        /* d/dx I_x(a, b) = x^(a-1) (1-x)^(b-1) / B(a, b); d/da and
         * d/db are betainc_da and betainc_db (core/special.c) */
        kiln_value z = n.in[2];
        if (c->path[x])
            TRY(contribute(c, x, op2(c, "mul", gv,
                                     op3(c, "betainc_da", x, y, z))));
        if (c->path[y])
            TRY(contribute(c, y, op2(c, "mul", gv,
                                     op3(c, "betainc_db", x, y, z))));
        if (!c->path[z])
            return 0;
        kiln_value lb = op2(c, "sub",
                            op2(c, "add", op1(c, "gammaln", x),
                                op1(c, "gammaln", y)),
                            op1(c, "gammaln", op2(c, "add", x, y)));
        kiln_value d = op1(c, "exp",
                           op2(c, "sub",
                               op2(c, "add",
                                   op2(c, "mul", op2(c, "sub", x, lit(c, 1.0)),
                                       op1(c, "log", z)),
                                   op2(c, "mul", op2(c, "sub", y, lit(c, 1.0)),
                                       op1(c, "log1p", op1(c, "neg", z)))),
                               lb));
        return contribute(c, z, op2(c, "mul", gv, d));
    }
    default:
        return kiln_seterr(c->err, KILN_ERR_TYPE,
                           "grad: no gradient rule for '%s'",
                           kiln_ir_op_info(n.op)->name);
    }
}

/* ---- issue 25: scans and checks ------------------------------------ */

/* x reversed along `axis` (x[:, ..., ::-1]). */
static kiln_value reverse_axis(gctx *c, kiln_value x, int axis)
{
    TRY(x);
    kiln_index ix[KILN_MAX_RANK];
    memset(ix, 0, sizeof ix);
    for (int i = 0; i <= axis; i++)
        ix[i].kind = KILN_INDEX_SLICE;
    ix[axis].has_step = 1;
    ix[axis].step = -1;
    return kiln_graph_subtensor(c->g, x, axis + 1, ix, c->err);
}

/* cumsum: the reverse cumsum of the adjoint along the axis; cumprod:
 * PyTensor's CumOp rule, cumsum((out * g) reversed) reversed / x, which
 * is inf or NaN where x is 0 (as PyTensor's). */
static int grad_scan(gctx *c, kiln_value v, kiln_value gv)
{
    const kiln_node *n = NODE(c, v);
    kiln_value x = n->in[0];
    int rank = n->type.rank;
    int axis = (int)(n->attrs->axes[0] < 0 ? n->attrs->axes[0] + rank
                                           : n->attrs->axes[0]);
    int cumprod = n->op == KILN_OP_CUMPROD;
    kiln_attr at = {.key = "axis", .kind = KILN_ATTR_INT, .i = axis};
    kiln_value t = cumprod ? op2(c, "mul", v, gv) : gv;
    t = reverse_axis(c, t, axis);
    TRY(t);
    t = reverse_axis(c, opn(c, "cumsum", 1, &t, &at, 1), axis);
    if (cumprod)
        t = op2(c, "true_div", t, x);
    return contribute(c, x, t);
}

/* ---- linear algebra (issue 28) --------------------------------------
 * Matrices are the last two axes; leading axes a batch. */

/* x with its last two axes swapped (the batch's matrix transpose). */
static kiln_value mat_t(gctx *c, kiln_value x)
{
    if (x < 0)
        return -1;
    int r = NODE(c, x)->type.rank;
    int64_t perm[KILN_MAX_RANK];
    for (int i = 0; i < r; i++)
        perm[i] = i;
    perm[r - 2] = r - 1;
    perm[r - 1] = r - 2;
    return op1_axes(c, "transpose", x, "axes", r, perm, -1);
}

/* a @ b^T per batch element for a, b of shape [..., n, k] (both
 * matrices) or [..., n] (both vectors: the outer product a b^T). */
static kiln_value mat_abt(gctx *c, kiln_value a, kiln_value b, int vec)
{
    if (a < 0 || b < 0)
        return -1;
    int r = NODE(c, a)->type.rank;
    if (vec) {
        int64_t ax1 = r, ax0 = r - 1;
        return op2(c, "mul", op1_axes(c, "expand_dims", a, "axis", 1, &ax1,
                                      -1),
                   op1_axes(c, "expand_dims", b, "axis", 1, &ax0, -1));
    }
    if (r == 2)
        return op2(c, "dot", a, mat_t(c, b));
    /* a[..., n, None, k] * b[..., None, m, k] summed over k */
    int64_t axa = r - 1, axb = r - 2, ks = r;
    kiln_value p = op2(c, "mul",
                       op1_axes(c, "expand_dims", a, "axis", 1, &axa, -1),
                       op1_axes(c, "expand_dims", b, "axis", 1, &axb, -1));
    return op1_axes(c, "sum", p, "axis", 1, &ks, 0);
}

/* Reverse rules (docs/ops.md "Linear algebra"): cholesky per Murray
 * 2016 (arXiv:1602.07527) in the cholesky_grad op; the others per
 * M. Giles, "An extended collection of matrix derivative results for
 * forward and reverse mode AD" (Oxford NA-08/01, 2008), section 2.2:
 * X = A^-1 B: Bbar = A^-T Xbar, Abar = -Bbar X^T; C = A^-1: Abar =
 * -C^T Cbar C^T; log|det A|: Abar = g A^-T; det A: Abar = g det(A)
 * A^-T. */
static int grad_linalg(gctx *c, kiln_value v, kiln_value gv)
{
    kiln_node n = *NODE(c, v);
    kiln_value a = n.in[0];
    kiln_attr tr[2];
    switch (n.op) {
    case KILN_OP_CHOLESKY: {
        kiln_value in[2] = {v, gv};
        return contribute(c, a, opn(c, "cholesky_grad", 2, in, NULL, 0));
    }
    case KILN_OP_SOLVE_TRIANGULAR:
    case KILN_OP_SOLVE: {
        kiln_value b = n.in[1];
        int vec = NODE(c, b)->type.rank == n.type.rank &&
                  n.type.rank == NODE(c, a)->type.rank - 1;
        int lower = n.attrs->linalg & 1, trans = (n.attrs->linalg & 2) != 0;
        kiln_value gb;
        if (n.op == KILN_OP_SOLVE) {
            gb = op2(c, "solve", mat_t(c, a), gv);
        } else {
            tr[0] = (kiln_attr){.key = "lower", .kind = KILN_ATTR_BOOL,
                                .i = lower};
            tr[1] = (kiln_attr){.key = "trans", .kind = KILN_ATTR_BOOL,
                                .i = !trans};
            kiln_value in[2] = {a, gv};
            gb = opn(c, "solve_triangular", 2, in, tr, 2);
        }
        TRY(gb);
        if (c->path[b])
            TRY(contribute(c, b, gb));
        if (!c->path[a])
            return 0;
        /* -Bbar X^T; with trans (A^T X = B), -X Bbar^T */
        kiln_value ga = trans ? mat_abt(c, v, gb, vec) : mat_abt(c, gb, v, vec);
        if (n.op == KILN_OP_SOLVE_TRIANGULAR)
            ga = op1(c, lower ? "tril" : "triu", ga);
        return contribute(c, a, op1(c, "neg", ga));
    }
    case KILN_OP_INVERSE: {
        /* -C^T G C^T: C^T G = (C^T) (G^T)^T, then (C^T G) C^T */
        kiln_value ctg = mat_abt(c, mat_t(c, v), mat_t(c, gv), 0);
        return contribute(c, a, op1(c, "neg", mat_abt(c, ctg, v, 0)));
    }
    case KILN_OP_LOG_DET: {
        int r = n.type.rank;
        int64_t ax[2] = {r, r + 1};
        kiln_value g2 = op1_axes(c, "expand_dims", gv, "axis", 2, ax, -1);
        return contribute(c, a, op2(c, "mul", g2,
                                    mat_t(c, op1(c, "inverse", a))));
    }
    case KILN_OP_DET: {
        /* Abar = g det(A) A^-T (Giles 2008, 2.2; PyTensor's Det.L_op) */
        int r = n.type.rank;
        int64_t ax[2] = {r, r + 1};
        kiln_value g2 = op1_axes(c, "expand_dims", op2(c, "mul", gv, v),
                                 "axis", 2, ax, -1);
        return contribute(c, a, op2(c, "mul", g2,
                                    mat_t(c, op1(c, "inverse", a))));
    }
    case KILN_OP_SIGN_DET:
        return 0;   /* piecewise constant: zero, as PyTensor's */
    case KILN_OP_TRIL:
    case KILN_OP_TRIU:
        return contribute(c, a, op1(c, n.op == KILN_OP_TRIL ? "tril" : "triu",
                                    gv));
    case KILN_OP_DIAG:
        return contribute(c, a, op1(c, "diagonal", gv));
    case KILN_OP_DIAGONAL: {
        const kiln_node *an = NODE(c, a);
        int r = an->type.rank;
        if (an->type.dims[r - 1] != an->type.dims[r - 2])
            return kiln_seterr(c->err, KILN_ERR_TYPE, "diagonal: the gradient "
                               "of the diagonal of a non-square matrix is "
                               "not supported"), -1;
        return contribute(c, a, op1(c, "diag", gv));
    }
    default:   /* cholesky_grad */
        kiln_seterr(c->err, KILN_ERR_TYPE, "%s: second derivatives are not "
                    "supported", kiln_ir_op_info(n.op)->name);
        return -1;
    }
}

/* ---- scan (issue 28) -------------------------------------------------
 *
 * Reverse mode through the stored trajectory.  The forward scan's body
 * is replaced by one that also outputs its carries as it received them
 * (the trajectory c_0 .. c_{T-1}, stacked, as its last nc outputs; the
 * old outputs keep their indices), so the forward runs once for the
 * value and the trajectory.  A reverse scan then walks
 * t = T-1 .. 0 with the carries' adjoints (lambda) and the args'
 * accumulated adjoints (mu) as its carries; its body recomputes the
 * forward step from c_t, x_t and the args and is the VJP of it:
 * d/d(c_t, x_t, a) of <lambda, c_{t+1}> + <gy_t, y_t> (kiln_graph_grad on
 * the body), as PyTensor's Scan.L_op and JAX's scan transpose do.  Its
 * final carries are the adjoints of the initial carries and of the args;
 * its stacked outputs, reversed, those of the sequences. */

static int note_radj(gctx *c, kiln_value scan, int index, kiln_value gv)
{
    if (gv < 0)
        return -1;
    for (int i = 0; i < c->n_radj; i++)
        if (c->radj[i].scan == scan && c->radj[i].index == index) {
            c->radj[i].adj = op2(c, "add", c->radj[i].adj, gv);
            return c->radj[i].adj < 0 ? -1 : 0;
        }
    if (c->n_radj == c->cap_radj) {
        int cap = c->cap_radj ? 2 * c->cap_radj : 8;
        radj *q = realloc(c->radj, sizeof *q * (size_t)cap);
        if (!q)
            return kiln_seterr(c->err, KILN_ERR_NOMEM, "out of memory"), -1;
        c->radj = q;
        c->cap_radj = cap;
    }
    c->radj[c->n_radj++] = (radj){scan, gv, index};
    /* the scan's own adjoint (output 0) may stay zero; it must exist for
     * the scan's rule to run */
    if (c->adj[scan] < 0 && (c->adj[scan] = zeros_like(c, scan)) < 0)
        return -1;
    return 0;
}

static kiln_value find_radj(const gctx *c, kiln_value scan, int index)
{
    for (int i = 0; i < c->n_radj; i++)
        if (c->radj[i].scan == scan && c->radj[i].index == index)
            return c->radj[i].adj;
    return -1;
}

#define BODY_MAX 64

/* The reverse body of scan node n (see above).  gy[k]: per-step output k
 * has an adjoint.  Fills the counts of what it declares. */
static kiln_graph *vjp_body(gctx *c, const kiln_node *n, const int *gy,
                            int *n_lam, int *n_mu)
{
    const kiln_graph *b = n->attrs->body;
    int nc = n->attrs->n_carry, ns = n->attrs->n_seq;
    int na = n->n_in - nc - ns, ny = b->n_outputs - nc;
    kiln_value bin[BODY_MAX];
    kiln_ir_body_inputs(b, bin, BODY_MAX);
    char name[160];
    snprintf(name, sizeof name, "%s_vjp", b->name);
    kiln_graph *r = kiln_graph_new(name, c->err);
    if (!r)
        return NULL;
    if (kiln_ir_copy_symbols(r, b)) {
        kiln_seterr(c->err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    kiln_value *map = malloc(sizeof *map * (size_t)(b->n_nodes + 1));
    kiln_value lam[BODY_MAX], mu[BODY_MAX], gyin[BODY_MAX], wrt[BODY_MAX];
    int wsrc[BODY_MAX];   /* body input index of each wrt */
    if (!map) {
        kiln_seterr(c->err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    int nl = 0, nm = 0, nw = 0;
    const kiln_type *bt;
#define DECL(fmt, idx, type)                                              \
    (snprintf(name, sizeof name, fmt, idx),                               \
     kiln_graph_input(r, name, (type)->dtype, (type)->rank, (type)->dims, \
                      c->err))
    for (int j = 0; j < nc; j++) {           /* carries: lambda, mu */
        bt = &b->nodes[bin[j]].type;
        if (is_float(bt->dtype) && (lam[j] = DECL("lam%d", j, bt)) < 0)
            goto fail_map;
        nl += is_float(bt->dtype);
    }
    for (int i = 0; i < na; i++) {
        bt = &b->nodes[bin[nc + ns + i]].type;
        if (is_float(bt->dtype) && (mu[i] = DECL("mu%d", i, bt)) < 0)
            goto fail_map;
        nm += is_float(bt->dtype);
    }
    for (int j = 0; j < nc + ns; j++) {      /* seqs: c_t, x_t, then gy_t */
        bt = &b->nodes[bin[j]].type;
        if ((map[bin[j]] = DECL(j < nc ? "c%d" : "x%d", j < nc ? j : j - nc,
                                bt)) < 0)
            goto fail_map;
        if (is_float(bt->dtype)) {
            wsrc[nw] = j;
            wrt[nw++] = map[bin[j]];
        }
    }
    for (int k = 0; k < ny; k++) {
        bt = &b->nodes[b->outputs[nc + k].value].type;
        if (gy[k] && (gyin[k] = DECL("gy%d", k, bt)) < 0)
            goto fail_map;
    }
    for (int i = 0; i < na; i++) {           /* args */
        int j = nc + ns + i;
        bt = &b->nodes[bin[j]].type;
        if ((map[bin[j]] = DECL("a%d", i, bt)) < 0)
            goto fail_map;
        if (is_float(bt->dtype)) {
            wsrc[nw] = j;
            wrt[nw++] = map[bin[j]];
        }
    }
#undef DECL
    /* the forward step, inlined */
    for (int v = 0; v < b->n_nodes; v++) {
        const kiln_node *o = &b->nodes[v];
        if (o->op == KILN_OP_INPUT)
            continue;
        kiln_node nd = *o;
        kiln_value small[8], *in = small;
        if (o->n_in > 8 && !(in = malloc(sizeof *in * (size_t)o->n_in))) {
            kiln_seterr(c->err, KILN_ERR_NOMEM, "out of memory");
            goto fail_map;
        }
        for (int i = 0; i < o->n_in; i++)
            in[i] = map[o->in[i]];
        nd.in = in;
        nd.name = NULL;
        nd.param = 0;
        map[v] = kiln_ir_append(r, &nd, c->err);
        if (in != small)
            free(in);
        if (map[v] < 0)
            goto fail_map;
    }
    /* the cost <lambda, c'> + <gy, y> */
    kiln_value cost = -1;
    for (int k = 0; k < nc + ny; k++) {
        kiln_value o = map[b->outputs[k].value];
        if (k < nc ? !is_float(r->nodes[o].type.dtype) : !gy[k - nc])
            continue;
        kiln_value pr[2] = {k < nc ? lam[k] : gyin[k - nc], o};
        kiln_value m = kiln_graph_op(r, "mul", 2, pr, NULL, 0, c->err);
        if (m >= 0 && r->nodes[m].type.rank > 0)
            m = kiln_graph_op(r, "sum", 1, &m, NULL, 0, c->err);
        if (m >= 0 && r->nodes[m].type.dtype != KILN_F64) {
            kiln_attr at = {.key = "dtype", .kind = KILN_ATTR_DTYPE,
                            .i = KILN_F64};
            m = kiln_graph_op(r, "cast", 1, &m, &at, 1, c->err);
        }
        if (m < 0)
            goto fail_map;
        kiln_value ab[2] = {cost, m};
        cost = cost < 0 ? m : kiln_graph_op(r, "add", 2, ab, NULL, 0, c->err);
        if (cost < 0)
            goto fail_map;
    }
    if (cost < 0 && (cost = kiln_graph_literal(r, 0.0, KILN_LIT_FLOAT,
                                               c->err)) < 0)
        goto fail_map;
    kiln_value d[BODY_MAX];
    if (nw && kiln_graph_grad(r, cost, nw, wrt, KILN_GRAD_DISCONNECTED_ZERO,
                              d, c->err))
        goto fail_map;
    /* outputs: new lambda (d c_t), new mu (mu + d a), then d x_t */
    int w = 0;
    for (int j = 0; j < nc; j++) {
        if (!is_float(b->nodes[bin[j]].type.dtype))
            continue;
        while (wsrc[w] != j)
            w++;
        snprintf(name, sizeof name, "lam%d_next", j);
        if (kiln_graph_output(r, name, d[w], c->err))
            goto fail_map;
    }
    for (int i = 0; i < na; i++) {
        int j = nc + ns + i;
        if (!is_float(b->nodes[bin[j]].type.dtype))
            continue;
        for (w = 0; wsrc[w] != j; w++)
            ;
        kiln_value ab[2] = {mu[i], d[w]};
        kiln_value s2 = kiln_graph_op(r, "add", 2, ab, NULL, 0, c->err);
        snprintf(name, sizeof name, "mu%d_next", i);
        if (s2 < 0 || kiln_graph_output(r, name, s2, c->err))
            goto fail_map;
    }
    for (int i = 0; i < ns; i++) {
        int j = nc + i;
        if (!is_float(b->nodes[bin[j]].type.dtype))
            continue;
        for (w = 0; wsrc[w] != j; w++)
            ;
        snprintf(name, sizeof name, "dx%d", i);
        if (kiln_graph_output(r, name, d[w], c->err))
            goto fail_map;
    }
    free(map);
    *n_lam = nl;
    *n_mu = nm;
    return r;
fail_map:
    free(map);
fail:
    kiln_graph_free(r);
    return NULL;
}

/* The body b with its carry inputs also as outputs (the trajectory). */
static kiln_graph *traj_body(gctx *c, const kiln_graph *b, int nc)
{
    kiln_graph *t = kiln_ir_clone(b, c->err);
    kiln_value bin[BODY_MAX];
    kiln_ir_body_inputs(b, bin, BODY_MAX);
    for (int j = 0; t && j < nc; j++) {
        char name[48];
        snprintf(name, sizeof name, "_kiln_traj%d", j);
        if (kiln_graph_output(t, name, bin[j], c->err)) {
            kiln_graph_free(t);
            return NULL;
        }
    }
    return t;
}

/* Body b's last nc outputs are its nc carry inputs, in order, as
 * per-step outputs: the trajectory is there already (a second grad of
 * the same graph, or a body that outputs it itself). */
static int has_traj(const kiln_graph *b, int nc)
{
    kiln_value bin[BODY_MAX];
    if (nc == 0 || b->n_outputs < 2 * nc ||
        kiln_ir_body_inputs(b, bin, BODY_MAX) < nc)
        return 0;
    for (int j = 0; j < nc; j++)
        if (b->outputs[b->n_outputs - nc + j].value != bin[j])
            return 0;
    return 1;
}

static int grad_scan_node(gctx *c, kiln_value v, const kiln_node *np,
                          kiln_value gv);

static int grad_recur(gctx *c, kiln_value v, kiln_value gv)
{
    if (NODE(c, v)->op == KILN_OP_RESULT) {
        kiln_value s = NODE(c, v)->in[0];
        int k = NODE(c, v)->attrs->index;
        if (k == 0)
            return contribute(c, s, gv);
        if (NODE(c, s)->op == KILN_OP_TOP_K)   /* the indices: integers */
            return 0;
        if (kiln_ir_op_info(NODE(c, s)->op)->category == KILN_CAT_ODE)
            return kiln_seterr(c->err, KILN_ERR_TYPE, "grad: %s: no second "
                               "derivatives (through the sensitivities)",
                               kiln_ir_op_info(NODE(c, s)->op)->name), -1;
        return note_radj(c, s, k, gv);
    }
    /* the node's attributes change below (its body gains the trajectory):
     * keep the old ones and their body alive while the rule reads them */
    kiln_node n = *NODE(c, v);
    kiln_attrs oa = *n.attrs;
    n.attrs = &oa;
    kiln_graph *ob = kiln_ir_body_ref(oa.body);
    int rc = grad_scan_node(c, v, &n, gv);
    kiln_graph_free(ob);
    return rc;
}

static int grad_scan_node(gctx *c, kiln_value v, const kiln_node *np,
                          kiln_value gv)
{
    kiln_node n = *np;
    const kiln_graph *b = n.attrs->body;
    int nc = n.attrs->n_carry, ns = n.attrs->n_seq;
    int na = n.n_in - nc - ns, ny = b->n_outputs - nc;
    if (n.n_in > BODY_MAX || b->n_outputs + nc > BODY_MAX)
        return kiln_seterr(c->err, KILN_ERR_TYPE,
                           "grad: scan with more than %d inputs or outputs",
                           BODY_MAX - nc), -1;
    kiln_value G[BODY_MAX];
    int gy[BODY_MAX];
    for (int k = 0; k < b->n_outputs; k++)
        G[k] = k == 0 ? gv : find_radj(c, v, k);
    for (int k = 0; k < ny; k++) {
        kiln_dtype dt = b->nodes[b->outputs[nc + k].value].type.dtype;
        gy[k] = G[nc + k] >= 0 && is_float(dt);
    }
    kiln_value in[BODY_MAX];
    for (int i = 0; i < n.n_in; i++)
        in[i] = n.in[i];
    /* the trajectory: outputs base .. base+nc-1 of the forward node, its
     * body replaced by the trajectory body unless it has them already */
    kiln_value traj[BODY_MAX];
    if (nc > 0) {
        int base = b->n_outputs - nc;
        if (!has_traj(b, nc)) {
            kiln_graph *tb = traj_body(c, b, nc);
            if (!tb)
                return -1;
            int rc = kiln_ir_node_set_body(c->g, v, tb, c->err);
            kiln_graph_free(tb);   /* the node holds it */
            if (rc)
                return -1;
            base = b->n_outputs;
        }
        for (int j = 0; j < nc; j++)
            TRY(traj[j] = kiln_graph_result(c->g, v, base + j, c->err));
    }
    int nl = 0, nm = 0;
    kiln_graph *rb = vjp_body(c, &n, gy, &nl, &nm);
    if (!rb)
        return -1;
    /* reverse scan: carries lambda (final carries' adjoints), mu (0);
     * sequences reversed: trajectory, x, gy; args */
    kiln_value rin[3 * BODY_MAX];
    int m = 0;
    for (int j = 0; j < nc; j++) {
        kiln_dtype dt = NODE(c, in[j])->type.dtype;
        if (!is_float(dt))
            continue;
        kiln_value gj = G[j];
        if (gj < 0)
            gj = zeros_like(c, in[j]);
        else if (NODE(c, gj)->op == KILN_OP_LITERAL ||
                 NODE(c, gj)->type.dtype != dt)
            gj = op2(c, "fill", in[j], gj);
        TRY(rin[m++] = gj);
    }
    for (int i = 0; i < na; i++)
        if (is_float(NODE(c, in[nc + ns + i])->type.dtype))
            TRY(rin[m++] = zeros_like(c, in[nc + ns + i]));
    int nseq = 0;
    for (int j = 0; j < nc + ns; j++, nseq++)
        TRY(rin[m++] = reverse_axis(c, j < nc ? traj[j] : in[j], 0));
    for (int k = 0; k < ny; k++)
        if (gy[k]) {
            kiln_value gk = G[nc + k];
            if (NODE(c, gk)->type.dtype !=
                b->nodes[b->outputs[nc + k].value].type.dtype)
                gk = cast_to(c, gk,
                             b->nodes[b->outputs[nc + k].value].type.dtype);
            TRY(rin[m++] = reverse_axis(c, gk, 0));
            nseq++;
        }
    for (int i = 0; i < na; i++)
        rin[m++] = in[nc + ns + i];
    kiln_value rs = kiln_graph_scan(c->g, rb, nl + nm, rin, nseq,
                                    rin + nl + nm, na, rin + nl + nm + nseq,
                                    nseq ? -1 : n.attrs->n_steps, c->err);
    kiln_graph_free(rb);
    TRY(rs);
    int o = 0;
    for (int j = 0; j < nc; j++)
        if (is_float(NODE(c, in[j])->type.dtype)) {
            kiln_value r = o == 0 ? rs : kiln_graph_result(c->g, rs, o,
                                                           c->err);
            o++;
            if (contribute(c, in[j], r))
                return -1;
        }
    for (int i = 0; i < na; i++)
        if (is_float(NODE(c, in[nc + ns + i])->type.dtype)) {
            kiln_value r = o == 0 ? rs : kiln_graph_result(c->g, rs, o,
                                                           c->err);
            o++;
            if (contribute(c, in[nc + ns + i], r))
                return -1;
        }
    for (int i = 0; i < ns; i++)
        if (is_float(NODE(c, in[nc + i])->type.dtype)) {
            kiln_value r = o == 0 ? rs : kiln_graph_result(c->g, rs, o,
                                                           c->err);
            o++;
            if (contribute(c, in[nc + i], reverse_axis(c, r, 0)))
                return -1;
        }
    return 0;
}

/* ---- ODEs (issue 28) --------------------------------------------------
 *
 * Forward sensitivities: the node itself becomes sens=2, so its one
 * solve gives Y (output 0, its value as before) and S = d Y / d (y0,
 * theta) [T, N, N+P] as result(z, index=1) (CVODES's staggered
 * sensitivities, ARKODE on the coupled system: core/runtime/ode.c); a
 * second grad reuses S.  The vector-Jacobian product is
 * z = sum_{t,n} gY[t,n] S[t,n,:], y0 getting z[:N] and theta z[N:]
 * (Stan's ODE functions do the same with their coupled system). */
static int grad_ode(gctx *c, kiln_value v, kiln_value gv)
{
    kiln_node n = *NODE(c, v);
    const char *op = kiln_ir_op_info(n.op)->name;
    if (n.attrs->sens == 1)
        return kiln_seterr(c->err, KILN_ERR_TYPE, "grad: %s: no second "
                           "derivatives (through the sensitivities)", op),
               -1;
    if (c->path[n.in[1]] || c->path[n.in[2]])
        return kiln_seterr(c->err, KILN_ERR_TYPE, "grad: %s: no gradient "
                           "with respect to t0 or ts (pass them as data)",
                           op), -1;
    int64_t N = NODE(c, n.in[0])->type.dims[0];
    if (n.attrs->sens == 0) {
        kiln_attrs a2 = *n.attrs;
        a2.sens = 2;
        if (kiln_ir_node_set_attrs(NODE(c, v), &a2))
            return kiln_seterr(c->err, KILN_ERR_NOMEM, "out of memory"), -1;
        n.attrs = NODE(c, v)->attrs;
    }
    kiln_value S = kiln_graph_result(c->g, v, 1, c->err);
    TRY(S);
    if (NODE(c, gv)->op == KILN_OP_LITERAL)
        gv = op2(c, "fill", v, gv);
    int64_t two = 2, ax01[2] = {0, 1};
    kiln_value w = op1_axes(c, "expand_dims", gv, "axis", 1, &two, -1);
    TRY(w);
    kiln_value z = op1_axes(c, "sum", op2(c, "mul", w, S), "axis", 2, ax01,
                            -1);
    TRY(z);
    kiln_index lo = {.kind = KILN_INDEX_SLICE, .stop = N, .has_stop = 1};
    kiln_index hi = {.kind = KILN_INDEX_SLICE, .start = N, .has_start = 1};
    if (c->path[n.in[0]] &&
        contribute(c, n.in[0], kiln_graph_subtensor(c->g, z, 1, &lo,
                                                    c->err)))
        return -1;
    if (c->path[n.in[3]] &&
        contribute(c, n.in[3], kiln_graph_subtensor(c->g, z, 1, &hi,
                                                    c->err)))
        return -1;
    return 0;
}

/* top_k (issue 29): the values' adjoint g goes back to the elements they
 * were taken from, a one-hot scatter along the axis: with i the indices
 * (result 1) and p the positions 0..n-1 along x's axis,
 *   dx = sum over the k axis of where(i[.., :, None, ..] == p[.., None, :,
 *        ..], g[.., :, None, ..], 0)
 * (k * n per row: a gradient through sampling is rare, the forward is
 * what is hot).  The indices get no adjoint (integers). */
static int grad_topk(gctx *c, kiln_value v, kiln_value gv)
{
    kiln_node n = *NODE(c, v);
    kiln_value x = n.in[0];
    if (!c->path[x])
        return 0;
    int r = NODE(c, x)->type.rank;
    int64_t ax = n.attrs->has_axes ? n.attrs->axes[0] : -1;
    if (ax < 0)
        ax += r;
    int64_t a0[1] = {ax}, a1[1] = {ax + 1};
    kiln_value idx = kiln_graph_result(c->g, v, 1, c->err);
    TRY(idx);
    kiln_attr cs = {.key = "axis", .kind = KILN_ATTR_INT, .i = ax};
    kiln_value ones = axis_vector(c, x, (int)ax, 1);
    kiln_value pos = op2(c, "sub", opn(c, "cumsum", 1, &ones, &cs, 1),
                         kiln_graph_literal(c->g, 1, KILN_LIT_INT, c->err));
    kiln_value hit = op2(c, "eq", op1_axes(c, "expand_dims", idx, "axis", 1,
                                           a1, -1),
                         op1_axes(c, "expand_dims", pos, "axis", 1, a0, -1));
    kiln_value w = op3(c, "where", hit,
                       op1_axes(c, "expand_dims", gv, "axis", 1, a1, -1),
                       lit(c, 0.0));
    return contribute(c, x, op1_axes(c, "sum", w, "axis", 1, a0, -1));
}

static int grad_node(gctx *c, kiln_value v)
{
    kiln_value gv = c->adj[v];
    switch (kiln_ir_op_info(NODE(c, v)->op)->category) {
    case KILN_CAT_RECUR: return grad_recur(c, v, gv);
    case KILN_CAT_ODE: return grad_ode(c, v, gv);
    case KILN_CAT_TOPK: return grad_topk(c, v, gv);   /* issue 29 */
    case KILN_CAT_ELEMWISE: return grad_elemwise(c, v, gv);
    case KILN_CAT_REDUCE: return grad_reduce(c, v, gv);
    case KILN_CAT_SHAPE: return grad_shape(c, v, gv);
    case KILN_CAT_INDEX: return grad_index(c, v, gv);
    case KILN_CAT_DOT: return grad_dot(c, v, gv);
    case KILN_CAT_SCAN: return grad_scan(c, v, gv);
    case KILN_CAT_LINALG: return grad_linalg(c, v, gv);
    /* check: the adjoint passes to x, the conditions get none (as
     * PyTensor's CheckAndRaise) */
    case KILN_CAT_CHECK: return contribute(c, NODE(c, v)->in[0], gv);
    default: return 0;
    }
}

/* ---- the driver ------------------------------------------------------ */

static const char *vname(const kiln_graph *g, kiln_value v, char *buf,
                         size_t size)
{
    if (g->nodes[v].name)
        return g->nodes[v].name;
    snprintf(buf, size, "node %d", v);
    return buf;
}

static int check_args(kiln_graph *g, kiln_value cost, int n_wrt,
                      const kiln_value *wrt, kiln_value *out, kiln_err *err)
{
    char b1[256], b2[64];
    if (!g || n_wrt < 0 || (n_wrt > 0 && (!wrt || !out)))
        return kiln_seterr(err, KILN_ERR_ARG, "grad: NULL argument");
    if (cost < 0 || cost >= g->n_nodes)
        return kiln_seterr(err, KILN_ERR_ARG, "grad: cost %d is not a node",
                           cost);
    const kiln_node *cn = &g->nodes[cost];
    if (cn->type.rank != 0)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "grad: the cost must be a scalar, got shape %s",
                           kiln_ir_shape_str(g, cn->type.rank, cn->type.dims,
                                             b1, sizeof b1));
    if (!is_float(cn->type.dtype))
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "grad: the cost must be f64 or f32, got %s",
                           kiln_dtype_name(cn->type.dtype));
    for (int i = 0; i < n_wrt; i++) {
        if (wrt[i] < 0 || wrt[i] >= g->n_nodes)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "grad: wrt %d is not a node", wrt[i]);
        const kiln_node *w = &g->nodes[wrt[i]];
        if (w->op != KILN_OP_INPUT && w->op != KILN_OP_SHARED)
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "grad: '%s' is not an input or shared value",
                               vname(g, wrt[i], b2, sizeof b2));
        if (!is_float(w->type.dtype))
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "grad: cannot differentiate with respect to "
                               "'%s': it has integer dtype %s",
                               vname(g, wrt[i], b2, sizeof b2),
                               kiln_dtype_name(w->type.dtype));
    }
    return 0;
}

int kiln_graph_grad(kiln_graph *g, kiln_value cost, int n_wrt,
                    const kiln_value *wrt, unsigned flags, kiln_value *out,
                    kiln_err *err)
{
    int rc = check_args(g, cost, n_wrt, wrt, out, err);
    if (rc)
        return rc;
    gctx c = {g, err, NULL, NULL, g->n_nodes, NULL, 0, 0};
    c.adj = malloc(sizeof *c.adj * (size_t)c.n);
    c.path = calloc((size_t)c.n, 1);
    unsigned char *needed = calloc((size_t)c.n, 1);
    if (!c.adj || !c.path || !needed) {
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int v = 0; v < c.n; v++)
        c.adj[v] = -1;
    /* forward: float nodes that depend on a wrt */
    for (int i = 0; i < n_wrt; i++)
        c.path[wrt[i]] = 1;
    for (int v = 0; v <= cost; v++) {
        const kiln_node *n = &g->nodes[v];
        /* a scan's own type is its output 0's: another may be float */
        if (c.path[v] || (!is_float(n->type.dtype) &&
                          n->op != KILN_OP_SCAN))
            continue;
        for (int k = 0; k < n->n_in; k++)
            if (c.path[n->in[k]])
                c.path[v] = 1;
    }
    /* backward: and that the cost depends on */
    needed[cost] = 1;
    for (int v = cost; v >= 0; v--)
        if (needed[v])
            for (int k = 0; k < g->nodes[v].n_in; k++)
                needed[g->nodes[v].in[k]] = 1;
    for (int v = 0; v < c.n; v++)
        c.path[v] = c.path[v] && needed[v];
    if (c.path[cost]) {
        c.adj[cost] = lit(&c, 1.0);
        if (c.adj[cost] < 0) {
            rc = err ? err->code : KILN_ERR_NOMEM;
            goto done;
        }
    }
    for (int v = cost; v >= 0; v--) {
        if (!c.path[v] || c.adj[v] < 0)
            continue;
        if (grad_node(&c, v)) {
            rc = err && err->code ? err->code : KILN_ERR_NOMEM;
            goto done;
        }
    }
    for (int i = 0; i < n_wrt; i++) {
        kiln_value r = c.adj[wrt[i]];
        if (r < 0) {
            char b[64];
            if (!(flags & KILN_GRAD_DISCONNECTED_ZERO)) {
                rc = kiln_seterr(err, KILN_ERR_TYPE,
                                 "grad: the cost does not depend on '%s'",
                                 vname(g, wrt[i], b, sizeof b));
                goto done;
            }
            r = zeros_like(&c, wrt[i]);
        }
        /* a literal (d x / d x = 1 for a scalar x) still has x's dtype */
        if (r >= 0 && g->nodes[r].op == KILN_OP_LITERAL)
            r = op2(&c, "fill", wrt[i], r);
        if (r < 0) {
            rc = err && err->code ? err->code : KILN_ERR_NOMEM;
            goto done;
        }
        out[i] = r;
    }
    /* record what was made */
    if (g->n_grads + n_wrt > g->cap_grads) {
        int cap = g->cap_grads ? g->cap_grads : 8;
        while (cap < g->n_grads + n_wrt)
            cap *= 2;
        kiln_grad_rec *p = realloc(g->grads, sizeof *p * (size_t)cap);
        if (!p) {
            rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            goto done;
        }
        g->grads = p;
        g->cap_grads = cap;
    }
    for (int i = 0; i < n_wrt; i++)
        g->grads[g->n_grads++] = (kiln_grad_rec){cost, wrt[i], out[i]};
done:
    free(c.radj);
    free(c.adj);
    free(c.path);
    free(needed);
    return rc;
}
