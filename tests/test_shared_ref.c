/*
 * test_shared_ref.c — TAP tests for borrowed shared values (issue 29,
 * "weights are borrowed"): kiln_graph_shared_ref and
 * kiln_function_bind_shared_ref read the caller's bytes in place.
 *
 *  - values on every backend against a matrix-vector product computed
 *    here in double (an independent loop, not kiln);
 *  - in place: the caller changes the buffer, the next call sees it;
 *  - a copying rebind never writes the caller's (old) buffer;
 *  - free orders: graph before function, two functions of one graph,
 *    functions with a hoisted (data-only) value of the borrowed weight;
 *  - memory: a 256 MB borrowed weight parsed, compiled and run on interp
 *    grows ru_maxrss by less than 1.2 x 256 MB + 64 MB (one copy of it
 *    would be 512 MB).
 * Run under AddressSanitizer too (docs/architecture.md "Weights are
 * borrowed"): a use after free or a double free of borrowed data fails.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "tap.h"
#include "found_backends.h"

#define N 5
#define K 7

/* y[i] = sum_j W[i][j] * x[j], in double */
static void matvec(const float *w, const float *x, int n, int k, double *y)
{
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < k; j++)
            s += (double)w[i * k + j] * x[j];
        y[i] = s;
    }
}

static int same(const float *got, const double *want, int n)
{
    for (int i = 0; i < n; i++)
        if (!tap_close(got[i], want[i], 1e-5))
            return 0;
    return 1;
}

static kiln_function *compile(const kiln_graph *g, const char *backend,
                              kiln_err *err)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.quiet = 1;
    o.jobs = 1;
    return kiln_compile(g, &o, err);
}

static kiln_value op(kiln_graph *g, const char *name, int n,
                     const kiln_value *in, kiln_err *err)
{
    return kiln_graph_op(g, name, n, in, NULL, 0, err);
}

/* shared W (borrowed) and input x; y = matmul(W, x), z = sum(exp(W)) *
 * sum(x) (sum(exp(W)) is data-only: hoisted, computed once) */
static kiln_graph *make_graph(float *w, kiln_err *err)
{
    kiln_graph *g = kiln_graph_new("ref", err);
    if (!g)
        return NULL;
    int64_t dw[2] = {N, K}, dx[1] = {K};
    kiln_tensor tw = {KILN_F32, 2, {N, K}, w};
    kiln_value W = kiln_graph_shared_ref(g, "W", KILN_F32, 2, dw, &tw, err);
    kiln_value x = kiln_graph_input(g, "x", KILN_F32, 1, dx, err);
    kiln_value in2[2] = {W, x};
    kiln_value y = W >= 0 && x >= 0 ? op(g, "matmul", 2, in2, err) : -1;
    kiln_value e = W >= 0 ? op(g, "exp", 1, &W, err) : -1;
    kiln_value se = e >= 0 ? op(g, "sum", 1, &e, err) : -1;
    kiln_value sx = x >= 0 ? op(g, "sum", 1, &x, err) : -1;
    kiln_value p2[2] = {se, sx};
    kiln_value z = se >= 0 && sx >= 0 ? op(g, "mul", 2, p2, err) : -1;
    if (y < 0 || z < 0 || kiln_graph_output(g, "y", y, err) ||
        kiln_graph_output(g, "z", z, err)) {
        kiln_graph_free(g);
        return NULL;
    }
    return g;
}

static double zref(const float *w, const float *x)
{
    double se = 0, sx = 0;
    for (int i = 0; i < N * K; i++)
        se += exp((double)w[i]);
    for (int j = 0; j < K; j++)
        sx += x[j];
    return se * sx;
}

static void fill(float *a, int n, float scale, float shift)
{
    for (int i = 0; i < n; i++)
        a[i] = scale * (float)((i * 37 % 19) - 9) / 9.0f + shift;
}

