/*
 * partition.c — data partitions of graphs and models (issue 30;
 * <kiln/graph.h>, <kiln/model.h>, docs/mpi.md "Partitions").
 *
 * Part p of P of a graph runs the same nodes on rows [b_p, e_p) of every
 * shared value sized by the axis symbol (T rows in the whole data: b_p =
 * ceil(T p / P), e_p = ceil(T (p+1) / P); kiln_ir_part_rows).  An output's value is then the sum over the parts of the parts'
 * values when every node is one of:
 *
 *   FREE  does not depend on the axis: the same in every part;
 *   ELEM  carries the axis as one dim, each row computed from that row
 *         only (elementwise ops, broadcasts, gathers with per-row indices,
 *         reductions over other axes, dots not contracting it);
 *   SUM   additive over parts: a sum over the axis of an ELEM, a dot
 *         contracting it, a scatter-add of rows, the axis's size read as a
 *         value (a shared scalar named like the axis: the part's count),
 *         then linear maps of SUMs (add/sub of SUMs, neg, mul/div by a
 *         FREE, shape ops, sums over other axes).
 *
 * A check over the rows, where(all(c), x, -inf) with all reducing the axis
 * (PyMC's check_parameters), splits too: all(c) is a GUARD (and so are
 * `and`s, stacks, all over other dims and shape ops of GUARDs and FREE
 * bools), and the where is GUARDED: summed over the axis it is a SUM, since
 * per part where(all_p(c), x_p, -inf) adds up to the whole's value (every
 * row's condition holds: each part's x; one fails: its part's -inf; a part
 * without rows: all = true, 0).  A GUARDED value may meet only adds, subs,
 * negation, products with a FREE and sums before its sum over the axis
 * (-inf stays -inf); where(GUARD, SUM, -inf) is a SUM.  where(GUARD, x, y)
 * with another y is x's class when the same GUARD guards a where with
 * -inf (the gradient of a check): exact wherever every check holds (at a
 * log density of -inf the parts' gradients differ from the whole's).  Any
 * other use of all over the axis, and any any(), is refused.
 *
 * A FREE term that meets a SUM in a linear map (add(SUM, FREE): the prior
 * beside the likelihood) is masked, where(part0__, x, 0), with part0__ a
 * bool shared scalar true in part 0 only: every part compiles the same
 * kernels (the mask is data, not structure; the axis stays a symbol, so
 * row counts are data too), and the FREE term counts once.  Anything else
 * that consumes an ELEM or a SUM (max/mean/cumsum over the axis, exp of a
 * SUM, SUM * SUM, ...) is refused, naming the node and its op, when an
 * output depends on it (dead nodes are left alone).
 */
#include "ir.h"
#include <kiln/model.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C_FREE = 0, C_ELEM, C_SUM, C_BAD, C_GUARD, C_GUARDED };

/* Which FREE inputs of a node are masked: none, all, all but the first
 * (where's condition), all but the second (an advanced set/inc's index),
 * the first only (the base of a scatter-add of rows). */
enum { M_NONE = 0, M_ALL, M_NOT0, M_NOT1, M_ONLY0 };

static int masks_input(int how, int j)
{
    return how == M_ALL || (how == M_NOT0 && j != 0) ||
           (how == M_NOT1 && j != 1) || (how == M_ONLY0 && j == 0);
}

static int axis_count(const kiln_type *t, int sym)
{
    int c = 0;
    for (int k = 0; k < t->rank; k++)
        c += t->dims[k] == KILN_SYM_ID(sym);
    return c;
}

#define axis_pos kiln_ir_part_axis_pos
#define is_axis_scalar kiln_ir_part_is_count
#define slice_value kiln_ir_part_slice_value

/* ---- classification ---------------------------------------------------- */

typedef struct pclass {
    signed char *cls;      /* C_* per node */
    int *culprit;          /* C_BAD: the node that mixes rows */
    const char **why;      /* ... and how (for the culprit) */
    unsigned char *mask;   /* per node: which FREE inputs are masked, M_* */
    unsigned char *checked; /* per node: the condition of a where(., ., -inf) */
} pclass;

static int is_full_slice(const kiln_index *ix)
{
    return ix->kind == KILN_INDEX_SLICE && !ix->has_start && !ix->has_stop &&
           (!ix->has_step || ix->step == 1);
}

static int norm(int64_t a, int rank)
{
    return (int)(a < 0 ? a + rank : a);
}

/* 1 when a reduction with attributes a over a value of rank r reduces
 * dim k. */
static int reduces_dim(const kiln_attrs *a, int r, int k)
{
    if (!a->has_axes)
        return 1;
    for (int i = 0; i < a->naxes; i++)
        if (norm(a->axes[i], r) == k)
            return 1;
    return 0;
}

/* The dims contracted by dot/matmul of a and b. */
static void dot_contracted(const kiln_type *a, const kiln_type *b, int *ka,
                           int *kb)
{
    *ka = a->rank - 1;
    *kb = b->rank == 1 ? 0 : b->rank - 2;
}

