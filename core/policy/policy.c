/*
 * policy.c — YAML backend policies (public kiln_policy_*, internal
 * kiln_plan_*; docs/policy.md).
 *
 * The file is read with libyaml's document API: the whole document is
 * loaded, then walked node by node with the node's start mark at hand, so
 * every error names FILE:LINE:COLUMN of the offending key or value.
 * Nothing is guessed: an unknown key, a value of the wrong YAML type (a
 * quoted "3" where a number belongs), a backend not in the chain or a
 * comparison that can never hold is an error.
 */
#define _POSIX_C_SOURCE 200809L
#include "policy_int.h"
#include "fuse.h"
#include "ir.h"
#include "rewrite/rewrite.h"
#include "yaml_read.h"
#include "suggest.h"        /* name_is_close */
#include "loader.h"         /* kiln_loader_build_top */
#include "install_dirs.h"   /* KILN_DATA_DIR */

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include <sys/stat.h>

#define MAX_CHAIN 16

/* ---- the cost model's built-in figures ------------------------------- */

/* Weight of one instruction of the scalar program, per element, in
 * "operations" (an add is 1).  Indexed by kiln_opcode. */
static const struct {
    const char *name;
    double weight;
} opcode_table[KILN_I_COUNT] = {
    [KILN_I_LOAD] = {"load", 0},     [KILN_I_CONST] = {"const", 0}, [KILN_I_PARAM] = {"param", 0},
    [KILN_I_CAST] = {"cast", 0.5},   [KILN_I_ADD] = {"add", 1},
    [KILN_I_SUB] = {"sub", 1},       [KILN_I_MUL] = {"mul", 1},
    [KILN_I_TRUE_DIV] = {"true_div", 4},
    [KILN_I_NEG] = {"neg", 1},       [KILN_I_ABS] = {"abs", 1},
    [KILN_I_EXP] = {"exp", 10},      [KILN_I_EXPM1] = {"expm1", 12},
    [KILN_I_LOG] = {"log", 10},      [KILN_I_LOG1P] = {"log1p", 12},
    [KILN_I_SQRT] = {"sqrt", 4},     [KILN_I_SQUARE] = {"square", 1},
    [KILN_I_POW] = {"pow", 20},      [KILN_I_SIGMOID] = {"sigmoid", 12},
    [KILN_I_SOFTPLUS] = {"softplus", 15}, [KILN_I_TANH] = {"tanh", 12},
    [KILN_I_SIN] = {"sin", 10},      [KILN_I_COS] = {"cos", 10},
    [KILN_I_ERF] = {"erf", 15},      [KILN_I_ERFC] = {"erfc", 15},
    [KILN_I_GAMMALN] = {"gammaln", 40}, [KILN_I_DIGAMMA] = {"digamma", 40},
    [KILN_I_MAXIMUM] = {"maximum", 1}, [KILN_I_MINIMUM] = {"minimum", 1},
    [KILN_I_WHERE] = {"where", 1},
    [KILN_I_EQ] = {"eq", 1}, [KILN_I_NE] = {"ne", 1}, [KILN_I_LT] = {"lt", 1},
    [KILN_I_LE] = {"le", 1}, [KILN_I_GT] = {"gt", 1}, [KILN_I_GE] = {"ge", 1},
    [KILN_I_AND] = {"and", 1}, [KILN_I_OR] = {"or", 1},
    [KILN_I_NOT] = {"not", 1},
    [KILN_I_TRIGAMMA] = {"trigamma", 40},
    [KILN_I_TAKE] = {"take", 2},
    /* ABI 1.7 (issue 25): runtime calls; the incomplete gamma and beta
     * functions iterate (tens to thousands of terms) */
    [KILN_I_FLOOR] = {"floor", 4}, [KILN_I_CEIL] = {"ceil", 4},
    [KILN_I_TRUNC] = {"trunc", 4}, [KILN_I_RINT] = {"rint", 4},
    [KILN_I_ROUND] = {"round", 4}, [KILN_I_LOG1MEXP] = {"log1mexp", 15},
    [KILN_I_ERFCX] = {"erfcx", 20}, [KILN_I_ERFINV] = {"erfinv", 60},
    [KILN_I_ERFCINV] = {"erfcinv", 60}, [KILN_I_MOD] = {"mod", 8},
    [KILN_I_GAMMAINC] = {"gammainc", 200},
    [KILN_I_GAMMAINCC] = {"gammaincc", 200},
    [KILN_I_BETAINC] = {"betainc", 300},
    [KILN_I_GAMMAINC_DA] = {"gammainc_da", 300},
    [KILN_I_BETAINC_DA] = {"betainc_da", 600},
    [KILN_I_BETAINC_DB] = {"betainc_db", 600},
    /* ABI 1.9 (issue 28): series of up to ~40 terms */
    [KILN_I_I0E] = {"i0e", 60}, [KILN_I_I1E] = {"i1e", 60},
};

/* Weights that are not opcodes: per element of every kernel (the store
 * and the loop), per element copied (JOIN), per index (GATHER, SCATTER),
 * per multiply-add (DOT). */
enum { W_ELEMENT, W_COPY, W_INDEX, W_FMA, N_EXTRA };
static const char *const extra_names[N_EXTRA] = {"element", "copy", "index",
                                                 "fma"};
static const double extra_default[N_EXTRA] = {1, 1, 2, 2};

/* Per-backend figures (docs/policy.md, from docs/performance.md). */
typedef struct backend_model {
    char name[64];
    double compile_ms;          /* per kernel */
    double compile_ms_per_op;   /* per instruction of the program */
    double compile_ms_per_input;
    double call_ns;             /* per call (dispatch, views) */
    double ns_per_op;           /* per unit of program cost */
    double ns_per_index;        /* per unit of GATHER/SCATTER cost */
    double ns_per_copy;         /* per unit of JOIN cost */
} backend_model;

static const backend_model builtin_models[] = {
    {"interp", 0.015, 0.0005, 0.0005, 70, 1.0, 3.0, 1.0},
    {"tcc", 0.25, 0.002, 0.005, 100, 1.5, 12.0, 1.0},
    {"llvm", 120, 1.5, 1.5, 60, 0.25, 3.0, 1.0},
};
#define N_BUILTIN_MODELS 3

/* tiers: the trigger's budget and the tier-1 compile model: CPU ms of one
 * llvm -O2 compile once its compiler is loaded, fitted by least squares
 * (relative error) to the tier-up compiles of radon, eight schools and
 * pooled 18/24 and 48/64 on the development machine (docs/performance.md,
 * "Tier-up budget"; the cost model's llvm compile_ms, 120 ms, includes
 * loading libLLVM, which a tier-up pays once per process). */
#define TIER_BUDGET_DEFAULT 0.1
static const double tier_compile_default[3] = {10, 0.25, 0.15};

static const char *const kind_names[] = {NULL, "elemwise", "reduce", "join",
                                         "gather", "scatter", "dot",
                                         "loop", "scan", "recur",
                                         "linalg", "ode", "topk"};
#define N_KINDS 13

/* The rewrite passes a `passes:` list may name (docs/policy.md), in the
 * order they run (core/rewrite/manager.c); "fusion" is also accepted for
 * "fuse", as on the command line. */
static const char *const pass_names[] = {
    "canonicalize", "reciprocal", "fold", "cse", "promote", "join_slices",
    "pairwise", "fuse", "loops", "lift", "hoist", "recur", NULL};

/* ---- the policy ----------------------------------------------------- */

typedef struct range {
    int set;                   /* the matcher is present */
    int has_lo, lo_incl, has_hi, hi_incl;
    double lo, hi;
} range;

typedef struct rule {
    char *name;
    int use;                   /* chain index */
    int n_ops;
    char **ops;                /* NULL: no op matcher */
    range width, cost, elements, scalar_ops;
    int pays_off;              /* model index, or -1 */
} rule;

struct kiln_policy {
    int refs;
    pthread_mutex_t lock;
    char *source;
    int n_chain;
    char *chain[MAX_CHAIN];
    int dflt;                  /* chain index */
    int n_rules;
    rule *rules;
    /* cost model */
    double weights[KILN_I_COUNT];
    double extra[N_EXTRA];
    int64_t symbolic_elements;
    double expected_calls;
    int n_models;
    backend_model *models;
    /* knobs */
    int fusion_max_width, fusion_max_scalar_ops, fusion_max_outputs;
    int64_t promote_const_bytes;
    int64_t hoist_max_bytes;     /* hoist.max_size */
    int llvm_opt_level, llvm_fast_math, llvm_opt_set, llvm_fast_set;
    int llvm_generic;           /* llvm.generic_target */
    int cache_enabled;
    int64_t cache_max_bytes;
    char **passes;             /* NULL-terminated */
    int passes_set;
    /* tiers: (tiers_set: the section is present) */
    int tiers_set, tiers_enabled, tier_preload;
    char **tier0;              /* NULL-terminated; NULL: the default */
    char *tier1;               /* NULL: the default */
    int tier_threads, tier_sample_every;
    double tier_budget, tier_min_gain_ns;
    double tier_compile_ms[3];  /* the tier-1 compile model: per kernel,
                                   per instruction, per input */
    /* blas: (docs/policy.md "BLAS and kiln's matrix-vector loop") */
    int blas_gemv;             /* 0 auto, 1 blas, 2 loop */
    int64_t blas_loop_max_cols[2]; /* A x, A^T y; -1: the built-in table */
};

