/*
 * manager.c — the pass manager (prefix kiln_rw_; docs/rewrite.md).
 *
 * The passes run in one fixed order, whatever order a list names them in
 * (each pass relies on the ones before it: fold sees flattened sums, cse
 * sees folded literals, pairwise sees flattened and merged n-ary nodes,
 * fusion groups the tree pairwise made).  Each can be switched off by the
 * policy (`passes:`), $KILN_PASSES or kiln_options.passes (`kiln run
 * --passes`).
 */
#define _POSIX_C_SOURCE 200809L
#include "rewrite/rewrite.h"
#include "suggest.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[KILN_PASS_COUNT] = {
    "canonicalize", "reciprocal", "fold", "cse", "promote", "join_slices",
    "pairwise", "fuse", "loops", "lift", "hoist", "recur"};

const char *kiln_rw_pass_name(int i)
{
    return i >= 0 && i < KILN_PASS_COUNT ? names[i] : NULL;
}

void kiln_rw_config_default(kiln_rw_config *c)
{
    c->passes = KILN_PASSES_ALL;
    c->promote_bytes = 1024;
    c->fuse_max_width = 256;
    c->fuse_max_ops = 1024;
    c->fuse_max_outputs = 256;
    c->hoist_max_bytes = INT64_C(256) << 20;
    c->scratch = NULL;
}

static int lookup(const char *s, size_t len)
{
    if (len == 6 && strncmp(s, "fusion", 6) == 0)
        return KILN_PASS_FUSE;
    for (int i = 0; i < KILN_PASS_COUNT; i++)
        if (strlen(names[i]) == len && strncmp(s, names[i], len) == 0)
            return i;
    return -1;
}

int kiln_rw_parse_passes(const char *spec, unsigned *mask, kiln_err *err)
{
    if (!spec)
        return kiln_seterr(err, KILN_ERR_ARG, "passes: NULL list");
    /* a list that starts with '-' or '+' edits *mask (the policy's
     * passes, or all); one that starts with a name, all or none builds
     * from nothing */
    const char *p = spec;
    while (*p == ' ' || *p == ',')
        p++;
    unsigned m = *p == '-' || *p == '+' ? *mask : 0;
    int items = 0;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        int sign = 0;
        if (*p == '-' || *p == '+')
            sign = *p++ == '-' ? -1 : 1;
        const char *s = p;
        while (*p && *p != ',' && *p != ' ')
            p++;
        size_t len = (size_t)(p - s);
        int shown = len > 64 ? 64 : (int)len;
        const char *more = len > 64 ? "..." : "";
        items++;
        if (len == 0)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "passes: '%c' without a pass name after it",
                               sign < 0 ? '-' : '+');
        int whole = (len == 3 && strncmp(s, "all", 3) == 0) ? 1
                    : (len == 4 && strncmp(s, "none", 4) == 0) ? 2 : 0;
        if (whole && sign)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "passes: '%c%.*s' (all and none stand "
                               "alone: write %s)", sign < 0 ? '-' : '+',
                               shown, s,
                               (whole == 1) == (sign > 0) ? "all" : "none");
        if (whole) {
            m = whole == 1 ? KILN_PASSES_ALL : 0;
            continue;
        }
        int i = lookup(s, len);
        if (i < 0) {
            kiln_suggestion sg;
            char hint[96];
            kiln_suggest_init(&sg, s, len);
            for (int k = 0; k < KILN_PASS_COUNT; k++)
                kiln_suggest_offer(&sg, names[k]);
            kiln_suggest_offer(&sg, "all");
            kiln_suggest_offer(&sg, "none");
            return kiln_seterr(err, KILN_ERR_ARG,
                               "unknown pass '%.*s%s'%s (expected all, none, "
                               "or names, each optionally with - or +: "
                               "canonicalize, reciprocal, fold, cse, "
                               "promote, join_slices, pairwise, fuse, loops, lift, "
                               "hoist)",
                               shown, s, more,
                               kiln_suggest_text(&sg, hint, sizeof hint));
        }
        if (sign < 0)
            m &= ~(1u << i);
        else
            m |= 1u << i;
    }
    if (!items)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "passes: empty list (write none for no passes, "
                           "all for every pass)");
    *mask = m;
    return 0;
}

int kiln_rw_config_apply(kiln_rw_config *c, const kiln_policy_knobs *k,
                         const kiln_options *opt, kiln_err *err)
{
    kiln_rw_config_default(c);
    if (k) {
        c->promote_bytes = k->promote_const_bytes;
        c->fuse_max_width = k->fusion_max_width;
        c->fuse_max_ops = k->fusion_max_scalar_ops;
        c->fuse_max_outputs = k->fusion_max_outputs;
        if (k->struct_size >= offsetof(kiln_policy_knobs, hoist_max_bytes) +
                                  sizeof(int64_t))
            c->hoist_max_bytes = k->hoist_max_bytes;
        if (k->passes_set) {
            c->passes = 0;
            for (int i = 0; k->passes && k->passes[i]; i++) {
                int p = lookup(k->passes[i], strlen(k->passes[i]));
                if (p >= 0)
                    c->passes |= 1u << p;
            }
        }
    }
    const char *spec = NULL;
    if (opt && opt->struct_size >= offsetof(kiln_options, passes) +
                                       sizeof(const char *))
        spec = opt->passes;
    if (spec)
        return kiln_rw_parse_passes(spec, &c->passes, err);
    const char *env = getenv("KILN_PASSES");
    if (env && *env && kiln_rw_parse_passes(env, &c->passes, err)) {
        kiln_err_prefix(err, "KILN_PASSES: ");
        return err ? err->code : KILN_ERR_ARG;
    }
    return 0;
}

