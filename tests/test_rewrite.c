/*
 * test_rewrite.c — the rewrite passes (core/rewrite, docs/rewrite.md).
 *
 *  1. the pass list syntax and the configuration (kiln_options.passes,
 *     $KILN_PASSES);
 *  2. structure: what the graph looks like after each pass (printed text,
 *     node counts, widths, depth), and that inputs, shared values, outputs
 *     and gradient records survive;
 *  3. numbers: every example and test graph (examples/, tests/graphs/)
 *     with all passes on against all passes off, and with each pass alone,
 *     under every backend this build has (interp, tcc, llvm), at seeded
 *     random inputs; float outputs within a relative 1e-9 (f64) / 1e-4
 *     (f32) — reassociation changes rounding — integer and bool outputs
 *     exactly;
 *  4. the pathological shapes: a 500-scalar join, a 5000-term sum, an
 *     80-component additive model, the gradient of a pooled model with 30
 *     shared scalar parameters, an 8 MB constant (promoted: same kernel
 *     keys whatever its value, small kernels), and pairwise association
 *     of 10^6 float32 terms, closer to the exact sum than sequential
 *     summation;
 *  5. canonicalize's shape rules: squeeze(R(x, keepdims=true)) -> R(x)
 *     and fill(m, expand_dims(L)) -> fill(m, L), their negative cases,
 *     and a gradient model whose squeeze kernels disappear (outputs
 *     against passes off under every backend, gradients against finite
 *     differences);
 *  6. reciprocal: true_div(x, s) by one value (rank 0, one element,
 *     broadcast_to, fill, a literal) becomes mul(x, true_div(1, s)), not
 *     for elementwise or integer divisions, an f32 divisor in an f64
 *     division or a one-element result; outputs within 4 ulp of
 *     -reciprocal under every backend, a gradient model within 1e-12 and
 *     against finite differences.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/policy.h>
#include <kiln/cache.h>

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir.h"
#include "lower.h"
#include "rewrite/rewrite.h"
#include "tap.h"
#include "gradcheck.h"

static const char *srcdir = ".", *builddir = ".";

/* ---- helpers ------------------------------------------------------------ */

static kiln_graph *parse(const char *body)
{
    size_t n = strlen(body) + 64;
    char *text = malloc(n);
    snprintf(text, n, "kiln 1\ngraph t\n%send\n", body);
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, &err);
    if (!g)
        diag("parse: %s", err.message);
    free(text);
    return g;
}

/* g after the passes of `spec` (consumes g) */
static kiln_graph *rewrite(kiln_graph *g, const char *spec)
{
    kiln_rw_config c;
    kiln_rw_config_default(&c);
    kiln_err err = {0, ""};
    if (kiln_rw_parse_passes(spec, &c.passes, &err) ||
        kiln_rw_run(&g, &c, NULL, NULL, &err)) {
        diag("rewrite: %s", err.message);
        kiln_graph_free(g);
        return NULL;
    }
    return g;
}

/* the printed body (between "graph t" and "end") after `spec` */
static char *after(const char *body, const char *spec)
{
    kiln_graph *g = parse(body);
    g = g ? rewrite(g, spec) : NULL;
    if (!g)
        return strdup("(error)");
    kiln_err err = {0, ""};
    char *t = kiln_graph_print(g, &err);
    kiln_graph_free(g);
    char *b = strstr(t, "graph t\n");
    char *e = strstr(t, "end\n");
    char *r = strndup(b + 8, (size_t)(e - (b + 8)));
    free(t);
    return r;
}

static int check_after(const char *body, const char *spec, const char *want,
                       const char *what)
{
    char *got = after(body, spec);
    int r = ok(strcmp(got, want) == 0, "%s", what);
    if (!r)
        diag("got:\n%swant:\n%s", got, want);
    free(got);
    return r;
}

static int count_op(const kiln_graph *g, int op)
{
    int n = 0;
    for (int v = 0; v < g->n_nodes; v++)
        n += g->nodes[v].op == op;
    return n;
}

static int max_width(const kiln_graph *g, int op)
{
    int w = 0;
    for (int v = 0; v < g->n_nodes; v++)
        if (g->nodes[v].op == op && g->nodes[v].n_in > w)
            w = g->nodes[v].n_in;
    return w;
}

static int depth(const kiln_graph *g)
{
    int *d = calloc((size_t)g->n_nodes, sizeof *d), best = 0;
    for (int v = 0; v < g->n_nodes; v++) {
        for (int i = 0; i < g->nodes[v].n_in; i++)
            if (d[g->nodes[v].in[i]] + 1 > d[v])
                d[v] = d[g->nodes[v].in[i]] + 1;
        if (d[v] > best)
            best = d[v];
    }
    free(d);
    return best;
}

/* ---- running -------------------------------------------------------------- */

#define MAX_OUT 1024

typedef struct result {
    int rc;
    char msg[200];
    int n_out;
    kiln_tensor t[MAX_OUT];
    int n_kernels, max_width, max_ops;
    int n_join, max_join_width;  /* JOIN kernels: one loop over an array
                                    of inputs, no code per input */
    int n_squeeze, n_expand;     /* kernels labelled squeeze, expand_dims */
} result;

static void result_free(result *r)
{
    for (int i = 0; i < r->n_out; i++)
        free(r->t[i].data);
    r->n_out = 0;
}

static kiln_function *compile(const kiln_graph *g, const char *backend,
                              const char *passes, kiln_err *err)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.passes = passes;
    o.quiet = 1;
    o.jobs = 1;
    return kiln_compile(g, &o, err);
}

/* seeded inputs for f: floats in [0.5, 1.5), integers and bools 0 or 1,
 * symbolic dims 3 */
static kiln_tensor *make_inputs(kiln_function *f, unsigned seed, int *n)
{
    *n = kiln_function_n_inputs(f);
    kiln_tensor *in = calloc((size_t)(*n ? *n : 1), sizeof *in);
    uint64_t s = 0x9e3779b97f4a7c15ULL * (seed + 1);
    for (int i = 0; i < *n; i++) {
        kiln_dtype dt;
        int rank;
        int64_t dims[KILN_MAX_RANK];
        const char *sym[KILN_MAX_RANK];
        kiln_function_input_type(f, i, &dt, &rank, dims, sym);
        int64_t numel = 1;
        for (int k = 0; k < rank; k++) {
            if (dims[k] < 0)
                dims[k] = 3;
            numel *= dims[k];
        }
        in[i].dtype = dt;
        in[i].rank = rank;
        memcpy(in[i].shape, dims, sizeof(int64_t) * (size_t)rank);
        in[i].data = calloc((size_t)(numel ? numel : 1), 8);
        for (int64_t k = 0; k < numel; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            double u = (double)(s >> 11) * 0x1p-53;
            switch (dt) {
            case KILN_F64: ((double *)in[i].data)[k] = 0.5 + u; break;
            case KILN_F32: ((float *)in[i].data)[k] = (float)(0.5 + u); break;
            case KILN_I64: ((int64_t *)in[i].data)[k] = u < 0.5; break;
            case KILN_I32: ((int32_t *)in[i].data)[k] = u < 0.5; break;
            default: ((uint8_t *)in[i].data)[k] = u < 0.5; break;
            }
        }
    }
    return in;
}

static void free_inputs(kiln_tensor *in, int n)
{
    for (int i = 0; i < n; i++)
        free(in[i].data);
    free(in);
}

/* compile g with backend/passes and call it at inputs `in` (or seeded
 * inputs when in is NULL) */
static void run(const kiln_graph *g, const char *backend, const char *passes,
                const kiln_tensor *in, unsigned seed, result *r)
{
    memset(r, 0, sizeof *r);
    kiln_err err = {0, ""};
    kiln_function *f = compile(g, backend, passes, &err);
    if (!f) {
        r->rc = err.code ? err.code : -1;
        snprintf(r->msg, sizeof r->msg, "compile: %s", err.message);
        return;
    }
    r->n_kernels = kiln_function_n_kernels(f);
    for (int i = 0; i < r->n_kernels; i++) {
        kiln_kernel_info k;
        memset(&k, 0, sizeof k);
        k.struct_size = sizeof k;
        if (kiln_function_kernel_info(f, i, &k, NULL) == 0) {
            if (k.facts.kind == KILN_KERNEL_JOIN) {
                /* its inputs are an array it loops over: the width caps
                 * bound scalar programs, whose code grows per input */
                r->n_join++;
                if (k.facts.width > r->max_join_width)
                    r->max_join_width = k.facts.width;
            } else if (k.facts.width > r->max_width)
                r->max_width = k.facts.width;
            if (k.facts.scalar_ops > r->max_ops)
                r->max_ops = k.facts.scalar_ops;
            if (k.facts.label && strcmp(k.facts.label, "squeeze") == 0)
                r->n_squeeze++;
            if (k.facts.label && strcmp(k.facts.label, "expand_dims") == 0)
                r->n_expand++;
        }
    }
    int n_in = 0;
    kiln_tensor *mine = NULL;
    if (!in)
        in = mine = make_inputs(f, seed, &n_in);
    r->n_out = kiln_function_n_outputs(f);
    if (r->n_out > MAX_OUT)
        r->n_out = MAX_OUT;
    kiln_tensor out[MAX_OUT];
    r->rc = kiln_function_call(f, in, out, &err);
    if (r->rc) {
        snprintf(r->msg, sizeof r->msg, "call: %s", err.message);
        r->n_out = 0;
    }
    for (int i = 0; i < r->n_out; i++) {
        r->t[i] = out[i];
        size_t bytes = kiln_dtype_size(out[i].dtype);
        for (int k = 0; k < out[i].rank; k++)
            bytes *= (size_t)out[i].shape[k];
        r->t[i].data = malloc(bytes ? bytes : 1);
        memcpy(r->t[i].data, out[i].data, bytes);
    }
    if (mine)
        free_inputs(mine, n_in);
    kiln_function_free(f);
}

