/*
 * ir.c — the graph IR: the graph container, the name map and the public
 * builder API of <kiln/graph.h> but kiln_graph_op (composite.c) (prefix
 * kiln_ir_ for the internal helpers declared in ir.h).  Errors, dtypes
 * and type strings are types.c's.
 *
 * Names.  A graph has two namespaces, both kept in one open-addressing
 * hash table (g->map) over the node and output arrays:
 *   - value names: inputs, shared values, constants and named
 *     intermediate values (`NAME = EXPR`); unique across the graph;
 *   - output names (`output NAME`); unique among outputs.
 * A map slot holds -1 (empty), a node id (>= 0, a value name) or -2-k
 * (output k).  The table is kept at most half full and is rebuilt (all
 * names re-inserted) when the graph grows past that, so every insertion
 * and lookup is O(1) expected and building a graph is linear overall.
 *
 * kiln_graph_output(g, NAME, v) also gives v the value name NAME when v
 * has no name yet and NAME is not already a value name, so that
 * `output loglik = sum(...)` lets later statements refer to `loglik`
 * (docs/ir.md, "Names").
 */
#include "ir.h"


#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>

/* ---- small helpers -------------------------------------------------- */

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static void *dupmem(const void *src, size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p && n)
        memcpy(p, src, n);
    return p;
}

/* Words that cannot be value, output or symbol names: statement keywords
 * of the text format and the literal words. */
static const char *const reserved[] = {
    "kiln", "graph", "end", "input", "shared", "const", "output",
    "true", "false", "inf", "nan", NULL
};

/* 1 when `s` is an identifier [A-Za-z_][A-Za-z0-9_]* and not reserved. */
static int valid_name(const char *s)
{
    if (!s || !*s)
        return 0;
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return 0;
    for (const char *p = s + 1; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '_'))
            return 0;
    for (int i = 0; reserved[i]; i++)
        if (strcmp(s, reserved[i]) == 0)
            return 0;
    return 1;
}

static int bad_name(kiln_err *err, const char *what, const char *name)
{
    if (!name)
        return kiln_seterr(err, KILN_ERR_ARG, "%s name is NULL", what);
    for (int i = 0; reserved[i]; i++)
        if (strcmp(name, reserved[i]) == 0)
            return kiln_seterr(err, KILN_ERR_NAME,
                               "'%s' is a reserved word and cannot be a "
                               "name", name);
    return kiln_seterr(err, KILN_ERR_NAME,
                       "invalid %s name '%.200s' (names are letters, digits "
                       "and '_', not starting with a digit)", what, name);
}

/* ---- the name map --------------------------------------------------- */

#define MAP_EMPTY ((int32_t)-1)
#define MAP_OUT(k) ((int32_t)(-2 - (k)))
#define MAP_OUT_INDEX(e) ((int)(-2 - (e)))

static uint64_t name_hash(const char *s, int is_output)
{
    /* FNV-1a, with the namespace mixed into the seed */
    uint64_t h = 1469598103934665603ULL;
    if (is_output)
        h ^= 0x9e3779b97f4a7c15ULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= 1099511628211ULL;
    }
    h ^= h >> 31;
    return h;
}

static const char *entry_name(const kiln_graph *g, int32_t e)
{
    return e >= 0 ? g->nodes[e].name : g->outputs[MAP_OUT_INDEX(e)].name;
}

static int32_t map_find(const kiln_graph *g, const char *name, int is_output)
{
    if (!g->map_cap || !name)
        return MAP_EMPTY;
    size_t mask = (size_t)g->map_cap - 1;
    size_t i = (size_t)name_hash(name, is_output) & mask;
    for (;;) {
        int32_t e = g->map[i];
        if (e == MAP_EMPTY)
            return MAP_EMPTY;
        if ((e < 0) == (is_output != 0) && strcmp(entry_name(g, e), name) == 0)
            return e;
        i = (i + 1) & mask;
    }
}

/* Insert entry e (its name must not be in the map yet); the capacity
 * must have been reserved. */
static void map_put(int32_t *map, int cap, const kiln_graph *g, int32_t e)
{
    size_t mask = (size_t)cap - 1;
    size_t i = (size_t)name_hash(entry_name(g, e), e < 0) & mask;
    while (map[i] != MAP_EMPTY)
        i = (i + 1) & mask;
    map[i] = e;
}

/* Make room for one more name: the table holds at most n_nodes +
 * n_outputs names, and is kept at most half full. */
static int map_reserve(kiln_graph *g, int extra_nodes, int extra_outputs,
                       kiln_err *err)
{
    int64_t need = (int64_t)g->n_nodes + extra_nodes + g->n_outputs +
                   extra_outputs;
    if (2 * need <= g->map_cap)
        return 0;
    int64_t cap = 64;
    while (cap < 4 * need)
        cap *= 2;
    if (cap > (int64_t)INT_MAX / 2 + 1)
        return kiln_seterr(err, KILN_ERR_NOMEM, "graph too large");
    int32_t *map = malloc(sizeof *map * (size_t)cap);
    if (!map)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < cap; i++)
        map[i] = MAP_EMPTY;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].name)
            map_put(map, (int)cap, g, i);
    for (int k = 0; k < g->n_outputs; k++)
        map_put(map, (int)cap, g, MAP_OUT(k));
    free(g->map);
    g->map = map;
    g->map_cap = (int)cap;
    return 0;
}

/* ---- graph ---------------------------------------------------------- */