typedef int (*pass_fn)(kiln_graph **g, const kiln_rw_config *c,
                       kiln_err *err);

/* 0 when pass i certainly changes nothing in g: a cheap scan that saves
 * the rebuild (a pass moves every node: on a 60,000-node gradient graph
 * that is tens of MB of copying). */
static int may_apply(int i, const kiln_graph *g)
{
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *n = &g->nodes[v];
        int op = n->op;
        switch (i) {
        case KILN_PASS_CANONICALIZE:
            if (op == KILN_OP_NEG || op == KILN_OP_CAST ||
                op == KILN_OP_TRUE_DIV)
                return 1;
            /* squeeze(reduction), fill(m, shape op) */
            if (op == KILN_OP_SQUEEZE &&
                kiln_ir_op_info(g->nodes[n->in[0]].op)->category ==
                    KILN_CAT_REDUCE)
                return 1;
            if (op == KILN_OP_FILL && n->n_in == 2 &&
                kiln_ir_op_info(g->nodes[n->in[1]].op)->category ==
                    KILN_CAT_SHAPE)
                return 1;
            if (op == KILN_OP_ADD || op == KILN_OP_MUL || op == KILN_OP_SUB)
                for (int k = 0; k < n->n_in; k++) {
                    int o = g->nodes[n->in[k]].op;
                    if (o == op || o == KILN_OP_LITERAL)
                        return 1;
                }
            break;
        case KILN_PASS_RECIPROCAL:
            if (op == KILN_OP_TRUE_DIV)
                return 1;
            break;
        case KILN_PASS_FOLD:
            /* fold.c folds rank-0 weak elementwise nodes over literals */
            if (n->weak && n->type.rank == 0 &&
                kiln_ir_op_info(op)->category == KILN_CAT_ELEMWISE) {
                int lits = 1;
                for (int k = 0; k < n->n_in && lits; k++)
                    lits = g->nodes[n->in[k]].op == KILN_OP_LITERAL;
                if (lits)
                    return 1;
            }
            break;
        case KILN_PASS_JOIN_SLICES:
            if (op == KILN_OP_JOIN)
                for (int k = 0; k < n->n_in; k++)
                    if (g->nodes[n->in[k]].op == KILN_OP_JOIN)
                        return 1;
            break;
        case KILN_PASS_PAIRWISE:
            if ((op == KILN_OP_ADD || op == KILN_OP_MUL) && n->n_in > 2)
                return 1;
            break;
        default:
            return 1;
        }
    }
    return 0;
}

int kiln_rw_run(kiln_graph **g, const kiln_rw_config *c,
                kiln_rw_trace_fn trace, void *ctx, kiln_err *err)
{
    static const pass_fn fns[KILN_PASS_COUNT] = {
        kiln_rw_canonicalize, kiln_rw_reciprocal, kiln_rw_fold, kiln_rw_cse,
        kiln_rw_promote, kiln_rw_join_slices, kiln_rw_pairwise,
        NULL /* fuse: lowering */, NULL /* loops: lowering */,
        NULL /* lift: lowering */, NULL /* hoist: the driver */};
    /* one node array travels between the passes (rw.c) */
    kiln_rw_scratch scratch = {NULL, 0};
    kiln_rw_config cc = *c;
    cc.scratch = &scratch;
    int rc = 0;
    for (int i = 0; i < KILN_PASS_COUNT && !rc; i++) {
        if (!(c->passes & (1u << i)))
            continue;
        if (fns[i] && may_apply(i, *g)) {
            rc = fns[i](g, &cc, err);
            if (rc) {
                kiln_err_prefix(err, "rewrite pass %s: ", names[i]);
                break;
            }
        }
        if (trace)
            trace(ctx, names[i], *g);
    }
    free(scratch.nodes);
    return rc;
}

typedef struct explain_ctx {
    FILE *out;
    int failed;
} explain_ctx;

static void show(void *vctx, const char *pass, const kiln_graph *g)
{
    explain_ctx *x = vctx;
    kiln_err err = {0, ""};
    char *text = kiln_graph_print(g, &err);
    if (!text) {
        x->failed = 1;
        return;
    }
    fprintf(x->out, "== %s: %d nodes\n%s", pass, g->n_nodes, text);
    free(text);
}

int kiln_rw_explain(const kiln_graph *g, const kiln_rw_config *cfg,
                    FILE *out, kiln_err *err)
{
    kiln_rw_config c = *cfg;
    kiln_graph *w = kiln_ir_clone(g, err);
    if (!w)
        return err ? err->code : KILN_ERR_NOMEM;
    explain_ctx x = {out, 0};
    show(&x, "input", w);
    fprintf(out, "== passes:");
    for (int i = 0; i < KILN_PASS_COUNT; i++)
        fprintf(out, " %s%s", c.passes & (1u << i) ? "" : "-", names[i]);
    fprintf(out, "\n");
    int rc = kiln_rw_run(&w, &c, show, &x, err);
    kiln_graph_free(w);
    if (!rc && x.failed)
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    return rc;
}
