/* bench/bench_strided.c — kernels that read strided and broadcast views
 * (make bench-strided; issue 27 part 2, docs/performance.md "Strided
 * reads").
 *
 * At posteriordb diamonds' size (X: 5000 x 25, its design matrix), each
 * one kernel (or two) reading its operands through views, timed per
 * kiln_function_call (median of 7 blocks):
 *   slice-rowbcast  sub(X[:, 1:], m), m: f64[24]   (diamonds' centring:
 *                   a strided slice minus a row broadcast)
 *   colmean         mean(X[:, 1:], axis=0)          (diamonds' means: a
 *                   reduction over the slice's rows, inner axis kept)
 *   diamonds-td     both, as diamonds' transformed data
 *   contig-rowbcast sub(Z, m), Z: f64[5000, 24]     (rows of 24, inner
 *                   contiguous: the contiguous path)
 *   contig-flat     sub(Z, W), both 5000 x 24       (one row: control)
 *   transpose       mul(transpose(A), m), A: 24 x 5000 (inner stride 5000)
 *   step-slice      sub(X[::2, 1::2], 1.0)          (steps on both axes)
 *   colbcast        sub(Z, c), c: f64[5000, 1]     (a column broadcast:
 *                   inner stride 0)
 *   rowsum          sum(X[:, 1:], axis=1)           (a reduction along
 *                   rows of 24)
 * Each under every backend named on the command line (default: interp tcc
 * llvm; a backend that does not compile here is skipped).  Times are the
 * calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID: the kernels run on
 * it; less disturbed than wall time on a shared machine), the median of
 * 7 blocks of N calls.
 * Usage: bench_strided [N] [BACKEND...]   (N calls per block, default 200)
 * Not a test: prints a Markdown table (microseconds per call). */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/graph.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

enum { R = 5000, C = 25 };

typedef struct bcase {
    const char *name;
    const char *body;     /* the graph's statements */
} bcase;

static const bcase cases[] = {
    {"slice-rowbcast", "  input X: f64[5000, 25]\n  input m: f64[24]\n"
                       "  output y = sub(X[:, 1:], m)\n"},
    {"colmean", "  input X: f64[5000, 25]\n  input m: f64[24]\n"
                "  output y = mean(X[:, 1:], axis=0)\n"},
    {"diamonds-td", "  input X: f64[5000, 25]\n  input m: f64[24]\n"
                    "  X1 = X[:, 1:]\n"
                    "  output y = sub(X1, mean(X1, axis=0))\n"},
    {"contig-rowbcast", "  input Z: f64[5000, 24]\n  input m: f64[24]\n"
                        "  output y = sub(Z, m)\n"},
    {"contig-flat", "  input Z: f64[5000, 24]\n  input W: f64[5000, 24]\n"
                    "  output y = sub(Z, W)\n"},
    {"transpose", "  input A: f64[24, 5000]\n  input m: f64[24]\n"
                  "  output y = mul(transpose(A), m)\n"},
    {"step-slice", "  input X: f64[5000, 25]\n  input m: f64[24]\n"
                   "  output y = sub(X[::2, 1::2], 1.0)\n"},
    {"colbcast", "  input Z: f64[5000, 24]\n  input c: f64[5000, 1]\n"
                 "  output y = sub(Z, c)\n"},
    {"rowsum", "  input X: f64[5000, 25]\n  input m: f64[24]\n"
               "  output y = sum(X[:, 1:], axis=1)\n"},
};

static kiln_function *compile(const char *body, const char *backend)
{
    char text[1024];
    snprintf(text, sizeof text, "kiln 1\ngraph strided\n%send\n", body);
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "bench.kg", NULL, &err);
    if (!g) {
        fprintf(stderr, "bench_strided: %s\n", err.message);
        return NULL;
    }
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.quiet = 1;
    kiln_function *f = kiln_compile(g, &o, &err);
    kiln_graph_free(g);
    if (!f)
        fprintf(stderr, "bench_strided: %s: %s\n", backend, err.message);
    return f;
}

/* The inputs case `c` declares, filled from buf (each its own part). */
static int inputs_of(const char *body, double *buf, kiln_tensor *in)
{
    int n = 0;
    const char *p = body;
    size_t at = 0;
    while ((p = strstr(p, "input ")) != NULL) {
        p += 6;
        kiln_tensor *t = &in[n++];
        memset(t, 0, sizeof *t);
        t->dtype = KILN_F64;
        const char *lb = strchr(p, '[');
        long d0 = 0, d1 = 0;
        int k = sscanf(lb, "[%ld, %ld]", &d0, &d1);
        t->rank = k == 2 ? 2 : 1;
        t->shape[0] = d0;
        t->shape[1] = d1;
        t->data = buf + at;
        at += (size_t)d0 * (size_t)(k == 2 ? d1 : 1);
    }
    return n;
}

/* the calling thread's CPU time, seconds */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* microseconds of CPU per call, median of 7 blocks of n */
static double time_calls(kiln_function *f, const kiln_tensor *in, long n)
{
    kiln_tensor out[1];
    kiln_err err = {0, ""};
    double t[7];
    if (kiln_function_call(f, in, out, &err)) {
        fprintf(stderr, "bench_strided: %s\n", err.message);
        return -1;
    }
    for (int b = 0; b < 7; b++) {
        double t0 = cpu_now();
        for (long i = 0; i < n; i++)
            kiln_function_call(f, in, out, NULL);
        t[b] = (cpu_now() - t0) / (double)n * 1e6;
    }
    qsort(t, 7, sizeof t[0], bench_cmp_double);
    return t[3];
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200;
    const char *defaults[] = {"interp", "tcc", "llvm"};
    const char **bes = argc > 2 ? (const char **)argv + 2 : defaults;
    int nb = argc > 2 ? argc - 2 : 3;
    if (n < 1)
        n = 200;
    size_t total = 3 * (size_t)R * C;
    double *buf = malloc(total * sizeof *buf);
    if (!buf)
        return 1;
    for (size_t i = 0; i < total; i++)
        buf[i] = (double)((i * 2654435761u) % 1000) / 250.0 - 2.0;
    printf("| case (5000 x 25 data) |");
    for (int b = 0; b < nb; b++)
        printf(" %s (us) |", bes[b]);
    printf("\n|---|");
    for (int b = 0; b < nb; b++)
        printf("---:|");
    printf("\n");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kiln_tensor in[4];
        inputs_of(cases[c].body, buf, in);
        printf("| %s |", cases[c].name);
        for (int b = 0; b < nb; b++) {
            kiln_function *f = compile(cases[c].body, bes[b]);
            if (!f) {
                printf(" skipped |");
                continue;
            }
            printf(" %.1f |", time_calls(f, in, n));
            fflush(stdout);
            kiln_function_free(f);
        }
        printf("\n");
    }
    free(buf);
    return 0;
}
