/* bench/bench_recur.c — the per-step cost of a scan and the tier-0
 * compile of a model with one (make bench-recur; issue 28,
 * docs/performance.md).
 *
 * The model is tests/graphs/scan_arma.kg's ARMA(1,1) error recursion
 * (posteriordb arma11), logp and its gradient: a forward scan, and for
 * the gradient the trajectory scan and the reverse (VJP) scan.  Per
 * backend named on the command line (default interp tcc llvm; one that
 * does not compile here is skipped), the calling thread's CPU time per
 * call (median of 7 blocks) at T = 100 and T = 10100 steps; the
 * difference over 10000 steps is the per-step cost, without the fixed
 * cost of the call: with passes "all" the scans are fused into RECUR
 * loop kernels (the pass `recur`: the whole scan one compiled loop),
 * with "none" the host's loop calls each body's compiled function once
 * per step (core/runtime/recur.c).  Then the compile time (wall, ms) of
 * the logp+gradient model with the default policy (tiers: interp/tcc
 * first) and with each backend alone, no disk cache, both ways.
 * Usage: bench_recur [N] [BACKEND...]   (N calls per block, default 20)
 * Not a test: prints Markdown tables. */
#define _POSIX_C_SOURCE 200809L
#include <kiln/cache.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

static const char TEXT[] =
    "kiln 1\ngraph arma_step\n"
    "  input err: f64\n  input y: f64\n  input yprev: f64\n"
    "  input mu: f64\n  input phi: f64\n  input theta: f64\n"
    "  nu = add(add(mu, mul(phi, yprev)), mul(theta, err))\n"
    "  e = sub(y, nu)\n  output e\n  output e_t = e\nend\n"
    "graph arma\n  input y: f64[n]\n  input mu: f64\n  input phi: f64\n"
    "  input theta: f64\n"
    "  err1 = sub(y[0], add(mu, mul(phi, mu)))\n"
    "  s = scan(err1, y[1:], y[:-1], mu, phi, theta, body=arma_step, "
    "carries=1, seqs=2)\n"
    "  errs = result(s, index=1)\n"
    "  lp = add(normal_lpdf(err1, 0.0, 2.0), normal_lpdf(errs, 0.0, 2.0))\n"
    "  g_mu, g_phi, g_theta = grad(lp, mu, phi, theta)\n"
    "  output lp\n  output g_mu\n  output g_phi\n  output g_theta\nend\n";

static kiln_function *compile(const char *backend, const char *passes,
                              double *ms)
{
    kiln_err err = {0, ""};
    double t0 = bench_now();
    kiln_graph *g = kiln_parse_string(TEXT, "arma.kg", NULL, &err);
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.passes = passes;
    o.quiet = 1;
    o.cache_mode = KILN_CACHE_MODE_OFF;
    kiln_function *f = g ? kiln_compile(g, &o, &err) : NULL;
    if (ms)
        *ms = (bench_now() - t0) * 1e3;
    kiln_graph_free(g);
    if (!f)
        fprintf(stderr, "bench_recur: %s: %s\n",
                backend ? backend : "default", err.message);
    return f;
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* microseconds of CPU per call at T steps, median of 7 blocks of n */
static double time_calls(kiln_function *f, int64_t T, long n)
{
    double *y = malloc(sizeof *y * (size_t)(T + 1));
    double mu = 0.1, phi = 0.5, theta = 0.2, acc = 0;
    for (int64_t i = 0; i <= T; i++)
        y[i] = (acc += 0.01 * sin(0.37 * (double)i));
    kiln_tensor in[4];
    memset(in, 0, sizeof in);
    for (int i = 0; i < 4; i++)
        in[i].dtype = KILN_F64;
    in[0].rank = 1;
    in[0].shape[0] = T + 1;   /* T steps after y[0] */
    in[0].data = y;
    in[1].data = &mu;
    in[2].data = &phi;
    in[3].data = &theta;
    kiln_tensor out[4];
    kiln_err err = {0, ""};
    double t[7];
    if (kiln_function_call(f, in, out, &err)) {
        fprintf(stderr, "bench_recur: %s\n", err.message);
        free(y);
        return -1;
    }
    for (int b = 0; b < 7; b++) {
        double t0 = cpu_now();
        for (long i = 0; i < n; i++)
            kiln_function_call(f, in, out, NULL);
        t[b] = (cpu_now() - t0) / (double)n * 1e6;
    }
    qsort(t, 7, sizeof t[0], bench_cmp_double);
    free(y);
    return t[3];
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20;
    const char *defaults[] = {"interp", "tcc", "llvm"};
    const char **bes = argc > 2 ? (const char **)argv + 2 : defaults;
    int nb = argc > 2 ? argc - 2 : 3;
    if (n < 1)
        n = 20;
    /* passes all: the scans fused into RECUR loop kernels (the pass
     * `recur`); passes none: the host's loop calling each body */
    static const char *const passes[2] = {"all", "none"};
    printf("| backend | passes | logp+grad, T=100 (us) | T=10100 (us) | "
           "ns per step (every scan of logp+grad) |\n|---|---|---|---|---|\n");
    for (int b = 0; b < nb; b++)
        for (int q = 0; q < 2; q++) {
            kiln_function *f = compile(bes[b], passes[q], NULL);
            if (!f)
                continue;
            double a = time_calls(f, 100, n * 10), c = time_calls(f, 10100, n);
            printf("| %s | %s | %.1f | %.1f | %.1f |\n", bes[b], passes[q], a,
                   c, (c - a) * 1e3 / 10000);
            kiln_function_free(f);
        }
    printf("\n| compile of logp+grad (no disk cache) | passes | ms |\n"
           "|---|---|---|\n");
    double ms;
    for (int q = 0; q < 2; q++) {
        kiln_function *f = compile(NULL, passes[q], &ms);
        if (f)
            printf("| default policy (tier 0) | %s | %.1f |\n", passes[q], ms);
        kiln_function_free(f);
        for (int b = 0; b < nb; b++) {
            f = compile(bes[b], passes[q], &ms);
            if (f)
                printf("| %s alone | %s | %.1f |\n", bes[b], passes[q], ms);
            kiln_function_free(f);
        }
    }
    return 0;
}
