/*
 * pairwise.c — the `pairwise` pass: pairwise association
 * (docs/rewrite.md).
 *
 * An n-ary add or mul (n > 2, made by canonicalize's flattening) becomes a
 * balanced binary tree over its terms in their order: the terms [lo, hi)
 * are split at lo + (hi - lo) / 2 and the two halves combined.  The tree
 * has depth ceil(log2 n), so no kernel is wider than two inputs before
 * fusion, the dependency chain is O(log n) long, and a sum gets the error
 * bound of pairwise summation, |error| <= eps * ceil(log2 n) * sum |x_i|
 * to first order (Higham, "Accuracy and Stability of Numerical
 * Algorithms", 2nd ed., 2002, section 4.2), instead of sequential
 * summation's (n - 1) * eps * sum |x_i|.
 *
 * Every internal node computes in the n-ary node's dtype: a term of
 * another dtype, or a weak literal, is cast to it first (an n-ary node
 * converts every operand to its compute dtype before any arithmetic, and
 * the tree must do the same, or add(x_f32, y_f32) inside
 * add(x_f32, y_f32, z_f64) would round in f32).  Costs: n - 1 nodes,
 * linear time.
 */
#include "rewrite/rewrite.h"

#include <stdlib.h>

typedef struct tree {
    kiln_rw *rw;
    int op;
    const kiln_value *t;
    kiln_value for_old;
} tree;

static kiln_value build(tree *T, int lo, int hi)
{
    if (hi - lo == 1)
        return T->t[lo];
    int mid = lo + (hi - lo) / 2;
    kiln_value a = build(T, lo, mid);
    if (a < 0)
        return -1;
    kiln_value b = build(T, mid, hi);
    if (b < 0)
        return -1;
    kiln_value in[2] = {a, b};
    return kiln_rw_op(T->rw, T->op, NULL, 2, in,
                      -1);
}

static kiln_value associate(kiln_rw *rw, kiln_value v)
{
    const kiln_node *o = &rw->old->nodes[v];
    if ((o->op != KILN_OP_ADD && o->op != KILN_OP_MUL) || o->n_in <= 2)
        return -2;
    kiln_value *t = malloc(sizeof *t * (size_t)o->n_in);
    if (!t) {
        kiln_seterr(rw->err, KILN_ERR_NOMEM, "out of memory");
        return -1;
    }
    kiln_dtype cd = o->type.dtype;
    kiln_attrs cast;
    kiln_rw_attrs_default(&cast);
    cast.dtype = cd;
    for (int i = 0; i < o->n_in; i++) {
        t[i] = rw->map[o->in[i]];
        const kiln_node *x = &rw->g->nodes[t[i]];
        /* a weak literal of the node's own dtype needs no cast; one of
         * another dtype does, even in an f64 node: two weak integer
         * literals paired in one subtree would multiply in i64 and
         * overflow where the n-ary node computes in f64 (found by the
         * differential fuzzer, tests/test_rewrite_fuzz.c) */
        int lit_ok = x->weak && x->type.dtype == cd;
        if (!o->weak && (x->type.dtype != cd || x->weak) && !lit_ok) {
            t[i] = kiln_rw_op(rw, KILN_OP_CAST, &cast, 1, &t[i], -1);
            if (t[i] < 0) {
                free(t);
                return -1;
            }
        }
    }
    tree T = {rw, o->op, t, v};
    kiln_value r = build(&T, 0, o->n_in);
    free(t);
    if (r >= 0 && !(kiln_rw_same_type(&rw->g->nodes[r].type, &o->type) &&
                    rw->g->nodes[r].weak == o->weak))
        return -2;  /* symbolic dims gave a fresh symbol: keep the node */
    if (r >= 0)
        rw->owner[r] = v;
    return r;
}

int kiln_rw_pairwise(kiln_graph **gp, const kiln_rw_config *c, kiln_err *err)
{
    return kiln_rw_map(gp, c, err, associate, 0, NULL);
}