/* 1 when v is the constant -inf (every entry), through casts and shape
 * ops. */
static int is_neg_inf(const kiln_graph *g, kiln_value v)
{
    const kiln_node *n = &g->nodes[v];
    while (n->n_in == 1 &&
           (n->op == KILN_OP_CAST || n->op == KILN_OP_EXPAND_DIMS ||
            n->op == KILN_OP_RESHAPE || n->op == KILN_OP_SQUEEZE ||
            n->op == KILN_OP_BROADCAST_TO))
        n = &g->nodes[n->in[0]];
    if (n->op == KILN_OP_LITERAL)
        return n->value < 0 && n->value * 0.0 != 0.0;
    if ((n->op != KILN_OP_CONST && n->op != KILN_OP_SHARED) || !n->data ||
        (n->type.dtype != KILN_F64 && n->type.dtype != KILN_F32))
        return 0;
    int64_t m = kiln_shape_numel(n->type.rank, n->vshape);
    for (int64_t k = 0; k < m; k++) {
        double x = n->type.dtype == KILN_F64 ? ((const double *)n->data)[k]
                                             : ((const float *)n->data)[k];
        if (!(x < 0 && x * 0.0 != 0.0))
            return 0;
    }
    return m > 0;
}

/* Node i has a GUARD or GUARDED input (docs at the top): its class, or
 * C_BAD with *why. */
static int classify_guard(const kiln_graph *g, const pclass *c, int i, int ax,
                          int xk, const char **why)
{
    const kiln_node *n = &g->nodes[i];
    int nG = 0, nD = 0, nS = 0;
    for (int j = 0; j < n->n_in; j++) {
        int cj = c->cls[n->in[j]];
        nG += cj == C_GUARD;
        nD += cj == C_GUARDED;
        nS += cj == C_SUM;
    }
    if (n->op == KILN_OP_WHERE && c->cls[n->in[0]] == C_GUARD && nG == 1) {
        int x = c->cls[n->in[1]], y = c->cls[n->in[2]];
        if (is_neg_inf(g, n->in[2])) {
            if (x == C_SUM)
                return C_SUM;
            if ((x == C_ELEM || x == C_GUARDED) && ax)
                return C_GUARDED;
            *why = "guards a value that is neither per row nor a sum";
            return C_BAD;
        }
        if (c->checked[n->in[0]] && y == C_FREE && x < C_BAD &&
            (x != C_FREE || !ax))
            return x;   /* a check's gradient: exact where checks hold */
        *why = "selects by all over it other than as a check "
               "(where(all(c), x, -inf))";
        return C_BAD;
    }
    if (nG && !nD && !nS && !ax) {
        switch (n->op) {
        case KILN_OP_AND: case KILN_OP_STACK: case KILN_OP_JOIN:
        case KILN_OP_EXPAND_DIMS: case KILN_OP_SQUEEZE: case KILN_OP_RESHAPE:
        case KILN_OP_BROADCAST_TO: case KILN_OP_ALL:
            if (n->type.dtype == KILN_BOOL)
                return C_GUARD;
            break;
        default:
            break;
        }
        *why = "uses all over it other than as a check's condition "
               "(where(all(c), x, -inf))";
        return C_BAD;
    }
    if (n->op == KILN_OP_FILL && nG + nD == 1 && c->cls[n->in[1]] < C_BAD &&
        (c->cls[n->in[1]] != C_SUM || !ax))   /* the model gives a shape */
        return ax ? C_ELEM : c->cls[n->in[1]];
    if (nD && !nG && !nS) {
        switch (n->op) {
        case KILN_OP_SUM:
            if (xk >= 0 && c->cls[n->in[0]] == C_GUARDED &&
                reduces_dim(n->attrs, g->nodes[n->in[0]].type.rank, xk))
                return C_SUM;
            /* fall through */
        case KILN_OP_ADD: case KILN_OP_SUB: case KILN_OP_NEG:
        case KILN_OP_EXPAND_DIMS: case KILN_OP_SQUEEZE:
            if (ax)
                return C_GUARDED;
            break;
        case KILN_OP_MUL:
            if (ax && n->n_in == 2 && (c->cls[n->in[0]] == C_FREE ||
                                       c->cls[n->in[1]] == C_FREE))
                return C_GUARDED;
            break;
        default:
            break;
        }
    }
    *why = nD ? "uses a checked value (where(all(c), x, -inf)) other than "
                "in adds and a sum over it"
              : "uses all over it other than as a check's condition "
                "(where(all(c), x, -inf))";
    return C_BAD;
}

/* Classify node i from its inputs' classes.  Sets c->cls[i], and for
 * C_BAD the culprit (i itself, with why, or an input's). */
