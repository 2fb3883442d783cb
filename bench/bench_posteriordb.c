/*
 * bench_posteriordb.c — one posteriordb posterior's cold compile and
 * per-gradient time under kiln (make bench-posteriordb,
 * bench/posteriordb.sh; docs/performance.md, "posteriordb").
 *
 * usage: bench_posteriordb MODEL.kg DATA.json [SECONDS [WARM]]
 * Prints one line:
 *   dim=N cold_ms=C ns_per_grad=T tiered=K/M
 * cold_ms: parse + kiln_model_new (both compiled functions; the cache is
 * whatever $KILN_CACHE_DIR holds: the script gives an empty one);
 * ns_per_grad: the median of 7 rounds of kiln_model_log_density with the
 * gradient (jacobian on) at 64 deterministic points, each round about
 * SECONDS/7 long (default 1 s in all), after the tiers have done their
 * work: WARM seconds of calls (default 2) for the trigger to queue what it
 * will, then kiln_model_tier_wait.  tiered=K/M counts the density's
 * kernels on tier-1 code (0 with an explicit backend: no tiers).  The backend is the policy's or $KILN_BACKEND's.
 * With $KILN_BENCH_PDB_POINTS=FILE it first writes the timing points and
 * kiln's values at them to FILE, for Stan's harness (bench/stan.py):
 *   line 1: "N NPOINTS"; then per point one line "x_1..x_N lp g_1..g_N"
 * (%.17g; lp with the jacobian, kiln's constants).
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"

#include <kiln/graph.h>
#include <kiln/kiln.h>
#include <kiln/model.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 7
#define NPOINTS 64

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_posteriordb MODEL.kg DATA.json "
                        "[SECONDS]\n");
        return 2;
    }
    double seconds = argc > 3 ? atof(argv[3]) : 1.0;
    double warm = argc > 4 ? atof(argv[4]) : 2.0;   /* seconds of calls for the trigger */
    kiln_err e;
    double t0 = bench_now();
    kiln_graph *g = kiln_parse_file(argv[1], &e);
    kiln_model *m = g ? kiln_model_new(g, NULL, argv[2], NULL, NULL, &e)
                      : NULL;
    double cold = bench_now() - t0;
    kiln_graph_free(g);
    if (!m) {
        fprintf(stderr, "bench_posteriordb: %s\n", e.message);
        return 1;
    }
    int n = kiln_model_n_unc(m);
    double *x = malloc(sizeof *x * (size_t)n * NPOINTS);
    double *grad = malloc(sizeof *grad * (size_t)(n + 1));
    if (!x || !grad)
        return 1;
    /* points near the origin of the unconstrained space: a typical-set
     * scale for standardised parameters, finite for every model here */
    uint64_t s = 11;
    for (long i = 0; i < (long)n * NPOINTS; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = 0.5 * (2.0 * (double)(s >> 11) / 9007199254740992.0 - 1.0);
    }
    double lp, sink = 0;
    const char *dump = getenv("KILN_BENCH_PDB_POINTS");
    if (dump && *dump) {
        FILE *f = fopen(dump, "w");
        if (!f) {
            fprintf(stderr, "bench_posteriordb: cannot write %s\n", dump);
            return 1;
        }
        fprintf(f, "%d %d\n", n, NPOINTS);
        for (int p = 0; p < NPOINTS; p++) {
            if (kiln_model_log_density(m, 1, x + (long)p * n, &lp, grad,
                                       &e) != 0) {
                fprintf(stderr, "bench_posteriordb: %s\n", e.message);
                return 1;
            }
            for (int i = 0; i < n; i++)
                fprintf(f, "%.17g ", x[(long)p * n + i]);
            fprintf(f, "%.17g", lp);
            for (int i = 0; i < n; i++)
                fprintf(f, " %.17g", grad[i]);
            fputc('\n', f);
        }
        if (fclose(f) != 0) {
            fprintf(stderr, "bench_posteriordb: cannot write %s\n", dump);
            return 1;
        }
    }
    /* warm up: let the trigger see the calls, then wait for its jobs */
    double tw = bench_now();
    long calls = 0;
    while (bench_now() - tw < warm || calls < 2000) {
        kiln_model_log_density(m, 1, x + (calls % NPOINTS) * n, &lp, grad,
                               &e);
        calls++;
    }
    kiln_model_tier_wait(m, 120.0);
    /* size a round */
    double per = (bench_now() - tw) / (double)calls;
    long round = (long)(seconds / ROUNDS / (per > 1e-9 ? per : 1e-9));
    if (round < 100)
        round = 100;
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double a = bench_now();
        for (long i = 0; i < round; i++) {
            kiln_model_log_density(m, 1, x + (i % NPOINTS) * n, &lp, grad,
                                   &e);
            sink += lp;
        }
        t[r] = (bench_now() - a) / (double)round * 1e9;
    }
    qsort(t, ROUNDS, sizeof t[0], bench_cmp_double);
    if (sink == 42.4242)
        fputs("", stderr);
    int tiered = 0, kernels = 0;
    kiln_model_tier_count(m, &tiered, &kernels);
    printf("dim=%d cold_ms=%.1f ns_per_grad=%.1f tiered=%d/%d\n", n,
           cold * 1e3, t[ROUNDS / 2], tiered, kernels);
    kiln_model_free(m);
    free(x);
    free(grad);
    return 0;
}
