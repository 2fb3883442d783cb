/*
 * test_mpi.c — libkiln-mpi (<kiln/mpi.h>, docs/mpi.md), TAP on rank 0.
 * Run under mpirun by tests/test_mpi.sh (-np 1 to 4).  Every check is collective: each
 * rank's verdict is combined with MPI_Allreduce(MIN) and rank 0 prints it.
 *
 *   test_mpi_api            the checks below
 *   test_mpi_api hang       rank 1 never answers: rank 0's
 *                           kiln_mpi_log_density fails with the timeout
 *                           ($KILN_MPI_TIMEOUT) and the job is aborted
 *   test_mpi_api nullcomm   rank 1 passes MPI_COMM_NULL: it fails at once,
 *                           the others time out in the first collective
 *                           (timeout_seconds 2); rank 0 prints both
 *                           messages, then the job is aborted
 *   test_mpi_api finalize   rank 0 calls MPI_Finalize without
 *                           kiln_mpi_model_free while the others serve:
 *                           they return from kiln_mpi_serve (exit 0)
 *   test_mpi_api finalize2  every rank calls MPI_Finalize without
 *                           kiln_mpi_model_free (collective use): exit 0
 *
 * Expected values come from kiln_model_new on the whole data in each
 * process (no MPI), the independent computation a partition must match.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/mpi.h>

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

static int rank, size;
static int served = 1;   /* ranks != 0: kiln_mpi_serve returned 0 */

/* one collective check: rank 0 prints "ok N - ..." when every rank's
 * cond holds */
static int check(int cond, const char *fmt, ...) TAP_PRINTF(2, 3);
static int check(int cond, const char *fmt, ...)
{
    int all = cond != 0;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
        char what[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        ok(all, "%s", what);
    }
    return all;
}

static const char *model_text =
    "kiln 1\n"
    "graph linreg\n"
    "  shared X: f64[N, K]\n"
    "  shared y: f64[N]\n"
    "  param alpha: f64\n"
    "  param beta: f64[K]\n"
    "  param sigma: f64 lower=0\n"
    "  mu = add(alpha, dot(X, beta))\n"
    "  lp_prior = add(add(normal_lpdf(alpha, 0, 2), normal_lpdf(beta, 0, "
    "2)), normal_lpdf(sigma, 0, 1))\n"
    "  output logp = add(lp_prior, normal_lpdf(y, mu, sigma))\n"
    "end\n";

/* CmdStan JSON for the model: n rows, k = 3 columns, values from a fixed
 * LCG; `shift` is added to y[0] (a rank-dependent shift: disagreeing
 * data).  The caller frees it. */
static char *make_data(int n, double shift)
{
    size_t cap = 256 + (size_t)n * 4 * 32;
    char *s = malloc(cap);
    size_t l = 0;
    unsigned long long st = 12345;
#define NEXT() (st = st * 6364136223846793005ULL + 1442695040888963407ULL, \
                (double)(st >> 11) / 9007199254740992.0 - 0.5)
    l += (size_t)snprintf(s + l, cap - l, "{\"X\": [");
    double xs[4];
    char *ys = malloc((size_t)n * 32 + 8);
    size_t yl = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < 3; j++)
            xs[j] = 2 * NEXT();
        double y = 0.3 + xs[0] - 0.5 * xs[1] + 0.25 * xs[2] + NEXT() +
                   (i == 0 ? shift : 0);
        l += (size_t)snprintf(s + l, cap - l, "%s[%.17g, %.17g, %.17g]",
                              i ? ", " : "", xs[0], xs[1], xs[2]);
        yl += (size_t)snprintf(ys + yl, (size_t)n * 32 + 8 - yl, "%s%.17g",
                               i ? ", " : "", y);
    }
    ys[yl] = 0;
    l += (size_t)snprintf(s + l, cap - l, "], \"y\": [%s]", ys);
    if (n == 0)
        l += (size_t)snprintf(s + l, cap - l, ", \"N\": 0, \"K\": 3");
    snprintf(s + l, cap - l, "}");
    free(ys);
#undef NEXT
    return s;
}

static kiln_options quiet_opt(void)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.quiet = 1;
    /* tests/test_mpi.sh's compile counts: a backend whose code the cache
     * holds (the interpreter's is not) */
    o.backend = getenv("KILN_MPI_TEST_BACKEND");
    return o;
}