static void classify(const kiln_graph *g, int sym, const char *derived,
                     pclass *c, int i)
{
    const kiln_node *n = &g->nodes[i];
    const kiln_type *t = &n->type;
    int ax = axis_count(t, sym);
    int nE = 0, nS = 0, nG = 0;
    const char *why = NULL;
    int cls = C_FREE;
    c->mask[i] = 0;
    for (int j = 0; j < n->n_in; j++) {
        int ci = c->cls[n->in[j]];
        if (ci == C_BAD) {
            c->cls[i] = C_BAD;
            c->culprit[i] = c->culprit[n->in[j]];
            return;
        }
        nE += ci == C_ELEM;
        nS += ci == C_SUM;
        nG += ci == C_GUARD || ci == C_GUARDED;
    }
    for (int k = 0; k < t->rank; k++)
        if (KILN_DIM_IS_SYM(t->dims[k]) &&
            derived[KILN_SYM_INDEX(t->dims[k])]) {
            why = "has a dim derived from it";
            goto bad;
        }
    if (ax > 1) {
        why = "has it as two dims (rows meet rows)";
        goto bad;
    }
    switch (n->op) {
    case KILN_OP_INPUT: case KILN_OP_CONST: case KILN_OP_LITERAL:
        c->cls[i] = ax ? C_ELEM : C_FREE;   /* inputs: checked before */
        return;
    case KILN_OP_SHARED:
        c->cls[i] = ax ? C_ELEM : is_axis_scalar(g, n, sym) ? C_SUM : C_FREE;
        return;
    default:
        break;
    }
    if (nG) {
        const kiln_type *x0 = n->n_in ? &g->nodes[n->in[0]].type : NULL;
        cls = classify_guard(g, c, i, ax, x0 ? axis_pos(x0, sym) : -1, &why);
        if (cls == C_BAD)
            goto bad;
        c->cls[i] = (signed char)cls;
        c->culprit[i] = i;   /* should it reach an output */
        c->why[i] = cls == C_GUARD ? "is a check over it given as a value"
                    : "is a checked value not summed over it";
        return;
    }
    if (nE == 0 && nS == 0) {
        /* ones(shape=[N]), broadcast_to(x, [N]): per-row copies */
        c->cls[i] = ax ? C_ELEM : C_FREE;
        return;
    }
    const kiln_attrs *at = n->attrs;
    const kiln_type *x = n->n_in ? &g->nodes[n->in[0]].type : NULL;
    int xc = n->n_in ? c->cls[n->in[0]] : C_FREE;
    if (nS > 0) {
        if (ax) {
            why = "spreads a sum over it back over its rows";
            goto bad;
        }
        if (nE > 0) {
            why = "combines a sum over it with per-row values";
            goto bad;
        }
        switch (n->op) {
        case KILN_OP_ADD: case KILN_OP_SUB: case KILN_OP_JOIN:
        case KILN_OP_STACK: case KILN_OP_SET_SUBTENSOR:
        case KILN_OP_INC_SUBTENSOR:
            cls = C_SUM;
            c->mask[i] = M_ALL;
            break;
        case KILN_OP_NEG: case KILN_OP_RESHAPE: case KILN_OP_TRANSPOSE:
        case KILN_OP_EXPAND_DIMS: case KILN_OP_SQUEEZE:
        case KILN_OP_BROADCAST_TO: case KILN_OP_SUM: case KILN_OP_MEAN:
        case KILN_OP_SUBTENSOR:
            cls = C_SUM;
            break;
        case KILN_OP_CAST:
            if (t->dtype != KILN_F64 && t->dtype != KILN_F32) {
                why = "rounds a sum over it (a cast to an integer)";
                goto bad;
            }
            cls = C_SUM;
            break;
        case KILN_OP_CHECK:
            if (xc != C_SUM || nS > 1) {
                why = "checks a condition on a sum over it";
                goto bad;
            }
            cls = C_SUM;
            break;
        case KILN_OP_MUL: case KILN_OP_DOT: case KILN_OP_MATMUL:
            if (nS > 1) {
                why = "multiplies two sums over it";
                goto bad;
            }
            cls = C_SUM;
            break;
        case KILN_OP_TRUE_DIV:
            if (c->cls[n->in[1]] != C_FREE) {
                why = "divides by a sum over it";
                goto bad;
            }
            cls = C_SUM;
            break;
        case KILN_OP_WHERE:
            if (xc != C_FREE) {
                why = "selects by a sum over it";
                goto bad;
            }
            cls = C_SUM;
            c->mask[i] = M_NOT0;
            break;
        case KILN_OP_FILL:
            cls = c->cls[n->in[1]];   /* the value broadcast: model unread */
            break;
        case KILN_OP_TAKE:
            if (c->cls[n->in[1]] != C_FREE) {
                why = "indexes by a sum over it";
                goto bad;
            }
            cls = C_SUM;
            break;
        case KILN_OP_ADVANCED_SET_SUBTENSOR:
        case KILN_OP_ADVANCED_INC_SUBTENSOR:
            if (c->cls[n->in[1]] != C_FREE) {
                why = "indexes by a sum over it";
                goto bad;
            }
            cls = C_SUM;
            c->mask[i] = M_NOT1;
            break;
        default:
            why = "is not linear in a sum over it";
            goto bad;
        }
        c->cls[i] = (signed char)cls;
        return;
    }
    /* per-row inputs, no sum */
    int xk = x ? axis_pos(x, sym) : -1;
    if (ax) {
        switch (n->op) {
        case KILN_OP_CUMSUM: case KILN_OP_CUMPROD:
            if (xc == C_ELEM && norm(at->axes[0], x->rank) == xk) {
                why = "accumulates along it";
                goto bad;
            }
            break;
        case KILN_OP_TOP_K:
            if (xc == C_ELEM &&
                norm(at->has_axes ? at->axes[0] : -1, x->rank) == xk) {
                why = "sorts along it";
                goto bad;
            }
            break;
        case KILN_OP_TAKE:
        case KILN_OP_ADVANCED_SET_SUBTENSOR:
        case KILN_OP_ADVANCED_INC_SUBTENSOR:
            if (xc == C_ELEM &&
                norm(at->has_axes ? at->axes[0] : 0, x->rank) == xk) {
                why = "gathers rows along it";
                goto bad;
            }
            if (n->op == KILN_OP_ADVANCED_SET_SUBTENSOR && xc != C_ELEM) {
                why = "writes rows into one value";
                goto bad;
            }
            break;
        case KILN_OP_SUBTENSOR: case KILN_OP_SET_SUBTENSOR:
        case KILN_OP_INC_SUBTENSOR:
            if (xc == C_ELEM && xk < at->nidx && !is_full_slice(&at->idx[xk])) {
                why = "selects rows of it";
                goto bad;
            }
            if (xc != C_ELEM) {   /* a per-row value written into one */
                why = "writes rows into one value";
                goto bad;
            }
            break;
        case KILN_OP_RESHAPE: {
            int k = axis_pos(t, sym);
            int ok = xk == k;
            for (int d = 0; ok && d < k; d++)
                ok = x->dims[d] == t->dims[d];
            if (!ok) {
                why = "reshapes across it";
                goto bad;
            }
            break;
        }
        case KILN_OP_SCAN: case KILN_OP_RESULT: case KILN_OP_ODE_RK45:
        case KILN_OP_ODE_BDF:
            why = "runs a body over its rows";
            goto bad;
        default:
            if (kiln_ir_op_info(n->op)->category == KILN_CAT_LINALG) {
                for (int j = 0; j < n->n_in; j++) {
                    const kiln_type *u = &g->nodes[n->in[j]].type;
                    int uk = axis_pos(u, sym);
                    if (uk >= 0 && uk >= u->rank - 2) {
                        why = "treats it as a matrix dim";
                        goto bad;
                    }
                }
            }
            break;
        }
        c->cls[i] = C_ELEM;
        return;
    }
    /* the axis goes away */
    switch (n->op) {
    case KILN_OP_SUM:
        if (xk >= 0 && reduces_dim(at, x->rank, xk)) {
            c->cls[i] = C_SUM;
            return;
        }
        break;
    case KILN_OP_DOT: case KILN_OP_MATMUL: {
        const kiln_type *y = &g->nodes[n->in[1]].type;
        int ka, kb;
        dot_contracted(x, y, &ka, &kb);
        if (c->cls[n->in[0]] == C_ELEM && c->cls[n->in[1]] == C_ELEM &&
            x->dims[ka] == KILN_SYM_ID(sym) && y->dims[kb] == KILN_SYM_ID(sym)) {
            c->cls[i] = C_SUM;
            return;
        }
        break;
    }
    case KILN_OP_ADVANCED_INC_SUBTENSOR:
        /* x[idx] += v over per-row idx (a gradient of take): additive */
        if (xc != C_ELEM) {
            c->cls[i] = C_SUM;
            c->mask[i] = M_ONLY0;
            return;
        }
        break;
    case KILN_OP_ALL:     /* a check's condition: all rows pass */
        if (xc == C_ELEM && xk >= 0 && reduces_dim(at, x->rank, xk)) {
            c->cls[i] = C_GUARD;
            c->culprit[i] = i;
            c->why[i] = "is a check over it given as a value";
            return;
        }
        break;
    case KILN_OP_CHECK:
        if (xc == C_FREE) {   /* x checked against per-row conditions */
            c->cls[i] = C_FREE;
            return;
        }
        break;
    case KILN_OP_FILL:
        c->cls[i] = (signed char)c->cls[n->in[1]];
        if (c->cls[i] != C_ELEM)
            return;
        break;
    default:
        break;
    }
    switch (kiln_ir_op_info(n->op)->category) {
    case KILN_CAT_REDUCE:
        why = n->op == KILN_OP_ANY
                  ? "reduces over it by any (only a sum may, or all as a "
                    "check's condition)"
                  : "reduces over it (only a sum may, or all as a check's "
                    "condition)";
        break;
    case KILN_CAT_INDEX:
        why = "selects rows of it";
        break;
    case KILN_CAT_SHAPE:
        why = "reshapes or joins along it";
        break;
    default:
        why = "mixes its rows other than by a sum";
        break;
    }
bad:
    c->cls[i] = C_BAD;
    c->culprit[i] = i;
    c->why[i] = why;
}

