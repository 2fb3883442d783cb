/*
 * test_views.c — shape ops read in place (issue 14, docs/rewrite.md
 * "fuse"): a transpose, basic slice, int index, expand_dims, squeeze,
 * reshape of a buffer or broadcast_to whose readers all read it as a view
 * is no kernel; its readers take the source buffer through the chain of
 * view steps (core/lower/lower.c plan_views, kiln_lower_view).
 *
 *  1. each shape op, and chains of them, feeding elementwise kernels,
 *     fused regions (several outputs), fused reductions and a LOOP
 *     kernel (a model and its gradient), with symbolic
 *     dims that change between calls (and back), negative steps: under
 *     every backend this build has, all passes equal `none` and `-fuse`
 *     (copies) bit for bit, and the shape ops' kernels are gone;
 *  2. a few of them against plain C;
 *  3. readers that are not elementwise keep their copy (a reduction's
 *     operand, a graph output, a join, a gather, a dot's non-transpose
 *     operand, a reshape) and stay right; an output shape op is copied
 *     through the chain of the shape ops it reads (expand_dims and
 *     squeeze of strided views);
 *  4. a shape op read in place still checks its run-time shape (squeeze of
 *     an axis that is not 1, an index out of range), and the next call is
 *     right;
 *  5. a consumer's kernel key is the key it has reading a buffer of the
 *     shape op's type directly (keys do not see views);
 *  6. a chain deeper than KILN_VIEW_MAX_CHAIN is right;
 *  7. steady-state calls allocate nothing, and new input data of the same
 *     shapes is read through the re-pointed views (every backend; not
 *     under ASan).
 */
#define _GNU_SOURCE
#include <kiln/cache.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>
#include <kiln/policy.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "found_backends.h"

/* counting allocations: n_allocs, COUNT_ALLOCS */
#include "count_allocs.h"

static const char *backends[3];
static int n_backends;

#define MAX_OUT 8
#define MAX_IN 4

#include "call_outs.h"

static kiln_function *compile_body(const char *body, const char *backend,
                                   const char *passes, char *msg, size_t nmsg)
{
    return compile_graph_text("", body, backend, passes, msg, nmsg);
}

/* kernels of f whose label is `label` */
static int count_label(const kiln_function *f, const char *label)
{
    int c = 0;
    for (int i = 0; f && i < kiln_function_n_kernels(f); i++) {
        kiln_kernel_info k;
        memset(&k, 0, sizeof k);
        k.struct_size = sizeof k;
        if (kiln_function_kernel_info(f, i, &k, NULL) == 0 && k.facts.label &&
            strcmp(k.facts.label, label) == 0)
            c++;
    }
    return c;
}

/* deterministic values, some negative, none repeating within a tensor */
static double *values(int64_t n, int seed)
{
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)((i * 37 + seed * 11) % 101) / 17.0 - 2.5 +
               1e-3 * (double)seed;
    return v;
}

/* ---- 1. each shape op and chains: all passes = none = -fuse ----------- */

typedef struct vcase {
    const char *name;
    const char *body;     /* inputs: x: f64[n, m], v: f64[m], w: f64[n],
                             u: f64[n, 1] — all of them, in that order */
    int kernels;          /* with all passes (-1: not checked) */
    const char *gone;     /* labels that must not be kernels (a|b|c) */
} vcase;

#define INPUTS                                                             \
    "  input x: f64[n, m]\n  input v: f64[m]\n  input w: f64[n]\n"        \
    "  input u: f64[n, 1]\n"

