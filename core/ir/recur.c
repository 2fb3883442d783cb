/*
 * recur.c — node bodies (issue 28): the types of a scan's outputs and
 * canonical bytes of a body for cache keys (the builders are in ir.c)
 * (prefix kiln_ir_).
 *
 * A body is an ordinary graph held by a node's attributes (ir.h,
 * kiln_attrs.body), shared by reference count and never changed once
 * held.  Its inputs (INPUT nodes in declaration order) and outputs (in
 * declaration order) are its signature; the op owning it says what they
 * mean.  For scan: inputs carries, one step of each sequence, args;
 * outputs new carries, per-step outputs.
 */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kiln_ir_body_inputs(const kiln_graph *b, kiln_value *ids, int max)
{
    int n = 0;
    for (int v = 0; b && v < b->n_nodes; v++)
        if (b->nodes[v].op == KILN_OP_INPUT) {
            if (ids && n < max)
                ids[n] = v;
            n++;
        }
    return n;
}

int kiln_ir_scan_n_out(const kiln_attrs *a)
{
    return a && a->body ? a->body->n_outputs : 0;
}

int kiln_ir_n_out(int op, const kiln_attrs *a)
{
    if (op == KILN_OP_SCAN)
        return kiln_ir_scan_n_out(a);
    if (op == KILN_OP_ODE_RK45 || op == KILN_OP_ODE_BDF)
        return a && a->sens == 2 ? 2 : 1;
    if (op == KILN_OP_TOP_K)
        return 2;
    return 1;
}

static const char *vname(const kiln_graph *b, kiln_value v, char *buf,
                         size_t n)
{
    if (b->nodes[v].name)
        return b->nodes[v].name;
    snprintf(buf, n, "#%d", (int)v);
    return buf;
}

/* Body dim bd (body symbols) as a parent dim through map (INT64_MIN:
 * unset); 1 when it could not be mapped. */
static int map_dim(int64_t bd, const int64_t *map, int64_t *out)
{
    if (!KILN_DIM_IS_SYM(bd)) {
        *out = bd;
        return 0;
    }
    int64_t m = map[KILN_SYM_INDEX(bd)];
    if (m == INT64_MIN)
        return 1;
    *out = m;
    return 0;
}