static int pclass_new(pclass *c, int n, kiln_err *err)
{
    size_t nn = (size_t)(n > 0 ? n : 1);
    c->cls = calloc(nn, 1);
    c->culprit = calloc(nn, sizeof *c->culprit);
    c->why = calloc(nn, sizeof *c->why);
    c->mask = calloc(nn, 1);
    c->checked = calloc(nn, 1);
    if (!c->cls || !c->culprit || !c->why || !c->mask || !c->checked)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    return 0;
}

static void pclass_free(pclass *c)
{
    free(c->cls);
    free(c->culprit);
    free(c->why);
    free(c->mask);
    free(c->checked);
}

static int derived_cb(const char *name, size_t len, void *arg)
{
    const char *a = arg;
    return strlen(a) == len && memcmp(a, name, len) == 0;
}

/* Classify every node of g.  derived: per symbol, 1 when its name is an
 * expression of the axis (K-N). */
static int classify_all(const kiln_graph *g, int sym, pclass *c,
                        kiln_err *err)
{
    if (pclass_new(c, g->n_nodes, err))
        return err ? err->code : KILN_ERR_NOMEM;
    char *derived = calloc((size_t)g->n_symbols + 1, 1);
    if (!derived)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int s = 0; s < g->n_symbols; s++)
        derived[s] = s != sym && g->symbols[s] &&
                     kiln_ir_dim_is_expr(g->symbols[s]) &&
                     kiln_ir_dimexpr_names(g->symbols[s], derived_cb,
                                           g->symbols[sym]);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == KILN_OP_WHERE && g->nodes[i].n_in == 3 &&
            is_neg_inf(g, g->nodes[i].in[2]))
            c->checked[g->nodes[i].in[0]] = 1;
    for (int i = 0; i < g->n_nodes; i++)
        classify(g, sym, derived, c, i);
    free(derived);
    return 0;
}

