/* bench/bench_callpath.c — the fixed cost of a call (make bench-callpath;
 * issue 14, docs/performance.md "Call path").
 *
 * Three measurements, each the median of 7 blocks of N calls:
 *  1. kiln_function_call of a one-kernel function (x: f64 -> x + 1.0):
 *     the call's fixed cost (input checks, shape signature, view
 *     re-pointing, one kernel call, outputs) plus one tiny kernel;
 *  2. the same function's logp callback (its gradient recorded), the way
 *     a sampler calls it: x and grad packed as doubles;
 *  3. a chain of K scalar kernels (passes "none", so each node is its own
 *     kernel): (t(K) - t(1)) / (K - 1) is the cost per kernel.
 * Each under every backend named on the command line (default: interp
 * llvm); a backend that cannot compile (not built) is skipped.
 * Usage: bench_callpath [N] [BACKEND...]   (N default 200000)
 * Not a test: prints a Markdown table. */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/graph.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

static kiln_function *compile(const char *text, const char *backend,
                              const char *passes)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "bench.kg", NULL, &err);
    if (!g) {
        fprintf(stderr, "bench_callpath: %s\n", err.message);
        return NULL;
    }
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.passes = passes;
    o.quiet = 1;
    kiln_function *f = kiln_compile(g, &o, &err);
    kiln_graph_free(g);
    if (!f)
        fprintf(stderr, "bench_callpath: %s: %s\n", backend, err.message);
    return f;
}

/* ns per kiln_function_call, median of 7 blocks of n */
static double time_call(kiln_function *f, long n)
{
    double x = 0.25, t[7];
    kiln_tensor in = {KILN_F64, 0, {0}, &x};
    kiln_tensor out[2];
    kiln_err err = {0, ""};
    if (kiln_function_call(f, &in, out, &err)) {
        fprintf(stderr, "bench_callpath: %s\n", err.message);
        return -1;
    }
    for (int b = 0; b < 7; b++) {
        double t0 = bench_now();
        for (long i = 0; i < n; i++) {
            x = 0.25 + 1e-9 * (double)i;
            kiln_function_call(f, &in, out, NULL);
        }
        t[b] = (bench_now() - t0) / (double)n * 1e9;
    }
    qsort(t, 7, sizeof t[0], bench_cmp_double);
    return t[3];
}

static double time_callback(kiln_function *f, long n)
{
    uint64_t dim = 0;
    void *ud = NULL;
    kiln_err err = {0, ""};
    kiln_logp_fn fn = kiln_function_logp_callback(f, "lp", &dim, &ud, &err);
    if (!fn) {
        fprintf(stderr, "bench_callpath: %s\n", err.message);
        return -1;
    }
    double x = 0.25, grad, lp, t[7];
    if (fn(dim, &x, &grad, &lp, ud) != 0)
        return -1;
    for (int b = 0; b < 7; b++) {
        double t0 = bench_now();
        for (long i = 0; i < n; i++) {
            x = 0.25 + 1e-9 * (double)i;
            fn(dim, &x, &grad, &lp, ud);
        }
        t[b] = (bench_now() - t0) / (double)n * 1e9;
    }
    qsort(t, 7, sizeof t[0], bench_cmp_double);
    return t[3];
}

/* a chain of k scalar nodes ending in output y (and lp = y, its grad) */
static char *chain(int k)
{
    size_t cap = 256 + (size_t)k * 48;
    char *s = malloc(cap), *p = s;
    p += sprintf(p, "kiln 1\ngraph chain\n  input x: f64\n  v0 = add(x, 1.0)\n");
    for (int i = 1; i < k; i++)
        p += sprintf(p, "  v%d = mul(v%d, 0.5)\n", i, i - 1);
    sprintf(p, "  output y = v%d\nend\n", k - 1);
    return s;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200000;
    const char *defaults[] = {"interp", "llvm"};
    const char **bes = argc > 2 ? (const char **)argv + 2 : defaults;
    int nb = argc > 2 ? argc - 2 : 2;
    if (n < 1)
        n = 200000;
    const char *one =
        "kiln 1\ngraph one\n  input x: f64\n  lp = add(x, 1.0)\n"
        "  d_x = grad(lp, x)\n  output lp\n  output d_x\nend\n";
    enum { K = 64 };
    char *ck = chain(K), *c1 = chain(1);
    printf("| backend | kiln_function_call, 1 kernel (ns) | logp callback, "
           "1 kernel + gradient (ns) | per kernel, chain of %d (ns) |\n"
           "|---|---:|---:|---:|\n", K);
    for (int b = 0; b < nb; b++) {
        kiln_function *f1 = compile(one, bes[b], "all");
        kiln_function *fa = compile(c1, bes[b], "none");
        kiln_function *fk = compile(ck, bes[b], "none");
        if (!f1 || !fa || !fk) {
            printf("| %s | skipped: does not compile here | | |\n", bes[b]);
        } else {
            double tc = time_call(f1, n), tb = time_callback(f1, n);
            double t1 = time_call(fa, n), tk = time_call(fk, n / 8 + 1);
            printf("| %s | %.1f | %.1f | %.2f (%d kernels: %.0f ns) |\n",
                   bes[b], tc, tb, (tk - t1) / (K - 1),
                   kiln_function_n_kernels(fk), tk);
        }
        kiln_function_free(f1);
        kiln_function_free(fa);
        kiln_function_free(fk);
    }
    free(ck);
    free(c1);
    return 0;
}