static void on_backend(const char *bk)
{
    kiln_err err = {0, ""};
    float w[N * K], x[K], w2[N * K], w3[N * K];
    double want[N];
    fill(w, N * K, 0.5f, 0.f);
    fill(x, K, 1.0f, 0.25f);
    kiln_graph *g = make_graph(w, &err);
    kiln_function *f = g ? compile(g, bk, &err) : NULL;
    kiln_function *f2 = g ? compile(g, bk, &err) : NULL;
    if (!ok(f && f2, "%s: graph with a borrowed W compiles twice", bk)) {
        diag("%s", err.message);
        kiln_function_free(f);
        kiln_function_free(f2);
        kiln_graph_free(g);
        return;
    }
    /* the graph goes first: the functions keep W's bytes (the caller's) */
    kiln_graph_free(g);
    kiln_tensor in = {KILN_F32, 1, {K}, x}, out[2];
    memset(out, 0, sizeof out);
    int rc = kiln_function_call(f, &in, out, &err);
    matvec(w, x, N, K, want);
    ok(!rc && same(out[0].data, want, N),
       "%s: y = W x after the graph is freed", bk);
    ok(!rc && tap_close(*(float *)out[1].data, zref(w, x), 1e-5),
       "%s: hoisted sum(exp(W)) * sum(x)", bk);
    /* in place: the caller's change is the next call's W (y is not
     * hoisted; sum(exp(W)) was computed once and stays) */
    w[3] += 1.0f;
    rc = kiln_function_call(f, &in, out, &err);
    matvec(w, x, N, K, want);
    ok(!rc && same(out[0].data, want, N), "%s: W changed in place is seen "
       "by the next call", bk);
    /* a second function of the same graph reads the same bytes */
    rc = kiln_function_call(f2, &in, out, &err);
    ok(!rc && same(out[0].data, want, N), "%s: the second function sees "
       "it too", bk);
    kiln_function_free(f2);
    /* rebind f's W to another buffer, borrowed: the hoisted value is
     * computed again from it */
    fill(w2, N * K, -0.25f, 0.5f);
    kiln_tensor t2 = {KILN_F32, 2, {N, K}, w2};
    rc = kiln_function_bind_shared_ref(f, "W", &t2, &err);
    if (rc)
        diag("%s", err.message);
    rc = rc ? rc : kiln_function_call(f, &in, out, &err);
    matvec(w2, x, N, K, want);
    ok(!rc && same(out[0].data, want, N) &&
           tap_close(*(float *)out[1].data, zref(w2, x), 1e-5),
       "%s: kiln_function_bind_shared_ref: y and z from the new buffer", bk);
    w2[0] = 2.0f;
    rc = kiln_function_call(f, &in, out, &err);
    matvec(w2, x, N, K, want);
    ok(!rc && same(out[0].data, want, N), "%s: the rebound buffer is read "
       "in place", bk);
    /* a copying bind: f owns a copy, the borrowed buffer is not written */
    float w2_before[N * K];
    memcpy(w2_before, w2, sizeof w2);
    fill(w3, N * K, 0.75f, -0.1f);
    kiln_tensor t3 = {KILN_F32, 2, {N, K}, w3};
    rc = kiln_function_bind_shared(f, "W", &t3, &err);
    ok(!rc && memcmp(w2, w2_before, sizeof w2) == 0,
       "%s: a copying bind leaves the borrowed buffer alone", bk);
    matvec(w3, x, N, K, want);
    w3[0] = 100.0f;   /* the copy does not see this */
    rc = rc ? rc : kiln_function_call(f, &in, out, &err);
    ok(!rc && same(out[0].data, want, N), "%s: kiln_function_bind_shared "
       "copies", bk);
    /* a shape error keeps the value */
    kiln_tensor bad = {KILN_F32, 2, {K, N}, w2};
    ok(kiln_function_bind_shared_ref(f, "W", &bad, &err) == KILN_ERR_SHAPE &&
           strstr(err.message, "(5, 7)") && strstr(err.message, "(7, 5)"),
       "%s: a borrowed value of the wrong shape: %s", bk, err.message);
    kiln_function_free(f);
}

