/*
 * reciprocal.c — the `reciprocal` pass (docs/rewrite.md).
 *
 * true_div(x, s) -> mul(x, true_div(1, s)) when every element of the
 * divisor is the same value and the result has more than one element:
 * s has one element (rank 0, or every dim a static 1), or s is
 * broadcast_to / fill of such a value (the rewrite then divides by the
 * one-element value itself).  The reciprocal is a node of its own with one
 * element, so it is computed once per call (a rank-0 kernel, or data-only
 * and hoisted) instead of once per element of x: a division costs 4-5x a
 * multiplication in a vector loop, and radon's likelihood and its gradient
 * divide by sigma_y three times per house.
 *
 * Float only: the result and s are f32 or f64 (not weak: a weak literal
 * s is fine, fold evaluates its reciprocal), and x is a float.  The
 * reciprocal computes in the result's dtype, so s must have that dtype
 * (or be a weak literal): a reciprocal of an f32 s inside an f64 division
 * would round in f32.  Applied only when mul(x, r) has exactly the
 * node's type and weakness.
 *
 * Not bit-exact: x * fl(1/s) differs from fl(x/s) by at most about one
 * ulp (two roundings instead of one); Stan's normal_lpdf does the same
 * (it computes inv_sigma once).  Division by a power of two stays exact.
 * `-reciprocal` turns the pass off.
 */
#include "rewrite/rewrite.h"

#define NODE(rw, x) (&(rw)->g->nodes[(x)])

static int is_float(kiln_dtype d)
{
    return d == KILN_F64 || d == KILN_F32;
}

/* 1 when t has exactly one element (static dims only), 0 when it may
 * have more */
static int one_element(const kiln_type *t)
{
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] != 1)
            return 0;
    return 1;
}

/* 1 when t certainly has more than one element or may have (a symbolic
 * dim, or a static dim above 1); 0 when it has at most one */
static int many_elements(const kiln_type *t)
{
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0 || t->dims[i] > 1)
            return 1;
    return 0;
}

/* The one-element new-graph value every element of new-graph value s
 * equals, or -1 when there is none */
static kiln_value scalar_of(kiln_rw *rw, kiln_value s)
{
    const kiln_node *n = NODE(rw, s);
    if (one_element(&n->type))
        return s;
    if (n->op == KILN_OP_BROADCAST_TO && n->n_in >= 1 &&
        one_element(&NODE(rw, n->in[0])->type))
        return n->in[0];
    if (n->op == KILN_OP_FILL && n->n_in == 2 &&
        one_element(&NODE(rw, n->in[1])->type))
        return n->in[1];
    return -1;
}

static kiln_value rewrite(kiln_rw *rw, kiln_value v)
{
    const kiln_node *o = &rw->old->nodes[v];
    if (o->op != KILN_OP_TRUE_DIV || o->n_in != 2 || o->weak ||
        !is_float(o->type.dtype) || !many_elements(&o->type))
        return -2;
    kiln_value x = rw->map[o->in[0]];
    kiln_value s = scalar_of(rw, rw->map[o->in[1]]);
    if (s < 0 || !is_float(NODE(rw, x)->type.dtype))
        return -2;
    const kiln_node *sn = NODE(rw, s);
    if (!(sn->weak && sn->op == KILN_OP_LITERAL) &&
        (sn->weak || sn->type.dtype != o->type.dtype))
        return -2;
    kiln_value in[2] = {kiln_rw_literal(rw, 1.0, KILN_LIT_FLOAT), s};
    if (in[0] < 0)
        return -1;
    kiln_value r = kiln_rw_op(rw, KILN_OP_TRUE_DIV, NULL, 2, in, -1);
    if (r < 0)
        return -1;
    kiln_value m[2] = {x, r};
    kiln_value q = kiln_rw_op(rw, KILN_OP_MUL, NULL, 2, m, v);
    if (q < 0)
        return -1;
    const kiln_node *qn = NODE(rw, q);
    if (!kiln_rw_same_type(&qn->type, &o->type) || qn->weak != o->weak)
        return -2;  /* r and q are dead, dropped at the end */
    return q;
}

int kiln_rw_reciprocal(kiln_graph **gp, const kiln_rw_config *c,
                       kiln_err *err)
{
    return kiln_rw_map(gp, c, err, rewrite, 1, NULL);
}