/* The refusal of output value v (class C_BAD): names the culprit. */
static int refuse(const kiln_graph *g, int sym, const pclass *c,
                  const char *oname, kiln_value v, kiln_err *err)
{
    int b = c->culprit[v];
    const kiln_node *n = &g->nodes[b];
    char nm[160], ln[32] = "";
    if (n->name)
        snprintf(nm, sizeof nm, "%s", n->name);
    else {
        int *tn = kiln_graph_temp_names(g);
        if (tn && tn[b] >= 0)
            snprintf(nm, sizeof nm, "t%d", tn[b]);
        else
            snprintf(nm, sizeof nm, "#%d", b);
        free(tn);
    }
    if (n->line)
        snprintf(ln, sizeof ln, ", line %d", n->line);
    return kiln_seterr(err, KILN_ERR_TYPE,
                       "partition: output '%s' is not a sum over axis '%s': "
                       "node '%s' (op %s%s) %s", oname, g->symbols[sym], nm,
                       kiln_ir_op_info(n->op)->name, ln,
                       c->why[b] ? c->why[b] : "mixes its rows");
}

int kiln_ir_part_depends(const kiln_graph *g, int sym, kiln_value v,
                         kiln_err *err)
{
    pclass c;
    memset(&c, 0, sizeof c);
    int rc = classify_all(g, sym, &c, err);
    int r = rc ? -1 : c.cls[v] != C_FREE;
    pclass_free(&c);
    return r;
}

/* ---- the rewrite ------------------------------------------------------- */

/* A fresh node name in g: base, base1, ... */
static void fresh(const kiln_graph *g, const char *base, char *buf,
                  size_t size)
{
    snprintf(buf, size, "%s", base);
    for (int k = 1; kiln_graph_lookup(g, buf) >= 0; k++)
        snprintf(buf, size, "%s%d", base, k);
}

/* *out = where(part0__, x, 0) in ng (made once: *out >= 0 afterwards),
 * with the mask *mask made at its first use (true in part 0 only).
 * 0, or an error. */
static int mask_of(kiln_graph *ng, const char *mname, int part,
                   kiln_value *mask, kiln_value x, kiln_value *out,
                   kiln_err *err)
{
    if (*out >= 0)
        return 0;
    if (*mask < 0) {
        unsigned char one = part == 0;
        kiln_tensor mt = {.dtype = KILN_BOOL, .rank = 0, .data = &one};
        if ((*mask = kiln_graph_shared(ng, mname, KILN_BOOL, 0, NULL, &mt,
                                       err)) < 0)
            return err->code;
        /* the mask differs by part, not by data: one digest for every
         * part (kiln_graph_data_digest) */
        ng->nodes[*mask].has_wdigest = 1;
        ng->nodes[*mask].wdigest = 0;
    }
    /* false for a bool x: an int 0 would promote where's result to i64
     * (a bool output printed as 1 under MPI; a new user's find) */
    kiln_value zero = kiln_graph_literal(ng, 0,
                                         ng->nodes[x].type.dtype == KILN_BOOL
                                             ? KILN_LIT_BOOL : KILN_LIT_INT,
                                         err);
    kiln_value w[3] = {*mask, x, zero};
    if (zero < 0 ||
        (*out = kiln_graph_op(ng, "where", 3, w, NULL, 0, err)) < 0)
        return err->code;
    return 0;
}

