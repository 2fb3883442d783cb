/*
 * canonicalize.c — the `canonicalize` pass (docs/rewrite.md).
 *
 * One walk in topological order.  Rules, each applied only when the
 * result has exactly the node's type (dtype, shape with its symbolic
 * dims) and weakness, so that no consumer sees a different value type:
 *
 *  flatten   add(add(a, b), c) -> add(a, b, c), and the same for mul,
 *            when the inner node has no other use and computes in the
 *            outer node's dtype.  Reassociation: the one rule that is not
 *            bit-exact in floating point (pairwise then evaluates the
 *            n-ary node as a balanced tree, error O(eps log n)).
 *  x*1, 1*x  -> x: multiplication by one is exact (IEEE 754 §6.3: the
 *            result is x, sign of zero included).
 *  x*(-1)    -> neg(x): exact, sign flip (a NaN's sign may differ).
 *  x+(-0.0)  -> x: exact for every x, including x = -0 (-0 + -0 = -0).
 *            x + (+0) is NOT rewritten for floats: -0 + +0 = +0.  For
 *            integer dtypes x + 0 -> x (exact).
 *  x-(+0)    -> x: exact for every x (-0 - +0 = -0).  x - (-0) is kept.
 *  x/1       -> x: exact.
 *  neg(neg(x)) -> x: exact (two sign flips).
 *  cast(x, dtype=dtype of x) -> x: the cast is the identity.
 *  squeeze(R(x, axis=A, keepdims=true), axis=A') -> R(x, axis=A)
 *            (keepdims=false) for R in sum, prod, max, min, mean,
 *            logsumexp, when the reduction has no other use and the
 *            squeeze removes exactly the kept axes: A' equals A as a set
 *            after normalising negative axes (no A: every axis), or the
 *            squeeze has no axis and every axis R keeps is a static dim
 *            other than 1 (a symbolic dim could be 1 at run time, and an
 *            axis-less squeeze would then drop it too).  Exact: keepdims
 *            only inserts size-1 axes in the output; the reduction is the
 *            same loop over x.  The gradients of broadcasts make this
 *            pair everywhere; the squeeze was a kernel of its own.
 *  fill(m, C) -> fill(m, L) when C is a chain of at most 32 expand_dims,
 *            reshape, squeeze nodes over a literal L, every node of the
 *            chain of static shape with all dims 1 (one element, no
 *            run-time shape check lost), and fill(m, L) has the node's
 *            type: the same value broadcast to the same shape.  The
 *            gradient seeds are fill(x, expand_dims(1.0, axis=0)).  When
 *            m is f32 the chain (a non-weak f64) makes the fill f64 and
 *            the weak literal would not: kept.
 */
#include "rewrite/rewrite.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NODE(rw, x) (&(rw)->g->nodes[(x)])

/* new-graph node x is a literal equal to `val`; for zero, `sign` 1 asks
 * for -0 and 0 for +0 (-1: either) */
static int lit_is(kiln_rw *rw, kiln_value x, double val, int sign)
{
    const kiln_node *n = NODE(rw, x);
    if (n->op != KILN_OP_LITERAL || n->value != val)
        return 0;
    if (val == 0 && sign >= 0)
        return (signbit(n->value) != 0) == (sign == 1);
    return 1;
}

/* the old node `o` may be replaced by new node x */
static int same_as(kiln_rw *rw, const kiln_node *o, kiln_value x)
{
    const kiln_node *n = NODE(rw, x);
    return kiln_rw_same_type(&o->type, &n->type) && o->weak == n->weak;
}

static int is_int(kiln_dtype d)
{
    return d == KILN_I64 || d == KILN_I32;
}

/* add into add, mul into mul: the inner node has no other use (checked
 * by kiln_rw_absorbed), computes in the outer node's dtype, and neither
 * is weak (kiln_rw_absorbs_fn) */
