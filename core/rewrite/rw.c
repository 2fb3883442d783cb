/*
 * rw.c — rebuilding a graph for the rewrite passes (prefix kiln_rw_).
 *
 * A pass walks the old graph in topological order and, for each node,
 * either moves it into the new graph (its inputs remapped), or maps it to
 * a value already there (an identity, a merged subexpression), or builds
 * replacement nodes.  Moving steals the node's arrays (inputs, name,
 * data), so a pass costs time and memory linear in the graph and never
 * copies a constant.  kiln_rw_end then drops what is dead and rebuilds the
 * name map.
 */
#include "rewrite/rewrite.h"

#include <stdlib.h>
#include <string.h>

void kiln_rw_attrs_default(kiln_attrs *a)
{
    memset(a, 0, sizeof *a);
    a->dtype = -1;
}

int kiln_rw_same_type(const kiln_type *a, const kiln_type *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return 0;
    return 1;
}

static int nomem(kiln_rw *rw)
{
    return kiln_seterr(rw->err, KILN_ERR_NOMEM, "out of memory");
}

int kiln_rw_begin(kiln_rw *rw, kiln_graph *old, const kiln_rw_config *c,
                  kiln_err *err)
{
    memset(rw, 0, sizeof *rw);
    rw->old = old;
    rw->err = err;
    rw->scratch = c ? c->scratch : NULL;
    rw->g = kiln_graph_new(old->name, err);
    if (!rw->g)
        return err ? err->code : KILN_ERR_NOMEM;
    size_t n = (size_t)(old->n_nodes ? old->n_nodes : 1);
    rw->map = malloc(sizeof *rw->map * n);
    rw->uses = calloc(n, sizeof *rw->uses);
    kiln_rw_scratch *sc = rw->scratch;
    if (sc && sc->nodes && (size_t)sc->cap >= n) {
        /* the array an earlier pass emptied: already mapped, so no page
         * faults (a 60,000-node graph is ~40 MB of nodes) */
        rw->g->nodes = sc->nodes;
        rw->g->cap_nodes = sc->cap;
        sc->nodes = NULL;
        sc->cap = 0;
    } else {
        rw->g->nodes = malloc(sizeof *rw->g->nodes * n);
        rw->g->cap_nodes = (int)n;
    }
    rw->owner_cap = rw->g->cap_nodes;
    rw->owner = malloc(sizeof *rw->owner * (size_t)rw->owner_cap);
    if (!rw->map || !rw->uses || !rw->owner || !rw->g->nodes) {
        kiln_rw_abort(rw);
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    }
    for (int v = 0; v < old->n_nodes; v++) {
        rw->map[v] = -1;
        const kiln_node *nd = &old->nodes[v];
        for (int i = 0; i < nd->n_in; i++)
            rw->uses[nd->in[i]]++;
    }
    for (int k = 0; k < old->n_outputs; k++)
        rw->uses[old->outputs[k].value]++;
    for (int k = 0; k < old->n_grads; k++) {
        rw->uses[old->grads[k].cost]++;
        rw->uses[old->grads[k].result]++;
    }
    /* symbols keep their ids: the new graph takes the array */
    rw->g->symbols = old->symbols;
    rw->g->n_symbols = old->n_symbols;
    rw->g->cap_symbols = old->cap_symbols;
    old->symbols = NULL;
    old->n_symbols = old->cap_symbols = 0;
    return 0;
}

/* Append *nd (owned) to the new graph; returns its id. */
static kiln_value push(kiln_rw *rw, kiln_node *nd, kiln_value for_old)
{
    kiln_graph *g = rw->g;
    if (g->n_nodes == g->cap_nodes || g->n_nodes == rw->owner_cap) {
        int cap = 2 * (g->cap_nodes > rw->owner_cap ? g->cap_nodes
                                                     : rw->owner_cap);
        if (cap < 16)
            cap = 16;
        kiln_node *p = realloc(g->nodes, sizeof *p * (size_t)cap);
        if (p)
            g->nodes = p;
        kiln_value *o = p ? realloc(rw->owner, sizeof *o * (size_t)cap)
                          : NULL;
        if (o)
            rw->owner = o;
        if (!p || !o) {
            kiln_ir_node_drop_attrs(nd);
            free(nd->in);
            free(nd->name);
            if (nd->blob)
                kiln_blob_unref(nd->blob);
            else
                free(nd->data);
            free(nd->source);
            nomem(rw);
            return -1;
        }
        g->cap_nodes = rw->owner_cap = cap;
    }
    kiln_value id = g->n_nodes++;
    g->nodes[id] = *nd;
    rw->owner[id] = for_old;
    return id;
}