/* Rows of part `part` of `nparts` of shared n (read as part read_k of
 * read_n by the parser: n's data are those rows) along dim k, T rows in
 * the whole: a new buffer in *out.  The part must be nested in the part
 * read (kiln_ir_part_read_check): a block of a rank's rows. */
static int nested_rows(const kiln_graph *g, const kiln_node *n, int k,
                       int64_t total, int part, int nparts, kiln_tensor *out,
                       kiln_err *err)
{
    int64_t rb, re, b, e;
    kiln_ir_part_rows(total, g->read_k, g->read_n, &rb, &re);
    kiln_ir_part_rows(total, part, nparts, &b, &e);
    kiln_tensor got = {.dtype = n->type.dtype, .rank = n->type.rank,
                       .data = n->data};
    memcpy(got.shape, n->vshape, sizeof got.shape);
    if (b < rb || e > re || got.shape[k] != re - rb)
        return kiln_seterr(err, KILN_ERR_ARG, "partition: rows [%lld, %lld) "
                           "of shared '%s' were not read", (long long)b,
                           (long long)e, n->name ? n->name : "?");
    return slice_value(g, n, k, &got, b - rb, e - rb, out, err);
}

/* n's data become `data` (n's old data released). */
static void replace_data(kiln_node *n, void *data)
{
    if (n->blob)
        kiln_blob_unref(n->blob);
    else
        free(n->data);
    n->blob = NULL;
    n->data = data;
}