static int rel_close(double a, double b, double tol)
{
    if (isnan(a) || isnan(b))
        return 0;
    return fabs(a - b) <= tol * fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* The MPI model's lp and gradient against a serial model's at a few
 * points, jacobian on and off; `serve`: ranks != 0 serve. */
static void compare(kiln_mpi_model *mm, kiln_model *serial, int serve,
                    const char *what)
{
    int n = kiln_model_n_unc(serial);
    double unc[8], g[8], gs[8], lp = 0, lps = 0;
    int good = n <= 8 && kiln_model_n_unc(kiln_mpi_model_part(mm)) == n;
    int evals = 0;
    if (serve && rank != 0) {
        kiln_err e = {0, ""};
        served = kiln_mpi_serve(mm, &e) == 0;
        if (!served)
            fprintf(stderr, "rank %d: kiln_mpi_serve: %s\n", rank,
                    e.message);
        return;
    }
    for (int pt = 0; pt < 3 && good; pt++) {
        for (int i = 0; i < n; i++)
            unc[i] = 0.1 * (pt + 1) * (i % 2 ? -1 : 1) + 0.05 * i;
        for (int jac = 0; jac < 2; jac++) {
            kiln_err e = {0, ""};
            int rc = kiln_mpi_log_density(mm, jac, unc, &lp, g, &e);
            int rs = kiln_model_log_density(serial, jac, unc, &lps, gs, &e);
            good = good && rc == 0 && rs == 0 && rel_close(lp, lps, 1e-12);
            for (int i = 0; i < n; i++)
                good = good && rel_close(g[i], gs[i], 1e-12);
            if (!good && rank == 0)
                diag("%s: point %d jacobian %d: lp %.17g vs %.17g (%s)",
                     what, pt, jac, lp, lps, e.message);
            /* lp alone (grad NULL) */
            double lp2 = 0;
            rc = kiln_mpi_log_density(mm, jac, unc, &lp2, NULL, &e);
            good = good && rc == 0 && rel_close(lp2, lps, 1e-12);
            evals += 2;
        }
    }
    if (serve) {
        /* only rank 0 is here: its verdict alone, no collective check */
        ok(good, "%s: %d evaluations equal serial kiln_model_new's to "
           "1e-12 (ranks 1..%d serving)", what, evals, size - 1);
        return;
    }
    check(good, "%s: lp and gradient equal serial kiln_model_new's to "
          "1e-12 (%d evaluations, %d rank%s)", what, evals, size,
          size == 1 ? "" : "s");
}

/* kiln_mpi_model_new over MPI_COMM_WORLD, axis N, this timeout */
static int model_new(kiln_graph *g, const char *data, double timeout,
                     kiln_mpi_model **mm, kiln_err *e)
{
    kiln_mpi_options mo = {sizeof mo, "N", timeout, 0};
    kiln_options o = quiet_opt();
    *mm = NULL;
    return kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, data, &mo, &o, NULL,
                              mm, e);
}

/* 2 rows of data over the ranks (ranks without observations) with
 * options mo: the MPI model equals the serial one. */
static void two_rows(kiln_graph *g, const kiln_mpi_options *mo,
                     const char *what)
{
    kiln_options o = quiet_opt();
    kiln_err e = {0, ""};
    char *small = make_data(2, 0);
    kiln_model *serial = kiln_model_new(g, NULL, small, &o, NULL, &e);
    kiln_mpi_model *mm = NULL;
    int rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, small, mo, &o, NULL,
                                &mm, &e);
    check(rc == 0 && serial, "%s over %d ranks (%s)", what, size,
          rc ? e.message : "ok");
    if (rc == 0 && serial)
        compare(mm, serial, 0, what);
    kiln_mpi_model_free(mm);
    kiln_model_free(serial);
    free(small);
}

/* Write an f64 .npy file (version 1.0, C order).  0 or -1. */
static int write_npy(const char *path, int r, const int64_t *shape,
                     const double *v)
{
    char h[128], sh[64];
    if (r > 1)
        snprintf(sh, sizeof sh, "(%lld, %lld)", (long long)shape[0],
                 (long long)shape[1]);
    else
        snprintf(sh, sizeof sh, "(%lld,)", (long long)shape[0]);
    int l = snprintf(h, sizeof h, "{'descr': '<f8', 'fortran_order': False, "
                     "'shape': %s, }", sh);
    int total = 10 + l + 1, pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    unsigned short hl = (unsigned short)(l + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f);
    fputc(hl >> 8, f);
    fwrite(h, 1, (size_t)l, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    size_t n = (size_t)shape[0] * (size_t)(r > 1 ? shape[1] : 1);
    int bad = fwrite(v, sizeof *v, n, f) != n;
    return fclose(f) || bad ? -1 : 0;
}

/* The model with `n` rows of X (n x 3) and y bound in the graph from
 * .npy files in `dir` (the LCG of make_data), the axis N declared.  NULL
 * with a diagnostic when a file cannot be written. */
static kiln_graph *bound_model(const char *dir, int n)
{
    double *x = malloc(sizeof *x * (size_t)(3 * n + 1));
    double *y = malloc(sizeof *y * (size_t)(n + 1));
    unsigned long long st = 777;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < 3; j++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            x[3 * i + j] = (double)(st >> 11) / 9007199254740992.0 - 0.5;
        }
        y[i] = 0.3 + x[3 * i] - 0.5 * x[3 * i + 1] + 0.25 * x[3 * i + 2];
    }
    char px[512], py[512];
    snprintf(px, sizeof px, "%s/X%d.npy", dir, n);
    snprintf(py, sizeof py, "%s/y%d.npy", dir, n);
    int64_t sx[2] = {n, 3}, sy[1] = {n};
    int bad = rank == 0 && (write_npy(px, 2, sx, x) || write_npy(py, 1, sy, y));
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(x);
    free(y);
    if (bad) {
        diag("cannot write %s", px);
        return NULL;
    }
    char text[2048];
    snprintf(text, sizeof text,
             "kiln 1\n"
             "graph linreg_bound\n"
             "  shared X: f64[N, K] = npy(\"X%d.npy\")\n"
             "  shared y: f64[N] = npy(\"y%d.npy\")\n"
             "  partition N\n"
             "  param alpha: f64\n"
             "  param beta: f64[K]\n"
             "  param sigma: f64 lower=0\n"
             "  mu = add(alpha, dot(X, beta))\n"
             "  lp_prior = add(add(normal_lpdf(alpha, 0, 2), "
             "normal_lpdf(beta, 0, 2)), normal_lpdf(sigma, 0, 1))\n"
             "  output logp = add(lp_prior, normal_lpdf(y, mu, sigma))\n"
             "end\n", n, n);
    kiln_err e = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "linreg_bound.kg", dir, &e);
    if (!g)
        diag("bound model: %s", e.message);
    return g;
}