/* errors of kiln_graph_shared_ref */
static void errors(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_graph_new("e", &err);
    float w[6] = {0};
    int64_t d[2] = {2, 3};
    kiln_tensor t = {KILN_F32, 2, {3, 2}, w};
    ok(kiln_graph_shared_ref(g, "w", KILN_F32, 2, d, &t, &err) < 0 &&
           err.code == KILN_ERR_SHAPE && strstr(err.message, "(3, 2)") &&
           strstr(err.message, "(2, 3)"),
       "a wrong shape names both: %s", err.message);
    t.dtype = KILN_F64;
    t.shape[0] = 2;
    t.shape[1] = 3;
    ok(kiln_graph_shared_ref(g, "w", KILN_F32, 2, d, &t, &err) < 0 &&
           err.code == KILN_ERR_TYPE, "a wrong dtype: %s", err.message);
    ok(kiln_graph_shared_ref(g, "w", KILN_F32, 2, d, NULL, &err) < 0 &&
           err.code == KILN_ERR_ARG, "no value: %s", err.message);
    t.dtype = KILN_F32;
    ok(kiln_graph_shared_ref(g, "w", KILN_F32, 2, d, &t, &err) >= 0 &&
           kiln_graph_shared_ref(g, "w", KILN_F32, 2, d, &t, &err) < 0 &&
           err.code == KILN_ERR_NAME, "a duplicate name: %s", err.message);
    /* zero elements: nothing to borrow, bound all the same */
    int64_t z[1] = {0};
    kiln_tensor tz = {KILN_F32, 1, {0}, NULL};
    ok(kiln_graph_shared_ref(g, "empty", KILN_F32, 1, z, &tz, &err) >= 0,
       "a zero-element value binds");
    kiln_graph_free(g);
}

static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* 256 MB of f32 borrowed: compile and run on interp without a copy */
static void rss(void)
{
    const int64_t R = 65536, C = 1024;   /* 2^26 floats = 256 MB */
    const double mb = 1024.0 * 1024.0;
    long before = maxrss_kb();
    float *w = malloc((size_t)(R * C) * sizeof *w);
    float x[1024];
    if (!ok(w != NULL, "256 MB buffer")) {
        return;
    }
    for (int64_t i = 0; i < R * C; i++)
        w[i] = (float)(i % 7) * 0.125f;
    for (int j = 0; j < C; j++)
        x[j] = (float)(j % 3);
    kiln_err err = {0, ""};
    kiln_tensor tw = {KILN_F32, 2, {R, C}, w};
    kiln_graph *g2 = kiln_graph_new("big", &err);
    int64_t dw[2] = {R, C}, dx[1] = {C};
    kiln_value W = kiln_graph_shared_ref(g2, "W", KILN_F32, 2, dw, &tw, &err);
    kiln_value xv = kiln_graph_input(g2, "x", KILN_F32, 1, dx, &err);
    kiln_value in2[2] = {W, xv};
    kiln_value y = op(g2, "matmul", 2, in2, &err);
    int built = y >= 0 && !kiln_graph_output(g2, "y", y, &err);
    kiln_function *f = built ? compile(g2, "interp", &err) : NULL;
    kiln_tensor in = {KILN_F32, 1, {C}, x}, out[1];
    int rc = f ? kiln_function_call(f, &in, out, &err) : -1;
    int right = 0;
    if (!rc) {
        /* rows i and i+7 are equal; check a few rows against a loop */
        right = 1;
        for (int64_t i = 0; i < 16; i++) {
            double s = 0;
            for (int64_t j = 0; j < C; j++)
                s += (double)w[i * C + j] * x[j];
            right &= tap_close(((float *)out[0].data)[i], s, 1e-5);
        }
    }
    long after = maxrss_kb();
    double grown = (double)(after - before) * 1024.0 / mb;
    ok(!rc && right, "256 MB borrowed weight: compiled and run on interp%s%s",
       rc ? ": " : "", rc ? err.message : "");
    ok(grown < 1.2 * 256 + 64, "ru_maxrss grew by %.0f MB (< %.0f MB: no "
       "copy of the 256 MB weight)", grown, 1.2 * 256 + 64);
    kiln_function_free(f);
    kiln_graph_free(g2);
    free(w);
}

int main(void)
{
    const char *bk[3];
    int nb = found_backends(bk);
    for (int i = 0; i < nb; i++)
        on_backend(bk[i]);
    errors();
    rss();
    return done_testing();
}