static void rule_free(rule *r)
{
    free(r->name);
    for (int i = 0; i < r->n_ops; i++)
        free(r->ops[i]);
    free(r->ops);
}

static void strv_free(char **v)
{
    for (int i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static void policy_destroy(kiln_policy *p)
{
    free(p->source);
    for (int i = 0; i < p->n_chain; i++)
        free(p->chain[i]);
    for (int i = 0; i < p->n_rules; i++)
        rule_free(&p->rules[i]);
    free(p->rules);
    free(p->models);
    strv_free(p->passes);
    strv_free(p->tier0);
    free(p->tier1);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void kiln_policy_free(kiln_policy *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    int left = --p->refs;
    pthread_mutex_unlock(&p->lock);
    if (left == 0)
        policy_destroy(p);
}

static kiln_policy *policy_ref(kiln_policy *p)
{
    pthread_mutex_lock(&p->lock);
    p->refs++;
    pthread_mutex_unlock(&p->lock);
    return p;
}

static kiln_policy *policy_new(const char *source)
{
    kiln_policy *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->refs = 1;
    pthread_mutex_init(&p->lock, NULL);
    p->source = strdup(source);
    p->models = malloc(sizeof builtin_models);
    if (!p->source || !p->models) {
        policy_destroy(p);
        return NULL;
    }
    memcpy(p->models, builtin_models, sizeof builtin_models);
    p->n_models = N_BUILTIN_MODELS;
    for (int i = 0; i < KILN_I_COUNT; i++)
        p->weights[i] = opcode_table[i].weight;
    memcpy(p->extra, extra_default, sizeof p->extra);
    p->symbolic_elements = 1024;
    p->expected_calls = 1000;
    p->fusion_max_width = 256;
    p->fusion_max_scalar_ops = 1024;
    p->fusion_max_outputs = 256;
    p->promote_const_bytes = 1024;
    p->hoist_max_bytes = INT64_C(256) << 20;
    p->llvm_opt_level = 2;
    p->cache_enabled = 1;
    p->cache_max_bytes = (int64_t)1 << 30;
    p->tiers_enabled = 1;      /* once a `tiers:` section is present */
    p->tier_budget = TIER_BUDGET_DEFAULT;
    memcpy(p->tier_compile_ms, tier_compile_default,
           sizeof p->tier_compile_ms);
    p->tier_min_gain_ns = 20;
    p->tier_sample_every = 64;
    p->blas_loop_max_cols[0] = p->blas_loop_max_cols[1] = -1;
    return p;
}

/* ---- reading YAML (core/front/yaml_read.c) ------------------------------ */

typedef kiln_yaml reader;


static int valid_backend_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

/* kiln's own backends.  Another name may be a third-party plugin's, but
 * a name within a typo of one of these (`lvm`, `tcc2`, `intrp`) that no
 * installed plugin has is a misspelling: silently falling back from it
 * would measure the wrong backend. */
static const char *const kiln_backend_names[] = {"interp", "tcc", "llvm",
                                                 NULL};

/* 1 when a plugin of that name is installed where the loader looks (a
 * third-party `cc` or `gcc` is one edit from `tcc` and is no typo).
 * Reads the plugin directories, so only called for a near name. */
static int backend_installed(const char *name)
{
    char buf[1024];
    const char *list = kiln_loader_names(NULL, buf, sizeof buf);
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n))
            return 1;
        p = e ? e + 1 : p + len;
    }
    return 0;
}

/* An error at n when `name` is a misspelling of one of kiln's backends
 * ("did you mean 'llvm'?"), else 0. */
static int check_backend_typo(reader *r, yaml_node_t *n, const char *what,
                              const char *name)
{
    for (int i = 0; kiln_backend_names[i]; i++)
        if (!strcmp(name, kiln_backend_names[i]))
            return 0;
    for (int i = 0; kiln_backend_names[i]; i++)
        if (name_is_close(kiln_backend_names[i], name, strlen(name)) &&
            !backend_installed(name))
            return kiln_yaml_error(r, n,
                                   "%s: unknown backend '%s' (did you mean "
                                   "'%s'? kiln's backends are interp, tcc "
                                   "and llvm)", what, name,
                                   kiln_backend_names[i]);
    return 0;
}

/* A backend name given in the file (backends:, tiers:): a string of
 * [a-z0-9_], shorter than 64 bytes, and no misspelling of kiln's own. */
static int get_backend_name(reader *r, yaml_node_t *n, const char *what,
                            const char **out)
{
    if (kiln_yaml_string(r, n, what, out))
        return -1;
    if (!valid_backend_name(*out))
        return kiln_yaml_error(r, n,
                               "%s: bad backend name '%s' (expected "
                               "[a-z0-9_]+, shorter than 64 bytes)",
                               what, *out);
    return check_backend_typo(r, n, what, *out);
}

static int chain_index(const kiln_policy *p, const char *name)
{
    for (int i = 0; i < p->n_chain; i++)
        if (!strcmp(p->chain[i], name))
            return i;
    return -1;
}

/* A backend named in `use:` / `default:`: must be in the chain. */
static int get_backend_ref(reader *r, yaml_node_t *n, const char *what,
                           int *out)
{
    const char *s;
    if (kiln_yaml_string(r, n, what, &s))
        return -1;
    int i = chain_index((kiln_policy *)r->user, s);
    if (i < 0) {
        char list[512] = "";
        size_t len = 0;
        for (int k = 0;
             k < ((kiln_policy *)r->user)->n_chain && len < sizeof list; k++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                    k ? ", " : "",
                                    ((kiln_policy *)r->user)->chain[k]);
        return kiln_yaml_error(
            r, n, "%s: unknown backend '%s' (not in backends: [%s])", what, s,
            list);
    }
    *out = i;
    return 0;
}

/* ---- backends: ------------------------------------------------------ */

static int read_chain(reader *r, yaml_node_t *n)
{
    kiln_policy *p = r->user;
    if (kiln_yaml_expect_list(r, n, "backends"))
        return -1;
    yaml_node_item_t *b = n->data.sequence.items.start;
    yaml_node_item_t *e = n->data.sequence.items.top;
    if (b == e)
        return kiln_yaml_error(
            r, n,
            "backends: the list is empty (name at least one "
            "backend, e.g. [interp])");
    for (yaml_node_item_t *q = b; q < e; q++) {
        yaml_node_t *it = kiln_yaml_node(r, *q);
        const char *s;
        if (!it || get_backend_name(r, it, "backends", &s))
            return -1;
        if (chain_index(p, s) >= 0)
            return kiln_yaml_error(r, it, "backends: '%s' is listed twice", s);
        if (p->n_chain >= MAX_CHAIN - 1)
            return kiln_yaml_error(r, it, "backends: more than %d backends",
                        MAX_CHAIN - 1);
        if (!(p->chain[p->n_chain] = strdup(s)))
            return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
        p->n_chain++;
    }
    return 0;
}

/* ---- rules: --------------------------------------------------------- */

static int cmp_pair(reader *r, const char *key, yaml_node_t *k,
                    yaml_node_t *v, void *ctx)
{
    range *rg = ctx;
    double x;
    int lo = 0, incl = 0;
    if (!strcmp(key, "lt"))
        lo = 0, incl = 0;
    else if (!strcmp(key, "le"))
        lo = 0, incl = 1;
    else if (!strcmp(key, "gt"))
        lo = 1, incl = 0;
    else if (!strcmp(key, "ge"))
        lo = 1, incl = 1;
    else if (!strcmp(key, "eq")) {
        if (kiln_yaml_number(r, v, "eq", &x))
            return -1;
        if (rg->has_lo || rg->has_hi)
            return kiln_yaml_error(r, k,
                                   "bad comparison: 'eq' cannot be combined "
                                   "with lt/le/gt/ge");
        rg->has_lo = rg->has_hi = rg->lo_incl = rg->hi_incl = 1;
        rg->lo = rg->hi = x;
        return 0;
    } else
        return kiln_yaml_error(r, k,
                               "bad comparison '%s' (expected lt, le, gt, ge "
                               "or eq)",
                               key);
    if (kiln_yaml_number(r, v, key, &x))
        return -1;
    if (lo) {
        if (rg->has_lo)
            return kiln_yaml_error(r, k,
                                   "bad comparison: two lower bounds (gt/ge)");
        rg->has_lo = 1;
        rg->lo = x;
        rg->lo_incl = incl;
    } else {
        if (rg->has_hi)
            return kiln_yaml_error(r, k,
                                   "bad comparison: two upper bounds (lt/le)");
        rg->has_hi = 1;
        rg->hi = x;
        rg->hi_incl = incl;
    }
    return 0;
}

