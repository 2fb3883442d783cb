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

/* ---- bodies that read y and theta only element by element ----
 *
 * Most right-hand sides read y[k] and theta[k] as scalars.  Reverse mode
 * through such a read scatters the scalar's adjoint back into a vector
 * (zeros + inc_subtensor per read and row: 28 of LV's 38 kernels), and
 * the rows are then joined.  Instead the body is copied into a graph h
 * whose reads are scalar inputs s_j (j < N: y[j], else theta[j - N]); the
 * gradients with respect to those are scalars, stacked into the rows.  h
 * is then copied into the result, its scalar inputs mapped to the reads
 * y[j], theta[j - N] of the result's own (t, y, theta).  Values are the
 * same: a read's adjoint is the sum of its uses' contributions either
 * way. */

/* j of a read y[k] (in[1]) or theta[k] (in[2]): a subtensor with one
 * static int index; -1 when v is not one, -2 when it uses y or theta
 * otherwise. */
static int64_t scalar_read(const kiln_graph *b, kiln_value v,
                           const kiln_value *in, int64_t n, int64_t p)
{
    const kiln_node *nd = &b->nodes[v];
    int uses = 0;
    for (int i = 0; i < nd->n_in; i++)
        uses |= nd->in[i] == in[1] || nd->in[i] == in[2];
    if (!uses)
        return -1;
    if (nd->op != KILN_OP_SUBTENSOR || nd->n_in != 1 ||
        nd->attrs->nidx != 1 || nd->attrs->idx[0].kind != KILN_INDEX_INT)
        return -2;
    int y = nd->in[0] == in[1];
    int64_t len = y ? n : p, k = nd->attrs->idx[0].start;
    if (k < 0)
        k += len;
    if (k < 0 || k >= len)
        return -2;
    return y ? k : n + k;
}

/* Appends src's nodes other than its inputs to dst, src's node v becoming
 * map[v] (map holds the inputs' images; filled for the rest).  Names are
 * dropped (dst's names stay unique). */
static int copy_nodes(kiln_graph *dst, const kiln_graph *src,
                      kiln_value *map, const int64_t *read, kiln_value *sv,
                      kiln_err *err)
{
    kiln_value ins[64];
    for (kiln_value v = 0; v < src->n_nodes; v++) {
        const kiln_node *nd = &src->nodes[v];
        if (nd->op == KILN_OP_INPUT)
            continue;
        if (read && read[v] >= 0) {
            map[v] = sv[read[v]];
            continue;
        }
        if (nd->n_in > 64) {
            kiln_seterr(err, KILN_ERR_ARG, "ode: a node of %d inputs",
                        nd->n_in);
            return -1;
        }
        for (int i = 0; i < nd->n_in; i++)
            ins[i] = map[nd->in[i]];
        kiln_node proto = *nd;
        proto.in = ins;
        proto.name = NULL;
        if ((map[v] = kiln_ir_append(dst, &proto, err)) < 0)
            return -1;
    }
    return 0;
}

/* The graph (t, y, theta) -> [dy,] jac by scalar reads, or NULL with
 * err->code 0 when the body uses y or theta otherwise. */
