/*
 * fuse.c — the fusion planning pass (prefix kiln_fuse_; see fuse.h and
 * docs/rewrite.md, "fuse").
 *
 * Three kinds of group, planned in this order:
 *
 * 1. Reduction trees (plan_trees): a reduction (sum prod max min mean)
 *    takes the elementwise chain computing its operand, a producer at a
 *    time when all its readers are members (nothing is computed twice),
 *    it is not a graph output and its type is exactly the operand's;
 *    within the caps (distinct loaded inputs counted exactly, an upper
 *    bound of the instructions).  Roots in reverse node order.
 *
 * 2. Regions (plan_regions): every other live elementwise node is a
 *    candidate, classed by its shape (rank and dims, symbols by
 *    identity).  Stage: for a candidate, the largest stage of its
 *    operands of its class, and one more than that of any other
 *    candidate operand; for any other node, one more than its candidate
 *    operands' stages and the largest of the rest.  A candidate then
 *    sinks to the stage of its earliest reader of its class when every
 *    other reader is later still.  Sorting the live nodes by (2 * stage +
 *    candidate, class, node) is a topological order in which each
 *    (stage, class) run of candidates comes after everything it reads and
 *    before everything outside it that reads it: one kernel computes the
 *    run, cut in order where a cap would be passed (instructions, inputs,
 *    outputs).  The last member of a part is its root.
 *
 * 3. Sibling reductions (plan_siblings): full reductions of one op over
 *    operands of one shape and the same depth (most reductions on a path
 *    from the leaves: equal depths cannot depend on each other) are one
 *    REDUCE kernel of several outputs; then the order becomes a
 *    topological sort of the kernel graph (order_kernels).
 *
 * 4. Loops (plan_loops): kernels over one iteration space — regions,
 *    reductions of one op and axes, gathers from a rank-1 table along
 *    the space and scatter-adds into a rank-1 array — become one LOOP
 *    kernel (ABI 1.5): one pass, the gather an indexed load, the scatter
 *    an indexed accumulate, the members read only inside never stored.
 *
 * All linear in the graph but for that sort's heap.
 */
#include "fuse.h"
#include "lower.h"   /* kiln_lower_opts (types only) */

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int nomem(kiln_err *err)
{
    return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
}

static int fusable_reduce(int op)
{
    return op == KILN_OP_SUM || op == KILN_OP_PROD || op == KILN_OP_MAX ||
           op == KILN_OP_MIN || op == KILN_OP_MEAN ||
           op == KILN_OP_ALL || op == KILN_OP_ANY;   /* issue 25 */
}

static int is_elemwise(const kiln_node *n)
{
    return kiln_ir_op_info(n->op)->category == KILN_CAT_ELEMWISE;
}

/* An upper bound of the instructions node v adds to a fused program
 * besides the LOADs of its group (counted apart): its op, or the n-1 of an
 * n-ary tree, and per operand a CAST or a CONST. */
static int node_ops(const kiln_graph *g, int v)
{
    const kiln_node *n = &g->nodes[v];
    return (n->n_in > 2 ? n->n_in - 1 : 1) + n->n_in;
}

int kiln_fuse_dot_operand(const kiln_graph *g, int v, int i, int64_t *perm)
{
    const kiln_node *n = &g->nodes[v];
    int u = n->in[i];
    const kiln_node *un = &g->nodes[u];
    int r = un->type.rank;
    if (un->op != KILN_OP_TRANSPOSE || r < 2 ||
        g->nodes[un->in[0]].type.dtype != n->type.dtype)
        return u;
    int64_t p[KILN_MAX_RANK];
    for (int k = 0; k < r; k++) {
        int64_t ax = un->attrs->has_axes ? un->attrs->axes[k] : r - 1 - k;
        p[k] = ax < 0 ? ax + r : ax;
    }
    /* rank > 2: only the last two axes swapped (the batch stays) */
    for (int k = 0; r > 2 && k < r; k++)
        if (p[k] != (k < r - 2 ? k : k == r - 2 ? r - 1 : r - 2))
            return u;
    if (perm)
        memcpy(perm, p, sizeof(int64_t) * (size_t)r);
    return un->in[0];
}

int kiln_fuse_dot_batched(const kiln_graph *g, int v)
{
    const kiln_node *n = &g->nodes[v];
    return kiln_ir_op_info(n->op)->category == KILN_CAT_DOT && n->n_in == 2 &&
           (g->nodes[n->in[0]].type.rank > 2 ||
            g->nodes[n->in[1]].type.rank > 2);
}

/* The operand node v really reads as its input i (a dot reads through a
 * transpose it views in place). */
static int operand(const kiln_graph *g, int v, int i)
{
    return kiln_ir_op_info(g->nodes[v].op)->category == KILN_CAT_DOT
               ? kiln_fuse_dot_operand(g, v, i, NULL)
               : g->nodes[v].in[i];
}

/* FNV-1a over a type's rank and dims (symbols by identity), from h. */
static uint64_t hash_shape(uint64_t h, const kiln_type *t)
{
    h = (h ^ (uint64_t)t->rank) * 1099511628211ull;
    for (int d = 0; d < t->rank; d++)
        h = (h ^ (uint64_t)t->dims[d]) * 1099511628211ull;
    return h;
}

/* ---- regions ---------------------------------------------------------- */

typedef struct part {        /* the region part being built */
    int first, n;            /* members: f->order[first .. first+n) */
    int ops, loads, outs;
    int id;                  /* stamp of this part in stamp[] */
} part;

/* Close part p: every member's group is the part's root (its last
 * member). */
