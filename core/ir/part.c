/*
 * part.c — the data side of graph partitions (issue 30; docs/mpi.md
 * "Partitions"): the declared observation axis, a part's rows, and the
 * slicing of shared values sized by the axis, when a part binds data
 * (bind_shared in ir.c, kiln_json_data_bind_graph) or is made
 * (kiln_ir_part_slice).  The rewrite of a graph into a part is
 * core/model/partition.c.
 */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY   /* XXH3_state_t on the stack */
#include <xxhash.h>

/* ---- rows of a part --------------------------------------------------- */

void kiln_ir_part_rows(int64_t total, int part, int nparts, int64_t *begin,
                       int64_t *end)
{
    /* rows [ceil(T p / P), ceil(T (p+1) / P)): part 0 has rows whenever
     * there are any (an empty part other than part 0 contributes exactly
     * 0: kiln_model_log_density), and the parts nest: parts p B .. p B +
     * B - 1 of P B are part p of P, row for row (blocks of a rank's part:
     * kiln_model_blocks_new).  T p = q P p + r p with q = T / P, r = T % P:
     * r p < P^2 does not overflow for P < 2^31. */
    int64_t q = total / nparts, r = total % nparts;
    *begin = q * part + (r * part + nparts - 1) / nparts;
    *end = q * (part + 1) + (r * (part + 1) + nparts - 1) / nparts;
}

/* The dim of type t that is symbol sym, or -1 (the first). */
int kiln_ir_part_axis_pos(const kiln_type *t, int sym)
{
    for (int k = 0; k < t->rank; k++)
        if (t->dims[k] == KILN_SYM_ID(sym))
            return k;
    return -1;
}

/* 1 when node n (a shared value) is the axis's size read as a value: an
 * integer scalar named like the axis (Stan's `int N`). */
int kiln_ir_part_is_count(const kiln_graph *g, const kiln_node *n, int sym)
{
    return n->op == KILN_OP_SHARED && n->type.rank == 0 && n->name &&
           g->symbols[sym] && strcmp(n->name, g->symbols[sym]) == 0 &&
           (n->type.dtype == KILN_I64 || n->type.dtype == KILN_I32);
}

/* Slice `value` (a whole value of shared n, sized by the axis along dim
 * k) to the part's rows into *out (malloc'd data).  0 or an error. */
int kiln_ir_part_slice_value(const kiln_graph *g, const kiln_node *n, int k,
                       const kiln_tensor *value, int64_t b, int64_t e,
                       kiln_tensor *out, kiln_err *err)
{
    (void)g;
    size_t es = kiln_dtype_size(value->dtype);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < k; i++)
        outer *= value->shape[i];
    for (int i = k + 1; i < value->rank; i++)
        inner *= value->shape[i];
    *out = *value;
    out->shape[k] = e - b;
    size_t row = (size_t)inner * es;
    size_t nb = (size_t)outer * (size_t)(e - b) * row;
    out->data = malloc(nb ? nb : 1);
    if (!out->data)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; o < outer; o++)
        memcpy((char *)out->data + (size_t)o * (size_t)(e - b) * row,
               (const char *)value->data +
                   ((size_t)o * (size_t)value->shape[k] + (size_t)b) * row,
               (size_t)(e - b) * row);
    (void)n;
    return 0;
}

int kiln_ir_part_bind_slice(kiln_graph *g, const kiln_node *n,
                            const kiln_tensor *value, kiln_tensor *out,
                            kiln_err *err)
{
    out->data = NULL;
    if (!g->part_n || value->dtype != n->type.dtype ||
        value->rank != n->type.rank || !value->data)
        return 0;   /* not a part, or a value bind_shared refuses */
    int sym = g->part_sym;
    int64_t total;
    if (kiln_ir_part_is_count(g, n, sym)) {
        total = n->type.dtype == KILN_I64 ? *(const int64_t *)value->data
                                          : *(const int32_t *)value->data;
    } else {
        int k = kiln_ir_part_axis_pos(&n->type, sym);
        if (k < 0 || k >= value->rank)
            return 0;
        total = value->shape[k];
    }
    if (g->part_total >= 0 && g->part_total != total)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "partition: shared '%s' has %lld rows along axis "
                           "'%s', but the data bound before has %lld",
                           n->name ? n->name : "?", (long long)total,
                           g->symbols[sym], (long long)g->part_total);
    if (total < 0)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "partition: shared '%s' is %lld: a size must not "
                           "be negative", n->name ? n->name : "?",
                           (long long)total);
    int64_t b, e;
    kiln_ir_part_rows(total, g->part_k, g->part_n, &b, &e);
    if (kiln_ir_part_is_count(g, n, sym)) {
        *out = *value;
        out->data = malloc(8);
        if (!out->data)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        if (n->type.dtype == KILN_I64)
            *(int64_t *)out->data = e - b;
        else
            *(int32_t *)out->data = (int32_t)(e - b);
    } else if (kiln_ir_part_slice_value(g, n, kiln_ir_part_axis_pos(&n->type, sym), value, b, e, out,
                           err))
        return err ? err->code : KILN_ERR_NOMEM;
    g->part_total = total;
    return 0;
}

/* ---- digests of the data (kiln_graph_data_digest) --------------------- */