static double elem(const kiln_tensor *t, int64_t k)
{
    switch (t->dtype) {
    case KILN_F64: return ((double *)t->data)[k];
    case KILN_F32: return ((float *)t->data)[k];
    case KILN_I64: return (double)((int64_t *)t->data)[k];
    case KILN_I32: return ((int32_t *)t->data)[k];
    default: return ((uint8_t *)t->data)[k];
    }
}

/* a and b agree: same rc, outputs of the same type, floats within the
 * tolerance of their dtype (scaled by the magnitude), others exactly */
static int same_results(const result *a, const result *b, char *why,
                        size_t n)
{
    if (a->rc != b->rc) {
        snprintf(why, n, "rc %d (%s) vs %d (%s)", a->rc, a->msg, b->rc,
                 b->msg);
        return 0;
    }
    if (a->n_out != b->n_out) {
        snprintf(why, n, "%d outputs vs %d", a->n_out, b->n_out);
        return 0;
    }
    for (int i = 0; i < a->n_out; i++) {
        const kiln_tensor *x = &a->t[i], *y = &b->t[i];
        if (x->dtype != y->dtype || x->rank != y->rank) {
            snprintf(why, n, "output %d: type differs", i);
            return 0;
        }
        int64_t numel = 1;
        for (int k = 0; k < x->rank; k++) {
            if (x->shape[k] != y->shape[k]) {
                snprintf(why, n, "output %d: shape differs", i);
                return 0;
            }
            numel *= x->shape[k];
        }
        double tol = x->dtype == KILN_F64 ? 1e-9 : x->dtype == KILN_F32 ? 1e-4
                                                                        : 0;
        for (int64_t k = 0; k < numel; k++) {
            double u = elem(x, k), v = elem(y, k);
            if (isnan(u) && isnan(v))
                continue;
            if (u == v)
                continue;
            if (tol > 0 && isfinite(u) && isfinite(v) &&
                fabs(u - v) <= tol * (1 + fabs(u) + fabs(v)))
                continue;
            snprintf(why, n, "output %d [%lld]: %.17g vs %.17g", i,
                     (long long)k, u, v);
            return 0;
        }
    }
    return 1;
}

static int have_backend(const char *name)
{
    kiln_graph *g = parse("  input x: f64[2]\n  output y = exp(x)\n");
    kiln_err err = {0, ""};
    kiln_function *f = compile(g, name, "none", &err);
    int ok_ = f && kiln_function_n_kernels(f) > 0 &&
              strcmp(kiln_function_kernel_backend(f, 0), name) == 0;
    kiln_function_free(f);
    kiln_graph_free(g);
    return ok_;
}

/* ---- 1. the pass list ------------------------------------------------------ */

