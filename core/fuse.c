/*
 * fuse.c — the fusion planning pass (prefix kiln_fuse_; see fuse.h).
 *
 * Two kinds of group, planned in this order:
 *
 * 1. Scalar regions (plan_regions).  Candidates are the live rank-0
 *    elementwise nodes.  Each node gets a stage: for a candidate, the
 *    largest stage among its operands; for any other node, the largest
 *    of (stage + 1) over candidate operands and stage over the others.
 *    Sorting the live nodes by the key 2 * stage + candidate (ties in
 *    node order) is a topological order in which each stage's candidates
 *    are contiguous and come after everything they read and before every
 *    non-candidate that reads them, so one kernel per stage can compute
 *    them all.  A stage's candidates are cut, in node order, into parts
 *    that keep within the caps; the last member of a part is its root
 *    (the lowering emits the kernel when it visits the root).
 *
 * 2. Elementwise trees (plan_trees), over what regions did not take:
 *    roots in reverse node order, each grown from its root before the
 *    next: a producer joins when all its readers are members (no work is
 *    duplicated), it is not a graph output, its type has exactly the
 *    group's iteration shape (the root's; for a reduction, the reduced
 *    operand's) — so only leaves are broadcast, through their views —
 *    and the group stays within both caps: distinct loaded inputs
 *    (counted exactly) <= max_width, and an upper bound of the program's
 *    instructions <= max_scalar_ops.  A producer that would break a cap
 *    roots a group of its own (the split).
 *
 * Both are linear in the graph: a node is a candidate of one group only.
 */
#include "fuse.h"
#include "lower.h"

#include <stdlib.h>
#include <string.h>

static int nomem(kiln_err *err)
{
    return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
}

static int fusable_reduce(int op)
{
    return op == KILN_OP_SUM || op == KILN_OP_PROD || op == KILN_OP_MAX ||
           op == KILN_OP_MIN || op == KILN_OP_MEAN;
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

/* The operand node v really reads as its input i (a dot reads through a
 * transpose it views in place). */
static int operand(const kiln_graph *g, int v, int i)
{
    return kiln_ir_op_info(g->nodes[v].op)->category == KILN_CAT_DOT
               ? kiln_lower_dot_operand(g, v, i, NULL)
               : g->nodes[v].in[i];
}

/* ---- scalar regions -------------------------------------------------- */

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
                        const char *cand, const int *stage, kiln_err *err)
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
            if (cand[w] && (!cand[v] || stage[v] != stage[w]))
                f->ext[w] = 1;
        }
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (cand[g->outputs[i].value])
            f->ext[g->outputs[i].value] = 1;
    int max_outs = o->fuse_max_outputs > 0 ? o->fuse_max_outputs : 1;
    part p = {0, 0, 0, 0, 0, 0};
    int next_id = 0, cur_stage = -1;
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
        if (p.n > 0 && stage[m] == cur_stage) {
            if (p.ops + add_ops + p.loads + add_loads > o->fuse_max_ops)
                why = KILN_FUSE_SPLIT_OPS;
            else if (p.loads + add_loads > o->fuse_max_width)
                why = KILN_FUSE_SPLIT_WIDTH;
            else if (p.outs + add_outs > max_outs)
                why = KILN_FUSE_SPLIT_OUTPUTS;
        }
        if (p.n > 0 && (stage[m] != cur_stage || why != KILN_FUSE_WHOLE)) {
            close_part(f, &p, why);
            p.n = 0;
        }
        if (p.n == 0) {   /* m starts a part */
            p = (part){k, 0, 0, 0, 0, next_id++};
            cur_stage = stage[m];
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
        if (!red && !is_elemwise(rn))
            continue;
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

/* ---- the plan -------------------------------------------------------- */

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
    char *cand = calloc(nn, 1);
    int *stage = calloc(nn, sizeof(int));
    size_t nk = 2 * nn + 3;   /* keys 0 .. 2 * n_nodes + 1, shifted by one */
    int *count = calloc(nk, sizeof(int));
    if (!f->group || !f->order || !f->region || !f->ext || !f->split ||
        !cand || !stage || !count) {
        free(cand); free(stage); free(count);
        kiln_fuse_free(f);
        return nomem(err);
    }
    int regions = o->fuse_max_ops > 0 && o->fuse_max_width > 0;
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *n = &g->nodes[v];
        f->group[v] = -1;
        cand[v] = regions && live[v] && is_elemwise(n) && n->type.rank == 0 &&
                  n->op != KILN_OP_LITERAL;
        int s = 0;
        for (int i = 0; i < n->n_in; i++) {
            int w = n->in[i];
            int sw = stage[w] + (cand[w] && !cand[v]);
            if (sw > s)
                s = sw;
        }
        stage[v] = s;
    }
    /* the lowering order: live nodes by (2 * stage + candidate), stable */
    for (int v = 0; v < g->n_nodes; v++)
        if (live[v])
            count[2 * stage[v] + cand[v] + 1]++;
    for (size_t k = 1; k < nk; k++)
        count[k] += count[k - 1];
    for (int v = 0; v < g->n_nodes; v++)
        if (live[v])
            f->order[count[2 * stage[v] + cand[v]]++] = v;
    for (int v = 0; v < g->n_nodes; v++)
        f->n_order += live[v] != 0;
    int rc = regions ? plan_regions(g, live, o, f, cand, stage, err) : 0;
    if (!rc)
        rc = plan_trees(g, live, o, f, err);
    free(cand); free(stage); free(count);
    if (rc)
        kiln_fuse_free(f);
    return rc;
}

int kiln_fuse_is_root(const kiln_fusion *f, int v)
{
    return !f->group || f->group[v] < 0 || f->group[v] == v;
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
    memset(f, 0, sizeof *f);
}