static void close_part(kiln_fusion *f, const part *p, int why)
{
    if (p->n == 0)
        return;
    int root = f->order[p->first + p->n - 1];
    for (int k = 0; k < p->n; k++) {
        int m = f->order[p->first + k];
        f->group[m] = root;
        f->region[m] = p->n > 1;
    }
    f->ext[root] = 1;   /* it is read (it is live), and nothing after it
                           in its part can read it */
    f->split[root] = (char)why;
    if (p->n > 1)
        f->n_regions++;
}

static int plan_regions(const kiln_graph *g, const char *live,
                        const kiln_lower_opts *o, kiln_fusion *f,
                        const char *cand, const int *stage, const int *cls,
                        kiln_err *err)
{
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    int *stamp = malloc(sizeof(int) * nn);   /* part that counted a load */
    int *partof = malloc(sizeof(int) * nn);  /* candidate -> its part id */
    if (!stamp || !partof) {
        free(stamp); free(partof);
        return nomem(err);
    }
    for (size_t v = 0; v < nn; v++)
        stamp[v] = partof[v] = -1;
    /* a candidate read by a node outside its stage, or a graph output,
     * is an output of its region whatever the split */
    for (int v = 0; v < g->n_nodes; v++) {
        if (!live[v])
            continue;
        for (int i = 0; i < g->nodes[v].n_in; i++) {
            int w = operand(g, v, i);
            if (cand[w] && (!cand[v] || stage[v] != stage[w] ||
                            cls[v] != cls[w]))
                f->ext[w] = 1;
        }
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (cand[g->outputs[i].value])
            f->ext[g->outputs[i].value] = 1;
    int max_outs = o->fuse_max_outputs > 0 ? o->fuse_max_outputs : 1;
    part p = {0, 0, 0, 0, 0, 0};
    int next_id = 0, cur_stage = -1, cur_cls = -1;
    for (int k = 0; k < f->n_order; k++) {
        int m = f->order[k];
        if (!cand[m]) {
            if (p.n) {
                close_part(f, &p, KILN_FUSE_WHOLE);
                p.n = 0;
            }
            continue;
        }
        const kiln_node *mn = &g->nodes[m];
        /* what m adds: its instructions, the inputs it reads that the
         * part does not have yet, and itself as an output */
        int add_ops = node_ops(g, m), add_loads = 0;
        for (int i = 0; i < mn->n_in; i++) {
            int w = mn->in[i];
            if (g->nodes[w].op == KILN_OP_LITERAL ||
                (partof[w] == p.id && p.n > 0))
                continue;
            int dup = 0;
            for (int j = 0; j < i; j++)
                dup |= mn->in[j] == w;
            if (!dup && stamp[w] != p.id)
                add_loads++;
        }
        int add_outs = f->ext[m];
        int why = KILN_FUSE_WHOLE;
        int same = p.n > 0 && stage[m] == cur_stage && cls[m] == cur_cls;
        if (same) {
            if (p.ops + add_ops + p.loads + add_loads > o->fuse_max_ops)
                why = KILN_FUSE_SPLIT_OPS;
            else if (p.loads + add_loads > o->fuse_max_width)
                why = KILN_FUSE_SPLIT_WIDTH;
            else if (p.outs + add_outs > max_outs)
                why = KILN_FUSE_SPLIT_OUTPUTS;
        }
        if (p.n > 0 && (!same || why != KILN_FUSE_WHOLE)) {
            close_part(f, &p, why);
            p.n = 0;
        }
        if (p.n == 0) {   /* m starts a part */
            p = (part){k, 0, 0, 0, 0, next_id++};
            cur_stage = stage[m];
            cur_cls = cls[m];
            add_loads = 0;
        }
        /* count m's inputs (exactly) against this part */
        for (int i = 0; i < mn->n_in; i++) {
            int w = mn->in[i];
            if (g->nodes[w].op == KILN_OP_LITERAL || partof[w] == p.id ||
                stamp[w] == p.id)
                continue;
            stamp[w] = p.id;
            p.loads++;
            /* a member of an earlier part of this stage read here is an
             * output of that part */
            if (cand[w])
                f->ext[w] = 1;
        }
        partof[m] = p.id;
        p.n++;
        p.ops += add_ops;
        p.outs += add_outs;
    }
    if (p.n)
        close_part(f, &p, KILN_FUSE_WHOLE);
    /* an output a later part made (it read a member of this one) is not
     * counted against max_outputs: a soft overrun, bounded by the later
     * parts' inputs */
    free(stamp);
    free(partof);
    return 0;
}

/* ---- elementwise trees -------------------------------------------------- */

static int plan_trees(const kiln_graph *g, const char *live,
                      const kiln_lower_opts *o, kiln_fusion *f,
                      kiln_err *err)
{
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    int *uses = calloc(nn, sizeof(int));
    int *ref = malloc(sizeof(int) * nn);   /* group that reads the node */
    int *cnt = malloc(sizeof(int) * nn);   /* edges from members of ref[] */
    int *tmp = malloc(sizeof(int) * nn);
    int *work = malloc(sizeof(int) * nn);
    char *isout = calloc(nn, 1);
    if (!uses || !ref || !cnt || !tmp || !work || !isout) {
        free(uses); free(ref); free(cnt); free(tmp); free(work); free(isout);
        return nomem(err);
    }
    for (int v = 0; v < g->n_nodes; v++) {
        ref[v] = tmp[v] = -1;
        cnt[v] = 0;
        if (live[v])
            for (int i = 0; i < g->nodes[v].n_in; i++)
                uses[operand(g, v, i)]++;
    }
    for (int i = 0; i < g->n_outputs; i++)
        isout[g->outputs[i].value] = 1;
    int *group = f->group;
    for (int r = g->n_nodes - 1; r >= 0; r--) {
        if (!live[r] || group[r] >= 0)
            continue;
        const kiln_node *rn = &g->nodes[r];
        int red = fusable_reduce(rn->op);
        if (!red)
            continue;   /* elementwise nodes are the regions' */
        const kiln_type *it = red ? &g->nodes[rn->in[0]].type : &rn->type;
        int loads = 0, nops = 0, nw = 0;
        /* the root: its operands are read; a reduction reads its operand
         * (LOAD or the member's result, then a CAST) */
        group[r] = r;
        work[nw++] = r;
        nops = red ? 1 : node_ops(g, r);
        for (int i = 0; i < rn->n_in; i++) {
            int w = rn->in[i];
            if (g->nodes[w].op != KILN_OP_LITERAL && ref[w] != r) {
                ref[w] = r;
                cnt[w] = 0;
                loads++;
            }
        }
        for (int k = 0; k < nw; k++) {
            const kiln_node *n = &g->nodes[work[k]];
            for (int i = 0; i < n->n_in; i++) {
                int u = n->in[i];
                const kiln_node *un = &g->nodes[u];
                if (ref[u] != r || ++cnt[u] != uses[u] || isout[u] ||
                    group[u] >= 0 || !is_elemwise(un) ||
                    un->type.rank != it->rank ||
                    memcmp(un->type.dims, it->dims,
                           sizeof(int64_t) * (size_t)it->rank))
                    continue;
                /* u would stop being a load; its new operands start */
                int add = 0;
                for (int j = 0; j < un->n_in; j++) {
                    int w = un->in[j];
                    if (g->nodes[w].op != KILN_OP_LITERAL && ref[w] != r &&
                        tmp[w] != u) {
                        tmp[w] = u;
                        add++;
                    }
                }
                int uops = node_ops(g, u);
                if (loads - 1 + add > o->fuse_max_width ||
                    nops + uops + loads - 1 + add > o->fuse_max_ops) {
                    f->split[r] = (char)(loads - 1 + add > o->fuse_max_width
                                             ? KILN_FUSE_SPLIT_WIDTH
                                             : KILN_FUSE_SPLIT_OPS);
                    continue;   /* the split: u roots its own group */
                }
                group[u] = r;
                work[nw++] = u;
                nops += uops;
                loads += add - 1;
                for (int j = 0; j < un->n_in; j++) {
                    int w = un->in[j];
                    if (g->nodes[w].op != KILN_OP_LITERAL && ref[w] != r) {
                        ref[w] = r;
                        cnt[w] = 0;
                    }
                }
            }
        }
    }
    free(uses); free(ref); free(cnt); free(tmp); free(work); free(isout);
    return 0;
}

/* ---- sibling reductions ------------------------------------------------- */

/* The reduced-axes mask of reduction node v over its operand's rank. */
static uint32_t reduce_bits(const kiln_graph *g, int v)
{
    const kiln_node *n = &g->nodes[v];
    int r = g->nodes[n->in[0]].type.rank;
    if (!n->attrs->has_axes)
        return r >= 32 ? 0xffffffffu : (1u << r) - 1u;
    uint32_t m = 0;
    for (int i = 0; i < n->attrs->naxes; i++) {
        int64_t a = n->attrs->axes[i] < 0 ? n->attrs->axes[i] + r
                                          : n->attrs->axes[i];
        if (a >= 0 && a < 32)
            m |= 1u << a;
    }
    return m;
}

/* Whether reduction node v reduces every axis of its operand. */
static int full_reduce(const kiln_graph *g, int v)
{
    int r = g->nodes[g->nodes[v].in[0]].type.rank;
    return r < 32 && reduce_bits(g, v) == (r ? (1u << r) - 1u : 0u);
}

/* Sets of reduction roots that one REDUCE kernel can compute: full
 * reductions with one op over operands of one shape and the same depth,
 * where the depth of a node is the most reductions on a path from the
 * leaves to it — two with the same depth cannot depend on each other,
 * directly or through any other kernel.  Greedy in node order within
 * the caps (outputs, instructions).  Sets of one are left alone. */
static int plan_siblings(const kiln_graph *g, const char *live,
                         const kiln_lower_opts *o, kiln_fusion *f,
                         kiln_err *err)
{
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    int *depth = calloc(nn, sizeof(int));
    int *size = calloc(nn, sizeof(int));   /* tree instructions per root */
    int *last = malloc(sizeof(int) * nn);  /* open set's last root, by key */
    size_t cap = 16;
    while (cap < 2 * nn)
        cap *= 2;
    int *tab = malloc(sizeof(int) * cap);  /* open set (its first root) */
    if (!depth || !size || !last || !tab) {
        free(depth); free(size); free(last); free(tab);
        return nomem(err);
    }
    for (size_t i = 0; i < cap; i++)
        tab[i] = -1;
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *n = &g->nodes[v];
        int d = 0;
        for (int i = 0; i < n->n_in; i++) {
            int w = n->in[i];
            int dw = depth[w] + (fusable_reduce(g->nodes[w].op) != 0);
            if (dw > d)
                d = dw;
        }
        depth[v] = d;
        if (f->group[v] >= 0)
            size[f->group[v]] += node_ops(g, v);
    }
    int max_outs = o->fuse_max_outputs < 64 ? o->fuse_max_outputs : 64;
    int *outs = calloc(nn, sizeof(int)), *ops = calloc(nn, sizeof(int));
    if (!outs || !ops) {
        free(depth); free(size); free(last); free(tab); free(outs); free(ops);
        return nomem(err);
    }
    for (int r = 0; r < g->n_nodes && max_outs > 1; r++) {
        const kiln_node *rn = &g->nodes[r];
        if (!live[r] || f->group[r] != r || !fusable_reduce(rn->op) ||
            !full_reduce(g, r))
            continue;
        const kiln_type *xt = &g->nodes[rn->in[0]].type;
        uint64_t h = 1469598103934665603ull ^ (uint64_t)rn->op;
        h = hash_shape((h ^ (uint64_t)depth[r]) * 1099511628211ull, xt);
        size_t i = (size_t)(h & (cap - 1));
        for (;; i = (i + 1) & (cap - 1)) {
            int s0 = tab[i];
            if (s0 < 0) {
                tab[i] = r;   /* r opens a set */
                f->sib[r] = r;
                last[r] = r;
                outs[r] = 1;
                ops[r] = size[r];
                break;
            }
            const kiln_node *sn = &g->nodes[s0];
            const kiln_type *st = &g->nodes[sn->in[0]].type;
            if (sn->op != rn->op || depth[s0] != depth[r] ||
                st->rank != xt->rank ||
                memcmp(st->dims, xt->dims, sizeof(int64_t) * (size_t)xt->rank))
                continue;
            if (outs[s0] + 1 > max_outs ||
                ops[s0] + size[r] > o->fuse_max_ops) {
                tab[i] = r;   /* full: r opens the next set of this key */
                f->sib[r] = r;
                last[r] = r;
                outs[r] = 1;
                ops[r] = size[r];
                break;
            }
            f->sib[r] = s0;
            f->sib_next[last[s0]] = r;
            last[s0] = r;
            outs[s0]++;
            ops[s0] += size[r];
            break;
        }
    }
    /* sets of one are no sets */
    for (int r = 0; r < g->n_nodes; r++) {
        if (f->sib[r] != r)
            continue;
        if (f->sib_next[r] < 0)
            f->sib[r] = -1;
        else
            f->n_sibling_sets++;
    }
    free(depth); free(size); free(last); free(tab); free(outs); free(ops);
    return 0;
}