static int absorbs(const kiln_node *u, const kiln_node *x)
{
    return (u->op == KILN_OP_ADD || u->op == KILN_OP_MUL) && x->op == u->op &&
           !x->weak && !u->weak && x->type.dtype == u->type.dtype;
}

/* add / mul: flatten single-use inner nodes of the same op and drop
 * identity operands.  Returns the new id, -2 for "no change", -1 on
 * error. */
static kiln_value nary(kiln_rw *rw, kiln_value v)
{
    const kiln_node *o = &rw->old->nodes[v];
    int op = o->op;
    kiln_value *t;
    int n;
    int changed = kiln_rw_terms(rw, v, &t, &n);
    if (changed < 0)
        return -1;
    /* identity operands (rank-0 literals: dropping one never changes the
     * broadcast shape; the type check below catches a dtype change) */
    if (!o->weak) {
        int m = 0;
        for (int i = 0; i < n; i++) {
            int drop = op == KILN_OP_MUL
                           ? lit_is(rw, t[i], 1.0, -1)
                           : lit_is(rw, t[i], 0.0, 1) ||
                                 (is_int(o->type.dtype) &&
                                  lit_is(rw, t[i], 0.0, -1));
            if (drop && n - (i + 1) + m >= 1) {
                changed = 1;
                continue;
            }
            t[m++] = t[i];
        }
        n = m;
    }
    kiln_value r = -2;
    if (n == 1 && same_as(rw, o, t[0])) {
        r = t[0];
    } else if (changed && n >= 2) {
        r = kiln_rw_op(rw, op, NULL, n, t, v);
        if (r >= 0 && !same_as(rw, o, r))
            r = -2;  /* the dtype would change: keep the node (the built
                        one is dead and dropped at the end) */
    }
    /* mul(x, -1) -> neg(x) */
    if (r == -2 && op == KILN_OP_MUL && o->n_in == 2 && !o->weak) {
        for (int s = 0; s < 2; s++) {
            kiln_value x = rw->map[o->in[1 - s]];
            if (lit_is(rw, rw->map[o->in[s]], -1.0, -1) && same_as(rw, o, x)) {
                kiln_value q = kiln_rw_op(rw, KILN_OP_NEG, NULL, 1, &x, v);
                if (q < 0) {
                    free(t);
                    return -1;
                }
                if (same_as(rw, o, q)) {
                    r = q;
                    break;
                }
            }
        }
    }
    free(t);
    return r;
}

static int is_reduce(int op)
{
    return op == KILN_OP_SUM || op == KILN_OP_PROD || op == KILN_OP_MAX ||
           op == KILN_OP_MIN || op == KILN_OP_MEAN || op == KILN_OP_LOGSUMEXP;
}

/* *mask: bit i set for each axis of at->axes, normalised against rank r.
 * Returns 0 when an axis is out of range or repeated (never for a valid
 * graph; the caller then leaves the node alone). */
static int axes_mask(const kiln_attrs *at, int r, unsigned *mask)
{
    *mask = 0;
    for (int i = 0; i < at->naxes; i++) {
        int64_t a = at->axes[i];
        if (a < -r || a >= r)
            return 0;
        if (a < 0)
            a += r;
        if (*mask & (1u << a))
            return 0;
        *mask |= 1u << a;
    }
    return 1;
}

/* squeeze(R(x, axis=A, keepdims=true), axis=A') -> R(x, axis=A) when
 * the squeeze removes exactly the kept axes and R has no other use. */