kiln_graph *kiln_graph_new(const char *name, kiln_err *err)
{
    kiln_graph *g = calloc(1, sizeof *g);
    if (!g) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    g->part_total = -1;
    g->name = dupstr(name ? name : "main");
    if (!g->name) {
        free(g);
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return g;
}

const kiln_attrs kiln_ir_no_attrs = {.dtype = -1};

int kiln_ir_attrs_empty(const kiln_attrs *a)
{
    return !a->has_axes && a->naxes == 0 && !a->keepdims &&
           a->nshape == 0 && a->dtype == -1 && a->nidx == 0 && !a->msg &&
           !a->linalg && !a->body && !a->n_carry && !a->n_seq &&
           !a->n_steps && !a->index;
}

kiln_graph *kiln_ir_body_ref(kiln_graph *b)
{
    if (b)
        __atomic_add_fetch(&b->body_refs, 1, __ATOMIC_RELAXED);
    return b;
}

int kiln_ir_node_set_attrs(kiln_node *n, const kiln_attrs *a)
{
    const kiln_attrs *na = &kiln_ir_no_attrs;
    if (a && !kiln_ir_attrs_empty(a)) {
        kiln_attrs *c = malloc(sizeof *c);
        if (!c)
            return KILN_ERR_NOMEM;
        *c = *a;
        kiln_ir_body_ref(c->body);
        na = c;
    }
    kiln_ir_node_drop_attrs(n);
    n->attrs = na;
    return 0;
}

int kiln_ir_node_set_body(kiln_graph *g, kiln_value v, kiln_graph *body,
                          kiln_err *err)
{
    if (!g || v < 0 || v >= g->n_nodes || !body)
        return kiln_seterr(err, KILN_ERR_ARG, "set body: bad node");
    kiln_attrs a = *g->nodes[v].attrs;
    a.body = body;
    /* set_attrs takes the new body's reference before it drops the old
     * attributes (and with them the old body's) */
    if (kiln_ir_node_set_attrs(&g->nodes[v], &a))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    return 0;
}

void kiln_ir_node_drop_attrs(kiln_node *n)
{
    if (n->attrs && n->attrs != &kiln_ir_no_attrs) {
        kiln_graph_free(n->attrs->body);   /* drops one reference */
        free((kiln_attrs *)n->attrs);
    }
    n->attrs = &kiln_ir_no_attrs;
}

kiln_blob *kiln_blob_new(void (*release)(void *ctx), void *ctx)
{
    kiln_blob *b = malloc(sizeof *b);
    if (!b)
        return NULL;
    b->refs = 1;
    b->release = release;
    b->ctx = ctx;
    return b;
}

kiln_blob *kiln_blob_ref(kiln_blob *b)
{
    if (b)
        __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
    return b;
}

void kiln_blob_unref(kiln_blob *b)
{
    if (!b || __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    if (b->release)
        b->release(b->ctx);
    free(b);
}

static void node_release(kiln_node *n)
{
    kiln_ir_node_drop_attrs(n);
    free(n->in);
    free(n->name);
    if (n->blob)
        kiln_blob_unref(n->blob);   /* borrowed data: the blob's */
    else
        free(n->data);
    free(n->source);
}

void kiln_graph_free(kiln_graph *g)
{
    if (!g)
        return;
    /* a body held by other nodes too: drop this holder's reference */
    if (__atomic_load_n(&g->body_refs, __ATOMIC_ACQUIRE) > 0 &&
        __atomic_sub_fetch(&g->body_refs, 1, __ATOMIC_ACQ_REL) >= 0)
        return;
    for (int i = 0; i < g->n_nodes; i++)
        node_release(&g->nodes[i]);
    free(g->nodes);
    for (int k = 0; k < g->n_outputs; k++)
        free(g->outputs[k].name);
    free(g->outputs);
    for (int s = 0; s < g->n_symbols; s++)
        free(g->symbols[s]);
    free(g->symbols);
    free(g->grads);
    for (int k = 0; k < g->n_params; k++)
        free(g->params[k].name);
    free(g->params);
    free(g->map);
    free(g->part_axis);
    free(g->name);
    free(g);
}

const char *kiln_graph_name(const kiln_graph *g)
{
    return g ? g->name : NULL;
}

int kiln_graph_n_nodes(const kiln_graph *g)
{
    return g ? g->n_nodes : 0;
}

static int base_symbol(const char *name, size_t len, void *arg)
{
    char buf[128];
    if (len >= sizeof buf)
        return 0;
    memcpy(buf, name, len);
    buf[len] = '\0';
    return kiln_graph_symbol(arg, buf) == KILN_DIM_UNKNOWN;
}

int64_t kiln_graph_symbol(kiln_graph *g, const char *name)
{
    if (!g)
        return KILN_DIM_UNKNOWN;
    if (!name)
        return kiln_ir_fresh_symbol(g);
    /* a derived dim (core/ir/dimexpr.c): canonical text, and each name
     * it uses a symbol too */
    char canon[256];
    if (kiln_ir_dim_is_expr(name)) {
        size_t n = kiln_ir_dimexpr_canon(name, strlen(name), canon,
                                         sizeof canon);
        if (n > 0 && n < sizeof canon) {
            name = canon;
            if (kiln_ir_dimexpr_names(canon, base_symbol, g))
                return KILN_DIM_UNKNOWN;
        }
    }
    for (int s = 0; s < g->n_symbols; s++)
        if (g->symbols[s] && strcmp(g->symbols[s], name) == 0)
            return KILN_SYM_ID(s);
    char *copy = dupstr(name);
    if (!copy)
        return KILN_DIM_UNKNOWN;
    int64_t id = kiln_ir_fresh_symbol(g);
    if (id == KILN_DIM_UNKNOWN) {
        free(copy);
        return KILN_DIM_UNKNOWN;
    }
    g->symbols[KILN_SYM_INDEX(id)] = copy;
    return id;
}

/* Append *nd, taking ownership of its pointers (they are freed on
 * failure too).  The caller has checked that the name is free. */
static kiln_value push_node(kiln_graph *g, kiln_node *nd, kiln_err *err)
{
    if (g->n_nodes >= INT32_MAX / 4) {
        node_release(nd);
        kiln_seterr(err, KILN_ERR_NOMEM, "graph too large");
        return -1;
    }
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? 2 * g->cap_nodes : 16;
        kiln_node *p = realloc(g->nodes, sizeof *p * (size_t)cap);
        if (!p) {
            node_release(nd);
            kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            return -1;
        }
        g->nodes = p;
        g->cap_nodes = cap;
    }
    if (nd->name && map_reserve(g, 1, 0, err)) {
        node_release(nd);
        return -1;
    }
    kiln_value id = g->n_nodes++;
    g->nodes[id] = *nd;
    if (nd->name)
        map_put(g->map, g->map_cap, g, id);
    return id;
}

void kiln_ir_truncate(kiln_graph *g, int n)
{
    while (g->n_nodes > n && !g->nodes[g->n_nodes - 1].name)
        node_release(&g->nodes[--g->n_nodes]);
}

kiln_value kiln_ir_append(kiln_graph *g, const kiln_node *proto, kiln_err *err)
{
    if (!g || !proto) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_ir_append: NULL argument");
        return -1;
    }
    if (proto->op < 0 || proto->op >= KILN_OP_COUNT) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_ir_append: bad op %d",
                    proto->op);
        return -1;
    }
    if (proto->n_in < 0 || (proto->n_in > 0 && !proto->in)) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_ir_append: bad inputs");
        return -1;
    }
    for (int i = 0; i < proto->n_in; i++)
        if (proto->in[i] < 0 || proto->in[i] >= g->n_nodes) {
            kiln_seterr(err, KILN_ERR_ARG,
                        "kiln_ir_append: input %d (id %d) is not an earlier "
                        "node", i + 1, (int)proto->in[i]);
            return -1;
        }
    if (proto->name && map_find(g, proto->name, 0) != MAP_EMPTY) {
        kiln_seterr(err, KILN_ERR_NAME, "duplicate name '%s'", proto->name);
        return -1;
    }
    kiln_node nd = *proto;
    nd.in = NULL;
    nd.name = NULL;
    nd.data = NULL;
    nd.blob = NULL;
    nd.source = NULL;
    nd.attrs = NULL;
    int fail = kiln_ir_node_set_attrs(&nd, proto->attrs) != 0;
    if (proto->n_in > 0 &&
        !(nd.in = dupmem(proto->in, sizeof *nd.in * (size_t)proto->n_in)))
        fail = 1;
    if (proto->name && !(nd.name = dupstr(proto->name)))
        fail = 1;
    if (proto->blob)                /* borrowed: share, never copy */
        nd.data = proto->data, nd.blob = kiln_blob_ref(proto->blob);
    else if (proto->data && !(nd.data = dupmem(proto->data, proto->nbytes)))
        fail = 1;
    if (proto->source && !(nd.source = dupstr(proto->source)))
        fail = 1;
    if (fail) {
        node_release(&nd);
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return -1;
    }
    return push_node(g, &nd, err);
}

