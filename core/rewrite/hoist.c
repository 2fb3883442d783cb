/*
 * hoist.c — hoisting data-only subgraphs (prefix kiln_rw_hoist_;
 * docs/architecture.md, "Data-only values are computed when the data are
 * bound").
 *
 * A node whose value depends only on constants, literals and shared
 * values — never on an `input` — has the same value at every call.  The
 * compile driver (core/compile/driver.c) asks this file for the
 * *boundary* of that data-only part: the data-only nodes that a per-call
 * node or an output reads and that compute something from data; builds
 * from them a separate graph (the prep graph: their data-only cone, the
 * boundary nodes its outputs), compiles it like any graph and runs it when
 * the data are bound; and turns each boundary node of the per-call graph
 * into a hidden shared value (kiln_node.hoisted) that the prep's result is
 * copied into.  The cone then has no reader left in the per-call graph and
 * is dropped with the other dead nodes.
 *
 * Not hoisted: a bare leaf, a view (reshape, transpose, slice,
 * expand_dims, squeeze, broadcast_to, fill, alloc, zeros, ones: readers
 * read those in place, so a stored copy would cost memory and save
 * nothing), a value computed from literals only (a broadcast literal:
 * memory for nothing), and `check` (it must fail at the call, as it would
 * unhoisted; its conditions may still be hoisted).
 */
#include "rewrite/rewrite.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>

/* A view: readers read it in place (core/lower: view steps). */
static int is_view(int op)
{
    switch (op) {
    case KILN_OP_RESHAPE: case KILN_OP_TRANSPOSE: case KILN_OP_EXPAND_DIMS:
    case KILN_OP_SQUEEZE: case KILN_OP_BROADCAST_TO: case KILN_OP_SUBTENSOR:
    case KILN_OP_FILL: case KILN_OP_ALLOC: case KILN_OP_ZEROS:
    case KILN_OP_ONES:
        return 1;
    default:
        return 0;
    }
}

static int is_leaf(int op)
{
    return op == KILN_OP_INPUT || op == KILN_OP_SHARED ||
           op == KILN_OP_CONST || op == KILN_OP_LITERAL;
}

int kiln_rw_hoist_find(const kiln_graph *g, kiln_value **out, int *n_out,
                       kiln_err *err)
{
    *out = NULL;
    *n_out = 0;
    int nn = g->n_nodes;
    /* per node: bit 0 data-only, bit 1 reads data (a shared value or a
     * constant), bit 2 computes (a non-view, non-leaf op in its cone),
     * bit 3 read by a per-call node or an output */
    unsigned char *fl = calloc((size_t)(nn ? nn : 1), 1);
    if (!fl)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int v = 0; v < nn; v++) {
        const kiln_node *n = &g->nodes[v];
        unsigned f = 0;
        if (n->op == KILN_OP_SHARED || n->op == KILN_OP_CONST)
            f = 1 | 2;
        else if (n->op == KILN_OP_LITERAL)
            f = 1;
        else if (n->op != KILN_OP_INPUT && n->op != KILN_OP_CHECK) {
            f = 1 | (is_view(n->op) ? 0 : 4);
            for (int i = 0; i < n->n_in; i++) {
                unsigned fi = fl[n->in[i]];
                if (!(fi & 1))
                    f &= ~1u;
                f |= fi & 6;
            }
        }
        fl[v] = (unsigned char)f;
    }
    /* a data-only value read by a per-call node (or a check) */
    for (int v = 0; v < nn; v++) {
        const kiln_node *n = &g->nodes[v];
        if (fl[v] & 1)
            continue;
        for (int i = 0; i < n->n_in; i++)
            fl[n->in[i]] |= 8;
    }
    for (int o = 0; o < g->n_outputs; o++)
        fl[g->outputs[o].value] |= 8;
    /* a view of data-only values stays per call (read in place): what it
     * reads is the boundary then, walking down a chain of views */
    for (int v = nn - 1; v >= 0; v--) {
        const kiln_node *n = &g->nodes[v];
        if ((fl[v] & 9) == 9 && is_view(n->op))
            for (int i = 0; i < n->n_in; i++)
                fl[n->in[i]] |= 8;
    }
    int cnt = 0;
    for (int v = 0; v < nn; v++)
        if ((fl[v] & 15) == 15 && !is_view(g->nodes[v].op) &&
            !is_leaf(g->nodes[v].op))
            cnt++;
    if (cnt) {
        *out = malloc(sizeof **out * (size_t)cnt);
        if (!*out) {
            free(fl);
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        }
        for (int v = 0; v < nn; v++)
            if ((fl[v] & 15) == 15 && !is_view(g->nodes[v].op) &&
                !is_leaf(g->nodes[v].op))
                (*out)[(*n_out)++] = v;
    }
    free(fl);
    return 0;
}