static const vcase cases[] = {
    {"transpose", INPUTS "  output y = exp(transpose(x))\n", 1, "transpose"},
    {"slice", INPUTS "  output y = mul(x[1:3, ::2], 2.0)\n", 1, "subtensor"},
    {"negative steps", INPUTS "  output y = add(x[::-1, -1:0:-2], 1.0)\n", 1,
     "subtensor"},
    {"int index (row)", INPUTS "  output y = add(x[1], v)\n", 1, "subtensor"},
    {"int index (column, negative)",
     INPUTS "  output y = mul(x[:, -2], w)\n", 1, "subtensor"},
    {"expand_dims", INPUTS "  output y = mul(expand_dims(w, axis=1), x)\n", 1,
     "expand_dims"},
    {"squeeze", INPUTS "  output y = add(squeeze(u, axis=1), w)\n", 1,
     "squeeze"},
    {"squeeze (no axis)", INPUTS "  output y = sub(w, squeeze(u))\n", -1,
     "squeeze"},
    {"reshape", INPUTS "  output y = exp(reshape(x, shape=[m, n]))\n", 1,
     "reshape"},
    {"reshape to rank 1", INPUTS "  output y = neg(reshape(x, shape=[-1]))\n",
     1, "reshape"},
    {"broadcast_to",
     INPUTS "  output y = mul(broadcast_to(v, shape=[n, m]), x)\n", 1,
     "broadcast_to"},
    {"transpose of a slice",
     INPUTS "  output y = add(mul(transpose(x[1:, ::-2]), 2.0), 1.0)\n", 1,
     "transpose|subtensor"},
    {"slice of a transpose",
     INPUTS "  output y = square(transpose(x)[::-1, 1:])\n", 1,
     "transpose|subtensor"},
    {"transpose of a reshape",
     INPUTS "  output y = exp(transpose(reshape(x, shape=[m, n, 1]), "
            "axes=[2, 0, 1]))\n", 1, "transpose|reshape"},
    {"expand, transpose, squeeze",
     INPUTS "  e = expand_dims(x[::-1], axis=0)\n"
            "  t = transpose(e, axes=[2, 0, 1])\n"
            "  output y = add(squeeze(t, axis=1), 0.5)\n", 1,
     "expand_dims|transpose|squeeze|subtensor"},
    {"broadcast of a column",
     INPUTS "  c = broadcast_to(expand_dims(x[:, 0], axis=1), shape=[n, m])\n"
            "  output y = sub(x, c)\n", 1,
     "broadcast_to|expand_dims|subtensor"},
    {"fused region, two outputs",
     INPUTS "  t = transpose(x)\n  a = exp(t)\n  output b = mul(a, t)\n"
            "  output c = add(a, transpose(u)[0])\n", -1, "transpose"},
    /* a value of the reduced operand's type stays a buffer (it gives the
     * REDUCE or LOOP kernel its iteration space): the transposes are
     * copies, reading the slices in place */
    {"fused reduction",
     INPUTS "  t = transpose(x[::-1])\n  s = sum(mul(exp(t), t), axis=0)\n"
            "  output y = s\n  output z = add(w, s)\n", 3, "subtensor"},
    {"reductions of transposes",
     INPUTS "  t = transpose(x)\n  output a = sum(mul(t, t))\n"
            "  output b = sum(exp(transpose(x[::-1, ::-1])))\n", 4,
     "subtensor"},
    {"shared by two kernels of different shapes",
     INPUTS "  s = x[:, 1:]\n  output a = exp(s)\n"
            "  output b = add(transpose(s), 1.0)\n", -1, "subtensor|transpose"},
    {"a loop and its gradient reading expand_dims",
     INPUTS "  z = true_div(sub(x, v), expand_dims(exp(w), axis=1))\n"
            "  r = sum(square(z), axis=1)\n"
            "  output lp = sum(mul(-0.5, r))\n"
            "  d_v, d_w = grad(lp, v, w)\n  output d_v\n  output d_w\n",
     -1, "expand_dims"},
    {"a loop over a transpose's space with an output of that space",
     INPUTS "  t = transpose(x)\n  output a = exp(t)\n"
            "  output s = sum(mul(t, 2.0), axis=1)\n", -1, "transpose"},
    {"a loop over a transpose's space, reductions only",
     INPUTS "  t = transpose(x[::-1])\n"
            "  output s = sum(mul(t, 2.0), axis=1)\n"
            "  output r = sum(exp(t), axis=1)\n", 2, "subtensor"},
    {"int casts", INPUTS "  output y = add(cast(transpose(x), dtype=i64), 1)\n",
     1, "transpose"},
};

/* inputs at shape (n, m) */
typedef struct inset {
    kiln_tensor t[MAX_IN];
    double *d[MAX_IN];
} inset;

static void inset_make(inset *s, int64_t n, int64_t m, int seed)
{
    int64_t shp[MAX_IN][2] = {{n, m}, {m, 0}, {n, 0}, {n, 1}};
    int rk[MAX_IN] = {2, 1, 1, 2};
    for (int i = 0; i < MAX_IN; i++) {
        int64_t c = rk[i] == 2 ? shp[i][0] * shp[i][1] : shp[i][0];
        s->d[i] = values(c, seed + i);
        s->t[i] = (kiln_tensor){KILN_F64, rk[i], {shp[i][0], shp[i][1]},
                                s->d[i]};
    }
}