int kiln_ir_reindex(kiln_graph *g, kiln_err *err)
{
    free(g->map);
    g->map = NULL;
    g->map_cap = 0;
    return map_reserve(g, 0, 0, err);
}

void kiln_ir_stamp_lines(kiln_graph *g, int from, int line)
{
    for (int i = from < 0 ? 0 : from; g && i < g->n_nodes; i++)
        if (!g->nodes[i].line)
            g->nodes[i].line = line;
}

int kiln_ir_copy_symbols(kiln_graph *c, const kiln_graph *g)
{
    if (!g->n_symbols)
        return 0;
    c->symbols = calloc((size_t)g->n_symbols, sizeof *c->symbols);
    if (!c->symbols)
        return KILN_ERR_NOMEM;
    c->cap_symbols = g->n_symbols;
    for (int s = 0; s < g->n_symbols; s++) {
        c->n_symbols = s + 1;
        if (g->symbols[s] && !(c->symbols[s] = dupstr(g->symbols[s])))
            return KILN_ERR_NOMEM;
    }
    return 0;
}

kiln_graph *kiln_ir_clone(const kiln_graph *g, kiln_err *err)
{
    if (!g) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_ir_clone: NULL graph");
        return NULL;
    }
    kiln_graph *c = kiln_graph_new(g->name, err);
    if (!c)
        return NULL;
    if (g->n_nodes) {
        c->nodes = calloc((size_t)g->n_nodes, sizeof *c->nodes);
        if (!c->nodes)
            goto nomem;
        c->cap_nodes = g->n_nodes;
        for (int i = 0; i < g->n_nodes; i++) {
            const kiln_node *s = &g->nodes[i];
            kiln_node *d = &c->nodes[i];
            *d = *s;
            d->in = NULL;
            d->name = NULL;
            d->data = NULL;
            d->blob = NULL;
            d->source = NULL;
            d->attrs = &kiln_ir_no_attrs;
            c->n_nodes = i + 1;
            if (s->attrs != &kiln_ir_no_attrs &&
                kiln_ir_node_set_attrs(d, s->attrs))
                goto nomem;
            if (s->n_in > 0 &&
                !(d->in = dupmem(s->in, sizeof *d->in * (size_t)s->n_in)))
                goto nomem;
            if (s->name && !(d->name = dupstr(s->name)))
                goto nomem;
            if (s->blob)            /* borrowed: share, never copy */
                d->data = s->data, d->blob = kiln_blob_ref(s->blob);
            else if (s->data && !(d->data = dupmem(s->data, s->nbytes)))
                goto nomem;
            if (s->source && !(d->source = dupstr(s->source)))
                goto nomem;
        }
    }
    if (g->n_outputs) {
        c->outputs = calloc((size_t)g->n_outputs, sizeof *c->outputs);
        if (!c->outputs)
            goto nomem;
        c->cap_outputs = g->n_outputs;
        for (int k = 0; k < g->n_outputs; k++) {
            c->outputs[k].value = g->outputs[k].value;
            c->outputs[k].kind = g->outputs[k].kind;
            c->outputs[k].name = dupstr(g->outputs[k].name);
            c->n_outputs = k + 1;
            if (!c->outputs[k].name)
                goto nomem;
        }
    }
    if (kiln_ir_copy_symbols(c, g))
        goto nomem;
    if (g->n_grads) {
        c->grads = dupmem(g->grads, sizeof *c->grads * (size_t)g->n_grads);
        if (!c->grads)
            goto nomem;
        c->n_grads = c->cap_grads = g->n_grads;
    }
    if (g->n_params) {
        c->params = calloc((size_t)g->n_params, sizeof *c->params);
        if (!c->params)
            goto nomem;
        c->cap_params = g->n_params;
        for (int k = 0; k < g->n_params; k++) {
            c->params[k] = g->params[k];
            c->params[k].name = dupstr(g->params[k].name);
            c->n_params = k + 1;
            if (!c->params[k].name)
                goto nomem;
        }
    }
    if (g->map_cap) {
        c->map = dupmem(g->map, sizeof *c->map * (size_t)g->map_cap);
        if (!c->map)
            goto nomem;
        c->map_cap = g->map_cap;
    }
    if (g->part_axis && !(c->part_axis = dupstr(g->part_axis)))
        goto nomem;
    c->part_sym = g->part_sym;
    c->part_k = g->part_k;
    c->part_n = g->part_n;
    c->part_total = g->part_total;
    c->read_k = g->read_k;
    c->read_n = g->read_n;
    c->read_sym = g->read_sym;
    return c;