kiln_graph *kiln_rw_hoist_prep(const kiln_graph *g, const kiln_value *nodes,
                               int n, kiln_err *err)
{
    int nn = g->n_nodes;
    kiln_value *map = malloc(sizeof *map * (size_t)(nn ? nn : 1));
    kiln_graph *p = kiln_graph_new(g->name ? g->name : "prep", err);
    if (!map || !p) {
        free(map);
        kiln_graph_free(p);
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int v = 0; v < nn; v++)
        map[v] = -1;
    /* the cone: every node a boundary node reads, marked backwards */
    for (int k = 0; k < n; k++)
        map[nodes[k]] = -2;
    for (int v = nn - 1; v >= 0; v--)
        if (map[v] == -2)
            for (int i = 0; i < g->nodes[v].n_in; i++)
                map[g->nodes[v].in[i]] = -2;
    if (kiln_ir_copy_symbols(p, g))
        goto nomem;
    kiln_value in[64], *inp = in;
    for (int v = 0; v < nn; v++) {
        if (map[v] != -2)
            continue;
        const kiln_node *o = &g->nodes[v];
        kiln_node nd = *o;
        char nm[32];
        nd.name = NULL;
        nd.source = NULL;
        nd.line = o->line;
        nd.hoisted = 0;
        nd.param = 0;
        if (o->op == KILN_OP_SHARED) {
            /* bound later: the driver points it at g's data */
            nd.data = NULL;
            nd.blob = NULL;
            nd.nbytes = 0;
            nd.promoted = 0;
            snprintf(nm, sizeof nm, "_hoist_in%d", (int)v);
            nd.name = o->name && !o->promoted ? o->name : nm;
        }
        if (o->n_in > (int)(sizeof in / sizeof *in)) {
            if (inp != in)
                free(inp);
            inp = malloc(sizeof *inp * (size_t)o->n_in);
            if (!inp)
                goto nomem;
        }
        for (int i = 0; i < o->n_in; i++)
            inp[i] = map[o->in[i]];
        nd.in = o->n_in ? inp : NULL;
        map[v] = kiln_ir_append(p, &nd, err);
        if (inp != in) {
            free(inp);
            inp = in;
        }
        if (map[v] < 0)
            goto fail;
    }
    for (int k = 0; k < n; k++) {
        char nm[32];
        snprintf(nm, sizeof nm, "_hoist%d", k);
        if (kiln_graph_output(p, nm, map[nodes[k]], err))
            goto fail;
    }
    free(map);
    return p;
nomem:
    kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
fail:
    free(map);
    kiln_graph_free(p);
    return NULL;
}

static kiln_value keep_visit(kiln_rw *rw, kiln_value v)
{
    (void)rw;
    (void)v;
    return -2;
}

int kiln_rw_hoist_apply(kiln_graph **gp, const kiln_value *nodes, int n,
                        kiln_err *err)
{
    kiln_graph *g = *gp;
    for (int k = 0; k < n; k++) {
        kiln_node *nd = &g->nodes[nodes[k]];
        free(nd->in);
        nd->in = NULL;
        nd->n_in = 0;
        kiln_ir_node_drop_attrs(nd);
        nd->op = KILN_OP_SHARED;
        nd->promoted = 1;      /* hidden: not listed, not bindable */
        nd->hoisted = 1 + k;
        nd->data = NULL;
        nd->nbytes = 0;
    }
    /* the cones have no reader left: drop them */
    return kiln_rw_map(gp, NULL, err, keep_visit, 0, NULL);
}
