/*
 * test_hoist.c — data-only values computed when the data are bound
 * (the `hoist` pass: core/rewrite/hoist.c, core/compile/driver.c,
 * kiln_vm_prep_run; docs/architecture.md "Data-only values").
 *
 *  1. graphs whose data-only part has slices, reductions, broadcasts over
 *     shared values and constants (small, and large: promoted), under
 *     every backend this build has: the values are hoisted
 *     (kiln_function_n_hoisted) and the outputs equal the same graph
 *     compiled with `-hoist` bit for bit; a literal-only broadcast and a
 *     bare view of a shared value are not hoisted;
 *  2. a gradient through a hoisted value (grad in the graph): equal to
 *     `-hoist` bit for bit, and to central finite differences;
 *  3. kiln_function_bind_shared: shared values of static shape bound
 *     after the compile (the prep runs at the last bind), then bound
 *     again with new data: the outputs equal a fresh compile of the graph
 *     with the new data as constants, bit for bit, and -hoist's;
 *  4. the cap: a policy with hoist.max_size smaller than the value keeps
 *     it per call, says so in one diagnostic line, and the outputs are
 *     unchanged;
 *  5. diamonds (examples/posteriordb) through kiln_model_new: the
 *     centred design matrix is hoisted (fewer kernels: the data
 *     kiln_model_new binds reach the hoisting), and the log
 *     density and gradient equal `-hoist`'s bit for bit under every
 *     backend;
 *  6. a `check` over data stays per call: the compile succeeds and the
 *     call fails, as without hoisting.
 */
#define _GNU_SOURCE
#include <kiln/graph.h>
#include <kiln/kiln.h>
#include <kiln/model.h>
#include <kiln/policy.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "found_backends.h"

#define MAX_OUT 8
#include "call_outs.h"

static const char *backends[3];
static int n_backends;

static uint64_t rng = 12345;
static double urand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static char *values_text(const double *v, int r, int c);

/* "[[a, b], [c, d]]" of r x c random numbers (the caller frees it). */
static char *matrix_text(int r, int c)
{
    double *v = malloc(sizeof *v * (size_t)r * (size_t)c);
    for (int i = 0; i < r * c; i++)
        v[i] = urand();
    char *s = values_text(v, r, c);
    free(v);
    return s;
}

static kiln_function *compile_opts(const char *text, const char *backend,
                                   const char *passes,
                                   const kiln_policy *pol, FILE *diag,
                                   char *msg, size_t nmsg)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, &err);
    kiln_function *f = NULL;
    if (g) {
        kiln_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.backend = backend;
        o.passes = passes;
        o.policy = pol;
        o.quiet = diag ? 0 : 1;
        o.diag = diag;
        o.jobs = 1;
        f = kiln_compile(g, &o, &err);
        kiln_graph_free(g);
    }
    if (!f && msg)
        snprintf(msg, nmsg, "%s", err.message);
    return f;
}

static kiln_function *compile_text(const char *text, const char *backend,
                                   const char *passes)
{
    char msg[600] = "";
    kiln_function *f = compile_opts(text, backend, passes, NULL, NULL, msg,
                                    sizeof msg);
    if (!f)
        ok(0, "compile (%s, %s): %s", backend, passes, msg);
    return f;
}

static int same_outs(const outs *a, const outs *b)
{
    if (a->rc || b->rc || a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++) {
        size_t n = outs_bytes(&a->t[i]);
        if (n != outs_bytes(&b->t[i]) ||
            memcmp(a->t[i].data, b->t[i].data, n))
            return 0;
    }
    return 1;
}

/* Compile text with and without hoisting under backend bk, call both
 * with `in`, and check: n_hoisted (stored) == want_hoisted, outputs
 * equal bit for bit. */
