/*
 * cse.c — the `cse` pass: common-subexpression elimination
 * (docs/rewrite.md).
 *
 * Every op is a pure function of its inputs and attributes, so two nodes
 * with the same op, attributes, type and inputs compute the same value
 * and the later one is replaced by the earlier.  Inputs are compared
 * after the replacement of earlier nodes, so whole repeated trees merge
 * in one walk.  For the binary ops that IEEE 754 defines as commutative
 * (add, mul, eq, ne, and, or: a+b and b+a are the same correctly rounded
 * number) the two inputs are compared as an unordered pair.  Literals
 * merge by (kind, value bits); constants by type and bytes (a hash of
 * the data first, so the cost stays linear); inputs and shared values
 * never merge.  A merged node's name is dropped (outputs keep theirs).
 * Dead nodes are dropped by the rebuild (rw.c).
 */
#include "rewrite/rewrite.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0x100000001b3ULL;
}

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static int commutative(const kiln_node *n)
{
    if (n->n_in != 2)
        return 0;
    switch (n->op) {
    case KILN_OP_ADD: case KILN_OP_MUL: case KILN_OP_EQ: case KILN_OP_NE:
    case KILN_OP_AND: case KILN_OP_OR:
        return 1;
    default:
        return 0;
    }
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t node_hash(const kiln_node *n, uint64_t data_hash)
{
    uint64_t h = mix(0, (uint64_t)n->op);
    h = mix(h, (uint64_t)n->type.dtype);
    h = mix(h, (uint64_t)n->type.rank);
    for (int i = 0; i < n->type.rank; i++)
        h = mix(h, (uint64_t)n->type.dims[i]);
    h = mix(h, (uint64_t)n->weak);
    h = mix(h, (uint64_t)n->n_in);
    if (commutative(n)) {
        kiln_value a = n->in[0], b = n->in[1];
        h = mix(h, (uint64_t)(a < b ? a : b));
        h = mix(h, (uint64_t)(a < b ? b : a));
    } else {
        for (int i = 0; i < n->n_in; i++)
            h = mix(h, (uint64_t)n->in[i]);
    }
    h = mix(h, dbits(n->value));
    h = mix(h, (uint64_t)n->lit_kind);
    const kiln_attrs *a = n->attrs;
    h = mix(h, (uint64_t)a->dtype);
    for (int i = 0; i < a->naxes && i < KILN_MAX_RANK; i++)
        h = mix(h, (uint64_t)a->axes[i]);
    for (int i = 0; i < a->nshape && i < KILN_MAX_RANK; i++)
        h = mix(h, (uint64_t)a->shape[i]);
    /* indices: slices of one value differ only here (the gradient of a
     * join is n of them) */
    for (int i = 0; i < a->nidx && i < KILN_MAX_RANK; i++) {
        const kiln_index *x = &a->idx[i];
        h = mix(h, (uint64_t)x->kind);
        h = mix(h, (uint64_t)x->start);
        h = mix(h, (uint64_t)x->stop);
        h = mix(h, (uint64_t)x->step);
    }
    h = mix(h, data_hash);
    return h;
}

static int attrs_equal(const kiln_attrs *a, const kiln_attrs *b)
{
    if (a == b)
        return 1;
    if (a->has_axes != b->has_axes || a->naxes != b->naxes ||
        a->keepdims != b->keepdims || a->nshape != b->nshape ||
        a->dtype != b->dtype || a->nidx != b->nidx ||
        a->linalg != b->linalg ||
        a->msg != b->msg ||  /* interned: equal texts, one pointer */
        a->body != b->body || a->n_carry != b->n_carry ||
        a->n_seq != b->n_seq || a->n_steps != b->n_steps ||
        a->index != b->index || a->rtol != b->rtol ||
        a->atol != b->atol || a->max_steps != b->max_steps ||
        a->sens != b->sens)
        return 0;
    for (int i = 0; i < a->naxes && i < KILN_MAX_RANK; i++)
        if (a->axes[i] != b->axes[i])
            return 0;
    for (int i = 0; i < a->nshape && i < KILN_MAX_RANK; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    for (int i = 0; i < a->nidx && i < KILN_MAX_RANK; i++) {
        const kiln_index *x = &a->idx[i], *y = &b->idx[i];
        if (x->kind != y->kind || x->start != y->start ||
            x->stop != y->stop || x->step != y->step ||
            x->has_start != y->has_start || x->has_stop != y->has_stop ||
            x->has_step != y->has_step)
            return 0;
    }
    return 1;
}

/* n (old node, inputs already remapped into `ins`) equals new node m */
static int same(const kiln_node *n, const kiln_value *ins, const kiln_node *m)
{
    if (n->op != m->op || n->n_in != m->n_in || n->weak != m->weak ||
        !kiln_rw_same_type(&n->type, &m->type) ||
        dbits(n->value) != dbits(m->value) || n->lit_kind != m->lit_kind ||
        !attrs_equal(n->attrs, m->attrs))
        return 0;
    if (commutative(n)) {
        if (!((ins[0] == m->in[0] && ins[1] == m->in[1]) ||
              (ins[0] == m->in[1] && ins[1] == m->in[0])))
            return 0;
    } else {
        for (int i = 0; i < n->n_in; i++)
            if (ins[i] != m->in[i])
                return 0;
    }
    if (n->op == KILN_OP_CONST)
        return n->nbytes == m->nbytes &&
               (n->nbytes == 0 || memcmp(n->data, m->data, n->nbytes) == 0) &&
               memcmp(n->vshape, m->vshape, sizeof n->vshape) == 0;
    return 1;
}

int kiln_rw_cse(kiln_graph **gp, const kiln_rw_config *c, kiln_err *err)
{
    kiln_rw rw;
    kiln_graph *old = *gp;
    *gp = NULL;
    if (kiln_rw_begin(&rw, old, c, err)) {
        kiln_graph_free(old);
        return err ? err->code : KILN_ERR_NOMEM;
    }
    size_t cap = 64;
    while (cap < 2 * (size_t)old->n_nodes + 2)
        cap *= 2;
    kiln_value *tab = malloc(sizeof *tab * cap);
    uint64_t *th = malloc(sizeof *th * cap);
    kiln_value *ins = malloc(sizeof *ins * (size_t)(old->n_nodes + 1));
    int rc = 0;
    if (!tab || !th || !ins) {
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < cap; i++)
        tab[i] = -1;
    for (int v = 0; v < old->n_nodes && !rc; v++) {
        kiln_node *n = &old->nodes[v];
        kiln_value r = -2;
        uint64_t h = 0;
        size_t slot = 0;
        int hashed = n->op != KILN_OP_INPUT && n->op != KILN_OP_SHARED;
        if (hashed) {
            /* inputs as they will be in the new graph (a node has at most
             * as many inputs as the graph has nodes... in practice; a
             * wider node is compared through a fresh array) */
            kiln_value *in = ins;
            kiln_value *wide = NULL;
            if (n->n_in > old->n_nodes + 1) {
                wide = malloc(sizeof *wide * (size_t)n->n_in);
                if (!wide) {
                    rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
                    break;
                }
                in = wide;
            }
            for (int i = 0; i < n->n_in; i++)
                in[i] = rw.map[n->in[i]];
            kiln_node probe = *n;
            probe.in = in;
            uint64_t dh = n->op == KILN_OP_CONST && n->data
                              ? hash_bytes(n->data, n->nbytes)
                              : 0;
            h = node_hash(&probe, dh);
            slot = (size_t)h & (cap - 1);
            while (tab[slot] >= 0) {
                if (th[slot] == h && same(n, in, &rw.g->nodes[tab[slot]])) {
                    r = tab[slot];
                    break;
                }
                slot = (slot + 1) & (cap - 1);
            }
            free(wide);
        }
        if (r == -2) {
            r = kiln_rw_move(&rw, v);
            if (r < 0) {
                rc = err && err->code ? err->code : KILN_ERR_NOMEM;
                break;
            }
            if (hashed) {
                tab[slot] = r;
                th[slot] = h;
            }
        }
        rw.map[v] = r;
    }
out:
    free(tab);
    free(th);
    free(ins);
    if (rc) {
        kiln_graph_free(old);
        kiln_rw_abort(&rw);
        return rc;
    }
    return kiln_rw_end(&rw, gp);
}
