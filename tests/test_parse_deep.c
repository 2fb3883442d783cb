/*
 * test_parse_deep.c — deeply nested expressions (issue 24): a generated
 * additive model written as nested add(add(...)) of depth 1000, 10000 and
 * 100000 parses, prints back, compiles and computes the sum of its terms
 * (computed here, independently), and so does its gradient; nested
 * indexing and set_subtensor of depth 100000 parse; error positions in
 * deep text are right.  The work runs on a thread with a small stack
 * (256 KiB): a walk that recursed on the depth (parser, printer, rewrites,
 * gradient, lowering, backends) would overflow it.
 */
#define _POSIX_C_SOURCE 200809L

#include <kiln/graph.h>
#include <kiln/io.h>
#include <kiln/cache.h>
#include <kiln/kiln.h>
#include "tap.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growable string. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *t)
{
    size_t k = strlen(t);
    if (b->n + k + 1 > b->cap) {
        size_t nc = (b->n + k + 1) * 2;
        char *q = realloc(b->s, nc);
        if (!q)
            abort();
        b->s = q;
        b->cap = nc;
    }
    memcpy(b->s + b->n, t, k + 1);
    b->n += k;
}

/* Term i of the additive model: (i % 7) + 0.5, written "%d.5". */
static double term(size_t i) { return (double)(i % 7) + 0.5; }

/* y = add(add(...add(mul(x, x), t0)..., t_{n-2}), t_{n-1}), its gradient
 * d = grad(y, x). */
static char *additive(size_t n)
{
    sbuf b = { 0 };
    put(&b, "kiln 1\ngraph deep\n  input x: f64\n  y = ");
    for (size_t i = 0; i < n; i++)
        put(&b, "add(");
    put(&b, "mul(x, x)");
    for (size_t i = 0; i < n; i++) {
        char t[32];
        snprintf(t, sizeof t, ", %zu.5)", i % 7);
        put(&b, t);
    }
    put(&b, "\n  d = grad(y, x)\n  output y\n  output d\nend\n");
    return b.s;
}

/* Run g on x with `backend`: y and d. */
static int run(const kiln_graph *g, const char *backend, double x, double *y,
               double *d, kiln_err *e)
{
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = backend;
    opt.cache_mode = KILN_CACHE_MODE_OFF;
    opt.quiet = 1;
    kiln_function *f = kiln_compile(g, &opt, e);
    if (!f)
        return -1;
    kiln_tensor in;
    memset(&in, 0, sizeof in);
    in.dtype = KILN_F64;
    in.data = &x;
    kiln_tensor out[2];
    int rc = kiln_function_call(f, &in, out, e);
    if (rc == 0) {
        *y = *(const double *)out[0].data;
        *d = *(const double *)out[1].data;
    }
    kiln_function_free(f);
    return rc;
}

static void additive_case(size_t n)
{
    char *text = additive(n);
    kiln_err e;
    kiln_graph *g = kiln_parse_string(text, "deep.kg", NULL, &e);
    if (!ok(g != NULL, "depth %zu: parses", n))
        diag("%s", e.message);
    char *s1 = g ? kiln_graph_print(g, &e) : NULL;
    kiln_graph *g2 = s1 ? kiln_parse_string(s1, "p.kg", NULL, &e) : NULL;
    char *s2 = g2 ? kiln_graph_print(g2, &e) : NULL;
    ok(s1 && s2 && strcmp(s1, s2) == 0,
       "depth %zu: prints, and the printed text parses and prints the same",
       n);
    double x = 1.25, want = x * x;
    for (size_t i = 0; i < n; i++)
        want += term(i);
    const char *backends[] = { "interp", "tcc" };
    for (int k = 0; k < 2; k++) {
        double y = NAN, d = NAN;
        int rc = g2 ? run(g2, backends[k], x, &y, &d, &e) : -1;
        if (!ok(rc == 0 && fabs(y - want) <= 1e-12 * want && d == 2 * x,
                "depth %zu on %s: y = x^2 + sum of the terms (%.17g), "
                "dy/dx = 2x", n, backends[k], want))
            diag("rc %d (%s), y %.17g, d %.17g", rc, rc ? e.message : "",
                 y, d);
    }
    free(s1);
    free(s2);
    kiln_graph_free(g);
    kiln_graph_free(g2);
    free(text);
}