static void test_spec(void)
{
    unsigned m = 0;
    kiln_err err = {0, ""};
    ok(kiln_rw_parse_passes("all", &m, &err) == 0 && m == KILN_PASSES_ALL,
       "passes: all");
    ok(kiln_rw_parse_passes("none", &m, &err) == 0 && m == 0,
       "passes: none");
    m = KILN_PASSES_ALL;
    ok(kiln_rw_parse_passes("-fusion,-pairwise", &m, &err) == 0 &&
           m == (KILN_PASSES_ALL & ~(1u << KILN_PASS_FUSE) &
                 ~(1u << KILN_PASS_PAIRWISE)),
       "passes: -fusion,-pairwise edits the full set");
    /* '-'/'+' lists edit what they are given (the policy's passes) */
    m = (1u << KILN_PASS_CSE) | (1u << KILN_PASS_FOLD);
    ok(kiln_rw_parse_passes("-fold", &m, &err) == 0 &&
           m == (1u << KILN_PASS_CSE),
       "passes: -fold edits the given set");
    ok(kiln_rw_parse_passes("+pairwise fuse", &m, &err) == 0 &&
           m == ((1u << KILN_PASS_CSE) | (1u << KILN_PASS_PAIRWISE) |
                 (1u << KILN_PASS_FUSE)),
       "passes: +pairwise adds to it; spaces separate too");
    /* found by an attack: empty lists meant none without a word */
    static const struct {
        const char *spec, *want;
    } bad[] = {
        {"", "passes: empty list"},
        {",,,", "passes: empty list"},
        {"  ", "passes: empty list"},
        {"-", "passes: '-' without a pass name"},
        {"cse,+", "passes: '+' without a pass name"},
        {"-all", "passes: '-all' (all and none stand alone: write none)"},
        {"+none", "passes: '+none' (all and none stand alone: write none)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned before = m;
        err.code = 0;
        ok(kiln_rw_parse_passes(bad[i].spec, &m, &err) == KILN_ERR_ARG &&
               strncmp(err.message, bad[i].want, strlen(bad[i].want)) == 0 &&
               m == before,
           "passes: '%s' is an error, the set unchanged (%s)", bad[i].spec,
           err.message);
    }
    char longname[300];
    memset(longname, 'q', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    ok(kiln_rw_parse_passes(longname, &m, &err) == KILN_ERR_ARG &&
           strlen(err.message) < 250 && strstr(err.message, "qqq...'"),
       "passes: a long unknown name is cut in the message");
    ok(kiln_rw_parse_passes("canonicalize,cse", &m, &err) == 0 &&
           m == ((1u << KILN_PASS_CANONICALIZE) | (1u << KILN_PASS_CSE)),
       "passes: a list of names is just those");
    ok(kiln_rw_parse_passes("none,+fold", &m, &err) == 0 &&
           m == (1u << KILN_PASS_FOLD),
       "passes: none,+fold");
    ok(kiln_rw_parse_passes("-cse,frobnicate", &m, &err) == KILN_ERR_ARG &&
           strstr(err.message, "unknown pass 'frobnicate'"),
       "passes: an unknown name is an error naming it (%s)", err.message);
    kiln_graph *g = parse("  input x: f64\n  output y = exp(x)\n");
    kiln_function *f = compile(g, "interp", "-bogus", &err);
    ok(!f && err.code == KILN_ERR_ARG && strstr(err.message, "'bogus'"),
       "kiln_options.passes: a bad list fails the compile (%s)",
       err.message);
    kiln_function_free(f);
    setenv("KILN_PASSES", "nonsense", 1);
    f = compile(g, "interp", NULL, &err);
    ok(!f && strstr(err.message, "KILN_PASSES: unknown pass 'nonsense'"),
       "$KILN_PASSES is read (%s)", err.message);
    kiln_function_free(f);
    f = compile(g, "interp", "all", &err);
    ok(f != NULL, "kiln_options.passes overrides $KILN_PASSES");
    kiln_function_free(f);
    unsetenv("KILN_PASSES");
    /* the policy's passes, edited by a '-' list; "fusion" in a policy */
    char pol[] = "/tmp/kiln-rw-policy-XXXXXX";
    int fd = mkstemp(pol);
    FILE *pf = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (pf) {
        fputs("kiln_policy: 1\npasses: [cse, fold, fusion]\n", pf);
        fclose(pf);
    }
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.policy_file = pol;
    kiln_rw_config c;
    unsigned want = (1u << KILN_PASS_CSE) | (1u << KILN_PASS_FOLD) |
                    (1u << KILN_PASS_FUSE);
    ok(kiln_rw_config_for(&o, &c, &err) == 0 && c.passes == want,
       "the policy's passes: [cse, fold, fusion] (%s)", err.message);
    o.passes = "-fold";
    ok(kiln_rw_config_for(&o, &c, &err) == 0 &&
           c.passes == (want & ~(1u << KILN_PASS_FOLD)),
       "--passes -fold edits the policy's passes");
    o.passes = "fold";
    ok(kiln_rw_config_for(&o, &c, &err) == 0 &&
           c.passes == (1u << KILN_PASS_FOLD),
       "--passes fold replaces them");
    /* found by an attack: an invalid policy was ignored when a backend
     * was forced (it still picks the passes) */
    pf = fopen(pol, "w");
    if (pf) {
        fputs("kiln_policy: 1\npasses: [bogus]\n", pf);
        fclose(pf);
    }
    o.passes = NULL;
    o.backend = "interp";
    o.quiet = 1;
    err.code = 0;
    f = kiln_compile(g, &o, &err);
    ok(!f && err.code == KILN_ERR_POLICY && strstr(err.message, "bogus"),
       "an invalid policy fails the compile with a forced backend (%s)",
       err.message);
    kiln_function_free(f);
    unlink(pol);
    kiln_graph_free(g);
    for (int i = 0; i < KILN_PASS_COUNT; i++)
        ok(kiln_rw_pass_name(i) != NULL, "pass %d is named %s", i,
           kiln_rw_pass_name(i));
}

/* ---- 2. structure -------------------------------------------------------- */

/* canonicalize's shape rules (squeeze of a keepdims reduction, fill of a
 * reshaped literal): the graph after the pass; test_shape_rules runs each
 * body with passes on and off */
static const struct {
    const char *body, *want, *what;
} SHAPE_RULES[] = {
    {"  input x: f64[n, 3]\n  t = sum(x, axis=0, keepdims=true)\n"
     "  output s = squeeze(t, axis=0)\n",
     "  input x: f64[n, 3]\n  s = sum(x, axis=0)\n  output s\n",
     "squeeze(sum(x, axis=0, keepdims=true), axis=0) -> sum(x, axis=0) "
     "(symbolic dim, the squeeze's name)"},
    {"  input y: f64[2, 3, 4]\n  t = max(y, axis=[0, -1], keepdims=true)\n"
     "  output b = squeeze(t, axis=[2, 0])\n"
     "  u = prod(y, axis=-2, keepdims=true)\n"
     "  output c = squeeze(u, axis=1)\n"
     "  v = logsumexp(y, axis=2, keepdims=true)\n"
     "  output d = squeeze(v, axis=-1)\n",
     "  input y: f64[2, 3, 4]\n  b = max(y, axis=[0, -1])\n"
     "  c = prod(y, axis=-2)\n  d = logsumexp(y, axis=2)\n"
     "  output b\n  output c\n  output d\n",
     "squeeze of max/prod/logsumexp: the same axes after normalising "
     "negative ones, in any order"},
    {"  input y: f64[2, 3, 4]\n  t = mean(y, keepdims=true)\n"
     "  output c = squeeze(t)\n  u = min(y, axis=1, keepdims=true)\n"
     "  output d = squeeze(u)\n  input k: i32[5]\n"
     "  w = sum(k, keepdims=true)\n  output e = squeeze(w, axis=0)\n",
     "  input y: f64[2, 3, 4]\n  input k: i32[5]\n  c = mean(y)\n"
     "  d = min(y, axis=1)\n  e = sum(k)\n"
     "  output c\n  output d\n  output e\n",
     "axis-less reduction and axis-less squeeze (kept dims static, not "
     "1), integer sum"},
    {"  input x: f64[n, 3]\n  t = sum(x, axis=1, keepdims=true)\n"
     "  output e = squeeze(t)\n",
     "  input x: f64[n, 3]\n  t = sum(x, axis=1, keepdims=true)\n"
     "  e = squeeze(t)\n  output e\n",
     "not rewritten: an axis-less squeeze when a kept dim is symbolic "
     "(it may be 1 at run time)"},
    {"  input x: f64[2, 3]\n  t = sum(x, axis=0, keepdims=true)\n"
     "  output a = squeeze(t, axis=0)\n  output b = mul(t, 2.0)\n"
     "  u = max(x, axis=1, keepdims=true)\n"
     "  output c = squeeze(u, axis=1)\n  output u\n",
     "  input x: f64[2, 3]\n  t = sum(x, axis=0, keepdims=true)\n"
     "  a = squeeze(t, axis=0)\n  b = mul(t, 2.0)\n"
     "  u = max(x, axis=1, keepdims=true)\n  c = squeeze(u, axis=1)\n"
     "  output a\n  output b\n  output c\n  output u\n",
     "not rewritten: the reduction has another use (a node, an output)"},
    {"  input x: f64[1, 3]\n  t = sum(x, axis=1, keepdims=true)\n"
     "  output a = squeeze(t, axis=0)\n  input z: f64[2, 3, 4]\n"
     "  u = sum(z, axis=[0, 1], keepdims=true)\n"
     "  output b = squeeze(u, axis=0)\n",
     "  input x: f64[1, 3]\n  input z: f64[2, 3, 4]\n"
     "  t = sum(x, axis=1, keepdims=true)\n  a = squeeze(t, axis=0)\n"
     "  u = sum(z, axis=[0, 1], keepdims=true)\n  b = squeeze(u, axis=0)\n"
     "  output a\n  output b\n",
     "not rewritten: the squeeze removes another axis than the kept one, "
     "or only some of them"},
    {"  input x: f64[1, 3]\n  output a = squeeze(x, axis=0)\n"
     "  input y: f64[2, 1, 3]\n  t = sum(y, axis=0)\n"
     "  output b = squeeze(t, axis=0)\n"
     "  u = exp(sum(y, axis=1, keepdims=true))\n"
     "  output c = squeeze(u, axis=1)\n",
     "  input x: f64[1, 3]\n  input y: f64[2, 1, 3]\n"
     "  a = squeeze(x, axis=0)\n  t = sum(y, axis=0)\n"
     "  b = squeeze(t, axis=0)\n  t0 = sum(y, axis=1, keepdims=true)\n"
     "  u = exp(t0)\n  c = squeeze(u, axis=1)\n"
     "  output a\n  output b\n  output c\n",
     "not rewritten: a squeeze of no reduction, of a reduction without "
     "keepdims, of an elementwise op of one"},
    {"  input x: f64[n, 3]\n  t = expand_dims(1.0, axis=0)\n"
     "  output g = fill(x, t)\n  input y: f64[2, 3, 4]\n"
     "  output h = fill(y, reshape(squeeze(expand_dims(expand_dims(2.5, "
     "axis=0), axis=1), axis=0), shape=[1, 1]))\n  input k: i64[3]\n"
     "  output l = fill(k, expand_dims(-2, axis=0))\n",
     "  input x: f64[n, 3]\n  input y: f64[2, 3, 4]\n  input k: i64[3]\n"
     "  g = fill(x, 1.0)\n  h = fill(y, 2.5)\n  l = fill(k, -2)\n"
     "  output g\n  output h\n  output l\n",
     "fill(m, expand_dims(L)) -> fill(m, L), also through a chain of "
     "reshape/squeeze/expand_dims, integer literal"},
    {"  input w: f32[3]\n  output i = fill(w, expand_dims(1.0, axis=0))\n"
     "  input z: f64\n  output j = fill(z, expand_dims(1.0, axis=0))\n"
     "  input x: f64[2, 3]\n  output m = fill(x, expand_dims(z, axis=0))\n"
     "  input k: i64[3]\n  output o = fill(k, expand_dims(true, axis=0))\n",
     "  input w: f32[3]\n  input z: f64\n  input x: f64[2, 3]\n"
     "  input k: i64[3]\n  t0 = expand_dims(1.0, axis=0)\n"
     "  i = fill(w, t0)\n  t1 = expand_dims(1.0, axis=0)\n"
     "  j = fill(z, t1)\n  t2 = expand_dims(z, axis=0)\n"
     "  m = fill(x, t2)\n  t3 = expand_dims(true, axis=0)\n"
     "  o = fill(k, t3)\n  output i\n  output j\n  output m\n"
     "  output o\n",
     "not rewritten: fill whose dtype (f32 model, bool value) or rank "
     "(rank-0 model) would change, or whose value is not a literal"},
};

static void test_canonicalize(void)
{
    const char *S = "canonicalize";
    check_after("  input x: f64[3]\n  input y: f64[3]\n  input z: f64\n"
                "  output s = add(add(x, y), add(z, x))\n",
                S,
                "  input x: f64[3]\n  input y: f64[3]\n  input z: f64\n"
                "  s = add(x, y, z, x)\n  output s\n",
                "flatten: nested single-use adds become one n-ary add");
    check_after("  input x: f64[3]\n  input y: f64[3]\n"
                "  t = add(x, y)\n  output a = add(t, 1)\n"
                "  output b = mul(t, 2)\n",
                S,
                "  input x: f64[3]\n  input y: f64[3]\n  t = add(x, y)\n"
                "  a = add(t, 1)\n  b = mul(t, 2)\n  output a\n  output b\n",
                "flatten: an add used twice stays a node of its own");
    check_after("  input x: f32[3]\n  input y: f32[3]\n  input z: f64\n"
                "  output s = add(add(x, y), z)\n",
                S,
                "  input x: f32[3]\n  input y: f32[3]\n  input z: f64\n"
                "  t0 = add(x, y)\n  s = add(t0, z)\n  output s\n",
                "flatten: not across a dtype change (f32 add inside f64)");
    check_after("  input x: f64[3]\n  output a = mul(x, 1)\n"
                "  output b = mul(1.0, x)\n  output c = true_div(x, 1)\n"
                "  output d = sub(x, 0)\n  output e = add(x, -0.0)\n"
                "  output f = neg(neg(x))\n  output h = cast(x, dtype=f64)\n",
                S,
                "  input x: f64[3]\n  output a = x\n  output b = x\n"
                "  output c = x\n  output d = x\n  output e = x\n"
                "  output f = x\n  output h = x\n",
                "exact identities: x*1, 1*x, x/1, x-0, x+(-0.0), "
                "neg(neg(x)), cast to the same dtype");
    check_after("  input x: f64[3]\n  output a = add(x, 0)\n"
                "  output b = add(x, 0.0)\n  output c = sub(x, -0.0)\n",
                S,
                "  input x: f64[3]\n  a = add(x, 0)\n  b = add(x, 0.0)\n"
                "  c = sub(x, -0.0)\n  output a\n  output b\n  output c\n",
                "not exact, kept: x+0 and x-(-0) for floats (-0 + 0 = +0)");
    check_after("  input k: i64[3]\n  output a = add(k, 0)\n",
                S, "  input k: i64[3]\n  output a = k\n",
                "integer x+0 -> x");
    check_after("  input k: i32[3]\n  output a = mul(k, 1.0)\n"
                "  input b: bool[2]\n  output c = neg(neg(b))\n",
                S,
                "  input k: i32[3]\n  input b: bool[2]\n"
                "  a = mul(k, 1.0)\n  t0 = neg(b)\n  c = neg(t0)\n"
                "  output a\n  output c\n",
                "identities that would change the dtype are not applied");
    check_after("  input x: f64[3]\n  output a = mul(x, -1)\n", S,
                "  input x: f64[3]\n  a = neg(x)\n  output a\n",
                "x*(-1) -> neg(x)");
    for (size_t i = 0; i < sizeof SHAPE_RULES / sizeof SHAPE_RULES[0]; i++)
        check_after(SHAPE_RULES[i].body, S, SHAPE_RULES[i].want,
                    SHAPE_RULES[i].what);
}

static void test_fold_cse(void)
{
    check_after("  input x: f64\n  output a = add(x, add(mul(2, 3), 0.5))\n"
                "  output b = exp(1.0)\n  output c = lt(1, 2)\n"
                "  output d = mul(4503599627370496, 4)\n",
                "fold",
                "  input x: f64\n  a = add(x, 6.5)\n  b = exp(1.0)\n"
                "  c = true\n  d = mul(4503599627370496, 4)\n"
                "  output a\n  output b\n  output c\n  output d\n",
                "fold: literal arithmetic and comparisons; exp and integers "
                "beyond 2^53 are left alone");
    check_after("  input x: f64[3]\n  input y: f64[3]\n"
                "  output a = add(exp(add(x, y)), exp(add(y, x)))\n"
                "  output b = mul(2.5, x)\n  output c = mul(2.5, x)\n",
                "cse",
                "  input x: f64[3]\n  input y: f64[3]\n  t0 = add(x, y)\n"
                "  t1 = exp(t0)\n  a = add(t1, t1)\n  b = mul(2.5, x)\n"
                "  output a\n  output b\n  output c = b\n",
                "cse: repeated trees merge, add is commutative");
    check_after("  input x: f64[3]\n  output a = sub(x, 1)\n"
                "  output b = sub(1, x)\n",
                "cse",
                "  input x: f64[3]\n  t0 = 1\n  a = sub(x, t0)\n"
                "  b = sub(t0, x)\n  output a\n  output b\n",
                "cse: sub is not commutative (the literal 1 is merged)");
    check_after("  input x: f64[2]\n  const c: f64[2] = [1, 2]\n"
                "  const d: f64[2] = [1, 2]\n  const e: f64[2] = [1, 3]\n"
                "  output a = add(mul(x, c), mul(x, d))\n"
                "  output b = mul(x, e)\n",
                "cse",
                "  input x: f64[2]\n  const c: f64[2] = [1, 2]\n"
                "  const e: f64[2] = [1, 3]\n  t0 = mul(x, c)\n"
                "  a = add(t0, t0)\n  b = mul(x, e)\n  output a\n"
                "  output b\n",
                "cse: equal constants merge by value, different ones not");
    /* dead code: nothing an output needs is dropped, inputs always stay */
    check_after("  input x: f64\n  input unused: f64\n  t = exp(x)\n"
                "  u = log(x)\n  output y = t\n",
                "cse",
                "  input x: f64\n  input unused: f64\n  t = exp(x)\n"
                "  output y = t\n",
                "dead code is dropped, unused inputs stay");
    /* gradient records follow their values */
    kiln_graph *g = parse("  input x: f64\n  input w: f64\n"
                          "  c = add(mul(x, 1), mul(w, mul(x, x)))\n"
                          "  dx, dw = grad(c, x, w)\n  output dx\n");
    int n_grads = g ? g->n_grads : 0;
    g = g ? rewrite(g, "all") : NULL;
    int good = g && g->n_grads == n_grads && n_grads == 2;
    for (int k = 0; good && k < g->n_grads; k++) {
        kiln_grad_rec *r = &g->grads[k];
        good = r->cost < g->n_nodes && r->result < g->n_nodes &&
               g->nodes[r->wrt].op == KILN_OP_INPUT &&
               strcmp(g->nodes[r->wrt].name, k ? "w" : "x") == 0 &&
               kiln_rw_same_type(&g->nodes[r->result].type,
                                 &g->nodes[r->wrt].type);
    }
    ok(good, "gradient records stay valid through every pass");
    kiln_graph_free(g);
}

static void test_promote(void)
{
    /* 8 MB: 2^20 doubles */
    int64_t n = 1 << 20;
    double *w = malloc(sizeof(double) * (size_t)n);
    kiln_key keys[2][8];
    int nk[2] = {0, 0};
    for (int m = 0; m < 2; m++) {
        for (int64_t i = 0; i < n; i++)
            w[i] = m ? 0.5 * (double)i : 1.0 / (double)(i + 1);
        kiln_err err = {0, ""};
        kiln_graph *g = kiln_graph_new("big", &err);
        kiln_value x = kiln_graph_input(g, "x", KILN_F64, 1, &n, &err);
        kiln_value c = kiln_graph_const(g, "w", KILN_F64, 1, &n, w, &err);
        kiln_value in[2] = {x, c};
        kiln_value p = kiln_graph_op(g, "mul", 2, in, NULL, 0, &err);
        kiln_value s = kiln_graph_op(g, "sum", 1, &p, NULL, 0, &err);
        kiln_graph_output(g, "s", s, &err);
        if (m == 0) {
            kiln_graph *r = kiln_ir_clone(g, &err);
            r = rewrite(r, "promote");
            kiln_value wv = r ? kiln_graph_lookup(r, "w") : -1;
            ok(wv >= 0 && r->nodes[wv].op == KILN_OP_SHARED &&
                   r->nodes[wv].promoted && r->nodes[wv].data,
               "promote: an 8 MB constant becomes a promoted shared value");
            kiln_graph_free(r);
            kiln_graph *small = parse("  input x: f64[2]\n"
                                      "  const c: f64[2] = [1, 2]\n"
                                      "  output y = mul(x, c)\n");
            small = rewrite(small, "promote");
            kiln_value cv = small ? kiln_graph_lookup(small, "c") : -1;
            ok(cv >= 0 && small->nodes[cv].op == KILN_OP_CONST,
               "promote: a 16-byte constant stays a constant");
            kiln_graph_free(small);
        }
        kiln_function *f = compile(g, "interp", "all", &err);
        ok(f != NULL, "8 MB constant model %d compiles (%s)", m, err.message);
        if (f) {
            nk[m] = kiln_function_n_kernels(f);
            int small_kernels = 1;
            for (int i = 0; i < nk[m] && i < 8; i++) {
                kiln_function_kernel_key(f, i, &keys[m][i]);
                kiln_kernel_info k;
                memset(&k, 0, sizeof k);
                k.struct_size = sizeof k;
                kiln_function_kernel_info(f, i, &k, NULL);
                small_kernels &= k.facts.scalar_ops < 16 && k.facts.width <= 2;
            }
            ok(kiln_function_n_shared(f) == 0,
               "the promoted constant is not a shared value of the function");
            ok(small_kernels, "its kernels stay small (< 16 instructions)");
            double *xv = malloc(sizeof(double) * (size_t)n);
            for (int64_t i = 0; i < n; i++)
                xv[i] = 1.0;
            kiln_tensor tin = {KILN_F64, 1, {n}, xv}, tout[1];
            double want = 0;
            for (int64_t i = 0; i < n; i++)
                want += w[i];
            ok(kiln_function_call(f, &tin, tout, &err) == 0 &&
                   fabs(*(double *)tout[0].data - want) <= 1e-9 * fabs(want),
               "the promoted constant's values are used");
            free(xv);
        }
        kiln_function_free(f);
        kiln_graph_free(g);
    }
    ok(nk[0] == nk[1] && nk[0] > 0 &&
           memcmp(keys[0], keys[1], sizeof(kiln_key) * (size_t)nk[0]) == 0,
       "two models differing only in the large constant's value have the "
       "same kernel keys");
    free(w);
}

static void test_join_pairwise_structure(void)
{
    check_after("  input a: f64[2]\n  input b: f64[3]\n  input c: f64[1]\n"
                "  output j = join(0, join(0, a, b), c)\n",
                "join_slices",
                "  input a: f64[2]\n  input b: f64[3]\n  input c: f64[1]\n"
                "  j = join(0, a, b, c)\n  output j\n",
                "join_slices: nested joins flatten");
    /* a 5000-term sum */
    int n = 5000;
    size_t cap = (size_t)n * 64 + 256;
    char *body = malloc(cap), *p = body;
    for (int i = 0; i < n; i++)
        p += sprintf(p, "  input x%d: f64\n", i);
    p += sprintf(p, "  s0 = add(x0, x1)\n");
    for (int i = 2; i < n; i++)
        p += sprintf(p, "  s%d = add(s%d, x%d)\n", i - 1, i - 2, i);
    sprintf(p, "  output s = s%d\n", n - 2);
    kiln_graph *g = parse(body);
    int d0 = g ? depth(g) : 0;
    kiln_graph *c = g ? rewrite(kiln_ir_clone(g, NULL), "canonicalize") : NULL;
    ok(c && count_op(c, KILN_OP_ADD) == 1 && max_width(c, KILN_OP_ADD) == n,
       "5000-term sum: canonicalize makes one 5000-ary add");
    kiln_graph *r = g ? rewrite(kiln_ir_clone(g, NULL), "all") : NULL;
    ok(r && max_width(r, KILN_OP_ADD) == 2 &&
           count_op(r, KILN_OP_ADD) == n - 1 && depth(r) == 13,
       "5000-term sum: pairwise makes a balanced tree (width 2, depth %d, "
       "was %d)", r ? depth(r) : -1, d0);
    result a, b;
    char why[512] = "";
    run(g, "interp", "none", NULL, 1, &a);
    run(g, "interp", "all", NULL, 1, &b);
    ok(same_results(&a, &b, why, sizeof why),
       "5000-term sum: all passes agree with none %s", why);
    ok(b.max_width <= 256 && b.max_ops <= 1024,
       "5000-term sum: fused kernels within the caps (%d inputs, %d "
       "instructions, %d kernels)", b.max_width, b.max_ops, b.n_kernels);
    result_free(&b);
    run(g, "interp", "-fuse", NULL, 1, &b);
    ok(b.max_width <= 2, "5000-term sum: without fusion no kernel wider "
       "than 2 (%d)", b.max_width);
    result_free(&a);
    result_free(&b);
    kiln_graph_free(c);
    kiln_graph_free(r);
    kiln_graph_free(g);
    free(body);
}

/* Chains written one statement per step, as a front end writes a
 * log-density: a_i = add(a_{i-1}, x), j_i = join(0, j_{i-1}, x).  Found
 * by an attack: canonicalize and join_slices copied every term into every
 * intermediate node (20,000 steps: 9 s, 1.2 GB; 200,000: killed at 24
 * GB).  At 50,000 steps the quadratic version needs minutes and ~7 GB;
 * the linear one a fraction of a second. */
static void test_long_chains(void)
{
    enum { N = 50000 };
    for (int join = 0; join < 2; join++) {
        kiln_err err = {0, ""};
        kiln_graph *g = kiln_graph_new("chain", &err);
        int64_t d[1] = {2};
        kiln_value x = kiln_graph_input(g, "x", KILN_F64, join, d, &err);
        kiln_attr ax = {.key = "axis", .kind = KILN_ATTR_INT, .i = 0};
        kiln_value a = x;
        for (int i = 0; i < N && a >= 0; i++) {
            kiln_value in[2] = {a, x};
            a = kiln_graph_op(g, join ? "join" : "add", 2, in,
                              join ? &ax : NULL, join, &err);
        }
        if (a < 0 || kiln_graph_output(g, "out", a, &err)) {
            ok(0, "%s chain: built (%s)", join ? "join" : "add", err.message);
            kiln_graph_free(g);
            continue;
        }
        int n0 = g->n_nodes;
        g = rewrite(g, join ? "join_slices" : "canonicalize");
        int one = 0, all_x = 0;
        if (g) {
            const kiln_node *r = &g->nodes[g->outputs[0].value];
            one = r->op == (join ? KILN_OP_JOIN : KILN_OP_ADD) &&
                  r->n_in == N + 1;
            all_x = 1;
            for (int i = 0; one && i < r->n_in; i++)
                all_x &= g->nodes[r->in[i]].op == KILN_OP_INPUT;
        }
        ok(g && one && all_x && g->n_nodes == 2,
           "a %d-step %s chain becomes one %d-input %s (%d nodes -> %d)", N,
           join ? "join" : "add", N + 1, join ? "join" : "add", n0,
           g ? g->n_nodes : -1);
        kiln_graph_free(g);
    }
}

/* 1000 vectors of 1000 float32 terms: sequential (no passes) vs pairwise
 * error against the exact sum, summed over the elements */
static void test_pairwise_accuracy(void)
{
    int k = 1000, len = 1000;
    size_t cap = (size_t)k * 80 + 256;
    char *body = malloc(cap), *p = body;
    for (int i = 0; i < k; i++)
        p += sprintf(p, "  input x%d: f32[%d]\n", i, len);
    p += sprintf(p, "  s0 = add(x0, x1)\n");
    for (int i = 2; i < k; i++)
        p += sprintf(p, "  s%d = add(s%d, x%d)\n", i - 1, i - 2, i);
    sprintf(p, "  output s = s%d\n", k - 2);
    kiln_graph *g = parse(body);
    kiln_tensor *in = calloc((size_t)k, sizeof *in);
    double *exact = calloc((size_t)len, sizeof *exact);
    uint64_t s = 12345;
    for (int i = 0; i < k; i++) {
        float *d = malloc(sizeof(float) * (size_t)len);
        for (int j = 0; j < len; j++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            d[j] = (float)(0.1 + (double)(s >> 40) * 0x1p-24);
            exact[j] += d[j];  /* exact: 24-bit terms, 1000 of them fit */
        }
        in[i] = (kiln_tensor){KILN_F32, 1, {len}, d};
    }
    result seq, pw;
    run(g, "interp", "none", in, 0, &seq);
    run(g, "interp", "all", in, 0, &pw);
    double es = 0, ep = 0;
    if (seq.rc == 0 && pw.rc == 0)
        for (int j = 0; j < len; j++) {
            es += fabs(((float *)seq.t[0].data)[j] - exact[j]);
            ep += fabs(((float *)pw.t[0].data)[j] - exact[j]);
        }
    ok(seq.rc == 0 && pw.rc == 0 && ep < es,
       "10^6 float32 terms: pairwise error %.4g < sequential %.4g "
       "(sum over 1000 sums of 1000 terms)", ep, es);
    ok(pw.max_width <= 256, "pairwise: fused kernels within the width cap "
       "(%d)", pw.max_width);
    result_free(&pw);
    run(g, "interp", "-fuse", in, 0, &pw);
    ok(pw.max_width <= 2, "pairwise: without fusion no kernel wider than 2");
    result_free(&seq);
    result_free(&pw);
    for (int i = 0; i < k; i++)
        free(in[i].data);
    free(in);
    free(exact);
    free(body);
    kiln_graph_free(g);
}

/* ---- 3. numbers: the corpus ---------------------------------------------- */

static int n_files;
static char files[64][4608];

static void collect(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char names[64][256];
    int n = 0;
    while ((e = readdir(d)) && n < 64) {
        size_t l = strlen(e->d_name);
        if (l > 3 && strcmp(e->d_name + l - 3, ".kg") == 0)
            snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0],
          (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < n && n_files < 64; i++)
        snprintf(files[n_files++], sizeof files[0], "%.4000s/%.250s", dir,
                 names[i]);
}

static void test_corpus(const char *backend, int each_pass)
{
    for (int fi = 0; fi < n_files; fi++) {
        kiln_err err = {0, ""};
        kiln_graph *g = kiln_parse_file(files[fi], &err);
        const char *base = strrchr(files[fi], '/') + 1;
        if (!g) {
            ok(0, "%s parses: %s", base, err.message);
            continue;
        }
        int good = 1;
        char why[512] = "";
        for (int seed = 0; seed < 2 && good; seed++) {
            result a, b;
            run(g, backend, "none", NULL, (unsigned)seed, &a);
            run(g, backend, "all", NULL, (unsigned)seed, &b);
            good = same_results(&a, &b, why, sizeof why);
            result_free(&b);
            for (int pi = 0; each_pass && good && pi < KILN_PASS_COUNT; pi++) {
                run(g, backend, kiln_rw_pass_name(pi), NULL, (unsigned)seed,
                    &b);
                good = same_results(&a, &b, why, sizeof why);
                if (!good)
                    snprintf(why + strlen(why), sizeof why - strlen(why),
                             " (pass %s alone)", kiln_rw_pass_name(pi));
                result_free(&b);
            }
            result_free(&a);
        }
        ok(good, "%s: %s, all passes %sagree with none %s", base, backend,
           each_pass ? "and each pass alone " : "", why);
        kiln_graph_free(g);
    }
}

/* ---- 5. canonicalize's shape rules: numbers and gradients ----------------- */

/* a model whose gradient broadcasts a vector and a scalar over a matrix
 * and reduces it back (sum, mean, max, logsumexp): the gradient graph is
 * full of squeeze(sum(..., keepdims=true)) and starts from
 * fill(x, expand_dims(1.0, axis=0)) seeds */
static const char *GRAD_MODEL =
    "kiln 1\ngraph t\n"
    "  # range s 0.5 2\n"
    "  input mu: f64[3]\n  input s: f64\n  input b: f64[4, 1]\n"
    "  const y: f64[4, 3] = [[0.5, -1, 2], [1.5, 0.25, -0.75], "
    "[-2, 1, 0.5], [0.1, 0.2, 0.3]]\n"
    "  z = true_div(sub(y, add(mu, b)), s)\n"
    "  lp = sum(mul(-0.5, square(z)))\n"
    "  m = mean(mul(z, mu), axis=0)\n"
    "  q = logsumexp(add(z, mu), axis=1)\n"
    "  r = max(mul(b, mu), axis=0)\n"
    "  output cost = add(lp, sum(m), sum(q), sum(r), mul(-12, log(s)))\n"
    "%s"
    "end\n";

/* expand_dims nodes over a literal (the gradient seeds) */
static int count_expand_literal(const kiln_graph *g)
{
    int n = 0;
    for (int v = 0; v < g->n_nodes; v++)
        n += g->nodes[v].op == KILN_OP_EXPAND_DIMS &&
             g->nodes[g->nodes[v].in[0]].op == KILN_OP_LITERAL;
    return n;
}

static void test_shape_rules(const char **backends, int nb)
{
    /* every structure case with passes all, canonicalize alone and none,
     * under every backend */
    for (size_t i = 0; i < sizeof SHAPE_RULES / sizeof SHAPE_RULES[0]; i++) {
        kiln_graph *g = parse(SHAPE_RULES[i].body);
        for (int b = 0; g && b < nb; b++) {
            int good = 1;
            char why[512] = "";
            for (unsigned seed = 0; seed < 2 && good; seed++) {
                result a, r, c;
                run(g, backends[b], "none", NULL, seed, &a);
                run(g, backends[b], "all", NULL, seed, &r);
                run(g, backends[b], "canonicalize", NULL, seed, &c);
                good = a.rc == 0 && same_results(&a, &r, why, sizeof why) &&
                       same_results(&a, &c, why, sizeof why);
                if (a.rc)
                    snprintf(why, sizeof why, "%s", a.msg);
                result_free(&a);
                result_free(&r);
                result_free(&c);
            }
            ok(good, "shape rules, case %zu: %s, all passes and canonicalize "
               "alone agree with none %s", i + 1, backends[b], why);
        }
        if (!g)
            ok(0, "shape rules, case %zu parses", i + 1);
        kiln_graph_free(g);
    }

    /* the gradient model: the graph after canonicalize, its kernels, its
     * numbers, its gradients */
    char text[4096];
    snprintf(text, sizeof text, GRAD_MODEL,
             "  d_mu, d_s, d_b = grad(cost, mu, s, b)\n"
             "  output d_mu\n  output d_s\n  output d_b\n");
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "grad.kg", NULL, &err);
    if (!g) {
        ok(0, "gradient model parses: %s", err.message);
        return;
    }
    kiln_graph *c = kiln_ir_clone(g, &err);
    int sq0 = count_op(g, KILN_OP_SQUEEZE), ex0 = count_expand_literal(g);
    c = c ? rewrite(c, "canonicalize") : NULL;
    if (c) {
        /* the expand_dims left are the gradients of axis reductions
         * (expand_dims of a computed gradient): not literals */
        ok(sq0 >= 4 && count_op(c, KILN_OP_SQUEEZE) == 0 && ex0 >= 1 &&
               count_expand_literal(c) == 0 && c->n_grads == 3,
           "gradient model: canonicalize removes every squeeze (%d -> %d) "
           "and every expand_dims of a literal (%d -> %d), keeps the "
           "gradient records", sq0, count_op(c, KILN_OP_SQUEEZE), ex0,
           count_expand_literal(c));
        kiln_graph_free(c);
    } else {
        ok(0, "gradient model: canonicalize");
    }
    for (int b = 0; b < nb; b++) {
        result a, r, k, rf, kf;
        char why[512] = "";
        run(g, backends[b], "none", NULL, 5, &a);
        run(g, backends[b], "all", NULL, 5, &r);
        run(g, backends[b], "-canonicalize", NULL, 5, &k);
        /* without fusion: fusion reads the squeezes and expand_dims left
         * in place (no kernels either way), which would hide the rule's
         * effect */
        run(g, backends[b], "-fuse", NULL, 5, &rf);
        run(g, backends[b], "-canonicalize,-fuse", NULL, 5, &kf);
        ok(a.rc == 0 && same_results(&a, &r, why, sizeof why),
           "gradient model: %s, all passes agree with none %s", backends[b],
           why);
        ok(kf.n_squeeze >= 4 && rf.n_squeeze == 0 &&
               rf.n_expand < kf.n_expand &&
               rf.n_kernels <= kf.n_kernels - kf.n_squeeze,
           "gradient model: %s, squeeze kernels %d -> %d, expand_dims %d -> "
           "%d, kernels %d -> %d (without canonicalize -> with; no fusion)",
           backends[b], kf.n_squeeze, rf.n_squeeze, kf.n_expand, rf.n_expand,
           kf.n_kernels, rf.n_kernels);
        ok(k.n_squeeze == 0 && r.n_squeeze == 0 && r.n_kernels <= k.n_kernels,
           "gradient model: %s, with fusion no squeeze kernel with or "
           "without canonicalize (read in place), kernels %d -> %d",
           backends[b], k.n_kernels, r.n_kernels);
        result_free(&a);
        result_free(&r);
        result_free(&k);
        result_free(&rf);
        result_free(&kf);
    }
    kiln_graph_free(g);
    /* tests/gradcheck.h: the gradients of the rewritten graph (kiln_compile
     * runs every pass) against central differences */
    snprintf(text, sizeof text, GRAD_MODEL, "");
    gc_check("gradient model with squeezed reductions", text, 1e-6);
}

/* ---- 4. generated stress models ------------------------------------------- */

static char tmpdir[] = "/tmp/kiln-rewrite-XXXXXX";

static kiln_graph *gen(const char *args)
{
    char cmd[8192], path[4096] = "";
    snprintf(cmd, sizeof cmd, "'%s/tools/kiln-gen' %s -o '%s'", builddir,
             args, tmpdir);
    FILE *p = popen(cmd, "r");
    if (!p || !fgets(path, sizeof path, p)) {
        if (p)
            pclose(p);
        diag("kiln-gen %s failed", args);
        return NULL;
    }
    pclose(p);
    path[strcspn(path, "\n")] = 0;
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_file(path, &err);
    if (!g)
        diag("%s: %s", path, err.message);
    return g;
}

static void test_models(const char **backends, int nb)
{
    if (!mkdtemp(tmpdir)) {
        ok(0, "mkdtemp");
        return;
    }
    struct {
        const char *args, *what;
        int width_cap;   /* the widest kernel allowed with passes on but
                            fusion off (with fusion: the fusion cap, 64) */
    } models[] = {
        {"join --n 500", "500-scalar join", 2},
        {"additive --components 80", "80-component additive model", 64},
        {"pooled --groups 6 --shared 30 --likelihood gamma",
         "gradient of a pooled model with 30 shared parameters", 64},
        {"pooled --groups 6 --shared 30 --likelihood lognormal",
         "the same, lognormal likelihood", 64},
        {"dense --size 1024", "a model with an 8 MB constant", 64},
    };
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        kiln_graph *g = gen(models[m].args);
        if (!g) {
            ok(0, "%s: generated", models[m].what);
            continue;
        }
        for (int b = 0; b < nb; b++) {
            result a, r;
            char why[512] = "";
            run(g, backends[b], "none", NULL, 7, &a);
            run(g, backends[b], "all", NULL, 7, &r);
            ok(a.rc == 0 && same_results(&a, &r, why, sizeof why),
               "%s: %s, all passes agree with none (%d kernels -> %d) %s",
               models[m].what, backends[b], a.n_kernels, r.n_kernels, why);
            if (b == 0) {
                ok(r.max_width <= 256 && r.max_ops <= 1024,
                   "%s: fused kernels within the caps: widest %d inputs "
                   "(was %d), largest program %d instructions",
                   models[m].what, r.max_width, a.max_width, r.max_ops);
                result nf;
                run(g, backends[b], "-fuse", NULL, 7, &nf);
                ok(nf.max_width <= models[m].width_cap,
                   "%s: without fusion the widest kernel has %d inputs (was "
                   "%d)", models[m].what, nf.max_width, a.max_width);
                ok(same_results(&a, &nf, why, sizeof why),
                   "%s: passes without fusion agree with none %s",
                   models[m].what, why);
                if (strncmp(models[m].args, "pooled ", 7) == 0)
                    ok(a.n_squeeze > 0 && r.n_squeeze == 0,
                       "%s: canonicalize removes the squeeze kernels of the "
                       "gradient (%d with passes off, %d with them on)",
                       models[m].what, a.n_squeeze, r.n_squeeze);
                if (strncmp(models[m].args, "join ", 5) == 0)
                    ok(r.n_join == 1 && r.max_join_width == 500 &&
                           r.n_kernels <= a.n_kernels,
                       "%s: one kernel looping over the 500 inputs (%d "
                       "join kernels, widest %d; %d kernels, %d with passes "
                       "off)", models[m].what, r.n_join, r.max_join_width,
                       r.n_kernels, a.n_kernels);
                result_free(&nf);
            }
            result_free(&a);
            result_free(&r);
        }
        kiln_graph_free(g);
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        diag("could not remove %s", tmpdir);
}

/* ---- 5. fusion (kiln_lower_opts.fuse, docs/rewrite.md) --------------------- */

/* kernels of `body` lowered after all passes, fusion caps w / k */
static int lower_fused(const char *body, int w, int k, kiln_program *p)
{
    kiln_graph *g = parse(body);
    g = g ? rewrite(g, "all") : NULL;
    if (!g)
        return -1;
    kiln_lower_opts o = {1, w, k, 64, 0, 0, 0};
    kiln_err err = {0, ""};
    int rc = kiln_lower_ex(g, p, &o, &err);
    if (rc)
        diag("lower: %s", err.message);
    /* the program points into g for subtensor views only; none here */
    kiln_graph_free(g);
    return rc;
}

static int has_label(const kiln_program *p, const char *l)
{
    for (int i = 0; i < p->n_steps; i++)
        if (strcmp(p->steps[i].label, l) == 0)
            return 1;
    return 0;
}

static int prog_max(const kiln_program *p, int ops)
{
    int m = 0;
    for (int i = 0; i < p->n_steps; i++) {
        int v = ops ? (int)p->steps[i].kernel.n_instrs
                    : (int)p->steps[i].kernel.n_inputs;
        if (v > m)
            m = v;
    }
    return m;
}

/* all passes vs none, under every backend; with `pol` (a policy text) */
static void fuse_numbers(const char *body, const char *what,
                         const char **backends, int nb, const char *pol)
{
    kiln_graph *g = parse(body);
    for (int b = 0; g && b < nb; b++) {
        result a, r;
        char why[512] = "";
        run(g, backends[b], "none", NULL, 3, &a);
        kiln_err err = {0, ""};
        kiln_policy *P = pol ? kiln_policy_load_string(pol, strlen(pol),
                                                       NULL, &err)
                             : NULL;
        if (pol && !P)
            diag("policy: %s", err.message);
        kiln_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.backend = backends[b];
        o.passes = "all";
        o.quiet = 1;
        o.jobs = 1;
        o.policy = P;
        memset(&r, 0, sizeof r);
        kiln_function *f = kiln_compile(g, &o, &err);
        kiln_policy_free(P);
        r.rc = -1;
        if (f) {
            int n_in = 0;
            kiln_tensor *in = make_inputs(f, 3, &n_in);
            kiln_tensor out[MAX_OUT];
            r.n_out = kiln_function_n_outputs(f);
            r.rc = kiln_function_call(f, in, out, &err);
            if (r.rc)
                r.n_out = 0;
            for (int i = 0; i < r.n_out; i++) {
                r.t[i] = out[i];
                size_t bytes = kiln_dtype_size(out[i].dtype);
                for (int k = 0; k < out[i].rank; k++)
                    bytes *= (size_t)out[i].shape[k];
                r.t[i].data = malloc(bytes ? bytes : 1);
                memcpy(r.t[i].data, out[i].data, bytes);
            }
            r.n_kernels = kiln_function_n_kernels(f);
            free_inputs(in, n_in);
            kiln_function_free(f);
        } else {
            snprintf(r.msg, sizeof r.msg, "%s", err.message);
        }
        ok(a.rc == 0 && same_results(&a, &r, why, sizeof why),
           "fusion: %s: %s agrees with no passes (%d kernels -> %d) %s",
           what, backends[b], a.n_kernels, r.n_kernels,
           r.rc ? r.msg : why);
        result_free(&a);
        result_free(&r);
    }
    kiln_graph_free(g);
}

static const char *F_CHAIN =
    "  input x: f64[4]\n  input s: f64\n"
    "  c = exp(mul(add(x, s), 0.5))\n  output y = c\n"
    "  output t = sum(mul(c, log(x)))\n";
static const char *F_BCAST =
    "  input x: f64[n, 3]\n  input s: f64\n  input r: f64[3]\n"
    "  e = exp(s)\n  output y = add(mul(x, e), sqrt(r))\n"
    "  output m = max(sub(x, r), axis=1)\n";
static const char *F_SHARED =
    "  input x: f64[3]\n  a = exp(x)\n  output y = add(a, 1.0)\n"
    "  output z = mul(a, 2.0)\n";
static const char *F_OUTER =
    "  input x: f64[3, 1]\n  input y: f64[1, 4]\n"
    "  output s = sum(add(x, y))\n  output w = mean(exp(sub(x, y)), axis=0)\n";

static void test_fusion(const char **backends, int nb)
{
    kiln_program p;
    if (lower_fused(F_CHAIN, 64, 256, &p) == 0) {
        ok(p.n_steps == 2 && has_label(&p, "fused") &&
               has_label(&p, "fused_sum"),
           "fusion: an elementwise chain is one kernel, the chain feeding "
           "sum another (%d kernels: %s, %s)", p.n_steps,
           p.n_steps > 0 ? p.steps[0].label : "",
           p.n_steps > 1 ? p.steps[1].label : "");
        /* y = exp(0.5 * (x + s)): x and s, broadcast to (4) */
        ok(p.n_steps == 2 && p.steps[0].kernel.n_inputs == 2 &&
               p.steps[0].kernel.n_instrs == 6,
           "fusion: the chain's program loads x and s once (%u inputs, %u "
           "instructions)", p.n_steps ? p.steps[0].kernel.n_inputs : 0,
           p.n_steps ? p.steps[0].kernel.n_instrs : 0);
        kiln_lower_free(&p);
    }
    if (lower_fused(F_SHARED, 64, 256, &p) == 0) {
        /* one region: y and z are its outputs, a = exp(x) lives in a
         * register and is computed once */
        int n_exp = 0;
        for (uint32_t i = 0; p.n_steps == 1 && i < p.steps[0].kernel.n_instrs; i++)
            n_exp += p.steps[0].kernel.instrs[i].op == KILN_I_EXP;
        ok(p.n_steps == 1 && p.steps[0].n_out == 2 && n_exp == 1,
           "fusion: a value two outputs read is computed once, in one "
           "two-output kernel (%d kernels, %d exp)", p.n_steps, n_exp);
        kiln_lower_free(&p);
    }
    if (lower_fused(F_BCAST, 64, 256, &p) == 0) {
        /* exp(s) and sqrt(r) have other shapes than y: kernels of their
         * own; max(x - r) is one fused reduction */
        ok(p.n_steps == 4 && has_label(&p, "exp") &&
               has_label(&p, "sqrt") && has_label(&p, "fused") &&
               has_label(&p, "fused_max"),
           "fusion: a producer of another shape is not fused (%d kernels)",
           p.n_steps);
        kiln_lower_free(&p);
    }
    if (lower_fused(F_OUTER, 64, 256, &p) == 0) {
        /* no input has the reduced operand's shape (3, 4): the operand is
         * computed first, then reduced */
        ok(p.n_steps == 4 && has_label(&p, "sum") && has_label(&p, "mean"),
           "fusion: a reduction of an outer broadcast keeps its operand "
           "(%d kernels)", p.n_steps);
        kiln_lower_free(&p);
    }
    /* the width cap: a sum of 40 scalar inputs, caps 8 inputs / 40 ops */
    char body[4096], *q = body;
    for (int i = 0; i < 40; i++)
        q += sprintf(q, "  input x%d: f64\n", i);
    q += sprintf(q, "  output s = add(");
    for (int i = 0; i < 40; i++)
        q += sprintf(q, "%smul(x%d, x%d)", i ? ", " : "", i, (i + 1) % 40);
    sprintf(q, ")\n");
    if (lower_fused(body, 8, 1000, &p) == 0) {
        ok(p.n_steps > 1 && prog_max(&p, 0) <= 8 &&
               (has_label(&p, "fused") || has_label(&p, "fused_scalars")),
           "fusion: a group over the width cap is split (%d kernels, widest "
           "%d <= 8)", p.n_steps, prog_max(&p, 0));
        kiln_lower_free(&p);
    }
    if (lower_fused(body, 1000, 24, &p) == 0) {
        ok(p.n_steps > 1 && prog_max(&p, 1) <= 24,
           "fusion: a group over the program-size cap is split (%d kernels, "
           "largest %d <= 24 instructions)", p.n_steps, prog_max(&p, 1));
        kiln_lower_free(&p);
    }
    if (lower_fused(body, 64, 1000, &p) == 0) {
        ok(p.n_steps == 1 && prog_max(&p, 0) == 40,
           "fusion: within the caps the whole sum is one kernel (%d)",
           p.n_steps);
        kiln_lower_free(&p);
    }
    fuse_numbers(F_CHAIN, "chain and chain -> sum", backends, nb, NULL);
    fuse_numbers(F_BCAST, "broadcast leaves, fused max", backends, nb, NULL);
    fuse_numbers(F_SHARED, "shared producer", backends, nb, NULL);
    fuse_numbers(F_OUTER, "outer broadcast reductions", backends, nb, NULL);
    fuse_numbers(body, "split at the width cap", backends, nb,
                 "kiln_policy: 1\nfusion:\n  max_width: 8\n  max_scalar_ops: 40\n");
}

/* ---- 6. reciprocal ------------------------------------------------------- */

/* true_div nodes with more than one element in g */
static int vector_divs(const kiln_graph *g)
{
    int n = 0;
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *d = &g->nodes[v];
        if (d->op != KILN_OP_TRUE_DIV)
            continue;
        int64_t numel = 1;
        for (int k = 0; k < d->type.rank; k++)
            numel *= d->type.dims[k] < 0 ? 2 : d->type.dims[k];
        n += numel > 1;
    }
    return n;
}