/* ---- the lowering order ------------------------------------------------ */

/* The kernel that computes node v (a node that is none's: itself). */
int kiln_fuse_kernel_of(const kiln_fusion *f, int v)
{
    int r = f->group[v] >= 0 ? f->group[v] : v;
    return f->sib[r] >= 0 ? f->sib[r] : r;
}

/* Reorder f->order so that kernels come in a topological order of the
 * kernel graph (each kernel's nodes together, in their order), the
 * earliest-placed ready kernel first (a binary heap on the position of
 * its first node).  Needed once sibling sets join kernels that the
 * stage order had apart.  Linear but for the heap's log. */
static int order_kernels(const kiln_graph *g, const char *live,
                         kiln_fusion *f, kiln_err *err)
{
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    int *pos = malloc(sizeof(int) * nn);    /* kernel -> first position */
    int *indeg = calloc(nn, sizeof(int));
    int *moff = calloc(nn + 1, sizeof(int)), *mem = NULL;  /* members */
    int *eoff = calloc(nn + 1, sizeof(int)), *edst = NULL; /* out-edges */
    int *heap = malloc(sizeof(int) * nn), *out = malloc(sizeof(int) * nn);
    int rc = 0, n_edges = 0;
    if (!pos || !indeg || !moff || !eoff || !heap || !out) {
        rc = nomem(err);
        goto done;
    }
    for (size_t v = 0; v < nn; v++)
        pos[v] = -1;
    for (int k = 0; k < f->n_order; k++) {
        int q = kiln_fuse_kernel_of(f, f->order[k]);
        if (pos[q] < 0)
            pos[q] = k;
        moff[q + 1]++;
    }
    for (int v = 0; v < g->n_nodes; v++) {
        if (!live[v])
            continue;
        int kv = kiln_fuse_kernel_of(f, v);
        for (int i = 0; i < g->nodes[v].n_in; i++) {
            int kw = kiln_fuse_kernel_of(f, operand(g, v, i));
            if (kw != kv)
                eoff[kw + 1]++, n_edges++;
        }
    }
    for (size_t q = 1; q <= nn; q++) {
        moff[q] += moff[q - 1];
        eoff[q] += eoff[q - 1];
    }
    mem = malloc(sizeof(int) * (size_t)(f->n_order ? f->n_order : 1));
    edst = malloc(sizeof(int) * (size_t)(n_edges ? n_edges : 1));
    if (!mem || !edst) {
        rc = nomem(err);
        goto done;
    }
    for (int k = 0; k < f->n_order; k++) {
        int q = kiln_fuse_kernel_of(f, f->order[k]);
        mem[moff[q]++] = f->order[k];
    }
    for (int v = 0; v < g->n_nodes; v++) {
        if (!live[v])
            continue;
        int kv = kiln_fuse_kernel_of(f, v);
        for (int i = 0; i < g->nodes[v].n_in; i++) {
            int kw = kiln_fuse_kernel_of(f, operand(g, v, i));
            if (kw != kv) {
                edst[eoff[kw]++] = kv;
                indeg[kv]++;
            }
        }
    }
    /* back to starts */
    for (int q = g->n_nodes; q > 0; q--) {
        moff[q] = moff[q - 1];
        eoff[q] = eoff[q - 1];
    }
    moff[0] = eoff[0] = 0;
    int hn = 0, n_out = 0;
#define HLESS(a, b) (pos[heap[a]] < pos[heap[b]])
#define HSWAP(a, b) do { int t_ = heap[a]; heap[a] = heap[b]; heap[b] = t_; } while (0)
    for (int q = 0; q < g->n_nodes; q++) {
        if (pos[q] < 0 || indeg[q])
            continue;
        int i = hn++;
        heap[i] = q;
        while (i > 0 && HLESS(i, (i - 1) / 2)) {
            HSWAP(i, (i - 1) / 2);
            i = (i - 1) / 2;
        }
    }
    while (hn > 0) {
        int q = heap[0];
        heap[0] = heap[--hn];
        for (int i = 0;;) {
            int l = 2 * i + 1, r = l + 1, m = i;
            if (l < hn && HLESS(l, m))
                m = l;
            if (r < hn && HLESS(r, m))
                m = r;
            if (m == i)
                break;
            HSWAP(i, m);
            i = m;
        }
        for (int e = moff[q]; e < moff[q + 1]; e++)
            out[n_out++] = mem[e];
        for (int e = eoff[q]; e < eoff[q + 1]; e++) {
            int u = edst[e];
            if (--indeg[u] == 0) {
                int i = hn++;
                heap[i] = u;
                while (i > 0 && HLESS(i, (i - 1) / 2)) {
                    HSWAP(i, (i - 1) / 2);
                    i = (i - 1) / 2;
                }
            }
        }
    }
#undef HLESS
#undef HSWAP
    if (n_out != f->n_order) {
        /* a cycle cannot happen (equal depths: plan_siblings); should it,
         * the sets go and the stage order stays, which is valid */
        for (int v = 0; v < g->n_nodes; v++)
            f->sib[v] = f->sib_next[v] = -1;
        f->n_sibling_sets = 0;
        goto done;
    }
    memcpy(f->order, out, sizeof(int) * (size_t)n_out);
done:
    free(pos); free(indeg); free(moff); free(mem); free(eoff); free(edst);
    free(heap); free(out);
    return rc;
}

