/*
 * bench_mpi.c — a model's log density and gradient summed over MPI ranks
 * through libkiln-mpi (<kiln/mpi.h>): time per gradient and cold start
 * (make bench-mpi, bench/mpi.py; docs/performance.md "MPI (issue 30)").
 *
 * usage: mpirun -np R bench_mpi MODEL.kg DATA [options]
 *        bench_mpi MODEL.kg DATA --serial [options]   (no MPI at all:
 *                                 kiln_model_blocks_new, one process)
 * DATA is a .json file, or "-" for none (data bound by the .kg itself).
 * options:
 *   --axis NAME     the observation axis (default: the model's `partition`)
 *   --seconds S     time gradients for about S seconds (default 2; 0: only
 *                   the cold start and one gradient)
 *   --out FILE      write the gradient point's lp and gradient (%.17g, one
 *                   a line) to FILE (rank 0)
 *   --tiers MODE    policy (default: tier 0 first, hot kernels tier up in
 *                   the background) or off (every kernel compiled with the
 *                   policy's rules' backend before the model is made:
 *                   kiln_options.tiers = KILN_TIERS_OFF)
 *   --backend NAME  every kernel with NAME (kiln_options.backend; no tiers)
 *   --blocks B      blocks of rows per rank (kiln_mpi_options.blocks; with
 *                   --serial, kiln_model_blocks_new's; default 0: automatic)
 *
 * Prints one line (rank 0):
 *   ranks=R blocks=B n_unc=D build_s=B first_s=F ms_per_grad=T rounds=K lp=LP
 *   cpu_build_s=C cpu_s=U compiles_build=B0 compiles=J misses=M writes=W
 * blocks: rank 0's blocks of rows; build_s: wall seconds from before parsing to the model built on every
 * rank (a barrier after kiln_mpi_model_new); first_s: to the first
 * gradient; ms_per_grad: the median over 7 rounds of the time of one
 * kiln_mpi_log_density with the gradient (broadcast of the point, each
 * rank's part, MPI_Iallreduce), measured on rank 0 after warm-up calls and
 * kiln_model_tier_wait on every part; cpu_build_s / cpu_s: process CPU
 * seconds (user + system, every thread) summed over the ranks, after the
 * build and at the end (after kiln_mpi_model_free); compiles_build: the
 * job's compiles during the build (kiln_mpi_model_compiles; serial:
 * kiln_compile_count after kiln_model_new); compiles: kiln_compile_count
 * summed over the ranks at the end (tier-ups during the timing included);
 * misses / writes: the
 * user cache's counters at the end (docs/cache.md: counted by every
 * process since the cache was made — give an empty cache to count one
 * job's compiles).
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"

#include <kiln/cache.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>
#include <kiln/model.h>
#include <kiln/mpi.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define ROUNDS 7

static double cpu_seconds(void)
{
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0)
        return 0;
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec +
           (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

static void cache_counts(uint64_t *misses, uint64_t *writes)
{
    kiln_err e;
    kiln_cache_stats st;
    *misses = *writes = 0;
    kiln_cache *c = kiln_cache_open(NULL, 0, &e);
    if (c && kiln_cache_get_stats(c, &st, &e) == 0) {
        *misses = st.misses;
        *writes = st.writes;
    }
    kiln_cache_close(c);
}

/* One evaluation, collective under MPI (every rank calls it). */
typedef struct runner {
    kiln_model_blocks *serial;
    kiln_mpi_model *mm;
} runner;

