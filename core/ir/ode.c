/*
 * ode.c — the graphs an ODE node's solver evaluates (issue 28; prefix
 * kiln_ir_ode_): the right-hand side is the node's body as written; its
 * Jacobian is built here from the body by kiln's own reverse mode, alone
 * or beside dy in one graph (the N reverse passes share the body's forward
 * nodes, so f and J come from one evaluation).
 */
#include "ir.h"

#include <kiln/graph.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The Jacobian graph; with keep_dy, dy stays output 0 and jac is 1. */
static kiln_graph *ode_jacobian(const kiln_graph *body, int keep_dy,
                                kiln_err *err)
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
    if (!keep_dy) {
        free(g->outputs[0].name);
        g->n_outputs = 0;
    }
    const char *jn = keep_dy && !strcmp(g->outputs[0].name, "jac")
                         ? "jac_" : "jac";
    if (kiln_graph_output(g, jn, J, err))
        goto fail;
    free(rows);
    return g;
fail:
    free(rows);
    kiln_graph_free(g);
    return NULL;
}

kiln_graph *kiln_ir_ode_jacobian(const kiln_graph *body, kiln_err *err)
{
    return ode_jacobian(body, 0, err);
}

kiln_graph *kiln_ir_ode_rhs_jacobian(const kiln_graph *body, kiln_err *err)
{
    return ode_jacobian(body, 1, err);
}