/* Blocks of rows per rank (kiln_mpi_options.blocks, <kiln/model.h>
 * "Blocks"): every block count, with JSON data and with data bound in the
 * graph, equals the serial model; the blocks cover the rank's rows. */
static void test_blocks(kiln_graph *g, const char *data, const char *dir)
{
    kiln_options o = quiet_opt();
    kiln_err e = {0, ""};
    kiln_graph *gb = bound_model(dir, 37);
    check(gb != NULL, "the model with X, y bound from .npy parses");
    kiln_model *sj = kiln_model_new(g, NULL, data, &o, NULL, &e);
    kiln_model *sb = gb ? kiln_model_new(gb, NULL, NULL, &o, NULL, &e) : NULL;
    check(sj && sb, "serial models (%s)", sj && sb ? "ok" : e.message);
    static const int counts[] = {1, 2, 3, 5, 50};
    for (size_t c = 0; sj && sb && c < sizeof counts / sizeof *counts; c++) {
        for (int bound = 0; bound < 2; bound++) {
            int B = counts[c];
            kiln_mpi_options mo = {sizeof mo, "N", 0, B};
            kiln_mpi_model *mm = NULL;
            unsigned long long c0 = (unsigned long long)kiln_compile_count();
            int rc = kiln_mpi_model_new(MPI_COMM_WORLD, bound ? gb : g, NULL,
                                        bound ? NULL : data, &mo, &o, NULL,
                                        &mm, &e);
            unsigned long long dc =
                (unsigned long long)kiln_compile_count() - c0;
            char what[128];
            snprintf(what, sizeof what, "%d block%s a rank, %s data", B,
                     B > 1 ? "s" : "", bound ? "graph-bound" : "JSON");
            check(rc == 0, "%s: kiln_mpi_model_new (%s)", what,
                  rc ? e.message : "ok");
            if (rc)
                continue;
            const kiln_model_blocks *mb = kiln_mpi_model_blocks(mm);
            int64_t t = -1, b = -1, en = -1;
            const char *ax = kiln_model_blocks_range(mb, &t, &b, &en);
            check(kiln_model_blocks_count(mb) == B && ax &&
                  strcmp(ax, "N") == 0 && t == 37 &&
                  b == (37 * (int64_t)rank + size - 1) / size &&
                  en == (37 * (int64_t)(rank + 1) + size - 1) / size,
                  "%s: %d blocks cover rows [ceil(37 r / R), "
                  "ceil(37 (r+1) / R))", what,
                  kiln_model_blocks_count(mb));
            /* the cache holds every kernel by now: blocks compile none */
            check(dc == 0, "%s: no compiles (%llu)", what, dc);
            compare(mm, bound ? sb : sj, 0, what);
            kiln_mpi_model_free(mm);
        }
    }
    /* fewer rows than blocks on every rank: 2 rows, 3 blocks a rank */
    kiln_mpi_options mo3 = {sizeof mo3, "N", 0, 3};
    two_rows(g, &mo3, "2 rows in 3 blocks a rank");
    kiln_mpi_model *mm = NULL;
    int rc;
    /* the struct without `blocks` (its size then) is accepted */
    kiln_mpi_options old = {offsetof(kiln_mpi_options, blocks), "N", 0, 99};
    rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, data, &old, &o, NULL,
                            &mm, &e);
    check(rc == 0 && kiln_model_blocks_count(kiln_mpi_model_blocks(mm)) ==
          (getenv("KILN_BLOCKS") ? atoi(getenv("KILN_BLOCKS")) : 1),
          "struct_size without blocks: accepted, blocks ignored (%s)",
          rc ? e.message : "ok");
    kiln_mpi_model_free(mm);
    mm = NULL;
    kiln_mpi_options neg = {sizeof neg, "N", 0, -2};
    rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, data, &neg, &o, NULL,
                            &mm, &e);
    check(rc == KILN_ERR_ARG && !mm && strstr(e.message, "blocks"),
          "blocks -2: KILN_ERR_ARG (%s)", e.message);
    /* automatic: graph-bound data over $KILN_BLOCK_BYTES; JSON: 1 */
    if (gb && !getenv("KILN_BLOCKS")) {
        /* 37 rows of X (3 f64) and y: 1184 bytes; 100-byte blocks */
        kiln_partition whole = {"N", 0, 1}, half = {"N", rank % 2, 2};
        setenv("KILN_BLOCK_BYTES", "100", 1);
        int a1 = kiln_model_blocks_auto(gb, NULL, &whole);
        int a2 = kiln_model_blocks_auto(gb, NULL, &half);
        int aj = kiln_model_blocks_auto(g, data, &whole);
        setenv("KILN_BLOCK_BYTES", "100000", 1);
        int big = kiln_model_blocks_auto(gb, NULL, &whole);
        unsetenv("KILN_BLOCK_BYTES");
        int dflt = kiln_model_blocks_auto(gb, NULL, &whole);
        check(a1 == 11 && a2 == 5 && aj == 1 && big == 1 && dflt == 1,
              "kiln_model_blocks_auto: 11 blocks of 100 bytes, 5 for half "
              "the rows, 1 for JSON, 1 under 2 blocks, 1 by default (%d %d "
              "%d %d %d)", a1, a2, aj, big, dflt);
        setenv("KILN_BLOCK_BYTES", "100", 1);
        kiln_mpi_options mo0 = {sizeof mo0, "N", 0, 0};
        /* kernels that tier up at run time: no automatic blocks */
        kiln_options tiered = o;
        tiered.backend = NULL;
        tiered.tiers = KILN_TIERS_POLICY;
        rc = kiln_mpi_model_new(MPI_COMM_WORLD, gb, NULL, NULL, &mo0,
                                &tiered, NULL, &mm, &e);
        const char *kb = getenv("KILN_BACKEND");
        check(rc == 0 && ((kb && *kb) ||
                          kiln_model_blocks_count(kiln_mpi_model_blocks(mm))
                          == 1),
              "automatic blocks with tiers on: 1 (%s)",
              rc ? e.message : "ok");
        kiln_mpi_model_free(mm);
        mm = NULL;
        /* an explicit backend: no tiers */
        kiln_options fixed = o;
        if (!fixed.backend)
            fixed.backend = "interp";
        rc = kiln_mpi_model_new(MPI_COMM_WORLD, gb, NULL, NULL, &mo0, &fixed,
                                NULL, &mm, &e);
        unsetenv("KILN_BLOCK_BYTES");
        int want = 1184 / size / 100;
        if (want < 2 || 37 / size < 2)
            want = 1;
        check(rc == 0 && kiln_model_blocks_count(kiln_mpi_model_blocks(mm))
              == want, "automatic blocks of 100 bytes over %d rank%s: %d "
              "(%s)", size, size > 1 ? "s" : "", want, rc ? e.message : "ok");
        if (rc == 0)
            compare(mm, sb, 0, "automatic blocks");
        kiln_mpi_model_free(mm);
        mm = NULL;
    } else {
        check(1, "kiln_model_blocks_auto # SKIP $KILN_BLOCKS set");
        check(1, "automatic blocks # SKIP $KILN_BLOCKS set");
        check(1, "automatic blocks with tiers on # SKIP $KILN_BLOCKS set");
    }
    /* a plain model in blocks (no MPI): equals kiln_model_new's */
    if (gb) {
        int good = 1;
        for (int B = 1; B <= 4; B += 3) {
            kiln_model_blocks *pb = kiln_model_blocks_new(gb, NULL, NULL,
                                                          NULL, B, &o, NULL,
                                                          &e);
            good = good && pb && kiln_model_blocks_count(pb) == B;
            double unc[5] = {0.1, -0.2, 0.3, 0.05, -0.1}, g1[5], g2[5];
            double l1 = 0, l2 = 0;
            good = good && pb && kiln_model_n_unc(sb) == 5 &&
                   kiln_model_blocks_log_density(pb, 1, unc, &l1, g1,
                                                 &e) == 0 &&
                   kiln_model_log_density(sb, 1, unc, &l2, g2, &e) == 0 &&
                   rel_close(l1, l2, 1e-12);
            for (int i = 0; good && i < 5; i++)
                good = rel_close(g1[i], g2[i], 1e-12);
            kiln_model_blocks_free(pb);
        }
        check(good, "kiln_model_blocks_new without a partition, 1 and 4 "
              "blocks: equal to kiln_model_new (%s)", e.message);
        kiln_model_blocks *pb = kiln_model_blocks_new(g, NULL, data, NULL,
                                                      3, &o, NULL, &e);
        check(!pb && e.code == KILN_ERR_ARG,
              "3 blocks of a model that declares no axis: refused (%s)",
              e.message);
        kiln_model_blocks_free(pb);
    }
    kiln_model_free(sj);
    kiln_model_free(sb);
    kiln_graph_free(gb);
}