static int eval(runner *r, const double *x, double *lp, double *grad,
                kiln_err *e)
{
    if (r->serial)
        return kiln_model_blocks_log_density(r->serial, 1, x, lp, grad, e);
    return kiln_mpi_log_density(r->mm, 1, x, lp, grad, e);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_mpi MODEL.kg DATA|- [--serial] "
                        "[--axis NAME] [--seconds S] [--out FILE] "
                        "[--tiers policy|off] [--backend NAME]\n");
        return 2;
    }
    const char *model = argv[1], *data = strcmp(argv[2], "-") ? argv[2] : NULL;
    const char *axis = NULL, *out = NULL;
    double seconds = 2.0;
    int serial = 0, blocks = 0;
    kiln_options opt = {0};
    opt.struct_size = sizeof opt;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--serial") == 0)
            serial = 1;
        else if (strcmp(argv[i], "--blocks") == 0 && i + 1 < argc)
            blocks = atoi(argv[++i]);
        else if (strcmp(argv[i], "--axis") == 0 && i + 1 < argc)
            axis = argv[++i];
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
            opt.backend = argv[++i];
        else if (strcmp(argv[i], "--tiers") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "off") == 0 ||
                  strcmp(argv[i + 1], "policy") == 0))
            opt.tiers = strcmp(argv[++i], "off") == 0 ? KILN_TIERS_OFF
                                                       : KILN_TIERS_POLICY;
        else {
            fprintf(stderr, "bench_mpi: unexpected '%s'\n", argv[i]);
            return 2;
        }
    }
    int rank = 0, size = 1;
    if (!serial) {
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    kiln_err e;
    runner r = {0};
    double t0 = bench_now();
    /* under MPI with --axis: each rank reads only its rows of the npy()
     * data (kiln_read_options.part_*; docs/mpi.md) */
    kiln_read_options ro;
    memset(&ro, 0, sizeof ro);
    ro.struct_size = sizeof ro;
    if (!serial && axis) {
        ro.part_axis = axis;
        ro.part_index = rank;
        ro.part_nparts = size;
    }
    kiln_graph *g = kiln_parse_file_opts(model, &ro, &e);
    int rc = g ? 0 : 1;
    if (g && serial) {
        /* --axis: blocks along it (else the declared axis, if any) */
        kiln_partition whole = {axis, 0, 1};
        r.serial = kiln_model_blocks_new(g, NULL, data,
                                         axis && blocks != 1 ? &whole : NULL,
                                         blocks, &opt, NULL, &e);
        rc = r.serial ? 0 : 1;
    } else if (g) {
        kiln_mpi_options mo = {sizeof mo, axis, 0, blocks};
        rc = kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, data, &mo, &opt,
                                NULL, &r.mm, &e);
    }
    kiln_graph_free(g);
    if (rc != 0) {
        fprintf(stderr, "bench_mpi: rank %d: %s\n", rank, e.message);
        if (!serial)
            MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    if (!serial)
        MPI_Barrier(MPI_COMM_WORLD);
    double build = bench_now() - t0;
    double cpu_build = cpu_seconds();
    long long compiles_build = (long long)kiln_compile_count();
    if (!serial)
        kiln_mpi_model_compiles(r.mm, NULL, &compiles_build);
    const kiln_model_blocks *blk = serial ? r.serial
                                          : kiln_mpi_model_blocks(r.mm);
    kiln_model *part = kiln_model_blocks_model(blk, 0);
    int n = kiln_model_n_unc(part);
    double *x = malloc(sizeof *x * (size_t)(n ? n : 1));
    double *grad = malloc(sizeof *grad * (size_t)(n ? n : 1));
    if (!x || !grad) {
        fprintf(stderr, "bench_mpi: out of memory\n");
        return 1;
    }
    /* one deterministic point near the origin of the unconstrained space */
    for (int i = 0; i < n; i++)
        x[i] = 0.1 * sin(1.0 + i);
    double lp = 0;
    if (eval(&r, x, &lp, grad, &e) != 0) {
        fprintf(stderr, "bench_mpi: rank %d: %s\n", rank, e.message);
        if (!serial)
            MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    double first = bench_now() - t0;
    if (rank == 0 && out) {
        FILE *f = fopen(out, "w");
        if (!f) {
            fprintf(stderr, "bench_mpi: cannot write %s\n", out);
            return 1;
        }
        fprintf(f, "%.17g\n", lp);
        for (int i = 0; i < n; i++)
            fprintf(f, "%.17g\n", grad[i]);
        fclose(f);
    }
    double med = 0;
    long per_round = 0;
    if (seconds > 0) {
        /* warm up: the tier trigger sees calls; then every part's tier-1
         * code is in (each rank waits for its own) */
        double tw = bench_now();
        long calls = 0;
        int more = 1;
        while (more) {
            eval(&r, x, &lp, grad, &e);
            calls++;
            more = calls < 3 || bench_now() - tw < seconds / 4;
            if (!serial)   /* rank 0 decides for all: same call count */
                MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
        kiln_model_blocks_tier_wait(blk, 120.0);
        if (!serial)
            MPI_Barrier(MPI_COMM_WORLD);
        double a = bench_now();
        for (int i = 0; i < 3; i++)
            eval(&r, x, &lp, grad, &e);
        double per = (bench_now() - a) / 3;
        per_round = (long)(seconds / ROUNDS / (per > 1e-9 ? per : 1e-9));
        if (per_round < 3)
            per_round = 3;
        if (!serial)
            MPI_Bcast(&per_round, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        double t[ROUNDS];
        for (int k = 0; k < ROUNDS; k++) {
            a = bench_now();
            for (long i = 0; i < per_round; i++)
                if (eval(&r, x, &lp, grad, &e) != 0) {
                    fprintf(stderr, "bench_mpi: rank %d: %s\n", rank,
                            e.message);
                    if (!serial)
                        MPI_Abort(MPI_COMM_WORLD, 1);
                    return 1;
                }
            t[k] = (bench_now() - a) / (double)per_round * 1e3;
        }
        qsort(t, ROUNDS, sizeof t[0], bench_cmp_double);
        med = t[ROUNDS / 2];
    }
    int nblocks = kiln_model_blocks_count(blk);
    if (serial)
        kiln_model_blocks_free(r.serial);
    else
        kiln_mpi_model_free(r.mm);
    double cpu = cpu_seconds(), cpu_sum = cpu, cpu_build_sum = cpu_build;
    long long compiles = (long long)kiln_compile_count(), compiles_sum = compiles;
    if (!serial) {
        MPI_Reduce(&compiles, &compiles_sum, 1, MPI_LONG_LONG, MPI_SUM, 0,
                   MPI_COMM_WORLD);
        MPI_Reduce(&cpu, &cpu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&cpu_build, &cpu_build_sum, 1, MPI_DOUBLE, MPI_SUM, 0,
                   MPI_COMM_WORLD);
    }
    if (rank == 0) {
        uint64_t misses, writes;
        cache_counts(&misses, &writes);
        printf("ranks=%d blocks=%d n_unc=%d build_s=%.4f first_s=%.4f ms_per_grad=%.6f "
               "rounds=%ld lp=%.17g cpu_build_s=%.4f cpu_s=%.4f "
               "compiles_build=%lld compiles=%lld misses=%llu writes=%llu\n",
               serial ? 0 : size, nblocks, n, build, first, med, per_round, lp,
               cpu_build_sum, cpu_sum, compiles_build, compiles_sum,
               (unsigned long long)misses,
               (unsigned long long)writes);
    }
    free(x);
    free(grad);
    if (!serial)
        MPI_Finalize();
    return 0;
}