static const struct {
    const char *body;
    int fires;
    const char *what;
} RECIP[] = {
    {"  input x: f64[5]\n  input s: f64\n"
     "  output y = true_div(x, s)\n", 1, "rank-0 divisor"},
    {"  input x: f32[2, 3]\n  input s: f32\n"
     "  output y = true_div(x, s)\n", 1, "f32, rank-0 divisor"},
    {"  input x: f64[4, 3]\n  input s: f64[1, 1]\n"
     "  output y = true_div(x, s)\n", 1, "one-element divisor"},
    {"  input x: f64[n]\n  input s: f64\n"
     "  output y = true_div(exp(x), s)\n", 1, "symbolic x"},
    {"  input x: f64[3, 6]\n  input s: f64\n"
     "  output y = true_div(x, broadcast_to(s, shape=[3, 6]))\n", 1,
     "broadcast_to divisor"},
    {"  input x: f64[2, 3]\n  input s: f64\n"
     "  output y = true_div(x, fill(x, s))\n", 1, "fill divisor"},
    {"  input x: f64[7]\n  output y = true_div(x, 3.0)\n", 1,
     "literal divisor"},
    {"  input x: f64[5]\n  input s: f64[5]\n"
     "  output y = true_div(x, s)\n", 0, "elementwise divisor"},
    {"  input x: f64[2, 3]\n  input s: f64[3]\n"
     "  output y = true_div(x, s)\n", 0, "row divisor"},
    {"  input x: i64[5]\n  input s: i64\n"
     "  output y = true_div(x, s)\n", 0, "integer division"},
    {"  input x: i64[5]\n  input s: f64\n"
     "  output y = true_div(x, s)\n", 0, "integer dividend"},
    {"  input x: f64[5]\n  input s: f32\n"
     "  output y = true_div(x, s)\n", 0, "f32 divisor, f64 division"},
    {"  input x: f64\n  input s: f64\n"
     "  output y = true_div(x, s)\n", 0, "one-element result"},
    {"  input x: f64[1]\n  input s: f64\n"
     "  output y = true_div(x, s)\n", 0, "one-element dividend"},
};