/* ---- loops ---------------------------------------------------------- */

/* What kernel q brings to a loop (plan_loops): its iteration space (the
 * type of a node of that shape; NULL: q joins no loop), for a reduction
 * its op and reduced axes, and its sizes against the caps. */
typedef struct loop_kernel {
    const kiln_type *space;
    int rop;                 /* reduction op, or -1 */
    uint32_t mask;           /* reduced axes */
    int ops, outs, reds;     /* instructions, outputs, reductions */
} loop_kernel;

/* A loop being built: where it runs, and what it holds. */
typedef struct loop_rec {
    int anchor, apos;        /* the kernel it is lowered at, its position */
    int minc;                /* least position of a kernel outside the loop
                                that reads a member, INT_MAX: none yet */
    loop_kernel k;           /* space, op and axes; summed sizes */
    int n;                   /* kernels */
} loop_rec;

/* The axis of take / advanced_inc_subtensor node v, normalised. */
static int64_t index_axis(const kiln_graph *g, int v)
{
    const kiln_node *n = &g->nodes[v];
    int64_t ax = n->attrs->has_axes ? n->attrs->axes[0] : 0;
    return ax < 0 ? ax + g->nodes[n->in[0]].type.rank : ax;
}

static int is_leaf(const kiln_graph *g, int v)
{
    return kiln_ir_op_info(g->nodes[v].op)->category == KILN_CAT_LEAF;
}

