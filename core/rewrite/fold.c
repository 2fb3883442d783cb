/*
 * fold.c — the `fold` pass: constant folding (docs/rewrite.md).
 *
 * An elementwise node whose inputs are all literals (so the node is weak,
 * a Python-scalar computation in NEP 50 terms) is evaluated now and
 * replaced by a literal.  Only operations that IEEE 754 defines exactly
 * (correctly rounded) are folded — add, sub, mul, true_div, neg, abs,
 * square, sqrt, comparisons, logic, where — computed in the node's
 * compute dtype (f64, i64 with two's-complement wrap-around, or bool)
 * exactly as every backend computes them, so the folded value is the one
 * the kernel would have produced, bit for bit.  Transcendental functions
 * (exp, log, ...) are not folded: backends may use different libm
 * implementations, and the result must not depend on the pass.
 * An integer result above 2^53 in magnitude is not folded (a literal holds
 * its value in a double).  Constants (`const`) are never read: a small
 * constant is a buffer like a large one (see promote.c).
 */
#include "rewrite/rewrite.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define LIT_INT_MAX 9007199254740992.0

typedef struct val {
    double f;
    int64_t i;
    int b;
} val;

static val conv(const kiln_node *lit, kiln_dtype cd)
{
    val r = {0, 0, 0};
    double x = lit->value;
    if (cd == KILN_F64 || cd == KILN_F32)
        r.f = x;
    else if (cd == KILN_BOOL)
        r.b = x != 0;
    else
        r.i = (int64_t)x;
    return r;
}

static int64_t wrap_add(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t wrap_mul(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a * (uint64_t)b);
}

/* Evaluate node o (old graph) over literal inputs (new graph) in compute
 * dtype cd.  Returns 1 and *out (as a double in the result dtype), 0 when
 * the op is not folded. */
static int eval(kiln_rw *rw, const kiln_node *o, kiln_dtype cd, double *out)
{
    const kiln_node *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < o->n_in && i < 3; i++)
        in[i] = &rw->g->nodes[rw->map[o->in[i]]];
    int fl = cd == KILN_F64, in_ = cd == KILN_I64;
    if (!fl && !in_ && cd != KILN_BOOL)
        return 0;  /* literal-only ops compute in f64, i64 or bool */
    switch (o->op) {
    case KILN_OP_ADD:
    case KILN_OP_MUL: {
        int add = o->op == KILN_OP_ADD;
        double f = add ? 0.0 : 1.0;
        int64_t k = add ? 0 : 1;
        for (int i = 0; i < o->n_in; i++) {
            val x = conv(&rw->g->nodes[rw->map[o->in[i]]], cd);
            if (i == 0) {
                f = x.f;
                k = x.i;
            } else if (add) {
                f = f + x.f;
                k = wrap_add(k, x.i);
            } else {
                f = f * x.f;
                k = wrap_mul(k, x.i);
            }
        }
        if (!fl && !in_)
            return 0;
        *out = fl ? f : (double)k;
        return fl || (k <= (int64_t)LIT_INT_MAX && k >= -(int64_t)LIT_INT_MAX);
    }
    default:
        break;
    }
    val a = in[0] ? conv(in[0], cd) : (val){0, 0, 0};
    val b = in[1] ? conv(in[1], cd) : (val){0, 0, 0};
    int64_t k = 0;
    double f = 0;
    int isbool = 0, bv = 0;
    switch (o->op) {
    case KILN_OP_SUB:
        f = a.f - b.f;
        k = (int64_t)((uint64_t)a.i - (uint64_t)b.i);
        break;
    case KILN_OP_TRUE_DIV:
        if (!fl)
            return 0;
        f = a.f / b.f;
        break;
    case KILN_OP_NEG:
        f = -a.f;
        k = (int64_t)(0 - (uint64_t)a.i);
        break;
    case KILN_OP_ABS:
        f = fabs(a.f);
        k = a.i < 0 ? (int64_t)(0 - (uint64_t)a.i) : a.i;
        break;
    case KILN_OP_SQUARE:
        f = a.f * a.f;
        k = wrap_mul(a.i, a.i);
        break;
    case KILN_OP_SQRT:
        if (!fl)
            return 0;
        f = sqrt(a.f);
        break;
    case KILN_OP_EQ: case KILN_OP_NE: case KILN_OP_LT:
    case KILN_OP_LE: case KILN_OP_GT: case KILN_OP_GE: {
        int c;
        if (fl) {
            switch (o->op) {
            case KILN_OP_EQ: c = a.f == b.f; break;
            case KILN_OP_NE: c = a.f != b.f; break;
            case KILN_OP_LT: c = a.f < b.f; break;
            case KILN_OP_LE: c = a.f <= b.f; break;
            case KILN_OP_GT: c = a.f > b.f; break;
            default: c = a.f >= b.f; break;
            }
        } else {
            int64_t x = in_ ? a.i : a.b, y = in_ ? b.i : b.b;
            switch (o->op) {
            case KILN_OP_EQ: c = x == y; break;
            case KILN_OP_NE: c = x != y; break;
            case KILN_OP_LT: c = x < y; break;
            case KILN_OP_LE: c = x <= y; break;
            case KILN_OP_GT: c = x > y; break;
            default: c = x >= y; break;
            }
        }
        isbool = 1;
        bv = c;
        break;
    }
    case KILN_OP_AND: isbool = 1; bv = a.b && b.b; break;
    case KILN_OP_OR: isbool = 1; bv = a.b || b.b; break;
    case KILN_OP_NOT: isbool = 1; bv = !a.b; break;
    default:
        return 0;
    }
    if (isbool) {
        *out = bv;
        return 1;
    }
    if (cd == KILN_BOOL)
        return 0;
    if (fl) {
        *out = f;
        return 1;
    }
    if (k > (int64_t)LIT_INT_MAX || k < -(int64_t)LIT_INT_MAX)
        return 0;
    *out = (double)k;
    return 1;
}