static void inset_free(inset *s)
{
    for (int i = 0; i < MAX_IN; i++)
        free(s->d[i]);
}

static int has_gone(const kiln_function *f, const char *gone)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", gone);
    int c = 0;
    for (char *tok = strtok(buf, "|"); tok; tok = strtok(NULL, "|"))
        c += count_label(f, tok);
    return c;
}

static void test_cases(void)
{
    /* shapes: n changes between calls, and back */
    const int64_t dims[4][2] = {{4, 5}, {7, 3}, {4, 5}, {9, 6}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const vcase *vc = &cases[c];
        for (int b = 0; b < n_backends; b++) {
            char msg[400] = "";
            kiln_function *all = compile_body(vc->body, backends[b], "all",
                                              msg, sizeof msg);
            kiln_function *none = compile_body(vc->body, backends[b], "none",
                                               NULL, 0);
            kiln_function *nof = compile_body(vc->body, backends[b], "-fuse",
                                              NULL, 0);
            if (!all || !none || !nof) {
                ok(0, "%s (%s): compiles: %s", vc->name, backends[b], msg);
                kiln_function_free(all);
                kiln_function_free(none);
                kiln_function_free(nof);
                continue;
            }
            int ka = kiln_function_n_kernels(all);
            int kn = kiln_function_n_kernels(nof);
            ok(has_gone(all, vc->gone) == 0 && has_gone(nof, vc->gone) > 0 &&
                   ka < kn && (vc->kernels < 0 || ka == vc->kernels),
               "%s (%s): no %s kernel, %d kernels (%d without fusion)",
               vc->name, backends[b], vc->gone, ka, kn);
            int good = 1;
            char why[400] = "";
            for (int k = 0; k < 4 && good; k++) {
                inset in;
                inset_make(&in, dims[k][0], dims[k][1], (int)c + k);
                outs oa, on, of;
                call_copy(all, in.t, &oa);
                call_copy(none, in.t, &on);
                call_copy(nof, in.t, &of);
                good = outs_same_bits(&oa, &on, why, sizeof why) &&
                       outs_same_bits(&oa, &of, why, sizeof why);
                if (!good)
                    snprintf(why + strlen(why), sizeof why - strlen(why),
                             " at n=%lld m=%lld", (long long)dims[k][0],
                             (long long)dims[k][1]);
                outs_free(&oa);
                outs_free(&on);
                outs_free(&of);
                inset_free(&in);
            }
            ok(good, "%s (%s): equals passes none and -fuse bit for bit, "
                     "n and m changing between calls %s",
               vc->name, backends[b], why);
            kiln_function_free(all);
            kiln_function_free(none);
            kiln_function_free(nof);
        }
    }
}

/* ---- 2. plain C ------------------------------------------------------ */

static void test_plain_c(void)
{
    const char *body =
        INPUTS
        "  s = x[1:, ::-2]\n"
        "  output a = add(mul(transpose(s), 2.0), 1.0)\n"
        "  output b = mul(expand_dims(x[-1], axis=1), "
        "broadcast_to(squeeze(u), shape=[m, n]))\n"
        "  output c = sum(exp(transpose(x)), axis=1)\n";
    const int64_t dims[3][2] = {{5, 4}, {3, 7}, {5, 4}};
    for (int b = 0; b < n_backends; b++) {
        char msg[400] = "";
        kiln_function *f = compile_body(body, backends[b], "all", msg,
                                        sizeof msg);
        if (!f) {
            ok(0, "plain C model (%s): compiles: %s", backends[b], msg);
            continue;
        }
        int good = 1;
        char why[200] = "";
        for (int k = 0; k < 3 && good; k++) {
            int64_t n = dims[k][0], m = dims[k][1];
            inset in;
            inset_make(&in, n, m, 40 + k);
            const double *x = in.d[0], *u = in.d[3];
            outs o;
            call_copy(f, in.t, &o);
            good = o.rc == 0 && o.n == 3;
            if (!good)
                snprintf(why, sizeof why, "call: %.150s", o.msg);
            /* a[j][i] = 2 * s[i][j] + 1, s = x[1:, ::-2] of shape
             * (n - 1, ceil(m / 2)) */
            int64_t sm = (m + 1) / 2;
            for (int64_t j = 0; good && j < sm; j++)
                for (int64_t i = 0; good && i < n - 1; i++) {
                    double s = x[(i + 1) * m + (m - 1 - 2 * j)];
                    double got = ((double *)o.t[0].data)[j * (n - 1) + i];
                    if (got != 2.0 * s + 1.0) {
                        good = 0;
                        snprintf(why, sizeof why, "a[%lld][%lld]",
                                 (long long)j, (long long)i);
                    }
                }
            /* b[i][j] = x[n-1][i] * u[j], shape (m, n) */
            for (int64_t i = 0; good && i < m; i++)
                for (int64_t j = 0; good && j < n; j++) {
                    double got = ((double *)o.t[1].data)[i * n + j];
                    if (got != x[(n - 1) * m + i] * u[j]) {
                        good = 0;
                        snprintf(why, sizeof why, "b[%lld][%lld]",
                                 (long long)i, (long long)j);
                    }
                }
            /* c[j] = sum_i exp(x[i][j]) */
            for (int64_t j = 0; good && j < m; j++) {
                double s = 0;
                for (int64_t i = 0; i < n; i++)
                    s += exp(x[i * m + j]);
                double got = ((double *)o.t[2].data)[j];
                if (!tap_close(got, s, 1e-13)) {
                    good = 0;
                    snprintf(why, sizeof why, "c[%lld]: %.17g vs %.17g",
                             (long long)j, got, s);
                }
            }
            outs_free(&o);
            inset_free(&in);
        }
        ok(good, "plain C model (%s): transpose of a negative-step slice, "
                 "expand_dims of an int index times a broadcast squeeze, "
                 "a reduction of a transpose, shapes changing: equal C %s",
           backends[b], why);
        kiln_function_free(f);
    }
}