/* Whether member m of a loop reads its operand i whole (so that the
 * operand cannot be made in the same pass): a reduction's or a scatter's
 * result, a gather's table, the array a scatter adds into. */
static int reads_whole(const kiln_graph *g, int m, int i)
{
    const kiln_node *n = &g->nodes[m];
    int w = n->in[i], op = g->nodes[w].op;
    return fusable_reduce(op) || op == KILN_OP_ADVANCED_INC_SUBTENSOR ||
           ((n->op == KILN_OP_TAKE || n->op == KILN_OP_ADVANCED_INC_SUBTENSOR)
            && i == 0);
}

static int same_shape(const kiln_type *a, const kiln_type *b)
{
    return a->rank == b->rank &&
           !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank);
}

/* The loop facts of kernel q (the node it is lowered at). */
static void loop_facts(const kiln_graph *g, const kiln_fusion *f, int q,
                       loop_kernel *lk)
{
    const kiln_node *n = &g->nodes[q];
    memset(lk, 0, sizeof *lk);
    lk->rop = -1;
    if (is_elemwise(n) && f->group[q] == q) {
        lk->space = &n->type;
    } else if (fusable_reduce(n->op) && f->group[q] == q &&
               (f->sib[q] < 0 || f->sib[q] == q)) {
        lk->space = &g->nodes[n->in[0]].type;
        lk->rop = n->op;
        lk->mask = reduce_bits(g, q);
    } else if (n->op == KILN_OP_TAKE && f->group[q] < 0 &&
               g->nodes[n->in[0]].type.rank == 1 && index_axis(g, q) == 0) {
        lk->space = &g->nodes[n->in[1]].type;   /* q's own shape */
    } else if (n->op == KILN_OP_ADVANCED_INC_SUBTENSOR && f->group[q] < 0 &&
               n->type.rank == 1 && index_axis(g, q) == 0 &&
               n->type.dtype != KILN_BOOL &&
               g->nodes[n->in[2]].type.rank <= g->nodes[n->in[1]].type.rank) {
        lk->space = &g->nodes[n->in[1]].type;
    }
    if (lk->space && lk->space->rank == 0)
        lk->space = NULL;   /* scalars are the scalar regions' */
}