static int read_range(reader *r, yaml_node_t *k, yaml_node_t *v,
                      const char *what, range *rg)
{
    memset(rg, 0, sizeof *rg);
    rg->set = 1;
    if (v->type != YAML_MAPPING_NODE)
        return kiln_yaml_error(r, v,
                               "%s: expected a comparison such as {gt: 64} or "
                               "{ge: 1, lt: 8}, got %s",
                               what, kiln_yaml_type_word(v));
    if (v->data.mapping.pairs.start == v->data.mapping.pairs.top)
        return kiln_yaml_error(
            r, v, "%s: empty comparison (use lt, le, gt, ge or eq)", what);
    if (kiln_yaml_each_pair(r, v, what, cmp_pair, rg))
        return -1;
    if (rg->has_lo && rg->has_hi &&
        (rg->lo > rg->hi ||
         (rg->lo == rg->hi && !(rg->lo_incl && rg->hi_incl))))
        return kiln_yaml_error(
            r, k, "%s: bad comparison: no value is %s %g and %s %g", what,
            rg->lo_incl ? ">=" : ">", rg->lo, rg->hi_incl ? "<=" : "<",
            rg->hi);
    /* width, elements and scalar_ops are counts: whole numbers >= 0 */
    if (strcmp(what, "cost") != 0) {
        double lo = !rg->has_lo ? 0
                    : rg->lo_incl ? ceil(rg->lo) : floor(rg->lo) + 1;
        double hi = !rg->has_hi ? HUGE_VAL
                    : rg->hi_incl ? floor(rg->hi) : ceil(rg->hi) - 1;
        if (lo < 0)
            lo = 0;
        if (lo > hi)
            return kiln_yaml_error(
                r, k,
                "%s: bad comparison: no count (a whole number "
                ">= 0) satisfies it",
                what);
    }
    return 0;
}

static int valid_op_name(const char *s)
{
    if (kiln_ir_op_lookup(s) >= 0 || !strcmp(s, "fused"))
        return 1;
    for (int i = 1; i < N_KINDS; i++)
        if (!strcmp(s, kind_names[i]))
            return 1;
    return 0;
}

static int model_index(const kiln_policy *p, const char *name)
{
    for (int i = 0; i < p->n_models; i++)
        if (!strcmp(p->models[i].name, name))
            return i;
    return -1;
}

static int when_pair(reader *r, const char *key, yaml_node_t *k,
                     yaml_node_t *v, void *ctx)
{
    rule *ru = ctx;
    if (!strcmp(key, "op")) {
        if (v->type == YAML_SCALAR_NODE) {
            const char *s;
            if (kiln_yaml_string(r, v, "op", &s))
                return -1;
            if (!valid_op_name(s))
                return kiln_yaml_error(
                    r, v,
                    "op: unknown op '%s' (an op of docs/ops.md"
                    ", a kernel kind: elemwise, reduce, join, gather"
                    ", scatter, dot, loop, or fused)",
                    s);
            ru->ops = calloc(1, sizeof *ru->ops);
            if (!ru->ops || !(ru->ops[0] = strdup(s)))
                return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
            ru->n_ops = 1;
            return 0;
        }
        if (kiln_yaml_expect_list(r, v, "op"))
            return -1;
        yaml_node_item_t *b = v->data.sequence.items.start;
        yaml_node_item_t *e = v->data.sequence.items.top;
        if (b == e)
            return kiln_yaml_error(r, v, "op: the list is empty");
        ru->ops = calloc((size_t)(e - b), sizeof *ru->ops);
        if (!ru->ops)
            return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
        for (yaml_node_item_t *q = b; q < e; q++) {
            yaml_node_t *it = kiln_yaml_node(r, *q);
            const char *s;
            if (!it || kiln_yaml_string(r, it, "op", &s))
                return -1;
            if (!valid_op_name(s))
                return kiln_yaml_error(r, it, "op: unknown op '%s' (an op of "
                            "docs/ops.md, a kernel kind: elemwise, reduce, "
                            "join, gather, scatter, dot, loop, or fused)", s);
            if (!(ru->ops[ru->n_ops] = strdup(s)))
                return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
            ru->n_ops++;
        }
        return 0;
    }
    if (!strcmp(key, "width"))
        return read_range(r, k, v, "width", &ru->width);
    if (!strcmp(key, "cost"))
        return read_range(r, k, v, "cost", &ru->cost);
    if (!strcmp(key, "elements"))
        return read_range(r, k, v, "elements", &ru->elements);
    if (!strcmp(key, "scalar_ops"))
        return read_range(r, k, v, "scalar_ops", &ru->scalar_ops);
    if (!strcmp(key, "pays_off")) {
        const char *s;
        if (kiln_yaml_string(r, v, "pays_off", &s))
            return -1;
        int m = model_index((kiln_policy *)r->user, s);
        if (m < 0)
            return kiln_yaml_error(r, v,
                                   "pays_off: no cost model for backend '%s' "
                                   "(add it under cost_model: backends:)",
                                   s);
        ru->pays_off = m;
        return 0;
    }
    return kiln_yaml_unknown_key(r, k, "when", key,
                       "op, width, cost, elements, scalar_ops, pays_off");
}

typedef struct rule_ctx {
    rule *ru;
    yaml_node_t *use;
} rule_ctx;

static int rule_pair(reader *r, const char *key, yaml_node_t *k,
                     yaml_node_t *v, void *ctx)
{
    rule_ctx *rc = ctx;
    if (!strcmp(key, "name")) {
        const char *s;
        if (kiln_yaml_string(r, v, "name", &s))
            return -1;
        free(rc->ru->name);
        if (!(rc->ru->name = strdup(s)))
            return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
        return 0;
    }
    if (!strcmp(key, "when"))
        return kiln_yaml_is_null(v)
                   ? 0
                   : kiln_yaml_each_pair(r, v, "when", when_pair, rc->ru);
    if (!strcmp(key, "use")) {
        rc->use = v;
        return get_backend_ref(r, v, "use", &rc->ru->use);
    }
    return kiln_yaml_unknown_key(r, k, "rule", key, "name, when, use");
}

static int read_rules(reader *r, yaml_node_t *n)
{
    kiln_policy *p = r->user;
    if (kiln_yaml_expect_list(r, n, "rules"))
        return -1;
    yaml_node_item_t *b = n->data.sequence.items.start;
    yaml_node_item_t *e = n->data.sequence.items.top;
    p->rules = calloc((size_t)(e - b) + 1, sizeof *p->rules);
    if (!p->rules)
        return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
    for (yaml_node_item_t *q = b; q < e; q++) {
        yaml_node_t *it = kiln_yaml_node(r, *q);
        rule *ru = &p->rules[p->n_rules++];
        ru->pays_off = -1;
        ru->use = -1;
        rule_ctx rc = {ru, NULL};
        if (!it || kiln_yaml_expect_map(r, it, "rules: each rule"))
            return -1;
        if (kiln_yaml_each_pair(r, it, "rule", rule_pair, &rc))
            return -1;
        if (!rc.use)
            return kiln_yaml_error(r, it,
                                   "rule %d: no 'use:' (the backend the rule "
                                   "picks)",
                                   p->n_rules);
        if (!ru->name) {
            char nm[32];
            snprintf(nm, sizeof nm, "rule %d", p->n_rules);
            if (!(ru->name = strdup(nm)))
                return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
        }
    }
    return 0;
}

/* ---- cost_model: ---------------------------------------------------- */