static void nested_index_and_set(size_t n)
{
    /* x[x[...x[x]...]] with x = [0, 1, 2] is x: a take per level */
    sbuf b = { 0 };
    put(&b, "kiln 1\ngraph m\n  const x: i64[3] = [0, 1, 2]\n  y = x");
    for (size_t i = 0; i < n; i++)
        put(&b, "[x");
    for (size_t i = 0; i < n; i++)
        put(&b, "]");
    put(&b, "\n  output y\nend\n");
    kiln_err e;
    kiln_graph *g = kiln_parse_string(b.s, "m.kg", NULL, &e);
    if (!ok(g && (size_t)kiln_graph_n_nodes(g) == n + 1,
            "%zu nested index entries parse: %zu nodes", n, n + 1))
        diag("%s", g ? "" : e.message);
    kiln_graph_free(g);
    /* set_subtensor(set_subtensor(...)[0:1], 1.5): the base of each is
     * the one inside it, indexed */
    b.n = 0;
    put(&b, "kiln 1\ngraph m\n  input x: f64[3]\n  y = ");
    for (size_t i = 0; i < n; i++)
        put(&b, "set_subtensor(");
    put(&b, "x");
    for (size_t i = 0; i < n; i++)
        put(&b, i % 2 ? "[1], 2.5)" : "[0:1], 1.5)");
    put(&b, "\n  output y\nend\n");
    g = kiln_parse_string(b.s, "m.kg", NULL, &e);
    if (!ok(g != NULL, "%zu nested set_subtensor parse", n))
        diag("%s", e.message);
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = "interp";
    opt.cache_mode = KILN_CACHE_MODE_OFF;
    opt.quiet = 1;
    kiln_function *f = g ? kiln_compile(g, &opt, &e) : NULL;
    double x[3] = { 7, 8, 9 };
    kiln_tensor in, out;
    memset(&in, 0, sizeof in);
    in.dtype = KILN_F64;
    in.rank = 1;
    in.shape[0] = 3;
    in.data = x;
    const double *y = f && kiln_function_call(f, &in, &out, &e) == 0
                          ? out.data
                          : NULL;
    /* the outermost set wins for each element it sets */
    double y1 = n >= 2 ? 2.5 : 8;
    if (!ok(y && y[0] == 1.5 && y[1] == y1 && y[2] == 9,
            "%zu nested set_subtensor: [1.5, %g, 9]", n, y1))
        diag("%s", y ? "wrong values" : e.message);
    kiln_function_free(f);
    kiln_graph_free(g);
    free(b.s);
}

static void deep_errors(void)
{
    size_t n = 10000;
    sbuf b = { 0 };
    kiln_err e;
    /* an unknown op at the bottom of 10000 levels, on line 5 */
    put(&b, "kiln 1\ngraph m\n  input x: f64\n  y = ");
    for (size_t i = 0; i < n; i++)
        put(&b, "add(");
    put(&b, "\n");
    put(&b, "    nope(x)");
    for (size_t i = 0; i < n; i++)
        put(&b, ", 1)");
    put(&b, "\nend\n");
    kiln_graph *g = kiln_parse_string(b.s, "m.kg", NULL, &e);
    ok(!g && e.code == KILN_ERR_TYPE &&
           strcmp(e.message, "m.kg:5:5: unknown op 'nope'") == 0,
       "unknown op under 10000 levels: m.kg:5:5");
    if (g || strcmp(e.message, "m.kg:5:5: unknown op 'nope'"))
        diag("%s", g ? "parsed" : e.message);
    kiln_graph_free(g);
    /* a builder error at level 5000 is reported at its op name */
    b.n = 0;
    put(&b, "kiln 1\ngraph m\n  input x: f64\n  input v: f64[2]\n  y = ");
    for (size_t i = 0; i < n; i++)
        put(&b, i == 5000 ? "dot(" : "add(");
    put(&b, "x");
    for (size_t i = 0; i < n; i++)
        put(&b, ", 1)");
    put(&b, "\nend\n");
    char want[128];
    snprintf(want, sizeof want, "m.kg:5:%zu: ", 7 + 4 * (size_t)5000);
    g = kiln_parse_string(b.s, "m.kg", NULL, &e);
    if (!ok(!g && strncmp(e.message, want, strlen(want)) == 0,
            "builder error at level 5000: at the op's column (%s)", want))
        diag("%s", g ? "parsed" : e.message);
    kiln_graph_free(g);
    /* unclosed: 100000 '(' then end of file */
    b.n = 0;
    put(&b, "kiln 1\ngraph m\n  input x: f64[3]\n  y = ");
    for (size_t i = 0; i < 100000; i++)
        put(&b, "set_subtensor(");
    put(&b, "x\nend\n");
    g = kiln_parse_string(b.s, "m.kg", NULL, &e);
    snprintf(want, sizeof want, "m.kg:4:%d: '(' is not closed",
             7 + 14 * 99999 + 13);
    if (!ok(!g && strcmp(e.message, want) == 0,
            "100000 unclosed set_subtensor: %s", want))
        diag("%s", g ? "parsed" : e.message);
    kiln_graph_free(g);
    free(b.s);
}

static void *body(void *arg)
{
    (void)arg;
    additive_case(1000);
    additive_case(10000);
    additive_case(100000);
    nested_index_and_set(1);
    nested_index_and_set(100000);
    deep_errors();
    return NULL;
}

int main(void)
{
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    /* small enough that recursion on a depth of 100000 overflows it */
    pthread_attr_setstacksize(&a, 256 * 1024);
    if (pthread_create(&t, &a, body, NULL) != 0)
        body(NULL);
    else
        pthread_join(t, NULL);
    pthread_attr_destroy(&a);
    return done_testing();
}