int kiln_ir_scan_types(const kiln_shape_ctx *ctx, const kiln_attrs *a,
                       int n_in, const kiln_type *in, int which,
                       kiln_type *out, kiln_err *err)
{
    const kiln_graph *b = a->body;
    const kiln_graph *pg = ctx->g;
    if (!b)
        return kiln_seterr(err, KILN_ERR_TYPE, "scan: no body (body=NAME)");
    const char *bn = b->name;
    int nc = a->n_carry, ns = a->n_seq;
    if (nc < 0 || ns < 0 || nc + ns > n_in)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "scan: carries=%d and seqs=%d but %d inputs", nc,
                           ns, n_in);
    int nb = kiln_ir_body_inputs(b, NULL, 0);
    if (nb != n_in)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "scan: body '%s' has %d input%s, the scan passes "
                           "%d (carries, sequences, args)", bn, nb,
                           nb == 1 ? "" : "s", n_in);
    if (b->n_outputs < nc || b->n_outputs == 0)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "scan: body '%s' has %d output%s, needs one per "
                           "carry (%d) and at least one", bn, b->n_outputs,
                           b->n_outputs == 1 ? "" : "s", nc);
    for (int v = 0; v < b->n_nodes; v++)
        if (b->nodes[v].op == KILN_OP_SHARED)
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "scan: body '%s' reads shared value '%s': "
                               "pass data to a body as an argument", bn,
                               b->nodes[v].name ? b->nodes[v].name : "?");
    /* T: the sequences' common leading size, or n_steps */
    int64_t T = a->n_steps;
    for (int j = 0; j < ns; j++) {
        const kiln_type *s = &in[nc + j];
        char sb[96];
        if (s->rank < 1)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "scan: sequence %d must have rank >= 1 (steps "
                               "along axis 0), got shape %s", j + 1,
                               kiln_ir_shape_str(pg, s->rank, s->dims, sb,
                                                 sizeof sb));
        int64_t d = s->dims[0];
        if (T < 0 || (KILN_DIM_IS_SYM(T) && d >= 0))
            T = d;
        else if (T >= 0 && d >= 0 && d != T)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "scan: sequence %d has %lld steps, expected "
                               "%lld (the other sequences%s)", j + 1,
                               (long long)d, (long long)T,
                               a->n_steps >= 0 ? ", n_steps" : "");
    }
    if (ns == 0 && T < 0)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "scan: without a sequence, attribute 'n_steps' "
                           "gives the step count");
    int64_t small[16], *map = small;
    if (b->n_symbols > 16 &&
        !(map = malloc(sizeof *map * (size_t)b->n_symbols)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int s = 0; s < b->n_symbols; s++)
        map[s] = INT64_MIN;
    kiln_value ids[64], *bin = ids;
    int rc = 0;
    if (nb > 64 && !(bin = malloc(sizeof *bin * (size_t)nb))) {
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    kiln_ir_body_inputs(b, bin, nb);
    /* bind the body's inputs to what the scan passes */
    for (int i = 0; i < n_in && !rc; i++) {
        const kiln_type *bt = &b->nodes[bin[i]].type;
        kiln_type pt = in[i];
        if (i >= nc && i < nc + ns) {   /* one step of a sequence */
            pt.rank--;
            memmove(pt.dims, pt.dims + 1, sizeof *pt.dims * (size_t)pt.rank);
        }
        int bad = bt->dtype != pt.dtype || bt->rank != pt.rank;
        for (int k = 0; !bad && k < bt->rank; k++) {
            int64_t bd = bt->dims[k], p = pt.dims[k];
            if (!KILN_DIM_IS_SYM(bd) && bd >= 0) {
                bad = p >= 0 && p != bd;
            } else if (KILN_DIM_IS_SYM(bd)) {
                int64_t *m = &map[KILN_SYM_INDEX(bd)];
                if (*m == INT64_MIN || (KILN_DIM_IS_SYM(*m) && p >= 0))
                    *m = p;
                else
                    bad = *m >= 0 && p >= 0 && *m != p;
            }
        }
        if (bad) {
            char x[96], y[96], nb2[32];
            const char *role = i < nc ? "carry" : i < nc + ns ? "sequence step"
                                                              : "argument";
            rc = kiln_seterr(err, KILN_ERR_SHAPE,
                             "scan: body '%s' input '%s' (%s %d) is %s, the "
                             "scan passes %s", bn, vname(b, bin[i], nb2,
                                                         sizeof nb2),
                             role, i < nc ? i + 1 : i < nc + ns ? i - nc + 1
                                                               : i - nc - ns + 1,
                             kiln_ir_type_str(b, bt, x, sizeof x),
                             kiln_ir_type_str(pg, &pt, y, sizeof y));
        }
    }
    /* a carry keeps its type from step to step */
    for (int j = 0; j < nc && !rc; j++) {
        const kiln_type *ti = &b->nodes[bin[j]].type;
        const kiln_type *to = &b->nodes[b->outputs[j].value].type;
        /* static dims must agree now; a symbolic one is checked at each
         * step at run time (core/runtime/recur.c), where every dim is
         * concrete */
        int same = ti->dtype == to->dtype && ti->rank == to->rank;
        for (int k = 0; same && k < ti->rank; k++)
            same = ti->dims[k] == to->dims[k] ||
                   KILN_DIM_IS_SYM(ti->dims[k]) ||
                   KILN_DIM_IS_SYM(to->dims[k]);
        if (!same) {
            char x[96], y[96], nb2[32];
            rc = kiln_seterr(err, KILN_ERR_SHAPE,
                             "scan: body '%s' changes carry '%s' from %s to "
                             "%s (output '%s')", bn,
                             vname(b, bin[j], nb2, sizeof nb2),
                             kiln_ir_type_str(b, ti, x, sizeof x),
                             kiln_ir_type_str(b, to, y, sizeof y),
                             b->outputs[j].name);
        }
    }
    /* per-step outputs: every dim fixed by the inputs */
    for (int o = nc; o < b->n_outputs && !rc; o++) {
        const kiln_type *to = &b->nodes[b->outputs[o].value].type;
        if (to->rank + 1 > KILN_MAX_RANK) {
            rc = kiln_seterr(err, KILN_ERR_SHAPE,
                             "scan: body '%s' output '%s' has rank %d: "
                             "stacked it would exceed %d", bn,
                             b->outputs[o].name, to->rank, KILN_MAX_RANK);
            break;
        }
        for (int k = 0; k < to->rank && !rc; k++) {
            int64_t d;
            if (map_dim(to->dims[k], map, &d)) {
                char x[96];
                rc = kiln_seterr(err, KILN_ERR_SHAPE,
                                 "scan: body '%s' output '%s' is %s: dim %d "
                                 "is not fixed by the body's inputs", bn,
                                 b->outputs[o].name,
                                 kiln_ir_type_str(b, to, x, sizeof x), k);
            }
        }
    }
    if (!rc && which >= 0) {
        if (which >= b->n_outputs) {
            rc = kiln_seterr(err, KILN_ERR_TYPE,
                             "result: index %d, but the scan has %d "
                             "output%s", which, b->n_outputs,
                             b->n_outputs == 1 ? "" : "s");
        } else if (which < nc) {
            *out = in[which];
        } else {
            const kiln_type *to = &b->nodes[b->outputs[which].value].type;
            out->dtype = to->dtype;
            out->rank = to->rank + 1;
            out->dims[0] = T;
            for (int k = 0; k < to->rank; k++)
                map_dim(to->dims[k], map, &out->dims[k + 1]);
        }
    }
out:
    if (map != small)
        free(map);
    if (bin != ids)
        free(bin);
    return rc;
}

/* ---- canonical bytes --------------------------------------------------- */

typedef struct canon {
    unsigned char **buf;
    size_t *len, *cap;
    int fail;
} canon;

static void put(canon *c, const void *p, size_t n)
{
    if (c->fail)
        return;
    if (*c->len + n > *c->cap) {
        size_t nc = *c->cap ? 2 * *c->cap : 256;
        while (nc < *c->len + n)
            nc *= 2;
        unsigned char *q = realloc(*c->buf, nc);
        if (!q) {
            c->fail = 1;
            return;
        }
        *c->buf = q;
        *c->cap = nc;
    }
    memcpy(*c->buf + *c->len, p, n);
    *c->len += n;
}

static void put64(canon *c, int64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    put(c, b, 8);
}

static void put_attrs(canon *c, const kiln_attrs *a)
{
    put64(c, a->has_axes);
    put64(c, a->naxes);
    for (int i = 0; i < a->naxes && i < KILN_MAX_RANK; i++)
        put64(c, a->axes[i]);
    put64(c, a->keepdims);
    put64(c, a->nshape);
    for (int i = 0; i < a->nshape && i < KILN_MAX_RANK; i++)
        put64(c, a->shape[i]);
    put64(c, a->dtype);
    put64(c, a->nidx);
    for (int i = 0; i < a->nidx && i < KILN_MAX_RANK; i++) {
        const kiln_index *x = &a->idx[i];
        put64(c, x->kind);
        put64(c, x->has_start ? x->start : INT64_MIN);
        put64(c, x->has_stop ? x->stop : INT64_MIN);
        put64(c, x->has_step ? x->step : INT64_MIN);
    }
    size_t ml = a->msg ? strlen(a->msg) : 0;
    put64(c, (int64_t)ml);
    put(c, a->msg ? a->msg : "", ml);
    put64(c, a->n_carry);
    put64(c, a->n_seq);
    put64(c, a->n_steps);
    put64(c, a->index);
    put(c, &a->rtol, sizeof a->rtol);
    put(c, &a->atol, sizeof a->atol);
    put64(c, a->max_steps);
    put64(c, a->sens);
    put64(c, a->body != NULL);
}

static int canon_graph(canon *c, const kiln_graph *g, int depth)
{
    if (depth > 64)
        return KILN_ERR_ARG;   /* bodies nest; this deep is a cycle */
    put(c, "kgraph1", 7);
    put64(c, g->n_nodes);
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *n = &g->nodes[v];
        put64(c, n->op);
        put64(c, n->type.dtype);
        put64(c, n->type.rank);
        for (int k = 0; k < n->type.rank; k++)
            put64(c, n->type.dims[k]);   /* symbols by index */
        put64(c, n->weak);
        put64(c, n->n_in);
        for (int i = 0; i < n->n_in; i++)
            put64(c, n->in[i]);
        if (n->op == KILN_OP_LITERAL) {
            put(c, &n->value, sizeof n->value);
            put64(c, n->lit_kind);
        }
        if (n->op == KILN_OP_CONST) {
            put64(c, (int64_t)n->nbytes);
            put(c, n->data, n->nbytes);
        }
        put_attrs(c, n->attrs);
        if (n->attrs->body) {
            int rc = canon_graph(c, n->attrs->body, depth + 1);
            if (rc)
                return rc;
        }
    }
    put64(c, g->n_outputs);
    for (int k = 0; k < g->n_outputs; k++)
        put64(c, g->outputs[k].value);
    put64(c, g->n_symbols);
    return c->fail ? KILN_ERR_NOMEM : 0;
}

int kiln_ir_graph_canon(const kiln_graph *g, unsigned char **buf,
                        size_t *len, size_t *cap)
{
    canon c = {buf, len, cap, 0};
    return canon_graph(&c, g, 0);
}