static int weight_pair(reader *r, const char *key, yaml_node_t *k,
                       yaml_node_t *v, void *ctx)
{
    kiln_policy *p = ctx;
    double x;
    for (int i = 0; i < KILN_I_COUNT; i++) {
        if (opcode_table[i].name && !strcmp(key, opcode_table[i].name)) {
            if (kiln_yaml_number(r, v, key, &x))
                return -1;
            if (x < 0)
                return kiln_yaml_error(
                    r, v, "weights: %s: a weight must be >= 0", key);
            p->weights[i] = x;
            return 0;
        }
    }
    for (int i = 0; i < N_EXTRA; i++) {
        if (!strcmp(key, extra_names[i])) {
            if (kiln_yaml_number(r, v, key, &x))
                return -1;
            if (x < 0)
                return kiln_yaml_error(
                    r, v, "weights: %s: a weight must be >= 0", key);
            p->extra[i] = x;
            return 0;
        }
    }
    return kiln_yaml_error(
        r, k,
        "weights: unknown op '%s' (an opcode such as add, exp, "
        "gammaln, or element, copy, index, fma)",
        key);
}

static int model_field_pair(reader *r, const char *key, yaml_node_t *k,
                            yaml_node_t *v, void *ctx)
{
    backend_model *m = ctx;
    static const char *const names[] = {
        "compile_ms", "compile_ms_per_op", "compile_ms_per_input", "call_ns",
        "ns_per_op", "ns_per_index", "ns_per_copy"};
    double *fields[] = {&m->compile_ms, &m->compile_ms_per_op,
                        &m->compile_ms_per_input, &m->call_ns, &m->ns_per_op,
                        &m->ns_per_index, &m->ns_per_copy};
    for (int i = 0; i < 7; i++) {
        if (!strcmp(key, names[i])) {
            if (kiln_yaml_number(r, v, key, fields[i]))
                return -1;
            if (*fields[i] < 0)
                return kiln_yaml_error(r, v, "%s: must be >= 0", key);
            return 0;
        }
    }
    return kiln_yaml_unknown_key(r, k, m->name, key,
                       "compile_ms, compile_ms_per_op, compile_ms_per_input, "
                       "call_ns, ns_per_op, ns_per_index, ns_per_copy");
}

static int models_pair(reader *r, const char *key, yaml_node_t *k,
                       yaml_node_t *v, void *ctx)
{
    kiln_policy *p = ctx;
    if (!valid_backend_name(key))
        return kiln_yaml_error(
            r, k, "cost_model: backends: bad backend name '%s'", key);
    if (check_backend_typo(r, k, "cost_model: backends", key))
        return -1;
    int m = model_index(p, key);
    if (m < 0) {
        backend_model *nm = realloc(p->models,
                                    sizeof *nm * (size_t)(p->n_models + 1));
        if (!nm)
            return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
        p->models = nm;
        m = p->n_models++;
        nm[m] = builtin_models[1]; /* an unknown compiler: tcc's figures */
        snprintf(nm[m].name, sizeof nm[m].name, "%s", key);
    }
    return kiln_yaml_each_pair(r, v, key, model_field_pair, &p->models[m]);
}

static int cost_pair(reader *r, const char *key, yaml_node_t *k,
                     yaml_node_t *v, void *ctx)
{
    kiln_policy *p = ctx;
    if (!strcmp(key, "symbolic_elements"))
        return kiln_yaml_int(r, v, key, 1, (int64_t)1 << 50,
                             &p->symbolic_elements);
    if (!strcmp(key, "expected_calls")) {
        if (kiln_yaml_number(r, v, key, &p->expected_calls))
            return -1;
        if (p->expected_calls < 0)
            return kiln_yaml_error(r, v, "expected_calls: must be >= 0");
        return 0;
    }
    if (!strcmp(key, "weights"))
        return kiln_yaml_each_pair(r, v, "weights", weight_pair, p);
    if (!strcmp(key, "backends"))
        return kiln_yaml_each_pair(r, v, "cost_model: backends", models_pair,
                                   p);
    return kiln_yaml_unknown_key(r, k, "cost_model", key,
                       "symbolic_elements, expected_calls, weights, "
                       "backends");
}

/* ---- knobs ---------------------------------------------------------- */

static int fusion_pair(reader *r, const char *key, yaml_node_t *k,
                       yaml_node_t *v, void *ctx)
{
    kiln_policy *p = ctx;
    int64_t x;
    if (!strcmp(key, "max_width")) {
        if (kiln_yaml_int(r, v, key, 0, 1 << 20, &x))
            return -1;
        p->fusion_max_width = (int)x;
        return 0;
    }
    if (!strcmp(key, "max_scalar_ops")) {
        if (kiln_yaml_int(r, v, key, 0, 1 << 24, &x))
            return -1;
        p->fusion_max_scalar_ops = (int)x;
        return 0;
    }
    if (!strcmp(key, "max_outputs")) {
        if (kiln_yaml_int(r, v, key, 0, 1 << 16, &x))
            return -1;
        p->fusion_max_outputs = (int)x;
        return 0;
    }
    return kiln_yaml_unknown_key(r, k, "fusion", key,
                                 "max_width, max_scalar_ops, max_outputs");
}

static int constants_pair(reader *r, const char *key, yaml_node_t *k,
                          yaml_node_t *v, void *ctx)
{
    kiln_policy *p = ctx;
    if (!strcmp(key, "promote_bytes"))
        return kiln_yaml_int(r, v, key, 0, INT64_C(1) << 50,
                       &p->promote_const_bytes);
    return kiln_yaml_unknown_key(r, k, "constants", key, "promote_bytes");
}

static int hoist_pair(reader *r, const char *key, yaml_node_t *k,
                      yaml_node_t *v, void *ctx)
{
    kiln_policy *p = ctx;
    if (!strcmp(key, "max_size"))
        return kiln_yaml_size(r, v, "max_size", &p->hoist_max_bytes);
    return kiln_yaml_unknown_key(r, k, "hoist", key, "max_size");
}

static int llvm_pair(reader *r, const char *key, yaml_node_t *k,
                     yaml_node_t *v, void *ctx)
{
    kiln_policy *p = ctx;
    if (!strcmp(key, "opt_level")) {
        int64_t x;
        if (kiln_yaml_int(r, v, key, 1, 3, &x))
            return -1;
        p->llvm_opt_level = (int)x;
        p->llvm_opt_set = 1;
        return 0;
    }
    if (!strcmp(key, "fast_math")) {
        p->llvm_fast_set = 1;
        return kiln_yaml_bool(r, v, key, &p->llvm_fast_math);
    }
    if (!strcmp(key, "generic_target"))
        return kiln_yaml_bool(r, v, key, &p->llvm_generic);
    return kiln_yaml_unknown_key(r, k, "llvm", key,
                       "opt_level, fast_math, generic_target");
}

static int read_strv(reader *r, yaml_node_t *v, const char *what,
                     char ***out, const char *const *allowed)
{
    if (kiln_yaml_expect_list(r, v, what))
        return -1;
    yaml_node_item_t *b = v->data.sequence.items.start;
    yaml_node_item_t *e = v->data.sequence.items.top;
    char **sv = calloc((size_t)(e - b) + 1, sizeof *sv);
    if (!sv)
        return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
    strv_free(*out);
    *out = sv;
    int n = 0;
    for (yaml_node_item_t *q = b; q < e; q++) {
        yaml_node_t *it = kiln_yaml_node(r, *q);
        const char *s;
        if (!it || kiln_yaml_string(r, it, what, &s))
            return -1;
        if (allowed) {
            int okay = 0;
            char list[256] = "";
            size_t len = 0;
            for (int i = 0; allowed[i]; i++) {
                okay |= !strcmp(allowed[i], s);
                len += (size_t)snprintf(list + len, sizeof list - len,
                                        "%s%s", i ? ", " : "", allowed[i]);
            }
            okay |= allowed == pass_names && !strcmp(s, "fusion");
            if (!okay)
                return kiln_yaml_error(
                    r, it,
                    "%s: unknown pass '%s' (expected one of: "
                    "%s)",
                    what, s, list);
        }
        if (!(sv[n++] = strdup(s)))
            return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
    }
    return 0;
}

static int cache_pair(reader *r, const char *key, yaml_node_t *k,
                      yaml_node_t *v, void *ctx)
{
    kiln_policy *p = ctx;
    if (!strcmp(key, "enabled"))
        return kiln_yaml_bool(r, v, key, &p->cache_enabled);
    if ((!strcmp(key, "dir") || !strcmp(key, "read_only")) &&
        kiln_yaml_is_null(v))
        return 0;                       /* names nothing: the default */
    if (!strcmp(key, "dir") || !strcmp(key, "read_only"))
        return kiln_yaml_error(r, k, "cache.%s: a policy may not name a "
                               "directory (a policy can come with a model; "
                               "kiln loads code from its cache directories, "
                               "so they come only from you: $KILN_CACHE_DIR, "
                               "$KILN_CACHE_PATH or cache.%s in "
                               "~/.config/kiln/config.yaml; docs/cache.md)",
                               key, key);
    if (!strcmp(key, "max_size"))
        return kiln_yaml_size(r, v, "max_size", &p->cache_max_bytes);
    return kiln_yaml_unknown_key(r, k, "cache", key,
                       "enabled, dir, max_size, read_only");
}