static kiln_graph *jacobian_by_reads(const kiln_graph *body,
                                     const kiln_value *in, int64_t n,
                                     int64_t p, int keep_dy, kiln_err *err)
{
    int64_t m = n + p;
    int nb = body->n_nodes;
    int64_t *read = malloc(sizeof *read * (size_t)nb);
    kiln_value *map = calloc((size_t)nb, sizeof *map);
    kiln_value *sv = calloc((size_t)m, sizeof *sv);
    kiln_value *rows = calloc((size_t)n, sizeof *rows);
    kiln_value *gs = calloc((size_t)m, sizeof *gs);
    kiln_graph *h = NULL, *f = NULL;
    int ok = read && map && sv && rows && gs;
    for (kiln_value v = 0; ok && v < nb; v++)
        ok = (read[v] = scalar_read(body, v, in, n, p)) != -2;
    for (int k = 0; ok && k < body->n_outputs; k++)
        ok = body->outputs[k].value != in[1] &&
             body->outputs[k].value != in[2];
    if (!ok || m > 4096)
        goto fail;          /* not this body (or no memory): the caller's
                               general path */
    /* h: the body on scalar reads, and the rows */
    h = kiln_graph_new(body->name ? body->name : "ode", err);
    if (!h || kiln_ir_copy_symbols(h, body))
        goto fail;
    for (int k = 0; k < 3; k++) {
        const kiln_type *ty = &body->nodes[in[k]].type;
        char nm[16];
        snprintf(nm, sizeof nm, "_in%d", k);
        if ((map[in[k]] = kiln_graph_input(h, nm, ty->dtype, ty->rank,
                                           ty->dims, err)) < 0)
            goto fail;
    }
    for (int64_t j = 0; j < m; j++) {
        char nm[32];
        snprintf(nm, sizeof nm, "_s%lld", (long long)j);
        if ((sv[j] = kiln_graph_input(h, nm, KILN_F64, 0, NULL, err)) < 0)
            goto fail;
    }
    if (copy_nodes(h, body, map, read, sv, err))
        goto fail;
    kiln_value dy = map[body->outputs[0].value];
    kiln_attr ax = {.key = "axis", .kind = KILN_ATTR_INT, .i = 0};
    /* dy = stack(f_0, ..., f_{N-1}) of f64 scalars: row i is the gradient
     * of f_i itself (no seed scattered into a vector) */
    int direct = h->nodes[dy].op == KILN_OP_STACK && h->nodes[dy].n_in == n;
    for (int64_t i = 0; direct && i < n; i++) {
        const kiln_node *fi = &h->nodes[h->nodes[dy].in[i]];
        direct = fi->type.rank == 0 && fi->type.dtype == KILN_F64;
    }
    for (int64_t i = 0; i < n; i++) {
        kiln_index ix = {.kind = KILN_INDEX_INT, .start = i};
        kiln_value c = direct ? h->nodes[dy].in[i]
                              : kiln_graph_subtensor(h, dy, 1, &ix, err);
        if (c < 0 || kiln_graph_grad(h, c, (int)m, sv,
                                     KILN_GRAD_DISCONNECTED_ZERO, gs, err) ||
            (rows[i] = kiln_graph_op(h, "stack", (int)m, gs, &ax, 1,
                                     err)) < 0)
            goto fail;
    }
    kiln_value J = kiln_graph_op(h, "stack", (int)n, rows, &ax, 1, err);
    if (J < 0)
        goto fail;
    /* f: h on the reads of its own (t, y, theta) */
    f = kiln_graph_new(body->name ? body->name : "ode", err);
    kiln_value *hmap = calloc((size_t)h->n_nodes, sizeof *hmap);
    if (!f || !hmap || kiln_ir_copy_symbols(f, body)) {
        free(hmap);
        goto fail;
    }
    for (int k = 0; k < 3; k++) {
        const kiln_node *bn = &body->nodes[in[k]];
        hmap[map[in[k]]] = kiln_graph_input(f, bn->name, bn->type.dtype,
                                            bn->type.rank, bn->type.dims,
                                            err);
        if (hmap[map[in[k]]] < 0) {
            free(hmap);
            goto fail;
        }
    }
    for (int64_t j = 0; j < m; j++) {
        kiln_index ix = {.kind = KILN_INDEX_INT, .start = j < n ? j : j - n};
        kiln_value src = hmap[map[in[j < n ? 1 : 2]]];
        if ((hmap[sv[j]] = kiln_graph_subtensor(f, src, 1, &ix, err)) < 0) {
            free(hmap);
            goto fail;
        }
    }
    int rc = copy_nodes(f, h, hmap, NULL, NULL, err);
    kiln_value fdy = rc ? -1 : hmap[dy], fJ = rc ? -1 : hmap[J];
    free(hmap);
    if (rc)
        goto fail;
    const char *dn = body->outputs[0].name;
    if ((keep_dy && kiln_graph_output(f, dn, fdy, err)) ||
        kiln_graph_output(f, keep_dy && !strcmp(dn, "jac") ? "jac_" : "jac",
                          fJ, err))
        goto fail;
    kiln_graph_free(h);
    free(read), free(map), free(sv), free(rows), free(gs);
    return f;
fail:
    kiln_graph_free(h);
    kiln_graph_free(f);
    free(read), free(map), free(sv), free(rows), free(gs);
    if (!ok && err)
        err->code = 0;
    return NULL;
}

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
    kiln_err fe = {0, ""};
    kiln_graph *fast = jacobian_by_reads(body, in, n, p, keep_dy, &fe);
    if (fast || fe.code) {
        kiln_graph_free(g);
        if (!fast && err)
            *err = fe;
        return fast;
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