nomem:
    kiln_graph_free(c);
    kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    return NULL;
}

/* ---- declarations --------------------------------------------------- */

static void attrs_default(kiln_attrs *a)
{
    memset(a, 0, sizeof *a);
    a->dtype = -1;
}

/* Common checks of input/shared/const declarations.  `static_only`
 * refuses symbolic and unknown dims (constants). */
static int check_decl(kiln_graph *g, const char *what, const char *name,
                      kiln_dtype dt, int rank, const int64_t *dims,
                      int static_only, kiln_err *err)
{
    if (!g)
        return kiln_seterr(err, KILN_ERR_ARG, "%s: NULL graph", what);
    if (!valid_name(name))
        return bad_name(err, what, name);
    if (map_find(g, name, 0) != MAP_EMPTY)
        return kiln_seterr(err, KILN_ERR_NAME, "duplicate name '%s'", name);
    if ((unsigned)dt >= KILN_NDTYPES)
        return kiln_seterr(err, KILN_ERR_ARG, "%s '%s': bad dtype %d", what,
                           name, (int)dt);
    if (rank < 0 || rank > KILN_MAX_RANK)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "%s '%s': rank %d is out of range (0 to %d)", what,
                           name, rank, KILN_MAX_RANK);
    if (rank > 0 && !dims)
        return kiln_seterr(err, KILN_ERR_ARG, "%s '%s': dims are NULL", what,
                           name);
    for (int i = 0; i < rank; i++) {
        int64_t d = dims[i];
        if (d >= 0)
            continue;
        if (static_only)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "%s '%s': dim %d must be static (a constant "
                               "has a known shape)", what, name, i);
        if (d == KILN_DIM_UNKNOWN || kiln_ir_is_symbol(g, d))
            continue;
        return kiln_seterr(err, KILN_ERR_ARG,
                           "%s '%s': dim %d (%lld) is neither a size, "
                           "KILN_DIM_UNKNOWN nor a symbol of this graph",
                           what, name, i, (long long)d);
    }
    return 0;
}

/* Fill a leaf node's type; each KILN_DIM_UNKNOWN becomes a fresh
 * anonymous symbol. */
static int decl_type(kiln_graph *g, kiln_dtype dt, int rank,
                     const int64_t *dims, kiln_type *t, kiln_err *err)
{
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++) {
        int64_t d = dims[i];
        if (d == KILN_DIM_UNKNOWN) {
            d = kiln_ir_fresh_symbol(g);
            if (d == KILN_DIM_UNKNOWN)
                return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        }
        t->dims[i] = d;
    }
    return 0;
}

static kiln_value leaf(kiln_graph *g, int op, const char *name,
                       const kiln_type *t, void *data, size_t nbytes,
                       const int64_t *vshape, kiln_err *err)
{
    kiln_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = op;
    nd.type = *t;
    nd.attrs = &kiln_ir_no_attrs;
    nd.data = data;
    nd.nbytes = nbytes;
    if (vshape)
        memcpy(nd.vshape, vshape, sizeof nd.vshape);
    nd.name = dupstr(name);
    if (!nd.name) {
        free(data);
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return -1;
    }
    return push_node(g, &nd, err);
}

kiln_value kiln_graph_input(kiln_graph *g, const char *name, kiln_dtype dt,
                            int rank, const int64_t *dims, kiln_err *err)
{
    kiln_type t;
    if (check_decl(g, "input", name, dt, rank, dims, 0, err) ||
        decl_type(g, dt, rank, dims, &t, err))
        return -1;
    return leaf(g, KILN_OP_INPUT, name, &t, NULL, 0, NULL, err);
}

/* Does `value` fit a shared value `name` declared (dt, rank, dims)?  Its
 * dtype must equal dt, its shape fit dims (a symbol takes the value's
 * size, the same within the value and across the shared values already
 * bound).  Returns 0 with *nbytes set, or an error code with err set. */
static int shared_value_check(const kiln_graph *g, const char *name,
                              kiln_dtype dt, int rank, const int64_t *dims,
                              const kiln_tensor *value, size_t *nbytes,
                              kiln_err *err)
{
    char s1[256], s2[256];
    if (value->dtype != dt)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "shared '%s': value has dtype %s, declared %s",
                           name, kiln_dtype_name(value->dtype),
                           kiln_dtype_name(dt));
    if (value->rank < 0 || value->rank > KILN_MAX_RANK)
        return kiln_seterr(err, KILN_ERR_ARG, "shared '%s': value has a "
                           "bad rank %d", name, value->rank);
    int bad = value->rank != rank;
    for (int i = 0; !bad && i < rank; i++) {
        if (value->shape[i] < 0)
            bad = 1;
        else if (dims[i] >= 0 && dims[i] != value->shape[i])
            bad = 1;
    }
    if (bad)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "shared '%s': value has shape %s, declared %s",
                           name,
                           kiln_ir_shape_str(g, value->rank, value->shape,
                                             s1, sizeof s1),
                           kiln_ir_shape_str(g, rank, dims, s2,
                                             sizeof s2));
    /* a symbol takes the value's size, the same everywhere: within
     * this value and across the shared values already bound */
    for (int i = 0; i < rank; i++) {
        if (!KILN_DIM_IS_SYM(dims[i]))
            continue;
        for (int j = 0; j < i; j++)
            if (dims[j] == dims[i] && value->shape[j] != value->shape[i])
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "shared '%s': value has shape %s but "
                                   "declared %s needs dims %d and %d "
                                   "equal", name,
                                   kiln_ir_shape_str(g, value->rank,
                                                     value->shape, s1,
                                                     sizeof s1),
                                   kiln_ir_shape_str(g, rank, dims, s2,
                                                     sizeof s2), j, i),
                       -1;
        for (int n = 0; n < g->n_nodes; n++) {
            const kiln_node *o = &g->nodes[n];
            if (o->op != KILN_OP_SHARED || !o->data)
                continue;
            for (int k = 0; k < o->type.rank; k++)
                if (o->type.dims[k] == dims[i] &&
                    o->vshape[k] != value->shape[i]) {
                    char d[128];
                    return kiln_seterr(
                               err, KILN_ERR_SHAPE,
                               "shared '%s': value has shape %s but "
                               "symbol '%s' is %lld in shared '%s'",
                               name,
                               kiln_ir_shape_str(g, value->rank,
                                                 value->shape, s1,
                                                 sizeof s1),
                               kiln_ir_dim_str(g, dims[i], d, sizeof d),
                               (long long)o->vshape[k], o->name);
                }
        }
    }
    int64_t numel = kiln_shape_numel(rank, value->shape);
    size_t es = kiln_dtype_size(dt);
    if (numel < 0 || (uint64_t)numel > SIZE_MAX / es)
        return kiln_seterr(err, KILN_ERR_ARG, "shared '%s': value is too "
                           "large", name);
    *nbytes = (size_t)numel * es;
    if (*nbytes && !value->data)
        return kiln_seterr(err, KILN_ERR_ARG, "shared '%s': value has no "
                           "data", name);
    return 0;
}