/* ---- tiers: --------------------------------------------------------- */

static const char *const tier0_default[] = {"interp", "tcc", NULL};
static const char tier1_default[] = "llvm";

static const char *const *tier0_of(const kiln_policy *p)
{
    return p->tier0 ? (const char *const *)p->tier0 : tier0_default;
}

typedef struct tiers_ctx {
    yaml_node_t *tier0, *tier1;  /* their values, for the check after */
    yaml_node_t *budget, *ratio; /* keys: not both */
} tiers_ctx;

/* A number > 0 (min_ok 0) or >= 0 (min_ok 1) for tiers.<key>. */
static int tier_number(reader *r, yaml_node_t *v, const char *key,
                       int min_ok, double *out)
{
    double x;
    if (kiln_yaml_number(r, v, key, &x))
        return -1;
    if (min_ok ? !(x >= 0) : !(x > 0))
        return kiln_yaml_error(r, v, "%s: must be %s 0, got '%s'", key,
                               min_ok ? ">=" : ">", kiln_yaml_sval(v));
    *out = x;
    return 0;
}

/* Item i of tier0's value: the value itself when it is one name. */
static yaml_node_t *tier0_item(reader *r, yaml_node_t *v, int i)
{
    return v->type == YAML_SEQUENCE_NODE
               ? kiln_yaml_node(r, v->data.sequence.items.start[i])
               : v;
}

static int read_tier0(reader *r, yaml_node_t *v)
{
    kiln_policy *p = r->user;
    int n = 1;
    if (v->type == YAML_SEQUENCE_NODE) {
        ptrdiff_t len = v->data.sequence.items.top -
                        v->data.sequence.items.start;
        if (len == 0)
            return kiln_yaml_error(r, v, "tier0: the list is empty (name at "
                                   "least one backend, e.g. [interp])");
        if (len > MAX_CHAIN - 1)
            return kiln_yaml_error(r, tier0_item(r, v, MAX_CHAIN - 1),
                                   "tier0: more than %d backends",
                                   MAX_CHAIN - 1);
        n = (int)len;
    } else if (v->type != YAML_SCALAR_NODE) {
        return kiln_yaml_error(r, v, "tier0: expected a backend name or a "
                               "list of them, got %s",
                               kiln_yaml_type_word(v));
    }
    char **sv = calloc((size_t)n + 1, sizeof *sv);
    if (!sv)
        return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
    strv_free(p->tier0);
    p->tier0 = sv;
    for (int i = 0; i < n; i++) {
        yaml_node_t *it = tier0_item(r, v, i);
        const char *s;
        if (!it || get_backend_name(r, it, "tier0", &s))
            return -1;
        for (int j = 0; j < i; j++)
            if (!strcmp(sv[j], s))
                return kiln_yaml_error(r, it, "tier0: '%s' is listed twice",
                                       s);
        if (!(sv[i] = strdup(s)))
            return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
    }
    return 0;
}

static int tiers_pair(reader *r, const char *key, yaml_node_t *k,
                      yaml_node_t *v, void *ctx)
{
    kiln_policy *p = r->user;
    tiers_ctx *t = ctx;
    int64_t x;
    if (!strcmp(key, "enabled"))
        return kiln_yaml_bool(r, v, key, &p->tiers_enabled);
    if (!strcmp(key, "tier0")) {
        t->tier0 = v;
        return read_tier0(r, v);
    }
    if (!strcmp(key, "tier1")) {
        const char *s;
        t->tier1 = v;
        if (get_backend_name(r, v, key, &s))
            return -1;
        free(p->tier1);
        if (!(p->tier1 = strdup(s)))
            return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
        return 0;
    }
    if (!strcmp(key, "threads")) {
        if (kiln_yaml_int(r, v, key, 0, 64, &x))
            return -1;
        p->tier_threads = (int)x;
        return 0;
    }
    if (!strcmp(key, "sample_every")) {
        if (kiln_yaml_int(r, v, key, 1, 1000000, &x))
            return -1;
        p->tier_sample_every = (int)x;
        return 0;
    }
    /* ratio (kiln 0.3) is read as budget (docs/policy.md, "The trigger") */
    if (!strcmp(key, "budget") || !strcmp(key, "ratio")) {
        yaml_node_t **mine = key[0] == 'b' ? &t->budget : &t->ratio;
        yaml_node_t *other = key[0] == 'b' ? t->ratio : t->budget;
        *mine = k;
        if (other)
            return kiln_yaml_error(r, k, "tiers: give budget or its old "
                                   "name ratio, not both");
        return tier_number(r, v, key, 0, &p->tier_budget);
    }
    if (!strcmp(key, "min_gain_ns"))
        return tier_number(r, v, key, 1, &p->tier_min_gain_ns);
    if (!strcmp(key, "preload"))
        return kiln_yaml_bool(r, v, key, &p->tier_preload);
    static const char *const model_keys[3] = {
        "compile_ms", "compile_ms_per_op", "compile_ms_per_input"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(key, model_keys[i]))
            return tier_number(r, v, key, 1, &p->tier_compile_ms[i]);
    return kiln_yaml_unknown_key(r, k, "tiers", key,
                                 "enabled, tier0, tier1, threads, budget, "
                                 "min_gain_ns, sample_every, compile_ms, "
                                 "compile_ms_per_op, compile_ms_per_input, "
                                 "preload");
}

/* `tiers:` (a mapping; empty or null: on, with the defaults).  tier1 may
 * not be one of tier0, whichever of them the file sets. */
static int read_tiers(reader *r, yaml_node_t *v)
{
    kiln_policy *p = r->user;
    tiers_ctx t = {NULL, NULL, NULL, NULL};
    p->tiers_set = 1;
    if (kiln_yaml_is_null(v))
        return 0;
    if (kiln_yaml_each_pair(r, v, "tiers", tiers_pair, &t))
        return -1;
    const char *t1 = p->tier1 ? p->tier1 : tier1_default;
    const char *const *t0 = tier0_of(p);
    for (int i = 0; t0[i]; i++) {
        if (strcmp(t0[i], t1))
            continue;
        if (t.tier1)
            return kiln_yaml_error(r, t.tier1, "tier1: '%s' is also in "
                                   "tier0 (a kernel tiers up from a tier-0 "
                                   "backend to another backend)", t1);
        return kiln_yaml_error(r, tier0_item(r, t.tier0, i), "tier0: '%s' "
                               "is the tier-1 backend (tier1 is %s by "
                               "default; set it to another backend)", t1,
                               t1);
    }
    return 0;
}

/* ---- blas ----------------------------------------------------------- */

static int blas_pair(reader *r, const char *key, yaml_node_t *k,
                     yaml_node_t *v, void *ctx)
{
    kiln_policy *p = ctx;
    if (!strcmp(key, "gemv")) {
        static const char *const modes[] = {"auto", "blas", "loop"};
        const char *m;
        if (kiln_yaml_string(r, v, key, &m))
            return -1;
        for (int i = 0; i < 3; i++)
            if (!strcmp(m, modes[i])) {
                p->blas_gemv = i;
                return 0;
            }
        return kiln_yaml_error(r, v, "gemv: expected auto, blas or loop, "
                               "got '%s'", m);
    }
    if (!strcmp(key, "loop_max_cols"))
        return kiln_yaml_int(r, v, key, 0, 512, &p->blas_loop_max_cols[0]);
    if (!strcmp(key, "loop_max_cols_t"))
        return kiln_yaml_int(r, v, key, 0, 512, &p->blas_loop_max_cols[1]);
    return kiln_yaml_unknown_key(r, k, "blas", key,
                       "gemv, loop_max_cols, loop_max_cols_t");
}

/* ---- the top level -------------------------------------------------- */

typedef struct top_ctx {
    yaml_node_t *version, *chain, *dflt, *rules;
} top_ctx;

