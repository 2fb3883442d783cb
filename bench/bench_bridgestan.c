/*
 * bench_bridgestan.c — the per-call cost of a kiln BridgeStan library
 * (make bench-bridgestan, bench/bridgestan.sh; docs/performance.md,
 * "BridgeStan"): bs_log_density_gradient through dlopen, as nutpie's Stan
 * path calls it, against kiln_model_log_density on the same model (the
 * difference is the shim's overhead) and against kiln's own logp callback
 * (kiln_function_logp_callback) on the hand-written model of the same
 * posterior (examples/eight_schools.kg, examples/radon.kg).
 *
 * usage: bench_bridgestan LIB.so DATA.json MODEL.kg NATIVE.kg [CALLS]
 * Prints one line: label=... dim=... callback_ns=... model_ns=... bs_ns=...
 * overhead_ns=... (medians of 7 rounds of CALLS calls, ns per call).
 * The backend is the policy's, or $KILN_BACKEND's.  Exit status 1 when
 * the library and kiln_model disagree at the first point.
 */
#define _POSIX_C_SOURCE 200809L
#define KILN_BS_API_LOADER
#include "bridgestan_api.h"

#include "bench_common.h"

#include <kiln/graph.h>
#include <kiln/kiln.h>
#include <kiln/model.h>

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 7
#define NPOINTS 64

/* NPOINTS deterministic points of dim n in [-1, 1) */
static double *points(int n)
{
    double *x = malloc(sizeof *x * (size_t)n * NPOINTS);
    uint64_t s = 7;
    for (long i = 0; x && i < (long)n * NPOINTS; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = 2.0 * (double)(s >> 11) / 9007199254740992.0 - 1.0;
    }
    return x;
}

/* what one timed call does: 0 ok */
typedef int (*call_fn)(void *ctx, const double *x, double *lp, double *g);

static double median_ns(call_fn f, void *ctx, const double *pts, int n,
                        long calls, double *grad)
{
    double t[ROUNDS], lp, sink = 0;
    for (long i = 0; i < 1000; i++)   /* warm: contexts, slots */
        f(ctx, pts + (i % NPOINTS) * n, &lp, grad);
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = bench_now();
        for (long i = 0; i < calls; i++) {
            f(ctx, pts + (i % NPOINTS) * n, &lp, grad);
            sink += lp;
        }
        t[r] = (bench_now() - t0) / (double)calls * 1e9;
    }
    if (sink == 42.4242)
        fputs("", stderr);   /* keep the calls */
    qsort(t, ROUNDS, sizeof t[0], bench_cmp_double);
    return t[ROUNDS / 2];
}

typedef struct bs_ctx {
    bs_api *api;
    bs_model *m;
} bs_ctx;

static int call_bs(void *c, const double *x, double *lp, double *g)
{
    bs_ctx *b = c;
    return b->api->log_density_gradient(b->m, false, true, x, lp, g, NULL);
}

static int call_model(void *c, const double *x, double *lp, double *g)
{
    return kiln_model_log_density(c, 1, x, lp, g, NULL);
}

typedef struct cb_ctx {
    kiln_logp_fn fn;
    uint64_t dim;
    void *ud;
} cb_ctx;

static int call_callback(void *c, const double *x, double *lp, double *g)
{
    cb_ctx *b = c;
    return b->fn(b->dim, x, g, lp, b->ud);
}

static const char *base(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fputs("usage: bench_bridgestan LIB.so DATA.json MODEL.kg NATIVE.kg "
              "[CALLS]\n", stderr);
        return 2;
    }
    const char *lib = argv[1], *data = argv[2], *kg = argv[3],
               *native = argv[4];
    long calls = argc > 5 ? atol(argv[5]) : 100000;
    if (calls < 1)
        calls = 100000;

    /* the library, as a sampler opens it */
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    bs_api api;
    char why[256] = "", *err = NULL;
    if (!h || bs_api_load(h, &api, why, sizeof why) != 0) {
        fprintf(stderr, "bench_bridgestan: %s: %s\n", lib, h ? why : dlerror());
        return 1;
    }
    bs_ctx b = {&api, api.model_construct(data, 1, &err)};
    if (!b.m) {
        fprintf(stderr, "bench_bridgestan: %s\n", err ? err : "construct");
        api.free_error_msg(err);
        return 1;
    }
    int n = api.param_unc_num(b.m);

    /* the same model from libkiln */
    kiln_err kerr = {0, ""};
    kiln_graph *g = kiln_parse_file(kg, &kerr);
    kiln_model *km = g ? kiln_model_new(g, NULL, data, NULL, NULL, &kerr)
                       : NULL;
    kiln_graph_free(g);
    /* kiln's own callback on the hand-written model */
    kiln_graph *gn = km ? kiln_parse_file(native, &kerr) : NULL;
    kiln_function *f = gn ? kiln_compile(gn, NULL, &kerr) : NULL;
    kiln_graph_free(gn);
    cb_ctx cb = {NULL, 0, NULL};
    if (f)
        cb.fn = kiln_function_logp_callback(f, "logp", &cb.dim, &cb.ud,
                                            &kerr);
    if (!km || !cb.fn) {
        fprintf(stderr, "bench_bridgestan: %s\n", kerr.message);
        return 1;
    }

    double *pts = points(n), *pn = points((int)cb.dim);
    double *g1 = calloc((size_t)n + (size_t)cb.dim, sizeof *g1);
    double *g2 = calloc((size_t)n, sizeof *g2);
    double l1 = 0, l2 = 0;
    if (!pts || !pn || !g1 || !g2)
        return 1;
    call_bs(&b, pts, &l1, g1);
    call_model(km, pts, &l2, g2);
    double d = fabs(l1 - l2);
    for (int i = 0; i < n; i++)
        d = fmax(d, fabs(g1[i] - g2[i]));
    if (!(d <= 1e-9 * fmax(1.0, fabs(l2)))) {
        fprintf(stderr, "bench_bridgestan: the library and kiln_model "
                "disagree by %g\n", d);
        return 1;
    }

    double t_cb = median_ns(call_callback, &cb, pn, (int)cb.dim, calls, g1);
    double t_model = median_ns(call_model, km, pts, n, calls, g1);
    double t_bs = median_ns(call_bs, &b, pts, n, calls, g1);
    const char *be = getenv("KILN_BACKEND");
    printf("label=%s backend=%s dim=%d native_dim=%llu callback_ns=%.1f "
           "model_ns=%.1f bs_ns=%.1f overhead_ns=%.1f\n", base(kg),
           be && *be ? be : "policy", n, (unsigned long long)cb.dim, t_cb,
           t_model, t_bs, t_bs - t_model);
    free(pts);
    free(pn);
    free(g1);
    free(g2);
    kiln_function_free(f);
    kiln_model_free(km);
    api.model_destruct(b.m);
    dlclose(h);
    return 0;
}