static int hang_mode(kiln_graph *g, const char *data)
{
    kiln_mpi_model *mm = NULL;
    kiln_err e = {0, ""};
    if (model_new(g, data, 0, &mm, &e)) {
        if (rank == 0)
            printf("model: %s\n", e.message);
        return 1;
    }
    if (rank == 1)
        for (;;)
            sleep(1);
    double unc[8] = {0}, lp = 0;
    int rc = kiln_mpi_log_density(mm, 1, unc, &lp, NULL, &e);
    if (rank == 0) {
        printf("%s: %s\n", rc ? "failed" : "answered", e.message);
        fflush(stdout);
    }
    /* the job cannot go on: end it (what kiln run does) */
    MPI_Abort(MPI_COMM_WORLD, rc ? 7 : 1);
    return 1;
}

/* rank 1 passes MPI_COMM_NULL (the others cannot hear of it) */
static int nullcomm_mode(kiln_graph *g, const char *data)
{
    kiln_mpi_options mo = {sizeof mo, "N", 2, 0};
    kiln_options o = quiet_opt();
    kiln_mpi_model *mm = NULL;
    kiln_err e = {0, ""};
    int rc = kiln_mpi_model_new(rank == 1 ? MPI_COMM_NULL : MPI_COMM_WORLD,
                                g, NULL, data, &mo, &o, NULL, &mm, &e);
    /* rank 1 tells rank 0 its message on a communicator of its own */
    char msg[sizeof e.message] = "";
    if (rank == 1)
        MPI_Send(e.message, (int)sizeof e.message, MPI_CHAR, 0, 7,
                 MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Recv(msg, (int)sizeof msg, MPI_CHAR, 1, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        printf("rank 0: %d %s\nrank 1: %s\n", rc, e.message, msg);
        fflush(stdout);
    }
    /* the others' duplicate never completes: end the job */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Abort(MPI_COMM_WORLD, 7);
    return 1;
}

/* MPI_Finalize without kiln_mpi_model_free: on rank 0 alone (the others
 * serve) or on every rank (`all`) */
static int finalize_mode(kiln_graph *g, const char *data, int all)
{
    kiln_mpi_model *mm = NULL;
    kiln_err e = {0, ""};
    if (model_new(g, data, 20, &mm, &e)) {
        fprintf(stderr, "rank %d: model: %s\n", rank, e.message);
        MPI_Finalize();
        return 1;
    }
    double unc[8] = {0}, lp = 0;
    int rc = 0;
    if (rank == 0 || all) {
        rc = kiln_mpi_log_density(mm, 1, unc, &lp, NULL, &e);
        if (rc)
            fprintf(stderr, "rank %d: log density: %s\n", rank, e.message);
        MPI_Finalize();   /* no kiln_mpi_model_free */
        /* after MPI_Finalize: calls refused, free without MPI */
        int rc2 = kiln_mpi_log_density(mm, 1, unc, &lp, NULL, &e);
        if (rc2 != KILN_ERR_ARG || !strstr(e.message, "finalised")) {
            fprintf(stderr, "rank %d: after MPI_Finalize: %d %s\n", rank,
                    rc2, e.message);
            rc = 1;
        }
        kiln_mpi_model_free(mm);
        if (rank == 0)
            printf("finalized: %s\n", rc ? "failed" : "ok");
        return rc ? 1 : 0;
    }
    rc = kiln_mpi_serve(mm, &e);
    if (rc)
        fprintf(stderr, "rank %d: serve: %s\n", rank, e.message);
    kiln_mpi_model_free(mm);
    MPI_Finalize();
    return rc ? 1 : 0;
}

/* kiln_mpi_model_new with a bad argument on rank `bad` only (-1: every
 * rank): every rank fails at once with KILN_ERR_ARG; the bad rank's
 * message has `what`, the others' say that it failed (they waited for
 * it in MPI_Comm_dup forever) */
static void one_bad(kiln_graph *g, const char *data, int bad,
                    const kiln_mpi_options *mine, const char *env,
                    int null_out, const char *what, const char *label)
{
    kiln_mpi_options mo = {sizeof mo, "N", 0, 0};
    kiln_options o = quiet_opt();
    kiln_mpi_model *mm = NULL;
    kiln_err e = {0, ""};
    int me = bad < 0 || rank == bad;
    if (me && env)
        setenv("KILN_MPI_TIMEOUT", env, 1);
    int rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, data,
                                me && mine ? mine : &mo, &o, NULL,
                                me && null_out ? NULL : &mm, &e);
    if (env)
        unsetenv("KILN_MPI_TIMEOUT");
    char other[64];
    snprintf(other, sizeof other, "mpi: rank %d failed: ", bad < 0 ? 0 : bad);
    int good = rc == KILN_ERR_ARG && !mm && strstr(e.message, what) &&
               (me || strncmp(e.message, other, strlen(other)) == 0);
    check(good, "%s on %s: every rank fails at once (rank %d: %s)", label,
          bad < 0 ? "every rank" : "one rank", rank, e.message);
    if (mm)
        kiln_mpi_model_free(mm);
}