int kiln_ir_part_rewrite(kiln_graph *g, int sym, int part, int nparts,
                         int slice, kiln_err *err)
{
    kiln_err local;
    if (!err)
        err = &local;
    /* inputs and outputs sized by the axis */
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == KILN_OP_INPUT &&
            axis_pos(&g->nodes[i].type, sym) >= 0)
            return kiln_seterr(err, KILN_ERR_NAME,
                               "partition: symbol '%s' sizes input '%s', not "
                               "only data", g->symbols[sym],
                               g->nodes[i].name ? g->nodes[i].name : "?");
    for (int k = 0; k < g->n_outputs; k++)
        if (axis_pos(&g->nodes[g->outputs[k].value].type, sym) >= 0)
            return kiln_seterr(err, KILN_ERR_NAME,
                               "partition: symbol '%s' sizes output '%s': "
                               "the parts' values of it would not add up to "
                               "the whole's", g->symbols[sym],
                               g->outputs[k].name);
    if (kiln_ir_part_read_check(g, sym, part, nparts, err))
        return err->code;
    pclass c;
    memset(&c, 0, sizeof c);
    kiln_graph *ng = NULL;
    kiln_value *map = NULL, *masked = NULL;
    kiln_tensor *sl = NULL;
    int rc = 0;
    int64_t total = g->part_total;
    size_t nn = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1);
    if ((rc = classify_all(g, sym, &c, err)))
        goto out;
    for (int k = 0; k < g->n_outputs; k++)
        if (c.cls[g->outputs[k].value] == C_BAD ||
            c.cls[g->outputs[k].value] >= C_GUARD) {
            rc = refuse(g, sym, &c, g->outputs[k].name, g->outputs[k].value,
                        err);
            goto out;
        }
    map = malloc(nn * sizeof *map);
    masked = malloc(nn * sizeof *masked);
    sl = calloc(nn, sizeof *sl);
    if (!map || !masked || !sl || !(ng = kiln_graph_new(g->name, err)) ||
        kiln_ir_copy_symbols(ng, g)) {
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < g->n_nodes; i++)
        masked[i] = -1;
    /* the whole data's rows: the bound values sized by the axis */
    if (slice) {
        for (int i = 0; i < g->n_nodes; i++) {
            const kiln_node *n = &g->nodes[i];
            int k = axis_pos(&n->type, sym);
            if (n->op != KILN_OP_SHARED || !n->data ||
                (k < 0 && !is_axis_scalar(g, n, sym)))
                continue;
            int64_t tt = n->read_part ? n->read_total
                         : k >= 0 ? n->vshape[k]
                         : n->type.dtype == KILN_I64
                             ? *(const int64_t *)n->data
                             : *(const int32_t *)n->data;
            if (total >= 0 && tt != total) {
                rc = kiln_seterr(err, KILN_ERR_SHAPE,
                                 "partition: shared '%s' has %lld rows along "
                                 "axis '%s', but other data has %lld",
                                 n->name ? n->name : "?", (long long)tt,
                                 g->symbols[sym], (long long)total);
                goto out;
            }
            total = tt;
        }
    }
    kiln_value mask = -1;
    char mname[64];
    fresh(g, "part0__", mname, sizeof mname);
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = &g->nodes[i];
        kiln_value ins[16], *in = n->n_in <= 16 ? ins
                                    : malloc(sizeof *in * (size_t)n->n_in);
        if (!in) {
            rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int j = 0; j < n->n_in; j++) {
            kiln_value v = n->in[j];
            in[j] = map[v];
            if (!masks_input(c.mask[i], j) || c.cls[v] != C_FREE)
                continue;
            if (mask_of(ng, mname, part, &mask, map[v], &masked[v], err)) {
                if (in != ins)
                    free(in);
                rc = err->code;
                goto out;
            }
            in[j] = masked[v];
        }
        kiln_node proto = *n;
        proto.in = in;
        proto.data = NULL;
        proto.blob = NULL;
        int k = axis_pos(&n->type, sym);
        if (slice && n->op == KILN_OP_SHARED && n->data && !n->read_part &&
            (k >= 0 || is_axis_scalar(g, n, sym))) {
            int64_t b, e;
            kiln_ir_part_rows(total, part, nparts, &b, &e);
            kiln_tensor whole = {.dtype = n->type.dtype,
                                 .rank = n->type.rank, .data = n->data};
            memcpy(whole.shape, n->vshape, sizeof whole.shape);
            if (k >= 0)
                rc = slice_value(g, n, k, &whole, b, e, &sl[i], err);
            else if (!(sl[i].data = malloc(8)))
                rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            else if (n->type.dtype == KILN_I64)
                *(int64_t *)sl[i].data = e - b;
            else
                *(int32_t *)sl[i].data = (int32_t)(e - b);
            if (!rc) {
                proto.has_wdigest = 1;
                proto.wdigest = kiln_ir_part_value_digest(&whole);
            }
            if (!rc && k >= 0) {
                proto.vshape[k] = e - b;
                proto.nbytes = (size_t)kiln_shape_numel(sl[i].rank,
                                                         sl[i].shape) *
                               kiln_dtype_size(sl[i].dtype);
            }
        } else if (slice && n->op == KILN_OP_SHARED && n->data &&
                   n->read_part && k >= 0 &&
                   (part != g->read_k || nparts != g->read_n)) {
            /* a part nested in the part read (a block of a rank's rows;
             * kiln_ir_part_read_check): its rows out of the rows read.
             * The whole value's digest is the reader's (proto's). */
            rc = nested_rows(g, n, k, n->read_total, part, nparts, &sl[i],
                             err);
            if (!rc) {
                proto.vshape[k] = sl[i].shape[k];
                proto.nbytes = (size_t)kiln_shape_numel(sl[i].rank,
                                                         sl[i].shape) *
                               kiln_dtype_size(sl[i].dtype);
            }
        }
        map[i] = rc ? -1 : kiln_ir_append(ng, &proto, err);
        if (in != ins)
            free(in);
        if (map[i] < 0) {
            rc = rc ? rc : err->code;
            goto out;
        }
    }
    /* outputs, parameters, gradients */
    if (g->n_outputs) {
        ng->outputs = calloc((size_t)g->n_outputs, sizeof *ng->outputs);
        if (!ng->outputs) {
            rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            goto out;
        }
        ng->cap_outputs = g->n_outputs;
    }
    for (int k = 0; k < g->n_outputs; k++) {
        kiln_value v = g->outputs[k].value, nv = map[v];
        if (c.cls[v] == C_FREE) {
            /* a value of part 0's only */
            if (mask_of(ng, mname, part, &mask, nv, &masked[v], err)) {
                rc = err->code;
                goto out;
            }
            nv = masked[v];
        }
        ng->outputs[k].value = nv;
        ng->outputs[k].kind = g->outputs[k].kind;
        ng->outputs[k].name = malloc(strlen(g->outputs[k].name) + 1);
        ng->n_outputs = k + 1;
        if (!ng->outputs[k].name) {
            rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            goto out;
        }
        strcpy(ng->outputs[k].name, g->outputs[k].name);
    }
    if (kiln_ir_reindex(ng, err)) {
        rc = err->code;
        goto out;
    }
    /* success: move the data (sliced or whole) into the new nodes */
    for (int i = 0; i < g->n_nodes; i++) {
        kiln_node *o = &g->nodes[i], *d = &ng->nodes[map[i]];
        if (sl[i].data) {
            d->data = sl[i].data;
            d->blob = NULL;
            sl[i].data = NULL;
        } else {
            d->data = o->data;
            d->blob = o->blob;
            o->data = NULL;
            o->blob = NULL;
        }
    }
#define REMAP(x) ((x) >= 0 ? map[(x)] : (x))
    for (int k = 0; k < g->n_params; k++) {
        kiln_param_rec *r = &g->params[k];
        r->unc = REMAP(r->unc);
        r->value = REMAP(r->value);
        r->logjac = REMAP(r->logjac);
        r->lower_ref = REMAP(r->lower_ref);
        r->upper_ref = REMAP(r->upper_ref);
    }
    for (int k = 0; k < g->n_grads; k++) {
        kiln_grad_rec *r = &g->grads[k];
        r->cost = REMAP(r->cost);
        r->wrt = REMAP(r->wrt);
        r->result = REMAP(r->result);
    }
