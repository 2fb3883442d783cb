/*
 * ode.c — the graphs an ODE node's solver evaluates (issue 28; prefix
 * kiln_ir_ode_): the right-hand side is the node's body as written; its
 * Jacobian is built here from the body by kiln's own reverse mode.
 */
#include "ir.h"

#include <kiln/graph.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kiln_graph *kiln_ir_ode_jacobian(const kiln_graph *body, kiln_err *err)
{
    kiln_value in[4];
    if (!body || kiln_ir_body_inputs(body, in, 4) != 3 ||
        body->n_outputs != 1) {
        kiln_seterr(err, KILN_ERR_TYPE, "ode: the body must have the inputs "
                    "(t, y, theta) and one output dy");
        return NULL;
    }
    kiln_graph *g = kiln_ir_clone(body, err);
    if (!g)
        return NULL;
    kiln_value dy = g->outputs[0].value;
    const kiln_type *ty = &g->nodes[in[1]].type;
    const kiln_type *tp = &g->nodes[in[2]].type;
    int64_t n = ty->rank == 1 ? ty->dims[0] : -1;
    int64_t p = tp->rank == 1 ? tp->dims[0] : -1;
    if (n < 1 || p < 0 || n > 4096) {
        kiln_seterr(err, KILN_ERR_SHAPE, "ode: the body's y and theta must "
                    "be vectors of static sizes (y has %lld, at most 4096)",
                    (long long)n);
        kiln_graph_free(g);
        return NULL;
    }
    kiln_value *rows = calloc((size_t)n, sizeof *rows);
    if (!rows) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        kiln_graph_free(g);
        return NULL;
    }
    /* row i of [df/dy | df/dtheta]: the gradient of dy[i] */
    kiln_value wrt[2] = {in[1], in[2]};
    kiln_attr ax = {.key = "axis", .kind = KILN_ATTR_INT, .i = 0};
    int nw = p > 0 ? 2 : 1;
    for (int64_t i = 0; i < n; i++) {
        kiln_index ix = {.kind = KILN_INDEX_INT, .start = i};
        kiln_value gi[2];
        kiln_value c = kiln_graph_subtensor(g, dy, 1, &ix, err);
        if (c < 0 || kiln_graph_grad(g, c, nw, wrt,
                                     KILN_GRAD_DISCONNECTED_ZERO, gi, err))
            goto fail;
        rows[i] = nw == 2 ? kiln_graph_op(g, "join", 2, gi, &ax, 1, err)
                          : gi[0];
        if (rows[i] < 0)
            goto fail;
    }
    kiln_value J = kiln_graph_op(g, "stack", (int)n, rows, &ax, 1, err);
    if (J < 0)
        goto fail;
    free(g->outputs[0].name);
    g->n_outputs = 0;
    if (kiln_graph_output(g, "jac", J, err))
        goto fail;
    free(rows);
    return g;
fail:
    free(rows);
    kiln_graph_free(g);
    return NULL;
}

static const char *type_text(const kiln_type *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", kiln_dtype_name(t->dtype));
    for (int i = 0; i < t->rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "",
                              (long long)t->dims[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

/* A dim of the op's inputs, resolved at run time (symvals). */
static int64_t dim_of(const kiln_shape_ctx *ctx, int64_t d)
{
    if (KILN_DIM_IS_SYM(d) && ctx && ctx->symvals)
        return ctx->symvals[KILN_SYM_INDEX(d)];
    return d;
}

int kiln_ir_ode_type(const kiln_shape_ctx *ctx, int op, const kiln_attrs *a,
                     int n_in, const kiln_type *in, kiln_type *out,
                     kiln_err *err)
{
    const char *name = op == KILN_OP_ODE_BDF ? "ode_bdf" : "ode_rk45";
    static const char *const what[4] = {"y0", "t0", "ts", "theta"};
    static const int rank[4] = {1, 0, 1, 1};
    char x[96], y[96];
    if (!a || !a->body)
        return kiln_seterr(err, KILN_ERR_TYPE, "%s: attribute 'body' (the "
                           "right-hand side graph) is required", name);
    if (n_in != 4)
        return kiln_seterr(err, KILN_ERR_TYPE, "%s: expected 4 inputs "
                           "(y0, t0, ts, theta), got %d", name, n_in);
    for (int i = 0; i < 4; i++)
        if (in[i].dtype != KILN_F64 || in[i].rank != rank[i])
            return kiln_seterr(err, KILN_ERR_TYPE, "%s: %s must be %s, got "
                               "%s", name, what[i],
                               rank[i] ? "an f64 vector" : "an f64 scalar",
                               type_text(&in[i], x, sizeof x));
    const kiln_graph *b = a->body;
    kiln_value bi[4];
    if (kiln_ir_body_inputs(b, bi, 4) != 3 || b->n_outputs != 1)
        return kiln_seterr(err, KILN_ERR_TYPE, "%s: body '%s' must have "
                           "the inputs (t, y, theta) and one output dy",
                           name, b->name ? b->name : "?");
    const kiln_type *bt = &b->nodes[bi[0]].type, *by = &b->nodes[bi[1]].type,
                    *bp = &b->nodes[bi[2]].type,
                    *bo = &b->nodes[b->outputs[0].value].type;
    int64_t n = by->rank == 1 ? by->dims[0] : -1;
    int64_t p = bp->rank == 1 ? bp->dims[0] : -1;
    if (bt->dtype != KILN_F64 || bt->rank != 0 || by->dtype != KILN_F64 ||
        n < 1 || bp->dtype != KILN_F64 || p < 0)
        return kiln_seterr(err, KILN_ERR_TYPE, "%s: body '%s' must take "
                           "(t: f64, y: f64[N], theta: f64[P]) with N >= 1 "
                           "and P static, got (t: %s, y: %s, theta: %s)",
                           name, b->name ? b->name : "?",
                           type_text(bt, x, sizeof x),
                           type_text(by, y, sizeof y),
                           type_text(bp, (char[96]){0}, 96));
    if (bo->dtype != KILN_F64 || bo->rank != 1 || bo->dims[0] != n)
        return kiln_seterr(err, KILN_ERR_SHAPE, "%s: body '%s' returns %s, "
                           "but its state y is %s", name,
                           b->name ? b->name : "?",
                           type_text(bo, x, sizeof x),
                           type_text(by, y, sizeof y));
    int64_t d0 = dim_of(ctx, in[0].dims[0]), d3 = dim_of(ctx, in[3].dims[0]);
    if ((!KILN_DIM_IS_SYM(d0) && d0 != n) ||
        (!KILN_DIM_IS_SYM(d3) && d3 != p))
        return kiln_seterr(err, KILN_ERR_SHAPE, "%s: %s is %s but body "
                           "'%s' takes %s", name, d0 != n ? "y0" : "theta",
                           type_text(d0 != n ? &in[0] : &in[3], x, sizeof x),
                           b->name ? b->name : "?",
                           type_text(d0 != n ? by : bp, y, sizeof y));
    out->dtype = KILN_F64;
    out->rank = a->sens ? 3 : 2;
    out->dims[0] = dim_of(ctx, in[2].dims[0]);
    out->dims[1] = n;
    out->dims[2] = n + p;
    return 0;
}