static void check_same(const char *what, const char *text, const char *bk,
                       const kiln_tensor *in, int want_hoisted)
{
    kiln_function *h = compile_text(text, bk, NULL);
    kiln_function *n = compile_text(text, bk, "-hoist");
    int stored = 0;
    for (int i = 0; h && i < kiln_function_n_hoisted(h); i++) {
        int per_call = 1;
        kiln_function_hoisted_info(h, i, NULL, &per_call);
        stored += !per_call;
    }
    ok(h && stored == want_hoisted, "%s (%s): %d value(s) hoisted (want %d)",
       what, bk, stored, want_hoisted);
    ok(!n || kiln_function_n_hoisted(n) == 0, "%s (%s): -hoist hoists "
       "nothing", what, bk);
    if (h && n && want_hoisted)
        ok(kiln_function_n_kernels(h) < kiln_function_n_kernels(n),
           "%s (%s): fewer kernels per call (%d < %d)", what, bk,
           kiln_function_n_kernels(h), kiln_function_n_kernels(n));
    outs a, b, a2;
    call_copy(h, in, &a);
    call_copy(n, in, &b);
    call_copy(h, in, &a2);   /* the second call reads the same buffers */
    ok(same_outs(&a, &b) && same_outs(&a2, &b),
       "%s (%s): equal to -hoist bit for bit%s%s", what, bk,
       a.rc ? ": " : "", a.rc ? a.msg : b.msg);
    outs_free(&a);
    outs_free(&a2);
    outs_free(&b);
    kiln_function_free(h);
    kiln_function_free(n);
}

static void part1(void)
{
    /* slices, column means, a centred matrix, a dot; a small constant
     * (not promoted) and a large one (promoted: 40 x 6 f64 > 1 KiB) */
    char *xs = matrix_text(6, 5), *xl = matrix_text(40, 6);
    char *text = malloc(strlen(xs) + strlen(xl) + 2048);
    sprintf(text,
            "kiln 1\ngraph t\n"
            "  input b: f64[4]\n"
            "  input c: f64[5]\n"
            "  const X: f64[6, 5] = %s\n"
            "  const L: f64[40, 6] = %s\n"
            "  X1 = X[:, 1:]\n"
            "  Xc = sub(X1, mean(X1, axis=0))\n"
            "  L1 = L[::2, 1:]\n"
            "  Lc = true_div(sub(L1, mean(L1, axis=0)), sqrt(mean(square(L1), "
            "axis=0)))\n"
            "  output y = dot(Xc, b)\n"
            "  output z = sum(mul(exp(Lc), c), axis=1)\n"
            "  output w = add(c, sum(square(X), axis=0))\n"
            "end\n",
            xs, xl);
    free(xs);
    free(xl);
    double bv[4], cv[5];
    for (int i = 0; i < 4; i++)
        bv[i] = urand();
    for (int i = 0; i < 5; i++)
        cv[i] = urand();
    kiln_tensor in[2] = {{KILN_F64, 1, {4}, bv}, {KILN_F64, 1, {5}, cv}};
    for (int k = 0; k < n_backends; k++)
        check_same("slices, reductions, broadcasts", text, backends[k], in,
                   3);
    free(text);

    /* literal-only broadcasts and a bare view of a shared value: nothing
     * computed from data, nothing stored */
    static const char lit[] =
        "kiln 1\ngraph t\n"
        "  input x: f64[3, 4]\n"
        "  const s: f64[4] = [1, 2, 3, 4]\n"
        "  k = broadcast_to(exp(2.0), shape=[3, 4])\n"
        "  t = transpose(broadcast_to(s, shape=[3, 4]), axes=[1, 0])\n"
        "  output y = add(mul(x, k), t[:, 0])\n"
        "end\n";
    double xv[12];
    for (int i = 0; i < 12; i++)
        xv[i] = urand();
    kiln_tensor in2[1] = {{KILN_F64, 2, {3, 4}, xv}};
    for (int k = 0; k < n_backends; k++)
        check_same("literals and views only", lit, backends[k], in2, 0);
}