#undef REMAP
    /* swap the node arrays, outputs and map; the rest stays g's */
    {
        kiln_node *tn = g->nodes;
        int tc = g->n_nodes, tcap = g->cap_nodes;
        g->nodes = ng->nodes, g->n_nodes = ng->n_nodes;
        g->cap_nodes = ng->cap_nodes;
        ng->nodes = tn, ng->n_nodes = tc, ng->cap_nodes = tcap;
        kiln_output *to = g->outputs;
        int toc = g->n_outputs, tocap = g->cap_outputs;
        g->outputs = ng->outputs, g->n_outputs = ng->n_outputs;
        g->cap_outputs = ng->cap_outputs;
        ng->outputs = to, ng->n_outputs = toc, ng->cap_outputs = tocap;
        int32_t *tm = g->map;
        int tmc = g->map_cap;
        g->map = ng->map, g->map_cap = ng->map_cap;
        ng->map = tm, ng->map_cap = tmc;
    }
    g->part_sym = sym;
    g->part_k = part;
    g->part_n = nparts;
    if (slice)
        g->part_total = total;
out:
    if (sl)
        for (size_t i = 0; i < nn; i++)
            free(sl[i].data);
    free(sl);
    free(map);
    free(masked);
    kiln_graph_free(ng);
    pclass_free(&c);
    return rc;
}

int kiln_graph_partition(kiln_graph *g, const kiln_partition *p,
                         kiln_err *err)
{
    int sym;
    if (kiln_ir_part_axis(g, p, &sym, err))
        return err ? err->code : KILN_ERR_ARG;
    if (g->part_n)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "partition: the graph is a part already (part %d "
                           "of %d)", g->part_k, g->part_n);
    return kiln_ir_part_rewrite(g, sym, p->part, p->nparts, 1, err);
}

int kiln_ir_part_slice(kiln_graph *g, int sym, int part, int nparts,
                       int64_t total, kiln_err *err)
{
    int64_t b, e;
    kiln_ir_part_rows(total, part, nparts, &b, &e);
    if (kiln_ir_part_read_check(g, sym, part, nparts, err))
        return err->code;
    for (int i = 0; i < g->n_nodes; i++) {
        kiln_node *n = &g->nodes[i];
        int k = axis_pos(&n->type, sym);
        if (n->op != KILN_OP_SHARED || !n->data ||
            (k < 0 && !is_axis_scalar(g, n, sym)))
            continue;
        if (n->read_part) {     /* read as the part's rows already */
            if (n->read_total != total)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "partition: shared '%s' has %lld rows "
                                   "along axis '%s', but the axis is %lld",
                                   n->name ? n->name : "?",
                                   (long long)n->read_total,
                                   g->symbols[sym], (long long)total);
            if ((part == g->read_k && nparts == g->read_n) || k < 0)
                continue;
            /* a part nested in the part read (a block of a rank's rows;
             * kiln_ir_part_read_check): its rows out of the rows read;
             * the whole value's digest stays the reader's */
            kiln_tensor s;
            if (nested_rows(g, n, k, total, part, nparts, &s, err))
                return err ? err->code : KILN_ERR_NOMEM;
            n->vshape[k] = e - b;
            n->nbytes = (size_t)kiln_shape_numel(s.rank, s.shape) *
                        kiln_dtype_size(s.dtype);
            replace_data(n, s.data);
            continue;
        }
        kiln_tensor whole = {.dtype = n->type.dtype, .rank = n->type.rank,
                             .data = n->data}, s;
        memcpy(whole.shape, n->vshape, sizeof whole.shape);
        uint64_t wd = kiln_ir_part_value_digest(&whole);
        if (k >= 0) {
            if (n->vshape[k] != total)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "partition: shared '%s' has %lld rows "
                                   "along axis '%s', but the axis is %lld",
                                   n->name ? n->name : "?",
                                   (long long)n->vshape[k], g->symbols[sym],
                                   (long long)total);
            if (slice_value(g, n, k, &whole, b, e, &s, err))
                return err ? err->code : KILN_ERR_NOMEM;
            n->vshape[k] = e - b;
            n->nbytes = (size_t)kiln_shape_numel(s.rank, s.shape) *
                        kiln_dtype_size(s.dtype);
        } else {
            if (!(s.data = malloc(8)))
                return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            if (n->type.dtype == KILN_I64)
                *(int64_t *)s.data = e - b;
            else
                *(int32_t *)s.data = (int32_t)(e - b);
        }
        replace_data(n, s.data);
        n->has_wdigest = 1;
        n->wdigest = wd;
    }
    g->part_sym = sym;
    g->part_k = part;
    g->part_n = nparts;
    g->part_total = total;
    return 0;
}