static int plan_loops(const kiln_graph *g, const char *live,
                      const kiln_lower_opts *o, kiln_fusion *f,
                      kiln_err *err)
{
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    int *place = malloc(sizeof(int) * nn);    /* kernel -> where it runs */
    int *rec_of = malloc(sizeof(int) * nn);   /* kernel -> its loop, -1 */
    int *moff = calloc(nn + 2, sizeof(int)), *mem = NULL;  /* members */
    loop_rec *rec = malloc(sizeof *rec * nn);
    size_t cap = 16;
    while (cap < 2 * nn)
        cap *= 2;
    int *open = malloc(sizeof(int) * cap);    /* space -> latest loop */
    int rc = 0, n_rec = 0;
    if (!place || !rec_of || !moff || !rec || !open) {
        rc = nomem(err);
        goto done;
    }
    for (size_t i = 0; i < cap; i++)
        open[i] = -1;
    for (size_t v = 0; v < nn; v++)
        place[v] = rec_of[v] = -1;
    /* kernels: their positions, and their members (CSR, node order) */
    for (int k = 0; k < f->n_order; k++) {
        int v = f->order[k], q = kiln_fuse_kernel_of(f, v);
        if (q == v)
            place[q] = k;
        moff[q + 1]++;
    }
    for (size_t q = 1; q <= nn; q++)
        moff[q] += moff[q - 1];
    mem = malloc(sizeof(int) * (size_t)(f->n_order ? f->n_order : 1));
    if (!mem) {
        rc = nomem(err);
        goto done;
    }
    for (int v = 0; v < g->n_nodes; v++)
        if (live[v])
            mem[moff[kiln_fuse_kernel_of(f, v)]++] = v;
    for (int q = g->n_nodes; q > 0; q--)
        moff[q] = moff[q - 1];
    moff[0] = 0;
    int max_outs = o->fuse_max_outputs > 0 ? o->fuse_max_outputs : 1;
    /* where kernel q runs: its loop's anchor (which may have moved), or
     * its own position */
#define PLACED(q) (rec_of[q] >= 0 ? rec[rec_of[q]].apos : place[q])
    for (int k = 0; k < f->n_order; k++) {
        int q = f->order[k];
        if (kiln_fuse_kernel_of(f, q) != q || is_leaf(g, q))
            continue;
        loop_kernel lk;
        loop_facts(g, f, q, &lk);
        int L = -1, join = 0;
        size_t slot = 0;
        if (lk.space) {
            for (int e = moff[q]; e < moff[q + 1]; e++) {
                const kiln_node *mn = &g->nodes[mem[e]];
                lk.ops += node_ops(g, mem[e]);
                if (fusable_reduce(mn->op)) {
                    lk.outs++;
                    lk.reds++;
                } else if (f->ext[mem[e]] || mn->op == KILN_OP_TAKE ||
                           mn->op == KILN_OP_ADVANCED_INC_SUBTENSOR) {
                    lk.outs++;
                }
            }
            slot = (size_t)(hash_shape(1469598103934665603ull, lk.space) &
                            (cap - 1));
            for (; open[slot] >= 0; slot = (slot + 1) & (cap - 1))
                if (same_shape(rec[open[slot]].k.space, lk.space)) {
                    L = open[slot];
                    break;
                }
        }
        if (L >= 0) {
            const loop_rec *r = &rec[L];
            int ok = (lk.rop < 0 || r->k.rop < 0 ||
                      (lk.rop == r->k.rop && lk.mask == r->k.mask)) &&
                     r->k.ops + lk.ops <= o->fuse_max_ops &&
                     r->k.outs + lk.outs <= max_outs &&
                     r->k.reds + lk.reds <= 64;
            int outside = -1;   /* latest placement q reads, outside L */
            for (int e = moff[q]; ok && e < moff[q + 1]; e++) {
                int m = mem[e];
                for (int i = 0; ok && i < g->nodes[m].n_in; i++) {
                    int w = operand(g, m, i);
                    if (is_leaf(g, w))
                        continue;
                    int qw = kiln_fuse_kernel_of(f, w);
                    if (qw == q)
                        continue;
                    if (rec_of[qw] == L)
                        ok = !reads_whole(g, m, i);
                    else if (PLACED(qw) > outside)
                        outside = PLACED(qw);
                }
            }
            if (ok && outside < r->apos)
                join = 1;   /* q runs at the anchor */
            else if (ok && r->minc >= k)
                join = 2;   /* the loop runs at q */
        }
        if (join) {
            loop_rec *r = &rec[L];
            if (join == 2) {
                r->anchor = q;
                r->apos = k;
            }
            if (r->k.rop < 0) {
                r->k.rop = lk.rop;
                r->k.mask = lk.mask;
            }
            r->k.ops += lk.ops;
            r->k.outs += lk.outs;
            r->k.reds += lk.reds;
            r->n++;
            rec_of[q] = L;
        } else if (lk.space) {
            rec[n_rec] = (loop_rec){q, k, INT_MAX, lk, 1};
            rec_of[q] = n_rec;
            open[slot] = n_rec++;
        }
        /* q, now placed, reads the loops of its producers: the first such
         * reader outside a loop is the least (positions only grow) */
        for (int e = moff[q]; e < moff[q + 1]; e++) {
            int m = mem[e];
            for (int i = 0; i < g->nodes[m].n_in; i++) {
                int w = operand(g, m, i);
                if (is_leaf(g, w))
                    continue;
                int lw = rec_of[kiln_fuse_kernel_of(f, w)];
                if (lw >= 0 && lw != rec_of[q] && rec[lw].minc == INT_MAX)
                    rec[lw].minc = k;
            }
        }
    }
#undef PLACED
    /* the plan: loops of two or more kernels, each lowered at its anchor;
     * members by anchor in node order (CSR) */
    for (int v = 0; v < g->n_nodes; v++) {
        f->loop[v] = -1;
        int L = rec_of[v];
        if (L >= 0 && rec[L].n > 1 && kiln_fuse_kernel_of(f, v) == v)
            f->loop[v] = rec[L].anchor;
    }
    for (int L = 0; L < n_rec; L++)
        f->n_loops += rec[L].n > 1;
    memset(f->loop_start, 0, sizeof(int) * (nn + 1));
    for (int v = 0; v < g->n_nodes; v++) {
        int a = live[v] ? f->loop[kiln_fuse_kernel_of(f, v)] : -1;
        if (a >= 0)
            f->loop_start[a + 1]++;
    }
    for (size_t a = 1; a <= nn; a++)
        f->loop_start[a] += f->loop_start[a - 1];
    for (int v = 0; v < g->n_nodes; v++) {
        int a = live[v] ? f->loop[kiln_fuse_kernel_of(f, v)] : -1;
        if (a >= 0)
            f->loop_nodes[f->loop_start[a]++] = v;
    }
    for (int a = g->n_nodes; a > 0; a--)
        f->loop_start[a] = f->loop_start[a - 1];
    f->loop_start[0] = 0;
    /* members read outside their loop, or graph outputs */
    for (int v = 0; v < g->n_nodes; v++) {
        if (!live[v])
            continue;
        int lv = f->loop[kiln_fuse_kernel_of(f, v)];
        for (int i = 0; i < g->nodes[v].n_in; i++) {
            int w = operand(g, v, i);
            int lw = f->loop[kiln_fuse_kernel_of(f, w)];
            if (lw >= 0 && lw != lv)
                f->loop_ext[w] = 1;
        }
    }
    for (int i = 0; i < g->n_outputs; i++)
        f->loop_ext[g->outputs[i].value] = 1;
done:
    free(place); free(rec_of); free(moff); free(mem); free(rec); free(open);
    return rc;
}