kiln_value kiln_graph_shared(kiln_graph *g, const char *name, kiln_dtype dt,
                             int rank, const int64_t *dims,
                             const kiln_tensor *value, kiln_err *err)
{
    if (check_decl(g, "shared", name, dt, rank, dims, 0, err))
        return -1;
    int64_t vshape[KILN_MAX_RANK] = {0};
    void *data = NULL;
    size_t nbytes = 0;
    if (value) {
        if (shared_value_check(g, name, dt, rank, dims, value, &nbytes, err))
            return -1;
        for (int i = 0; i < rank; i++)
            vshape[i] = value->shape[i];
    } else {
        for (int i = 0; i < rank; i++)
            vshape[i] = dims[i] >= 0 ? dims[i] : -1;
    }
    kiln_type t;
    if (decl_type(g, dt, rank, dims, &t, err))
        return -1;
    if (value) {
        data = dupmem(value->data, nbytes);
        if (!data)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory"), -1;
    }
    return leaf(g, KILN_OP_SHARED, name, &t, data, nbytes, vshape, err);
}

/* kiln_ir_bind_shared (borrow 0: a copy) and kiln_ir_bind_shared_ref
 * (borrow 1: value's bytes in place, owned by blob b or the caller) */
static int bind_shared(kiln_graph *g, kiln_value v, const kiln_tensor *value,
                       int borrow, kiln_blob *b, int whole, kiln_err *err)
{
    if (!g || !value || v < 0 || v >= g->n_nodes ||
        g->nodes[v].op != KILN_OP_SHARED || g->nodes[v].data)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_ir_bind_shared%s: not a "
                           "shared value without a value",
                           borrow ? "_ref" : "");
    kiln_node *n = &g->nodes[v];
    size_t nbytes = 0;
    /* a part of a graph (issue 30) binds only its rows */
    kiln_tensor part;
    int rc = whole ? kiln_ir_part_bind_slice(g, n, value, &part, err) : 0;
    if (rc)
        return rc;
    if (whole && part.data) {
        rc = bind_shared(g, v, &part, 0, NULL, 0, err);
        free(part.data);
        if (!rc) {
            /* the whole value's digest (kiln_graph_data_digest) */
            n->has_wdigest = 1;
            n->wdigest = kiln_ir_part_value_digest(value);
        }
        return rc;
    }
    rc = shared_value_check(g, n->name, n->type.dtype, n->type.rank,
                                n->type.dims, value, &nbytes, err);
    if (rc)
        return rc;
    /* zero bytes: nothing to borrow, an owned empty buffer */
    kiln_blob *own = NULL;
    if (borrow && nbytes &&
        !(own = b ? kiln_blob_ref(b) : kiln_blob_new(NULL, NULL)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    void *data = own ? value->data : dupmem(value->data, nbytes);
    if (!data)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    n->data = data;
    n->blob = own;
    n->nbytes = nbytes;
    memset(n->vshape, 0, sizeof n->vshape);
    for (int i = 0; i < n->type.rank; i++)
        n->vshape[i] = value->shape[i];
    return 0;
}

int kiln_ir_bind_shared(kiln_graph *g, kiln_value v, const kiln_tensor *value,
                        kiln_err *err)
{
    return bind_shared(g, v, value, 0, NULL, 1, err);
}

int kiln_ir_bind_shared_ref(kiln_graph *g, kiln_value v,
                            const kiln_tensor *value, kiln_blob *b,
                            kiln_err *err)
{
    return bind_shared(g, v, value, 1, b, 1, err);
}

kiln_value kiln_graph_shared_ref(kiln_graph *g, const char *name,
                                 kiln_dtype dt, int rank, const int64_t *dims,
                                 const kiln_tensor *value, kiln_err *err)
{
    if (check_decl(g, "shared", name, dt, rank, dims, 0, err))
        return -1;
    if (!value)
        return kiln_seterr(err, KILN_ERR_ARG, "shared '%s': "
                           "kiln_graph_shared_ref needs a value", name), -1;
    size_t nbytes = 0;
    if (shared_value_check(g, name, dt, rank, dims, value, &nbytes, err))
        return -1;
    if (!nbytes)        /* nothing to borrow: an owned empty buffer */
        return kiln_graph_shared(g, name, dt, rank, dims, value, err);
    kiln_type t;
    if (decl_type(g, dt, rank, dims, &t, err))
        return -1;
    kiln_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = KILN_OP_SHARED;
    nd.type = t;
    nd.attrs = &kiln_ir_no_attrs;
    nd.data = value->data;
    nd.nbytes = nbytes;
    for (int i = 0; i < rank; i++)
        nd.vshape[i] = value->shape[i];
    nd.name = dupstr(name);
    nd.blob = kiln_blob_new(NULL, NULL);
    if (!nd.name || !nd.blob) {
        free(nd.name);
        free(nd.blob);
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory"), -1;
    }
    return push_node(g, &nd, err);     /* releases nd on failure */
}

kiln_value kiln_graph_const(kiln_graph *g, const char *name, kiln_dtype dt,
                            int rank, const int64_t *dims, const void *data,
                            kiln_err *err)
{
    if (check_decl(g, "const", name, dt, rank, dims, 1, err))
        return -1;
    int64_t numel = kiln_shape_numel(rank, dims);
    size_t es = kiln_dtype_size(dt);
    if (numel < 0 || (uint64_t)numel > SIZE_MAX / es)
        return kiln_seterr(err, KILN_ERR_ARG, "const '%s': shape is too "
                           "large", name), -1;
    size_t nbytes = (size_t)numel * es;
    if (nbytes && !data)
        return kiln_seterr(err, KILN_ERR_ARG, "const '%s': data is NULL",
                           name), -1;
    if (dt == KILN_BOOL)
        for (size_t i = 0; i < nbytes; i++)
            if (((const unsigned char *)data)[i] > 1)
                return kiln_seterr(err, KILN_ERR_ARG,
                                   "const '%s': bool element %zu is %u (must "
                                   "be 0 or 1)", name, i,
                                   ((const unsigned char *)data)[i]), -1;
    kiln_type t;
    if (decl_type(g, dt, rank, dims, &t, err))
        return -1;
    void *copy = dupmem(data, nbytes);
    if (!copy)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory"), -1;
    int64_t vshape[KILN_MAX_RANK] = {0};
    for (int i = 0; i < rank; i++)
        vshape[i] = dims[i];
    return leaf(g, KILN_OP_CONST, name, &t, copy, nbytes, vshape, err);
}

/* Integers up to 2^53 are exact in the double that holds a literal. */
#define LIT_INT_MAX 9007199254740992.0

kiln_value kiln_graph_literal(kiln_graph *g, double value,
                              kiln_literal_kind kind, kiln_err *err)
{
    if (!g)
        return kiln_seterr(err, KILN_ERR_ARG, "literal: NULL graph"), -1;
    kiln_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = KILN_OP_LITERAL;
    nd.attrs = &kiln_ir_no_attrs;
    nd.weak = 1;
    switch (kind) {
    case KILN_LIT_INT:
        if (!isfinite(value) || value != floor(value) ||
            fabs(value) > LIT_INT_MAX)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "integer literal %.17g is not an integer of at "
                               "most 2^53 in magnitude", value), -1;
        nd.type.dtype = KILN_I64;
        if (value == 0)
            value = 0; /* no -0 integers */
        break;
    case KILN_LIT_FLOAT:
        nd.type.dtype = KILN_F64;
        break;
    case KILN_LIT_BOOL:
        if (value != 0 && value != 1)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "bool literal must be 0 or 1, got %.17g",
                               value), -1;
        nd.type.dtype = KILN_BOOL;
        break;
    default:
        return kiln_seterr(err, KILN_ERR_ARG, "bad literal kind %d",
                           (int)kind), -1;
    }
    nd.value = value;
    nd.lit_kind = (int)kind;
    return push_node(g, &nd, err);
}

