/*
 * canonicalize.c — the `canonicalize` pass (docs/rewrite.md).
 *
 * One walk in topological order.  Rules, each applied only when the
 * result has exactly the node's type (dtype, shape) and weakness, so that
 * no consumer sees a different value type:
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
    default:
        return -2;
    }
}

int kiln_rw_canonicalize(kiln_graph **gp, const kiln_rw_config *c,
                         kiln_err *err)
{
    return kiln_rw_map(gp, c, err, rewrite, 1, absorbs);
}