/* ---- 3. readers that read buffers as they are keep their copy ------- */

static void test_kept(void)
{
    static const struct {
        const char *name, *body, *label;
    } kept[] = {
        {"a reduction's operand",
         INPUTS "  output y = sum(transpose(x[::-1]), axis=1)\n", "transpose"},
        {"a graph output also read by an elementwise node",
         INPUTS "  output t = transpose(x)\n  output y = exp(t)\n",
         "transpose"},
        {"a join", INPUTS "  output y = join(0, transpose(x), transpose(x))\n",
         "transpose"},
        {"a gather",
         INPUTS "  const idx: i64[2] = [1, -1]\n"
                "  output y = take(transpose(x), idx)\n", "transpose"},
        {"a dot's slice operand",
         INPUTS "  output y = dot(x[1:], v)\n", "subtensor"},
        {"a reshape of a transpose",
         INPUTS "  output y = exp(reshape(transpose(x), shape=[-1]))\n",
         "transpose"},
        /* outputs copied through the chain of what they read (the slice,
         * the transpose: no kernels) */
        {"an output expand_dims of a slice",
         INPUTS "  output e = expand_dims(x[::-1, 1:], axis=1)\n",
         "expand_dims"},
        {"an output squeeze of an expand_dims of a slice of a transpose",
         INPUTS "  output q = squeeze(expand_dims(transpose(x)[::-2], "
                "axis=0))\n", "squeeze"},
        {"an output broadcast_to of an int index",
         INPUTS "  output b = broadcast_to(x[-1], shape=[3, m])\n",
         "broadcast_to"},
    };
    const int64_t dims[2][2] = {{4, 5}, {6, 3}};
    for (size_t c = 0; c < sizeof kept / sizeof kept[0]; c++)
        for (int b = 0; b < n_backends; b++) {
            char msg[400] = "", why[400] = "";
            kiln_function *all = compile_body(kept[c].body, backends[b], "all",
                                              msg, sizeof msg);
            kiln_function *none = compile_body(kept[c].body, backends[b],
                                               "none", NULL, 0);
            int good = all && none && count_label(all, kept[c].label) == 1 &&
                       kiln_function_n_kernels(all) <=
                           kiln_function_n_kernels(none);
            if (!good && !msg[0])
                snprintf(msg, sizeof msg, "%d %s kernels",
                         count_label(all, kept[c].label), kept[c].label);
            for (int k = 0; k < 2 && good; k++) {
                inset in;
                inset_make(&in, dims[k][0], dims[k][1], 7 + k);
                outs oa, on;
                call_copy(all, in.t, &oa);
                call_copy(none, in.t, &on);
                good = outs_same_bits(&oa, &on, why, sizeof why);
                outs_free(&oa);
                outs_free(&on);
                inset_free(&in);
            }
            ok(good, "%s (%s): keeps its %s kernel, equals passes none %s %s",
               kept[c].name, backends[b], kept[c].label, msg, why);
            kiln_function_free(all);
            kiln_function_free(none);
        }
}