/* Start a value's digest: its dtype, rank and shape. */
static void digest_head(XXH3_state_t *st, const kiln_tensor *v)
{
    int32_t h[2] = {(int32_t)v->dtype, (int32_t)v->rank};
    XXH3_64bits_update(st, h, sizeof h);
    if (v->rank > 0)
        XXH3_64bits_update(st, v->shape, sizeof *v->shape * (size_t)v->rank);
}

uint64_t kiln_ir_part_head_digest(const kiln_tensor *value)
{
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset(&st);
    digest_head(&st, value);
    return (uint64_t)XXH3_64bits_digest(&st);
}

uint64_t kiln_ir_part_value_digest(const kiln_tensor *value)
{
    size_t nb = (size_t)kiln_shape_numel(value->rank, value->shape) *
                kiln_dtype_size(value->dtype);
    return (uint64_t)XXH3_64bits_withSeed(value->data ? value->data : "",
                                          value->data ? nb : 0,
                                          kiln_ir_part_head_digest(value));
}

int kiln_graph_data_digest(const kiln_graph *g, uint64_t *digest,
                           kiln_err *err)
{
    if (!g || !digest)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_graph_data_digest: NULL argument");
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset(&st);
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = &g->nodes[i];
        if (n->op != KILN_OP_SHARED || n->hoisted)
            continue;
        const char *nm = n->name ? n->name : "";
        XXH3_64bits_update(&st, nm, strlen(nm) + 1);
        uint64_t d = 0;
        unsigned char bound = n->data != NULL || n->has_wdigest;
        if (!bound) {
            /* not bound: its name only */
        } else if (n->has_wdigest) {
            d = n->wdigest;
        } else {
            kiln_tensor v = {.dtype = n->type.dtype, .rank = n->type.rank,
                             .data = n->data};
            memcpy(v.shape, n->vshape, sizeof v.shape);
            d = kiln_ir_part_value_digest(&v);
        }
        XXH3_64bits_update(&st, &bound, 1);
        XXH3_64bits_update(&st, &d, sizeof d);
    }
    *digest = (uint64_t)XXH3_64bits_digest(&st);
    return 0;
}

const char *kiln_graph_partition_rows(const kiln_graph *g, int64_t *total,
                                      int64_t *begin, int64_t *end)
{
    int part = g && g->part_n;
    int64_t t = part ? g->part_total : 0, b = 0, e = 0;
    if (part && t >= 0)
        kiln_ir_part_rows(t, g->part_k, g->part_n, &b, &e);
    if (total)
        *total = t;
    if (begin)
        *begin = b;
    if (end)
        *end = e;
    return part ? g->symbols[g->part_sym] : NULL;
}

int kiln_ir_part_read_check(const kiln_graph *g, int sym, int part,
                            int nparts, kiln_err *err)
{
    if (!g->read_n || (g->read_k == part && g->read_n == nparts &&
                       g->read_sym == sym))
        return 0;
    /* a part nested in the part read (a block of it): part k B + b of
     * n B inside part k of n */
    if (g->read_sym == sym && nparts % g->read_n == 0 &&
        part / (nparts / g->read_n) == g->read_k)
        return 0;
    return kiln_seterr(err, KILN_ERR_ARG,
                       "partition: the graph's data was read as part %d of "
                       "%d along '%s' (kiln_read_options.part_*), not part "
                       "%d of %d along '%s' (nor a part nested in it)",
                       g->read_k, g->read_n,
                       g->symbols[g->read_sym] ? g->symbols[g->read_sym]
                                               : "?", part, nparts,
                       g->symbols[sym] ? g->symbols[sym] : "?");
}

/* ---- the axis ---------------------------------------------------------- */

const char *kiln_graph_partition_axis(const kiln_graph *g)
{
    return g ? g->part_axis : NULL;
}

static int find_symbol(const kiln_graph *g, const char *name)
{
    for (int s = 0; s < g->n_symbols; s++)
        if (g->symbols[s] && strcmp(g->symbols[s], name) == 0)
            return s;
    return -1;
}

int kiln_graph_set_partition_axis(kiln_graph *g, const char *axis,
                                  kiln_err *err)
{
    if (!g)
        return kiln_seterr(err, KILN_ERR_ARG, "partition: NULL graph");
    if (axis && find_symbol(g, axis) < 0)
        return kiln_seterr(err, KILN_ERR_NAME,
                           "partition: the graph has no symbol '%s'", axis);
    char *c = NULL;
    if (axis) {
        size_t n = strlen(axis) + 1;
        if (!(c = malloc(n)))
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        memcpy(c, axis, n);
    }
    free(g->part_axis);
    g->part_axis = c;
    return 0;
}

/* The axis symbol p names (or g declares): its index, or an error. */
int kiln_ir_part_axis(const kiln_graph *g, const kiln_partition *p,
                      int *sym, kiln_err *err)
{
    if (!g || !p)
        return kiln_seterr(err, KILN_ERR_ARG, "partition: NULL argument");
    if (p->nparts < 1 || p->part < 0 || p->part >= p->nparts)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "partition: part %d of %d is out of range (0 <= "
                           "part < nparts, nparts >= 1)", p->part,
                           p->nparts);
    const char *a = p->axis ? p->axis : g->part_axis;
    if (!a)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "partition: no axis named, and the graph declares "
                           "none (`partition N` in its body)");
    if ((*sym = find_symbol(g, a)) < 0)
        return kiln_seterr(err, KILN_ERR_NAME,
                           "partition: the graph has no symbol '%s'", a);
    return 0;
}