/* ---- ops ------------------------------------------------------------ */

/* Axis attributes that name one axis of input 1 (take, the advanced
 * set/inc, join) or of the result (stack) are stored non-negative, so
 * that a graph has one form whichever way it was written. */
static void normalize_axis(int op, kiln_attrs *a, const kiln_type *x)
{
    int r;
    switch (op) {
    case KILN_OP_JOIN: case KILN_OP_TAKE:
    case KILN_OP_ADVANCED_SET_SUBTENSOR: case KILN_OP_ADVANCED_INC_SUBTENSOR:
        r = x->rank;
        break;
    case KILN_OP_STACK:
        r = x->rank + 1;
        break;
    default:
        return;
    }
    if (!a->has_axes) {
        a->has_axes = 1;
        a->naxes = 1;
        a->axes[0] = 0;
    }
    if (a->axes[0] < 0 && a->axes[0] >= -r)
        a->axes[0] += r;
}

/* Check inputs, infer the type of `op` and append the node. */
static kiln_value build(kiln_graph *g, int op, int n_in, const kiln_value *in,
                        kiln_attrs *attrs, kiln_err *err)
{
    const kiln_op_info *info = kiln_ir_op_info(op);
    const char *opn = info ? info->name : "?";
    if (n_in < 0 || (n_in > 0 && !in))
        return kiln_seterr(err, KILN_ERR_ARG, "%s: bad input list", opn), -1;
    for (int i = 0; i < n_in; i++)
        if (in[i] < 0 || in[i] >= g->n_nodes)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "%s: input %d (id %d) is not a value of this "
                               "graph", opn, i + 1, (int)in[i]), -1;
    kiln_type tbuf[8];
    int wbuf[8];
    kiln_type *types = tbuf;
    int *weak = wbuf;
    if (n_in > 8) {
        types = malloc(sizeof *types * (size_t)n_in);
        weak = malloc(sizeof *weak * (size_t)n_in);
        if (!types || !weak) {
            free(types);
            free(weak);
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory"), -1;
        }
    }
    for (int i = 0; i < n_in; i++) {
        types[i] = g->nodes[in[i]].type;
        weak[i] = g->nodes[in[i]].weak;
    }
    kiln_shape_ctx ctx = { g, NULL };
    kiln_node nd;
    memset(&nd, 0, sizeof nd);
    int rc = kiln_ir_infer(&ctx, op, attrs, n_in, types, weak, &nd.type,
                           &nd.weak, err);
    if (types != tbuf) {
        free(types);
        free(weak);
    }
    if (rc)
        return -1;
    /* inference makes fresh symbols; one that could not be allocated
     * shows as KILN_DIM_UNKNOWN */
    for (int i = 0; i < nd.type.rank; i++)
        if (nd.type.dims[i] == KILN_DIM_UNKNOWN)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory"), -1;
    if (n_in > 0)
        normalize_axis(op, attrs, &g->nodes[in[0]].type);
    nd.op = op;
    nd.attrs = &kiln_ir_no_attrs;
    if (kiln_ir_node_set_attrs(&nd, attrs))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory"), -1;
    nd.n_in = n_in;
    if (n_in > 0) {
        nd.in = dupmem(in, sizeof *in * (size_t)n_in);
        if (!nd.in) {
            kiln_ir_node_drop_attrs(&nd);
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory"), -1;
        }
    }
    return push_node(g, &nd, err);
}

kiln_value kiln_ir_build(kiln_graph *g, int op, int n_in,
                         const kiln_value *in, kiln_attrs *attrs,
                         kiln_err *err)
{
    if (!g)
        return kiln_seterr(err, KILN_ERR_ARG, "NULL graph"), -1;
    return build(g, op, n_in, in, attrs, err);
}