const kiln_type *kiln_fuse_loop_space(const kiln_graph *g,
                                      const kiln_fusion *f, int anchor)
{
    loop_kernel lk;
    loop_facts(g, f, anchor, &lk);
    return lk.space;
}

/* ---- the plan -------------------------------------------------------- */

/* Dense class ids of the candidates' iteration shapes (rank and dims,
 * symbols by identity) through an open-addressing table; -1 for the
 * others.  Returns the number of classes, or -1 out of memory. */
static int shape_classes(const kiln_graph *g, const char *cand, int *cls)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)g->n_nodes)
        cap *= 2;
    int *tab = malloc(sizeof(int) * cap);   /* node representing a class */
    if (!tab)
        return -1;
    for (size_t i = 0; i < cap; i++)
        tab[i] = -1;
    int n_cls = 0;
    for (int v = 0; v < g->n_nodes; v++) {
        cls[v] = -1;
        if (!cand[v])
            continue;
        const kiln_type *t = &g->nodes[v].type;
        uint64_t h = hash_shape(1469598103934665603ull, t);
        size_t i = (size_t)(h & (cap - 1));
        for (;; i = (i + 1) & (cap - 1)) {
            int r = tab[i];
            if (r < 0) {
                tab[i] = v;
                cls[v] = n_cls++;
                break;
            }
            const kiln_type *rt = &g->nodes[r].type;
            if (rt->rank == t->rank &&
                !memcmp(rt->dims, t->dims, sizeof(int64_t) * (size_t)t->rank)) {
                cls[v] = cls[r];
                break;
            }
        }
    }
    free(tab);
    return n_cls;
}