/* ---- 4. run-time shape checks of shape ops read in place ------------ */

static void test_checks(void)
{
    static const struct {
        const char *name, *body;
        int64_t good_n, bad_n;   /* n that makes the call work, fail (m =
                                    3) */
    } chk[] = {
        {"a reshape to a size that does not fit",
         INPUTS "  output y = add(reshape(x, shape=[6]), 1.0)\n", 2, 3},
        {"an int index out of range",
         INPUTS "  output y = add(transpose(x)[0][3], v)\n", 4, 3},
        {"broadcast_to a shape that does not fit",
         INPUTS "  output y = mul(broadcast_to(w, shape=[3, 2]), v[:2])\n",
         2, 3},
    };
    for (size_t c = 0; c < sizeof chk / sizeof chk[0]; c++)
        for (int b = 0; b < n_backends; b++) {
            char msg[400] = "";
            kiln_function *all = compile_body(chk[c].body, backends[b], "all",
                                              msg, sizeof msg);
            kiln_function *none = compile_body(chk[c].body, backends[b],
                                               "none", NULL, 0);
            if (!all || !none) {
                ok(0, "%s (%s): compiles: %s", chk[c].name, backends[b], msg);
                kiln_function_free(all);
                kiln_function_free(none);
                continue;
            }
            inset good_in, bad_in;
            inset_make(&good_in, chk[c].good_n, 3, 3);
            inset_make(&bad_in, chk[c].bad_n, 3, 4);
            outs a1, n1, a2, n2, a3;
            call_copy(all, good_in.t, &a1);
            call_copy(none, good_in.t, &n1);
            call_copy(all, bad_in.t, &a2);
            call_copy(none, bad_in.t, &n2);
            call_copy(all, good_in.t, &a3);
            char why[400] = "";
            int same1 = outs_same_bits(&a1, &n1, why, sizeof why);
            int same3 = outs_same_bits(&a3, &n1, why, sizeof why);
            ok(kiln_function_n_kernels(all) == 1 && same1 && a2.rc != 0 &&
                   n2.rc != 0 && strcmp(a2.msg, n2.msg) == 0 && same3,
               "%s (%s): read in place, the call fails as with copies "
               "('%s' vs '%s'), the calls around it are right %s",
               chk[c].name, backends[b], a2.msg, n2.msg, why);
            outs_free(&a1);
            outs_free(&n1);
            outs_free(&a2);
            outs_free(&n2);
            outs_free(&a3);
            inset_free(&good_in);
            inset_free(&bad_in);
            kiln_function_free(all);
            kiln_function_free(none);
        }
}

/* ---- 5. keys ----------------------------------------------------------- */

static void test_keys(void)
{
    static const struct {
        const char *name, *viewed, *direct;
    } k[] = {
        {"exp of a transpose",
         "  input x: f64[n, m]\n  output y = exp(transpose(x))\n",
         "  input x: f64[m, n]\n  output y = exp(x)\n"},
        {"a region reading a slice of a broadcast",
         "  input v: f64[4]\n  input x: f64[6, 4]\n"
         "  output y = add(mul(broadcast_to(v, shape=[6, 4])[::2], 2.0), "
         "x[::-2])\n",
         "  input b: f64[3, 4]\n  input x: f64[3, 4]\n"
         "  output y = add(mul(b, 2.0), x)\n"},
    };
    for (size_t c = 0; c < sizeof k / sizeof k[0]; c++) {
        kiln_function *a = compile_body(k[c].viewed, "interp", "all", NULL, 0);
        kiln_function *d = compile_body(k[c].direct, "interp", "all", NULL, 0);
        kiln_key ka, kd;
        memset(&ka, 0, sizeof ka);
        memset(&kd, 0, sizeof kd);
        int good = a && d && kiln_function_n_kernels(a) == 1 &&
                   kiln_function_n_kernels(d) == 1 &&
                   kiln_function_kernel_key(a, 0, &ka) == 0 &&
                   kiln_function_kernel_key(d, 0, &kd) == 0 &&
                   memcmp(&ka, &kd, sizeof ka) == 0;
        ok(good, "keys: %s has the key of the same kernel reading a buffer",
           k[c].name);
        kiln_function_free(a);
        kiln_function_free(d);
    }
}

/* ---- 6. a chain deeper than the cap --------------------------------- */