kiln_value kiln_ir_graph_op(kiln_graph *g, int o, const char *op, int n_in,
                           const kiln_value *in, const kiln_attr *attrs,
                           int n_attrs, kiln_err *err)
{
    if (o == KILN_OP_SCAN || o == KILN_OP_RESULT)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "%s: build it with %s", op,
                           o == KILN_OP_SCAN ? "kiln_graph_scan (a body)"
                                             : "kiln_graph_result"), -1;
    if (o == KILN_OP_SUBTENSOR || o == KILN_OP_SET_SUBTENSOR ||
        o == KILN_OP_INC_SUBTENSOR)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "%s: needs an index; build it with %s", op,
                           o == KILN_OP_SUBTENSOR ? "kiln_graph_subtensor"
                                                  : "kiln_graph_set_subtensor"),
               -1;
    if (n_attrs < 0)
        return kiln_seterr(err, KILN_ERR_ARG, "%s: bad attribute count", op),
               -1;
    kiln_attrs a;
    if (kiln_ir_parse_attrs(o, attrs, n_attrs, &a, err))
        return -1;
    return build(g, o, n_in, in, &a, err);
}

/* Copy and normalise a basic index (unused fields zeroed) into attrs. */
static int set_index(const char *opn, int n, const kiln_index *idx,
                     kiln_attrs *a, kiln_err *err)
{
    if (n < 0 || (n > 0 && !idx))
        return kiln_seterr(err, KILN_ERR_ARG, "%s: bad index list", opn);
    if (n > KILN_MAX_RANK)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "%s: too many indices (%d, at most %d)", opn, n,
                           KILN_MAX_RANK);
    a->nidx = n;
    for (int i = 0; i < n; i++) {
        kiln_index *d = &a->idx[i];
        memset(d, 0, sizeof *d);
        d->kind = idx[i].kind;
        if (idx[i].kind == KILN_INDEX_INT) {
            d->start = idx[i].start;
            d->has_start = 1;
        } else if (idx[i].kind == KILN_INDEX_SLICE) {
            if ((d->has_start = idx[i].has_start != 0))
                d->start = idx[i].start;
            if ((d->has_stop = idx[i].has_stop != 0))
                d->stop = idx[i].stop;
            if ((d->has_step = idx[i].has_step != 0))
                d->step = idx[i].step;
        } else {
            return kiln_seterr(err, KILN_ERR_ARG, "%s: index %d has a bad "
                               "kind %d", opn, i, (int)idx[i].kind);
        }
    }
    return 0;
}

kiln_value kiln_graph_subtensor(kiln_graph *g, kiln_value x, int n,
                                const kiln_index *idx, kiln_err *err)
{
    if (!g)
        return kiln_seterr(err, KILN_ERR_ARG, "subtensor: NULL graph"), -1;
    kiln_attrs a;
    attrs_default(&a);
    if (set_index("subtensor", n, idx, &a, err))
        return -1;
    return build(g, KILN_OP_SUBTENSOR, 1, &x, &a, err);
}

kiln_value kiln_graph_set_subtensor(kiln_graph *g, kiln_value x, int n,
                                    const kiln_index *idx, kiln_value v,
                                    int inc, kiln_err *err)
{
    int op = inc ? KILN_OP_INC_SUBTENSOR : KILN_OP_SET_SUBTENSOR;
    const char *opn = inc ? "inc_subtensor" : "set_subtensor";
    if (!g)
        return kiln_seterr(err, KILN_ERR_ARG, "%s: NULL graph", opn), -1;
    kiln_attrs a;
    attrs_default(&a);
    if (set_index(opn, n, idx, &a, err))
        return -1;
    kiln_value in[2] = { x, v };
    return build(g, op, 2, in, &a, err);
}

kiln_value kiln_graph_advanced_set_subtensor(kiln_graph *g, kiln_value x,
                                             kiln_value idx, int axis,
                                             kiln_value v, int inc,
                                             kiln_err *err)
{
    int op = inc ? KILN_OP_ADVANCED_INC_SUBTENSOR
                 : KILN_OP_ADVANCED_SET_SUBTENSOR;
    if (!g)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "advanced_set_subtensor: NULL graph"), -1;
    kiln_attrs a;
    attrs_default(&a);
    a.has_axes = 1;
    a.naxes = 1;
    a.axes[0] = axis;
    kiln_value in[3] = { x, idx, v };
    return build(g, op, 3, in, &a, err);
}

/* ---- names and outputs ---------------------------------------------- */

int kiln_graph_set_name(kiln_graph *g, kiln_value v, const char *name,
                        kiln_err *err)
{
    if (!g)
        return kiln_seterr(err, KILN_ERR_ARG, "set_name: NULL graph");
    if (v < 0 || v >= g->n_nodes)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "set_name: %d is not a value of this graph",
                           (int)v);
    if (!valid_name(name))
        return bad_name(err, "value", name);
    kiln_node *nd = &g->nodes[v];
    if (nd->name) {
        if (strcmp(nd->name, name) == 0)
            return 0;
        return kiln_seterr(err, KILN_ERR_NAME,
                           "cannot name a value '%s': it is already named "
                           "'%s'", name, nd->name);
    }
    if (map_find(g, name, 0) != MAP_EMPTY)
        return kiln_seterr(err, KILN_ERR_NAME, "duplicate name '%s'", name);
    if (map_reserve(g, 0, 0, err))
        return err ? err->code : KILN_ERR_NOMEM;
    nd->name = dupstr(name);
    if (!nd->name)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    map_put(g->map, g->map_cap, g, v);
    return 0;
}