static void part2(void)
{
    char *xs = matrix_text(7, 4);
    char *text = malloc(strlen(xs) + 1024);
    sprintf(text,
            "kiln 1\ngraph t\n"
            "  input b: f64[3]\n"
            "  const X: f64[7, 4] = %s\n"
            "  X1 = X[:, 1:]\n"
            "  Xc = sub(X1, mean(X1, axis=0))\n"
            "  r = sub(X[:, 0], dot(Xc, b))\n"
            "  l = mul(-0.5, sum(square(r)))\n"
            "  g = grad(l, b)\n"
            "  output l\n"
            "  output g\n"
            "end\n",
            xs);
    free(xs);
    double bv[3] = {0.3, -0.7, 1.1};
    kiln_tensor in[1] = {{KILN_F64, 1, {3}, bv}};
    for (int k = 0; k < n_backends; k++) {
        check_same("gradient", text, backends[k], in, 1);
        kiln_function *f = compile_text(text, backends[k], NULL);
        if (!f)
            continue;
        outs o;
        call_copy(f, in, &o);
        double maxerr = 0;
        for (int i = 0; !o.rc && i < 3; i++) {
            double h = 1e-6, save = bv[i], lp, lm;
            kiln_tensor out[2];
            kiln_err err;
            bv[i] = save + h;
            kiln_function_call(f, in, out, &err);
            lp = *(double *)out[0].data;
            bv[i] = save - h;
            kiln_function_call(f, in, out, &err);
            lm = *(double *)out[0].data;
            bv[i] = save;
            double fd = (lp - lm) / (2 * h);
            double gi = ((double *)o.t[1].data)[i];
            double e = fabs(fd - gi) / (1 + fabs(gi));
            if (e > maxerr)
                maxerr = e;
        }
        ok(!o.rc && maxerr < 1e-6, "gradient (%s): finite differences "
           "agree (max rel err %.3g)", backends[k], maxerr);
        outs_free(&o);
        kiln_function_free(f);
    }
    free(text);
}

/* Graph text over X: f64[5, 4] and s: f64[4]: shared (no value) when
 * xs is NULL, else constants of those values. */
static char *bind_graph(const char *xs, const char *ss)
{
    char decl[4096];
    char *t = malloc(sizeof decl + 512);
    if (xs)
        snprintf(decl, sizeof decl,
                 "  const X: f64[5, 4] = %s\n  const s: f64[4] = %s\n", xs,
                 ss);
    else
        snprintf(decl, sizeof decl,
                 "  shared X: f64[5, 4]\n  shared s: f64[4]\n");
    sprintf(t,
            "kiln 1\ngraph t\n"
            "  input x: f64[4]\n%s"
            "  Xs = mul(sub(X, mean(X, axis=0)), exp(s))\n"
            "  output y = dot(Xs, x)\n"
            "  output m = max(add(X, x), axis=0)\n"
            "end\n",
            decl);
    return t;
}

static int bind(kiln_function *f, const char *name, int rank,
                const int64_t *shape, double *data)
{
    kiln_tensor t = {KILN_F64, rank, {0}, data};
    for (int k = 0; k < rank; k++)
        t.shape[k] = shape[k];
    kiln_err err = {0, ""};
    int rc = kiln_function_bind_shared(f, name, &t, &err);
    if (rc)
        ok(0, "bind %s: %s", name, err.message);
    return rc;
}

static void fill(double *v, int n)
{
    for (int i = 0; i < n; i++)
        v[i] = urand();
}

/* v (r x c; r 0: a vector of c) as .kg value text (the caller frees
 * it). */
static char *values_text(const double *v, int r, int c)
{
    char *s = malloc((size_t)(r > 0 ? r : 1) * (size_t)c * 28 + 64), *p = s;
    if (r > 0)
        *p++ = '[';
    for (int i = 0; i < (r > 0 ? r : 1); i++) {
        p += sprintf(p, "%s[", i ? ", " : "");
        for (int j = 0; j < c; j++)
            p += sprintf(p, "%s%.17g", j ? ", " : "", v[i * c + j]);
        *p++ = ']';
    }
    if (r > 0)
        *p++ = ']';
    *p = 0;
    return s;
}