/* a and b within `ulps` units in the last place of the larger (floats),
 * equal otherwise */
static int within_ulps(const result *a, const result *b, double ulps,
                       char *why, size_t n)
{
    if (a->rc || b->rc || a->n_out != b->n_out) {
        snprintf(why, n, "rc %d (%s) vs %d (%s)", a->rc, a->msg, b->rc,
                 b->msg);
        return 0;
    }
    for (int i = 0; i < a->n_out; i++) {
        int64_t numel = 1;
        for (int k = 0; k < a->t[i].rank; k++)
            numel *= a->t[i].shape[k];
        double eps = a->t[i].dtype == KILN_F32 ? 0x1p-23 : 0x1p-52;
        for (int64_t k = 0; k < numel; k++) {
            double u = elem(&a->t[i], k), v = elem(&b->t[i], k);
            double m = fmax(fabs(u), fabs(v));
            if (u == v || (isnan(u) && isnan(v)))
                continue;
            if (a->t[i].dtype <= KILN_F32 && fabs(u - v) <= ulps * eps * m)
                continue;
            snprintf(why, n, "output %d [%lld]: %.17g vs %.17g", i,
                     (long long)k, u, v);
            return 0;
        }
    }
    return 1;
}

static const char *RECIP_GRAD =
    "kiln 1\ngraph t\n"
    "  # range ls -1 1\n"
    "  input mu: f64[6]\n  input ls: f64\n"
    "  const y: f64[6] = [0.5, -1, 2, 1.5, 0.25, -0.75]\n"
    "  s = exp(ls)\n"
    "  z = true_div(sub(y, mu), s)\n"
    "  output cost = sum(sub(mul(-0.5, square(z)), ls))\n"
    "%s"
    "end\n";