static int top_pair(reader *r, const char *key, yaml_node_t *k,
                    yaml_node_t *v, void *ctx)
{
    top_ctx *t = ctx;
    kiln_policy *p = r->user;
    if (!strcmp(key, "kiln_policy")) {
        t->version = v;
        return 0;
    }
    if (!strcmp(key, "backends")) {
        t->chain = v;
        return 0;
    }
    if (!strcmp(key, "default")) {
        t->dflt = v;
        return 0;
    }
    if (!strcmp(key, "rules")) {
        t->rules = v;
        return 0;
    }
    if (!strcmp(key, "cost_model"))
        return kiln_yaml_each_pair(r, v, "cost_model", cost_pair, p);
    if (!strcmp(key, "fusion"))
        return kiln_yaml_each_pair(r, v, "fusion", fusion_pair, p);
    if (!strcmp(key, "constants"))
        return kiln_yaml_each_pair(r, v, "constants", constants_pair, p);
    if (!strcmp(key, "llvm"))
        return kiln_yaml_each_pair(r, v, "llvm", llvm_pair, p);
    if (!strcmp(key, "hoist"))
        return kiln_yaml_each_pair(r, v, "hoist", hoist_pair, p);
    if (!strcmp(key, "cache"))
        return kiln_yaml_each_pair(r, v, "cache", cache_pair, p);
    if (!strcmp(key, "passes")) {
        p->passes_set = 1;
        return read_strv(r, v, "passes", &p->passes, pass_names);
    }
    if (!strcmp(key, "tiers"))
        return read_tiers(r, v);
    if (!strcmp(key, "blas"))
        return kiln_yaml_each_pair(r, v, "blas", blas_pair, p);
    return kiln_yaml_unknown_key(r, k, "policy", key,
                       "kiln_policy, backends, default, rules, cost_model, "
                       "fusion, constants, llvm, cache, passes, tiers, blas, "
                       "hoist");
}

static int read_policy(reader *r, yaml_node_t *root)
{
    kiln_policy *p = r->user;
    top_ctx t = {0};
    if (!root)
        return kiln_yaml_error(r, NULL,
                               "empty policy (expected a mapping starting "
                               "with 'kiln_policy: %d')",
                               KILN_POLICY_SCHEMA);
    if (root->type != YAML_MAPPING_NODE)
        return kiln_yaml_error(r, root,
                               "a policy is a mapping (kiln_policy:, "
                               "backends:, rules:, ...), got %s",
                               kiln_yaml_type_word(root));
    /* cost_model first: pays_off names models (key order is free) */
    if (kiln_yaml_each_pair(r, root, "policy", top_pair, &t))
        return -1;
    if (kiln_yaml_schema(r, root, t.version, "kiln_policy",
                         KILN_POLICY_SCHEMA))
        return -1;
    if (t.chain) {
        if (read_chain(r, t.chain))
            return -1;
    }
    if (chain_index(p, "interp") < 0) {
        if (!(p->chain[p->n_chain] = strdup("interp")))
            return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
        p->n_chain++;
    }
    p->dflt = chain_index(p, "interp");
    if (t.dflt && get_backend_ref(r, t.dflt, "default", &p->dflt))
        return -1;
    if (t.rules && !kiln_yaml_is_null(t.rules) && read_rules(r, t.rules))
        return -1;
    return 0;
}

static kiln_policy *load_text(const char *text, size_t len,
                              const char *name, kiln_err *err)
{
    if (!name)
        name = "<string>";
    if (!text) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_policy_load_string: text is "
                    "NULL");
        return NULL;
    }
    kiln_policy *p = policy_new(name);
    if (!p) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    reader r;
    memset(&r, 0, sizeof r);
    r.file = name;
    r.err = err;
    r.code = KILN_ERR_POLICY;
    r.user = p;
    if (kiln_yaml_load(&r, text, len, "policy")) {
        kiln_policy_free(p);
        return NULL;
    }
    int rc = read_policy(&r, yaml_document_get_root_node(&r.doc));
    kiln_yaml_done(&r);
    if (rc) {
        kiln_policy_free(p);
        return NULL;
    }
    return p;
}

kiln_policy *kiln_policy_load_string(const char *text, size_t len,
                                     const char *name, kiln_err *err)
{
    return load_text(text, len, name, err);
}

kiln_policy *kiln_policy_load_file(const char *path, kiln_err *err)
{
    if (!path) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_policy_load_file: path is "
                    "NULL");
        return NULL;
    }
    char *buf;
    size_t len;
    if (kiln_yaml_read_file(path, KILN_POLICY_MAX_SIZE, &buf, &len, err))
        return NULL;
    kiln_policy *p = load_text(buf, len, path, err);
    free(buf);
    return p;
}

/* ---- accessors ------------------------------------------------------ */

const char *kiln_policy_source(const kiln_policy *p)
{
    return p ? p->source : NULL;
}

int kiln_policy_n_backends(const kiln_policy *p)
{
    return p ? p->n_chain : 0;
}

const char *kiln_policy_backend(const kiln_policy *p, int i)
{
    return p && i >= 0 && i < p->n_chain ? p->chain[i] : NULL;
}

int kiln_policy_n_rules(const kiln_policy *p)
{
    return p ? p->n_rules : 0;
}

const char *kiln_policy_rule_name(const kiln_policy *p, int i)
{
    return p && i >= 0 && i < p->n_rules ? p->rules[i].name : NULL;
}

int kiln_policy_get_knobs(const kiln_policy *p, kiln_policy_knobs *out)
{
    if (!p || !out || out->struct_size < offsetof(kiln_policy_knobs,
                                                  fusion_max_width) +
                                             sizeof(int))
        return KILN_ERR_ARG;
    kiln_policy_knobs k;
    memset(&k, 0, sizeof k);
    k.struct_size = out->struct_size < sizeof k ? out->struct_size
                                                : sizeof k;
    k.fusion_max_width = p->fusion_max_width;
    k.fusion_max_scalar_ops = p->fusion_max_scalar_ops;
    k.fusion_max_outputs = p->fusion_max_outputs;
    k.promote_const_bytes = p->promote_const_bytes;
    k.llvm_opt_level = p->llvm_opt_level;
    k.llvm_fast_math = p->llvm_fast_math;
    k.llvm_generic_target = p->llvm_generic;
    k.cache_enabled = p->cache_enabled;
    k.cache_max_bytes = p->cache_max_bytes;
    static const char *const none[] = {NULL};
    k.cache_dir = NULL;            /* a policy never names a directory */
    k.cache_read_only = none;
    k.passes = p->passes ? (const char *const *)p->passes : none;
    k.passes_set = p->passes_set;
    k.tiers_enabled = p->tiers_set && p->tiers_enabled;
    k.tier0 = tier0_of(p);
    k.tier1 = p->tier1 ? p->tier1 : tier1_default;
    k.tier_threads = p->tier_threads;
    k.tier_ratio = p->tier_budget;     /* the old name */
    k.tier_budget = p->tier_budget;
    k.tier_compile_ms = p->tier_compile_ms[0];
    k.tier_compile_ms_per_op = p->tier_compile_ms[1];
    k.tier_compile_ms_per_input = p->tier_compile_ms[2];
    k.tier_preload = p->tier_preload;
    k.tier_min_gain_ns = p->tier_min_gain_ns;
    k.tier_sample_every = p->tier_sample_every;
    k.blas_gemv = p->blas_gemv;
    k.blas_loop_max_cols[0] = p->blas_loop_max_cols[0];
    k.blas_loop_max_cols[1] = p->blas_loop_max_cols[1];
    k.hoist_max_bytes = p->hoist_max_bytes;
    memcpy(out, &k, k.struct_size);
    return 0;
}

/* ---- selection ------------------------------------------------------ */

/* 1 when something is at `path` (stat, never open: a FIFO next to a
 * model must not block; kiln_yaml_read_file then refuses what is not a
 * regular file). */
static int file_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;   /* a dangling symlink is an error */
}

/* The default policy: a libkiln loaded from its build tree (the tests, the
 * uninstalled CLI) reads the build tree's copy of conf/default.yaml
 * (Makefile.am), an installed one the installed copy.  No build path is
 * compiled in. */
static char default_path[4096];
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
    char top[3000];
    if (kiln_loader_build_top(top, sizeof top) == 0)
        snprintf(default_path, sizeof default_path,
                 "%s/conf/uninstalled/default.yaml", top);
    else
        snprintf(default_path, sizeof default_path, "%s",
                 KILN_DATA_DIR "/policy/default.yaml");
}

const char *kiln_policy_default_path(void)
{
    pthread_once(&default_once, default_init);
    return file_exists(default_path) ? default_path : NULL;
}

static const char builtin_text[] =
    "kiln_policy: 1\nbackends: [interp]\ndefault: interp\n";