static void part3(void)
{
    char *text = bind_graph(NULL, NULL);
    double xv[4] = {0.5, -1.5, 2.0, 0.25};
    kiln_tensor in[1] = {{KILN_F64, 1, {4}, xv}};
    int64_t shX[2] = {5, 4}, shs[1] = {4};
    for (int k = 0; k < n_backends; k++) {
        const char *bk = backends[k];
        kiln_function *f = compile_text(text, bk, NULL);
        kiln_function *n = compile_text(text, bk, "-hoist");
        if (!f || !n) {
            kiln_function_free(f);
            kiln_function_free(n);
            continue;
        }
        ok(kiln_function_n_shared(f) == 2 && kiln_function_n_hoisted(f) == 1,
           "bind (%s): 2 shared values listed, 1 value hoisted", bk);
        double X[20], s[4];
        for (int round = 0; round < 3; round++) {
            int rc = 0;
            if (round < 2) {   /* round 2: only s changes */
                fill(X, 20);
                rc |= bind(f, "X", 2, shX, X) | bind(n, "X", 2, shX, X);
            }
            fill(s, 4);
            rc |= bind(f, "s", 1, shs, s) | bind(n, "s", 1, shs, s);
            if (rc)
                break;
            char *xt = values_text(X, 5, 4), *st = values_text(s, 0, 4);
            char *ct = bind_graph(xt, st);
            kiln_function *c = compile_text(ct, bk, NULL);
            free(xt);
            free(st);
            free(ct);
            outs a, b, r;
            call_copy(f, in, &a);
            call_copy(n, in, &b);
            call_copy(c, in, &r);
            ok(same_outs(&a, &r) && same_outs(&b, &r),
               "bind (%s), data %d: equal to a fresh compile with the data "
               "and to -hoist, bit for bit%s%s", bk, round,
               a.rc ? ": " : "", a.rc ? a.msg : "");
            outs_free(&a);
            outs_free(&b);
            outs_free(&r);
            kiln_function_free(c);
        }
        kiln_function_free(f);
        kiln_function_free(n);
    }
    /* a call before every value the prep reads is bound is refused */
    kiln_function *f = compile_text(text, "interp", NULL);
    double X[20];
    fill(X, 20);
    if (f && !bind(f, "X", 2, shX, X)) {
        kiln_tensor out[2];
        kiln_err err = {0, ""};
        int rc = kiln_function_call(f, in, out, &err);
        ok(rc == KILN_ERR_ARG && strstr(err.message, "'s'"),
           "bind: a call with s unbound is refused (%s)", err.message);
    }
    kiln_function_free(f);
    free(text);
}

static void part4(void)
{
    char *xs = matrix_text(8, 3);
    char *text = malloc(strlen(xs) + 512);
    sprintf(text,
            "kiln 1\ngraph t\n"
            "  input x: f64[3]\n"
            "  const X: f64[8, 3] = %s\n"
            "  output y = dot(exp(X), x)\n"
            "end\n",
            xs);
    free(xs);
    static const char pol_text[] =
        "kiln_policy: 1\nbackends: [interp]\ndefault: interp\n"
        "hoist: {max_size: 100}\n";
    kiln_err err = {0, ""};
    kiln_policy *pol = kiln_policy_load_string(pol_text, sizeof pol_text - 1,
                                               "cap.yaml", &err);
    ok(pol != NULL, "cap: policy with hoist.max_size loads%s%s",
       pol ? "" : ": ", pol ? "" : err.message);
    char *diag = NULL;
    size_t dlen = 0;
    FILE *d = open_memstream(&diag, &dlen);
    char msg[600] = "";
    kiln_function *f = compile_opts(text, NULL, NULL, pol, d, msg,
                                    sizeof msg);
    fclose(d);
    int lines = 0;
    for (const char *p = diag; p && (p = strstr(p, "hoist.max_size")); p++)
        lines++;
    ok(f && lines == 1 && strstr(diag, "192 bytes"),
       "cap: one line says the value stays per call: %s", diag ? diag : msg);
    int64_t bytes = 0;
    int per_call = 0;
    const char *lbl = f ? kiln_function_hoisted_info(f, 0, &bytes,
                                                    &per_call) : NULL;
    ok(lbl && per_call == 1 && bytes == 192 && strstr(lbl, "exp"),
       "cap: kiln_function_hoisted_info: %s, %lld bytes, per call",
       lbl ? lbl : "(none)", (long long)bytes);
    kiln_function *n = compile_text(text, "interp", "-hoist");
    double xv[3] = {1, 2, 3};
    kiln_tensor in[1] = {{KILN_F64, 1, {3}, xv}};
    outs a, b;
    call_copy(f, in, &a);
    call_copy(n, in, &b);
    ok(same_outs(&a, &b), "cap: results unchanged");
    outs_free(&a);
    outs_free(&b);
    kiln_function_free(f);
    kiln_function_free(n);
    kiln_policy_free(pol);
    free(diag);
    free(text);
}