/* Fold old node v when it can be; -2 when not. */
static kiln_value fold(kiln_rw *rw, kiln_value v)
{
    const kiln_node *o = &rw->old->nodes[v];
    if (!o->weak || o->type.rank != 0 ||
        kiln_ir_op_info(o->op)->category != KILN_CAT_ELEMWISE ||
        o->op == KILN_OP_CAST || o->op == KILN_OP_FILL)
        return -2;
    for (int i = 0; i < o->n_in; i++)
        if (rw->g->nodes[rw->map[o->in[i]]].op != KILN_OP_LITERAL)
            return -2;
    double r;
    if (o->op == KILN_OP_WHERE) {
        /* where(c, a, b): the chosen value converted to the result dtype */
        const kiln_node *c = &rw->g->nodes[rw->map[o->in[0]]];
        const kiln_node *x =
            &rw->g->nodes[rw->map[o->in[c->value != 0 ? 1 : 2]]];
        val t = conv(x, o->type.dtype);
        r = o->type.dtype == KILN_F64   ? t.f
            : o->type.dtype == KILN_I64 ? (double)t.i
                                        : t.b;
    } else {
        kiln_dtype pd = rw->g->nodes[rw->map[o->in[0]]].type.dtype;
        for (int i = 1; i < o->n_in; i++)
            pd = kiln_ir_promote(pd, 1,
                                 rw->g->nodes[rw->map[o->in[i]]].type.dtype,
                                 1);
        kiln_dtype cd = o->op == KILN_OP_AND || o->op == KILN_OP_OR ||
                                o->op == KILN_OP_NOT
                            ? KILN_BOOL
                            : kiln_ir_compute_dtype(o->op, pd);
        if (!eval(rw, o, cd, &r))
            return -2;
    }
    int kind = o->type.dtype == KILN_F64   ? KILN_LIT_FLOAT
               : o->type.dtype == KILN_I64 ? KILN_LIT_INT
               : o->type.dtype == KILN_BOOL ? KILN_LIT_BOOL
                                            : -1;
    if (kind < 0)
        return -2;
    if (kind == KILN_LIT_BOOL)
        r = r != 0;
    kiln_value l = kiln_rw_literal(rw, r, kind);
    if (l >= 0)
        rw->owner[l] = v;
    return l;
}

int kiln_rw_fold(kiln_graph **gp, const kiln_rw_config *c, kiln_err *err)
{
    return kiln_rw_map(gp, c, err, fold, 1, NULL);
}