kiln_policy *kiln_policy_select(const kiln_options *opt,
                                const char **source_kind, kiln_err *err)
{
    const char *kind_dummy;
    if (!source_kind)
        source_kind = &kind_dummy;
    size_t sz = opt ? opt->struct_size : 0;
#define HAS(field) (sz >= offsetof(kiln_options, field) + \
                    sizeof(((kiln_options *)0)->field))
    if (HAS(policy) && opt->policy) {
        *source_kind = "option";
        return policy_ref((kiln_policy *)opt->policy);
    }
    if (HAS(policy_file) && opt->policy_file) {
        *source_kind = "policy_file";
        return kiln_policy_load_file(opt->policy_file, err);
    }
    const char *env = getenv("KILN_POLICY");
    if (env && *env) {
        *source_kind = "KILN_POLICY";
        kiln_policy *p = kiln_policy_load_file(env, err);
        if (!p)
            kiln_err_prefix(err, "$KILN_POLICY: ");
        return p;
    }
    if (HAS(model_path) && opt->model_path) {
        const char *m = opt->model_path;
        size_t n = strlen(m);
        if (n > 3 && !strcmp(m + n - 3, ".kg"))
            n -= 3;
        char *path = malloc(n + sizeof ".policy.yaml");
        if (!path) {
            kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            return NULL;
        }
        memcpy(path, m, n);
        memcpy(path + n, ".policy.yaml", sizeof ".policy.yaml");
        if (file_exists(path)) {
            *source_kind = "model";
            kiln_policy *p = kiln_policy_load_file(path, err);
            free(path);
            return p;
        }
        free(path);
    }
#undef HAS
    const char *d = kiln_policy_default_path();
    if (d) {
        *source_kind = "default";
        return kiln_policy_load_file(d, err);
    }
    *source_kind = "none";
    return load_text(builtin_text, sizeof builtin_text - 1,
                     "(built-in: interp only)", err);
}

/* ---- the cost model ------------------------------------------------- */

static const backend_model *model_for(const kiln_policy *p, const char *name)
{
    const backend_model *ms = p ? p->models : builtin_models;
    int n = p ? p->n_models : N_BUILTIN_MODELS;
    for (int i = 0; name && i < n; i++)
        if (!strcmp(ms[i].name, name))
            return &ms[i];
    for (int i = 0; i < n; i++)
        if (!strcmp(ms[i].name, "tcc"))
            return &ms[i];
    return &builtin_models[1];
}

double kiln_policy_cost(const kiln_policy *p, const kiln_kernel *k,
                        int64_t work_elements)
{
    if (!k)
        return 0;
    const double *extra = p ? p->extra : extra_default;
    double e = work_elements >= 0 ? (double)work_elements
               : p ? (double)p->symbolic_elements : 1024.0;
    switch (k->kind) {
    case KILN_KERNEL_RECUR:   /* with a program (ABI 1.10): T steps */
        if (!k->n_instrs)
            return e;
        /* fall through */
    case KILN_KERNEL_ELEMWISE:
    case KILN_KERNEL_REDUCE:
    case KILN_KERNEL_LOOP: {
        double w = extra[W_ELEMENT];
        for (uint32_t i = 0; i < k->n_instrs && k->instrs; i++) {
            unsigned op = k->instrs[i].op;
            w += op < KILN_I_COUNT ? (p ? p->weights[op]
                                        : opcode_table[op].weight)
                                   : 1;
        }
        return e * w;
    }
    case KILN_KERNEL_JOIN:
        return e * extra[W_COPY];
    case KILN_KERNEL_GATHER:
    case KILN_KERNEL_SCATTER:
        return e * extra[W_INDEX];
    case KILN_KERNEL_DOT:
        return e * extra[W_FMA];
    default:
        return e;
    }
}

double kiln_policy_compile_ms(const kiln_policy *p, const char *backend,
                              int scalar_ops, int width)
{
    const backend_model *m = model_for(p, backend);
    return m->compile_ms + m->compile_ms_per_op * scalar_ops +
           m->compile_ms_per_input * width;
}

/* run time of one call, by kind: program work, indexing or copying */
static double call_ns_kind(const backend_model *m, int kind, double cost)
{
    double per = kind == KILN_KERNEL_GATHER || kind == KILN_KERNEL_SCATTER
                     ? m->ns_per_index
                 : kind == KILN_KERNEL_JOIN ? m->ns_per_copy
                 : kind == KILN_KERNEL_DOT ? 0.25 /* BLAS in every backend */
                                           : m->ns_per_op;
    return m->call_ns + per * cost;
}

double kiln_policy_call_ns(const kiln_policy *p, const char *backend,
                           double cost)
{
    return call_ns_kind(model_for(p, backend), KILN_KERNEL_ELEMWISE, cost);
}

/* ---- matching ------------------------------------------------------- */

static int in_range(const range *rg, double x)
{
    if (rg->has_lo && (rg->lo_incl ? x < rg->lo : x <= rg->lo))
        return 0;
    if (rg->has_hi && (rg->hi_incl ? x > rg->hi : x >= rg->hi))
        return 0;
    return 1;
}

static int op_matches(const rule *ru, const kiln_kernel_facts *k)
{
    const char *kind = k->kind > 0 && k->kind < N_KINDS ? kind_names[k->kind]
                                                        : "";
    for (int i = 0; i < ru->n_ops; i++) {
        const char *o = ru->ops[i];
        if ((k->op && !strcmp(o, k->op)) ||
            (k->label && !strcmp(o, k->label)) || !strcmp(o, kind))
            return 1;
        if (!strcmp(o, "fused") &&
            ((k->op && !strncmp(k->op, "fused", 5)) ||
             (k->label && !strncmp(k->label, "fused", 5))))
            return 1;
    }
    return 0;
}

/* Does backend model m pay for its compile against the interpreter over
 * cost_model.expected_calls calls? */
static int pays_off(const kiln_policy *p, int m, const kiln_kernel_facts *k)
{
    const backend_model *b = &p->models[m], *i = model_for(p, "interp");
    double gain_ms = (call_ns_kind(i, k->kind, k->cost) -
                      call_ns_kind(b, k->kind, k->cost)) *
                     p->expected_calls * 1e-6;
    double extra_ms =
        (b->compile_ms + b->compile_ms_per_op * k->scalar_ops +
         b->compile_ms_per_input * k->width) -
        (i->compile_ms + i->compile_ms_per_op * k->scalar_ops +
         i->compile_ms_per_input * k->width);
    return gain_ms > extra_ms;
}

static int rule_matches(const kiln_policy *p, const rule *ru,
                        const kiln_kernel_facts *k)
{
    double elems = k->elements >= 0 ? (double)k->elements
                                    : (double)p->symbolic_elements;
    if (ru->ops && !op_matches(ru, k))
        return 0;
    if (ru->width.set && !in_range(&ru->width, k->width))
        return 0;
    if (ru->cost.set && !in_range(&ru->cost, k->cost))
        return 0;
    if (ru->elements.set && !in_range(&ru->elements, elems))
        return 0;
    if (ru->scalar_ops.set && !in_range(&ru->scalar_ops, k->scalar_ops))
        return 0;
    if (ru->pays_off >= 0 && !pays_off(p, ru->pays_off, k))
        return 0;
    return 1;
}

int kiln_policy_choose(const kiln_policy *p, const kiln_kernel_facts *k,
                       const char **backend)
{
    if (!p || !k) {
        if (backend)
            *backend = "interp";
        return -1;
    }
    for (int i = 0; i < p->n_rules; i++) {
        if (rule_matches(p, &p->rules[i], k)) {
            if (backend)
                *backend = p->chain[p->rules[i].use];
            return i;
        }
    }
    if (backend)
        *backend = p->chain[p->dflt];
    return -1;
}

/* ---- plans (core/compile/driver.c) -------------------------------------- */

typedef struct step_plan {
    int64_t elements, work;
    double cost;
    int rule;                  /* rule index, -1 default, -2 option */
    int start;                 /* chain index */
    char *why;
} step_plan;

struct kiln_plan {
    kiln_policy *policy;       /* NULL: an explicit backend */
    int n_chain;
    char *chain[MAX_CHAIN];
    int n_steps;
    step_plan *steps;
    const kiln_graph *g;       /* the function's graph (op names) */
    const kiln_program *prog;
    int opt_level, fast_math;  /* the caller's (0 = unset) */
};

const kiln_policy *kiln_plan_policy(const kiln_plan *pl)
{
    return pl ? pl->policy : NULL;
}

void kiln_plan_free(kiln_plan *pl)
{
    if (!pl)
        return;
    for (int i = 0; i < pl->n_steps; i++)
        free(pl->steps[i].why);
    free(pl->steps);
    for (int i = 0; i < pl->n_chain; i++)
        free(pl->chain[i]);
    kiln_policy_free(pl->policy);
    free(pl);
}

static int64_t static_numel(const kiln_type *t)
{
    int64_t n = 1;
    for (int k = 0; k < t->rank; k++) {
        if (t->dims[k] < 0)
            return -1;
        if (t->dims[k] && n > INT64_MAX / t->dims[k])
            return INT64_MAX;
        n *= t->dims[k];
    }
    return n;
}