kiln_value kiln_rw_move(kiln_rw *rw, kiln_value v)
{
    kiln_node *o = &rw->old->nodes[v];
    for (int i = 0; i < o->n_in; i++) {
        kiln_value m = rw->map[o->in[i]];
        if (m < 0) {
            kiln_seterr(rw->err, KILN_ERR_ARG,
                        "rewrite: input %d of node %d was not mapped", i,
                        (int)v);
            return -1;
        }
        o->in[i] = m;
    }
    kiln_node nd = *o;
    o->attrs = &kiln_ir_no_attrs;
    o->in = NULL;
    o->n_in = 0;
    o->name = NULL;
    o->data = NULL;
    o->blob = NULL;
    o->source = NULL;
    kiln_value id = push(rw, &nd, v);
    if (id >= 0)
        rw->map[v] = id;
    return id;
}

kiln_value kiln_rw_op(kiln_rw *rw, int op, const kiln_attrs *attrs,
                      int n_in, const kiln_value *in, kiln_value for_old)
{
    kiln_type small[4], *types = small;
    int wsmall[4], *weak = wsmall;
    if (n_in > 4) {
        types = malloc(sizeof *types * (size_t)n_in);
        weak = malloc(sizeof *weak * (size_t)n_in);
        if (!types || !weak) {
            if (types != small)
                free(types);
            if (weak != wsmall)
                free(weak);
            nomem(rw);
            return -1;
        }
    }
    for (int i = 0; i < n_in; i++) {
        types[i] = rw->g->nodes[in[i]].type;
        weak[i] = rw->g->nodes[in[i]].weak;
    }
    kiln_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = op;
    if (!attrs)
        attrs = &kiln_ir_no_attrs;
    nd.attrs = &kiln_ir_no_attrs;
    kiln_shape_ctx ctx = {rw->g, NULL};
    int rc = kiln_ir_infer(&ctx, op, attrs, n_in, types, weak, &nd.type,
                           &nd.weak, rw->err);
    if (types != small)
        free(types);
    if (weak != wsmall)
        free(weak);
    if (rc)
        return -1;
    if (kiln_ir_node_set_attrs(&nd, attrs)) {
        nomem(rw);
        return -1;
    }
    nd.n_in = n_in;
    if (n_in > 0) {
        nd.in = malloc(sizeof *nd.in * (size_t)n_in);
        if (!nd.in) {
            kiln_ir_node_drop_attrs(&nd);
            nomem(rw);
            return -1;
        }
        memcpy(nd.in, in, sizeof *nd.in * (size_t)n_in);
    }
    return push(rw, &nd, for_old);
}

kiln_value kiln_rw_literal(kiln_rw *rw, double v, int kind)
{
    kiln_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = KILN_OP_LITERAL;
    nd.attrs = &kiln_ir_no_attrs;
    nd.weak = 1;
    nd.type.dtype = kind == KILN_LIT_INT     ? KILN_I64
                    : kind == KILN_LIT_FLOAT ? KILN_F64
                                             : KILN_BOOL;
    if (kind == KILN_LIT_INT && v == 0)
        v = 0;  /* no -0 integers */
    nd.value = v;
    nd.lit_kind = kind;
    return push(rw, &nd, -1);
}

void kiln_rw_bind(kiln_rw *rw, kiln_value v, kiln_value r)
{
    rw->map[v] = r;
    kiln_node *o = &rw->old->nodes[v];
    kiln_node *n = &rw->g->nodes[r];
    /* a node made to stand for v takes its name (an existing value that
     * v turned out to equal keeps its own) */
    if (o->name && !n->name && rw->owner[r] == v) {
        n->name = o->name;
        o->name = NULL;
    }
}

/* rw->absorbed for `absorbs`, from the old graph (before any move) */
static int find_absorbed(kiln_rw *rw, kiln_rw_absorbs_fn absorbs)
{
    const kiln_graph *old = rw->old;
    rw->absorbed = calloc((size_t)(old->n_nodes ? old->n_nodes : 1), 1);
    if (!rw->absorbed)
        return nomem(rw);
    /* a node with one use appears once among all inputs: its user is the
     * only node that can absorb it */
    for (int u = 0; u < old->n_nodes; u++) {
        const kiln_node *un = &old->nodes[u];
        for (int i = 0; i < un->n_in; i++) {
            kiln_value x = un->in[i];
            if (rw->uses[x] == 1 && absorbs(un, &old->nodes[x]))
                rw->absorbed[x] = 1;
        }
    }
    return 0;
}