int main(int argc, char **argv)
{
    kiln_err e = {0, ""};
    kiln_graph *g = kiln_parse_string(model_text, "linreg.kg", NULL, &e);
    char *data = make_data(37, 0);
    kiln_options o = quiet_opt();
    kiln_mpi_options mo = {sizeof mo, "N", 0, 0};

    /* before MPI_Init: refused (every rank) */
    kiln_mpi_model *mm = NULL;
    int rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, data, &mo, &o, NULL,
                                &mm, &e);
    int not_init = rc == KILN_ERR_ARG && !mm &&
                   strstr(e.message, "MPI is not initialised") != NULL;
    char not_init_msg[1024];
    snprintf(not_init_msg, sizeof not_init_msg, "%s", e.message);

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != 0 && !freopen("/dev/null", "w", stdout))
        return 1;
    if (argc > 1 && strcmp(argv[1], "hang") == 0)
        return hang_mode(g, data);
    if (argc > 1 && strcmp(argv[1], "nullcomm") == 0)
        return nullcomm_mode(g, data);
    if (argc > 1 && strncmp(argv[1], "finalize", 8) == 0)
        return finalize_mode(g, data, strcmp(argv[1], "finalize2") == 0);

    check(g != NULL, "the model parses (%s)", g ? "" : e.message);
    check(not_init, "before MPI_Init: KILN_ERR_ARG \"%s\"", not_init_msg);

    /* 1. the whole data (37 rows over 1..4 ranks) */
    /* (first: its compile count is on an empty cache in test_mpi.sh) */
    rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, data, &mo, &o, NULL,
                            &mm, &e);
    check(rc == 0 && mm, "kiln_mpi_model_new over %d rank%s (%s)", size,
          size == 1 ? "" : "s", rc ? e.message : "ok");
    kiln_model *serial = kiln_model_new(g, NULL, data, &o, NULL, &e);
    check(serial != NULL, "serial kiln_model_new (%s)",
          serial ? "" : e.message);
    if (mm && serial) {
        int64_t total = -1, b = -1, en = -1;
        /* (the blocks' rows: $KILN_BLOCKS may split the part) */
        const char *ax = kiln_model_blocks_range(kiln_mpi_model_blocks(mm),
                                                 &total, &b, &en);
        /* expected: rank r's rows are [ceil(37 r / R), ceil(37 (r+1) / R)),
         * counted here by dealing the rows: row i goes to the first rank
         * r with 37 (r+1) > i R */
        int64_t want_b = -1, want_e = 0;
        for (int64_t i = 0; i < 37; i++) {
            int r = 0;
            while (37 * (int64_t)(r + 1) <= i * (int64_t)size)
                r++;
            if (r == rank) {
                if (want_b < 0)
                    want_b = i;
                want_e = i + 1;
            }
        }
        if (want_b < 0)
            want_b = want_e = 0;
        check(size == 1 || (ax && strcmp(ax, "N") == 0 && total == 37 &&
                            b == want_b && en == want_e),
              "each rank's rows are [ceil(37 r / R), ceil(37 (r+1) / R)) "
              "([%lld, %lld) want [%lld, %lld))", (long long)b,
              (long long)en, (long long)want_b, (long long)want_e);
        compare(mm, serial, 0, "37 rows");
        long long mine = -1, job = -1;
        kiln_mpi_model_compiles(mm, &mine, &job);
        if (rank == 0)
            printf("# compiles: job %lld, rank 0 %lld\n", job, mine);
        long long sum = mine;
        MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_LONG_LONG, MPI_SUM,
                      MPI_COMM_WORLD);
        check(job == sum, "kiln_mpi_model_compiles: the job's count is the "
              "sum of the ranks' (%lld)", job);
        kiln_mpi_model_free(mm);
        mm = NULL;
    }
    kiln_model_free(serial);

    /* 2. serve mode: rank 0 drives, the others serve */
    serial = kiln_model_new(g, NULL, data, &o, NULL, &e);
    rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, data, &mo, &o, NULL,
                            &mm, &e);
    check(rc == 0, "kiln_mpi_model_new for serve mode (%s)",
          rc ? e.message : "ok");
    if (rc == 0 && serial) {
        compare(mm, serial, 1, "serve mode");
        if (rank == 0) {
            rc = kiln_mpi_serve(mm, &e);
            ok(rc == KILN_ERR_ARG, "kiln_mpi_serve on rank 0: KILN_ERR_ARG "
               "(%s)", e.message);
        }
        kiln_mpi_model_free(mm);   /* rank 0: tells the servers to stop */
        mm = NULL;
        check(served, "every rank is past serve mode: the servers returned "
              "0 when rank 0 freed the model");
    }
    kiln_model_free(serial);

    /* 3. fewer rows than ranks: ranks with no observations */
    two_rows(g, &mo, "2 rows (ranks without observations)");

    /* 3b. sum(y) * log(p) at p = 0 with fewer rows than ranks: serial's
     * -inf (an empty part computed 0 * -inf = NaN: an attack's find),
     * and elsewhere serial's value; part 0 holds the prior and the one
     * row, the other parts nothing */
    {
        const char *t3 = "kiln 1\ngraph sumlog\n  shared y: f64[N]\n"
                         "  param a: f64\n  p = mul(a, a)\n"
                         "  output logp = add(normal_lpdf(a, 1, 2), "
                         "mul(sum(y), log(p)))\nend\n";
        const char *d3 = "{\"y\": [1.5]}";
        kiln_graph *g3 = kiln_parse_string(t3, "sumlog.kg", NULL, &e);
        kiln_model *s3 = g3 ? kiln_model_new(g3, NULL, d3, &o, NULL, &e)
                            : NULL;
        rc = s3 ? kiln_mpi_model_new(MPI_COMM_WORLD, g3, NULL, d3, &mo, &o,
                                     NULL, &mm, &e) : -1;
        check(rc == 0 && mm, "sum(y) * log(p), 1 row over %d rank%s (%s)",
              size, size > 1 ? "s" : "", rc ? e.message : "ok");
        double us[2] = {0, 0.4}, lp3 = 0, gr3 = 0, ls3 = 0, gs3 = 0;
        for (int k = 0; k < 2 && mm; k++) {
            /* (at a = 0 the gradient is inf * 0: lp alone) */
            int a = kiln_mpi_log_density(mm, 0, &us[k], &lp3,
                                         k ? &gr3 : NULL, &e);
            int b3 = kiln_model_log_density(s3, 0, &us[k], &ls3,
                                            k ? &gs3 : NULL, &e);
            if (k == 0)
                check(a == 0 && b3 == 0 && isinf(ls3) && ls3 < 0 &&
                      isinf(lp3) && lp3 < 0,
                      "sum(y) * log(p) at p = 0 over %d rank%s: serial's "
                      "-inf (got %g, serial %g)", size, size > 1 ? "s" : "",
                      lp3, ls3);
            else
                check(a == 0 && b3 == 0 && rel_close(lp3, ls3, 1e-12) &&
                      rel_close(gr3, gs3, 1e-12),
                      "sum(y) * log(p) at p = 0.16 over %d rank%s: "
                      "serial's lp and gradient (%.17g vs %.17g)", size,
                      size > 1 ? "s" : "", lp3, ls3);
        }
        kiln_mpi_model_free(mm);
        mm = NULL;
        kiln_model_free(s3);
        kiln_graph_free(g3);
    }

    /* 4. bad input */
    if (size > 1) {
        char *mine = make_data(37, rank == size - 1 ? 1.0 : 0.0);
        char want[128];
        snprintf(want, sizeof want, "ranks disagree on the data: rank %d "
                 "differs from rank 0", size - 1);
        rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, mine, &mo, &o,
                                NULL, &mm, &e);
        check(rc == KILN_ERR_ARG && !mm && strstr(e.message, want),
              "data that differ on rank %d: every rank fails: %s", size - 1,
              e.message);
        free(mine);
        /* a model that differs on rank 1 (another prior scale) */
        char *text = strdup(model_text);
        if (rank == 1)
            memcpy(strstr(text, "normal_lpdf(sigma, 0, 1)"),
                   "normal_lpdf(sigma, 0, 2)", 24);
        kiln_graph *g1 = kiln_parse_string(text, "linreg.kg", NULL, &e);
        rc = g1 ? kiln_mpi_model_new(MPI_COMM_WORLD, g1, NULL, data, &mo, &o,
                                     NULL, &mm, &e) : -1;
        check(rc == KILN_ERR_ARG && !mm &&
              strstr(e.message, "ranks disagree on the model: rank 1 "
                     "differs from rank 0"),
              "a model that differs on rank 1: every rank fails: %s",
              e.message);
        kiln_graph_free(g1);
        free(text);
        /* a value bound through the C API (not in the model's text) that
         * differs on the last rank: refused too (it was summed into a
         * wrong number: an attack's find); the same values: accepted */
        for (int differ = 1; differ >= 0; differ--) {
            double yv[5] = {0.5, -1.0, 2.0, 0.25, 1.5};
            if (differ && rank == size - 1)
                yv[3] = 0.26;
            kiln_graph *ga = kiln_graph_new("api", &e);
            int64_t N = ga ? kiln_graph_symbol(ga, "N") : 0;
            kiln_tensor yt = {.dtype = KILN_F64, .rank = 1, .shape = {5},
                              .data = yv};
            kiln_value y = ga ? kiln_graph_shared(ga, "y", KILN_F64, 1, &N,
                                                  &yt, &e) : -1;
            kiln_value mu = y < 0 ? -1
                : kiln_graph_param(ga, "mu", KILN_F64, 0, NULL, -INFINITY,
                                   -1, INFINITY, -1, &e);
            kiln_value one = mu < 0 ? -1
                : kiln_graph_literal(ga, 1, KILN_LIT_INT, &e);
            kiln_value in[3] = {y, mu, one};
            kiln_value lp = one < 0 ? -1
                : kiln_graph_op(ga, "normal_lpdf", 3, in, NULL, 0, &e);
            rc = lp < 0 || kiln_graph_output(ga, "logp", lp, &e) ? -1
                : kiln_mpi_model_new(MPI_COMM_WORLD, ga, NULL, NULL, &mo, &o,
                                     NULL, &mm, &e);
            if (differ)
                check(rc == KILN_ERR_ARG && !mm && strstr(e.message, want),
                      "C API: y bound by kiln_graph_shared differs on rank "
                      "%d: every rank fails: %s", size - 1, e.message);
            else
                check(rc == 0 && mm, "C API: y bound by kiln_graph_shared, "
                      "the same on every rank: accepted (%s)",
                      rc ? e.message : "ok");
            kiln_mpi_model_free(mm);
            mm = NULL;
            kiln_graph_free(ga);
        }
    } else {
        check(1, "data that differ on a rank # SKIP one rank");
        check(1, "a model that differs on a rank # SKIP one rank");
        check(1, "C API values that differ on a rank # SKIP one rank");
        check(1, "C API values the same on every rank # SKIP one rank");
    }
    /* an axis that is no symbol; a symbol that sizes a parameter */
    kiln_mpi_options bad = {sizeof bad, "Q", 0, 0};
    rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, data, &bad, &o, NULL,
                            &mm, &e);
    check(rc != 0 && !mm && strstr(e.message, "Q"),
          "axis Q (no such symbol): every rank fails: %s", e.message);
    bad.axis = "K";
    rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, data, &bad, &o, NULL,
                            &mm, &e);
    check(rc != 0 && !mm && strstr(e.message, "K"),
          "axis K (sizes parameter beta): every rank fails: %s", e.message);
    bad.axis = "N";
    bad.timeout_seconds = -1;
    rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, data, &bad, &o, NULL,
                            &mm, &e);
    check(rc == KILN_ERR_ARG && !mm, "a negative timeout: KILN_ERR_ARG (%s)",
          e.message);
    /* a bad argument on one rank (it returned at once while the others
     * waited in MPI_Comm_dup forever) */
    {
        int b = size - 1;
        kiln_mpi_options neg = {sizeof neg, "N", -1, 0};
        kiln_mpi_options tiny = {sizeof tiny, "N", 1e-9, 0};
        kiln_mpi_options big = {sizeof big + 8, "N", 0, 0};
        one_bad(g, data, b, &neg, NULL, 0, "timeout_seconds must be",
                "timeout_seconds -1");
        one_bad(g, data, b, &tiny, NULL, 0, "timeout_seconds must be",
                "timeout_seconds 1e-9");
        one_bad(g, data, b, &big, NULL, 0, "struct_size",
                "a wrong struct_size");
        one_bad(g, data, b, NULL, NULL, 1, "out is NULL", "out NULL");
        /* $KILN_MPI_TIMEOUT: garbage refused, naming it and its value */
        static const char *garbage[] = {"abc", "-5", "inf", "1e-9", "",
                                        "0.5", "300s"};
        for (int k = 0; k < 7; k++) {
            char what[64], label[64];
            snprintf(what, sizeof what, "KILN_MPI_TIMEOUT='%s'", garbage[k]);
            snprintf(label, sizeof label, "KILN_MPI_TIMEOUT='%s'",
                     garbage[k]);
            one_bad(g, data, -1, NULL, garbage[k], 0, what, label);
        }
        one_bad(g, data, b, NULL, "abc", 0, "KILN_MPI_TIMEOUT='abc'",
                "KILN_MPI_TIMEOUT='abc'");
        double t = 0, bt = 0;
        kiln_err te = {0, ""};
        setenv("KILN_MPI_TIMEOUT", "2.5", 1);
        int r1 = kiln_mpi_timeouts(0, &t, &bt, &te);
        int ok1 = r1 == 0 && t == 2.5 && bt == 3600;
        setenv("KILN_MPI_BUILD_TIMEOUT", "7", 1);
        r1 = kiln_mpi_timeouts(5000, &t, &bt, &te);
        ok1 = ok1 && r1 == 0 && t == 5000 && bt == 7;
        unsetenv("KILN_MPI_BUILD_TIMEOUT");
        r1 = kiln_mpi_timeouts(5000, &t, &bt, &te);
        ok1 = ok1 && r1 == 0 && t == 5000 && bt == 5000;
        setenv("KILN_MPI_BUILD_TIMEOUT", "inf", 1);
        r1 = kiln_mpi_timeouts(0, &t, &bt, &te);
        ok1 = ok1 && r1 == KILN_ERR_ARG &&
              strstr(te.message, "KILN_MPI_BUILD_TIMEOUT='inf'");
        unsetenv("KILN_MPI_BUILD_TIMEOUT");
        unsetenv("KILN_MPI_TIMEOUT");
        r1 = kiln_mpi_timeouts(0, &t, &bt, &te);
        ok1 = ok1 && r1 == 0 && t == 300 && bt == 3600;
        check(ok1, "kiln_mpi_timeouts: the variables, the defaults (300, "
              "3600, the larger of 3600 and the timeout), garbage refused");
    }
    /* a rank whose data file cannot be read: every rank fails, naming it */
    if (size > 1) {
        rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL,
                                rank == 1 ? "/nonexistent/d.json" : data,
                                &mo, &o, NULL, &mm, &e);
        check(rc != 0 && !mm && (rank == 1 || strstr(e.message, "rank 1")),
              "rank 1's data unreadable: every rank fails (%s)", e.message);
    } else {
        check(1, "a rank's data unreadable # SKIP one rank");
    }
    check(kiln_mpi_timeout(2.5) == 2.5 && kiln_mpi_timeout(0) > 0,
          "kiln_mpi_timeout");

    /* 5. blocks of rows (files for the graph-bound model: a directory
     *    every rank sees, made by rank 0) */
    char dir[256] = "/tmp/kiln-test-mpi-XXXXXX";
    int made = rank == 0 ? mkdtemp(dir) != NULL : 1;
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(&made, 1, MPI_INT, 0, MPI_COMM_WORLD);
    check(made, "a temporary directory %s", dir);
    if (made) {
        test_blocks(g, data, dir);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            char p[320];
            snprintf(p, sizeof p, "%s/X37.npy", dir);
            unlink(p);
            snprintf(p, sizeof p, "%s/y37.npy", dir);
            unlink(p);
            rmdir(dir);
        }
    }

    kiln_graph_free(g);
    free(data);
    int failed = tap_counts_get()->failed;
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        done_testing();
    MPI_Finalize();
    return failed ? 1 : 0;
}