static void step_facts(const kiln_plan *pl, int i, kiln_kernel_facts *f)
{
    const kiln_step *s = &pl->prog->steps[i];
    const step_plan *sp = &pl->steps[i];
    memset(f, 0, sizeof *f);
    f->struct_size = sizeof *f;
    f->label = s->label;
    f->op = s->node >= 0 && s->node < pl->g->n_nodes
                ? kiln_ir_op_info(pl->g->nodes[s->node].op)->name
                : s->label;
    if (!strncmp(s->label, "fused", 5))
        f->op = s->label;
    f->kind = (int)s->kernel.kind;
    f->width = (int)s->kernel.n_inputs;
    f->scalar_ops = (int)s->kernel.n_instrs;
    f->elements = sp->elements;
    f->work_elements = sp->work;
    f->cost = sp->cost;
}

/* A RECUR kernel with a program: its step count T when static (the
 * first sequence's dims[0], else the first stacked output's, else
 * n_steps), else -1. */
static int64_t recur_steps(const kiln_program *prog, const kiln_step *s)
{
    uint32_t nc = s->kernel.n_carry, ns = s->kernel.n_seq;
    const kiln_type *t = ns > 0 && (int)nc < s->n_in
                             ? &prog->bufs[s->in[nc].buf].type
                         : (int)nc < s->n_out ? &prog->bufs[s->out[nc].buf].type
                                              : NULL;
    if (!t)
        return s->kernel.n_steps;
    return t->rank >= 1 && !KILN_DIM_IS_SYM(t->dims[0]) ? t->dims[0] : -1;
}

kiln_plan *kiln_plan_make(const kiln_options *opt, const char *backend,
                          const kiln_graph *g, const kiln_program *prog,
                          kiln_err *err)
{
    kiln_plan *pl = calloc(1, sizeof *pl);
    if (!pl) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    pl->g = g;
    pl->prog = prog;
    size_t sz = opt ? opt->struct_size : 0;
    if (sz >= offsetof(kiln_options, opt_level) + sizeof(int) &&
        opt->opt_level >= 1 && opt->opt_level <= 3)
        pl->opt_level = opt->opt_level;
    if (sz >= offsetof(kiln_options, fast_math) + sizeof(int))
        pl->fast_math = opt->fast_math != 0;
    if (backend) {
        pl->chain[pl->n_chain++] = strdup(backend);
        if (strcmp(backend, "interp"))
            pl->chain[pl->n_chain++] = strdup("interp");
    } else {
        pl->policy = kiln_policy_select(opt, NULL, err);
        if (!pl->policy) {
            kiln_plan_free(pl);
            return NULL;
        }
        for (int i = 0; i < pl->policy->n_chain; i++)
            pl->chain[pl->n_chain++] = strdup(pl->policy->chain[i]);
    }
    for (int i = 0; i < pl->n_chain; i++)
        if (!pl->chain[i]) {
            kiln_plan_free(pl);
            kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            return NULL;
        }
    pl->n_steps = prog->n_steps;
    pl->steps = calloc((size_t)(prog->n_steps ? prog->n_steps : 1),
                       sizeof *pl->steps);
    if (!pl->steps) {
        kiln_plan_free(pl);
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < prog->n_steps; i++) {
        const kiln_step *s = &prog->steps[i];
        step_plan *sp = &pl->steps[i];
        sp->elements = sp->work = -1;
        if (s->n_out > 0 && s->out[0].buf >= 0)
            sp->elements = static_numel(&prog->bufs[s->out[0].buf].type);
        if (s->kernel.kind == KILN_KERNEL_LOOP && s->iter_input && s->n_in > 0)
            sp->elements = static_numel(&prog->bufs[s->in[0].buf].type);
        sp->work = sp->elements;
        if ((s->kernel.kind == KILN_KERNEL_REDUCE ||
             (s->kernel.kind == KILN_KERNEL_LOOP && s->iter_input)) &&
            s->n_in > 0)
            sp->work = static_numel(&prog->bufs[s->in[0].buf].type);
        else if (s->kernel.kind == KILN_KERNEL_RECUR && s->kernel.n_instrs)
            sp->work = recur_steps(prog, s);
        else if (s->kernel.kind == KILN_KERNEL_SCATTER && s->n_in > 0)
            sp->work = static_numel(&prog->bufs[s->in[0].buf].type);
        else if (s->kernel.kind == KILN_KERNEL_DOT && s->n_in > 0 &&
                 sp->elements >= 0) {
            const kiln_type *a = &prog->bufs[s->in[0].buf].type;
            int64_t kdim = a->rank ? a->dims[a->rank - 1] : 1;
            sp->work = kdim < 0 ? -1 : sp->elements * (kdim ? kdim : 1);
        }
        sp->cost = kiln_policy_cost(pl->policy, &s->kernel, sp->work);
        if (!pl->policy) {
            sp->rule = -2;
            sp->start = 0;
            continue;
        }
        kiln_kernel_facts f;
        step_facts(pl, i, &f);
        const char *name;
        sp->rule = kiln_policy_choose(pl->policy, &f, &name);
        sp->start = chain_index(pl->policy, name);
    }
    return pl;
}

int kiln_plan_n_chain(const kiln_plan *pl) { return pl->n_chain; }

const char *kiln_plan_chain(const kiln_plan *pl, int i)
{
    return i >= 0 && i < pl->n_chain ? pl->chain[i] : NULL;
}

int kiln_plan_start(const kiln_plan *pl, int step)
{
    return pl->steps[step].start;
}

void kiln_plan_set_fallback(kiln_plan *pl, int step, const char *why)
{
    if (step < 0 || step >= pl->n_steps || pl->steps[step].why)
        return;
    pl->steps[step].why = strdup(why);
}

void kiln_plan_compile_options(const kiln_plan *pl, const char *name,
                               const kiln_compile_options *base,
                               kiln_compile_options *out)
{
    *out = *base;
    if (!pl->policy || strcmp(name, "llvm"))
        return;
    if (!pl->opt_level && pl->policy->llvm_opt_set)
        out->opt_level = pl->policy->llvm_opt_level;
    if (!pl->fast_math && pl->policy->llvm_fast_set)
        out->fast_math = pl->policy->llvm_fast_math;
    if (pl->policy->llvm_generic)
        out->generic_target = 1;
}

/* ---- explain -------------------------------------------------------- */

int kiln_plan_kernel_info(const kiln_plan *pl, int i, const char *backend,
                          kiln_kernel_info *out, kiln_err *err)
{
    if (!out || !pl || i < 0 || i >= pl->n_steps)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_function_kernel_info: "
                           "no kernel %d", i);
    kiln_kernel_info k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    step_facts(pl, i, &k.facts);
    const step_plan *sp = &pl->steps[i];
    k.rule = sp->rule == -2 ? "backend option"
             : sp->rule < 0 ? "default"
                            : pl->policy->rules[sp->rule].name;
    k.chosen = pl->chain[sp->start];
    k.backend = backend;
    k.fallback = sp->why;
    k.compile_ms_estimate = kiln_policy_compile_ms(
        pl->policy, k.backend ? k.backend : k.chosen, k.facts.scalar_ops,
        k.facts.width);
    const kiln_step *st = &pl->prog->steps[i];
    k.fused_nodes = st->n_members > 1 ? st->n_members : 1;
    k.fused = st->n_members > 1 ? st->members : NULL;
    k.split = kiln_fuse_split_name(st->split);
    size_t n = out->struct_size < sizeof k ? out->struct_size : sizeof k;
    if (n < sizeof(size_t))
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_function_kernel_info: "
                           "struct_size not set");
    memcpy(out, &k, n);
    out->struct_size = n;
    return 0;
}

const char *kiln_plan_policy_source(const kiln_plan *pl)
{
    return pl && pl->policy ? pl->policy->source : NULL;
}

/* ---- the rewrite passes' configuration ------------------------------ */

int kiln_rw_config_for(const kiln_options *opt, kiln_rw_config *c,
                       kiln_err *err)
{
    kiln_rw_config_default(c);
    /* an invalid policy is an error even when a backend is forced (it
     * still chooses the passes and the fusion caps) */
    kiln_policy *pol = kiln_policy_select(opt, NULL, err);
    if (!pol)
        return err && err->code ? err->code : KILN_ERR_POLICY;
    kiln_policy_knobs k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    int have = kiln_policy_get_knobs(pol, &k) == 0;
    int rc = kiln_rw_config_apply(c, have ? &k : NULL, opt, err);
    kiln_policy_free(pol);
    return rc;
}