/* Old node v copied into the new graph (inputs remapped), the old node
 * left whole for kiln_rw_terms.  Only for nodes without data. */
static kiln_value copy_node(kiln_rw *rw, kiln_value v)
{
    const kiln_node *o = &rw->old->nodes[v];
    kiln_value small[8], *in = small;
    if (o->n_in > 8 && !(in = malloc(sizeof *in * (size_t)o->n_in))) {
        nomem(rw);
        return -1;
    }
    for (int i = 0; i < o->n_in; i++)
        in[i] = rw->map[o->in[i]];
    kiln_value r = kiln_rw_op(rw, o->op, o->attrs, o->n_in, in, v);
    if (in != small)
        free(in);
    return r;
}

int kiln_rw_terms(kiln_rw *rw, kiln_value v, kiln_value **terms, int *n)
{
    const kiln_graph *old = rw->old;
    *terms = NULL;
    *n = 0;
    /* depth-first, left to right, with an explicit stack of old nodes
     * still to expand (a 200,000-step chain is that deep) */
    int cap = old->nodes[v].n_in + 8, top = 0, tcap = cap, nt = 0, any = 0;
    kiln_value *stack = malloc(sizeof *stack * (size_t)cap);
    kiln_value *t = malloc(sizeof *t * (size_t)tcap);
    if (!stack || !t)
        goto nomem;
    for (int i = old->nodes[v].n_in - 1; i >= 0; i--)
        stack[top++] = old->nodes[v].in[i];
    while (top > 0) {
        kiln_value x = stack[--top];
        const kiln_node *xn = &old->nodes[x];
        if (rw->absorbed && rw->absorbed[x]) {
            any = 1;
            if (top + xn->n_in > cap) {
                cap = 2 * (top + xn->n_in);
                kiln_value *p = realloc(stack, sizeof *p * (size_t)cap);
                if (!p)
                    goto nomem;
                stack = p;
            }
            for (int i = xn->n_in - 1; i >= 0; i--)
                stack[top++] = xn->in[i];
            continue;
        }
        if (nt == tcap) {
            tcap *= 2;
            kiln_value *p = realloc(t, sizeof *p * (size_t)tcap);
            if (!p)
                goto nomem;
            t = p;
        }
        t[nt++] = rw->map[x];
    }
    free(stack);
    *terms = t;
    *n = nt;
    return any;
nomem:
    free(stack);
    free(t);
    nomem(rw);
    return -1;
}

void kiln_rw_abort(kiln_rw *rw)
{
    free(rw->absorbed);
    rw->absorbed = NULL;
    kiln_graph_free(rw->g);
    free(rw->map);
    free(rw->uses);
    free(rw->owner);
    rw->g = NULL;
    rw->map = NULL;
    rw->uses = NULL;
    rw->owner = NULL;
}

static void node_free(kiln_node *n)
{
    kiln_ir_node_drop_attrs(n);
    free(n->in);
    free(n->name);
    if (n->blob)
        kiln_blob_unref(n->blob);
    else
        free(n->data);
    free(n->source);
    n->in = NULL;
    n->name = NULL;
    n->data = NULL;
    n->blob = NULL;
    n->source = NULL;
}

