/*
 * bench_gemv.c — the tall-narrow matrix-vector products of regressions:
 * the reference BLAS, OpenBLAS (one thread) and kiln's own loop
 * (core/runtime/gemv.c, compiled into this program), per shape, and the
 * path kiln's built-in table picks with each BLAS (make bench-dot;
 * docs/backends.md "BLAS").
 *
 * Usage: bench_gemv [--ref LIB] [--openblas LIB] [--f32] [--quick]
 *   LIB: a shared library with cblas_dgemv/cblas_sgemv, loaded with
 *   dlopen (RTLD_LOCAL | RTLD_DEEPBIND, so the two BLAS never resolve each
 *   other's symbols).  Defaults: Debian's reference BLAS and OpenBLAS
 *   (pthread build) under /usr/lib/<triplet>/; a library that does not
 *   load is a column of "-".
 * Each figure is the median over 5 rounds (the three paths interleaved) of
 * the mean time of one call over a batch of calls, in microseconds.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "../core/runtime/gemv.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ORDER_ROW = 101, NOTRANS = 111, TRANS = 112 };  /* CBLAS's values */
typedef void (*dgemv_fn)(int, int, int, int, double, const double *, int,
                         const double *, int, double, double *, int);
typedef void (*sgemv_fn)(int, int, int, int, float, const float *, int,
                         const float *, int, float, float *, int);

typedef struct blas {
    const char *name;
    dgemv_fn d;
    sgemv_fn s;
} blas;

static void blas_open(blas *b, const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) {
        fprintf(stderr, "bench_gemv: %s: not loaded (%s)\n", b->name, dlerror());
        return;
    }
    b->d = (dgemv_fn)dlsym(h, "cblas_dgemv");
    b->s = (sgemv_fn)dlsym(h, "cblas_sgemv");
    void (*set)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    if (set)
        set(1);  /* kiln's default: BLAS on the calling thread */
    if (!b->d || !b->s)
        fprintf(stderr, "bench_gemv: %s: no cblas_dgemv/sgemv\n", b->name);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct shape {
    int f32, trans;
    int64_t rows, cols;
    const void *a, *x;
    void *y;
} shape;

/* One call: who 0 reference, 1 OpenBLAS, 2 kiln's loop. */
static int call(const blas *bl, int who, const shape *s)
{
    int t = s->trans ? TRANS : NOTRANS, m = (int)s->rows, n = (int)s->cols;
    if (who < 2) {
        const blas *b = &bl[who];
        if (!(s->f32 ? (void *)b->s : (void *)b->d))
            return -1;
        if (s->f32)
            b->s(ORDER_ROW, t, m, n, 1.0f, s->a, n, s->x, 1, 0.0f, s->y, 1);
        else
            b->d(ORDER_ROW, t, m, n, 1.0, s->a, n, s->x, 1, 0.0, s->y, 1);
    } else if (s->f32) {
        kiln_gemv_loop_s(s->trans, s->rows, s->cols, 1.0f, s->a, s->cols,
                         s->x, 1, 0.0f, s->y, 1);
    } else {
        kiln_gemv_loop_d(s->trans, s->rows, s->cols, 1.0, s->a, s->cols,
                         s->x, 1, 0.0, s->y, 1);
    }
    return 0;
}