static kiln_value squeeze_reduce(kiln_rw *rw, kiln_value v)
{
    const kiln_node *o = &rw->old->nodes[v];
    kiln_value x = o->in[0];
    if (rw->uses[x] != 1)
        return -2;  /* the reduction is used elsewhere (or an output) */
    kiln_value nx = rw->map[x];
    const kiln_node *rn = NODE(rw, nx);
    if (rw->owner[nx] != x || !is_reduce(rn->op) || !rn->attrs->keepdims ||
        rn->n_in != 1)
        return -2;
    int r = rn->type.rank;
    unsigned red = r > 0 ? (1u << r) - 1u : 0u;
    if (rn->attrs->has_axes && !axes_mask(rn->attrs, r, &red))
        return -2;
    if (o->attrs->has_axes) {
        unsigned sq;
        if (!axes_mask(o->attrs, r, &sq) || sq != red)
            return -2;
    } else {
        /* an axis-less squeeze drops every size-1 axis, at run time too:
         * the kept axes must be static and not 1 */
        for (int i = 0; i < r; i++)
            if (!(red & (1u << i)) &&
                (rn->type.dims[i] < 0 || rn->type.dims[i] == 1))
                return -2;
    }
    kiln_attrs at = *rn->attrs;
    at.keepdims = 0;
    kiln_value in0 = rn->in[0];
    kiln_value q = kiln_rw_op(rw, rn->op, &at, 1, &in0, v);
    if (q < 0)
        return -1;
    return same_as(rw, o, q) ? q : -2;  /* else q is dead, dropped */
}

/* fill(m, C), C a short chain of one-element shape ops over a literal L
 * -> fill(m, L) when the type is unchanged. */
static kiln_value fill_literal(kiln_rw *rw, kiln_value v)
{
    const kiln_node *o = &rw->old->nodes[v];
    if (o->n_in != 2)
        return -2;
    kiln_value l = rw->map[o->in[1]];
    int steps = 0;
    for (;;) {
        const kiln_node *n = NODE(rw, l);
        if (n->op != KILN_OP_EXPAND_DIMS && n->op != KILN_OP_RESHAPE &&
            n->op != KILN_OP_SQUEEZE)
            break;
        if (++steps > 32 || n->n_in != 1)
            return -2;  /* a long chain is left alone (bounded work) */
        for (int i = 0; i < n->type.rank; i++)
            if (n->type.dims[i] != 1)
                return -2;
        l = n->in[0];
    }
    if (steps == 0 || NODE(rw, l)->op != KILN_OP_LITERAL)
        return -2;
    kiln_value in[2] = {rw->map[o->in[0]], l};
    kiln_value q = kiln_rw_op(rw, KILN_OP_FILL, NULL, 2, in, v);
    if (q < 0)
        return -1;
    return same_as(rw, o, q) ? q : -2;
}

/* The value old node v becomes, -2 for "move it as is", -1 on error. */
static kiln_value rewrite(kiln_rw *rw, kiln_value v)
{
    const kiln_node *o = &rw->old->nodes[v];
    kiln_value a = o->n_in > 0 ? rw->map[o->in[0]] : -1;
    kiln_value b = o->n_in > 1 ? rw->map[o->in[1]] : -1;
    switch (o->op) {
    case KILN_OP_ADD:
    case KILN_OP_MUL:
        return nary(rw, v);
    case KILN_OP_NEG: {
        const kiln_node *in = NODE(rw, a);
        if (in->op == KILN_OP_NEG && same_as(rw, o, in->in[0]))
            return in->in[0];
        return -2;
    }
    case KILN_OP_SUB:
        if (!o->weak && lit_is(rw, b, 0.0, 0) && same_as(rw, o, a))
            return a;
        return -2;
    case KILN_OP_TRUE_DIV:
        if (!o->weak && lit_is(rw, b, 1.0, -1) && same_as(rw, o, a))
            return a;
        return -2;
    case KILN_OP_CAST:
        if ((int)NODE(rw, a)->type.dtype == o->attrs->dtype && same_as(rw, o, a))
            return a;
        return -2;
    case KILN_OP_SQUEEZE:
        return squeeze_reduce(rw, v);
    case KILN_OP_FILL:
        return fill_literal(rw, v);
    default:
        return -2;
    }
}

int kiln_rw_canonicalize(kiln_graph **gp, const kiln_rw_config *c,
                         kiln_err *err)
{
    return kiln_rw_map(gp, c, err, rewrite, 1, absorbs);
}