int kiln_fuse_plan(const kiln_graph *g, const char *live,
                   const kiln_lower_opts *o, kiln_fusion *f, kiln_err *err)
{
    memset(f, 0, sizeof *f);
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    f->group = malloc(sizeof(int) * nn);
    f->order = malloc(sizeof(int) * nn);
    f->region = calloc(nn, 1);
    f->ext = calloc(nn, 1);
    f->split = calloc(nn, 1);
    f->sib = malloc(sizeof(int) * nn);
    f->sib_next = malloc(sizeof(int) * nn);
    f->loop = malloc(sizeof(int) * nn);
    f->loop_start = calloc(nn + 1, sizeof(int));
    f->loop_nodes = malloc(sizeof(int) * nn);
    f->loop_ext = calloc(nn, 1);
    char *cand = calloc(nn, 1);
    int *stage = calloc(nn, sizeof(int));
    int *cls = malloc(sizeof(int) * nn);
    int *tmp = malloc(sizeof(int) * nn);
    size_t nk = 2 * nn + 3;   /* keys 0 .. 2 * n_nodes + 1, shifted by one */
    int *count = calloc(nk, sizeof(int));
    int rc = 0;
    if (!f->group || !f->order || !f->region || !f->ext || !f->split ||
        !f->sib || !f->sib_next || !f->loop || !f->loop_start ||
        !f->loop_nodes || !f->loop_ext || !cand || !stage || !cls || !tmp || !count) {
        rc = nomem(err);
        goto out;
    }
    for (int v = 0; v < g->n_nodes; v++)
        f->group[v] = f->sib[v] = f->sib_next[v] = f->loop[v] = -1;
    /* 1. reductions take the single-use elementwise chains they reduce */
    if ((rc = plan_trees(g, live, o, f, err)))
        goto out;
    /* 2. every other live elementwise node is a region candidate */
    int regions = o->fuse_max_ops > 0 && o->fuse_max_width > 0;
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *n = &g->nodes[v];
        cand[v] = regions && live[v] && is_elemwise(n) &&
                  n->op != KILN_OP_LITERAL && f->group[v] < 0;
    }
    int n_cls = shape_classes(g, cand, cls);
    if (n_cls < 0) {
        rc = nomem(err);
        goto out;
    }
    /* stages: crossing from one region's class to another node, or from
     * a non-candidate kernel to a candidate, is a kernel boundary */
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *n = &g->nodes[v];
        int s = 0;
        for (int i = 0; i < n->n_in; i++) {
            int w = n->in[i];
            int sw = stage[w] + (cand[w] && (!cand[v] || cls[v] != cls[w]));
            if (sw > s)
                s = sw;
        }
        stage[v] = s;
    }
    /* sinking: a candidate moves to the stage of its earliest reader of
     * its class when every other reader is later still, so that a value
     * computed early for a later region's sake joins that region instead
     * of running in a kernel of its own (radon's b * floor joins the
     * likelihood's loop).  Readers first:
     * reverse node order.  Readers' lists: CSR over the live edges. */
    {
        int *off = calloc(nn + 1, sizeof(int)), *rd = NULL;
        int n_edges = 0;
        if (!off) {
            rc = nomem(err);
            goto out;
        }
        for (int v = 0; v < g->n_nodes; v++)
            for (int i = 0; live[v] && i < g->nodes[v].n_in; i++)
                off[g->nodes[v].in[i] + 1]++, n_edges++;
        for (size_t k = 1; k <= nn; k++)
            off[k] += off[k - 1];
        rd = malloc(sizeof(int) * (size_t)(n_edges ? n_edges : 1));
        if (!rd) {
            free(off);
            rc = nomem(err);
            goto out;
        }
        for (int v = 0; v < g->n_nodes; v++)
            for (int i = 0; live[v] && i < g->nodes[v].n_in; i++)
                rd[off[g->nodes[v].in[i]]++] = v;
        for (int v = g->n_nodes; v > 0; v--)   /* back to starts */
            off[v] = off[v - 1];
        off[0] = 0;
        for (int v = g->n_nodes - 1; v >= 0; v--) {
            if (!cand[v])
                continue;
            /* the earliest reader of its class, if every other reader
             * allows it; else it stays (moving where no region of its
             * class is would only make a kernel of its own) */
            int to = -1, cap = -1;
            for (int e = off[v]; e < off[v + 1]; e++) {
                int u = rd[e];
                if (cand[u] && cls[u] == cls[v]) {
                    if (to < 0 || stage[u] < to)
                        to = stage[u];
                } else if (cap < 0 || stage[u] - 1 < cap) {
                    cap = stage[u] - 1;
                }
            }
            if (to > stage[v] && (cap < 0 || to <= cap))
                stage[v] = to;
        }
        free(off);
        free(rd);
    }
    /* the lowering order: live nodes by (2 * stage + candidate, class,
     * node), by two stable counting sorts (class, then the key) */
    int n_live = 0, pos0 = 0;
    for (int v = 0; v < g->n_nodes; v++) {
        n_live += live[v] != 0;
        if (live[v] && cls[v] < 0)
            tmp[pos0++] = v;   /* non-candidates first, in node order */
    }
    {   /* then the candidates, bucketed by class */
        int *head = calloc((size_t)n_cls + 1, sizeof(int));
        if (!head) {
            rc = nomem(err);
            goto out;
        }
        for (int v = 0; v < g->n_nodes; v++)
            if (live[v] && cls[v] >= 0)
                head[cls[v] + 1]++;
        for (int c = 1; c <= n_cls; c++)
            head[c] += head[c - 1];
        for (int v = 0; v < g->n_nodes; v++)
            if (live[v] && cls[v] >= 0)
                tmp[pos0 + head[cls[v]]++] = v;
        free(head);
    }
    memset(count, 0, sizeof(int) * nk);
    for (int k = 0; k < n_live; k++) {
        int v = tmp[k];
        count[2 * stage[v] + cand[v] + 1]++;
    }
    for (size_t k = 1; k < nk; k++)
        count[k] += count[k - 1];
    for (int k = 0; k < n_live; k++) {
        int v = tmp[k];
        f->order[count[2 * stage[v] + cand[v]]++] = v;
    }
    f->n_order = n_live;
    /* 3. cut each (stage, class) run into kernels within the caps */
    if (regions)
        rc = plan_regions(g, live, o, f, cand, stage, cls, err);
    /* 4. sibling reductions, and the order their kernels need */
    if (!rc && regions)
        rc = plan_siblings(g, live, o, f, err);
    if (!rc && f->n_sibling_sets)
        rc = order_kernels(g, live, f, err);
    /* 5. loops: kernels over one space, with the gathers and scatters
     * along it, as one pass */
    if (!rc && regions && o->fuse_loops)
        rc = plan_loops(g, live, o, f, err);
out:
    free(cand); free(stage); free(cls); free(tmp); free(count);
    if (rc)
        kiln_fuse_free(f);
    return rc;
}

const char *kiln_fuse_split_name(int s)
{
    switch (s) {
    case KILN_FUSE_SPLIT_OPS: return "instruction cap (fusion.max_scalar_ops)";
    case KILN_FUSE_SPLIT_WIDTH: return "input cap (fusion.max_width)";
    case KILN_FUSE_SPLIT_OUTPUTS: return "output cap (fusion.max_outputs)";
    default: return NULL;
    }
}

void kiln_fuse_free(kiln_fusion *f)
{
    free(f->group);
    free(f->order);
    free(f->region);
    free(f->ext);
    free(f->split);
    free(f->sib);
    free(f->sib_next);
    free(f->loop);
    free(f->loop_start);
    free(f->loop_nodes);
    free(f->loop_ext);
    memset(f, 0, sizeof *f);
}