int kiln_graph_output(kiln_graph *g, const char *name, kiln_value v,
                      kiln_err *err)
{
    if (!g)
        return kiln_seterr(err, KILN_ERR_ARG, "output: NULL graph");
    if (v < 0 || v >= g->n_nodes)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "output: %d is not a value of this graph", (int)v);
    if (!valid_name(name))
        return bad_name(err, "output", name);
    if (map_find(g, name, 1) != MAP_EMPTY)
        return kiln_seterr(err, KILN_ERR_NAME, "duplicate output '%s'", name);
    if (g->n_outputs >= INT32_MAX / 4)
        return kiln_seterr(err, KILN_ERR_NOMEM, "too many outputs");
    if (g->n_outputs == g->cap_outputs) {
        int cap = g->cap_outputs ? 2 * g->cap_outputs : 4;
        kiln_output *p = realloc(g->outputs, sizeof *p * (size_t)cap);
        if (!p)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        g->outputs = p;
        g->cap_outputs = cap;
    }
    if (map_reserve(g, 0, 1, err))
        return err ? err->code : KILN_ERR_NOMEM;
    char *copy = dupstr(name);
    char *vname = NULL;
    int name_value = !g->nodes[v].name && map_find(g, name, 0) == MAP_EMPTY;
    if (!copy || (name_value && !(vname = dupstr(name)))) {
        free(copy);
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    }
    int k = g->n_outputs++;
    g->outputs[k].name = copy;
    g->outputs[k].value = v;
    g->outputs[k].kind = KILN_OUTPUT_PLAIN;
    map_put(g->map, g->map_cap, g, MAP_OUT(k));
    if (name_value) {
        g->nodes[v].name = vname;
        map_put(g->map, g->map_cap, g, v);
    }
    return 0;
}

kiln_value kiln_graph_lookup(const kiln_graph *g, const char *name)
{
    if (!g || !name)
        return -1;
    int32_t e = map_find(g, name, 0);
    return e >= 0 ? e : -1;
}

/* ---- node bodies (issue 28; the types: recur.c) ------------------------ */

kiln_value kiln_graph_op_body(kiln_graph *g, const char *op, int n_in,
                              const kiln_value *in, kiln_graph *body,
                              const kiln_attr *attrs, int n_attrs,
                              kiln_err *err)
{
    if (!g || !op || !body)
        return kiln_seterr(err, KILN_ERR_ARG, "%s: NULL argument",
                           op ? op : "kiln_graph_op_body"), -1;
    int o = kiln_ir_op_lookup(op);
    if (o != KILN_OP_SCAN && o != KILN_OP_ODE_RK45 && o != KILN_OP_ODE_BDF)
        return kiln_seterr(err, KILN_ERR_TYPE, "%s: not an op with a body "
                           "(scan, ode_rk45, ode_bdf)", op), -1;
    if (body == g)
        return kiln_seterr(err, KILN_ERR_ARG, "%s: a graph cannot be its "
                           "own body", op), -1;
    if (n_attrs < 0)
        return kiln_seterr(err, KILN_ERR_ARG, "%s: bad attribute count",
                           op), -1;
    kiln_attrs a;
    if (kiln_ir_parse_attrs(o, attrs, n_attrs, &a, err))
        return -1;
    a.body = body;
    return kiln_ir_build(g, o, n_in, in, &a, err);
}

kiln_value kiln_graph_scan(kiln_graph *g, kiln_graph *body, int n_carry,
                           const kiln_value *init, int n_seq,
                           const kiln_value *seqs, int n_args,
                           const kiln_value *args, int64_t n_steps,
                           kiln_err *err)
{
    if (!g || !body || n_carry < 0 || n_seq < 0 || n_args < 0 ||
        (n_carry && !init) || (n_seq && !seqs) || (n_args && !args))
        return kiln_seterr(err, KILN_ERR_ARG, "scan: bad argument"), -1;
    int n = n_carry + n_seq + n_args;
    kiln_value small[16], *in = small;
    if (n > 16 && !(in = malloc(sizeof *in * (size_t)n)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory"), -1;
    for (int i = 0; i < n_carry; i++)
        in[i] = init[i];
    for (int i = 0; i < n_seq; i++)
        in[n_carry + i] = seqs[i];
    for (int i = 0; i < n_args; i++)
        in[n_carry + n_seq + i] = args[i];
    kiln_attr at[3] = {
        {.key = "carries", .kind = KILN_ATTR_INT, .i = n_carry},
        {.key = "seqs", .kind = KILN_ATTR_INT, .i = n_seq},
        {.key = "n_steps", .kind = KILN_ATTR_INT, .i = n_steps},
    };
    kiln_value r = kiln_graph_op_body(g, "scan", n, in, body, at,
                                      n_steps >= 0 ? 3 : 2, err);
    if (in != small)
        free(in);
    return r;
}

kiln_value kiln_graph_result(kiln_graph *g, kiln_value v, int index,
                             kiln_err *err)
{
    if (!g || v < 0 || v >= g->n_nodes)
        return kiln_seterr(err, KILN_ERR_ARG, "result: bad value"), -1;
    const kiln_node *s = &g->nodes[v];
    int ode = s->op == KILN_OP_ODE_RK45 || s->op == KILN_OP_ODE_BDF;
    if (ode && s->attrs->sens != 2)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "result: %s has one output (two with sens=2: "
                           "the states, then the sensitivities)",
                           kiln_ir_op_info(s->op)->name), -1;
    int topk = s->op == KILN_OP_TOP_K;   /* issue 29 */
    if (s->op != KILN_OP_SCAN && !ode && !topk)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "result: input must be a node with several "
                           "outputs (scan, top_k), got %s",
                           kiln_ir_op_info(s->op)->name), -1;
    if (index < 0)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "result: index %d must be >= 0", index), -1;
    kiln_type small[8] = {{0}}, *types = small;
    if (s->n_in > 8 && !(types = malloc(sizeof *types * (size_t)s->n_in)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory"), -1;
    for (int i = 0; i < s->n_in; i++)
        types[i] = g->nodes[s->in[i]].type;
    kiln_shape_ctx ctx = {g, NULL};
    kiln_type t;
    int rc = topk  ? kiln_ir_topk_type(&ctx, s->attrs, &types[0], index,
                                       &t, err)
             : ode ? kiln_ir_ode_types(&ctx, s->op, s->attrs, s->n_in, types,
                                       index, &t, err)
                   : kiln_ir_scan_types(&ctx, s->attrs, s->n_in, types,
                                        index, &t, err);
    if (types != small)
        free(types);
    if (rc)
        return -1;
    kiln_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = t.dtype;
    a.nshape = t.rank;
    memcpy(a.shape, t.dims, sizeof *a.shape * (size_t)t.rank);
    a.index = index;
    kiln_value in = v;
    return kiln_ir_build(g, KILN_OP_RESULT, 1, &in, &a, err);
}