/* Mean microseconds of one call over a batch of about 2 ms. */
static double batch(const blas *bl, int who, const shape *s, int reps)
{
    double t0 = now();
    for (int r = 0; r < reps; r++)
        if (call(bl, who, s))
            return NAN;
    return (now() - t0) * 1e6 / reps;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Largest |u - v| / (1 + |v|) between the outputs of two paths. */
static double diff(const shape *s, const void *u, const void *v)
{
    int64_t len = s->trans ? s->cols : s->rows;
    double d = 0;
    for (int64_t i = 0; i < len; i++) {
        double p = s->f32 ? ((const float *)u)[i] : ((const double *)u)[i];
        double q = s->f32 ? ((const float *)v)[i] : ((const double *)v)[i];
        double e = fabs(p - q) / (1 + fabs(q));
        d = e > d ? e : d;
    }
    return d;
}

int main(int argc, char **argv)
{
    const char *ref = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";
    const char *obl = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3";
    int f32 = 0, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ref") && i + 1 < argc)
            ref = argv[++i];
        else if (!strcmp(argv[i], "--openblas") && i + 1 < argc)
            obl = argv[++i];
        else if (!strcmp(argv[i], "--f32"))
            f32 = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else {
            fprintf(stderr, "usage: bench_gemv [--ref LIB] [--openblas LIB] "
                    "[--f32] [--quick]\n");
            return 2;
        }
    }
    blas bl[2] = {{"reference BLAS", NULL, NULL}, {"OpenBLAS", NULL, NULL}};
    blas_open(&bl[0], ref);
    blas_open(&bl[1], obl);
    static const int64_t ns[] = {100, 1000, 5000, 100000};
    static const int64_t ks[] = {2, 4, 8, 16, 24, 32, 64, 128, 256};
    size_t nn = quick ? 2 : sizeof ns / sizeof ns[0];
    size_t es = f32 ? sizeof(float) : sizeof(double);
    int64_t most = 100000 * 256;
    char *a = malloc((size_t)most * es), *x = malloc(100000 * es);
    char *y[3] = {malloc(100000 * es), malloc(100000 * es), malloc(100000 * es)};
    if (!a || !x || !y[0] || !y[1] || !y[2])
        return 1;
    srand(1);
    for (int64_t i = 0; i < most; i++) {
        double v = (double)rand() / RAND_MAX - 0.5;
        if (f32) ((float *)a)[i] = (float)v; else ((double *)a)[i] = v;
    }
    for (int64_t i = 0; i < 100000; i++) {
        double v = (double)rand() / RAND_MAX - 0.5;
        if (f32) ((float *)x)[i] = (float)v; else ((double *)x)[i] = v;
    }
    printf("# %s gemv, row-major n x k, microseconds per call (median of 5 "
           "rounds); OpenBLAS on one thread\n", f32 ? "f32" : "f64");
    printf("# reference: %s\n# OpenBLAS:  %s\n", bl[0].d ? ref : "-",
           bl[1].d ? obl : "-");
    printf("| product | n | k | ref BLAS | OpenBLAS | kiln loop | "
           "pick (ref) | pick (OpenBLAS) | max diff |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int trans = 0; trans < 2; trans++)
        for (size_t in = 0; in < nn; in++)
            for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++) {
                int64_t n = ns[in], k = ks[ik];
                if (n * k > most || (k > 64 && n > 5000))
                    continue;
                shape s = {f32, trans, n, k, a, x, NULL};
                double work = (double)n * (double)k;
                int reps = (int)(2e6 / (work + 200));  /* ~2 ms at 1 ns/elt */
                reps = reps < 3 ? 3 : reps;
                double t[3][5];
                for (int r = 0; r < 5; r++)
                    for (int w = 0; w < 3; w++) {
                        s.y = y[w];
                        call(bl, w, &s);  /* warm */
                        t[w][r] = batch(bl, w, &s, reps);
                    }
                double med[3];
                for (int w = 0; w < 3; w++) {
                    qsort(t[w], 5, sizeof t[w][0], cmp);
                    med[w] = t[w][2];
                }
                double d = 0;
                for (int w = 0; w < 2; w++) {
                    if (isnan(med[w]))
                        continue;
                    s.y = y[w];
                    double e = diff(&s, y[2], y[w]);
                    d = e > d ? e : d;
                }
                char c[3][32];
                for (int w = 0; w < 3; w++)
                    snprintf(c[w], sizeof c[w], isnan(med[w]) ? "-" : "%.2f",
                             med[w]);
                printf("| %s | %lld | %lld | %s | %s | %s | %s | %s | %.1e |\n",
                       trans ? "A^T y" : "A x", (long long)n, (long long)k,
                       c[0], c[1], c[2],
                       kiln_gemv_use_loop(NULL, 0, trans, n, k) ? "loop" : "BLAS",
                       kiln_gemv_use_loop(NULL, 1, trans, n, k) ? "loop" : "BLAS",
                       d);
                fflush(stdout);
            }
    return 0;
}
