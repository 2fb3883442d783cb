/*
 * ode_type.c — the type of an ode_rk45 / ode_bdf node (issue 28; prefix
 * kiln_ir_ode_): its inputs checked against its body.  Apart from ode.c
 * (the Jacobian graph, which uses the gradient) so that type inference
 * (ops.c) does not reach the gradient.
 */
#include "ir.h"

#include <kiln/kiln.h>

#include <stdio.h>

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
    return kiln_ir_ode_types(ctx, op, a, n_in, in, 0, out, err);
}

int kiln_ir_ode_types(const kiln_shape_ctx *ctx, int op, const kiln_attrs *a,
                      int n_in, const kiln_type *in, int which,
                      kiln_type *out, kiln_err *err)
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
    int n_out = a->sens == 2 ? 2 : 1;
    if (which < 0 || which >= n_out)
        return kiln_seterr(err, KILN_ERR_TYPE, "result: index %d, but the "
                           "%s has %d output%s%s", which, name, n_out,
                           n_out == 1 ? "" : "s",
                           n_out == 1 ? " (its gradient makes it two: the "
                                        "states and, with sens=2, the "
                                        "sensitivities)" : "");
    /* sens 0: Y; 1: S; 2: Y, then S as output 1 */
    int is_s = a->sens == 1 || which == 1;
    out->dtype = KILN_F64;
    out->rank = is_s ? 3 : 2;
    out->dims[0] = dim_of(ctx, in[2].dims[0]);
    out->dims[1] = n;
    out->dims[2] = n + p;
    return 0;
}