static void test_deep(void)
{
    /* 11 transposes of a rank-3 value, each a rotation, and a slice */
    char body[2048];
    int len = snprintf(body, sizeof body,
                       "  input x: f64[n, m]\n  t0 = expand_dims(x, axis=1)\n");
    for (int i = 1; i <= 11; i++)
        len += snprintf(body + len, sizeof body - (size_t)len,
                        "  t%d = transpose(t%d, axes=[2, 0, 1])\n", i, i - 1);
    snprintf(body + len, sizeof body - (size_t)len,
             "  output y = mul(t11[::-1], 3.0)\n");
    const int64_t dims[2][2] = {{4, 5}, {2, 7}};
    for (int b = 0; b < n_backends; b++) {
        kiln_function *all = compile_body(body, backends[b], "all", NULL, 0);
        kiln_function *none = compile_body(body, backends[b], "none", NULL, 0);
        int good = all && none &&
                   kiln_function_n_kernels(all) < kiln_function_n_kernels(none);
        char why[400] = "";
        for (int k = 0; k < 2 && good; k++) {
            double *x = values(dims[k][0] * dims[k][1], 9 + k);
            kiln_tensor in = {KILN_F64, 2, {dims[k][0], dims[k][1]}, x};
            outs oa, on;
            call_copy(all, &in, &oa);
            call_copy(none, &in, &on);
            good = outs_same_bits(&oa, &on, why, sizeof why);
            outs_free(&oa);
            outs_free(&on);
            free(x);
        }
        ok(good, "a chain of 13 shape ops (%s): %d kernels (%d without "
                 "passes), equals passes none %s", backends[b],
           all ? kiln_function_n_kernels(all) : -1,
           none ? kiln_function_n_kernels(none) : -1, why);
        kiln_function_free(all);
        kiln_function_free(none);
    }
}

/* ---- 7. steady state: no allocation, views re-pointed ---------------- */

static void test_steady(void)
{
    const char *body =
        INPUTS
        "  t = transpose(x[::-1, 1:])\n"
        "  a = exp(t)\n"
        "  output b = mul(a, add(t, expand_dims(w[::-1], axis=0)))\n"
        "  output s = sum(mul(a, squeeze(u)[::-1]))\n"
        "  output c = add(x[-1], v)\n";
    for (int b = 0; b < n_backends; b++) {
        kiln_function *f = compile_body(body, backends[b], "all", NULL, 0);
        kiln_function *ref = compile_body(body, backends[b], "none", NULL, 0);
        if (!f || !ref) {
            ok(0, "steady state (%s): compiles", backends[b]);
            kiln_function_free(f);
            kiln_function_free(ref);
            continue;
        }
        inset A, B;
        inset_make(&A, 5, 4, 1);
        inset_make(&B, 5, 4, 2);
        kiln_tensor out[MAX_OUT];
        kiln_err err = {0, ""};
        int rc = kiln_function_call(f, A.t, out, &err);
        rc |= kiln_function_call(f, B.t, out, &err);
#if COUNT_ALLOCS
        long before = n_allocs;
        for (int r = 0; r < 20 && rc == 0; r++)
            rc = kiln_function_call(f, r % 2 ? B.t : A.t, out, &err);
        long used = n_allocs - before;
        ok(rc == 0 && used == 0,
           "steady state (%s): no allocation in 20 calls alternating input "
           "buffers (%ld)", backends[b], used);
#else
        ok(1, "# SKIP allocation counting under ASan");
        for (int r = 0; r < 20 && rc == 0; r++)
            rc = kiln_function_call(f, r % 2 ? B.t : A.t, out, &err);
#endif
        /* the last call read B: its outputs are B's */
        outs o, want;
        call_copy(f, B.t, &o);
        call_copy(ref, B.t, &want);
        char why[400] = "";
        int good = rc == 0 && outs_same_bits(&o, &want, why, sizeof why);
        outs_free(&o);
        outs_free(&want);
        call_copy(f, A.t, &o);
        call_copy(ref, A.t, &want);
        good = good && outs_same_bits(&o, &want, why, sizeof why);
        ok(good, "steady state (%s): new data through the same views equals "
                 "passes none %s %s", backends[b], rc ? err.message : "", why);
        outs_free(&o);
        outs_free(&want);
        inset_free(&A);
        inset_free(&B);
        kiln_function_free(f);
        kiln_function_free(ref);
    }
}

int main(void)
{
    n_backends = found_backends(backends);
    test_cases();
    test_plain_c();
    test_kept();
    test_checks();
    test_keys();
    test_deep();
    test_steady();
    return done_testing();
}