int kiln_rw_end(kiln_rw *rw, kiln_graph **out)
{
    kiln_graph *old = rw->old, *g = rw->g;
    *out = NULL;
    /* outputs and gradient records follow their values */
    for (int k = 0; k < old->n_outputs; k++) {
        kiln_value m = rw->map[old->outputs[k].value];
        if (m < 0) {
            kiln_seterr(rw->err, KILN_ERR_ARG,
                        "rewrite: output '%s' was not mapped",
                        old->outputs[k].name);
            goto fail;
        }
        old->outputs[k].value = m;
    }
    for (int k = 0; k < old->n_grads; k++) {
        kiln_grad_rec *r = &old->grads[k];
        r->cost = rw->map[r->cost];
        r->wrt = rw->map[r->wrt];
        r->result = rw->map[r->result];
        if (r->cost < 0 || r->wrt < 0 || r->result < 0) {
            kiln_seterr(rw->err, KILN_ERR_ARG,
                        "rewrite: a gradient record was not mapped");
            goto fail;
        }
    }
    g->outputs = old->outputs;
    g->n_outputs = old->n_outputs;
    g->cap_outputs = old->cap_outputs;
    old->outputs = NULL;
    old->n_outputs = old->cap_outputs = 0;
    g->grads = old->grads;
    g->n_grads = old->n_grads;
    g->cap_grads = old->cap_grads;
    old->grads = NULL;
    old->n_grads = old->cap_grads = 0;
    if (rw->scratch && !rw->scratch->nodes && old->nodes) {
        /* keep the emptied array for the next pass */
        for (int v = 0; v < old->n_nodes; v++)
            node_free(&old->nodes[v]);
        rw->scratch->nodes = old->nodes;
        rw->scratch->cap = old->cap_nodes;
        old->nodes = NULL;
        old->n_nodes = old->cap_nodes = 0;
    }
    kiln_graph_free(old);
    rw->old = NULL;
    free(rw->map);
    free(rw->uses);
    free(rw->owner);
    free(rw->absorbed);
    rw->map = NULL;
    rw->uses = NULL;
    rw->owner = NULL;
    rw->absorbed = NULL;

    /* dead-code elimination: keep what an output or a gradient record
     * reaches, and every input and shared value */
    int n = g->n_nodes;
    char *live = calloc((size_t)(n ? n : 1), 1);
    kiln_value *idx = malloc(sizeof *idx * (size_t)(n ? n : 1));
    if (!live || !idx) {
        free(live);
        free(idx);
        kiln_graph_free(g);
        rw->g = NULL;
        return kiln_seterr(rw->err, KILN_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < g->n_outputs; k++)
        live[g->outputs[k].value] = 1;
    for (int k = 0; k < g->n_grads; k++) {
        live[g->grads[k].cost] = 1;
        live[g->grads[k].wrt] = 1;
        live[g->grads[k].result] = 1;
    }
    for (int v = n - 1; v >= 0; v--) {
        kiln_node *nd = &g->nodes[v];
        if (nd->op == KILN_OP_INPUT || nd->op == KILN_OP_SHARED)
            live[v] = 1;
        if (live[v])
            for (int i = 0; i < nd->n_in; i++)
                live[nd->in[i]] = 1;
    }
    int m = 0;
    for (int v = 0; v < n; v++) {
        if (!live[v]) {
            node_free(&g->nodes[v]);
            idx[v] = -1;
            continue;
        }
        kiln_node *nd = &g->nodes[v];
        for (int i = 0; i < nd->n_in; i++)
            nd->in[i] = idx[nd->in[i]];
        idx[v] = m;
        g->nodes[m++] = *nd;
    }
    g->n_nodes = m;
    for (int k = 0; k < g->n_outputs; k++)
        g->outputs[k].value = idx[g->outputs[k].value];
    for (int k = 0; k < g->n_grads; k++) {
        g->grads[k].cost = idx[g->grads[k].cost];
        g->grads[k].wrt = idx[g->grads[k].wrt];
        g->grads[k].result = idx[g->grads[k].result];
    }
    free(live);
    free(idx);
    rw->g = NULL;
    if (kiln_ir_reindex(g, rw->err)) {
        kiln_graph_free(g);
        return rw->err ? rw->err->code : KILN_ERR_NOMEM;
    }
    *out = g;
    return 0;
fail:
    kiln_graph_free(rw->old);
    rw->old = NULL;
    kiln_rw_abort(rw);
    return rw->err ? rw->err->code : KILN_ERR_ARG;
}

int kiln_rw_map(kiln_graph **gp, const kiln_rw_config *c, kiln_err *err,
                kiln_value (*visit)(kiln_rw *rw, kiln_value v),
                int skip_leaves, kiln_rw_absorbs_fn absorbs)
{
    kiln_rw rw;
    kiln_graph *old = *gp;
    *gp = NULL;
    if (kiln_rw_begin(&rw, old, c, err)) {
        kiln_graph_free(old);
        return err ? err->code : KILN_ERR_NOMEM;
    }
    if (absorbs && find_absorbed(&rw, absorbs)) {
        kiln_graph_free(old);
        kiln_rw_abort(&rw);
        return err && err->code ? err->code : KILN_ERR_NOMEM;
    }
    for (int v = 0; v < old->n_nodes; v++) {
        kiln_value r = -2;
        if (rw.absorbed && rw.absorbed[v])
            r = copy_node(&rw, v);
        else if (!skip_leaves ||
                 kiln_ir_op_info(old->nodes[v].op)->category != KILN_CAT_LEAF)
            r = visit(&rw, v);
        if (r == -2)
            r = kiln_rw_move(&rw, v);
        if (r < 0) {
            kiln_graph_free(old);
            kiln_rw_abort(&rw);
            return err && err->code ? err->code : KILN_ERR_NOMEM;
        }
        kiln_rw_bind(&rw, v, r);
    }
    return kiln_rw_end(&rw, gp);
}