static void part5(void)
{
    const char *src = getenv("KILN_SRCDIR");
    char kg[4096], data[4096];
    snprintf(kg, sizeof kg, "%s/examples/posteriordb/diamonds.kg",
             src ? src : ".");
    snprintf(data, sizeof data, "%s/../shared/posteriordb/data/diamonds.json",
             src ? src : ".");
    FILE *t = fopen(data, "r");
    if (!t) {
        ok(1, "diamonds # SKIP no %s", data);
        return;
    }
    fclose(t);
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_file(kg, &err);
    if (!ok(g != NULL, "diamonds parses%s%s", g ? "" : ": ",
            g ? "" : err.message))
        return;
    for (int k = 0; k < n_backends; k++) {
        kiln_model *m[2] = {NULL, NULL};
        for (int h = 0; h < 2; h++) {
            kiln_options o;
            memset(&o, 0, sizeof o);
            o.struct_size = sizeof o;
            o.backend = backends[k];
            o.passes = h ? "-hoist" : NULL;
            o.quiet = 1;
            m[h] = kiln_model_new(g, NULL, data, &o, NULL, &err);
            if (!m[h])
                ok(0, "diamonds (%s): %s", backends[k], err.message);
        }
        if (m[0] && m[1]) {
            int n = kiln_model_n_unc(m[0]);
            double x[64], g0[64], g1[64], l0 = 0, l1 = 1;
            for (int i = 0; i < n && i < 64; i++)
                x[i] = 0.1 * urand();
            int r0 = kiln_model_log_density(m[0], 1, x, &l0, g0, &err);
            int r1 = kiln_model_log_density(m[1], 1, x, &l1, g1, &err);
            ok(!r0 && !r1 && n <= 64 && memcmp(&l0, &l1, sizeof l0) == 0 &&
                   memcmp(g0, g1, sizeof *g0 * (size_t)n) == 0,
               "diamonds (%s): log density and gradient equal -hoist's bit "
               "for bit (%.17g)", backends[k], l0);
            int t0 = 0, k0 = 0, t1 = 0, k1 = 0;
            kiln_model_tier_count(m[0], &t0, &k0);
            kiln_model_tier_count(m[1], &t1, &k1);
            ok(k0 > 0 && k0 < k1, "diamonds (%s): the centred matrix is "
               "hoisted (%d kernels per density call, %d without)",
               backends[k], k0, k1);
        }
        kiln_model_free(m[0]);
        kiln_model_free(m[1]);
    }
    kiln_graph_free(g);
}

/* A check over data stays per call: a false condition fails the call,
 * not the compile, as without hoisting; its condition may be stored. */
static void part6(void)
{
    static const char text[] =
        "kiln 1\ngraph t\n"
        "  input x: f64[3]\n"
        "  const c: f64[2, 3] = [[1, 2, 3], [4, -5, 6]]\n"
        "  output m = sum(c, axis=0)\n"
        "  k = check(c, gt(c, 0.0), msg=\"positive\")\n"
        "  output y = add(x, sum(k, axis=0))\n"
        "end\n";
    double xv[3] = {1, 2, 3};
    kiln_tensor in[1] = {{KILN_F64, 1, {3}, xv}};
    for (int k = 0; k < n_backends; k++) {
        kiln_function *f = compile_text(text, backends[k], NULL);
        outs o;
        call_copy(f, in, &o);
        ok(f && kiln_function_n_hoisted(f) == 2 && o.rc == KILN_ERR_CHECK &&
               strstr(o.msg, "positive"),
           "check over data (%s): compiles, the call fails: %s", backends[k],
           o.msg);
        outs_free(&o);
        kiln_function_free(f);
    }
}

int main(void)
{
    n_backends = found_backends(backends);
    part1();
    part2();
    part3();
    part4();
    part5();
    part6();
    return done_testing();
}