static void test_reciprocal(const char **backends, int nb)
{
    for (size_t i = 0; i < sizeof RECIP / sizeof RECIP[0]; i++) {
        kiln_graph *g = parse(RECIP[i].body);
        kiln_err err = {0, ""};
        kiln_graph *c = g ? kiln_ir_clone(g, &err) : NULL;
        int d0 = g ? count_op(g, KILN_OP_TRUE_DIV) : -1;
        c = c ? rewrite(c, "reciprocal,fold") : NULL;
        int d1 = c ? count_op(c, KILN_OP_TRUE_DIV) : -1;
        int v1 = c ? vector_divs(c) : -1;
        int muls = c ? count_op(c, KILN_OP_MUL) : -1;
        ok(c && d0 == 1 &&
               (RECIP[i].fires ? v1 == 0 && muls == 1
                               : d1 == 1 && muls == 0),
           "reciprocal: %s %s (divisions %d -> %d, over many elements %d, "
           "muls %d)", RECIP[i].what,
           RECIP[i].fires ? "becomes a multiplication" : "is kept", d0, d1,
           v1, muls);
        kiln_graph_free(c);
        for (int b = 0; g && b < nb; b++) {
            int good = 1;
            char why[512] = "";
            for (unsigned seed = 0; seed < 3 && good; seed++) {
                result a, r;
                run(g, backends[b], "-reciprocal", NULL, seed, &a);
                run(g, backends[b], "all", NULL, seed, &r);
                good = within_ulps(&a, &r, 4, why, sizeof why);
                result_free(&a);
                result_free(&r);
            }
            ok(good, "reciprocal: %s, %s, within 4 ulp of -reciprocal %s",
               RECIP[i].what, backends[b], why);
        }
        kiln_graph_free(g);
    }

    /* a likelihood and its gradient: every division by s goes */
    char text[2048];
    snprintf(text, sizeof text, RECIP_GRAD,
             "  d_mu, d_ls = grad(cost, mu, ls)\n"
             "  output d_mu\n  output d_ls\n");
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "recip.kg", NULL, &err);
    if (!g) {
        ok(0, "reciprocal gradient model parses: %s", err.message);
        return;
    }
    kiln_graph *c = kiln_ir_clone(g, &err);
    int d0 = vector_divs(g);
    c = c ? rewrite(c, "all") : NULL;
    ok(c && d0 >= 3 && vector_divs(c) == 0,
       "reciprocal: gradient model, divisions over many elements %d -> %d",
       d0, c ? vector_divs(c) : -1);
    kiln_graph_free(c);
    for (int b = 0; b < nb; b++) {
        result a, r;
        char why[512] = "";
        run(g, backends[b], "-reciprocal", NULL, 7, &a);
        run(g, backends[b], "all", NULL, 7, &r);
        int good = a.rc == 0 && r.rc == 0 && a.n_out == 3;
        for (int i = 0; good && i < a.n_out; i++) {
            int64_t numel = a.t[i].rank ? a.t[i].shape[0] : 1;
            for (int64_t k = 0; good && k < numel; k++) {
                double u = elem(&a.t[i], k), v = elem(&r.t[i], k);
                good = fabs(u - v) <= 1e-12 * (1 + fabs(u));
                if (!good)
                    snprintf(why, sizeof why, "output %d [%lld]: %.17g vs "
                             "%.17g", i, (long long)k, u, v);
            }
        }
        ok(good, "reciprocal: gradient model, %s, cost and gradients within "
           "1e-12 of -reciprocal %s", backends[b], why);
        result_free(&a);
        result_free(&r);
    }
    kiln_graph_free(g);
    snprintf(text, sizeof text, RECIP_GRAD, "");
    gc_check("reciprocal gradient model", text, 1e-6);
}

int main(void)
{
    const char *s = getenv("KILN_SRCDIR"), *b = getenv("KILN_BUILDDIR");
    if (s)
        srcdir = s;
    if (b)
        builddir = b;
    test_spec();
    test_canonicalize();
    test_fold_cse();
    test_promote();
    test_join_pairwise_structure();
    test_long_chains();
    test_pairwise_accuracy();

    char dir[4200];
    snprintf(dir, sizeof dir, "%s/examples", srcdir);
    collect(dir);
    snprintf(dir, sizeof dir, "%s/tests/graphs", srcdir);
    collect(dir);
    ok(n_files >= 10, "%d example and test graphs", n_files);
    const char *backends[3];
    int nb = 0;
    backends[nb++] = "interp";
    if (have_backend("tcc"))
        backends[nb++] = "tcc";
    else
        ok(1, "tcc # SKIP not built");
    if (have_backend("llvm"))
        backends[nb++] = "llvm";
    else
        ok(1, "llvm # SKIP not built");
    for (int i = 0; i < nb; i++)
        test_corpus(backends[i], i == 0);
    test_models(backends, nb);
    test_fusion(backends, nb);
    test_shape_rules(backends, nb);
    test_reciprocal(backends, nb);
    return done_testing();
}
